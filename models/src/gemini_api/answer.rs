//! A chat completion (OpenAI's JSON) → a Gemini `GenerateContentResponse`:
//! each choice a candidate (role `model`) whose parts are its text and
//! each of its `tool_calls` as a `functionCall` (the arguments' JSON as
//! `args`; arguments that are not a JSON object give `{}`), the finish
//! reason as `finishReason`, the usage as `usageMetadata`
//! ([`super::usage`]), `modelVersion` the name the caller gave.

use serde_json::{json, Value};

/// The parts of a chat message (or a whole stream's): its text, then its
/// tool calls as `functionCall` parts.
pub fn parts(text: &str, tool_calls: &[Value]) -> Vec<Value> {
    let mut parts = Vec::new();
    if !text.is_empty() || tool_calls.is_empty() {
        parts.push(json!({"text": text}));
    }
    for c in tool_calls {
        let f = c.get("function").unwrap_or(&Value::Null);
        let args = f.get("arguments").and_then(Value::as_str).unwrap_or("{}");
        let args = serde_json::from_str::<Value>(args)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        let mut call = json!({"name": f.get("name").cloned().unwrap_or(Value::Null), "args": args});
        if let Some(id) = c.get("id").filter(|i| i.is_string()) {
            call["id"] = id.clone();
        }
        parts.push(json!({"functionCall": call}));
    }
    parts
}

/// The Gemini response of a chat completion `v`, answered for `model`
/// (the name the caller gave).
pub fn from_chat(v: &Value, model: &str) -> Value {
    let candidates: Vec<Value> = v
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, choice)| {
            let msg = choice.get("message").unwrap_or(&Value::Null);
            let text = msg.get("content").and_then(Value::as_str).unwrap_or("");
            let calls = msg
                .get("tool_calls")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            let finish = choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .unwrap_or("stop");
            json!({
                "content": {"role": "model", "parts": parts(text, calls)},
                "finishReason": super::finish_reason(finish),
                "index": choice.get("index").and_then(Value::as_u64).unwrap_or(i as u64),
            })
        })
        .collect();
    let usage = v
        .get("usage")
        .filter(|u| u.is_object())
        .map_or_else(|| super::usage(&json!({})), super::usage);
    json!({
        "candidates": candidates,
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": v.get("id").cloned().unwrap_or(Value::Null),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_calls_become_parts() {
        let v = json!({"id": "c1", "choices": [{"index": 0, "finish_reason": "length",
            "message": {"role": "assistant", "content": "Hi",
                "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2}});
        assert_eq!(
            from_chat(&v, "p/m"),
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"},
                {"functionCall": {"name": "f", "args": {"a": 1}, "id": "t1"}}]},
                "finishReason": "MAX_TOKENS", "index": 0}],
                "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 2, "totalTokenCount": 9},
                "modelVersion": "p/m", "responseId": "c1"})
        );
    }
}
