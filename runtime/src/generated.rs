//! Media the gateway generated for a caller and keeps for them (synthesis
//! audio, speech, images): stored under
//! `<prefix>/<user>/YYYY/MM/DD/HHMMSS-<id>.<ext>`, answered with a presigned
//! URL, and recorded as an asset that expires after its retention. The asset
//! record goes with the request's records (committed before the answer).
//!
//! On the local store, bytes held in memory up to 1 MiB are packed
//! ([`crate::objects::pack`]): appended to a shared segment, the asset
//! record saying where; under `GATEWAY_DB_SYNC=full` a
//! [`Record::SyncFile`] beside it makes the group commit fdatasync the
//! segment before the record commits.

use std::time::Duration;

use crate::errors::ApiError;
use crate::objects::ByteStream;
use crate::services::Gateway;
use crate::store::{rfc3339, AssetRecord, Record};

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

    /// Stores bytes held in memory: packed on the local store when small
    /// (see the module docs), else in one call to the store.
    pub async fn store_bytes(self, gw: &Gateway, bytes: bytes::Bytes) -> Result<Stored, ApiError> {
        let key = self.key();
        let size = bytes.len() as u64;
        let failed = |e| ApiError::internal(format!("storing {}", self.class), e);
        let local = gw.objects.as_local();
        match local.filter(|_| size <= crate::objects::pack::MAX_PACKED_OBJECT) {
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
                gw.objects
                    .put_bytes(&key, self.content_type, bytes)
                    .await
                    .map_err(failed)?;
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
            .map_err(|e| {
                ApiError::BadGateway(format!("copying a generated {} failed: {e}", self.class))
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
