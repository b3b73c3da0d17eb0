//! Completion webhooks.
//!
//! When a job or voice build finishes, the simulator POSTs (once per
//! completion) to the configured `webhook_url`:
//!
//! ```json
//! {"event": "job.completed", "kind": "stt", "id": "<uuid>", "status": "completed",
//!  "item": { ...the job's item exactly as GET returns it... }}
//! ```
//!
//! `event` is `job.completed` / `job.failed`, or `voice.build.completed` /
//! `voice.build.failed` for `kind: "voice"`. With a secret configured the
//! request carries `X-Provider-Signature: sha256=<hex HMAC-SHA256 of the raw
//! body>`. Connection errors are retried up to 3 times (50, 100, 200 ms
//! apart); any HTTP answer ends delivery. Each delivery is recorded for
//! `GET /__sim/webhooks`.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use crate::shared::Shared;

/// Header carrying the signature.
pub const SIGNATURE_HEADER: &str = "X-Provider-Signature";

/// `sha256=<hex HMAC-SHA256(secret, body)>`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// True when `signature` (`sha256=<hex>`) is the HMAC of `body` under `secret`.
pub fn verify(secret: &str, body: &[u8], signature: &str) -> bool {
    let Some(hex_sig) = signature.trim().strip_prefix("sha256=") else {
        return false;
    };
    let Ok(raw) = hex::decode(hex_sig) else {
        return false;
    };
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(body);
    mac.verify_slice(&raw).is_ok()
}

/// The webhook body for a finished job.
pub fn payload(event: &str, kind: &str, id: &str, status: &str, item: &Value) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"event": event, "kind": kind, "id": id, "status": status, "item": item}),
    )
    .expect("serializable")
}

/// Sends `body` to `url` in the background (signed when `secret` is set).
pub fn send(sh: &Arc<Shared>, url: String, secret: Option<String>, body: Vec<u8>) {
    let shared = sh.clone();
    sh.spawn(async move { deliver(shared, url, secret, body).await });
}

async fn deliver(sh: Arc<Shared>, url: String, secret: Option<String>, body: Vec<u8>) {
    let signature = secret.as_deref().map(|s| sign(s, &body));
    let mut attempts = 0u32;
    let outcome = loop {
        attempts += 1;
        let mut req = sh
            .client
            .post(&url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body.clone());
        if let Some(sig) = &signature {
            req = req.header(SIGNATURE_HEADER, sig);
        }
        match req.send().await {
            Ok(resp) => break Ok(resp.status().as_u16()),
            Err(e) if e.is_connect() && attempts <= 3 => {
                tokio::time::sleep(Duration::from_millis(25 << attempts)).await;
            }
            Err(e) => break Err(e.to_string()),
        }
    };
    match &outcome {
        Ok(status) => tracing::debug!(%url, status, attempts, "webhook delivered"),
        Err(error) => tracing::warn!(%url, %error, attempts, "webhook delivery failed"),
    }
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    sh.record_webhook(json!({
        "url": url,
        "event": parsed.get("event"),
        "kind": parsed.get("kind"),
        "id": parsed.get("id"),
        "signature": signature,
        "attempts": attempts,
        "status": outcome.as_ref().ok(),
        "error": outcome.as_ref().err(),
        "body": parsed,
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_and_verify() {
        // RFC 4231 test case 2.
        let sig = sign("Jefe", b"what do ya want for nothing?");
        assert_eq!(
            sig,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert!(verify("Jefe", b"what do ya want for nothing?", &sig));
        assert!(!verify("Jefe", b"tampered", &sig));
        assert!(!verify("other", b"what do ya want for nothing?", &sig));
    }
}
