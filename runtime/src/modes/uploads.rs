//! The `upload` mode (spec A10): multipart, streamed into the object store.
//!
//! The `file` part goes to the object store chunk by chunk as it arrives
//! (`multer` parses the multipart stream; nothing is buffered whole), with
//! the 500 MiB limit enforced while streaming: past it the write is
//! abandoned, nothing is left stored, and the answer is 413 (the limit is
//! the table's `[limits] upload`). `purpose` chooses the key prefix, the
//! storage class and the retention: the table's `[purposes.*]` (omitted: the
//! one marked `default`).
//!
//! `purpose` may come before or after `file` in the form: when it comes
//! after, the stored object is moved to its prefix (a rename on the local
//! store, a server-side copy on S3).

use futures_util::TryStreamExt;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::json;

use crate::body::json;
use crate::ctx::{Ctx, Outcome};
use crate::errors::ApiError;
use crate::objects::{ByteStream, ObjectError};
use crate::router::Request;
use crate::spec::{Mode, PurposeSpec};
use crate::store::{AssetRecord, Record};

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

fn too_large(max: u64) -> ApiError {
    ApiError::PayloadTooLarge(format!("file is larger than {} MiB", max >> 20))
}

/// A multipart error: too large beyond `max`, else malformed.
fn multipart_error(max: u64) -> impl Fn(multer::Error) -> ApiError {
    move |e| match e {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            too_large(max)
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
    // Largest file accepted: the table's `[limits] upload` (spec §8). The
    // whole stream may be a little larger than the file (headers, purpose).
    let max = ctx.gw.table.limit(Mode::Upload);
    let purposes = ctx.gw.table.purposes;
    let max_stream = max + (1 << 20);
    crate::shape::refuse_declared_over(req.body(), max_stream).map_err(|_| too_large(max))?;
    let body = req.into_body().into_data_stream();
    let constraints = multer::Constraints::new().size_limit(
        multer::SizeLimit::new()
            .whole_stream(max_stream)
            .for_field("purpose", MAX_TEXT_FIELD as u64),
    );
    let mut form = multer::Multipart::with_constraints(body, boundary, constraints);

    let mut purpose_value: Option<String> = None;
    let mut stored: Option<(String, String, String, &'static str, u64)> = None; // key, file name, ext, kind, size
    let now = chrono::Utc::now();
    let id = uuid_like();
    let result: Result<(), ApiError> = async {
        while let Some(field) = form.next_field().await.map_err(multipart_error(max))? {
            match field.name() {
                Some("purpose") => {
                    let text = field.text().await.map_err(multipart_error(max))?;
                    purpose(purposes, Some(&text))?;
                    purpose_value = Some(text.trim().to_owned());
                }
                Some("file") if stored.is_none() => {
                    let file_name = field
                        .file_name()
                        .map(str::to_owned)
                        .filter(|n| !n.is_empty())
                        .ok_or_else(|| ApiError::BadRequest("file must have a file name".into()))?;
                    let (ext, kind) = extension(&file_name)?;
                    let p = purpose(purposes, purpose_value.as_deref())?;
                    let key = key_for(p, user_id, now, &id, &ext);
                    let ct = crate::fetch::content_type_for(&file_name);
                    let stream: ByteStream = Box::pin(field.map_err(std::io::Error::other));
                    let size = match ctx.gw.objects.put(&key, ct, stream, Some(max)).await {
                        Ok(n) => n,
                        Err(ObjectError::TooLarge { .. }) => return Err(too_large(max)),
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
                    while field.chunk().await.map_err(multipart_error(max))?.is_some() {}
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
    let p = purpose(purposes, purpose_value.as_deref())?;
    let final_key = key_for(p, user_id, now, &id, &ext);
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
    let committed = match ctx.gw.store.commit(vec![Record::Asset(record)]).await {
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
