//! OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`,
//! and the request-reading helpers that answer in it. A leaf every `/v1`
//! handler uses.

use http::StatusCode;
use serde_json::{json, Map, Value};

use crate::request::Req;
use crate::response::{json_response, Resp};

/// `{"error": {"message", "type", "param", "code"}}`.
pub fn oai_error(
    status: StatusCode,
    message: &str,
    param: Option<&str>,
    code: Option<&str>,
) -> Resp {
    json_response(status, &error_body(status, message, param, code))
}

/// The body of [`oai_error`].
pub fn error_body(
    status: StatusCode,
    message: &str,
    param: Option<&str>,
    code: Option<&str>,
) -> Value {
    let kind = match status.as_u16() {
        401 => "authentication_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        500.. => "server_error",
        _ => "invalid_request_error",
    };
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
}

/// 400 `missing_required_parameter` for `param`.
pub(super) fn missing(param: &str) -> Resp {
    oai_error(
        StatusCode::BAD_REQUEST,
        &format!("Missing required parameter: '{param}'."),
        Some(param),
        Some("missing_required_parameter"),
    )
}

/// 400 `invalid_value` for `param`.
pub(super) fn invalid(param: &str, message: &str) -> Resp {
    oai_error(
        StatusCode::BAD_REQUEST,
        message,
        Some(param),
        Some("invalid_value"),
    )
}

/// The request's fields (JSON, form or multipart), or OpenAI's 400 when
/// the body cannot be read.
pub(super) fn fields(req: &Req) -> Result<Map<String, Value>, Resp> {
    req.fields().map_err(|_| {
        oai_error(
            StatusCode::BAD_REQUEST,
            "We could not parse the JSON body of your request.",
            None,
            None,
        )
    })
}
