//! What the object stores share: bodies as streams, errors, byte ranges,
//! and the checks of keys and content types.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;

/// A body being written or read: a stream of chunks.
pub type ByteStream = Pin<Box<dyn Stream<Item = std::io::Result<Bytes>> + Send>>;

/// What can go wrong with an object.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// No object under that key.
    #[error("object not found")]
    NotFound,
    /// The body passed the size limit of a put; nothing was kept.
    #[error("object larger than {limit} bytes")]
    TooLarge { limit: u64 },
    /// The body stream itself failed (e.g. the client went away, or its
    /// body arrived too slowly: kind `TimedOut`); nothing was kept. The
    /// stream's own error, so the caller can tell why.
    #[error("body: {0}")]
    Body(std::io::Error),
    /// The backend failed.
    #[error("object store: {0}")]
    Backend(String),
    /// The backend cannot take the object now, and may later: S3 refused
    /// the connection, timed out (`GATEWAY_S3_TIMEOUT_SECS`) or answered
    /// 5xx; the local disk is full. Nothing was kept. Answered 503 by the
    /// modes that store ([`crate::generated`]).
    #[error("object store unavailable: {0}")]
    Unavailable(String),
    /// The range asked for starts past the end of the object (HTTP 416).
    #[error("range not satisfiable (object is {size} bytes)")]
    RangeNotSatisfiable { size: u64 },
}

/// An inclusive byte range requested by a reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    pub start: u64,
    /// Inclusive end; `None` means to the end of the object.
    pub end: Option<u64>,
}

impl ByteRange {
    /// Resolves the range against an object of `size` bytes: the inclusive
    /// `(start, end)` served, with `end` clamped to the last byte.
    /// [`ObjectError::RangeNotSatisfiable`] when `start` is past the end (or
    /// the object is empty) or `end < start`.
    pub fn resolve(self, size: u64) -> Result<(u64, u64), ObjectError> {
        let end = self.end.unwrap_or(u64::MAX).min(size.saturating_sub(1));
        if size == 0 || self.start >= size || self.end.is_some_and(|e| e < self.start) {
            return Err(ObjectError::RangeNotSatisfiable { size });
        }
        Ok((self.start, end))
    }
}

/// What is known about a stored object without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Size in bytes.
    pub size: u64,
    /// The content type given to `put`.
    pub content_type: String,
}

/// An object being read.
pub struct ObjectBody {
    pub stream: ByteStream,
    /// Size of the whole object.
    pub total_size: u64,
    /// The bytes served (`start..=end`), when a range was asked for.
    pub range: Option<(u64, u64)>,
    pub content_type: String,
}

/// Checks that `key` is a relative path both backends store the same way:
/// non-empty `/`-separated segments, none empty, `.` or `..`, none starting
/// with `.` (the local store keeps its own files under `.`-names), no
/// backslash, no control character, at most 1024 bytes.
/// Violations are [`ObjectError::Backend`] (a caller bug, not user input).
pub fn validate_key(key: &str) -> Result<(), ObjectError> {
    let bad = |why: &str| {
        Err(ObjectError::Backend(format!(
            "invalid object key {key:?}: {why}"
        )))
    };
    if key.is_empty() {
        return bad("empty");
    }
    if key.len() > 1024 {
        return bad("longer than 1024 bytes");
    }
    if key.starts_with('/') {
        return bad("absolute");
    }
    if key.contains('\\') {
        return bad("backslash");
    }
    if key.chars().any(char::is_control) {
        return bad("control character");
    }
    for segment in key.split('/') {
        if segment.is_empty() {
            return bad("empty segment");
        }
        if segment.starts_with('.') {
            return bad("segment starting with '.'");
        }
    }
    Ok(())
}

/// The content type stored for `content_type`: `application/octet-stream`
/// when empty; [`ObjectError::Backend`] when it could not be sent back as a
/// header value (control characters, longer than 255 bytes).
pub(crate) fn check_content_type(content_type: &str) -> Result<&str, ObjectError> {
    let ct = content_type.trim();
    if ct.is_empty() {
        return Ok("application/octet-stream");
    }
    if ct.len() > 255
        || ct.chars().any(char::is_control)
        || http::HeaderValue::from_str(ct).is_err()
    {
        return Err(ObjectError::Backend(format!(
            "invalid content type {content_type:?}"
        )));
    }
    Ok(ct)
}

/// Converts a `Duration` to whole seconds, rounding up (a presigned URL never
/// expires earlier than asked).
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}
