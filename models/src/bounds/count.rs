//! Counting an upstream body's tokens: one per byte of its JSON text, an
//! image part [`IMAGE_TOKENS`] plus the bytes beside its image, and the chat
//! format's overhead (see the parent module's rule). Kept apart from the
//! checks so that the measure reads as one piece.

use serde_json::{Map, Value};

use super::documents::Shape;

/// Tokens counted for one image part: the largest of the providers' rules we
/// know (OpenAI high detail: 85 + 170 × 8 tiles = 1445; Anthropic: about
/// 1.15 megapixels ÷ 750 ≈ 1600).
pub const IMAGE_TOKENS: u64 = 1600;
/// Tokens of the chat format per message (role markers, separators).
pub const PER_MESSAGE_TOKENS: u64 = 4;
/// Tokens of the chat format per request (the reply's priming).
pub const PER_REQUEST_TOKENS: u64 = 8;
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
        Shape::Responses if kind == Some("input_image") => ["/image_url", "/file_id"]
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
        // A Responses item's content, or a function call output's list.
        (Some(s @ Shape::Responses), "input") => each(v, |item| {
            fields(item, |k, v| match k {
                "content" | "output" => parts_tokens(s, v),
                _ => counted_tokens(v),
            })
        }),
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
pub(super) fn input_tokens(body: &Map<String, Value>, shape: Option<Shape>) -> u64 {
    // Gemini's `contents` are its messages, a Responses body's `input`
    // items.
    let items = (shape == Some(Shape::Responses)).then(|| body.get("input"));
    let messages = body
        .get("messages")
        .or_else(|| body.get("contents"))
        .or(items.flatten())
        .and_then(Value::as_array)
        .map_or(0, |m| m.len() as u64);
    body.iter()
        .filter(|(k, _)| k.as_str() != "model")
        .map(|(k, v)| (string_len(k) + 2).saturating_add(field_tokens(shape, k, v)))
        .fold(0u64, u64::saturating_add)
        .saturating_add(PER_MESSAGE_TOKENS * messages + PER_REQUEST_TOKENS)
}
