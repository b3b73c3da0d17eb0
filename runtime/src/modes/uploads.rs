//! The `upload` mode (spec A10): multipart, streamed into the object store.
//!
//! The `file` part goes to the object store chunk by chunk as it arrives
//! (`multer` parses the multipart stream; nothing is buffered whole), with
//! the table's `[limits] upload` enforced while streaming: past it the
//! write is abandoned, nothing is left stored, and the answer is 413.
//! `purpose` chooses the key prefix, the storage class and the retention:
//! the table's `[purposes.*]` (omitted: the one marked `default`).
//!
//! `purpose` may come before or after `file` in the form: when it comes
//! after, the stored object is moved to its prefix (a rename on the local
//! store, a server-side copy on S3).

use futures_util::TryStreamExt;
use http::StatusCode;
use serde_json::json;

use super::common;
use crate::ctx::{Ctx, Outcome};
use gateway_adapters::objects::ByteStream;
use gateway_base::body::json;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::media;
use gateway_base::spec::{Mode, PurposeSpec};
use gateway_store::{AssetRecord, OutsideRecordPhase, Record};

/// Validity of the returned URL (spec §8).
pub const URL_VALIDITY_SECS: u64 = 3600;
/// Largest text field (`purpose`).
const MAX_TEXT_FIELD: usize = 1024;

/// The purpose of a form value (`None` or blank: the default one), among
/// the table's `[purposes.*]`.
pub fn purpose(
    purposes: &'static [PurposeSpec],
    name: Option<&str>,
) -> Result<&'static PurposeSpec, ApiError> {
    PurposeSpec::find(purposes, name).ok_or_else(|| {
        let names: Vec<&str> = purposes.iter().map(|p| p.name).collect();
        ApiError::BadRequest(format!(
            "purpose must be one of: {} (or omitted)",
            names.join(", ")
        ))
    })
}

/// Lower-case extension and media kind of an allowed file name (the
/// uploadable rows of [`gateway_base::media::MEDIA_TYPES`]).
pub fn extension(file_name: &str) -> Result<(String, &'static str), ApiError> {
    let ext = media::extension_of(file_name);
    media::by_ext(&ext)
        .filter(|t| t.uploadable)
        .map(|t| (ext.clone(), t.kind))
        .ok_or_else(|| {
            let all: Vec<&str> = media::MEDIA_TYPES
                .iter()
                .filter(|t| t.uploadable)
                .map(|t| t.ext)
                .collect();
            ApiError::BadRequest(format!("file extension must be one of: {}", all.join(", ")))
        })
}

fn key_for(
    p: &PurposeSpec,
    user_id: i64,
    now: chrono::DateTime<chrono::Utc>,
    id: &str,
    ext: &str,
) -> String {
    format!(
        "{}{user_id}/{}/{id}.{ext}",
        p.prefix,
        now.format("%Y/%m/%d")
    )
}

/// Largest file accepted: the table's `[limits] upload` (spec §8).
fn max_bytes(ctx: &Ctx) -> u64 {
    ctx.gw.table.limit(Mode::Upload)
}

/// A multipart error: too large beyond `max`, else malformed.
fn multipart_error(max: u64) -> impl Fn(multer::Error) -> ApiError {
    move |e| common::multipart_error(e, max)
}

/// The file as stored.
struct Stored {
    key: String,
    file_name: String,
    ext: String,
    kind: &'static str,
    size: u64,
}

/// One upload being read: where its file goes and what was read so far.
struct Upload {
    user_id: i64,
    now: chrono::DateTime<chrono::Utc>,
    id: String,
    purpose: Option<String>,
    stored: Option<Stored>,
}

/// `upload`: the form read (the file streamed into the object store), the
/// object placed under its purpose's prefix, its asset record committed,
/// the answer.
pub async fn upload(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let user_id = ctx.require_user("upload")?;
    let limits = multer::SizeLimit::new().for_field("purpose", MAX_TEXT_FIELD as u64);
    let form = common::open_multipart(req, max_bytes(ctx), limits)?;
    let mut up = Upload {
        user_id,
        now: chrono::Utc::now(),
        id: common::random_hex_id(),
        purpose: None,
        stored: None,
    };
    if let Err(e) = up.read(ctx, form).await {
        if let Some(s) = &up.stored {
            let _ = ctx.gw.objects.delete(&s.key).await;
        }
        return Err(e);
    }
    let (p, stored) = up.place(ctx).await?;
    let (asset_id, expires_at) = commit_asset(ctx, &up, p, &stored).await?;
    let url = ctx
        .gw
        .objects
        .presign_get(
            &stored.key,
            std::time::Duration::from_secs(URL_VALIDITY_SECS),
        )
        .map_err(|e| ApiError::internal("presigning the upload", e))?;
    let answer = json!({
        "url": url,
        "asset_id": asset_id,
        "asset_class": p.class,
        "purpose": p.name,
        "expires_at": expires_at,
        "expires_in": URL_VALIDITY_SECS,
        "file_name": stored.file_name,
        "file_type": stored.kind,
        "extension": stored.ext,
        "size_bytes": stored.size,
    });
    Ok(Outcome::new(json(StatusCode::OK, &answer), None))
}

impl Upload {
    /// Reads the form: `purpose` (checked as it comes), one `file` (streamed
    /// into the object store), other fields read and ignored.
    async fn read(
        &mut self,
        ctx: &Ctx,
        mut form: multer::Multipart<'static>,
    ) -> Result<(), ApiError> {
        let max = max_bytes(ctx);
        while let Some(field) = form.next_field().await.map_err(multipart_error(max))? {
            match field.name() {
                Some("purpose") => {
                    let text = field.text().await.map_err(multipart_error(max))?;
                    purpose(ctx.gw.table.purposes, Some(&text))?;
                    self.purpose = Some(text.trim().to_owned());
                }
                Some("file") if self.stored.is_none() => {
                    self.stored = Some(self.store_file(ctx, field).await?);
                }
                Some("file") => {
                    return Err(ApiError::BadRequest("only one file per upload".into()))
                }
                _ => {
                    // Unknown fields are read and ignored (bounded by the stream limit).
                    let mut field = field;
                    while field.chunk().await.map_err(multipart_error(max))?.is_some() {}
                }
            }
        }
        Ok(())
    }

    /// Streams the `file` part into the object store, under the purpose
    /// known so far.
    async fn store_file(
        &self,
        ctx: &Ctx,
        field: multer::Field<'static>,
    ) -> Result<Stored, ApiError> {
        let file_name = field
            .file_name()
            .map(str::to_owned)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::BadRequest("file must have a file name".into()))?;
        let (ext, kind) = extension(&file_name)?;
        let p = purpose(ctx.gw.table.purposes, self.purpose.as_deref())?;
        let key = key_for(p, self.user_id, self.now, &self.id, &ext);
        let ct = media::content_type_for(&file_name);
        let stream: ByteStream = Box::pin(field.map_err(common::field_io_error));
        let size = match ctx
            .gw
            .objects
            .put(&key, ct, stream, Some(max_bytes(ctx)))
            .await
        {
            Ok(n) => n,
            Err(e) => return Err(common::put_failed(e, max_bytes(ctx), "storing the upload")),
        };
        Ok(Stored {
            key,
            file_name,
            ext,
            kind,
            size,
        })
    }

    /// The stored file under its purpose's prefix: when `purpose` came
    /// after `file`, the object is moved there.
    async fn place(&mut self, ctx: &Ctx) -> Result<(&'static PurposeSpec, Stored), ApiError> {
        let mut stored = self
            .stored
            .take()
            .ok_or_else(|| ApiError::BadRequest("file is required".into()))?;
        let p = purpose(ctx.gw.table.purposes, self.purpose.as_deref())?;
        let final_key = key_for(p, self.user_id, self.now, &self.id, &stored.ext);
        if final_key != stored.key {
            if let Err(e) = ctx.gw.objects.rename(&stored.key, &final_key).await {
                let _ = ctx.gw.objects.delete(&stored.key).await;
                return Err(ApiError::internal("moving the upload", e));
            }
            stored.key = final_key;
        }
        Ok((p, stored))
    }
}

/// Commits the upload's asset record (the object is deleted when that
/// fails): its id and when it expires.
async fn commit_asset(
    ctx: &Ctx,
    up: &Upload,
    p: &PurposeSpec,
    stored: &Stored,
) -> Result<(i64, Option<String>), ApiError> {
    let now = up.now;
    let expires_at = p.retention_days.map(|d| {
        (now + chrono::Duration::days(d as i64))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    });
    let record = AssetRecord {
        owner_id: Some(up.user_id),
        object_key: stored.key.clone(),
        class: p.class.into(),
        purpose: Some(p.name.into()),
        size_bytes: stored.size,
        content_type: media::content_type_for(&stored.file_name).into(),
        file_name: Some(stored.file_name.clone()),
        source: Some(ctx.request_id.clone()),
        created_at: now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        expires_at: expires_at.clone(),
        pack: None,
        pack_offset: None,
    };
    let committed = match ctx
        .gw
        .store
        .commit_outside_record_phase(
            OutsideRecordPhase::UploadedAsset,
            vec![Record::Asset(record)],
        )
        .await
    {
        Ok(c) => c,
        Err(e) => {
            let _ = ctx.gw.objects.delete(&stored.key).await;
            return Err(e.into());
        }
    };
    let asset_id = committed
        .asset_ids
        .first()
        .copied()
        .ok_or_else(|| ApiError::bug("asset id missing"))?;
    Ok((asset_id, expires_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purposes_and_extensions() {
        static PURPOSES: &[PurposeSpec] = &[
            PurposeSpec {
                name: "voice_clone",
                prefix: "voice-recordings/",
                class: "voice_recordings",
                retention_days: None,
                default: false,
            },
            PurposeSpec {
                name: "uploads",
                prefix: "uploads/",
                class: "uploads",
                retention_days: Some(30),
                default: true,
            },
        ];
        assert_eq!(purpose(PURPOSES, None).unwrap().prefix, "uploads/");
        assert_eq!(purpose(PURPOSES, Some(" ")).unwrap().name, "uploads");
        assert_eq!(
            purpose(PURPOSES, Some("voice_clone"))
                .unwrap()
                .retention_days,
            None
        );
        assert!(purpose(PURPOSES, Some("backup")).is_err());
        assert_eq!(
            extension("Take 1.WAV").unwrap(),
            ("wav".to_owned(), "audio")
        );
        assert_eq!(extension("a.jpeg").unwrap().1, "image");
        assert!(extension("a.exe").is_err());
        assert!(extension("noext").is_err());
    }
}
