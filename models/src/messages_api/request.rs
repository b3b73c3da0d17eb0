//! An Anthropic Messages request → the chat path's (OpenAI) body, for a
//! model whose provider speaks another API. Every field is translated,
//! dropped as a hint that changes nothing in the answer, or refused with a
//! 400 naming it (the table of `docs/dialects.md`).
//!
//! `system` (a string or text blocks) → a first `system` message, and a
//! `system`-role message inside `messages` → a `system` message in its
//! place; `messages` of content blocks: `text` → text, `image` (`base64` or
//! `url` source) → an `image_url` part (a `data:` URL for base64), a
//! `document` of a base64 PDF → a `file` part, an assistant's `tool_use` →
//! its `tool_calls` (the input as JSON text), a user's `tool_result` → a
//! `tool` message before the rest of the turn (its text, `is_error`
//! prefixed "Error: "); `thinking` and `redacted_thinking` blocks of
//! earlier turns are dropped (Anthropic's own API leaves them out of the
//! context too, and their signature means nothing to another provider);
//! `cache_control` marks are dropped (hints); any other block is a 400.
//! `tools` → `function` tools (`input_schema` as `parameters`, `strict`
//! kept; server tools, which have a `type` of their own, are a 400);
//! `tool_choice` `auto` / `any` / `tool` / `none` → `auto` / `required` /
//! the function / `none` (`disable_parallel_tool_use` →
//! `parallel_tool_calls: false`); `stop_sequences` → `stop`; `max_tokens`,
//! `temperature`, `top_p`, `stream`, `model` and the gateway's own fields
//! (`byok_api_key`, `additional_params`, `models`) unchanged; the other
//! fields: [`super::options`]. A stream asks for the usage chunk
//! (`stream_options.include_usage`).

use serde_json::{json, Map, Value};

use super::options;
use gateway_base::errors::ApiError;

fn bad(m: String) -> ApiError {
    ApiError::BadRequest(m)
}

/// Fields copied unchanged.
const SAME: [&str; 8] = [
    "model",
    "max_tokens",
    "temperature",
    "top_p",
    "stream",
    "byok_api_key",
    "additional_params",
    "models",
];

/// Fields read below, not by [`options::option`].
const READ: [&str; 5] = [
    "messages",
    "system",
    "tools",
    "tool_choice",
    "stop_sequences",
];

/// The chat body of an Anthropic request body.
pub fn to_chat(body: &Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    let mut out = Map::new();
    for (k, v) in body {
        if SAME.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        } else if !READ.contains(&k.as_str()) {
            options::option(k, v, &mut out)?;
        }
    }
    options::settle(body, &mut out);
    let mut messages = Vec::new();
    match body.get("system") {
        None | Some(Value::Null) => {}
        Some(s) => messages.push(json!({"role": "system", "content": text_of(s, "system")?})),
    }
    let given = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("messages: must be a list".into()))?;
    for (i, m) in given.iter().enumerate() {
        message(i, m, &mut messages)?;
    }
    out.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = body.get("tools").filter(|t| !t.is_null()) {
        out.insert("tools".into(), self::tools(tools)?);
    }
    if let Some(choice) = body.get("tool_choice").filter(|t| !t.is_null()) {
        tool_choice(choice, &mut out)?;
    }
    if let Some(stops) = body.get("stop_sequences").filter(|s| !s.is_null()) {
        if !stops
            .as_array()
            .is_some_and(|a| a.iter().all(Value::is_string))
        {
            return Err(bad("stop_sequences: must be a list of strings".into()));
        }
        out.insert("stop".into(), stops.clone());
    }
    if out.get("stream") == Some(&Value::Bool(true)) {
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(out)
}

/// The text of a string or a list of text blocks (`system`, a tool result).
fn text_of(v: &Value, at: &str) -> Result<String, ApiError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut texts = Vec::new();
            for (i, b) in blocks.iter().enumerate() {
                match (kind(b), b.get("text").and_then(Value::as_str)) {
                    ("text", Some(t)) => texts.push(t),
                    (k, _) => {
                        return Err(bad(format!(
                            "{at}.{i}: a `{k}` block is not accepted here (text blocks only)"
                        )))
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(bad(format!(
            "{at}: must be a string or a list of text blocks"
        ))),
    }
}

fn kind(b: &Value) -> &str {
    b.get("type").and_then(Value::as_str).unwrap_or("")
}

/// One Anthropic message → chat messages (a user turn's tool results
/// become `tool` messages first).
fn message(i: usize, m: &Value, out: &mut Vec<Value>) -> Result<(), ApiError> {
    let at = format!("messages.{i}");
    let role = m.get("role").and_then(Value::as_str);
    let role = match role {
        Some(r @ ("user" | "assistant")) => r,
        Some("system") => {
            let content = m.get("content").unwrap_or(&Value::Null);
            let text = text_of(content, &format!("{at}.content"))?;
            out.push(json!({"role": "system", "content": text}));
            return Ok(());
        }
        _ => return Err(bad(format!("{at}.role: must be user, assistant or system"))),
    };
    let blocks = match m.get("content") {
        Some(Value::String(s)) => {
            out.push(json!({"role": role, "content": s}));
            return Ok(());
        }
        Some(Value::Array(b)) => b,
        _ => {
            return Err(bad(format!(
                "{at}.content: must be a string or a list of content blocks"
            )))
        }
    };
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    for (j, b) in blocks.iter().enumerate() {
        let at = format!("{at}.content.{j}");
        match (role, kind(b)) {
            (_, "text") => {
                let t = b.get("text").and_then(Value::as_str);
                let t = t.ok_or_else(|| bad(format!("{at}.text: must be a string")))?;
                parts.push(json!({"type": "text", "text": t}));
            }
            ("user", "image") => parts.push(image(b, &at)?),
            ("user", "document") => parts.push(document(b, &at)?),
            ("user", "tool_result") => out.push(tool_result(b, &at)?),
            ("assistant", "tool_use") => calls.push(tool_use(b, &at)?),
            (_, "thinking" | "redacted_thinking") => {}
            (_, k) => {
                return Err(bad(format!(
                    "{at}: a `{k}` block is not accepted in a {role} message"
                )))
            }
        }
    }
    let all_text = parts.iter().all(|p| kind(p) == "text");
    let content = if all_text {
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        (!texts.is_empty() || calls.is_empty()).then(|| Value::String(texts.join("\n")))
    } else {
        Some(Value::Array(parts))
    };
    if role == "assistant" && !calls.is_empty() {
        out.push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
    } else if let Some(c) = content.filter(|c| c.as_str() != Some("")) {
        out.push(json!({"role": role, "content": c}));
    }
    Ok(())
}

fn image(b: &Value, at: &str) -> Result<Value, ApiError> {
    let src = b.get("source").unwrap_or(&Value::Null);
    let s = |k: &str| src.get(k).and_then(Value::as_str);
    let url = match (s("type"), s("media_type"), s("data"), s("url")) {
        (Some("base64"), Some(mt), Some(data), _) => format!("data:{mt};base64,{data}"),
        (Some("url"), _, _, Some(url)) => url.to_owned(),
        _ => {
            return Err(bad(format!(
                "{at}.source: an image source is {{type: base64, media_type, data}} or {{type: url, url}}"
            )))
        }
    };
    Ok(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// A `document` of a base64 PDF → a `file` part holding it inline.
fn document(b: &Value, at: &str) -> Result<Value, ApiError> {
    let src = b.get("source").unwrap_or(&Value::Null);
    let s = |k: &str| src.get(k).and_then(Value::as_str);
    match (s("type"), s("media_type"), s("data")) {
        (Some("base64"), Some("application/pdf"), Some(data)) => Ok(json!({"type": "file",
            "file": {"filename": "document.pdf", "file_data": format!("data:application/pdf;base64,{data}")}})),
        _ => Err(bad(format!(
            "{at}.source: a document for a model of another API than Anthropic's is a PDF given inline ({{type: base64, media_type: application/pdf, data}})"
        ))),
    }
}

fn tool_result(b: &Value, at: &str) -> Result<Value, ApiError> {
    let id = b.get("tool_use_id").and_then(Value::as_str);
    let id = id.ok_or_else(|| bad(format!("{at}.tool_use_id: must be a string")))?;
    let mut text = match b.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(c) => text_of(c, &format!("{at}.content"))?,
    };
    if b.get("is_error") == Some(&Value::Bool(true)) {
        text = format!("Error: {text}");
    }
    Ok(json!({"role": "tool", "tool_call_id": id, "content": text}))
}

fn tool_use(b: &Value, at: &str) -> Result<Value, ApiError> {
    let s = |k: &str| b.get(k).and_then(Value::as_str);
    let (Some(id), Some(name)) = (s("id"), s("name")) else {
        return Err(bad(format!(
            "{at}: a tool_use block needs an id and a name"
        )));
    };
    let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
    Ok(json!({"id": id, "type": "function",
        "function": {"name": name, "arguments": input.to_string()}}))
}

fn tools(v: &Value) -> Result<Value, ApiError> {
    let list = v
        .as_array()
        .ok_or_else(|| bad("tools: must be a list".into()))?;
    let mut out = Vec::new();
    for (i, t) in list.iter().enumerate() {
        if !matches!(kind(t), "" | "custom") {
            return Err(bad(format!(
                "tools.{i}: server tools (`{}`) are not available through this gateway",
                kind(t)
            )));
        }
        let name = t.get("name").and_then(Value::as_str);
        let name = name.ok_or_else(|| bad(format!("tools.{i}.name: must be a string")))?;
        let mut f = json!({"name": name,
            "parameters": t.get("input_schema").cloned().unwrap_or_else(|| json!({"type": "object"}))});
        if let Some(d) = t.get("description") {
            f["description"] = d.clone();
        }
        if let Some(strict) = t.get("strict").filter(|s| s.is_boolean()) {
            f["strict"] = strict.clone();
        }
        out.push(json!({"type": "function", "function": f}));
    }
    Ok(Value::Array(out))
}

fn tool_choice(c: &Value, out: &mut Map<String, Value>) -> Result<(), ApiError> {
    let choice = match kind(c) {
        "auto" => json!("auto"),
        "any" => json!("required"),
        "none" => json!("none"),
        "tool" => match c.get("name").and_then(Value::as_str) {
            Some(n) => json!({"type": "function", "function": {"name": n}}),
            None => return Err(bad("tool_choice.name: must be a string".into())),
        },
        _ => {
            return Err(bad(
                "tool_choice.type: must be one of auto, any, tool, none".into(),
            ))
        }
    };
    out.insert("tool_choice".into(), choice);
    if c.get("disable_parallel_tool_use") == Some(&Value::Bool(true)) {
        out.insert("parallel_tool_calls".into(), Value::Bool(false));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_become_chat_messages() {
        let body = json!({"model": "p/m", "max_tokens": 10, "system": [{"type": "text", "text": "Be brief."}],
            "stop_sequences": ["END"], "metadata": {"user_id": "u1"}, "cache_control": {"type": "ephemeral"},
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}}]},
                {"role": "assistant", "content": [{"type": "text", "text": "Calling."},
                    {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "rain"}]}],
            "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any"}});
        let out = to_chat(body.as_object().unwrap()).unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"model": "p/m", "max_tokens": 10, "stop": ["END"], "user": "u1",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": [{"type": "text", "text": "Weather?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]},
                    {"role": "assistant", "content": "Calling.", "tool_calls": [{"id": "t1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
                    {"role": "tool", "tool_call_id": "t1", "content": "rain"}],
                "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
                "tool_choice": "required"})
        );
    }

    #[test]
    fn system_messages_stay_in_place_and_unknown_fields_are_refused() {
        let body = json!({"model": "p/m", "max_tokens": 10, "messages": [
            {"role": "user", "content": "a"},
            {"role": "system", "content": [{"type": "text", "text": "Now French."}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "b"}]}],
            "thinking": {"type": "enabled", "budget_tokens": 30000}});
        let out = to_chat(body.as_object().unwrap()).unwrap();
        assert_eq!(
            out["messages"],
            json!([{"role": "user", "content": "a"},
                {"role": "system", "content": "Now French."},
                {"role": "assistant", "content": "b"}])
        );
        assert_eq!(out["reasoning_effort"], "xhigh");
        let mut body = body;
        body["frobnicate"] = json!(1);
        let ApiError::BadRequest(m) = to_chat(body.as_object().unwrap()).unwrap_err() else {
            panic!()
        };
        assert!(m.starts_with("frobnicate: "), "{m}");
    }
}
