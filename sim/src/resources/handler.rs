//! What every handler group shares: the handlers' result type and the
//! duration of a new asynchronous job.

use crate::response::Resp;
use crate::shared::Shared;

/// Handler result: `Err` short-circuits with an error response.
pub(super) type R = Result<Resp, Resp>;

/// How long a new asynchronous job takes (the configured job duration).
pub(super) fn job_duration(sh: &Shared) -> std::time::Duration {
    sh.config.read().unwrap().job_duration
}
