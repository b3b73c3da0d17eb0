//! `media_upload`, `media_get`, `media_list`, `media_delete`: the caller's
//! media files (`/media`, spec §7 format 1).
//!
//! A media file is an image or an audio file kept in the object store as
//! the caller's, with an asset record of class [`MEDIA_CLASS`] (its
//! `purpose` is the `file_type`). The upload is multipart (`file`,
//! `file_type` = `image` | `audio`, in either order): the file's first bytes
//! are read and sniffed before anything is stored ([`sniff`]: PNG, JPEG,
//! WebP, GIF; the audio containers [`gateway_base::audio::sniff_container`]
//! recognises), so a file that is not what `file_type` says is a 400 with
//! no object and no record; then the head and the rest of the part are
//! streamed into the object store (never held whole) under the table's
//! `[limits] media_upload`, enforced while streaming (413, the partial
//! object removed by the store).
//!
//! Retention: a media file is kept until its owner deletes it. `DELETE`
//! deletes the object from the store at once, so that no URL answered
//! before serves it any more (the local store's `/objects/...` and S3's
//! own presigned URLs alike answer 404), then marks the record deleted
//! (kept, answered 404 from then on). A store that fails the delete
//! answers 503 (unavailable) or 500 and the file stays as it was, so the
//! delete can be retried; a record that could not be marked after its
//! object went is marked by the retry. Unknown, another user's or
//! deleted: 404 "media file not found or soft-deleted". The object store
//! failing to find or read a live file's object: 500 "media retrieval
//! failed".

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use http::StatusCode;
use serde_json::{json, Value};

use super::common::{self, query_u32};
use crate::ctx::{Ctx, Outcome};
use gateway_adapters::objects::ByteStream;
use gateway_base::body::{json, Request};
use gateway_base::errors::ApiError;
use gateway_base::spec::{Mode, PathParams};
use gateway_store::{AssetRecord, AssetRow, Assets};

/// The asset class of media files.
pub const MEDIA_CLASS: &str = "media";
/// Object key prefix of media files (`media/<user>/<yyyy/mm/dd>/<id>.<ext>`).
const PREFIX: &str = "media/";
/// Validity of an answered URL (spec §8: one hour).
pub const URL_VALIDITY_SECS: u64 = 3600;
/// Bytes read before the type is decided (the longest signature checked).
const HEAD_BYTES: usize = 12;
/// Largest text field (`file_type`).
const MAX_TEXT_FIELD: u64 = 64;

const NOT_FOUND: &str = "media file not found or soft-deleted";
const RETRIEVAL_FAILED: &str = "media retrieval failed";

/// What a sniffed file is: its extension and content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sniffed {
    pub ext: &'static str,
    pub content_type: &'static str,
}

/// What `head` (a file's first bytes) is, when it is a file of
/// `file_type` (`image`: PNG, JPEG, WebP, GIF; `audio`: WAV, MP3, FLAC,
/// Ogg, MP4/M4A, WebM); `None` otherwise.
pub fn sniff(file_type: &str, head: &[u8]) -> Option<Sniffed> {
    let s = |ext, content_type| Some(Sniffed { ext, content_type });
    match file_type {
        "image" => {
            if head.starts_with(b"\x89PNG\r\n\x1a\n") {
                s("png", "image/png")
            } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
                s("jpg", "image/jpeg")
            } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
                s("gif", "image/gif")
            } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
                s("webp", "image/webp")
            } else {
                None
            }
        }
        "audio" => match gateway_base::audio::sniff_container(head)? {
            "wav" => s("wav", "audio/wav"),
            "mp3" => s("mp3", "audio/mpeg"),
            "flac" => s("flac", "audio/flac"),
            "ogg" => s("ogg", "audio/ogg"),
            "mp4" => s("m4a", "audio/mp4"),
            "webm" => s("webm", "audio/webm"),
            _ => None,
        },
        _ => None,
    }
}

/// 400 `bad_request` for a `file_type` other than `image` or `audio`.
fn check_file_type(text: &str) -> Result<&'static str, ApiError> {
    match text.trim() {
        "image" => Ok("image"),
        "audio" => Ok("audio"),
        _ => Err(invalid_file_type()),
    }
}

fn max_bytes(ctx: &Ctx) -> u64 {
    ctx.gw.table.limit(Mode::MediaUpload)
}

/// A media file as answered: metadata and a presigned URL valid one hour.
fn media_json(ctx: &Ctx, a: &AssetRow) -> Result<Value, ApiError> {
    let url = ctx
        .gw
        .objects
        .presign_get(
            &a.object_key,
            std::time::Duration::from_secs(URL_VALIDITY_SECS),
        )
        .map_err(|e| ApiError::internal("presigning a media file", e).saying(RETRIEVAL_FAILED))?;
    Ok(json!({
        "id": a.id,
        "file_type": a.purpose,
        "content_type": a.content_type,
        "size_bytes": a.size_bytes,
        "url": url,
        "expires_in": URL_VALIDITY_SECS,
        "created_at": a.created_at,
    }))
}

/// The file part as stored.
struct Stored {
    key: String,
    /// `image` or `audio`, as sniffed.
    kind: &'static str,
    sniffed: Sniffed,
    size: u64,
}

/// `media_upload`: the form read (the file judged by its first bytes and
/// streamed into the object store), its asset record committed, the
/// answer. On any failure the stored object is removed.
pub async fn upload(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let user_id = ctx.require_user("media upload")?;
    let limits = multer::SizeLimit::new().for_field("file_type", MAX_TEXT_FIELD);
    let form = common::open_multipart(req, max_bytes(ctx), limits)?;
    let mut up = Upload {
        user_id,
        now: chrono::Utc::now(),
        file_type: None,
        stored: None,
    };
    let outcome = match up.read(ctx, form).await {
        Ok(()) => up.finish(ctx).await,
        Err(e) => Err(e),
    };
    if outcome.is_err() {
        if let Some(s) = &up.stored {
            let _ = ctx.gw.objects.delete(&s.key).await;
        }
    }
    outcome
}

/// One media upload being read.
struct Upload {
    user_id: i64,
    now: chrono::DateTime<chrono::Utc>,
    file_type: Option<&'static str>,
    stored: Option<Stored>,
}

impl Upload {
    /// Reads the form: `file_type` (checked as it comes), one `file`
    /// (judged and streamed into the object store), other fields read and
    /// ignored.
    async fn read(
        &mut self,
        ctx: &Ctx,
        mut form: multer::Multipart<'static>,
    ) -> Result<(), ApiError> {
        let max = max_bytes(ctx);
        let bad = |e| common::multipart_error(e, max);
        while let Some(field) = form.next_field().await.map_err(bad)? {
            match field.name() {
                Some("file_type") => {
                    let text = field.text().await.map_err(bad)?;
                    self.file_type = Some(check_file_type(&text)?);
                }
                Some("file") if self.stored.is_none() => {
                    self.stored = Some(self.store_file(ctx, field).await?);
                }
                Some("file") => {
                    return Err(ApiError::BadRequest("only one file per request".into()))
                }
                _ => {
                    let mut field = field;
                    while field.chunk().await.map_err(bad)?.is_some() {}
                }
            }
        }
        Ok(())
    }

    /// The form read whole: `file_type` given, the file of that type (a
    /// `file_type` that came after the file is checked now), the record.
    async fn finish(&self, ctx: &Ctx) -> Result<Outcome, ApiError> {
        let file_type = self.file_type.ok_or_else(invalid_file_type)?;
        let stored = self
            .stored
            .as_ref()
            .ok_or_else(|| ApiError::BadRequest("file is required".into()))?;
        if stored.kind != file_type {
            return Err(not_of_type(file_type));
        }
        commit(ctx, self.user_id, self.now, file_type, stored).await
    }

    /// Reads the part's first bytes and judges them (against `file_type`
    /// when it came first, else as an image or an audio file): 400 before
    /// anything is stored; then streams them and the rest into the object
    /// store under the size limit.
    async fn store_file(
        &self,
        ctx: &Ctx,
        mut field: multer::Field<'static>,
    ) -> Result<Stored, ApiError> {
        let max = max_bytes(ctx);
        let mut head: Vec<Bytes> = Vec::new();
        let mut have = 0usize;
        while have < HEAD_BYTES {
            match field
                .chunk()
                .await
                .map_err(|e| common::multipart_error(e, max))?
            {
                Some(c) => {
                    have += c.len();
                    head.push(c);
                }
                None => break,
            }
        }
        let first: Vec<u8> = head
            .iter()
            .flat_map(|c| c.iter().copied())
            .take(HEAD_BYTES)
            .collect();
        let (kind, sniffed) = match self.file_type {
            Some(t) => (t, sniff(t, &first).ok_or_else(|| not_of_type(t))?),
            None => ["image", "audio"]
                .into_iter()
                .find_map(|t| sniff(t, &first).map(|s| (t, s)))
                .ok_or_else(|| not_of_type("image or audio"))?,
        };
        let key = format!(
            "{PREFIX}{}/{}/{}.{}",
            self.user_id,
            self.now.format("%Y/%m/%d"),
            common::random_hex_id(),
            sniffed.ext
        );
        let rest = field.map_err(common::field_io_error);
        let stream: ByteStream = Box::pin(
            futures_util::stream::iter(head.into_iter().map(Ok::<_, std::io::Error>)).chain(rest),
        );
        let size = match ctx
            .gw
            .objects
            .put(&key, sniffed.content_type, stream, Some(max))
            .await
        {
            Ok(n) => n,
            Err(e) => return Err(common::put_failed(e, max, "storing a media file")),
        };
        Ok(Stored {
            key,
            kind,
            sniffed,
            size,
        })
    }
}

/// 400: `file_type` missing or other than `image` / `audio`.
fn invalid_file_type() -> ApiError {
    ApiError::BadRequestReason {
        reason: "invalid_file_type",
        message: "file_type must be image or audio".into(),
    }
}

/// 400: the file's first bytes are not those of a `what` file.
fn not_of_type(what: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "file: not an {what} file of a known format (image: PNG, JPEG, WebP, GIF; audio: WAV, MP3, FLAC, Ogg, M4A, WebM)"
    ))
}

/// Commits the asset record of a stored file and answers it.
async fn commit(
    ctx: &Ctx,
    user_id: i64,
    now: chrono::DateTime<chrono::Utc>,
    file_type: &'static str,
    s: &Stored,
) -> Result<Outcome, ApiError> {
    let record = AssetRecord {
        owner_id: Some(user_id),
        object_key: s.key.clone(),
        class: MEDIA_CLASS.into(),
        purpose: Some(file_type.into()),
        size_bytes: s.size,
        content_type: s.sniffed.content_type.into(),
        file_name: None,
        source: Some(ctx.request_id.clone()),
        created_at: gateway_store::rfc3339(now),
        // Kept until its owner deletes it (see the module docs).
        expires_at: None,
        pack: None,
        pack_offset: None,
    };
    let row = common::commit_owned_asset(ctx, record).await?;
    let v = media_json(ctx, &row)?;
    Ok(Outcome::new(json(StatusCode::OK, &v), None))
}

/// The caller's live media file named by `{media_id}` (404 otherwise).
async fn own_file(ctx: &Ctx, params: &PathParams) -> Result<(i64, AssetRow), ApiError> {
    let user = ctx.require_user("media file")?;
    let id = params
        .get("media_id")
        .and_then(|v| v.trim().parse::<i64>().ok())
        .ok_or_else(|| ApiError::NotFound(NOT_FOUND.into()))?;
    let now = gateway_store::now_rfc3339();
    let row = ctx
        .gw
        .store
        .blocking(move |s| s.live_owned_asset(user, MEDIA_CLASS, id, &now))
        .await?
        .ok_or_else(|| ApiError::NotFound(NOT_FOUND.into()))?;
    Ok((user, row))
}

/// `media_get`: the object is looked up in the store (its size and type),
/// then a fresh presigned URL is answered.
pub async fn get(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let (_, row) = own_file(ctx, params).await?;
    if let Err(e) = ctx.gw.objects.head(&row.object_key).await {
        return Err(ApiError::internal("reading a media file's object", e).saying(RETRIEVAL_FAILED));
    }
    let v = media_json(ctx, &row)?;
    Ok(Outcome::new(json(StatusCode::OK, &v), None))
}

/// `media_list`: the caller's live media files, newest first (`limit`
/// 1..=100, default 20; `skip`).
pub async fn list(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let user = ctx.require_user("media list")?;
    let (limit, skip) = (
        query_u32(ctx, "limit", 20).clamp(1, 100),
        query_u32(ctx, "skip", 0),
    );
    let now = gateway_store::now_rfc3339();
    let (rows, total) = ctx
        .gw
        .store
        .blocking(move |s| s.live_owned_assets(user, MEDIA_CLASS, &now, limit, skip))
        .await?;
    let data = rows
        .iter()
        .map(|r| media_json(ctx, r))
        .collect::<Result<Vec<Value>, ApiError>>()?;
    let v = json!({
        "data": data,
        "total": total,
        "limit": limit,
        "skip": skip,
        "has_more": (skip as u64 + rows.len() as u64) < total,
    });
    Ok(Outcome::new(json(StatusCode::OK, &v), None))
}

/// `media_delete`: the object deleted, then the record marked deleted (see
/// the module docs).
pub async fn delete(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let (user, row) = own_file(ctx, params).await?;
    let id = row.id;
    if !common::delete_owned_asset(ctx, user, MEDIA_CLASS, &row).await? {
        // Deleted by a concurrent request meanwhile.
        return Err(ApiError::NotFound(NOT_FOUND.into()));
    }
    let v = json!({"id": id, "deleted": true});
    Ok(Outcome::new(json(StatusCode::OK, &v), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_judged_by_their_first_bytes() {
        assert_eq!(
            sniff("image", b"\x89PNG\r\n\x1a\n\0\0\0\x0d").unwrap().ext,
            "png"
        );
        assert_eq!(
            sniff("image", &[0xFF, 0xD8, 0xFF, 0xE0])
                .unwrap()
                .content_type,
            "image/jpeg"
        );
        assert_eq!(sniff("image", b"GIF89a\x01\0").unwrap().ext, "gif");
        assert_eq!(sniff("image", b"RIFF\0\0\0\0WEBPVP8 ").unwrap().ext, "webp");
        assert_eq!(sniff("audio", b"RIFF\0\0\0\0WAVEfmt ").unwrap().ext, "wav");
        assert_eq!(
            sniff("audio", b"ID3\x04\0\0").unwrap().content_type,
            "audio/mpeg"
        );
        // A WAV is no image, a PNG no audio, text neither.
        assert!(sniff("image", b"RIFF\0\0\0\0WAVEfmt ").is_none());
        assert!(sniff("audio", b"\x89PNG\r\n\x1a\n\0\0\0\x0d").is_none());
        assert!(sniff("image", b"hello world!").is_none());
        assert!(sniff("video", b"\x89PNG\r\n\x1a\n").is_none());
        assert!(check_file_type("video").is_err());
        assert_eq!(check_file_type(" audio ").unwrap(), "audio");
    }
}
