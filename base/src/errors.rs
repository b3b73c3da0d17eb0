//! One error type, three wire formats (DESIGN.md).
//!
//! Every failure a handler can answer is an [`ApiError`]. The row's
//! [`ErrorFormat`] picks the body shape; the status code is decided by one
//! exhaustive `match` ([`ApiError::status`]). The message for the client is
//! kept apart from what is logged: upstream credentials are never part of
//! either (see [`gateway_adapters::upstream`] for how upstream messages are scrubbed).

use std::borrow::Cow;
use std::error::Error;
use std::sync::Arc;

use http::{header, HeaderValue, StatusCode};
use serde_json::json;

use crate::body;
use crate::body::Response;
use crate::spec::{ErrorFormat, Mode};

/// Everything that can go wrong in a request, by origin.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiError {
    // ---- downstream (the caller) ----
    /// No credentials, malformed or unknown key.
    Unauthorized(String),
    /// Disabled account, or admin privileges required.
    Forbidden(String),
    /// The request failed validation; the message names the field.
    BadRequest(String),
    /// A 400 with a machine-readable reason (format 1's `details.reason`).
    BadRequestReason {
        reason: &'static str,
        message: String,
    },
    /// Unknown route or resource.
    NotFound(String),
    /// The request conflicts with what exists (format 1's `conflict`, with
    /// its `details.reason`), e.g. registering an address that signs in
    /// with a provider.
    Conflict {
        reason: &'static str,
        message: String,
    },
    /// The route exists but not with this method; carries the allowed methods.
    MethodNotAllowed(&'static str),
    /// Body larger than the route accepts.
    PayloadTooLarge(String),
    /// The request body arrived too slowly (`GATEWAY_BODY_TIMEOUT_SECS`).
    RequestTimeout(String),
    /// Rate limit hit; carries whole seconds to wait (≥ 1).
    RateLimited { message: String, retry_after: u64 },
    /// Credit exhausted (general gateway only; the voice API meters).
    PaymentRequired(String),
    /// A request's maximum cost exceeds the caller's available credit
    /// (balance minus other requests' holds): 402, with both amounts in the
    /// `X-Credits-Available` and `X-Credits-Required` headers.
    InsufficientCredits {
        available: rust_decimal::Decimal,
        required: rust_decimal::Decimal,
    },
    /// A stream stayed idle past its time-out (`GATEWAY_STREAM_TIMEOUT_SECS`).
    GatewayTimeout(String),
    // ---- gateway ----
    /// A gate is closed or an integration is not configured.
    Unavailable(String),
    /// The database cannot be reached (down, restarting): 503 with
    /// `Retry-After`; nothing of the request was committed (see
    /// `store::Failure`). What failed is kept for the log.
    DatabaseUnavailable(Internal),
    /// The object store cannot take the request's object now (S3 refused,
    /// timed out or failed; the local disk is full): 503 with
    /// `Retry-After`; nothing of the request was committed or charged.
    /// What failed is kept for the log.
    StorageUnavailable(Internal),
    /// The route's mode is not implemented yet.
    NotImplemented(String),
    /// A bug or a local resource failure (database, object store): what
    /// was being done and, kept whole for the log, why it failed.
    Internal(Internal),
    // ---- upstream ----
    /// The upstream rejected the request's content (400/422); its message.
    UpstreamRejected(String),
    /// The upstream says the resource does not exist.
    UpstreamNotFound(String),
    /// The upstream rate-limited us; its `Retry-After` in seconds.
    UpstreamRateLimited { retry_after: u64 },
    /// Upstream authentication failed, 403, or 5xx.
    BadGateway(String),
    /// Network error, connection refused/reset, or time-out.
    Network(String),
    /// An outside service the answer needs (a sign-in provider) cannot be
    /// reached: 503 with `Retry-After` (whole seconds).
    Unreachable { message: String, retry_after: u64 },
}

/// An internal failure: what the gateway was doing (`context`) and the
/// error that stopped it (`source`, with its own chain of causes). Shown
/// whole only in the log, once, where the answer is made
/// ([`crate::pipeline`]); the caller reads "internal error".
#[derive(Debug, Clone)]
pub struct Internal {
    pub context: Cow<'static, str>,
    pub source: Option<Arc<dyn Error + Send + Sync>>,
    /// What the caller reads instead of "internal error" (spec §7 format
    /// 1's named 500s: "pricing calculation failed", "media retrieval
    /// failed"): [`ApiError::saying`].
    pub says: Option<&'static str>,
    /// Format 1's `details.reason` of this 500 ([`ApiError::in_mode`]).
    pub reason: Option<&'static str>,
}

impl std::fmt::Display for Internal {
    /// The context, then each cause in turn (`a: b: c`); a cause whose
    /// text its parent already printed is not repeated.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut text = self.context.to_string();
        let mut cause: Option<&(dyn Error + 'static)> = self.source.as_deref().map(|e| e as _);
        while let Some(e) = cause {
            let t = e.to_string();
            if !text.ends_with(&t) {
                if !text.is_empty() {
                    text.push_str(": ");
                }
                text.push_str(&t);
            }
            cause = e.source();
        }
        f.write_str(&text)
    }
}

impl PartialEq for Internal {
    fn eq(&self, other: &Internal) -> bool {
        self.to_string() == other.to_string()
    }
}

/// `Retry-After` of a 503 for an unreachable database, in seconds.
pub const DATABASE_RETRY_AFTER_SECS: u64 = 2;
/// `Retry-After` of a 503 for an object store that cannot store, in seconds.
pub const STORAGE_RETRY_AFTER_SECS: u64 = 5;

/// The range of `Retry-After` of every format-1 503 (spec §7: "retry after
/// a short delay (30 to 60 seconds suggested)"); a shorter one is raised to
/// its start.
pub const FORMAT1_RETRY_AFTER_SECS: (u64, u64) = (30, 60);

/// Format 1's `details.reason` of a 500 on any row without its own.
pub const SERVER_ERROR: &str = "server_error";

/// Format 1's `details.reason` of a 500 answered by a row of `mode` (spec
/// §7): `user_creation_failed` (register), `activation_failed` (e-mail
/// confirmation), `update_failed` (a password reset and every other
/// account update: keys, log-out, the admin's changes to a user),
/// `server_error` for everything else.
pub fn reason_of(mode: Mode) -> &'static str {
    match mode {
        Mode::Register => "user_creation_failed",
        Mode::ConfirmEmail => "activation_failed",
        Mode::ResetPassword
        | Mode::Logout
        | Mode::KeyCreate
        | Mode::KeyRevoke
        | Mode::KeyUpdate
        | Mode::AdminDisable
        | Mode::AdminEnable
        | Mode::AdminDelete
        | Mode::AdminCredits => "update_failed",
        _ => SERVER_ERROR,
    }
}

impl ApiError {
    /// A local failure while doing `context`, caused by `source`: 500, or
    /// 503 ([`ApiError::DatabaseUnavailable`]) when a database error in its
    /// chain of causes says the database could not be reached.
    pub fn internal(
        context: impl Into<Cow<'static, str>>,
        source: impl Into<Box<dyn Error + Send + Sync>>,
    ) -> ApiError {
        let source: Arc<dyn Error + Send + Sync> = Arc::from(source.into());
        let unavailable = crate::store_error::StoreError::unavailable_in(&*source);
        let internal = Internal {
            context: context.into(),
            source: Some(source),
            says: None,
            reason: None,
        };
        if unavailable {
            ApiError::DatabaseUnavailable(internal)
        } else {
            ApiError::Internal(internal)
        }
    }

    /// A state the code should never reach (no cause beyond `context`).
    pub fn bug(context: impl Into<Cow<'static, str>>) -> ApiError {
        ApiError::Internal(Internal {
            context: context.into(),
            source: None,
            says: None,
            reason: None,
        })
    }

    /// This 500 tells the caller `message` (a failure the spec names, e.g.
    /// "pricing calculation failed") instead of "internal error"; what
    /// failed stays in the log. Other errors are returned unchanged.
    pub fn saying(mut self, message: &'static str) -> ApiError {
        if let ApiError::Internal(i) = &mut self {
            i.says = Some(message);
        }
        self
    }

    /// A 500 answered by a row of `mode` carries format 1's
    /// `details.reason` of that mode ([`reason_of`]) unless it has one.
    pub fn in_mode(mut self, mode: Mode) -> ApiError {
        if let ApiError::Internal(i) = &mut self {
            i.reason.get_or_insert(reason_of(mode));
        }
        self
    }

    /// The status in `format`: spec §7 format 2 answers a provider failure
    /// (upstream 5xx, authentication, network) with 500, not 502.
    pub fn status_in(&self, format: ErrorFormat) -> StatusCode {
        match (self, format) {
            (ApiError::BadGateway(_) | ApiError::Network(_), ErrorFormat::Envelope) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            _ => self.status(),
        }
    }

    /// HTTP status of each error. Exhaustive on purpose: no `_ =>`.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::BadRequestReason { .. } => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RequestTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::PaymentRequired(_) | ApiError::InsufficientCredits { .. } => {
                StatusCode::PAYMENT_REQUIRED
            }
            ApiError::GatewayTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::Unavailable(_)
            | ApiError::DatabaseUnavailable(_)
            | ApiError::StorageUnavailable(_)
            | ApiError::Unreachable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::UpstreamRejected(_) => StatusCode::BAD_REQUEST,
            ApiError::UpstreamNotFound(_) => StatusCode::NOT_FOUND,
            ApiError::UpstreamRateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ApiError::Network(_) => StatusCode::BAD_GATEWAY,
        }
    }

    /// The message shown to the caller.
    pub fn message(&self) -> String {
        match self {
            ApiError::Unauthorized(m)
            | ApiError::Forbidden(m)
            | ApiError::BadRequest(m)
            | ApiError::NotFound(m)
            | ApiError::PayloadTooLarge(m)
            | ApiError::RequestTimeout(m)
            | ApiError::PaymentRequired(m)
            | ApiError::GatewayTimeout(m)
            | ApiError::Unavailable(m)
            | ApiError::NotImplemented(m)
            | ApiError::UpstreamRejected(m)
            | ApiError::UpstreamNotFound(m)
            | ApiError::BadGateway(m)
            | ApiError::Network(m) => m.clone(),
            ApiError::RateLimited { message, .. }
            | ApiError::BadRequestReason { message, .. }
            | ApiError::Conflict { message, .. }
            | ApiError::Unreachable { message, .. } => message.clone(),
            ApiError::InsufficientCredits { .. } => {
                "Insufficient credits for this request".to_owned()
            }
            ApiError::MethodNotAllowed(allowed) => {
                format!("method not allowed; allowed: {allowed}")
            }
            // Internal details go to the log, not to the caller.
            ApiError::Internal(i) => i.says.unwrap_or("internal error").to_owned(),
            ApiError::DatabaseUnavailable(_) => {
                "the database is unavailable; retry shortly".to_owned()
            }
            ApiError::StorageUnavailable(_) => {
                "the object store is unavailable; retry shortly".to_owned()
            }
            ApiError::UpstreamRateLimited { .. } => {
                "upstream rate limit hit; retry later".to_owned()
            }
        }
    }

    /// Machine-readable type for format 1 of an answer's status.
    fn kind_of(status: StatusCode) -> &'static str {
        match status.as_u16() {
            400 => "bad_request",
            401 => "unauthorized",
            402 => "payment_required",
            403 => "forbidden",
            404 => "not_found",
            405 => "method_not_allowed",
            409 => "conflict",
            408 => "request_timeout",
            413 => "payload_too_large",
            429 => "rate_limited",
            501 => "not_implemented",
            502 => "bad_gateway",
            503 => "service_unavailable",
            504 => "gateway_timeout",
            _ => "internal_server_error",
        }
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            ApiError::RateLimited { retry_after, .. }
            | ApiError::UpstreamRateLimited { retry_after }
            | ApiError::Unreachable { retry_after, .. } => Some((*retry_after).max(1)),
            ApiError::DatabaseUnavailable(_) => Some(DATABASE_RETRY_AFTER_SECS),
            ApiError::StorageUnavailable(_) => Some(STORAGE_RETRY_AFTER_SECS),
            _ => None,
        }
    }

    /// Format 1's `details`: the reason of a 400, a 409 or a 500, else `null`.
    fn details(&self) -> serde_json::Value {
        match self {
            ApiError::BadRequestReason { reason, .. } | ApiError::Conflict { reason, .. } => {
                json!({ "reason": reason })
            }
            ApiError::Internal(i) => json!({ "reason": i.reason.unwrap_or(SERVER_ERROR) }),
            _ => serde_json::Value::Null,
        }
    }

    /// The response in the row's wire format.
    pub fn into_response(self, format: ErrorFormat, request_id: &str) -> Response {
        let status = self.status_in(format);
        let message = self.message();
        let value = match format {
            ErrorFormat::Detail => json!({ "detail": message }),
            ErrorFormat::Error => json!({
                "error": Self::kind_of(status),
                "message": message,
                "status_code": status.as_u16(),
                "details": self.details(),
            }),
            ErrorFormat::Envelope => json!({
                "request_id": request_id,
                "success": false,
                "message": message,
                "data": "",
            }),
            ErrorFormat::Anthropic => anthropic_body(status, &message),
            ErrorFormat::Gemini => gemini_body(status, &message),
            ErrorFormat::OpenAi => json!({
                "request_id": request_id,
                "success": false,
                "message": message,
                "data": "",
                "error": openai_error(status, &message),
            }),
        };
        let mut resp = http::Response::new(body::full(value.to_string()));
        *resp.status_mut() = status;
        let headers = resp.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let retry_after = match (format, status) {
            // Spec §7 format 1: a 503 says to retry after 30 to 60 seconds.
            (ErrorFormat::Error, StatusCode::SERVICE_UNAVAILABLE) => Some(
                self.retry_after()
                    .unwrap_or(0)
                    .clamp(FORMAT1_RETRY_AFTER_SECS.0, FORMAT1_RETRY_AFTER_SECS.1),
            ),
            _ => self.retry_after(),
        };
        if let Some(secs) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let ApiError::InsufficientCredits {
            available,
            required,
        } = &self
        {
            for (name, v) in [
                ("x-credits-available", available),
                ("x-credits-required", required),
            ] {
                if let Ok(v) = HeaderValue::from_str(&crate::billing::format_money(*v)) {
                    headers.insert(name, v);
                }
            }
        }
        if let ApiError::MethodNotAllowed(allowed) = &self {
            headers.insert(header::ALLOW, HeaderValue::from_static(allowed));
        }
        resp
    }
}

/// Anthropic's error type of a status (its documented ones; a status it
/// does not name takes the nearest: 402 `billing_error`, 405/409
/// `invalid_request_error`, 408/504 `timeout_error`, 503/529
/// `overloaded_error`, other 5xx `api_error`).
pub fn anthropic_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        408 | 504 => "timeout_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// Anthropic's error body: `{"type":"error","error":{"type","message"}}`.
pub fn anthropic_body(status: StatusCode, message: &str) -> serde_json::Value {
    json!({"type": "error", "error": {"type": anthropic_type(status), "message": message}})
}

/// Google's status name of an HTTP status (`google.rpc.Code`'s; a status
/// it does not name takes the nearest: 402 `RESOURCE_EXHAUSTED`, 405
/// `INVALID_ARGUMENT`, 413 `INVALID_ARGUMENT`, 502 `UNAVAILABLE`).
pub fn gemini_status(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "UNAUTHENTICATED",
        402 | 429 => "RESOURCE_EXHAUSTED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        408 | 504 => "DEADLINE_EXCEEDED",
        409 => "ABORTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        502 | 503 => "UNAVAILABLE",
        400..=499 => "INVALID_ARGUMENT",
        _ => "INTERNAL",
    }
}

/// OpenAI's `error` object for an HTTP status: `{"message","type","param","code"}`
/// (the `type` its SDKs and docs use for the status: `invalid_request_error`
/// for a 400, 404 or 409, `authentication_error` 401, `permission_error`
/// 403, `insufficient_quota` 402, `rate_limit_error` 429, `server_error`
/// otherwise). `param` names the field of a 400 whose message starts with
/// a field path (`input[2].type: ...`).
pub fn openai_error(status: StatusCode, message: &str) -> serde_json::Value {
    let kind = match status.as_u16() {
        401 => "authentication_error",
        402 => "insufficient_quota",
        403 => "permission_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    };
    let param = (status == StatusCode::BAD_REQUEST)
        .then(|| message.split_once(": ").map(|(f, _)| f))
        .flatten()
        .filter(|f| !f.is_empty() && !f.contains(' '));
    json!({"message": message, "type": kind, "param": param, "code": null})
}

/// Google's error body: `{"error":{"code","message","status"}}`.
pub fn gemini_body(status: StatusCode, message: &str) -> serde_json::Value {
    json!({"error": {"code": status.as_u16(), "message": message, "status": gemini_status(status)}})
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Internal(m)
            | ApiError::DatabaseUnavailable(m)
            | ApiError::StorageUnavailable(m) => {
                write!(f, "{} internal: {m}", self.status().as_u16())
            }
            other => write!(f, "{} {}", other.status().as_u16(), other.message()),
        }
    }
}

impl Error for ApiError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ApiError::Internal(i)
            | ApiError::DatabaseUnavailable(i)
            | ApiError::StorageUnavailable(i) => i.source.as_deref().map(|e| e as _),
            _ => None,
        }
    }
}

/// A database failure answers 500 (503 when the database is unreachable);
/// its cause goes to the log only.
impl From<crate::store_error::StoreError> for ApiError {
    fn from(e: crate::store_error::StoreError) -> Self {
        ApiError::internal("", e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn render(e: ApiError, f: ErrorFormat) -> (u16, serde_json::Value, Option<String>) {
        let r = e.into_response(f, "res_0123");
        let status = r.status().as_u16();
        let ra = r
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let bytes = r.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap(), ra)
    }

    #[tokio::test]
    async fn three_wire_formats() {
        let (s, v, _) = render(
            ApiError::BadRequest("text: too long".into()),
            ErrorFormat::Detail,
        )
        .await;
        assert_eq!((s, v), (400, json!({"detail": "text: too long"})));
        let (s, v, _) = render(
            ApiError::PaymentRequired("Insufficient credits for this request".into()),
            ErrorFormat::Error,
        )
        .await;
        assert_eq!(s, 402);
        assert_eq!(
            v,
            json!({"error": "payment_required", "message": "Insufficient credits for this request", "status_code": 402, "details": null})
        );
        let (s, v, _) = render(
            ApiError::NotFound("model not found".into()),
            ErrorFormat::Envelope,
        )
        .await;
        assert_eq!(
            (s, v),
            (
                404,
                json!({"request_id": "res_0123", "success": false, "message": "model not found", "data": ""})
            )
        );
    }

    #[tokio::test]
    async fn retry_after_is_whole_seconds_at_least_one() {
        let (s, _, ra) = render(
            ApiError::UpstreamRateLimited { retry_after: 0 },
            ErrorFormat::Detail,
        )
        .await;
        assert_eq!((s, ra.as_deref()), (429, Some("1")));
        let (_, _, ra) = render(
            ApiError::RateLimited {
                message: "slow down".into(),
                retry_after: 7,
            },
            ErrorFormat::Detail,
        )
        .await;
        assert_eq!(ra.as_deref(), Some("7"));
    }

    #[tokio::test]
    async fn format1_names_its_500s_and_its_503s_wait_30_to_60_seconds() {
        let e = ApiError::bug("x").in_mode(Mode::Register);
        let (s, v, _) = render(e, ErrorFormat::Error).await;
        assert_eq!(s, 500);
        assert_eq!(v["details"], json!({"reason": "user_creation_failed"}));
        let e = ApiError::bug("x").saying("pricing calculation failed");
        let (_, v, _) = render(e.clone().in_mode(Mode::Chat), ErrorFormat::Error).await;
        assert_eq!(
            (&v["message"], &v["details"]),
            (
                &json!("pricing calculation failed"),
                &json!({"reason": "server_error"})
            )
        );
        let (_, v, _) = render(e, ErrorFormat::Detail).await;
        assert_eq!(v, json!({"detail": "pricing calculation failed"}));
        for e in [
            ApiError::Unavailable("payments down".into()),
            ApiError::DatabaseUnavailable(Internal {
                context: "db".into(),
                source: None,
                says: None,
                reason: None,
            }),
        ] {
            let (s, _, ra) = render(e.clone(), ErrorFormat::Error).await;
            assert_eq!((s, ra.as_deref()), (503, Some("30")));
            let (_, _, ra) = render(e, ErrorFormat::Envelope).await;
            assert_ne!(ra.as_deref(), Some("30"), "other formats keep theirs");
        }
        // Format 2: a provider failure is 500; the voice API keeps 502.
        for e in [
            ApiError::BadGateway("x".into()),
            ApiError::Network("y".into()),
        ] {
            assert_eq!(render(e.clone(), ErrorFormat::Envelope).await.0, 500);
            assert_eq!(render(e, ErrorFormat::Detail).await.0, 502);
        }
    }

    #[tokio::test]
    async fn internal_details_stay_out_of_the_body() {
        let e = ApiError::internal(
            "storing the upload",
            std::io::Error::other("disk /secret full"),
        );
        assert_eq!(
            e.to_string(),
            "500 internal: storing the upload: disk /secret full"
        );
        assert!(e.source().is_some(), "the cause is kept");
        let db = ApiError::from(crate::store_error::StoreError::caused(
            "reading a user",
            std::io::Error::other("disk gone"),
        ));
        assert_eq!(
            db.to_string(),
            "500 internal: database: reading a user: disk gone"
        );
        let (s, v, _) = render(e, ErrorFormat::Detail).await;
        assert_eq!((s, v), (500, json!({"detail": "internal error"})));
    }
}
