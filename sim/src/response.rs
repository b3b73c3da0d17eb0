//! Response types and helpers shared by every handler: the body type, whole
//! and JSON bodies, and the upstream-style error shape
//! (`{"success": false, "message", "error", "errors"}`).

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{Either, Full, StreamBody};
use hyper::body::Frame;
use serde::Serialize;
use serde_json::{json, Map, Value};

/// A streamed response body's frames.
pub type FrameStream = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Send>,
>;

/// Response body: whole bytes, or a stream (server-sent events).
pub type Body = Either<Full<Bytes>, StreamBody<FrameStream>>;

/// Response type of every handler.
pub type Resp = Response<Body>;

/// A response with a whole body.
pub fn full(bytes: impl Into<Bytes>) -> Resp {
    Response::new(Either::Left(Full::new(bytes.into())))
}

/// A JSON response.
pub fn json_response<T: Serialize + ?Sized>(status: StatusCode, body: &T) -> Resp {
    let mut r = full(serde_json::to_vec(body).expect("serializable"));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// `200` with `body`.
pub fn ok(body: Value) -> Resp {
    json_response(StatusCode::OK, &body)
}

/// `{"success": true, "item": item}`.
pub fn ok_item(item: Value) -> Resp {
    ok(json!({"success": true, "item": item}))
}

/// Snake-case error code of a status (`not_found`, `bad_request`, ...).
pub fn error_code(status: StatusCode) -> String {
    status
        .canonical_reason()
        .unwrap_or("error")
        .to_ascii_lowercase()
        .replace(['-', ' '], "_")
        .replace('\'', "")
}

/// An upstream-style error:
/// `{"success": false, "message", "error", "errors": {field: [msg]}}`.
pub fn error(status: StatusCode, message: &str, field: Option<(&str, &str)>) -> Resp {
    let mut errors = Map::new();
    if let Some((f, m)) = field {
        errors.insert(f.to_owned(), json!([m]));
    }
    json_response(
        status,
        &json!({"success": false, "message": message, "error": error_code(status), "errors": errors}),
    )
}

/// 404 for an unknown `what`.
pub fn not_found(what: &str) -> Resp {
    error(StatusCode::NOT_FOUND, &format!("{what} not found"), None)
}

/// 400 for a missing or invalid field.
pub fn bad_field(field: &str, message: &str) -> Resp {
    error(
        StatusCode::BAD_REQUEST,
        &format!("{field} {message}"),
        Some((field, message)),
    )
}
