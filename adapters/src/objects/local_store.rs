//! The local store as an [`ObjectStore`]: the trait's methods over
//! [`LocalStore`]'s own (its files, then its packed segments).

use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;

use super::local::{backend, is_not_found, LocalStore, OpenObject};
use super::signing;
use super::store::ObjectStore;
use super::types::{
    ceil_secs, validate_key, ByteRange, ByteStream, ObjectBody, ObjectError, ObjectMeta,
};

impl ObjectStore for LocalStore {
    fn backend(&self) -> &'static str {
        "local"
    }

    fn put<'a>(
        &'a self,
        key: &'a str,
        content_type: &'a str,
        body: ByteStream,
        max_bytes: Option<u64>,
    ) -> BoxFuture<'a, Result<u64, ObjectError>> {
        Box::pin(self.put_inner(key, content_type, body, max_bytes))
    }

    fn put_bytes<'a>(
        &'a self,
        key: &'a str,
        content_type: &'a str,
        body: Bytes,
    ) -> BoxFuture<'a, Result<u64, ObjectError>> {
        Box::pin(self.put_bytes_inner(key, content_type, body))
    }

    fn get<'a>(
        &'a self,
        key: &'a str,
        range: Option<ByteRange>,
    ) -> BoxFuture<'a, Result<ObjectBody, ObjectError>> {
        Box::pin(async move {
            let object = self.open(key).await?;
            let size = object.meta.size;
            let content_type = object.meta.content_type.clone();
            let (stream, served) = match range {
                Some(r) => {
                    let (start, end) = r.resolve(size)?;
                    (object.stream(start, end).await?, Some((start, end)))
                }
                None if size == 0 => (OpenObject::empty_stream(), None),
                None => (object.stream(0, size - 1).await?, None),
            };
            Ok(ObjectBody {
                stream,
                total_size: size,
                range: served,
                content_type,
            })
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), ObjectError>> {
        Box::pin(self.delete_inner(key))
    }

    /// The store's directory is there, a directory, and not read-only.
    fn ready(&self) -> BoxFuture<'_, Result<(), ObjectError>> {
        Box::pin(async move {
            let m = tokio::fs::metadata(self.root())
                .await
                .map_err(|e| backend(format!("the objects directory: {e}")))?;
            if !m.is_dir() || m.permissions().readonly() {
                return Err(backend("the objects directory is not a writable directory"));
            }
            Ok(())
        })
    }

    fn exists<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool, ObjectError>> {
        Box::pin(async move {
            let path = self.path_of(key)?;
            match tokio::fs::metadata(&path).await {
                Ok(m) if m.is_file() => return Ok(true),
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(backend(format!("checking {key}: {e}"))),
            }
            match self.open_packed(key).await {
                Ok(_) => Ok(true),
                Err(ObjectError::NotFound) => Ok(false),
                Err(e) => Err(e),
            }
        })
    }

    fn presign_get(&self, key: &str, expires_in: Duration) -> Result<String, ObjectError> {
        self.presign_until(key, signing::now_unix() + ceil_secs(expires_in))
    }

    fn head<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<ObjectMeta, ObjectError>> {
        Box::pin(async move { Ok(self.open(key).await?.meta) })
    }

    fn as_local(&self) -> Option<&LocalStore> {
        Some(self)
    }

    fn key_of_url(&self, url: &str) -> Option<String> {
        let rest = url
            .strip_prefix(&self.public_base_url)?
            .strip_prefix(signing::PATH_PREFIX)?;
        let path = rest.split(['?', '#']).next().unwrap_or(rest);
        let key = signing::decode_key(path)?;
        validate_key(&key).ok()?;
        Some(key)
    }

    fn rename<'a>(&'a self, from: &'a str, to: &'a str) -> BoxFuture<'a, Result<(), ObjectError>> {
        Box::pin(self.rename_inner(from, to))
    }
}
