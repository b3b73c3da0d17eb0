//! Job callbacks: when a job submitted with `callback_uri` finishes, the
//! gateway POSTs the job's record (the JSON of `GET /<kind>/{job_id}`) to
//! that URI.
//!
//! * **Signed** with the spec's scheme, `X-Provider-Signature: sha256=<hex>`
//!   (HMAC-SHA256 of the body), keyed by the job owner's callback secret
//!   (`gateway users callback-secret --user ID` prints it).
//! * **Once**: the right to deliver is claimed in the job row, so however
//!   many GETs or webhooks see the job finish, one delivery runs.
//! * **Retried** with exponential backoff ([`BACKOFF`]) on a network error or
//!   a non-2xx answer; the final state (`delivered`, `failed`) and the number
//!   of attempts are recorded on the job.
//! * **No SSRF**: a URI whose host resolves to a loopback, private or
//!   link-local address is refused unless `GATEWAY_ALLOW_PRIVATE_FETCH` is on
//!   (tests); redirects are not followed; the connection is pinned to the
//!   checked address.

use std::time::Duration;

use gateway_store::Webhooks;
use serde_json::Value;

use crate::services::Gateway;

/// Delays before each retry (the first attempt is immediate).
pub const BACKOFF: &[Duration] = &[
    Duration::from_millis(200),
    Duration::from_secs(1),
    Duration::from_secs(5),
    Duration::from_secs(30),
    Duration::from_secs(120),
];
/// Time-out of one delivery attempt.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Delivers one job's callback (see the module docs). Runs in the background.
pub async fn deliver(
    gw: Gateway,
    kind: String,
    job_id: String,
    user_id: i64,
    uri: String,
    body: Value,
) {
    let (k, j) = (kind.clone(), job_id.clone());
    let claimed = gw
        .store
        .blocking(move |store| store.claim_callback(&k, &j))
        .await;
    if !matches!(claimed, Ok(true)) {
        return; // delivered (or being delivered) already
    }
    let secret = match gw
        .store
        .blocking(move |store| store.callback_secret(user_id))
        .await
    {
        Ok(Some(s)) => s,
        _ => {
            tracing::error!(job = %job_id, "callback: the job owner has no callback secret");
            finish(&gw, &kind, &job_id, "failed", 0).await;
            return;
        }
    };
    let payload = body.to_string();
    let signature = gateway_base::signing::sign(secret.as_bytes(), payload.as_bytes());
    let mut attempts = 0u32;
    let mut delays = std::iter::once(Duration::ZERO).chain(BACKOFF.iter().copied());
    let state = loop {
        let Some(delay) = delays.next() else {
            break "failed";
        };
        tokio::time::sleep(delay).await;
        attempts += 1;
        let signed = [(gateway_base::signing::SIGNATURE_HEADER, signature.clone())];
        match post(&gw, "callback_uri", &uri, &payload, &signed).await {
            Ok(()) => break "delivered",
            Err(Permanent(e)) => {
                tracing::warn!(job = %job_id, error = %e, "callback refused; not retried");
                break "failed";
            }
            Err(Retry(e)) => {
                tracing::info!(job = %job_id, attempt = attempts, error = %e, "callback attempt failed")
            }
        }
    };
    if state == "failed" {
        tracing::warn!(job = %job_id, attempts, "callback not delivered");
    }
    finish(&gw, &kind, &job_id, state, attempts).await;
}

/// Why a delivery failed: worth trying again, or not.
pub(crate) enum Failure {
    Retry(String),
    Permanent(String),
}
use Failure::{Permanent, Retry};

/// POSTs the JSON `payload` with `headers` to a caller's `uri` (the
/// field `what` named it), without SSRF (see the module docs): a
/// callback's attempt, or a spend alert's webhook.
pub(crate) async fn post(
    gw: &Gateway,
    what: &str,
    uri: &str,
    payload: &str,
    headers: &[(&str, String)],
) -> Result<(), Failure> {
    let (client, url) =
        crate::fetch::pinned_client(uri, gw.config.allow_private_fetch, ATTEMPT_TIMEOUT)
            .await
            .map_err(|r| match r {
                crate::fetch::Refusal::Unresolved => Retry(format!("{what} {}", r.describe())),
                other => Permanent(format!("{what} {}", other.describe())),
            })?;
    let mut request = client
        .post(url)
        .header(http::header::CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let resp = request
        .body(payload.to_owned())
        .send()
        .await
        .map_err(|e| Retry(e.without_url().to_string()))?;
    if resp.status().is_success() {
        Ok(())
    } else {
        Err(Retry(format!("status {}", resp.status().as_u16())))
    }
}

async fn finish(gw: &Gateway, kind: &str, job_id: &str, state: &'static str, attempts: u32) {
    let (k, j) = (kind.to_owned(), job_id.to_owned());
    if let Err(e) = gw
        .store
        .blocking(move |store| store.finish_callback(&k, &j, state, attempts))
        .await
    {
        tracing::error!(error = %e, "recording the callback's outcome failed");
    }
}
