//! Reading a `POST /v1/responses` body: the fields OpenAI knows (any other
//! is refused by name), the function tools (a hosted tool is refused: the
//! simulator offers none), the `input` items given their ids, and the
//! translation of items, tools, `tool_choice` and `text.format` into the
//! chat request they amount to, so the Responses answer is the chat
//! model's reply, counted by the same tokenizer ([`super::tokens`]).

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::errors::{invalid, missing, oai_error};
use super::wire::{short_id, text_of};
use crate::response::Resp;

/// The top-level fields of OpenAI's `ResponseCreateParams` (and `stream`).
const KNOWN: [&str; 34] = [
    "access_programs",
    "background",
    "background_options",
    "context_management",
    "conversation",
    "image",
    "include",
    "input",
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "model",
    "moderation",
    "parallel_tool_calls",
    "previous_response_id",
    "prompt",
    "prompt_cache_key",
    "prompt_cache_options",
    "prompt_cache_retention",
    "reasoning",
    "safety_identifier",
    "service_tier",
    "store",
    "stream",
    "stream_options",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_logprobs",
    "top_p",
    "truncation",
    "user",
];

/// 400 `unknown_parameter` for the first field OpenAI does not know.
pub(super) fn check_fields(f: &Map<String, Value>) -> Result<(), Resp> {
    match f.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        Some(k) => Err(oai_error(
            StatusCode::BAD_REQUEST,
            &format!("Unknown parameter: '{k}'."),
            Some(k),
            Some("unknown_parameter"),
        )),
        None => Ok(()),
    }
}

/// The request's `tools`, all of type `function` with a name; a hosted
/// tool (`web_search`, `file_search`, ...) is a 400 naming `tools[i].type`.
pub(super) fn tools(f: &Map<String, Value>) -> Result<Vec<Value>, Resp> {
    let Some(tools) = f.get("tools").filter(|t| !t.is_null()) else {
        return Ok(Vec::new());
    };
    let tools = tools
        .as_array()
        .ok_or_else(|| invalid("tools", "'tools' must be an array."))?;
    for (i, t) in tools.iter().enumerate() {
        let ty = t.get("type").and_then(Value::as_str).unwrap_or("");
        if ty != "function" {
            return Err(invalid(
                &format!("tools[{i}].type"),
                &format!(
                    "Invalid value: '{ty}'. The simulator offers no hosted tools: \
                     only 'function' tools are supported."
                ),
            ));
        }
        if t.get("name").and_then(Value::as_str).is_none() {
            return Err(missing(&format!("tools[{i}].name")));
        }
    }
    Ok(tools.clone())
}

/// The `input` as stored items: a string is one user message; each item
/// gets an id (`msg_…`, `fc_…`, `fco_…`, `rs_…`, its own when given) and
/// `status: "completed"`, a message's string content one `input_text`
/// (`output_text` for the assistant's) part.
pub(super) fn items(f: &Map<String, Value>) -> Result<Vec<Value>, Resp> {
    let list = match f.get("input") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![json!({"role": "user", "content": s})],
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err(invalid("input", "'input' must be a string or an array.")),
    };
    list.into_iter()
        .enumerate()
        .map(|(i, item)| item_of(i, item))
        .collect()
}

/// One input item, given its id and status (rules in [`items`]).
fn item_of(i: usize, item: Value) -> Result<Value, Resp> {
    let Value::Object(mut m) = item else {
        return Err(invalid(
            &format!("input[{i}]"),
            "An input item must be an object.",
        ));
    };
    let ty = m
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message")
        .to_owned();
    let prefix = match ty.as_str() {
        "message" => "msg_",
        "function_call" => "fc_",
        "function_call_output" => "fco_",
        "reasoning" => "rs_",
        other => {
            return Err(invalid(
                &format!("input[{i}].type"),
                &format!("Invalid value: '{other}'. The simulator reads messages, function_call, function_call_output and reasoning items."),
            ))
        }
    };
    if ty == "message" {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if !["user", "assistant", "system", "developer"].contains(&role) {
            return Err(missing(&format!("input[{i}].role")));
        }
        let part = if role == "assistant" {
            "output_text"
        } else {
            "input_text"
        };
        if let Some(Value::String(s)) = m.get("content") {
            let content = if part == "output_text" {
                json!([{"type": part, "text": s, "annotations": []}])
            } else {
                json!([{"type": part, "text": s}])
            };
            m.insert("content".into(), content);
        }
    }
    m.insert("type".into(), json!(ty));
    if !m.get("id").is_some_and(Value::is_string) {
        m.insert("id".into(), json!(short_id(prefix)));
    }
    m.entry("status").or_insert(json!("completed"));
    Ok(Value::Object(m))
}

/// The chat messages `items` (input or output items) amount to: a message
/// its role and parts (`input_text` / `output_text` → `text`,
/// `input_image` → `image_url`, `input_file` → `file`), a `function_call`
/// an assistant turn with one `tool_calls` entry, a `function_call_output`
/// a `tool` message; reasoning items are not read back.
pub(super) fn messages(items: &[Value]) -> Vec<Value> {
    items.iter().filter_map(message_of).collect()
}

fn message_of(item: &Value) -> Option<Value> {
    let s = |k: &str| item.get(k).cloned().unwrap_or(Value::Null);
    match item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message")
    {
        "message" => {
            let content = match item.get("content") {
                Some(Value::Array(parts)) => Value::Array(parts.iter().map(part_of).collect()),
                other => other.cloned().unwrap_or(Value::Null),
            };
            Some(json!({"role": s("role"), "content": content}))
        }
        "function_call" => Some(json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": s("call_id"), "type": "function",
                "function": {"name": s("name"), "arguments": s("arguments")}}]})),
        "function_call_output" => {
            let output = text_of(item.get("output").unwrap_or(&Value::Null));
            Some(json!({"role": "tool", "tool_call_id": s("call_id"), "content": output}))
        }
        _ => None,
    }
}

/// A content part in chat's shape.
fn part_of(p: &Value) -> Value {
    let s = |k: &str| p.get(k).cloned().unwrap_or(Value::Null);
    match p.get("type").and_then(Value::as_str) {
        Some("input_text" | "output_text") => json!({"type": "text", "text": s("text")}),
        Some("input_image") => {
            let url = p.get("image_url").or_else(|| p.get("file_id"));
            json!({"type": "image_url", "image_url": {"url": url, "detail": s("detail")}})
        }
        Some("input_file") => json!({"type": "file",
            "file": {"file_data": s("file_data"), "filename": s("filename")}}),
        _ => p.clone(),
    }
}

/// The `instructions` as leading chat messages: a string is one system
/// message, a list its items' messages.
pub(super) fn instructions(f: &Map<String, Value>) -> Vec<Value> {
    match f.get("instructions") {
        Some(Value::String(s)) => vec![json!({"role": "system", "content": s})],
        Some(Value::Array(items)) => messages(items),
        _ => Vec::new(),
    }
}

/// The chat request the Responses request amounts to: `messages`, the
/// tools in chat's shape, `tool_choice` (a named function as chat names
/// one) and `text.format` as `response_format`.
pub(super) fn chat_body(
    f: &Map<String, Value>,
    messages: Vec<Value>,
    tools: &[Value],
) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        let chat_tools: Vec<Value> = tools
            .iter()
            .map(|t| {
                let mut function = t.as_object().cloned().unwrap_or_default();
                function.remove("type");
                function.remove("strict");
                json!({"type": "function", "function": function})
            })
            .collect();
        body.insert("tools".into(), Value::Array(chat_tools));
    }
    let choice = match f.get("tool_choice") {
        Some(c @ Value::Object(_)) if c.get("type").and_then(Value::as_str) == Some("function") => {
            Some(json!({"type": "function", "function": {"name": c.get("name")}}))
        }
        Some(c @ Value::String(_)) => Some(c.clone()),
        _ => None,
    };
    if let Some(c) = choice {
        body.insert("tool_choice".into(), c);
    }
    if let Some(format) = f
        .get("text")
        .and_then(|t| t.get("format"))
        .filter(|v| v.is_object())
    {
        let rf = match format.get("type").and_then(Value::as_str) {
            Some("json_schema") => json!({"type": "json_schema", "json_schema": {
                "name": format.get("name"), "schema": format.get("schema"),
                "strict": format.get("strict")}}),
            _ => format.clone(),
        };
        body.insert("response_format".into(), rf);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_get_ids_and_become_chat_messages() {
        let f = json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "22 C"}]});
        let items = items(f.as_object().unwrap()).ok().unwrap();
        assert!(items[0]["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(items[0]["content"][0]["type"], "input_text");
        assert!(items[2]["id"].as_str().unwrap().starts_with("fco_"));
        let m = messages(&items);
        assert_eq!(
            m[0],
            json!({"role": "user", "content": [{"type": "text", "text": "hi"}]})
        );
        assert_eq!(m[1]["tool_calls"][0]["id"], "call_1");
        assert_eq!(
            m[2],
            json!({"role": "tool", "tool_call_id": "call_1", "content": "22 C"})
        );
    }

    #[test]
    fn hosted_tools_and_unknown_fields_are_refused() {
        let f = json!({"tools": [{"type": "function", "name": "f"}, {"type": "web_search"}]});
        assert_eq!(tools(f.as_object().unwrap()).unwrap_err().status(), 400);
        let f = json!({"model": "m", "nonsense": 1});
        assert_eq!(
            check_fields(f.as_object().unwrap()).unwrap_err().status(),
            400
        );
    }
}
