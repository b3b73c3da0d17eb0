//! Gemini's API as an input dialect (`POST
//! /api/v1/gemini/v1beta/models/{model}:{method}`): pure translations
//! between its shapes and the OpenAI shapes the model call speaks, so that
//! a model of any provider answers Google's clients. A `gemini` provider
//! is sent the caller's body as it came and needs none of this.
//!
//! * [`request`]: a `GenerateContentRequest` → the chat path's body
//!   (refused with a 400 naming the field that has no OpenAI equivalent).
//! * [`answer`]: a chat completion (JSON) → a `GenerateContentResponse`.
//! * [`events`]: chat completion chunks (server-sent events) → Gemini's
//!   `alt=sse` events, one upstream chunk at a time.
//! * [`embed`]: `embedContent` / `batchEmbedContents` → OpenAI's
//!   `/embeddings` body, and its answer back.
//!
//! Shared here: a field read as Google's JSON parser reads it (camelCase
//! or snake_case), the finish reasons and the usage. A finish reason maps
//! as `stop` and `tool_calls` → `STOP`, `length` → `MAX_TOKENS`,
//! `content_filter` → `SAFETY`; OpenAI's usage as `promptTokenCount` =
//! `prompt_tokens` (cached tokens included, as Google counts them),
//! `candidatesTokenCount` = `completion_tokens`, `totalTokenCount` their
//! sum, `cachedContentTokenCount` = `prompt_tokens_details.cached_tokens`
//! when there are any.

pub mod answer;
pub mod embed;
pub mod events;
pub mod request;

use serde_json::{json, Map, Value};

use gateway_base::errors::ApiError;

/// The field `camel` of `v`, or its snake_case spelling.
pub fn field<'a>(v: &'a Map<String, Value>, camel: &str) -> Option<&'a Value> {
    v.get(camel)
        .or_else(|| v.get(&snake(camel)))
        .filter(|v| !v.is_null())
}

/// `maxOutputTokens` → `max_output_tokens`.
fn snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The camelCase spelling of a field name (as Google answers it in errors).
fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut up = false;
    for c in name.chars() {
        match (c, up) {
            ('_', _) => up = true,
            (c, true) => {
                out.push(c.to_ascii_uppercase());
                up = false;
            }
            (c, false) => out.push(c),
        }
    }
    out
}

/// The 400 of a field the OpenAI shape cannot carry.
pub(crate) fn untranslatable(field: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "{field}: has no equivalent for this model's provider (only a gemini provider takes it)"
    ))
}

/// 400 naming `at` for a value of the wrong type.
pub(crate) fn must_be(at: &str, what: &str) -> ApiError {
    ApiError::BadRequest(format!("{at}: must be {what}"))
}

/// Gemini's `finishReason` of an OpenAI `finish_reason`.
pub fn finish_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "MAX_TOKENS",
        "content_filter" => "SAFETY",
        _ => "STOP",
    }
}

fn count(v: Option<&Value>) -> u64 {
    v.and_then(Value::as_u64).unwrap_or(0)
}

/// Gemini's `usageMetadata` of an OpenAI `usage` object.
pub fn usage(u: &Value) -> Value {
    let prompt = count(u.get("prompt_tokens"));
    let output = count(u.get("completion_tokens"));
    let cached = count(
        u.get("prompt_tokens_details")
            .and_then(|d| d.get("cached_tokens")),
    );
    let mut m = json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output,
    });
    if cached > 0 {
        m["cachedContentTokenCount"] = json!(cached);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_read_in_both_spellings_and_usage_adds_up() {
        let v = json!({"max_output_tokens": 5, "topP": 1});
        let v = v.as_object().unwrap();
        assert_eq!(field(v, "maxOutputTokens"), Some(&json!(5)));
        assert_eq!(field(v, "topP"), Some(&json!(1)));
        assert_eq!(camel("generation_config"), "generationConfig");
        let u = json!({"prompt_tokens": 10, "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 6}});
        assert_eq!(
            usage(&u),
            json!({"promptTokenCount": 10, "candidatesTokenCount": 4,
                "totalTokenCount": 14, "cachedContentTokenCount": 6})
        );
        assert_eq!(finish_reason("length"), "MAX_TOKENS");
        assert_eq!(finish_reason("tool_calls"), "STOP");
    }
}
