//! Phase 5 of a model call, the attempt: the request sent through
//! [`gateway_models::routing`]'s loop, each candidate deployment in turn,
//! retried elsewhere while nothing has gone to the caller yet.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;

use crate::ctx::Caller;
use crate::money::{self, Settle};
use gateway_adapters::upstream::{ByteStream, Call, Failed, FailureKind};
use gateway_base::errors::ApiError;
use gateway_models::routing::Plan;

/// Time allowed to a whole streamed answer (idleness is bounded apart).
const STREAM_LIFETIME: Duration = Duration::from_secs(6 * 3600);

/// Sends `plan` through the routing loop: `attempt` sends one deployment's
/// call and reads up to the answer's first byte (what may be retried
/// elsewhere). `bill` becomes the serving deployment's. The answer, and
/// whether it is in the caller's own API ([`super::operation::Own`]).
pub(super) async fn run<T, F, Fut>(
    c: &Caller<'_>,
    plan: Plan,
    bill: &mut Settle,
    attempt: F,
) -> Result<(T, bool), ApiError>
where
    F: FnMut(Call) -> Fut,
    Fut: std::future::Future<Output = Result<T, Failed>>,
{
    let deadline = c.started + c.gw.config.upstream_timeout;
    let gw = c.gw;
    let route = plan.route.clone();
    let (v, served, attempts) = gw
        .routing
        .run(&gw.upstream, plan, deadline, c.trace, attempt)
        .await?;
    bill.provider = served.provider;
    bill.model = bill.priced(served.model);
    bill.bound = served.bound;
    bill.served = money::Served { attempts, route };
    Ok((v, served.own))
}

/// [`run`] of a JSON answer (`what` names it in errors), read whole inside
/// the attempt: nothing has gone to the caller yet, so an answer broken
/// off after its headers is retried elsewhere like a connect error. The
/// upstream's status and the answer, and whether the answer is in the
/// caller's own API; the span's serving attempt learns the status.
pub(super) async fn json(
    c: &Caller<'_>,
    plan: Plan,
    bill: &mut Settle,
    what: &str,
) -> Result<(u16, Value, bool), ApiError> {
    let ((status, v), own) = run(c, plan, bill, |call| read_json(call, what)).await?;
    c.trace.upstream_status(status);
    Ok((status, v, own))
}

/// One attempt of a JSON answer: sent, then read whole; a read that broke
/// off (the connection, the deadline) is retryable.
async fn read_json(call: Call, what: &str) -> Result<(u16, Value), Failed> {
    let answer = call.try_send().await?;
    let status = answer.status();
    match answer.json(what).await {
        Ok(v) => Ok((status, v)),
        Err(e @ ApiError::Network(_)) => {
            let kind = FailureKind::BodyBroken;
            gateway_base::telemetry::upstream_error(kind.as_str());
            Err(Failed::new(kind, e))
        }
        Err(e) => Err(Failed::new(FailureKind::InvalidAnswer(status), e)),
    }
}

/// One streamed attempt: the answer's headers and its first chunk, each
/// within the idle time-out `idle`; a failure before the first byte may be
/// retried elsewhere ([`gateway_models::routing`]).
pub(super) async fn first_byte(
    call: Call,
    idle: Duration,
) -> Result<(u16, ByteStream, Option<bytes::Bytes>), Failed> {
    let timed_out = || {
        Failed::new(
            FailureKind::Timeout,
            ApiError::GatewayTimeout(format!(
                "the model provider sent nothing for {} s",
                idle.as_secs()
            )),
        )
    };
    let answer = tokio::time::timeout(idle, call.timeout(STREAM_LIFETIME).try_send())
        .await
        .map_err(|_| timed_out())??;
    let status = answer.status();
    let mut upstream = answer.byte_stream();
    let first = match tokio::time::timeout(idle, upstream.next())
        .await
        .map_err(|_| timed_out())?
    {
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => {
            tracing::warn!(error = %e, "model stream failed before its first byte");
            return Err(Failed::new(FailureKind::BodyBroken, ApiError::Network(
                    "network error contacting the model provider: connection closed while reading the answer".into(),
                )));
        }
        None => None,
    };
    Ok((status, upstream, first))
}
