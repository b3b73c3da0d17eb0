//! The `upload` mode (spec A10): multipart, streamed into the object store.
//!
//! The `file` part goes to the object store chunk by chunk as it arrives
//! (`multer` parses the multipart stream; nothing is buffered whole), with
//! the 500 MiB limit enforced while streaming: past it the write is
//! abandoned, nothing is left stored, and the answer is 413. `purpose`
//! chooses the key prefix and the retention:
//!
//! | purpose | prefix | class | retention |
//! |---|---|---|---|
//! | `voice_clone` | `voice-recordings/` | `voice_recordings` | permanent |
//! | `stt_input` | `stt-input/` | `stt_input` | 30 days |
//! | `watermark_input` | `watermark/` | `watermark` | 7 days |
//! | `audio_job_input` | `audio-jobs/` | `audio_jobs` | 7 days |
//! | omitted (or `uploads`) | `uploads/` | `uploads` | 30 days |
//!
//! `purpose` may come before or after `file` in the form: when it comes
//! after, the stored object is moved to its prefix (a rename on the local
//! store, a server-side copy on S3).

use futures_util::TryStreamExt;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::json;

use crate::body::json;
use crate::body::Request;
use crate::ctx::{Ctx, Outcome};
use crate::errors::ApiError;
use crate::objects::{ByteStream, ObjectError};
use crate::store::{AssetRecord, OutsideRecordPhase, Record};

/// Largest file accepted (spec §8).
pub const MAX_UPLOAD_BYTES: u64 = 500 * 1024 * 1024;
/// Validity of the returned URL (spec §8).
pub const URL_VALIDITY_SECS: u64 = 3600;
/// Largest text field (`purpose`).
const MAX_TEXT_FIELD: usize = 1024;

/// Extensions of spec A10 and what kind of media each is.
pub const EXTENSIONS: &[(&str, &str)] = &[
    ("mp3", "audio"),
    ("wav", "audio"),
    ("m4a", "audio"),
    ("flac", "audio"),
    ("ogg", "audio"),
    ("webm", "video"),
    ("mp4", "video"),
    ("mov", "video"),
    ("mkv", "video"),
    ("png", "image"),
    ("jpg", "image"),
    ("jpeg", "image"),
    ("webp", "image"),
];

/// Where a purpose stores its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Purpose {
    pub name: &'static str,
    pub prefix: &'static str,
    pub class: &'static str,
    /// `None`: permanent.
    pub retention_days: Option<u32>,
}

pub const PURPOSES: &[Purpose] = &[
    Purpose {
        name: "voice_clone",
        prefix: "voice-recordings/",
        class: "voice_recordings",
        retention_days: None,
    },
    Purpose {
        name: "stt_input",
        prefix: "stt-input/",
        class: "stt_input",
        retention_days: Some(30),
    },
    Purpose {
        name: "watermark_input",
        prefix: "watermark/",
        class: "watermark",
        retention_days: Some(7),
    },
    Purpose {
        name: "audio_job_input",
        prefix: "audio-jobs/",
        class: "audio_jobs",
        retention_days: Some(7),
    },
    Purpose {
        name: "uploads",
        prefix: "uploads/",
        class: "uploads",
        retention_days: Some(30),
    },
];

/// The purpose of a form value (`None` = omitted).
pub fn purpose(name: Option<&str>) -> Result<Purpose, ApiError> {
    let name = name
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("uploads");
    PURPOSES
        .iter()
        .copied()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = PURPOSES.iter().map(|p| p.name).collect();
            ApiError::BadRequest(format!(
                "purpose must be one of: {} (or omitted)",
                names.join(", ")
            ))
        })
}

/// Lower-case extension and media kind of an allowed file name.
pub fn extension(file_name: &str) -> Result<(String, &'static str), ApiError> {
    let ext = file_name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    EXTENSIONS
        .iter()
        .find(|(e, _)| *e == ext)
        .map(|(e, kind)| (e.to_string(), *kind))
        .ok_or_else(|| {
            let all: Vec<&str> = EXTENSIONS.iter().map(|(e, _)| *e).collect();
            ApiError::BadRequest(format!("file extension must be one of: {}", all.join(", ")))
        })
}

fn key_for(
    p: &Purpose,
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

fn multipart_error(e: multer::Error) -> ApiError {
    match e {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            ApiError::PayloadTooLarge(format!(
                "file is larger than {} MiB",
                MAX_UPLOAD_BYTES >> 20
            ))
        }
        other => ApiError::BadRequest(format!("malformed multipart body: {other}")),
    }
}

/// `upload`.
pub async fn upload(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let user_id = ctx.require_user("upload")?;
    let content_type = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let boundary = multer::parse_boundary(&content_type).map_err(|_| {
        ApiError::BadRequest("request must be multipart/form-data with a boundary".into())
    })?;
    // The whole stream may be a little larger than the file (headers, purpose).
    const MAX_STREAM: u64 = MAX_UPLOAD_BYTES + (1 << 20);
    crate::shape::refuse_declared_over(req.body(), MAX_STREAM).map_err(|_| {
        ApiError::PayloadTooLarge(format!(
            "file is larger than {} MiB",
            MAX_UPLOAD_BYTES >> 20
        ))
    })?;
    let body = req.into_body().into_data_stream();
    let constraints = multer::Constraints::new().size_limit(
        multer::SizeLimit::new()
            .whole_stream(MAX_STREAM)
            .for_field("purpose", MAX_TEXT_FIELD as u64),
    );
    let mut form = multer::Multipart::with_constraints(body, boundary, constraints);

    let mut purpose_value: Option<String> = None;
    let mut stored: Option<(String, String, String, &'static str, u64)> = None; // key, file name, ext, kind, size
    let now = chrono::Utc::now();
    let id = uuid_like();
    let result: Result<(), ApiError> = async {
        while let Some(field) = form.next_field().await.map_err(multipart_error)? {
            match field.name() {
                Some("purpose") => {
                    let text = field.text().await.map_err(multipart_error)?;
                    purpose(Some(&text))?;
                    purpose_value = Some(text.trim().to_owned());
                }
                Some("file") if stored.is_none() => {
                    let file_name = field
                        .file_name()
                        .map(str::to_owned)
                        .filter(|n| !n.is_empty())
                        .ok_or_else(|| ApiError::BadRequest("file must have a file name".into()))?;
                    let (ext, kind) = extension(&file_name)?;
                    let p = purpose(purpose_value.as_deref())?;
                    let key = key_for(&p, user_id, now, &id, &ext);
                    let ct = crate::fetch::content_type_for(&file_name);
                    let stream: ByteStream = Box::pin(field.map_err(std::io::Error::other));
                    let size = match ctx
                        .gw
                        .objects
                        .put(&key, ct, stream, Some(MAX_UPLOAD_BYTES))
                        .await
                    {
                        Ok(n) => n,
                        Err(ObjectError::TooLarge { .. }) => {
                            return Err(ApiError::PayloadTooLarge(format!(
                                "file is larger than {} MiB",
                                MAX_UPLOAD_BYTES >> 20
                            )))
                        }
                        Err(ObjectError::Body(e)) => {
                            return Err(ApiError::BadRequest(format!("upload interrupted: {e}")))
                        }
                        Err(e) => return Err(ApiError::Internal(e.to_string())),
                    };
                    stored = Some((key, file_name, ext, kind, size));
                }
                Some("file") => {
                    return Err(ApiError::BadRequest("only one file per upload".into()))
                }
                _ => {
                    // Unknown fields are read and ignored (bounded by the stream limit).
                    let mut field = field;
                    while field.chunk().await.map_err(multipart_error)?.is_some() {}
                }
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        if let Some((key, ..)) = &stored {
            let _ = ctx.gw.objects.delete(key).await;
        }
        return Err(e);
    }
    let (mut key, file_name, ext, kind, size) =
        stored.ok_or_else(|| ApiError::BadRequest("file is required".into()))?;
    let p = purpose(purpose_value.as_deref())?;
    let final_key = key_for(&p, user_id, now, &id, &ext);
    if final_key != key {
        // `purpose` came after `file`: move the object under its prefix.
        if let Err(e) = ctx.gw.objects.rename(&key, &final_key).await {
            let _ = ctx.gw.objects.delete(&key).await;
            return Err(ApiError::Internal(format!("moving the upload: {e}")));
        }
        key = final_key;
    }
    let expires_at = p.retention_days.map(|d| {
        (now + chrono::Duration::days(d as i64))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    });
    let record = AssetRecord {
        owner_id: Some(user_id),
        object_key: key.clone(),
        class: p.class.into(),
        purpose: Some(p.name.into()),
        size_bytes: size,
        content_type: crate::fetch::content_type_for(&file_name).into(),
        file_name: Some(file_name.clone()),
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
            let _ = ctx.gw.objects.delete(&key).await;
            return Err(ApiError::Internal(e.to_string()));
        }
    };
    let asset_id = committed
        .asset_ids
        .first()
        .copied()
        .ok_or_else(|| ApiError::Internal("asset id missing".into()))?;
    let url = ctx
        .gw
        .objects
        .presign_get(&key, std::time::Duration::from_secs(URL_VALIDITY_SECS))
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let answer = json!({
        "url": url,
        "asset_id": asset_id,
        "asset_class": p.class,
        "purpose": p.name,
        "expires_at": expires_at,
        "expires_in": URL_VALIDITY_SECS,
        "file_name": file_name,
        "file_type": kind,
        "extension": ext,
        "size_bytes": size,
    });
    Ok(Outcome::new(json(StatusCode::OK, &answer), None))
}

/// 24 random hex characters.
fn uuid_like() -> String {
    use rand::RngCore;
    let mut b = [0u8; 12];
    rand::thread_rng().fill_bytes(&mut b);
    hex::encode(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purposes_and_extensions() {
        assert_eq!(purpose(None).unwrap().prefix, "uploads/");
        assert_eq!(purpose(Some("voice_clone")).unwrap().retention_days, None);
        assert_eq!(purpose(Some("stt_input")).unwrap().retention_days, Some(30));
        assert!(purpose(Some("backup")).is_err());
        assert_eq!(
            extension("Take 1.WAV").unwrap(),
            ("wav".to_owned(), "audio")
        );
        assert_eq!(extension("a.jpeg").unwrap().1, "image");
        assert!(extension("a.exe").is_err());
        assert!(extension("noext").is_err());
    }
}
