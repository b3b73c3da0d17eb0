//! `file_upload`, `file_list`, `file_get`, `file_content`, `file_delete`:
//! OpenAI's Files API (`/files`, issue #43), so that the `openai` SDK's
//! `files` work unchanged: the caller's files, a batch's input among them.
//!
//! A file is kept in the object store as the caller's, with an asset
//! record of class [`FILE_CLASS`] (`purpose` its purpose, `file_name` its
//! name); its id is `file-<n>`. The upload is multipart (`file`, `purpose`
//! = `batch` | `user_data`, in either order), the file streamed into the
//! object store as it arrives (never held whole) under
//! `GATEWAY_MAX_FILE_BYTES` (413 past it, the partial object removed); a
//! bad `purpose` is a 400 and whatever was stored is removed. A file
//! expires as OpenAI's do: `expires_after[anchor]` (`created_at`) and
//! `expires_after[seconds]` (3,600 to 2,592,000) set when; without them a
//! `batch` file expires after 30 days and a `user_data` file is kept; the
//! retention sweeper removes an expired file (404 from then on). `DELETE`
//! removes the object at once, then marks the record deleted. The content is streamed back as
//! it was stored. Another user's id, an unknown or a deleted one: 404
//! ("No such File object"), as OpenAI answers it.

use futures_util::TryStreamExt;
use http::{HeaderValue, StatusCode};
use serde_json::{json, Value};

use super::common::{self, query_str, query_u32};
use crate::ctx::{Ctx, Outcome};
use gateway_base::body::{json, Request};
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;
use gateway_store::{AssetRecord, AssetRow, Assets};

use super::common::FILE_CLASS;
/// Object key prefix of files (`files/<user>/<yyyy/mm/dd>/<random>`).
const PREFIX: &str = "files/";
/// The purposes a file may have.
const PURPOSES: [&str; 2] = ["batch", "user_data"];
/// Largest text field (`purpose`).
const MAX_TEXT_FIELD: u64 = 64;
/// A `batch` file's life when the upload sets none (OpenAI's default).
const BATCH_FILE_SECS: i64 = 30 * 86_400;
/// The bounds of `expires_after[seconds]`.
const EXPIRES_AFTER: std::ops::RangeInclusive<i64> = 3_600..=2_592_000;
/// Most files a list answers at once (OpenAI's limit).
const MAX_LIST: u32 = 10_000;

/// 404 as OpenAI words it.
fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("No such File object: {id}"))
}

/// A file as answered (OpenAI's `FileObject`).
fn file_json(a: &AssetRow) -> Value {
    let unix = |t: &str| chrono::DateTime::parse_from_rfc3339(t).map(|t| t.timestamp());
    let created = unix(&a.created_at).unwrap_or(0);
    let expires = a.expires_at.as_deref().and_then(|t| unix(t).ok());
    json!({
        "id": format!("file-{}", a.id),
        "object": "file",
        "bytes": a.size_bytes,
        "created_at": created,
        "filename": a.file_name,
        "purpose": a.purpose,
        "status": "processed",
        "expires_at": expires,
        "status_details": null,
    })
}

/// The file part as stored.
struct Stored {
    key: String,
    name: String,
    content_type: String,
    size: u64,
}

/// `file_upload`: the form read (the file streamed into the object
/// store), its purpose checked, its asset record committed, the answer.
/// On any failure the stored object is removed.
pub async fn upload(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let user_id = ctx.require_user("file upload")?;
    let max = ctx.gw.config.max_file_bytes;
    let limits = multer::SizeLimit::new()
        .for_field("purpose", MAX_TEXT_FIELD)
        .for_field("expires_after[anchor]", MAX_TEXT_FIELD)
        .for_field("expires_after[seconds]", MAX_TEXT_FIELD);
    let form = common::open_multipart(req, max, limits)?;
    let mut fields = Fields::default();
    let mut stored = None;
    let read = read_form(ctx, user_id, form, &mut fields, &mut stored).await;
    let outcome = match read {
        Ok(()) => finish(ctx, user_id, fields, stored.as_ref()).await,
        Err(e) => Err(e),
    };
    if outcome.is_err() {
        if let Some(s) = &stored {
            let _ = ctx.gw.objects.delete(&s.key).await;
        }
    }
    outcome
}

/// The upload's text fields.
#[derive(Default)]
struct Fields {
    purpose: Option<String>,
    anchor: Option<String>,
    seconds: Option<String>,
}

/// Reads the form: `purpose`, `expires_after[…]`, one `file` (streamed
/// into the object store), other fields read and ignored.
async fn read_form(
    ctx: &Ctx,
    user_id: i64,
    mut form: multer::Multipart<'static>,
    fields: &mut Fields,
    stored: &mut Option<Stored>,
) -> Result<(), ApiError> {
    let max = ctx.gw.config.max_file_bytes;
    let bad = |e| common::multipart_error(e, max);
    while let Some(field) = form.next_field().await.map_err(bad)? {
        let slot = match field.name() {
            Some("purpose") => Some(&mut fields.purpose),
            Some("expires_after[anchor]") => Some(&mut fields.anchor),
            Some("expires_after[seconds]") => Some(&mut fields.seconds),
            _ => None,
        };
        if let Some(slot) = slot {
            *slot = Some(field.text().await.map_err(bad)?.trim().to_owned());
            continue;
        }
        match field.name() {
            Some("file") if stored.is_none() => {
                *stored = Some(store_file(ctx, user_id, field).await?);
            }
            Some("file") => return Err(ApiError::BadRequest("only one file per request".into())),
            _ => {
                let mut field = field;
                while field.chunk().await.map_err(bad)?.is_some() {}
            }
        }
    }
    Ok(())
}

/// Streams the part into the object store under the size limit.
async fn store_file(
    ctx: &Ctx,
    user_id: i64,
    field: multer::Field<'static>,
) -> Result<Stored, ApiError> {
    let max = ctx.gw.config.max_file_bytes;
    let name = field
        .file_name()
        .map(str::to_owned)
        .unwrap_or_else(|| "file".to_owned());
    let content_type = field
        .content_type()
        .map(|m| m.essence_str().to_owned())
        .unwrap_or_else(|| "application/octet-stream".to_owned());
    let now = chrono::Utc::now();
    let key = format!(
        "{PREFIX}{user_id}/{}/{}",
        now.format("%Y/%m/%d"),
        common::random_hex_id()
    );
    let body: gateway_adapters::objects::ByteStream =
        Box::pin(field.map_err(common::field_io_error));
    let size = ctx
        .gw
        .objects
        .put(&key, &content_type, body, Some(max))
        .await
        .map_err(|e| common::put_failed(e, max, "storing a file"))?;
    Ok(Stored {
        key,
        name,
        content_type,
        size,
    })
}

/// The form read whole: a known purpose and a file; the record committed.
async fn finish(
    ctx: &Ctx,
    user_id: i64,
    fields: Fields,
    stored: Option<&Stored>,
) -> Result<Outcome, ApiError> {
    let purpose = match fields.purpose.as_deref() {
        Some(p) if PURPOSES.contains(&p) => p.to_owned(),
        Some(p) => {
            return Err(ApiError::BadRequest(format!(
                "purpose: {p:?} is not one of batch, user_data"
            )))
        }
        None => return Err(ApiError::BadRequest("purpose: required".into())),
    };
    let life = expires_after(&fields, &purpose)?;
    let s = stored.ok_or_else(|| ApiError::BadRequest("file: required".into()))?;
    let now = chrono::Utc::now();
    let record = AssetRecord {
        owner_id: Some(user_id),
        object_key: s.key.clone(),
        class: FILE_CLASS.into(),
        purpose: Some(purpose),
        size_bytes: s.size,
        content_type: s.content_type.clone(),
        file_name: Some(s.name.clone()),
        source: Some(ctx.request_id.clone()),
        created_at: gateway_store::rfc3339(now),
        expires_at: life.map(|secs| gateway_store::rfc3339(now + chrono::Duration::seconds(secs))),
        pack: None,
        pack_offset: None,
    };
    let row = common::commit_owned_asset(ctx, record).await?;
    Ok(Outcome::new(json(StatusCode::OK, &file_json(&row)), None))
}

/// A file's life in seconds from its creation (`None`: kept until
/// deleted): `expires_after`, else 30 days for a `batch` file.
fn expires_after(f: &Fields, purpose: &str) -> Result<Option<i64>, ApiError> {
    let bad = |field: &str, why: &str| ApiError::BadRequest(format!("{field}: {why}"));
    match (f.anchor.as_deref(), f.seconds.as_deref()) {
        (None, None) => Ok((purpose == "batch").then_some(BATCH_FILE_SECS)),
        (Some("created_at"), Some(s)) => match s.parse::<i64>() {
            Ok(n) if EXPIRES_AFTER.contains(&n) => Ok(Some(n)),
            _ => Err(bad(
                "expires_after[seconds]",
                "must be a whole number from 3600 to 2592000",
            )),
        },
        (Some("created_at"), None) => Err(bad(
            "expires_after[seconds]",
            "required with expires_after[anchor]",
        )),
        (Some(_), _) => Err(bad("expires_after[anchor]", "must be created_at")),
        (None, Some(_)) => Err(bad(
            "expires_after[anchor]",
            "required with expires_after[seconds]",
        )),
    }
}

/// The caller's live file named by `{file_id}` (404 otherwise).
pub async fn own_file(ctx: &Ctx, params: &PathParams) -> Result<(i64, AssetRow), ApiError> {
    let user = ctx.require_user("file")?;
    let given = params
        .get("file_id")
        .map(|v| v.into_owned())
        .unwrap_or_default();
    let id = given
        .strip_prefix("file-")
        .and_then(|n| n.parse::<i64>().ok())
        .ok_or_else(|| not_found(&given))?;
    let now = gateway_store::now_rfc3339();
    let row = ctx
        .gw
        .store
        .blocking(move |s| s.live_owned_asset(user, FILE_CLASS, id, &now))
        .await?
        .ok_or_else(|| not_found(&given))?;
    Ok((user, row))
}

/// `file_get`: the file's object.
pub async fn get(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let (_, row) = own_file(ctx, params).await?;
    Ok(Outcome::new(json(StatusCode::OK, &file_json(&row)), None))
}

/// `file_content`: the file's bytes, streamed from the object store.
pub async fn content(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let (_, row) = own_file(ctx, params).await?;
    let body = ctx
        .gw
        .objects
        .get(&row.object_key, None)
        .await
        .map_err(|e| crate::generated::stored_failed("reading a file's object".into(), e))?;
    let mut resp = http::Response::new(gateway_adapters::objects::stream_body(body.stream));
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&row.content_type) {
        h.insert(http::header::CONTENT_TYPE, v);
    }
    h.insert(
        http::header::CONTENT_LENGTH,
        HeaderValue::from(body.total_size),
    );
    Ok(Outcome::new(resp, None))
}

/// `file_list`: the caller's live files (`purpose` to filter; `order`
/// `desc` (default) or `asc` by creation; `after` a file id; `limit`
/// 1..=10,000, default 10,000), in OpenAI's list shape.
pub async fn list(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let user = ctx.require_user("file list")?;
    let limit = query_u32(ctx, "limit", MAX_LIST).clamp(1, MAX_LIST) as usize;
    let purpose = query_str(ctx, "purpose").map(str::to_owned);
    let asc = query_str(ctx, "order") == Some("asc");
    let after = query_str(ctx, "after").map(str::to_owned);
    let now = gateway_store::now_rfc3339();
    let (mut rows, _) = ctx
        .gw
        .store
        .blocking(move |s| s.live_owned_assets(user, FILE_CLASS, &now, MAX_LIST, 0))
        .await?;
    rows.retain(|r| purpose.is_none() || r.purpose == purpose);
    rows.sort_by_key(|r| r.id);
    if !asc {
        rows.reverse();
    }
    if let Some(a) = after {
        let at = rows.iter().position(|r| format!("file-{}", r.id) == a);
        rows.drain(..at.map_or(0, |i| i + 1));
    }
    let has_more = rows.len() > limit;
    rows.truncate(limit);
    let data: Vec<Value> = rows.iter().map(file_json).collect();
    let v = json!({
        "object": "list",
        "first_id": data.first().map(|f| f["id"].clone()),
        "last_id": data.last().map(|f| f["id"].clone()),
        "has_more": has_more,
        "data": data,
    });
    Ok(Outcome::new(json(StatusCode::OK, &v), None))
}

/// `file_delete`: the object deleted, then the record marked deleted.
pub async fn delete(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let (user, row) = own_file(ctx, params).await?;
    let name = format!("file-{}", row.id);
    if !common::delete_owned_asset(ctx, user, FILE_CLASS, &row).await? {
        return Err(not_found(&name));
    }
    let v = json!({"id": name, "object": "file", "deleted": true});
    Ok(Outcome::new(json(StatusCode::OK, &v), None))
}
