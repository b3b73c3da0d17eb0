//! The request and response types every handler sees, the response body
//! type, and the JSON answer.

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full};

/// Boxed error carried by streaming bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Response body: a full buffer or a stream, boxed.
pub type Body = BoxBody<Bytes, BoxError>;

/// Request type handlers receive.
pub type Request = http::Request<hyper::body::Incoming>;
/// Response type handlers produce.
pub type Response = http::Response<Body>;

/// The address of the client, the TCP peer (a request extension the server
/// sets on every request): the account routes limit each address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::IpAddr);

/// A body holding these bytes.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// An empty body.
pub fn empty() -> Body {
    Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed()
}

/// A JSON answer with a status.
pub fn json(status: http::StatusCode, v: &serde_json::Value) -> http::Response<Body> {
    let mut out = http::Response::new(full(Bytes::from(v.to_string())));
    *out.status_mut() = status;
    out.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    out
}
