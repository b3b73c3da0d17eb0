//! Anthropic's Messages API as an input dialect (`POST /api/v1/messages`):
//! pure translations between its shapes and the OpenAI chat shapes the
//! chat path speaks, so that any chat model of any provider answers it.
//!
//! * [`request`]: an Anthropic request body → the chat path's body.
//! * [`answer`]: a chat completion (JSON) → an Anthropic `message`.
//! * [`events`]: chat completion chunks (server-sent events) → Anthropic's
//!   event sequence, incrementally, one upstream chunk at a time.
//!
//! Shared here: the stop reasons and the usage. A finish reason maps as
//! `stop` → `end_turn`, `length` → `max_tokens`, `tool_calls` (or
//! `function_call`) → `tool_use`, `content_filter` → `refusal`. The usage
//! of a chat answer maps as `input_tokens` = `prompt_tokens` less the
//! cached tokens (`prompt_tokens_details.cached_tokens`, Anthropic's
//! `cache_read_input_tokens`) and the cache writes (a provider's
//! `cache_creation_input_tokens`, where it reports one), `output_tokens` =
//! `completion_tokens`: the four counts add up to what the chat path bills.

pub mod answer;
pub mod events;
pub mod options;
pub mod request;

use serde_json::{json, Value};

/// Anthropic's `stop_reason` of an OpenAI `finish_reason`.
pub fn stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        "content_filter" => "refusal",
        _ => "end_turn",
    }
}

fn count(v: Option<&Value>) -> u64 {
    v.and_then(Value::as_u64).unwrap_or(0)
}

/// Anthropic's `usage` of an OpenAI `usage` object.
pub fn usage(u: &Value) -> Value {
    let prompt = count(u.get("prompt_tokens"));
    let details = u.get("prompt_tokens_details");
    let read = count(details.and_then(|d| d.get("cached_tokens")));
    let write = count(
        u.get("cache_creation_input_tokens")
            .or_else(|| details.and_then(|d| d.get("cache_creation_tokens"))),
    );
    json!({
        "input_tokens": prompt.saturating_sub(read).saturating_sub(write),
        "output_tokens": count(u.get("completion_tokens")),
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    })
}

/// A new message id (`msg_` and 24 hex digits).
pub fn message_id() -> String {
    let b: [u8; 12] = rand::random();
    format!("msg_{}", hex::encode(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_splits_cached_tokens_out_of_input() {
        let u = json!({"prompt_tokens": 100, "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 60}, "cache_creation_input_tokens": 30});
        assert_eq!(
            usage(&u),
            json!({"input_tokens": 10, "output_tokens": 7,
                "cache_read_input_tokens": 60, "cache_creation_input_tokens": 30})
        );
        assert_eq!(stop_reason("tool_calls"), "tool_use");
        assert_eq!(stop_reason("length"), "max_tokens");
        assert_eq!(stop_reason("stop"), "end_turn");
    }
}
