//! Anthropic's error shape, `{"type": "error", "error": {"type", "message"}}`,
//! and its error types by status. A leaf: the handlers, the stream (its
//! `error` event) and the injected-fault answers all use it.

use http::StatusCode;
use serde_json::{json, Value};

use crate::response::{json_response, Resp};

/// Anthropic's error type of a status.
pub fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        500.. => "api_error",
        _ => "invalid_request_error",
    }
}

/// `{"type": "error", "error": {"type", "message"}}`.
pub fn error_body(status: StatusCode, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

/// An error answer in Anthropic's shape.
pub(super) fn err(status: StatusCode, message: &str) -> Resp {
    json_response(status, &error_body(status, message))
}

/// A 400 `invalid_request_error` with this message.
pub(super) fn bad(message: &str) -> Resp {
    err(StatusCode::BAD_REQUEST, message)
}
