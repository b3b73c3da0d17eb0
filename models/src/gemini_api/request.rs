//! A Gemini `GenerateContentRequest` → the chat path's (OpenAI) body.
//!
//! `systemInstruction` (its text parts) → a first `system` message;
//! `contents` (role `user`, `model` or `function`) of parts: `text` →
//! text, `inlineData` of an `image/` type → an `image_url` part (a `data:`
//! URL), of `application/pdf` → a `file` part, `fileData` of an image → an
//! `image_url` part (its URI); a `model` turn's `functionCall` → its
//! `tool_calls` (the `args` as JSON text; the call's `id`, else one made
//! here), a `functionResponse` → a `tool` message answering the call of
//! that id (else the earliest unanswered call of that name); a `thought`
//! part is dropped. `generationConfig`: `maxOutputTokens` → `max_tokens`,
//! `temperature`, `topP` → `top_p`, `stopSequences` → `stop`,
//! `candidateCount` → `n`, `seed`, `presencePenalty`, `frequencyPenalty`,
//! `responseMimeType` `application/json` → `response_format`
//! `json_object` (`json_schema` with `responseJsonSchema`). `tools`'
//! `functionDeclarations` → `function` tools (`parameters`, its OpenAPI
//! types in lower case, or `parametersJsonSchema`); `toolConfig`'s
//! `functionCallingConfig` `AUTO` / `ANY` / `NONE` → `auto` / `required`
//! (the function, when one is allowed) / `none`. A stream asks for the
//! usage chunk (`stream_options.include_usage`). `model` and the
//! gateway's own fields pass. Any other field (`safetySettings`,
//! `cachedContent`, `generationConfig.topK`, a `googleSearch` tool, ...)
//! is a 400 naming it: the answer would not be what the caller asked.

use serde_json::{json, Map, Value};

use super::{camel, field, must_be, untranslatable};
use gateway_base::errors::ApiError;

/// Fields copied unchanged: the gateway's own.
const SAME: [&str; 4] = ["model", "byok_api_key", "additional_params", "models"];

/// The fields of a request translated here (camelCase).
const KNOWN: [&str; 5] = [
    "contents",
    "systemInstruction",
    "generationConfig",
    "tools",
    "toolConfig",
];

/// The chat body of a Gemini request body; `stream`: the caller asked
/// `streamGenerateContent`.
pub fn to_chat(body: &Map<String, Value>, stream: bool) -> Result<Map<String, Value>, ApiError> {
    for k in body.keys() {
        if !SAME.contains(&k.as_str()) && !KNOWN.contains(&camel(k).as_str()) {
            return Err(untranslatable(&camel(k)));
        }
    }
    let mut out = Map::new();
    for f in SAME {
        if let Some(v) = body.get(f) {
            out.insert(f.into(), v.clone());
        }
    }
    let mut messages = Vec::new();
    if let Some(s) = field(body, "systemInstruction") {
        let text = system_text(s)?;
        messages.push(json!({"role": "system", "content": text}));
    }
    let contents = field(body, "contents")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| must_be("contents", "a non-empty list of contents"))?;
    let mut calls = Calls::default();
    for (i, c) in contents.iter().enumerate() {
        content(i, c, &mut calls, &mut messages)?;
    }
    out.insert("messages".into(), Value::Array(messages));
    if let Some(gc) = field(body, "generationConfig") {
        generation_config(gc, &mut out)?;
    }
    if let Some(t) = field(body, "tools") {
        out.insert("tools".into(), tools(t)?);
    }
    if let Some(t) = field(body, "toolConfig") {
        tool_config(t, &mut out)?;
    }
    if stream {
        out.insert("stream".into(), Value::Bool(true));
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(out)
}

/// The text of `systemInstruction` (a content, or a string).
fn system_text(s: &Value) -> Result<String, ApiError> {
    if let Some(t) = s.as_str() {
        return Ok(t.to_owned());
    }
    let parts = s
        .as_object()
        .and_then(|o| field(o, "parts"))
        .and_then(Value::as_array)
        .ok_or_else(|| must_be("systemInstruction", "a content with parts"))?;
    let mut text = String::new();
    for (j, p) in parts.iter().enumerate() {
        match p.get("text").and_then(Value::as_str) {
            Some(t) => text.push_str(t),
            None => return Err(untranslatable(&format!("systemInstruction.parts[{j}]"))),
        }
    }
    Ok(text)
}

/// The function calls of the conversation so far: each call's id, and
/// those no `functionResponse` answered yet (name, id).
#[derive(Default)]
struct Calls {
    made: usize,
    open: Vec<(String, String)>,
}

impl Calls {
    fn call(&mut self, name: &str, id: Option<&str>) -> String {
        self.made += 1;
        let id = id.map_or_else(|| format!("call_{}", self.made), str::to_owned);
        self.open.push((name.to_owned(), id.clone()));
        id
    }

    fn answer(&mut self, name: &str, id: Option<&str>) -> String {
        let pos = self
            .open
            .iter()
            .position(|(n, i)| Some(i.as_str()) == id || (id.is_none() && n == name));
        match (pos, id) {
            (Some(p), _) => self.open.remove(p).1,
            (None, Some(id)) => id.to_owned(),
            (None, None) => format!("call_{name}"),
        }
    }
}

/// One content `c` (the `i`th) as chat messages.
fn content(
    i: usize,
    c: &Value,
    calls: &mut Calls,
    messages: &mut Vec<Value>,
) -> Result<(), ApiError> {
    let at = format!("contents[{i}]");
    let c = c.as_object().ok_or_else(|| must_be(&at, "an object"))?;
    let role = field(c, "role").and_then(Value::as_str).unwrap_or("user");
    let parts = field(c, "parts")
        .and_then(Value::as_array)
        .ok_or_else(|| must_be(&format!("{at}.parts"), "a list of parts"))?;
    let model = match role {
        "model" => true,
        "user" | "function" => false,
        other => {
            return Err(must_be(
                &format!("{at}.role"),
                &format!("user or model (not {other})"),
            ))
        }
    };
    let mut items = Vec::new();
    let mut tool_calls = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        let at = format!("{at}.parts[{j}]");
        let p = p.as_object().ok_or_else(|| must_be(&at, "an object"))?;
        if p.get("thought") == Some(&Value::Bool(true)) {
            continue;
        }
        if let Some(t) = field(p, "text") {
            let t = t.as_str().ok_or_else(|| must_be(&at, "a text"))?;
            items.push(json!({"type": "text", "text": t}));
        } else if let Some(f) = field(p, "functionCall").filter(|_| model) {
            let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
            let id = calls.call(name, f.get("id").and_then(Value::as_str));
            let args = f.get("args").cloned().unwrap_or_else(|| json!({}));
            tool_calls.push(json!({"id": id, "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}));
        } else if let Some(f) = field(p, "functionResponse").filter(|_| !model) {
            let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
            let id = calls.answer(name, f.get("id").and_then(Value::as_str));
            let response = f.get("response").cloned().unwrap_or_else(|| json!({}));
            messages.push(json!({"role": "tool", "tool_call_id": id,
                "content": response.to_string()}));
        } else if !model {
            items.push(media(p, &at)?);
        } else {
            return Err(untranslatable(&at));
        }
    }
    if model {
        let text: String = items
            .iter()
            .filter_map(|i| i.get("text").and_then(Value::as_str))
            .collect();
        let mut m = json!({"role": "assistant", "content": text});
        if !tool_calls.is_empty() {
            m["tool_calls"] = Value::Array(tool_calls);
        }
        messages.push(m);
    } else if !items.is_empty() {
        let content = match items.iter().all(|i| i["type"] == "text") {
            true => Value::String(items.iter().filter_map(|i| i["text"].as_str()).collect()),
            false => Value::Array(items),
        };
        messages.push(json!({"role": "user", "content": content}));
    }
    Ok(())
}

/// A user's `inlineData` / `fileData` part as a chat content part.
fn media(p: &Map<String, Value>, at: &str) -> Result<Value, ApiError> {
    let obj = |v: &Value| v.as_object().cloned().unwrap_or_default();
    let mime = |o: &Map<String, Value>| {
        field(o, "mimeType")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    if let Some(d) = field(p, "inlineData").map(obj) {
        let data = field(&d, "data")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mime = mime(&d);
        let url = format!("data:{mime};base64,{data}");
        if mime.starts_with("image/") {
            return Ok(json!({"type": "image_url", "image_url": {"url": url}}));
        }
        if mime == "application/pdf" {
            return Ok(
                json!({"type": "file", "file": {"filename": "document.pdf", "file_data": url}}),
            );
        }
        return Err(untranslatable(&format!("{at}.inlineData (of type {mime})")));
    }
    if let Some(d) = field(p, "fileData").map(obj) {
        let uri = field(&d, "fileUri")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if mime(&d).starts_with("image/") && uri.starts_with("http") {
            return Ok(json!({"type": "image_url", "image_url": {"url": uri}}));
        }
        return Err(untranslatable(&format!("{at}.fileData")));
    }
    Err(untranslatable(at))
}

/// `generationConfig` into the chat body.
fn generation_config(gc: &Value, out: &mut Map<String, Value>) -> Result<(), ApiError> {
    let gc = gc
        .as_object()
        .ok_or_else(|| must_be("generationConfig", "an object"))?;
    let mut mime = None;
    let mut schema = None;
    for (k, v) in gc {
        if v.is_null() {
            continue;
        }
        let to = match camel(k).as_str() {
            "maxOutputTokens" => "max_tokens",
            "temperature" => "temperature",
            "topP" => "top_p",
            "stopSequences" => "stop",
            "candidateCount" => "n",
            "seed" => "seed",
            "presencePenalty" => "presence_penalty",
            "frequencyPenalty" => "frequency_penalty",
            "responseMimeType" => {
                mime = v.as_str().map(str::to_owned);
                continue;
            }
            "responseJsonSchema" => {
                schema = Some(v.clone());
                continue;
            }
            other => return Err(untranslatable(&format!("generationConfig.{other}"))),
        };
        out.insert(to.into(), v.clone());
    }
    match (mime.as_deref(), schema) {
        (Some("application/json"), Some(s)) => {
            out.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {"name": "response", "schema": s}}),
            );
        }
        (Some("application/json"), None) => {
            out.insert("response_format".into(), json!({"type": "json_object"}));
        }
        (None | Some("text/plain"), None) => {}
        (_, Some(_)) => {
            return Err(must_be(
                "generationConfig.responseMimeType",
                "application/json with responseJsonSchema",
            ))
        }
        (Some(m), None) => {
            return Err(untranslatable(&format!(
                "generationConfig.responseMimeType ({m})"
            )))
        }
    }
    Ok(())
}

/// OpenAPI's upper-case `type` names (`OBJECT`) in lower case, throughout.
fn lower_types(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("type", Value::String(t)) => (k.clone(), json!(t.to_ascii_lowercase())),
                    _ => (k.clone(), lower_types(v)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(lower_types).collect()),
        other => other.clone(),
    }
}

/// `tools`: their function declarations as `function` tools.
fn tools(t: &Value) -> Result<Value, ApiError> {
    let list = t
        .as_array()
        .ok_or_else(|| must_be("tools", "a list of tools"))?;
    let mut out = Vec::new();
    for (i, tool) in list.iter().enumerate() {
        let tool = tool
            .as_object()
            .ok_or_else(|| must_be(&format!("tools[{i}]"), "an object"))?;
        for (k, v) in tool {
            if camel(k) != "functionDeclarations" {
                return Err(untranslatable(&format!("tools[{i}].{}", camel(k))));
            }
            for d in v.as_array().into_iter().flatten() {
                let d = d.as_object().cloned().unwrap_or_default();
                let mut f = json!({"name": d.get("name").cloned().unwrap_or_default()});
                if let Some(desc) = field(&d, "description") {
                    f["description"] = desc.clone();
                }
                if let Some(p) = field(&d, "parametersJsonSchema") {
                    f["parameters"] = p.clone();
                } else if let Some(p) = field(&d, "parameters") {
                    f["parameters"] = lower_types(p);
                }
                out.push(json!({"type": "function", "function": f}));
            }
        }
    }
    Ok(Value::Array(out))
}

/// `toolConfig.functionCallingConfig` as `tool_choice`.
fn tool_config(t: &Value, out: &mut Map<String, Value>) -> Result<(), ApiError> {
    let Some(fc) = t
        .as_object()
        .and_then(|o| field(o, "functionCallingConfig"))
        .and_then(Value::as_object)
    else {
        return Ok(());
    };
    let allowed: Vec<&str> = field(fc, "allowedFunctionNames")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let choice = match field(fc, "mode").and_then(Value::as_str).unwrap_or("AUTO") {
        "AUTO" => json!("auto"),
        "NONE" => json!("none"),
        "ANY" => match allowed.as_slice() {
            [one] => json!({"type": "function", "function": {"name": one}}),
            _ => json!("required"),
        },
        other => {
            return Err(untranslatable(&format!(
                "toolConfig.functionCallingConfig.mode ({other})"
            )))
        }
    };
    out.insert("tool_choice".into(), choice);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(v: Value) -> Result<Value, ApiError> {
        to_chat(v.as_object().unwrap(), false).map(Value::Object)
    }

    #[test]
    fn a_conversation_with_a_function_round_trip() {
        let v = json!({"model": "p/m", "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "contents": [
                {"role": "user", "parts": [{"text": "Weather in "}, {"text": "Paris?"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}]},
                {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"t": 20}}}]},
                {"role": "user", "parts": [{"text": "Look"}, {"inlineData": {"mimeType": "image/png", "data": "AAA"}}]}],
            "generationConfig": {"maxOutputTokens": 9, "stopSequences": ["END"], "topP": 0.5,
                "responseMimeType": "application/json"},
            "tools": [{"functionDeclarations": [{"name": "get_weather", "description": "w",
                "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}]}],
            "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}});
        assert_eq!(
            chat(v).unwrap(),
            json!({"model": "p/m", "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\":20}"},
                {"role": "user", "content": [{"type": "text", "text": "Look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]}],
                "max_tokens": 9, "stop": ["END"], "top_p": 0.5,
                "response_format": {"type": "json_object"},
                "tools": [{"type": "function", "function": {"name": "get_weather", "description": "w",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})
        );
    }

    #[test]
    fn a_stream_asks_for_its_usage_and_snake_case_is_read() {
        let v = json!({"contents": [{"parts": [{"text": "Hi"}]}],
            "generation_config": {"max_output_tokens": 3}});
        let out = to_chat(v.as_object().unwrap(), true).unwrap();
        assert_eq!(out["max_tokens"], 3);
        assert_eq!(out["stream_options"], json!({"include_usage": true}));
        assert_eq!(out["messages"], json!([{"role": "user", "content": "Hi"}]));
    }

    #[test]
    fn what_has_no_equivalent_is_refused_by_name() {
        let base = |k: &str, v: Value| {
            let mut b = json!({"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]});
            b[k] = v;
            chat(b).unwrap_err().to_string()
        };
        assert!(base("safetySettings", json!([])).contains("safetySettings"));
        assert!(base("cached_content", json!("c/1")).contains("cachedContent"));
        assert!(base("generationConfig", json!({"topK": 3})).contains("generationConfig.topK"));
        assert!(base("tools", json!([{"googleSearch": {}}])).contains("tools[0].googleSearch"));
        let b = json!({"contents": [{"parts": [{"inlineData": {"mimeType": "audio/wav", "data": "A"}}]}]});
        assert!(chat(b)
            .unwrap_err()
            .to_string()
            .contains("contents[0].parts[0].inlineData"));
        assert!(chat(json!({"contents": []}))
            .unwrap_err()
            .to_string()
            .contains("contents"));
    }
}
