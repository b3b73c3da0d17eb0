//! The request context: what one request carries through the phases, and
//! what a mode hands back.
//!
//! Defined apart from the driver ([`crate::pipeline`]) and the modes
//! ([`crate::modes`]) so that both depend on it and neither on the other
//! (pingora's split of the per-request context from the proxy loop).

use std::time::Instant;

use rand::RngCore;

use crate::services::Gateway;
use gateway_base::billing::Charge;
use gateway_base::body::Response;
use gateway_base::errors::ApiError;
use gateway_base::spec::{self, EndpointSpec, JobKind};
use gateway_store::{Record, User};

/// `res_` + 24 hex characters: the id of every request (spec §2's
/// `request_id`). Time-ordered, like a UUIDv7 or a ULID: the first 12 hex
/// digits are the milliseconds since the Unix epoch, the last 12 are
/// random (48 bits: ids made in the same millisecond, on any instance,
/// collide with odds of about n²/2⁴⁹). Ordered ids are inserted at the
/// right edge of the indexes keyed by request id (`usage_by_request`,
/// `model_usage_by_request`, `credit_holds`' key), so a group commit
/// dirties a page or two of each, not a page per request: random ids made
/// those indexes most of the pages each commit wrote to the WAL and each
/// checkpoint copied back (#29). Only that cost relies on the order (a
/// clock stepped back makes ids unordered, not wrong). An id is a name,
/// not a secret: nothing is reached by knowing one without the owner's
/// credentials.
pub fn new_request_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut b = [0u8; 12];
    b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    rand::thread_rng().fill_bytes(&mut b[6..]);
    format!("res_{}", hex::encode(b))
}

/// The billed quantity of a request, decided by its mode.
#[derive(Debug, Clone)]
pub struct Metered {
    /// Price-key product (`tts`, `watermark_apply`, ...).
    pub product: String,
    /// Billing unit (`audio_seconds`, ...).
    pub unit: &'static str,
    pub quantity: rust_decimal::Decimal,
    /// At most one charge per key (a job, a voice's first build).
    pub once_key: Option<String>,
    /// Whose credit is charged, when not the caller (inbound webhooks).
    pub user_id: Option<i64>,
    /// The route the charge belongs to, when not this one (a job's submit route).
    pub route_id: Option<&'static str>,
    pub capability: Option<&'static str>,
    /// With `user_id`: the budgeted key whose spend the charge counts in
    /// (a job's, the key it was submitted with). Without: the caller's.
    pub key_id: Option<i64>,
}

/// What a request carries through the phases.
pub struct Ctx {
    pub spec: &'static EndpointSpec,
    pub gw: Gateway,
    pub request_id: String,
    /// The authenticated caller (`None` on unauthenticated rows).
    pub user: Option<User>,
    pub started: Instant,
    /// Decoded query parameters, in order.
    pub query: Vec<(String, String)>,
    /// What this request bills (set by the mode through [`Ctx::meter`]);
    /// `None` writes a usage record with quantity 0.
    pub metered: Option<(Metered, Charge)>,
    /// The request's span ([`gateway_base::traces`]): nothing when traces are off.
    pub trace: gateway_base::traces::Span,
    /// A batch's line run as this request ([`crate::batches`]): its
    /// once-key (`batch_…#n`). Priced at the batch price and charged once.
    pub line: Option<String>,
    /// The catalogue the request started with (a reload in between changes
    /// nothing of it: its prices, holds and deployments).
    pub catalogue: std::sync::Arc<gateway_models::providers::Providers>,
}

/// What the phases below a driver are handed of a request: who it is for,
/// which route, since when, its span, and the gateway. The context itself
/// ([`Ctx`]) stays with its driver (the pipeline, the model call), so that
/// a request's path runs down through the files that serve it and never
/// back up (`ARCHITECTURE.md`, "the model call").
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    pub gw: &'a Gateway,
    /// The authenticated caller (`None` on unauthenticated rows).
    pub user: Option<&'a User>,
    pub request_id: &'a str,
    /// The row's id and capability (what a usage record names).
    pub route_id: &'static str,
    pub capability: &'static str,
    pub started: Instant,
    pub trace: &'a gateway_base::traces::Span,
    /// A batch line's once-key ([`Ctx::line`]).
    pub line: Option<&'a str>,
    /// The request's catalogue ([`Ctx::catalogue`]).
    pub catalogue: &'a gateway_models::providers::Providers,
}

impl Caller<'_> {
    /// The caller's id (authenticated rows).
    pub fn user_id(&self) -> Option<i64> {
        self.user.map(|u| u.id)
    }

    /// The caller's id where there must be one; `what` names the operation
    /// in the internal error a misconfigured row would get.
    pub fn require_user(&self, what: &str) -> Result<i64, ApiError> {
        self.user_id()
            .ok_or_else(|| ApiError::bug(format!("{what} without a user")))
    }

    /// The budgeted key the request came with, if any.
    pub fn budget_key(&self) -> Option<i64> {
        self.user.and_then(|u| u.budget_key)
    }
}

impl Ctx {
    /// What the phases below the driver are handed ([`Caller`]).
    pub fn caller(&self) -> Caller<'_> {
        Caller {
            gw: &self.gw,
            user: self.user.as_ref(),
            request_id: &self.request_id,
            route_id: self.spec.id,
            capability: self.spec.capability,
            started: self.started,
            trace: &self.trace,
            line: self.line.as_deref(),
            catalogue: &self.catalogue,
        }
    }

    /// The caller's id (authenticated rows).
    pub fn user_id(&self) -> Option<i64> {
        self.user.as_ref().map(|u| u.id)
    }

    /// The caller's id on a row that has one (every `bearer` row); `what`
    /// names the operation in the internal error a misconfigured row would get.
    pub fn require_user(&self, what: &str) -> Result<i64, ApiError> {
        self.user_id()
            .ok_or_else(|| ApiError::bug(format!("{what} without a user")))
    }

    /// The row's upstream call (the generator refuses forwarding modes without one).
    pub fn upstream(&self) -> Result<&'static spec::Upstream, ApiError> {
        self.spec
            .upstream
            .as_ref()
            .ok_or_else(|| ApiError::bug(format!("row {} has no upstream", self.spec.id)))
    }

    /// The row's job kind (job modes).
    pub fn job_kind(&self) -> Result<&'static JobKind, ApiError> {
        self.spec
            .job
            .and_then(|kind| self.gw.table.job_kind(kind))
            .ok_or_else(|| ApiError::bug(format!("row {} has no job kind", self.spec.id)))
    }

    /// Records what this request bills and returns its charge (for answers
    /// that show it, like synthesis's `billing`).
    pub fn meter(&mut self, m: Metered) -> Charge {
        let charge = charge_of(&self.gw, &m);
        self.metered = Some((m, charge.clone()));
        charge
    }

    /// Meters `quantity` of the row's own product and unit (once per
    /// `once_key` when given).
    pub fn meter_row(
        &mut self,
        quantity: rust_decimal::Decimal,
        once_key: Option<String>,
    ) -> Charge {
        let m = self.row_metered(quantity, once_key);
        self.meter(m)
    }

    /// What `quantity` of the row's own product and unit would be charged,
    /// metering nothing (a voice request's hold).
    pub fn row_charge(&self, quantity: rust_decimal::Decimal) -> Charge {
        charge_of(&self.gw, &self.row_metered(quantity, None))
    }

    fn row_metered(&self, quantity: rust_decimal::Decimal, once_key: Option<String>) -> Metered {
        Metered {
            product: self.product().to_owned(),
            unit: self.spec.billing.as_str(),
            quantity,
            once_key,
            user_id: None,
            route_id: None,
            capability: None,
            key_id: None,
        }
    }

    /// The price-key product of this row: the table's `[products]` entry
    /// of its billing unit (a voice subscription's, so a build and a
    /// promotion from a design share one price key), else its job kind,
    /// else its capability.
    pub fn product(&self) -> &'static str {
        self.gw.table.product_of(self.spec)
    }
}

/// The charge of `m` at the gateway's prices.
pub fn charge_of(gw: &Gateway, m: &Metered) -> Charge {
    gw.config
        .prices
        .charge(&format!("{}.{}", m.product, m.unit), m.quantity)
}

/// What a mode hands back: the answer, the upstream status it saw, any
/// records that must be committed with the audit record, how the request
/// settles, and work to start once the records are committed.
pub struct Outcome {
    pub response: Response,
    pub upstream_status: Option<u16>,
    pub records: Vec<Record>,
    pub deferred: Vec<Deferred>,
    /// Who writes the request's usage record, and when (the pipeline's
    /// record phase reads it; [`Settlement::ByPipeline`] unless the mode
    /// says otherwise).
    pub settlement: Settlement,
}

impl Outcome {
    /// An answer the pipeline settles ([`Settlement::ByPipeline`]).
    pub fn new(response: Response, upstream_status: Option<u16>) -> Outcome {
        Outcome {
            response,
            upstream_status,
            records: Vec::new(),
            deferred: Vec::new(),
            settlement: Settlement::ByPipeline,
        }
    }

    /// The same outcome, settled by `settlement`.
    pub fn settled(mut self, settlement: Settlement) -> Outcome {
        self.settlement = settlement;
        self
    }
}

/// How a successful request settles: who writes its usage record (and the
/// debit of its charge), and when. Every request's audit record is
/// committed by the pipeline's record phase, before the answer, whatever
/// its settlement; so are the mode's `records`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// The pipeline writes the usage record in its record phase: what the
    /// mode metered ([`Ctx::meter`], at the gateway's prices), or quantity
    /// 0 of the row's unit. The rows of the voice API are settled so.
    ByPipeline,
    /// The mode's `records` hold the request's usage record (a model
    /// request, priced per model: [`crate::money::Settle`], with the
    /// release of its hold); the pipeline commits them with the audit
    /// record and writes no usage record of its own.
    ByModeRecords,
    /// Settled after the answer: the pipeline writes no usage record.
    Later(Later),
}

/// What settles a request after its answer ([`Settlement::Later`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Later {
    /// A model stream: its end (finished, stopped, timed out or hung up)
    /// commits the usage record, the debit and the release of the hold
    /// ([`crate::relay`]), with the flush to disk. The records of the record
    /// phase, before the first byte, are committed without the flush
    /// ([`gateway_store::Store::commit_unflushed`]): that later commit
    /// covers them.
    Stream,
    /// A job (a video's): billed once, when it finishes, by whichever
    /// observer sees it finish first ([`crate::videos::observe`]), under a
    /// once-key; its hold is kept until then ([`crate::money::Hold::keep`]).
    /// The requests that submit, read, list or cancel such a job write no
    /// usage record of their own.
    Job,
    /// A live session (`101`): each of its turns commits its own records
    /// ([`crate::sessions::commit_turn`]); the upgrade writes none.
    Session,
}

impl Settlement {
    /// The pipeline writes the request's usage record.
    pub fn by_pipeline(self) -> bool {
        self == Settlement::ByPipeline
    }

    /// The record phase's commit must be on disk before the answer: every
    /// settlement but a stream's, whose end commits again with the flush.
    pub fn flush_record_phase(self) -> bool {
        self != Settlement::Later(Later::Stream)
    }
}

/// Work started in the background after a request's records are committed.
#[derive(Debug, Clone)]
pub enum Deferred {
    /// Deliver a finished job's record to the caller's `callback_uri`.
    Callback {
        kind: String,
        job_id: String,
        user_id: i64,
        uri: String,
        body: serde_json::Value,
    },
    /// A batch was made or cancelled: the executor looks at once
    /// ([`crate::batches`]).
    BatchStarted,
}

impl Deferred {
    /// Starts the work in the background; call it only after the records
    /// it follows are committed.
    pub fn start(self, gw: Gateway) {
        match self {
            Deferred::Callback {
                kind,
                job_id,
                user_id,
                uri,
                body,
            } => {
                tokio::spawn(tracing::Instrument::in_current_span(
                    crate::callbacks::deliver(gw, kind, job_id, user_id, uri, body),
                ));
            }
            Deferred::BatchStarted => gw.batch_wake.notify_one(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::new_request_id;

    #[test]
    fn request_ids_have_the_spec_form_and_sort_by_time() {
        let first = new_request_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let ids: Vec<String> = (0..1000).map(|_| new_request_id()).collect();
        for id in std::iter::once(&first).chain(&ids) {
            let hex = id.strip_prefix("res_").expect("res_ prefix");
            assert_eq!(hex.len(), 24, "{id}");
            assert!(
                hex.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                "{id}"
            );
        }
        // A later millisecond sorts after; the same millisecond differs.
        assert!(ids.iter().all(|id| id > &first));
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
        let ms = u64::from_str_radix(&first[4..16], 16).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(ms <= now && now - ms < 60_000, "{first}: {ms} vs {now}");
    }
}
