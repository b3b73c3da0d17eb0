//! Tool calls of the simulated chat model, by [`crate::llm`]'s rules: when
//! `tools` (of type `function`) are given and the last message is not a
//! `tool` result, the first tool whose name occurs in the last user text is
//! called (`tool_choice` `required` or a named function forces a call: the
//! named one, or failing a mention the first; `none` never calls). The
//! answer: `content: null`, one `tool_calls` entry `{id: "call_…", type:
//! "function", function: {name, arguments}}` (arguments from the tool's
//! schema, [`crate::llm::sample_args`], as JSON text), finish `tool_calls`,
//! completion tokens one per 4 bytes of the arguments (at least 1; past
//! `max_tokens` the arguments are cut there and the finish is `length`). A
//! stream sends the call's id and name first, then the arguments in
//! 10-character pieces, the finish chunk, and the usage chunk when asked.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::wire::{sse, text_of};
use crate::llm;
use crate::response::{json_response, Resp};
use crate::shared::Shared;

/// The call the model makes: (id, name, arguments as JSON text).
pub struct Call {
    /// `call_…`.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON text.
    pub arguments: String,
}

/// The tool call the request gets, if any.
pub fn call(f: &Map<String, Value>) -> Option<Call> {
    let tools: Vec<&Value> = f.get("tools")?.as_array()?.iter().collect();
    let msgs = f.get("messages")?.as_array()?;
    if msgs.last()?.get("role").and_then(Value::as_str) == Some("tool") {
        return None;
    }
    let user = msgs
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|m| text_of(m.get("content").unwrap_or(&Value::Null)))
        .unwrap_or_default();
    let function = |t: &Value| t.get("function").cloned().unwrap_or(Value::Null);
    let names: Vec<String> = tools
        .iter()
        .filter_map(|t| function(t).get("name")?.as_str().map(str::to_owned))
        .collect();
    let choice = f.get("tool_choice");
    let forced = match choice {
        Some(Value::String(s)) if s == "required" => Some(String::new()),
        Some(c @ Value::Object(_)) => c
            .pointer("/function/name")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    };
    let never = choice.and_then(Value::as_str) == Some("none");
    let name = llm::pick_tool(&names, &user, forced.as_deref(), never)?;
    let schema = tools
        .iter()
        .map(|t| function(t))
        .find(|f| f.get("name").and_then(Value::as_str) == Some(name.as_str()))
        .and_then(|f| f.get("parameters").cloned())
        .unwrap_or(Value::Null);
    Some(Call {
        id: llm::new_id("call_"),
        name,
        arguments: llm::sample_args(&schema).to_string(),
    })
}

/// The chat answer making `call` (streamed when the request says so).
pub fn answer(
    sh: &Arc<Shared>,
    f: &Map<String, Value>,
    call: Call,
    prompt_tokens: u64,
    (id, created, model): (&str, u64, &str),
) -> Resp {
    let mut call = call;
    let mut completion = (call.arguments.len() as u64).div_ceil(4).max(1);
    // A provider never writes past `max_tokens`: the call's arguments are
    // cut there (finish `length`), as a real model's would be.
    let limit = f
        .get("max_tokens")
        .or_else(|| f.get("max_completion_tokens"))
        .and_then(Value::as_u64);
    let mut finish = "tool_calls";
    if let Some(limit) = limit.filter(|l| completion > *l) {
        let cut: String = call.arguments.chars().take(limit as usize * 4).collect();
        call.arguments = cut;
        completion = limit;
        finish = "length";
    }
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion});
    if f.get("stream").and_then(Value::as_bool) != Some(true) {
        let tc = json!([{"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": call.arguments}}]);
        return json_response(
            StatusCode::OK,
            &json!({"id": id, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": tc},
                    "finish_reason": finish, "logprobs": null}],
                "usage": usage}),
        );
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk",
        "created": created, "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": call.id,
            "type": "function", "function": {"name": call.name, "arguments": ""}}]}),
        Value::Null,
    )];
    let chars: Vec<char> = call.arguments.chars().collect();
    for piece in chars.chunks(10) {
        let piece: String = piece.iter().collect();
        events.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            Value::Null,
        ));
    }
    events.push(chunk(json!({}), json!(finish)));
    if f.get("stream_options").and_then(|o| o.get("include_usage")) == Some(&Value::Bool(true)) {
        events.push(
            json!({"id": id, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [], "usage": usage}),
        );
    }
    sse(sh, events)
}
