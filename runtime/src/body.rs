//! The response body type shared by every handler.

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full};

/// Boxed error carried by streaming bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Response body: a full buffer or a stream, boxed.
pub type Body = BoxBody<Bytes, BoxError>;

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
