//! The `webhook` mode (spec §6): notifications from the upstream provider.
//!
//! * **Signature** ([`gateway_base::signing`]): `X-Provider-Signature: sha256=<hex>`,
//!   HMAC-SHA256 of the raw body keyed by `PROVIDER_WEBHOOK_SECRET`, compared
//!   in constant time.
//!   Missing, malformed or wrong → 401 and nothing stored. With no secret
//!   configured, every event is refused with 503 and nothing is stored (an
//!   unverifiable event is never trusted; a warning is logged at start).
//! * **Size**: bodies over [`MAX_BODY`] → 413.
//! * **Stored whole**: every accepted event (raw body, event, kind, upstream
//!   id, received time, outcome) in `webhook_events`, keyed by the body's
//!   SHA-256: the same delivery twice is stored once and changes nothing the
//!   second time.
//! * **Effects**: a job event updates the matching job record and bills a
//!   completed job exactly once ([`crate::progress::observe`], the same path
//!   as a GET); a voice event records the voice's training status. An unknown job
//!   or malformed JSON with a valid signature is stored and answered 200, so
//!   the upstream does not retry forever.
//! * **Answer**: `{"received": true}`.

use http::StatusCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::ctx::{Ctx, Outcome};
use gateway_base::body;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::signing::{verify, SIGNATURE_HEADER};
use gateway_store::{Jobs, Owners, Record, WebhookEventRecord, Webhooks};

/// Largest webhook body accepted.
pub const MAX_BODY: usize = 1 << 20;
fn received() -> Outcome {
    Outcome::new(
        body::json(StatusCode::OK, &json!({ "received": true })),
        None,
    )
}

/// `webhook`.
pub async fn receive(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    // Without a secret nothing can be verified: refused (503, so that the
    // provider retries once the operator has set it), never trusted.
    let secret = ctx.gw.config.webhook_secret.clone().ok_or_else(|| {
        ApiError::Unavailable(
            "inbound webhooks are not configured: PROVIDER_WEBHOOK_SECRET is not set".into(),
        )
    })?;
    let signature = req
        .headers()
        .get(SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = crate::shape::read_limited(req.into_body(), MAX_BODY)
        .await
        .map_err(|e| match e {
            ApiError::PayloadTooLarge(_) => {
                ApiError::PayloadTooLarge(format!("webhook body is larger than {MAX_BODY} bytes"))
            }
            other => other,
        })?;
    verify(secret.as_bytes(), &body, signature.as_deref())
        .map_err(|m| ApiError::Unauthorized(m.into()))?;
    let body_sha256 = hex::encode(Sha256::digest(&body));
    let sha = body_sha256.clone();
    let seen = ctx
        .gw
        .store
        .blocking(move |store| store.webhook_event_seen(&sha))
        .await?;
    if seen {
        return Ok(received());
    }
    let mut event = WebhookEventRecord {
        body_sha256,
        body: body.to_vec(),
        event: None,
        kind: None,
        upstream_id: None,
        signed: true,
        outcome: "malformed".into(),
        received_at: gateway_store::now_rfc3339(),
    };
    let mut outcome = received();
    if let Ok(v) = serde_json::from_slice::<Value>(&body) {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        event.event = text("event");
        event.kind = text("kind");
        event.upstream_id =
            text("id").or_else(|| v.get("item").and_then(crate::shape::upstream_id));
        event.outcome = apply(
            ctx,
            &v,
            event.kind.as_deref(),
            event.upstream_id.as_deref(),
            &mut outcome,
        )
        .await?;
    }
    outcome.records.push(Record::WebhookEvent(event));
    Ok(outcome)
}

/// Applies one parsed event; returns what it did.
async fn apply(
    ctx: &mut Ctx,
    v: &Value,
    kind: Option<&str>,
    id: Option<&str>,
    outcome: &mut Outcome,
) -> Result<String, ApiError> {
    let (Some(kind), Some(id)) = (kind, id) else {
        return Ok("unrecognised".into());
    };
    let item = v.get("item").cloned().unwrap_or_else(|| v.clone());
    if kind == "voice" {
        let status = match v
            .get("status")
            .and_then(Value::as_str)
            .or(item.get("status").and_then(Value::as_str))
        {
            Some("completed" | "ready" | "succeeded") => "ready",
            Some("failed" | "error") => "failed",
            Some(other) => other,
            None => "unknown",
        }
        .to_owned();
        let vid = id.to_owned();
        let known = ctx
            .gw
            .store
            .blocking(move |store| store.resource_owner("voice", &vid))
            .await?
            .is_some();
        if !known {
            return Ok("unknown_voice".into());
        }
        outcome.records.push(Record::OwnerStatus {
            kind: "voice".into(),
            upstream_id: id.to_owned(),
            status,
            at: gateway_store::now_rfc3339(),
        });
        return Ok("voice_updated".into());
    }
    let (k, i) = (kind.to_owned(), id.to_owned());
    let job = ctx
        .gw
        .store
        .blocking(move |store| store.job_by_upstream(&k, &i))
        .await?;
    let Some(job) = job else {
        return Ok("unknown_job".into());
    };
    let Some(job_kind) = ctx.gw.table.job_kind(&job.kind) else {
        return Ok("unknown_job".into());
    };
    // The same progress as a GET: billed once, called back once, recorded on a change.
    crate::progress::observe(job_kind, &job, &item).apply(ctx, outcome);
    Ok("job_updated".into())
}
