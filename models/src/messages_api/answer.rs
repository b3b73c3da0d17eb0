//! A chat completion (OpenAI's JSON) → an Anthropic `message`: the first
//! choice's reasoning (`reasoning_content`, or `reasoning`, as
//! OpenAI-compatible APIs give it) as a `thinking` block (its `signature`
//! empty: only Anthropic signs), its text (or its `refusal`) as a `text` block, each of its `tool_calls` as a
//! `tool_use` block (the arguments' JSON as `input`; arguments that are not
//! a JSON object give `{}`), the finish reason as `stop_reason`, the usage
//! as Anthropic's four counts ([`super::usage`]).

use serde_json::{json, Value};

/// The Anthropic message of a chat completion `v`, answered for `model`
/// (the name the caller gave).
pub fn from_chat(v: &Value, model: &str) -> Value {
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .unwrap_or(&Value::Null);
    let msg = choice.get("message").unwrap_or(&Value::Null);
    let mut content = Vec::new();
    let text = |k: &str| msg.get(k).and_then(Value::as_str).filter(|t| !t.is_empty());
    if let Some(t) = text("reasoning_content").or_else(|| text("reasoning")) {
        content.push(json!({"type": "thinking", "thinking": t, "signature": ""}));
    }
    if let Some(t) = text("content").or_else(|| text("refusal")) {
        content.push(json!({"type": "text", "text": t}));
    }
    for c in msg
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let f = c.get("function").unwrap_or(&Value::Null);
        let args = f.get("arguments").and_then(Value::as_str).unwrap_or("{}");
        let input = serde_json::from_str::<Value>(args)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        content.push(json!({"type": "tool_use",
            "id": c.get("id").cloned().unwrap_or_else(|| super::message_id().into()),
            "name": f.get("name").cloned().unwrap_or(Value::Null), "input": input}));
    }
    let finish = choice.get("finish_reason").and_then(Value::as_str);
    let usage = v
        .get("usage")
        .filter(|u| u.is_object())
        .map_or_else(|| super::usage(&json!({})), super::usage);
    json!({
        "id": super::message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": finish.map(super::stop_reason),
        "stop_sequence": null,
        "usage": usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_become_tool_use_blocks() {
        let v = json!({"choices": [{"message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2}});
        let m = from_chat(&v, "p/m");
        assert_eq!(
            m["content"],
            json!([{"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}}])
        );
        assert_eq!(m["stop_reason"], "tool_use");
        assert_eq!(m["usage"]["input_tokens"], 5);
    }

    #[test]
    fn reasoning_becomes_a_thinking_block_before_the_text() {
        let v = json!({"choices": [{"message": {"role": "assistant", "content": "4",
            "reasoning_content": "2+2"}, "finish_reason": "stop"}]});
        let m = from_chat(&v, "p/m");
        assert_eq!(
            m["content"],
            json!([{"type": "thinking", "thinking": "2+2", "signature": ""},
                {"type": "text", "text": "4"}])
        );
        assert_eq!(m["stop_reason"], "end_turn");
    }
}
