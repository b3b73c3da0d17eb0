//! A Responses request → its input items and the chat path's body, for a
//! deployment whose provider does not serve `/responses` (the module's
//! field-by-field account, [`super`]).

use serde_json::{json, Map, Value};

use super::items::{bad, kind, normalize};
use gateway_base::errors::ApiError;

/// Fields copied unchanged (the gateway's own among them: the runtime's
/// resolve reads them from the translated body).
const SAME: [&str; 11] = [
    "model",
    "temperature",
    "top_p",
    "user",
    "parallel_tool_calls",
    "prompt_cache_key",
    "safety_identifier",
    "service_tier",
    "byok_api_key",
    "models",
    "additional_params",
];

/// Fields the gateway handles itself, or that change nothing in a
/// translated answer: accepted, not sent.
const KEPT_BACK: [&str; 7] = [
    "store",
    "background",
    "previous_response_id",
    "metadata",
    "truncation",
    "max_tool_calls",
    "stream_options",
];

/// The request's `input` as normalized input items (what the gateway
/// stores as the response's input); 400 naming the path of anything
/// malformed (`input[2].type: …`).
pub fn input_items(body: &Map<String, Value>) -> Result<Vec<Value>, ApiError> {
    normalize(body.get("input"))
}

/// The chat completions body of a Responses request `body` whose earlier
/// conversation (the stored input and output items of the previous
/// responses, oldest first, normalized) is `history`; 400 naming the
/// field that has no chat equivalent.
pub fn to_chat(
    body: &Map<String, Value>,
    history: &[Value],
) -> Result<Map<String, Value>, ApiError> {
    let mut out = Map::new();
    for (k, v) in body {
        if v.is_null() || KEPT_BACK.contains(&k.as_str()) {
            continue;
        }
        if SAME.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        } else {
            option(k, v, &mut out)?;
        }
    }
    let mut messages = Vec::new();
    match body.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => messages.push(json!({"role": "system", "content": s})),
        Some(_) => return Err(bad("instructions: must be a string".into())),
    }
    for (i, item) in history.iter().enumerate() {
        let at = format!("previous_response_id: the earlier conversation's item {i}");
        self::item(item, &at, &mut messages)?;
    }
    for (i, item) in input_items(body)?.iter().enumerate() {
        self::item(item, &format!("input[{i}]"), &mut messages)?;
    }
    out.insert("messages".into(), Value::Array(messages));
    if out.get("stream") == Some(&Value::Bool(true)) {
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(out)
}

/// Translates top-level field `k` (not copied, not kept back) into `out`.
fn option(k: &str, v: &Value, out: &mut Map<String, Value>) -> Result<(), ApiError> {
    match k {
        "input" | "instructions" => {}
        "stream" => {
            if !v.is_boolean() {
                return Err(bad("stream: must be true or false".into()));
            }
            out.insert("stream".into(), v.clone());
        }
        "max_output_tokens" => {
            out.insert("max_completion_tokens".into(), v.clone());
        }
        "tools" => {
            out.insert("tools".into(), tools(v)?);
        }
        "tool_choice" => {
            out.insert("tool_choice".into(), tool_choice(v)?);
        }
        "text" => text(v, out)?,
        "reasoning" => reasoning(v, out)?,
        "include" => include(v)?,
        _ => {
            return Err(bad(format!(
                "{k}: not supported when translated to chat completions; leave it out"
            )))
        }
    }
    Ok(())
}

fn tools(v: &Value) -> Result<Value, ApiError> {
    let list = v
        .as_array()
        .ok_or_else(|| bad("tools: must be a list".into()))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        match kind(t) {
            "function" => {}
            "" => return Err(bad(format!("tools[{i}].type: must be a string"))),
            other => {
                return Err(bad(format!(
                    "tools[{i}].type: the hosted tool '{other}' is not offered by this deployment"
                )))
            }
        }
        let name = t.get("name").and_then(Value::as_str);
        let name = name.ok_or_else(|| bad(format!("tools[{i}].name: must be a string")))?;
        let mut f = json!({"name": name});
        for k in ["description", "parameters", "strict"] {
            if let Some(x) = t.get(k).filter(|x| !x.is_null()) {
                f[k] = x.clone();
            }
        }
        out.push(json!({"type": "function", "function": f}));
    }
    Ok(Value::Array(out))
}

fn tool_choice(c: &Value) -> Result<Value, ApiError> {
    match (c.as_str(), kind(c)) {
        (Some(s @ ("auto" | "none" | "required")), _) => Ok(s.into()),
        (None, "function") => match c.get("name").and_then(Value::as_str) {
            Some(n) => Ok(json!({"type": "function", "function": {"name": n}})),
            None => Err(bad("tool_choice.name: must be a string".into())),
        },
        (None, t) if !t.is_empty() => Err(bad(format!(
            "tool_choice.type: `{t}` is not offered by this deployment (function only)"
        ))),
        _ => Err(bad(
            "tool_choice: must be auto, none, required or {type: function, name}".into(),
        )),
    }
}

/// `text.format` → `response_format`, `text.verbosity` → `verbosity`.
fn text(v: &Value, out: &mut Map<String, Value>) -> Result<(), ApiError> {
    let t = v
        .as_object()
        .ok_or_else(|| bad("text: must be an object".into()))?;
    for (k, v) in t {
        match (k.as_str(), v) {
            (_, Value::Null) => {}
            ("format", f) => {
                if let Some(rf) = format(f)? {
                    out.insert("response_format".into(), rf);
                }
            }
            ("verbosity", v) => {
                out.insert("verbosity".into(), v.clone());
            }
            (k, _) => {
                return Err(bad(format!(
                    "text.{k}: not supported when translated to chat completions; leave it out"
                )))
            }
        }
    }
    Ok(())
}

fn format(f: &Value) -> Result<Option<Value>, ApiError> {
    match kind(f) {
        "text" => Ok(None),
        "json_object" => Ok(Some(json!({"type": "json_object"}))),
        "json_schema" => {
            let name = f.get("name").and_then(Value::as_str);
            let name = name.ok_or_else(|| bad("text.format.name: must be a string".into()))?;
            let schema = f.get("schema").filter(|s| s.is_object());
            let schema =
                schema.ok_or_else(|| bad("text.format.schema: must be an object".into()))?;
            let mut js = json!({"name": name, "schema": schema});
            for k in ["strict", "description"] {
                if let Some(x) = f.get(k).filter(|x| !x.is_null()) {
                    js[k] = x.clone();
                }
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": js})))
        }
        _ => Err(bad(
            "text.format.type: must be text, json_object or json_schema".into(),
        )),
    }
}

/// `reasoning.effort` → `reasoning_effort`; the summary's detail dropped.
fn reasoning(v: &Value, out: &mut Map<String, Value>) -> Result<(), ApiError> {
    let r = v
        .as_object()
        .ok_or_else(|| bad("reasoning: must be an object".into()))?;
    for (k, v) in r {
        match (k.as_str(), v) {
            (_, Value::Null) | ("summary" | "generate_summary", _) => {}
            ("effort", Value::String(_)) => {
                out.insert("reasoning_effort".into(), v.clone());
            }
            ("effort", _) => return Err(bad("reasoning.effort: must be a string".into())),
            (k, _) => {
                return Err(bad(format!(
                    "reasoning.{k}: not supported when translated to chat completions; leave it out"
                )))
            }
        }
    }
    Ok(())
}

/// `include`: only what a translated answer has nothing of.
fn include(v: &Value) -> Result<(), ApiError> {
    let list = v
        .as_array()
        .ok_or_else(|| bad("include: must be a list".into()))?;
    for (i, x) in list.iter().enumerate() {
        if x.as_str() != Some("reasoning.encrypted_content") {
            return Err(bad(format!(
                "include[{i}]: not supported when translated to chat completions; leave it out"
            )));
        }
    }
    Ok(())
}

/// One normalized item (at `at`) → chat messages appended to `out`.
fn item(v: &Value, at: &str, out: &mut Vec<Value>) -> Result<(), ApiError> {
    match kind(v) {
        "message" => message(v, at, out),
        "function_call" => {
            let s = |k: &str| v.get(k).cloned().unwrap_or_else(|| "".into());
            let call = json!({"id": s("call_id"), "type": "function",
                "function": {"name": s("name"), "arguments": s("arguments")}});
            match out.last_mut() {
                Some(m) if m["role"] == "assistant" => match m.get_mut("tool_calls") {
                    Some(Value::Array(calls)) => calls.push(call),
                    _ => m["tool_calls"] = json!([call]),
                },
                _ => out.push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
            }
            Ok(())
        }
        "function_call_output" => {
            let content = match v.get("output") {
                Some(Value::Array(parts)) => joined(parts, &format!("{at}.output"))?,
                Some(o) => o.clone(),
                None => "".into(),
            };
            let id = v.get("call_id").cloned().unwrap_or(Value::Null);
            out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            Ok(())
        }
        "reasoning" => Ok(()),
        t => Err(bad(format!(
            "{at}.type: a '{t}' item has no chat completions equivalent (a hosted tool's, or a stored item's reference); leave it out"
        ))),
    }
}

/// A function output's parts: their text, joined; another part is a 400.
fn joined(parts: &[Value], at: &str) -> Result<Value, ApiError> {
    let mut texts = Vec::with_capacity(parts.len());
    for (j, p) in parts.iter().enumerate() {
        match (kind(p), p.get("text").and_then(Value::as_str)) {
            ("input_text", Some(t)) => texts.push(t),
            (k, _) => {
                return Err(bad(format!(
                    "{at}[{j}].type: a chat tool result is text; a `{k}` part has no equivalent"
                )))
            }
        }
    }
    Ok(texts.concat().into())
}

/// A message item → one chat message.
fn message(v: &Value, at: &str, out: &mut Vec<Value>) -> Result<(), ApiError> {
    let role = match v.get("role").and_then(Value::as_str) {
        Some("developer") => "system",
        Some(r) => r,
        None => return Err(bad(format!("{at}.role: must be a string"))),
    };
    let parts = v.get("content").and_then(Value::as_array);
    let mut content = Vec::new();
    for (j, p) in parts.into_iter().flatten().enumerate() {
        content.push(part(p, &format!("{at}.content[{j}]"))?);
    }
    let content = match content.as_slice() {
        [one] if kind(one) == "text" => one["text"].clone(),
        [] if role == "assistant" => Value::Null,
        [] => "".into(),
        _ => Value::Array(content),
    };
    out.push(json!({"role": role, "content": content}));
    Ok(())
}

/// One content part → chat's.
fn part(p: &Value, at: &str) -> Result<Value, ApiError> {
    let s = |k: &str| p.get(k).and_then(Value::as_str);
    match kind(p) {
        "input_text" | "output_text" => Ok(json!({"type": "text", "text": s("text")})),
        "refusal" => Ok(json!({"type": "text", "text": s("refusal")})),
        "input_image" => match s("image_url") {
            Some(url) => {
                let mut image = json!({"url": url});
                if let Some(d) = s("detail") {
                    image["detail"] = d.into();
                }
                Ok(json!({"type": "image_url", "image_url": image}))
            }
            None => Err(held(at, "file_id")),
        },
        "input_file" => match (s("file_data"), s("file_id"), s("file_url")) {
            (Some(data), _, _) => {
                let mut file = json!({"file_data": data});
                if let Some(n) = s("filename") {
                    file["filename"] = n.into();
                }
                Ok(json!({"type": "file", "file": file}))
            }
            (None, Some(_), _) => Err(held(at, "file_id")),
            _ => Err(held(at, "file_url")),
        },
        k => Err(bad(format!(
            "{at}.type: `{k}` has no chat completions equivalent"
        ))),
    }
}

/// 400: content the body does not carry (a provider's file, a URL).
fn held(at: &str, field: &str) -> ApiError {
    bad(format!(
        "{at}.{field}: content held elsewhere cannot be sent to this deployment; give it inline (file_data, or an image_url)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn refused(body: Value) -> String {
        match to_chat(&obj(body), &[]).unwrap_err() {
            ApiError::BadRequest(m) => m,
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn a_string_input_is_one_user_message_and_items_are_normalized() {
        let items = input_items(&obj(json!({"input": "Hi"}))).unwrap();
        assert_eq!(items.len(), 1);
        assert!(items[0]["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(
            items[0]["content"],
            json!([{"type": "input_text", "text": "Hi"}])
        );
        let items = input_items(&obj(json!({"input": [
            {"role": "assistant", "content": "Earlier."},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"id": "msg_1"}]})))
        .unwrap();
        assert_eq!(items[0]["type"], "message");
        assert_eq!(
            items[0]["content"],
            json!([{"type": "output_text", "text": "Earlier.", "annotations": []}])
        );
        assert!(items[1]["id"].as_str().unwrap().starts_with("fc_"));
        assert!(items[2]["id"].as_str().unwrap().starts_with("fco_"));
        assert_eq!(items[3], json!({"type": "item_reference", "id": "msg_1"}));
        for (input, at) in [
            (
                json!([{"type": "message", "role": "user", "content": 3}]),
                "input[0].content:",
            ),
            (json!(["x"]), "input[0]:"),
            (json!([{"content": "x"}]), "input[0].type:"),
            (
                json!([{"role": "user", "content": [{"type": "input_text"}]}]),
                "input[0].content[0].text:",
            ),
            (
                json!([{"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "output_text", "text": "b"}]}]),
                "input[1].content[0].type:",
            ),
            (
                json!([{"type": "function_call", "call_id": "c", "name": "f"}]),
                "input[0].arguments:",
            ),
            (json!([{"role": "tool", "content": "a"}]), "input[0].role:"),
            (json!(7), "input:"),
        ] {
            let Err(ApiError::BadRequest(m)) = input_items(&obj(json!({"input": input}))) else {
                panic!("{at}")
            };
            assert!(m.starts_with(at), "{m}");
        }
    }

    #[test]
    fn every_item_kind_becomes_chat_messages() {
        let history = input_items(&obj(json!({"input": [
            {"role": "user", "content": "Weather in Oslo?"},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
            {"type": "function_call", "call_id": "c2", "name": "time", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "rain"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "noon"}]}]})))
        .unwrap();
        let body = json!({"model": "p/m", "instructions": "Be brief.", "models": ["a/m"], "byok_api_key": "k",
            "temperature": 0.5, "top_p": 1, "user": "u", "parallel_tool_calls": false,
            "max_output_tokens": 100, "stream": true, "store": true, "background": false,
            "previous_response_id": "resp_1", "metadata": {"a": "b"}, "truncation": "auto",
            "include": ["reasoning.encrypted_content"], "reasoning": {"effort": "low", "summary": "auto"},
            "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}, "strict": true}},
            "tools": [{"type": "function", "name": "weather", "description": "d",
                "parameters": {"type": "object"}, "strict": true}],
            "tool_choice": {"type": "function", "name": "weather"},
            "input": [
                {"role": "developer", "content": "Answer in French."},
                {"role": "user", "content": [{"type": "input_text", "text": "And this?"},
                    {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "high"},
                    {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"}]}]});
        let out = to_chat(&obj(body), &history).unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"model": "p/m", "models": ["a/m"], "byok_api_key": "k", "temperature": 0.5, "top_p": 1,
                "user": "u", "parallel_tool_calls": false, "max_completion_tokens": 100,
                "stream": true, "stream_options": {"include_usage": true}, "reasoning_effort": "low",
                "response_format": {"type": "json_schema",
                    "json_schema": {"name": "w", "schema": {"type": "object"}, "strict": true}},
                "tools": [{"type": "function", "function": {"name": "weather", "description": "d",
                    "parameters": {"type": "object"}, "strict": true}}],
                "tool_choice": {"type": "function", "function": {"name": "weather"}},
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Weather in Oslo?"},
                    {"role": "assistant", "content": "Checking.", "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
                        {"id": "c2", "type": "function", "function": {"name": "time", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "c1", "content": "rain"},
                    {"role": "tool", "tool_call_id": "c2", "content": "noon"},
                    {"role": "system", "content": "Answer in French."},
                    {"role": "user", "content": [{"type": "text", "text": "And this?"},
                        {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "detail": "high"}},
                        {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"}}]}]})
        );
        let plain = to_chat(&obj(json!({"model": "m", "input": [{"type": "function_call",
            "call_id": "c", "name": "f", "arguments": "{}"}], "text": {"format": {"type": "text"}}})), &[])
        .unwrap();
        assert_eq!(plain["messages"][0]["content"], Value::Null);
        assert!(plain.get("response_format").is_none());
    }

    #[test]
    fn hosted_tools_unknown_fields_and_held_content_are_refused_by_name() {
        let m = refused(
            json!({"input": "x", "tools": [{"type": "function", "name": "f"},
            {"type": "web_search"}]}),
        );
        assert_eq!(
            m,
            "tools[1].type: the hosted tool 'web_search' is not offered by this deployment"
        );
        assert!(refused(json!({"input": "x", "frobnicate": 1}))
            .starts_with("frobnicate: not supported when translated to chat completions"));
        for (body, at) in [
            (json!({"conversation": "c"}), "conversation:"),
            (json!({"top_logprobs": 2}), "top_logprobs:"),
            (
                json!({"include": ["message.output_text.logprobs"]}),
                "include[0]:",
            ),
            (
                json!({"tool_choice": {"type": "web_search"}}),
                "tool_choice.type:",
            ),
            (
                json!({"text": {"format": {"type": "json_schema", "schema": {}}}}),
                "text.format.name:",
            ),
            (json!({"reasoning": {"mode": "pro"}}), "reasoning.mode:"),
            (
                json!({"input": [{"type": "web_search_call", "id": "ws_1"}]}),
                "input[0].type:",
            ),
            (json!({"input": [{"id": "msg_1"}]}), "input[0].type:"),
            (
                json!({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}),
                "input[0].content[0].file_id:",
            ),
            (
                json!({"input": [{"role": "user", "content": [{"type": "input_file", "file_url": "https://x"}]}]}),
                "input[0].content[0].file_url:",
            ),
            (
                json!({"input": [{"type": "function_call_output", "call_id": "c",
                "output": [{"type": "input_image", "image_url": "https://x"}]}]}),
                "input[0].output[0].type:",
            ),
        ] {
            let m = refused(body.clone());
            assert!(m.starts_with(at), "{body}: {m}");
        }
        let stored = [json!({"type": "web_search_call", "id": "ws_1", "status": "completed"})];
        let Err(ApiError::BadRequest(m)) = to_chat(&obj(json!({"input": "x"})), &stored) else {
            panic!()
        };
        assert!(m.starts_with("previous_response_id: "), "{m}");
    }
}
