//! Spec §7: what an upstream's failure becomes for the caller, and how its
//! message is read (bounded) and scrubbed of the upstream key.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::Value;

use super::client::{Failure, UpBody};
use super::failed::FailureKind;
use super::scrub::Key;

use gateway_base::errors::ApiError;
use gateway_base::spec::Base;

/// Largest upstream error body read to find its message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Who an upstream base is, in messages.
pub fn provider_name(base: Base) -> &'static str {
    match base {
        Base::Main | Base::Synth => "the voice provider",
        Base::Llm => "the model provider",
    }
}

/// What error mapping needs to know of a call: its base (for messages), the
/// time-out (for the time-out message) and the key (to scrub it). Carried by
/// every [`super::Call`] and [`super::Answer`], so that answers own no borrow.
#[derive(Clone)]
pub(crate) struct Mapping {
    pub base: Base,
    pub timeout: Duration,
    pub key: Option<Arc<Key>>,
    /// The key is the caller's own (BYOK): a 401/403 refuses the caller's
    /// key, not the gateway's, and is the caller's to fix (400).
    pub callers_key: bool,
}

impl Mapping {
    /// Maps a transport failure: always 502 "network error contacting ...".
    pub fn network_error(&self, e: &Failure) -> ApiError {
        let what = match e.kind() {
            FailureKind::Timeout => format!("timed out after {} s", self.timeout.as_secs_f64()),
            FailureKind::Connect => "connection failed".to_owned(),
            FailureKind::BodyBroken => "connection closed while reading the answer".to_owned(),
            _ => "connection error".to_owned(),
        };
        let who = provider_name(self.base);
        tracing::warn!(provider = who, error = %self.scrub(&e.to_string()), "upstream network error");
        ApiError::Network(format!("network error contacting {who}: {what}"))
    }

    /// Maps an upstream error status, reading (a bounded part of) its body:
    /// the caller's error, and the provider's message (scrubbed; the cause
    /// the logs and traces show).
    pub async fn error_from_response(&self, resp: http::Response<UpBody>) -> (ApiError, String) {
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let body = read_bounded(resp.into_body(), MAX_ERROR_BODY).await;
        let message = self.scrub(&upstream_message(&body).unwrap_or_default());
        tracing::info!(provider = provider_name(self.base), status = status.as_u16(), message = %message, "upstream error status");
        if self.callers_key && matches!(status.as_u16(), 401 | 403) {
            // Found by schemathesis: this was a 502 about the gateway's credentials.
            let error = ApiError::BadRequest(format!(
                "byok_api_key: {} refused it (status {})",
                provider_name(self.base),
                status.as_u16()
            ));
            return (error, message);
        }
        (
            map_status(self.base, status, retry_after, message.clone()),
            message,
        )
    }

    /// Removes the upstream key from a text.
    pub fn scrub(&self, s: &str) -> String {
        match &self.key {
            Some(k) => k.scrub_str(s),
            None => s.to_owned(),
        }
    }
}

/// Maps an upstream status to the gateway's error (spec §7).
pub fn map_status(
    base: Base,
    status: StatusCode,
    retry_after: Option<u64>,
    message: String,
) -> ApiError {
    let who = provider_name(base);
    let or = |m: String, fallback: String| if m.trim().is_empty() { fallback } else { m };
    match status.as_u16() {
        400 | 422 => ApiError::UpstreamRejected(or(message, format!("{who} rejected the request"))),
        404 => ApiError::UpstreamNotFound(or(message, "not found".to_owned())),
        413 => ApiError::PayloadTooLarge(or(
            message,
            format!("{who} refused the payload as too large"),
        )),
        429 => ApiError::UpstreamRateLimited {
            retry_after: retry_after.unwrap_or(1),
        },
        // Anthropic's `overloaded_error`: the provider is up but busy, as
        // a 503 says; the caller may retry.
        529 => ApiError::Unavailable(format!("{who} is overloaded (status 529); retry later")),
        401 | 403 => ApiError::BadGateway(format!(
            "{who} refused the gateway's credentials or plan (status {})",
            status.as_u16()
        )),
        s if s >= 500 => ApiError::BadGateway(format!("{who} failed (status {s})")),
        s => ApiError::BadGateway(format!("{who} answered an unexpected status {s}")),
    }
}

/// Reads at most `limit` bytes of a body.
pub async fn read_bounded(mut body: UpBody, limit: usize) -> Bytes {
    let mut buf = Vec::new();
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        let room = limit.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if buf.len() >= limit {
            break;
        }
    }
    Bytes::from(buf)
}

/// The human message of an upstream error body
/// (`{"message"}`, `{"error"}`, `{"errors": {"field": ["msg"]}}`, or text).
pub fn upstream_message(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        let t = text.trim();
        return (!t.is_empty()).then(|| t.chars().take(500).collect());
    };
    let mut parts = Vec::new();
    // Deepgram's `{"err_code", "err_msg"}`.
    for key in ["message", "error", "detail", "err_msg"] {
        // Anthropic's and Google's `{"error": {"message", ...}}`.
        let nested = v.get(key).and_then(|e| e.get("message"));
        if let Some(s) = v
            .get(key)
            .and_then(Value::as_str)
            .or(nested.and_then(Value::as_str))
        {
            if !s.is_empty() && !parts.iter().any(|p: &String| p == s) {
                parts.push(s.to_owned());
            }
        }
    }
    // ElevenLabs' (FastAPI's) validation errors: `{"detail": [{"loc":
    // ["body", "text"], "msg"}]}`, each as `field: message`.
    for e in v
        .get("detail")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let field = e
            .get("loc")
            .and_then(Value::as_array)
            .and_then(|l| l.last())
            .and_then(Value::as_str);
        if let (Some(field), Some(msg)) = (field, e.get("msg").and_then(Value::as_str)) {
            parts.push(format!("{field}: {msg}"));
        }
    }
    if let Some(errors) = v.get("errors").and_then(Value::as_object) {
        for (field, msgs) in errors {
            let msgs = match msgs {
                Value::Array(a) => a
                    .iter()
                    .map(|m| {
                        m.as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| m.to_string())
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            parts.push(format!("{field}: {msgs}"));
        }
    }
    if parts.is_empty() {
        return Some(v.to_string().chars().take(500).collect());
    }
    Some(parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::encode_segment;

    #[test]
    fn voice_vendors_messages() {
        assert_eq!(
            upstream_message(
                br#"{"detail":[{"loc":["body","text"],"msg":"Field required","type":"missing"}]}"#
            )
            .unwrap(),
            "text: Field required"
        );
        assert_eq!(
            upstream_message(br#"{"detail":{"status":"voice_not_found","message":"no voice"}}"#)
                .unwrap(),
            "no voice"
        );
        assert_eq!(
            upstream_message(
                br#"{"err_code":"Bad Request","err_msg":"bad model","request_id":"r"}"#
            )
            .unwrap(),
            "bad model"
        );
    }

    #[test]
    fn messages_from_upstream_bodies() {
        assert_eq!(
            upstream_message(br#"{"success":false,"message":"bad voice"}"#).unwrap(),
            "bad voice"
        );
        assert_eq!(
            upstream_message(
                br#"{"success":false,"message":"invalid","errors":{"name":["can't be blank"]}}"#
            )
            .unwrap(),
            "invalid; name: can't be blank"
        );
        assert_eq!(upstream_message(b"plain text").unwrap(), "plain text");
        assert_eq!(
            upstream_message(
                br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            )
            .unwrap(),
            "Overloaded"
        );
        assert_eq!(upstream_message(b""), None);
    }

    #[test]
    fn statuses_map_as_spec_7() {
        let m = |s: u16| {
            map_status(
                Base::Main,
                StatusCode::from_u16(s).unwrap(),
                Some(9),
                "why".into(),
            )
            .status()
            .as_u16()
        };
        assert_eq!(
            [
                m(400),
                m(422),
                m(401),
                m(403),
                m(500),
                m(503),
                m(429),
                m(529)
            ],
            [400, 400, 502, 502, 502, 502, 429, 503]
        );
        assert_eq!(
            map_status(
                Base::Main,
                StatusCode::TOO_MANY_REQUESTS,
                Some(9),
                String::new()
            ),
            ApiError::UpstreamRateLimited { retry_after: 9 }
        );
    }

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(encode_segment("a b/c?d"), "a%20b%2Fc%3Fd");
        assert_eq!(encode_segment("uuid-1_2.3~"), "uuid-1_2.3~");
    }
}
