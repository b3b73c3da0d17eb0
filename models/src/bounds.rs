//! What a request can make a model provider do: the upper bound a credit
//! hold is computed from (see docs/models.md, "Credits.").
//!
//! The rule: the bound is computed from the body **actually sent upstream**
//! (after `additional_params` are merged in by the adapter) and counts every
//! byte that reaches the provider: messages of every role and part, `name`,
//! `tool_calls`, `tools`, `functions`, `system`, `response_format` schemas,
//! whatever field the caller adds. A byte-level tokenizer never makes more
//! tokens than bytes, so one token per byte of JSON text (keys, strings,
//! numbers) is an upper bound of any provider's count.
//!
//! **Images.** No shape brings an object's count below the bytes it
//! carries, but an image's own bytes (its URL, its base64 data) are not
//! text: an image part counts [`IMAGE_TOKENS`] (the largest provider rule)
//! plus the bytes of everything else it holds (text put beside the image
//! still counts), and only where its provider's API reads an image
//! ([`Shape`], [`crate::providers::Adapter::shape`]): an OpenAI `image_url`
//! part of a message's `content`; an Anthropic `image` block of a message's
//! `content`, of a `tool_result` block's `content` or of `system`; a Gemini
//! `inlineData` / `fileData` part of `contents[].parts` or
//! `systemInstruction.parts` (its data left out only for an `image/` type:
//! a document or a video is not priced as an image). Anywhere else — tools
//! and their schemas' `examples`, `default`, `enum`, metadata, a message
//! object itself, unknown fields, another dialect's image shape — an object
//! counts its JSON bytes whatever its `type` says. Completions, embeddings
//! and image prompts have no image part: every byte counts.
//!
//! **Inline documents.** A PDF carried in the body (an OpenAI `file` /
//! `input_file` part's `file_data`, an Anthropic `document` block of a
//! `base64` source, a Gemini `inlineData` part of `application/pdf`; a
//! base64 beginning `%PDF` is one too) is billed by its pages: it counts
//! [`documents::Pdf::tokens`] (an image a page plus every byte of its
//! content decompressed) plus the bytes of the part beside its data, and
//! is refused when it cannot be read within the limits
//! ([`documents`]). Other inline documents: an inline video is refused
//! (billed by its frames, which a still video's bytes do not bound), and
//! so is any other type but text and audio (a Word or OpenDocument file is
//! zipped text, a presentation is rendered by slides); text counts its
//! bytes (its base64 is longer); audio too (billed by seconds,
//! Gemini 32 tokens a second, OpenAI's input audio about 10, below the
//! base64 bytes a second of WAV, MP3 or Opus even at their lowest rates,
//! hundreds a second; a FLAC of silence in its largest blocks could carry
//! fewer: not bounded here, a known gap).
//!
//! Fields that raise the work past that bound are folded into it or refused
//! with 400 naming the field: `max_tokens` / `max_completion_tokens` (the
//! reply's length), `n` (choices; images: how many), `best_of`
//! (completions generated upstream), `echo` (the prompt again in the reply).
//! `additional_params` may not set a field the gateway prices or depends on
//! ([`GATEWAY_PRICED`]), and no request may name a cache held by the
//! provider ([`PROVIDER_CACHES`]: Gemini's `cachedContent`), at its top
//! level or in `additional_params`: 400 naming it, before anything is held
//! or called. Nor may a chat body make the provider read content it does
//! not carry (a file held by the provider, a document or a video by URL:
//! `check_references`), for no byte of the body would bound it.
//!
//! A quantity the provider reports is then bounded by the hold's bound
//! ([`Bound::tokens`], [`Bound::images`]): an implausible one is billed at
//! the bound and logged at error level.
//!
//! The functions take the upstream body of any JSON model API: [`chat`]
//! counts every byte of it in the provider's [`Shape`] (OpenAI's,
//! Anthropic's Messages or Gemini's `generateContent` body).

use serde_json::{Map, Value};

use gateway_base::errors::ApiError;

pub mod documents;

pub use documents::Shape;
use documents::{content_parts, inline_documents, PAGE_TOKENS};

// A PDF's page is read as an image: never counted less than one.
const _: () = assert!(PAGE_TOKENS >= IMAGE_TOKENS);

/// Tokens counted for one image part: the largest of the providers' rules we
/// know (OpenAI high detail: 85 + 170 × 8 tiles = 1445; Anthropic: about
/// 1.15 megapixels ÷ 750 ≈ 1600).
pub const IMAGE_TOKENS: u64 = 1600;
/// Tokens of the chat format per message (role markers, separators).
pub const PER_MESSAGE_TOKENS: u64 = 4;
/// Tokens of the chat format per request (the reply's priming).
pub const PER_REQUEST_TOKENS: u64 = 8;
/// Output tokens held for when neither `max_tokens` nor the model's
/// context window bounds the reply.
pub const DEFAULT_MAX_OUTPUT: u64 = 4096;
/// Most choices (`n`, `best_of`) a request may ask for.
pub const MAX_CHOICES: u64 = 128;
/// Most images one request may ask for.
pub const MAX_IMAGES: u64 = 10;

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

/// What one request can make the provider do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bound {
    /// Input (prompt) tokens, at most.
    pub input: u64,
    /// Output tokens over every choice, at most.
    pub output: u64,
    /// Images, at most.
    pub images: u64,
}

impl Bound {
    /// Provider-reported tokens bounded by this bound: an implausible count
    /// is billed at the bound and logged at error level.
    pub fn tokens(&self, input: u64, output: u64) -> (u64, u64) {
        (
            self.at_most("input tokens", input, self.input),
            self.at_most("output tokens", output, self.output),
        )
    }

    /// A provider-reported image count bounded by this bound.
    pub fn images(&self, n: u64) -> u64 {
        self.at_most("images", n, self.images)
    }

    fn at_most(&self, what: &'static str, reported: u64, bound: u64) -> u64 {
        if reported > bound {
            tracing::error!(
                what,
                reported,
                bound,
                "the provider reported more than the request could produce; billing the bound"
            );
            bound
        } else {
            reported
        }
    }
}

/// Seconds of audio to bill: the provider's `reported` figure bounded by
/// what the gateway `measured` of the audio itself. A reported length
/// beyond the measured one (by more than a millisecond of rounding) is
/// implausible: billed at the measured length, logged at error level.
/// `None` when nothing was measured (the caller answers 502: a reported
/// figure alone is never billed).
pub fn measured_at_most(
    reported: Option<rust_decimal::Decimal>,
    measured: Option<rust_decimal::Decimal>,
) -> Option<rust_decimal::Decimal> {
    let measured = measured?;
    match reported {
        Some(r) if r > measured + rust_decimal::Decimal::new(1, 3) => {
            tracing::error!(%r, %measured, "the provider reported more seconds than the audio holds; billing the measured length");
            Some(measured)
        }
        Some(r) => Some(r),
        None => Some(measured),
    }
}

/// A decimal quantity the provider reported, bounded by what the request
/// could produce: beyond `bound`, billed at the bound, logged at error.
pub fn reported_at_most(
    what: &'static str,
    reported: rust_decimal::Decimal,
    bound: rust_decimal::Decimal,
) -> rust_decimal::Decimal {
    if reported > bound {
        tracing::error!(what, %reported, %bound, "the provider reported more than the request could produce; billing the bound");
        bound
    } else {
        reported
    }
}

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

/// Tokens of everything in `v` that reaches the provider: one per byte of
/// its JSON text (keys, strings as escaped, numbers, punctuation: at least
/// what any provider renders a schema or an argument to), whatever its
/// objects say they are: no shape counts less than its bytes here (images
/// are recognised only where their dialect puts them, [`Shape`]).
pub fn counted_tokens(v: &Value) -> u64 {
    match v {
        Value::Null => 4,
        Value::Bool(b) => 4 + u64::from(!*b),
        Value::Number(n) => number_len(n),
        Value::String(s) => string_len(s),
        Value::Array(_) => each(v, counted_tokens),
        Value::Object(_) => fields(v, |_, v| counted_tokens(v)),
    }
}

/// A list's bytes, each item counted by `item` (a non-list: its bytes).
fn each(v: &Value, item: impl Fn(&Value) -> u64) -> u64 {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|v| item(v).saturating_add(1))
            .fold(2u64, u64::saturating_add),
        other => counted_tokens(other),
    }
}

/// An object's bytes, each value counted by `value` (given its key; a
/// non-object: its bytes).
fn fields(v: &Value, value: impl Fn(&str, &Value) -> u64) -> u64 {
    match v {
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| (string_len(k) + 2).saturating_add(value(k, v)))
            .fold(2u64, u64::saturating_add),
        other => counted_tokens(other),
    }
}

/// Bytes of a JSON number's text, counted without writing it out (an
/// embedding's token array holds thousands).
fn number_len(n: &serde_json::Number) -> u64 {
    struct Count(u64);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len() as u64;
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = std::fmt::Write::write_fmt(&mut c, format_args!("{n}"));
    c.0
}

/// Bytes of `s` as a JSON string: quotes and escapes included.
fn string_len(s: &str) -> u64 {
    let escapes: u64 = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum();
    s.len() as u64 + 2 + escapes
}

/// An image part's tokens: [`IMAGE_TOKENS`] plus the bytes of everything
/// it holds but the image itself (the URL or base64 data, the file's id),
/// so text put beside an image still counts; `None`: not an image of
/// `shape`. The image's own field is left out only when it is a string a
/// provider reads as an image, never as text (Gemini: of an `image/` type).
fn image_tokens(shape: Shape, part: &Value) -> Option<u64> {
    let str_at = |ptr: &str| part.pointer(ptr).and_then(Value::as_str);
    let kind = part.get("type").and_then(Value::as_str);
    let payload: Vec<&str> = match shape {
        Shape::OpenAi if kind == Some("image_url") => ["/image_url", "/image_url/url"]
            .into_iter()
            .filter_map(str_at)
            .collect(),
        Shape::Anthropic if kind == Some("image") => {
            ["/source/data", "/source/url", "/source/file_id"]
                .into_iter()
                .filter_map(str_at)
                .collect()
        }
        Shape::Gemini => {
            let data = ["inlineData", "inline_data", "fileData", "file_data"]
                .into_iter()
                .find_map(|k| part.get(k))?;
            let mime = ["mimeType", "mime_type"]
                .into_iter()
                .find_map(|k| data.get(k))
                .and_then(Value::as_str);
            match mime {
                Some(m) if m.starts_with("image/") => ["data", "fileUri", "file_uri"]
                    .into_iter()
                    .filter_map(|k| data.get(k).and_then(Value::as_str))
                    .collect(),
                _ => Vec::new(),
            }
        }
        _ => return None,
    };
    let image = payload.into_iter().map(string_len).sum::<u64>();
    Some(IMAGE_TOKENS.saturating_add(counted_tokens(part).saturating_sub(image)))
}

/// A content list's tokens in `shape`: each image part by
/// [`image_tokens`], an Anthropic `tool_result` block's own `content`
/// likewise, anything else its bytes.
fn parts_tokens(shape: Shape, v: &Value) -> u64 {
    each(v, |part| {
        image_tokens(shape, part).unwrap_or_else(|| {
            let result = part.get("type").and_then(Value::as_str) == Some("tool_result");
            match shape {
                Shape::Anthropic if result => fields(part, |k, v| match k {
                    "content" => each(v, |b| {
                        image_tokens(shape, b).unwrap_or_else(|| counted_tokens(b))
                    }),
                    _ => counted_tokens(v),
                }),
                _ => counted_tokens(part),
            }
        })
    })
}

/// Tokens of an upstream body's field `k` (value `v`): its bytes, with the
/// image parts of its content lists where `shape` has them.
fn field_tokens(shape: Option<Shape>, k: &str, v: &Value) -> u64 {
    // The objects of `v`'s list whose field `list` is a content list.
    let lists = |shape, list: &'static str| {
        each(v, |item| {
            fields(item, |k, v| match k == list {
                true => parts_tokens(shape, v),
                false => counted_tokens(v),
            })
        })
    };
    match (shape, k) {
        (Some(s @ (Shape::OpenAi | Shape::Anthropic)), "messages") => lists(s, "content"),
        (Some(s @ Shape::Anthropic), "system") => parts_tokens(s, v),
        (Some(s @ Shape::Gemini), "contents") => lists(s, "parts"),
        (Some(s @ Shape::Gemini), "systemInstruction") => fields(v, |k, v| match k {
            "parts" => parts_tokens(s, v),
            _ => counted_tokens(v),
        }),
        _ => counted_tokens(v),
    }
}

/// The whole upstream body's tokens except the model's name (which the
/// gateway chose), plus the chat format's overhead per message; images
/// only where `shape` has them (`None`: nowhere, every byte counts).
fn input_tokens(body: &Map<String, Value>, shape: Option<Shape>) -> u64 {
    // Gemini's `contents` are its messages.
    let messages = body
        .get("messages")
        .or_else(|| body.get("contents"))
        .and_then(Value::as_array)
        .map_or(0, |m| m.len() as u64);
    body.iter()
        .filter(|(k, _)| k.as_str() != "model")
        .map(|(k, v)| (string_len(k) + 2).saturating_add(field_tokens(shape, k, v)))
        .fold(0u64, u64::saturating_add)
        .saturating_add(PER_MESSAGE_TOKENS * messages + PER_REQUEST_TOKENS)
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
/// has a ceiling: [`IMAGE_TOKENS`]); content carried in the body
/// (`file_data`, base64 sources, `inlineData`) is counted
/// ([`documents::inline_documents`]).
fn check_references(body: &Map<String, Value>, shape: Shape) -> Result<(), ApiError> {
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
        Shape::OpenAi => {
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

/// An optional field that must be a whole number in `range`; 400 naming it.
fn whole(
    body: &Map<String, Value>,
    field: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<Option<u64>, ApiError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|n| range.contains(n))
            .map(Some)
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "{field}: must be a whole number from {} to {}",
                    range.start(),
                    range.end()
                ))
            }),
    }
}

/// `stream`, when given, must be a boolean (a provider reading `"true"` as
/// true would stream an answer the gateway does not relay).
fn check_stream(body: &Map<String, Value>) -> Result<(), ApiError> {
    match body.get("stream") {
        None | Some(Value::Null | Value::Bool(_)) => Ok(()),
        Some(_) => Err(ApiError::BadRequest("stream: must be true or false".into())),
    }
}

/// The reply's length per choice: the largest of the length fields given,
/// else the model's context window, else [`DEFAULT_MAX_OUTPUT`].
fn max_output(body: &Map<String, Value>, context_window: Option<u64>) -> Result<u64, ApiError> {
    let mut given = None;
    for f in ["max_tokens", "max_completion_tokens", "max_output_tokens"] {
        if let Some(n) = whole(body, f, 0..=u32::MAX as u64)? {
            given = Some(given.map_or(n, |g: u64| g.max(n)));
        }
    }
    // Gemini's `generationConfig.maxOutputTokens`.
    if let Some(Value::Object(gc)) = body.get("generationConfig") {
        if let Some(n) = whole(gc, "maxOutputTokens", 0..=u32::MAX as u64)? {
            given = Some(given.map_or(n, |g: u64| g.max(n)));
        }
    }
    Ok(given.or(context_window).unwrap_or(DEFAULT_MAX_OUTPUT))
}

/// Chat, from the upstream body in its provider's `shape`.
pub fn chat(
    body: &Map<String, Value>,
    shape: Shape,
    context_window: Option<u64>,
) -> Result<Bound, ApiError> {
    check_stream(body)?;
    check_references(body, shape)?;
    let (pages, data) = inline_documents(body, shape)?;
    let mut choices = whole(body, "n", 1..=MAX_CHOICES)?.unwrap_or(1);
    if let Some(Value::Object(gc)) = body.get("generationConfig") {
        choices = choices.max(whole(gc, "candidateCount", 1..=MAX_CHOICES)?.unwrap_or(1));
    }
    let per_choice = max_output(body, context_window)?;
    Ok(Bound {
        input: input_tokens(body, Some(shape))
            .saturating_sub(data)
            .saturating_add(pages),
        output: per_choice.saturating_mul(choices),
        images: 0,
    })
}

/// Text completions, from the upstream body: `best_of` completions are
/// generated (and billed) upstream; `echo` repeats the prompt in each.
pub fn completion(
    body: &Map<String, Value>,
    context_window: Option<u64>,
) -> Result<Bound, ApiError> {
    check_stream(body)?;
    let n = whole(body, "n", 1..=MAX_CHOICES)?.unwrap_or(1);
    let best_of = whole(body, "best_of", 1..=MAX_CHOICES)?.unwrap_or(1);
    let choices = n.max(best_of);
    let input = input_tokens(body, None);
    let mut per_choice = max_output(body, context_window)?;
    match body.get("echo") {
        None | Some(Value::Null | Value::Bool(false)) => {}
        Some(Value::Bool(true)) => per_choice = per_choice.saturating_add(input),
        Some(_) => {
            return Err(ApiError::BadRequest("echo: must be true or false".into()));
        }
    }
    Ok(Bound {
        input,
        output: per_choice.saturating_mul(choices),
        images: 0,
    })
}

/// Embeddings, from the upstream body: every byte of `input` (a token array
/// counts one per number, already below its text's bytes).
pub fn embedding(body: &Map<String, Value>) -> Result<Bound, ApiError> {
    Ok(Bound {
        input: input_tokens(body, None),
        output: 0,
        images: 0,
    })
}

/// Image generation, from the upstream body: `n` images (1 when absent).
pub fn image(body: &Map<String, Value>) -> Result<Bound, ApiError> {
    let n = whole(body, "n", 1..=MAX_IMAGES)?.unwrap_or(1);
    Ok(Bound {
        input: input_tokens(body, None),
        output: 0,
        images: n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn input(body: Value, shape: Shape) -> u64 {
        chat(&obj(body), shape, None).unwrap().input
    }

    #[test]
    fn every_field_counts_and_images_by_rule() {
        let small = input(
            json!({"messages": [{"role": "user", "content": "hi"}]}),
            Shape::OpenAi,
        );
        let big = input(
            json!({"messages": [{"role": "user", "content": "hi", "name": "x".repeat(1000)}],
                "tools": [{"type": "function", "function": {"name": "f", "description": "d".repeat(5000)}}]}),
            Shape::OpenAi,
        );
        assert!(big >= small + 6000, "{big} vs {small}");
        let data = format!("data:image/png;base64,{}", "A".repeat(100_000));
        for (body, shape) in [
            (
                json!({"messages": [{"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": data, "detail": "high"}}]}]}),
                Shape::OpenAi,
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": data}]}]}),
                Shape::OpenAi,
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                    "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}]}]}]}),
                Shape::Anthropic,
            ),
            (
                json!({"system": [{"type": "image", "source": {"type": "url", "url": data}}], "messages": []}),
                Shape::Anthropic,
            ),
            (
                json!({"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": data}}]}]}),
                Shape::Gemini,
            ),
            (
                json!({"systemInstruction": {"parts": [{"fileData": {"mimeType": "image/png", "fileUri": format!("https://x.test/{data}.png")}}]}, "contents": []}),
                Shape::Gemini,
            ),
        ] {
            let n = input(body.clone(), shape);
            assert!(n >= IMAGE_TOKENS && n < IMAGE_TOKENS + 200, "{shape:?} {n}");
        }
    }

    /// No shape counts less than its bytes: an image-typed object out of
    /// an image's place, another dialect's image, text beside an image,
    /// inline data that is not an image.
    #[test]
    fn an_image_shape_never_hides_its_bytes() {
        let text = "x".repeat(50_000);
        let hiders = [
            json!({"type": "image", "text": text}),
            json!({"type": "image_url", "text": text}),
            json!({"type": "input_image", "text": text}),
            json!({"inlineData": {"data": text}}),
            json!({"fileData": {"fileUri": text}}),
        ];
        for shape in [Shape::OpenAi, Shape::Anthropic, Shape::Gemini] {
            for h in &hiders {
                for body in [
                    json!({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function",
                        "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string",
                            "examples": [h], "default": h, "enum": [h]}}}}}]}),
                    json!({"messages": [{"role": "user", "content": "hi", "metadata": h}], "x": h}),
                    json!({"messages": [{"role": "user", "type": "image_url", "content": text}]}),
                    json!({"messages": [h], "contents": [h], "system": "s", "systemInstruction": h}),
                    json!({"contents": [{"role": "user", "parts": [{"text": "hi"}], "x": h}]}),
                ] {
                    let n = input(body.clone(), shape);
                    assert!(n >= 50_000, "{shape:?}: {n} for {body}");
                }
            }
        }
        let beside = [
            (
                json!({"messages": [{"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": "https://x/i.png", "note": text}}]}]}),
                Shape::OpenAi,
            ),
            (
                json!({"messages": [{"role": "user", "content": [
                    {"type": "image_url", "image_url": "https://x/i.png", "text": text}]}]}),
                Shape::OpenAi,
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}, "cache_control": {"x": text}}]}]}),
                Shape::Anthropic,
            ),
            (
                json!({"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "AAAA"}, "text": text}]}]}),
                Shape::Gemini,
            ),
            (
                json!({"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "text/plain", "data": text}}]}]}),
                Shape::Gemini,
            ),
        ];
        for (body, shape) in beside {
            let n = input(body.clone(), shape);
            assert!(n >= 50_000 + IMAGE_TOKENS, "{shape:?}: {n} for {body}");
        }
        // Another dialect's image is not an image: its bytes.
        let foreign = [
            (
                json!({"messages": [{"role": "user", "content": [{"type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": text}}]}]}),
                Shape::OpenAi,
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"inlineData": {"mimeType": "image/png", "data": text}}]}]}),
                Shape::Anthropic,
            ),
        ];
        for (body, shape) in foreign {
            let n = input(body.clone(), shape);
            assert!(n >= 50_000, "{shape:?}: {n} for {body}");
        }
    }

    #[test]
    fn counted_tokens_are_the_json_text_bytes() {
        for v in [
            json!({"a": "b\"c\n\u{1}", "n": [1, 2.5, null, true, false], "o": {}}),
            json!(["é", "\\", ""]),
        ] {
            let (counted, text) = (counted_tokens(&v), v.to_string().len() as u64);
            assert!(
                counted >= text && counted <= text + 8,
                "{v}: {counted} vs {text}"
            );
        }
    }

    #[test]
    fn work_raising_fields_fold_or_refuse() {
        let b = chat(
            &obj(json!({"messages": [], "max_tokens": 10, "max_completion_tokens": 40, "n": 3})),
            Shape::OpenAi,
            None,
        )
        .unwrap();
        assert_eq!(b.output, 120);
        let b = completion(
            &obj(json!({"prompt": "x", "max_tokens": 10, "best_of": 5, "n": 2})),
            None,
        )
        .unwrap();
        assert_eq!(b.output, 50);
        let b = chat(&obj(json!({"messages": []})), Shape::Gemini, Some(8192)).unwrap();
        assert_eq!(b.output, 8192);
        for (bad, field) in [
            (json!({"n": 0}), "n:"),
            (json!({"n": "3"}), "n:"),
            (json!({"max_tokens": 1.5}), "max_tokens:"),
            (json!({"max_tokens": -1}), "max_tokens:"),
            (json!({"stream": "true"}), "stream:"),
        ] {
            let e = chat(&obj(bad.clone()), Shape::Anthropic, None).unwrap_err();
            assert!(e.to_string().contains(field), "{bad}: {e}");
        }
        assert!(image(&obj(json!({"n": 11}))).is_err());
        assert_eq!(image(&obj(json!({"n": 4}))).unwrap().images, 4);
    }

    #[test]
    fn additional_params_may_not_set_priced_fields() {
        for f in ["max_tokens", "stream", "n", "best_of"] {
            let e =
                check_additional_params(&obj(json!({"additional_params": {f: 1}}))).unwrap_err();
            assert!(e.to_string().contains(&format!("additional_params.{f}")));
        }
        assert!(check_additional_params(&obj(
            json!({"additional_params": {"seed": 1, "tools": []}})
        ))
        .is_ok());
    }

    #[test]
    fn a_providers_cache_may_not_be_named() {
        for (body, field) in [
            (json!({"cachedContent": "c"}), "cachedContent:"),
            (json!({"cached_content": "c"}), "cached_content:"),
            (
                json!({"additional_params": {"cachedContent": "c"}}),
                "additional_params.cachedContent:",
            ),
            (
                json!({"additional_params": {"extra_body": {"google": {"cached_content": "c"}}}}),
                "additional_params.extra_body.google.cached_content:",
            ),
            (
                json!({"google": {"cachedContent": "c"}}),
                "google.cachedContent:",
            ),
        ] {
            let e = check_additional_params(&obj(body.clone())).unwrap_err();
            assert!(e.to_string().contains(field), "{body}: {e}");
        }
        assert!(check_additional_params(&obj(
            json!({"cachedContent": null, "google": {"safety": 1}, "additional_params": {"labels": {}}})
        ))
        .is_ok());
    }

    #[test]
    fn content_the_body_does_not_carry_is_refused_where_it_is_read() {
        let refused = [
            (
                Shape::OpenAi,
                json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"},
                    {"type": "file", "file": {"file_id": "file-abc"}}]}]}),
                "messages[0].content[1].file.file_id:",
            ),
            (
                Shape::OpenAi,
                json!({"messages": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}),
                "messages[0].content[0].file_id:",
            ),
            (
                Shape::Anthropic,
                json!({"messages": [{"role": "user", "content": [
                    {"type": "document", "source": {"type": "file", "file_id": "file_1"}}]}]}),
                "messages[0].content[0].source.file_id:",
            ),
            (
                Shape::Anthropic,
                json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                    "content": [{"type": "image", "source": {"type": "file", "file_id": "file_1"}}]}]}]}),
                "messages[0].content[0].content[0].source.file_id:",
            ),
            (
                Shape::Anthropic,
                json!({"messages": [{"role": "user", "content": [
                    {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}}]}]}),
                "messages[0].content[0].source.url:",
            ),
            (
                Shape::Gemini,
                json!({"contents": [{"role": "user", "parts": [{"fileData": {"mimeType": "image/png",
                    "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc"}}]}]}),
                "contents[0].parts[0].fileData:",
            ),
            (
                Shape::Gemini,
                json!({"contents": [{"role": "user", "parts": [{"file_data": {"mime_type": "video/mp4",
                    "file_uri": "https://www.youtube.com/watch?v=x"}}]}]}),
                "contents[0].parts[0].file_data:",
            ),
            (
                Shape::Gemini,
                json!({"systemInstruction": {"parts": [{"fileData": {"mimeType": "image/png", "fileUri": "gs://b/a.png"}}]},
                    "contents": []}),
                "systemInstruction.parts[0].fileData:",
            ),
        ];
        // Inline documents: a PDF must be readable, a video is refused.
        let pdf = "data:application/pdf;base64,AAAA";
        let refused = refused.into_iter().chain([
            (
                Shape::OpenAi,
                json!({"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_data": pdf}}]}]}),
                "messages[0].content[0].file.file_data: not a readable PDF",
            ),
            (
                Shape::Anthropic,
                json!({"messages": [{"role": "user", "content": [{"type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}}]}]}),
                "messages[0].content[0].source.data: not a readable PDF",
            ),
            (
                Shape::Gemini,
                json!({"contents": [{"role": "user", "parts": [{"inline_data": {"mime_type": "video/mp4", "data": "AAAA"}}]}]}),
                "contents[0].parts[0].inline_data: an inline video",
            ),
        ]);
        for (shape, body, field) in refused {
            let e = chat(&obj(body.clone()), shape, None).unwrap_err();
            assert!(e.to_string().contains(field), "{body}: {e}");
        }
        // Images by URL, and content the body carries, are counted instead.
        for (shape, body) in [
            (
                Shape::OpenAi,
                json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
                    {"type": "file", "file": {"file_data": "data:text/plain;base64,AAAA", "filename": "a.txt"}}]}]}),
            ),
            (
                Shape::Anthropic,
                json!({"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}]}]}),
            ),
            (
                Shape::Gemini,
                json!({"contents": [{"role": "user", "parts": [{"fileData": {"mimeType": "image/png", "fileUri": "https://x.test/a.png"}},
                    {"inlineData": {"mimeType": "audio/mp3", "data": "AAAA"}}]}]}),
            ),
            // Outside the content lists, an object's bytes count whatever it names.
            (
                Shape::OpenAi,
                json!({"messages": [], "metadata": {"type": "file", "file": {"file_id": "f"}}}),
            ),
        ] {
            assert!(chat(&obj(body.clone()), shape, None).is_ok(), "{body}");
        }
    }

    #[test]
    fn reported_quantities_are_bounded() {
        let b = Bound {
            input: 10,
            output: 20,
            images: 2,
        };
        assert_eq!(b.tokens(5, 50), (5, 20));
        assert_eq!(b.images(9), 2);
    }
}
