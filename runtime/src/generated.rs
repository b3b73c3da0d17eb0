//! Media the gateway generated for a caller and keeps for them (synthesis
//! audio, speech, images): stored under
//! `<prefix>/<user>/YYYY/MM/DD/HHMMSS-<id>.<ext>`, answered with a presigned
//! URL, and recorded as an asset that expires after its retention. The asset
//! record goes with the request's records (committed before the answer).
//!
//! On the local store, bytes held in memory up to 1 MiB are packed
//! ([`gateway_adapters::objects::pack`]): appended to a shared segment, the asset
//! record saying where; under `GATEWAY_DB_SYNC=full` a
//! [`Record::SyncFile`] beside it makes the group commit fdatasync the
//! segment before the record commits.

use std::time::Duration;

use crate::services::Gateway;
use gateway_adapters::objects::{ByteStream, ObjectError};
use gateway_base::errors::ApiError;
use gateway_store::{rfc3339, AssetRecord, Record};

/// Validity of the presigned URL answered (spec §8).
pub const URL_VALIDITY: Duration = Duration::from_secs(3600);

/// What is being stored, for whom, for how long.
pub struct Media<'a> {
    pub owner: i64,
    /// Key prefix (`synthesis`, `speech`, `images`).
    pub prefix: &'static str,
    /// Asset class (`synthesis`, `speech`, `image`).
    pub class: &'static str,
    pub purpose: &'static str,
    /// The request that produced it (the asset's `source`, the key's id).
    pub source: &'a str,
    /// Distinguishes several objects of one request (`-0`, `-1`, ...); empty for one.
    pub suffix: String,
    pub ext: &'a str,
    pub content_type: &'a str,
    pub retention_days: i64,
    pub now: chrono::DateTime<chrono::Utc>,
}

/// A stored object: its key, presigned URL, expiry and records (the asset
/// record first, then a packed segment's [`Record::SyncFile`] if any):
/// all go into the request's commit.
pub struct Stored {
    pub key: String,
    pub url: String,
    pub expires_at: String,
    pub records: Vec<Record>,
}

/// A failure to store while `context`: 503 (with `Retry-After`) when the
/// store cannot take it now ([`ObjectError::Unavailable`]: S3 refused,
/// stalled or failed; the disk is full), else 500. Nothing was kept.
pub(crate) fn stored_failed(context: String, e: ObjectError) -> ApiError {
    match e {
        ObjectError::Unavailable(_) => {
            ApiError::StorageUnavailable(gateway_base::errors::Internal {
                context: context.into(),
                source: Some(std::sync::Arc::new(e)),
                says: None,
                reason: None,
            })
        }
        e => ApiError::internal(context, e),
    }
}

/// How long [`forget`] keeps trying.
pub const FORGET_FOR: Duration = Duration::from_secs(600);

/// Deletes `key`, the object of a request that failed: a put whose outcome
/// is unknown (the store was cut off or timed out while it ran), or an
/// object whose records were not committed (`pipeline`). No asset record
/// names it, so nothing else would. Retried in the background while the
/// store fails (backing off to 5 s, for [`FORGET_FOR`]); the key holds the
/// request's id, so nobody else can be using it.
pub fn forget(gw: &Gateway, key: String) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let objects = gw.objects.clone();
    runtime.spawn(async move {
        let started = std::time::Instant::now();
        let mut wait = Duration::from_millis(200);
        loop {
            match objects.delete(&key).await {
                Ok(()) | Err(ObjectError::NotFound) => return,
                Err(e) if started.elapsed() < FORGET_FOR => {
                    tracing::debug!(key = %key, error = %e, "deleting an unrecorded object failed; retrying");
                }
                Err(e) => {
                    tracing::warn!(key = %key, error = %e, "an object without its record was left behind");
                    return;
                }
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(5));
        }
    });
}

impl Media<'_> {
    fn key(&self) -> String {
        format!(
            "{}/{}/{}-{}{}.{}",
            self.prefix,
            self.owner,
            self.now.format("%Y/%m/%d/%H%M%S"),
            self.source,
            self.suffix,
            self.ext
        )
    }

    /// The presigned URL the object will have once stored (a streamed
    /// answer names it before its bytes have all come).
    pub fn presigned(&self, gw: &Gateway) -> Result<String, ApiError> {
        gw.objects
            .presign_get(&self.key(), URL_VALIDITY)
            .map_err(|e| ApiError::internal(format!("presigning {}", self.class), e))
    }

    /// Stores bytes held in memory: packed on the local store when small
    /// (see the module docs), else in one call to the store.
    pub async fn store_bytes(self, gw: &Gateway, bytes: bytes::Bytes) -> Result<Stored, ApiError> {
        let key = self.key();
        let size = bytes.len() as u64;
        let failed = |e| stored_failed(format!("storing {}", self.class), e);
        let local = gw.objects.as_local();
        match local.filter(|_| size <= gateway_adapters::objects::pack::MAX_PACKED_OBJECT) {
            Some(local) => {
                let appended = local
                    .append_packed(&key, self.content_type, &bytes)
                    .map_err(failed)?;
                let mut stored =
                    self.stored(gw, key, size, Some((appended.pack, appended.offset)))?;
                stored.records.extend(appended.sync.map(Record::SyncFile));
                Ok(stored)
            }
            None => {
                let put = gw.objects.put_bytes(&key, self.content_type, bytes).await;
                if let Err(e @ ObjectError::Unavailable(_)) = put {
                    // Cut off or timed out: the object may have landed.
                    forget(gw, key);
                    return Err(failed(e));
                }
                put.map_err(failed)?;
                self.stored(gw, key, size, None)
            }
        }
    }

    /// Streams a body into the store, at most `limit` bytes; a failure is
    /// the provider's (502), since the stream comes from it.
    pub async fn store_stream(
        self,
        gw: &Gateway,
        stream: ByteStream,
        limit: u64,
    ) -> Result<Stored, ApiError> {
        let key = self.key();
        let size = gw
            .objects
            .put(&key, self.content_type, stream, Some(limit))
            .await
            .map_err(|e| match e {
                e @ ObjectError::Unavailable(_) => {
                    forget(gw, key.clone());
                    stored_failed(format!("copying a generated {}", self.class), e)
                }
                e => {
                    ApiError::BadGateway(format!("copying a generated {} failed: {e}", self.class))
                }
            })?;
        self.stored(gw, key, size, None)
    }

    fn stored(
        self,
        gw: &Gateway,
        key: String,
        size: u64,
        packed: Option<(String, u64)>,
    ) -> Result<Stored, ApiError> {
        let (pack, pack_offset) = packed.unzip();
        let url = gw
            .objects
            .presign_get(&key, URL_VALIDITY)
            .map_err(|e| ApiError::internal(format!("presigning {}", self.class), e))?;
        let expires_at = rfc3339(self.now + chrono::Duration::days(self.retention_days));
        let record = Record::Asset(AssetRecord {
            owner_id: Some(self.owner),
            object_key: key.clone(),
            class: self.class.into(),
            purpose: Some(self.purpose.into()),
            size_bytes: size,
            content_type: self.content_type.into(),
            file_name: None,
            source: Some(self.source.to_owned()),
            created_at: rfc3339(self.now),
            expires_at: Some(expires_at.clone()),
            pack,
            pack_offset,
        });
        Ok(Stored {
            key,
            url,
            expires_at,
            records: vec![record],
        })
    }
}
