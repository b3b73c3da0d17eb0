//! The storage interface every backend implements.

use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;

use super::local::LocalStore;
use super::types::{ByteRange, ByteStream, ObjectBody, ObjectError, ObjectMeta};

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
    /// `/objects/...` with [`serve_presigned`](super::serve::serve_presigned) only then (404 otherwise).
    fn as_local(&self) -> Option<&LocalStore> {
        None
    }

    /// Whether the store can serve (a readiness probe): S3 is asked whether
    /// a key exists (the bucket answers); the local store's directory must
    /// be there and writable.
    fn ready(&self) -> BoxFuture<'_, Result<(), ObjectError>> {
        Box::pin(async move { self.exists("readyz-probe").await.map(drop) })
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
