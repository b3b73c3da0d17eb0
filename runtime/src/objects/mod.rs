//! Object storage: where generated audio, uploads and mirrored results live.
//!
//! One trait, [`ObjectStore`], two backends: the local filesystem (the
//! embedded default, under `GATEWAY_DATA_DIR`; the gateway serves its own
//! presigned URLs) and S3 through `rust-s3` (any S3-compatible store; real
//! presigned GET URLs). Bodies move as streams in both directions.
//!
//! * [`local`] — [`LocalStore`]: files under `$GATEWAY_DATA_DIR/objects`,
//!   written to a temporary file and renamed into place.
//! * [`pack`] — packed segments: small expiring objects appended to shared
//!   files, found through the database, their fsync shared with the group commit.
//! * [`signing`] — the HMAC of the local store's presigned URLs.
//! * [`serve`] — [`serve_presigned`]: answers `GET`/`HEAD /objects/...` for
//!   the local store (signature, expiry, `Range`).
//! * [`s3`] — [`S3Store`]: any S3-compatible store through `rust-s3`.
//! * [`config`] — environment → [`ObjectConfig`], and [`open`].
//! * `testing` (feature `testing`, and in this crate's tests) — an
//!   in-process S3-compatible server for tests.
//!
//! Keys are checked the same way by both backends ([`validate_key`]), so a
//! key that works on one works on the other.

use std::pin::Pin;
use std::time::Duration;

pub mod config;
pub mod local;
pub mod pack;
pub mod s3;
pub mod serve;
pub mod signing;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

pub use config::{open, ObjectBackend, ObjectConfig};
pub use local::LocalStore;
pub use s3::{S3Config, S3Store};
pub use serve::{serve_presigned, stream_body};

use bytes::Bytes;
use futures_util::future::BoxFuture;
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

/// The storage interface. Keys are relative paths like
/// `synthesis/42/2026/11/22/010203-res_xxx.mp3` (no leading slash, no `..`).
pub trait ObjectStore: Send + Sync + 'static {
    /// `"local"` or `"s3"`.
    fn backend(&self) -> &'static str;

    /// Streams `body` into `key`. If more than `max_bytes` arrive, or the
    /// stream fails, the write is abandoned and nothing is left under `key`.
    /// Returns the stored size.
    fn put<'a>(
        &'a self,
        key: &'a str,
        content_type: &'a str,
        body: ByteStream,
        max_bytes: Option<u64>,
    ) -> BoxFuture<'a, Result<u64, ObjectError>>;

    /// Stores a body the caller already holds in memory (synthesis audio).
    /// The default streams it through [`ObjectStore::put`]; the local store
    /// writes it in one blocking call instead of one per step.
    fn put_bytes<'a>(
        &'a self,
        key: &'a str,
        content_type: &'a str,
        body: Bytes,
    ) -> BoxFuture<'a, Result<u64, ObjectError>> {
        let stream: ByteStream = Box::pin(futures_util::stream::once(async move { Ok(body) }));
        self.put(key, content_type, stream, None)
    }

    /// Opens `key` for reading, optionally a range of it. A range starting
    /// past the end is [`ObjectError::RangeNotSatisfiable`]; an end past the
    /// end is clamped.
    fn get<'a>(
        &'a self,
        key: &'a str,
        range: Option<ByteRange>,
    ) -> BoxFuture<'a, Result<ObjectBody, ObjectError>>;

    /// Deletes `key`; deleting a missing key is not an error.
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), ObjectError>>;

    /// Whether `key` exists.
    fn exists<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool, ObjectError>>;

    /// A URL that lets anyone holding it GET `key` until `expires_in` has passed.
    fn presign_get(&self, key: &str, expires_in: Duration) -> Result<String, ObjectError>;

    /// The key behind `url` when it is one of this store's object URLs (as
    /// made by [`ObjectStore::presign_get`]; the query is ignored, the
    /// signature not checked); `None` for any other URL.
    fn key_of_url(&self, url: &str) -> Option<String> {
        let _ = url;
        None
    }

    /// Moves `from` to `to`, replacing what `to` held; `from` is gone after.
    /// [`ObjectError::NotFound`] when `from` does not exist.
    ///
    /// The default copies through a stream and deletes `from`; both backends
    /// override it (a rename, a server-side copy).
    fn rename<'a>(&'a self, from: &'a str, to: &'a str) -> BoxFuture<'a, Result<(), ObjectError>> {
        Box::pin(async move {
            let body = self.get(from, None).await?;
            self.put(to, &body.content_type, body.stream, None).await?;
            self.delete(from).await
        })
    }

    /// The local store behind this one, if it is one: the server answers
    /// `/objects/...` with [`serve_presigned`] only then (404 otherwise).
    fn as_local(&self) -> Option<&LocalStore> {
        None
    }

    /// Size and content type of `key`, without reading its body.
    ///
    /// The default opens the object and drops the stream; both backends
    /// override it with a cheaper call.
    fn head<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<ObjectMeta, ObjectError>> {
        Box::pin(async move {
            let body = self.get(key, None).await?;
            Ok(ObjectMeta {
                size: body.total_size,
                content_type: body.content_type,
            })
        })
    }
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
