//! The request's `input` as normalized items (the module's "Input items"):
//! checked field by field, a string content made one part, each message
//! and function item given an id when it has none.

use serde_json::{json, Map, Value};

use super::answer::item_id;
use gateway_base::errors::ApiError;

/// 400 with `m` (which starts with the field's path).
pub(super) fn bad(m: String) -> ApiError {
    ApiError::BadRequest(m)
}

/// The `type` of an object, `""` when it has none.
pub(super) fn kind(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The string field `k` of `v`; 400 naming `at.k` when it is not one.
fn string<'a>(v: &'a Map<String, Value>, k: &str, at: &str) -> Result<&'a str, ApiError> {
    v.get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| bad(format!("{at}.{k}: must be a string")))
}

/// The normalized items of `input` (absent: none).
pub(super) fn normalize(input: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    match input {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![json!({"type": "message", "id": item_id("msg"),
            "role": "user", "content": [{"type": "input_text", "text": s}]})]),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| item(v, &format!("input[{i}]")))
            .collect(),
        Some(_) => Err(bad("input: must be a string or a list of items".into())),
    }
}

/// One item, normalized.
fn item(v: &Value, at: &str) -> Result<Value, ApiError> {
    let o = v
        .as_object()
        .ok_or_else(|| bad(format!("{at}: must be an object")))?;
    let ty = match o.get("type") {
        Some(Value::String(t)) => t.as_str(),
        None | Some(Value::Null) if o.contains_key("role") => "message",
        None | Some(Value::Null) if o.contains_key("id") => "item_reference",
        _ => {
            return Err(bad(format!(
                "{at}.type: must be a string (an item without one is a message, with a role)"
            )))
        }
    };
    let mut out = o.clone();
    out.insert("type".into(), ty.into());
    match ty {
        "message" => message(&mut out, at)?,
        "function_call" => {
            for k in ["call_id", "name", "arguments"] {
                string(o, k, at)?;
            }
            identify(&mut out, "fc");
        }
        "function_call_output" => {
            string(o, "call_id", at)?;
            match o.get("output") {
                Some(Value::String(_)) => {}
                Some(Value::Array(parts)) => {
                    let parts = self::parts(parts, "user", &format!("{at}.output"))?;
                    out.insert("output".into(), Value::Array(parts));
                }
                _ => {
                    return Err(bad(format!(
                        "{at}.output: must be a string or a list of content parts"
                    )))
                }
            }
            identify(&mut out, "fco");
        }
        "reasoning" if !o.get("summary").is_some_and(Value::is_array) => {
            return Err(bad(format!("{at}.summary: must be a list")));
        }
        "item_reference" => {
            string(o, "id", at)?;
        }
        "" => return Err(bad(format!("{at}.type: must not be empty"))),
        _ => {}
    }
    Ok(Value::Object(out))
}

/// Gives `item` an id of `prefix` when it has none.
fn identify(item: &mut Map<String, Value>, prefix: &str) {
    if !item.get("id").is_some_and(Value::is_string) {
        item.insert("id".into(), item_id(prefix).into());
    }
}

/// A message item: its role checked, its content made a list of parts.
fn message(m: &mut Map<String, Value>, at: &str) -> Result<(), ApiError> {
    let role = match m.get("role").and_then(Value::as_str) {
        Some(r @ ("user" | "assistant" | "system" | "developer")) => r.to_owned(),
        _ => {
            return Err(bad(format!(
                "{at}.role: must be user, assistant, system or developer"
            )))
        }
    };
    let content = match m.get("content") {
        Some(Value::String(s)) => vec![text_part(&role, s)],
        Some(Value::Array(ps)) => parts(ps, &role, &format!("{at}.content"))?,
        _ => {
            return Err(bad(format!(
                "{at}.content: must be a string or a list of content parts"
            )))
        }
    };
    m.insert("content".into(), Value::Array(content));
    identify(m, "msg");
    Ok(())
}

/// A text part of `role`: an assistant's is output text.
fn text_part(role: &str, text: &str) -> Value {
    match role {
        "assistant" => json!({"type": "output_text", "text": text, "annotations": []}),
        _ => json!({"type": "input_text", "text": text}),
    }
}

/// The content parts of a `role` message (a function's output: a user's
/// parts), each checked.
fn parts(ps: &[Value], role: &str, at: &str) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::with_capacity(ps.len());
    for (j, p) in ps.iter().enumerate() {
        let at = format!("{at}[{j}]");
        let o = p
            .as_object()
            .ok_or_else(|| bad(format!("{at}: must be an object")))?;
        match (role, kind(p)) {
            ("assistant", "output_text" | "input_text") => {
                let text = string(o, "text", &at)?;
                let mut part = o.clone();
                part.insert("type".into(), "output_text".into());
                part.insert("text".into(), text.into());
                part.entry("annotations").or_insert_with(|| json!([]));
                out.push(Value::Object(part));
            }
            ("assistant", "refusal") => {
                string(o, "refusal", &at)?;
                out.push(p.clone());
            }
            ("assistant", k) => {
                return Err(bad(format!(
                    "{at}.type: an assistant message holds output_text or refusal parts, not `{k}`"
                )))
            }
            (_, "input_text") => {
                string(o, "text", &at)?;
                out.push(p.clone());
            }
            (_, "input_image") => {
                if !["image_url", "file_id"]
                    .iter()
                    .any(|k| o.get(*k).is_some_and(Value::is_string))
                {
                    return Err(bad(format!(
                        "{at}.image_url: an input_image has an image_url or a file_id"
                    )));
                }
                let mut part = o.clone();
                part.entry("detail").or_insert_with(|| "auto".into());
                out.push(Value::Object(part));
            }
            (_, "input_file") => {
                let given = ["file_data", "file_id", "file_url"];
                if !given
                    .iter()
                    .any(|k| o.get(*k).is_some_and(Value::is_string))
                {
                    return Err(bad(format!(
                        "{at}.file_data: an input_file has a file_data, a file_id or a file_url"
                    )));
                }
                out.push(p.clone());
            }
            (_, k) => {
                return Err(bad(format!(
                    "{at}.type: must be input_text, input_image or input_file, not `{k}`"
                )))
            }
        }
    }
    Ok(out)
}
