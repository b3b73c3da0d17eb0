//! What a request may not ask of the provider, refused with 400 before
//! anything is held: fields the gateway prices set through
//! `additional_params`, a cache held by the provider, and content the body
//! refers to instead of carrying (no byte of the body would bound it).

use serde_json::{Map, Value};

use super::documents::{content_parts, Shape};
use gateway_base::errors::ApiError;

/// Fields `additional_params` may not set: the gateway prices the request
/// by them or depends on them (the answer's shape, its stream, its checks).
pub const GATEWAY_PRICED: &[&str] = &[
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "n",
    "best_of",
    "echo",
    "size",
    "speed",
    "input",
    "prompt",
    "messages",
    "text",
];

/// 400 when `additional_params` sets a field of [`GATEWAY_PRICED`], or
/// when the body names a cache held by the provider ([`PROVIDER_CACHES`]),
/// at its top level or in `additional_params`.
pub fn check_additional_params(body: &Map<String, Value>) -> Result<(), ApiError> {
    let extra = match body.get("additional_params") {
        None | Some(Value::Null) => None,
        Some(Value::Object(extra)) => Some(extra),
        Some(_) => {
            return Err(ApiError::BadRequest(
                "additional_params: must be an object".into(),
            ))
        }
    };
    if let Some(f) = extra.and_then(|e| GATEWAY_PRICED.iter().find(|f| e.contains_key(**f))) {
        return Err(ApiError::BadRequest(format!(
            "additional_params.{f}: may not be set in additional_params (the gateway prices the request by it); give it as a field of the request"
        )));
    }
    let top = Some(("", body));
    for (prefix, fields) in top
        .into_iter()
        .chain(extra.map(|e| ("additional_params.", e)))
    {
        if let Some(field) = provider_cache(fields) {
            return Err(ApiError::BadRequest(format!(
                "{prefix}{field}: a cache held by the provider may not be used through the gateway (it is not the caller's, and what it holds is billed unbounded)"
            )));
        }
    }
    Ok(())
}

/// Where a request can name a cache held by the provider: Gemini's
/// `cachedContent` (`cached_content` in Google's snake case), also under
/// `google` and `extra_body.google`, as Gemini's OpenAI-compatible API
/// reads it. Such a cache was made on the provider's account, not through
/// the gateway: any caller could use any of them by its name, and its
/// tokens, which no hold bounds, would be billed at the hold's bound.
pub const PROVIDER_CACHES: &[&str] = &["cachedContent", "cached_content"];

/// The dotted path of the first cache name [`PROVIDER_CACHES`] in `fields`.
fn provider_cache(fields: &Map<String, Value>) -> Option<String> {
    let at = |path: &[&str]| {
        let mut v = fields.get(*path.first()?)?;
        for k in &path[1..] {
            v = v.get(k)?;
        }
        (!v.is_null()).then(|| path.join("."))
    };
    [
        &[][..],
        &["google"],
        &["extra_body", "google"],
        &["extra_body"],
    ]
    .into_iter()
    .flat_map(|prefix| {
        PROVIDER_CACHES.iter().map(move |name| {
            let mut path = prefix.to_vec();
            path.push(*name);
            path
        })
    })
    .find_map(|path| at(&path))
}

/// 400 naming the first part of a chat body in `shape` that makes the
/// provider read content the body does not carry, so that no byte of it
/// bounds what the provider will count: a file held by the provider
/// (OpenAI's `file_id`, Anthropic's `source.file_id`, Gemini's Files API
/// or Cloud Storage `fileUri`; made on the provider's account, not through
/// the gateway, so not the caller's either), an Anthropic document or an
/// OpenAI `input_file` by URL (`file_url`), a Gemini `fileData` by URL
/// that is not an image (a video or a document: its frames and pages are
/// counted upstream, unbounded here). Images by URL stay (an image's count
/// has a ceiling: [`super::count::IMAGE_TOKENS`]); content carried in the body
/// (`file_data`, base64 sources, `inlineData`) is counted
/// ([`super::documents::inline_documents`]).
pub(super) fn check_references(body: &Map<String, Value>, shape: Shape) -> Result<(), ApiError> {
    for (at, part) in content_parts(body, shape) {
        if let Some((field, what)) = reference(shape, part) {
            return Err(ApiError::BadRequest(format!(
                "{at}.{field}: {what} cannot be used through the gateway (what the provider would read is not in the request, so it cannot be held for)"
            )));
        }
    }
    Ok(())
}

/// The field of `part` that refers to content held or fetched by the
/// provider, and what it is ([`check_references`]).
fn reference(shape: Shape, part: &Value) -> Option<(&'static str, &'static str)> {
    let str_at = |ptr: &str| part.pointer(ptr).and_then(Value::as_str);
    let held = "a file held by the provider";
    match shape {
        Shape::Responses
            if str_at("/type") == Some("input_image")
                && part.get("file_id").is_some_and(|f| !f.is_null()) =>
        {
            Some(("file_id", held))
        }
        Shape::OpenAi | Shape::Responses => {
            let file = matches!(str_at("/type"), Some("file" | "input_file"));
            if file && part.pointer("/file/file_id").is_some() {
                Some(("file.file_id", held))
            } else if file && part.get("file_id").is_some() {
                Some(("file_id", held))
            } else if file && part.get("file_url").is_some() {
                Some(("file_url", "a document by URL"))
            } else {
                None
            }
        }
        Shape::Anthropic => match (str_at("/type"), str_at("/source/type")) {
            (_, Some("file")) => Some(("source.file_id", held)),
            _ if part.pointer("/source/file_id").is_some() => Some(("source.file_id", held)),
            (Some("document"), Some("url")) => Some(("source.url", "a document by URL")),
            _ => None,
        },
        Shape::Gemini => {
            let (key, data) = ["fileData", "file_data"]
                .into_iter()
                .find_map(|k| part.get(k).map(|d| (k, d)))?;
            let get = |names: [&str; 2]| {
                names
                    .into_iter()
                    .find_map(|k| data.get(k))
                    .and_then(Value::as_str)
            };
            let uri = get(["fileUri", "file_uri"]).unwrap_or_default();
            let host = uri
                .strip_prefix("https://")
                .or_else(|| uri.strip_prefix("http://"))
                .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or_default());
            let image = get(["mimeType", "mime_type"]).is_some_and(|m| m.starts_with("image/"));
            let field = if key == "fileData" {
                "fileData"
            } else {
                "file_data"
            };
            match host {
                None => Some((field, held)),
                Some(h) if h.eq_ignore_ascii_case("generativelanguage.googleapis.com") => {
                    Some((field, held))
                }
                Some(_) if !image => Some((field, "a file by URL that is not an image")),
                Some(_) => None,
            }
        }
    }
}
