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
//! (completions generated upstream), `echo` (the prompt again in the reply),
//! Anthropic's `thinking` and `output_config` ([`thinking`]).
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

mod count;
pub mod documents;
mod refusals;
mod thinking;

use count::input_tokens;
pub use count::{counted_tokens, IMAGE_TOKENS, PER_MESSAGE_TOKENS, PER_REQUEST_TOKENS};
pub use documents::Shape;
use documents::{inline_documents, PAGE_TOKENS};
use refusals::check_references;
pub use refusals::{check_additional_params, GATEWAY_PRICED, PROVIDER_CACHES};

// A PDF's page is read as an image: never counted less than one.
const _: () = assert!(PAGE_TOKENS >= IMAGE_TOKENS);

/// Output tokens held for when neither `max_tokens` nor the model's
/// context window bounds the reply.
pub const DEFAULT_MAX_OUTPUT: u64 = 4096;
/// Most choices (`n`, `best_of`) a request may ask for.
pub const MAX_CHOICES: u64 = 128;
/// Most images one request may ask for.
pub const MAX_IMAGES: u64 = 10;

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
    let per_choice = thinking::output(body, shape, max_output(body, context_window)?)?;
    Ok(Bound {
        input: input_tokens(body, Some(shape))
            .saturating_sub(data)
            .saturating_add(pages),
        output: per_choice.saturating_mul(choices),
        images: 0,
    })
}

/// Hosted tools a native Responses body may name: none (a tool of a type
/// of its own makes the provider search, read files, run code or call
/// servers: content and work no byte of the body bounds).
const RESPONSES_TOOLS: [&str; 2] = ["function", "custom"];

/// Fields of a Responses body that make the provider read a conversation
/// or template it holds, which the body does not carry.
const RESPONSES_HELD: [&str; 3] = ["previous_response_id", "conversation", "prompt"];

/// A native Responses body (sent to a provider that serves `/responses`),
/// counted as [`chat`] counts a chat body: every byte but `model`, each
/// `input` item as a message (its `input_image` parts as images, its
/// inline PDFs by their pages), `instructions` and `tools` by their
/// bytes; the output is `max_output_tokens` (reasoning inside it, as
/// OpenAI counts it), else the context window, else
/// [`DEFAULT_MAX_OUTPUT`]. Refused with a 400 naming the field: what
/// [`chat`] refuses (files held by the provider or by URL, unreadable
/// PDFs, a malformed length or `stream`), a tool of a hosted type
/// ([`RESPONSES_TOOLS`]) and a stored conversation, response or prompt
/// the provider would read ([`RESPONSES_HELD`]: the gateway sends the
/// earlier conversation itself).
pub fn responses(
    body: &Map<String, Value>,
    context_window: Option<u64>,
) -> Result<Bound, ApiError> {
    for k in RESPONSES_HELD {
        if body.get(k).is_some_and(|v| !v.is_null()) {
            return Err(ApiError::BadRequest(format!(
                "{k}: the provider would read content the request does not carry, so it cannot be held for"
            )));
        }
    }
    let tools = body.get("tools").and_then(Value::as_array);
    for (i, t) in tools.into_iter().flatten().enumerate() {
        let ty = t.get("type").and_then(Value::as_str).unwrap_or("");
        if !RESPONSES_TOOLS.contains(&ty) {
            return Err(ApiError::BadRequest(format!(
                "tools[{i}].type: the hosted tool '{ty}' cannot be used through the gateway (its work is not in the request, so it cannot be held for)"
            )));
        }
    }
    chat(body, Shape::Responses, context_window)
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
            assert!(
                (IMAGE_TOKENS..IMAGE_TOKENS + 200).contains(&n),
                "{shape:?} {n}"
            );
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
    fn a_native_responses_body_counts_as_chat_counts() {
        let data = format!("data:image/png;base64,{}", "A".repeat(100_000));
        let text = "x".repeat(5000);
        let b = responses(
            &obj(
                json!({"model": "gpt", "instructions": text, "max_output_tokens": 300,
                "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"},
                    {"type": "input_image", "image_url": data, "detail": "high"}]},
                    {"type": "function_call_output", "call_id": "c", "output": [
                        {"type": "input_image", "image_url": data}]}],
                "tools": [{"type": "function", "name": "f", "description": text}]}),
            ),
            None,
        )
        .unwrap();
        assert_eq!(b.output, 300);
        assert!(b.input >= 10_000 + 2 * IMAGE_TOKENS, "{}", b.input);
        assert!(b.input < 10_500 + 2 * IMAGE_TOKENS, "{}", b.input);
        let b = responses(&obj(json!({"input": "hi"})), Some(8192)).unwrap();
        assert_eq!(b.output, 8192);
        assert_eq!(
            responses(&obj(json!({"input": "hi"})), None)
                .unwrap()
                .output,
            DEFAULT_MAX_OUTPUT
        );
        for (body, field) in [
            (json!({"max_output_tokens": -1}), "max_output_tokens:"),
            (json!({"stream": "yes"}), "stream:"),
            (json!({"tools": [{"type": "web_search"}]}), "tools[0].type:"),
            (
                json!({"previous_response_id": "resp_1"}),
                "previous_response_id:",
            ),
            (json!({"conversation": "conv_1"}), "conversation:"),
            (
                json!({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file_1"}]}]}),
                "input[0].content[0].file_id:",
            ),
            (
                json!({"input": [{"role": "user", "content": [{"type": "input_file", "file_url": "https://x.test/a.pdf"}]}]}),
                "input[0].content[0].file_url:",
            ),
            (
                json!({"input": [{"role": "user", "content": [{"type": "input_file",
                    "file_data": "data:application/pdf;base64,AAAA"}]}]}),
                "input[0].content[0].file_data: not a readable PDF",
            ),
        ] {
            let e = responses(&obj(body.clone()), None).unwrap_err();
            assert!(e.to_string().contains(field), "{body}: {e}");
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
