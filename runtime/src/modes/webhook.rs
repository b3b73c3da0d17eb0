//! The `webhook` mode (spec §6): notifications from the upstream provider.
//!
//! * **Signature**: `X-Provider-Signature: sha256=<hex>`, HMAC-SHA256 of the
//!   raw body keyed by `PROVIDER_WEBHOOK_SECRET`, compared in constant time.
//!   Missing, malformed or wrong → 401 and nothing stored. With no secret
//!   configured, events are accepted unsigned (a warning is logged at start).
//! * **Size**: bodies over [`MAX_BODY`] → 413.
//! * **Stored whole**: every accepted event (raw body, event, kind, upstream
//!   id, received time, outcome) in `webhook_events`, keyed by the body's
//!   SHA-256: the same delivery twice is stored once and changes nothing the
//!   second time.
//! * **Effects**: a job event updates the matching job record and bills a
//!   completed job exactly once ([`crate::jobs::complete`], the same path as a
//!   GET); a voice event records the voice's training status. An unknown job
//!   or malformed JSON with a valid signature is stored and answered 200, so
//!   the upstream does not retry forever.
//! * **Answer**: `{"received": true}`.

use hmac::{Hmac, Mac};
use http::StatusCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::errors::ApiError;
use crate::forward::json_response;
use crate::pipeline::{Ctx, Deferred, Outcome};
use crate::router::Request;
use crate::spec::Mode;
use crate::store::{Record, WebhookEventRecord};

/// Largest webhook body accepted.
pub const MAX_BODY: usize = 1 << 20;
/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-provider-signature";

/// `sha256=<hex>` of `body` keyed by `secret` (what senders put in the header).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Verifies a signature header value in constant time.
pub fn verify(secret: &[u8], body: &[u8], header: Option<&str>) -> Result<(), &'static str> {
    let header = header.ok_or("missing X-Provider-Signature")?;
    let hex_sig = header
        .trim()
        .strip_prefix("sha256=")
        .ok_or("malformed X-Provider-Signature: expected sha256=<hex>")?;
    let sig = hex::decode(hex_sig).map_err(|_| "malformed X-Provider-Signature: not hex")?;
    if sig.len() != 32 {
        return Err("malformed X-Provider-Signature: wrong length");
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    mac.verify_slice(&sig)
        .map_err(|_| "invalid X-Provider-Signature")
}

fn received() -> Outcome {
    Outcome::new(
        json_response(StatusCode::OK, &json!({ "received": true })),
        None,
    )
}

/// `webhook`.
pub async fn receive(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
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
    let signed = match &ctx.gw.config.webhook_secret {
        Some(secret) => {
            verify(secret.as_bytes(), &body, signature.as_deref())
                .map_err(|m| ApiError::Unauthorized(m.into()))?;
            true
        }
        None => false,
    };
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
        signed,
        outcome: "malformed".into(),
        received_at: crate::store::now_rfc3339(),
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
            at: crate::store::now_rfc3339(),
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
    // The GET row of this job kind says where its result is (edit answers without a status).
    let get_row = ctx
        .gw
        .routes
        .iter()
        .find(|r| r.mode == Mode::JobGet && r.job == Some(kind));
    let mirror = get_row.and_then(|r| r.mirror);
    let (update, metered) =
        crate::jobs::complete(&job, ctx.gw.route_by_id(&job.submit_route), &item, mirror);
    let finished = update.status == crate::jobs::status::COMPLETED
        || update.status == crate::jobs::status::FAILED;
    if let Some(m) = metered {
        ctx.meter(m);
    }
    if finished {
        if let Some(uri) = job.callback_uri.clone() {
            outcome.deferred.push(Deferred::Callback {
                kind: job.kind.clone(),
                job_id: job.job_id.clone(),
                user_id: job.user_id,
                uri,
                body: crate::jobs::answer_for(&job, &item, &update.status),
            });
        }
    }
    outcome.records.push(Record::JobUpdate(update));
    Ok("job_updated".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures() {
        let body = br#"{"event":"job.completed"}"#;
        let good = sign(b"secret", body);
        assert!(verify(b"secret", body, Some(&good)).is_ok());
        assert_eq!(
            verify(b"other", body, Some(&good)),
            Err("invalid X-Provider-Signature")
        );
        assert_eq!(
            verify(b"secret", body, None),
            Err("missing X-Provider-Signature")
        );
        assert!(
            verify(b"secret", body, Some(&good[..good.len() - 2])).is_err(),
            "truncated"
        );
        assert!(
            verify(b"secret", body, Some(good.trim_start_matches("sha256="))).is_err(),
            "no scheme"
        );
        assert!(verify(b"secret", b"{}", Some(&good)).is_err(), "other body");
    }
}
