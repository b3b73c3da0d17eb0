//! A chat completion (OpenAI's JSON) → a Responses `response` object, and
//! what every response object repeats of its request ([`Echo`]): every
//! field the official SDK's `Response` requires is present, the optional
//! ones it repeats are the request's (or OpenAI's defaults).

use serde_json::{json, Map, Value};

/// The value a response shows for a field its request left out.
type Unset = fn() -> Value;

/// Fields a response repeats from its request, with the value it shows
/// when the request left them out (OpenAI's defaults).
const REPEATED: [(&str, Unset); 15] = [
    ("instructions", || Value::Null),
    ("tools", || json!([])),
    ("tool_choice", || json!("auto")),
    ("parallel_tool_calls", || json!(true)),
    ("temperature", || Value::Null),
    ("top_p", || Value::Null),
    ("max_output_tokens", || Value::Null),
    ("text", || json!({"format": {"type": "text"}})),
    ("reasoning", || json!({"effort": null, "summary": null})),
    ("previous_response_id", || Value::Null),
    ("metadata", || json!({})),
    ("store", || json!(true)),
    ("background", || json!(false)),
    ("truncation", || json!("disabled")),
    ("user", || Value::Null),
];

/// What a response object repeats from its request: its id and creation
/// time (the gateway's), the model as the caller named it, and the
/// request's settings ([`REPEATED`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Echo {
    /// The response's id (`resp_…`, [`response_id`]).
    pub id: String,
    /// When it was created (Unix seconds).
    pub created_at: u64,
    /// The model as the caller named it.
    pub model: Value,
    /// The repeated settings, each present (the request's or the default).
    pub settings: Map<String, Value>,
}

impl Echo {
    /// What a response to request `body` repeats, under `id`, created at
    /// `created_at`.
    pub fn of(body: &Map<String, Value>, id: String, created_at: u64) -> Echo {
        let mut settings = Map::new();
        for (k, default) in REPEATED {
            let v = body.get(k).filter(|v| !v.is_null()).cloned();
            settings.insert(k.into(), v.unwrap_or_else(default));
        }
        if let Some(Value::Object(t)) = settings.get_mut("text") {
            t.entry("format").or_insert_with(|| json!({"type": "text"}));
        }
        Echo {
            id,
            created_at,
            model: body.get("model").cloned().unwrap_or(Value::Null),
            settings,
        }
    }

    /// The whole `response` object of `status` (`in_progress`,
    /// `completed`, `incomplete`, `failed`) with its `output` items and
    /// `usage` (a Responses usage, [`usage`]); an incomplete one says
    /// `max_output_tokens` (the usual reason: [`Echo::finished`] says
    /// others), `error` is null.
    pub fn response(&self, status: &str, output: Vec<Value>, usage: Option<Value>) -> Value {
        let incomplete = match status {
            "incomplete" => json!({"reason": "max_output_tokens"}),
            _ => Value::Null,
        };
        let mut v = json!({
            "id": self.id, "object": "response", "created_at": self.created_at,
            "status": status, "error": null, "incomplete_details": incomplete,
            "model": self.model, "output": output, "usage": usage,
        });
        if let Value::Object(m) = &mut v {
            m.extend(self.settings.clone());
        }
        v
    }

    /// The response of a chat answer that ended with `finish` (its
    /// `finish_reason`; `None`: none came, [`super::events`] says when).
    pub(super) fn finished(
        &self,
        finish: Option<&str>,
        output: Vec<Value>,
        usage: Option<Value>,
    ) -> Value {
        let (status, reason) = ending(finish);
        let mut v = self.response(status, output, usage);
        if status == "incomplete" {
            v["incomplete_details"] = json!({ "reason": reason });
        }
        v
    }
}

/// The status and incomplete reason of a chat `finish_reason`: `length`
/// → `max_output_tokens`, `content_filter` → `content_filter`, none (a
/// stream that stopped) → incomplete of no reason, another → completed.
pub(super) fn ending(finish: Option<&str>) -> (&'static str, Option<&'static str>) {
    match finish {
        Some("length") => ("incomplete", Some("max_output_tokens")),
        Some("content_filter") => ("incomplete", Some("content_filter")),
        None => ("incomplete", None),
        Some(_) => ("completed", None),
    }
}

/// A new response id (`resp_` and 48 hex digits).
pub fn response_id() -> String {
    item_id("resp")
}

/// A new item id: `prefix`, `_` and 48 hex digits (`msg_…`, `fc_…`).
pub fn item_id(prefix: &str) -> String {
    let b: [u8; 24] = rand::random();
    format!("{prefix}_{}", hex::encode(b))
}

fn count(v: Option<&Value>) -> u64 {
    v.and_then(Value::as_u64).unwrap_or(0)
}

/// A chat `usage` → the Responses usage: `input_tokens` = `prompt_tokens`
/// (cached tokens inside, as both APIs count them), `cached_tokens` =
/// `prompt_tokens_details.cached_tokens`, `cache_write_tokens` = a
/// provider's cache writes (`cache_creation_tokens`, or Anthropic-style
/// `cache_creation_input_tokens`), `output_tokens` = `completion_tokens`,
/// `reasoning_tokens` = `completion_tokens_details.reasoning_tokens`
/// (all 0 when absent), `total_tokens`; the gateway's `cost` and `byok`
/// copied as they are (the cost's number keeps its exact text).
pub fn usage(chat_usage: &Value) -> Value {
    let input = count(chat_usage.get("prompt_tokens"));
    let output = count(chat_usage.get("completion_tokens"));
    let details = chat_usage.get("prompt_tokens_details");
    let detail = |k: &str| details.and_then(|d| d.get(k));
    let write =
        detail("cache_creation_tokens").or_else(|| chat_usage.get("cache_creation_input_tokens"));
    let reasoning = chat_usage
        .get("completion_tokens_details")
        .and_then(|d| d.get("reasoning_tokens"));
    let total = chat_usage
        .get("total_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(input.saturating_add(output));
    let mut u = json!({
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": count(detail("cached_tokens")),
            "cache_write_tokens": count(write)},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": count(reasoning)},
        "total_tokens": total,
    });
    for k in ["cost", "byok"] {
        if let Some(v) = chat_usage.get(k) {
            u[k] = v.clone();
        }
    }
    u
}

/// A `reasoning` item of summary `text`.
pub(super) fn reasoning_item(id: &str, text: &str) -> Value {
    json!({"id": id, "type": "reasoning", "summary": [{"type": "summary_text", "text": text}]})
}

/// An `output_text` part of `text`.
pub(super) fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// An assistant `message` item of `content` parts.
pub(super) fn message_item(id: &str, status: &str, content: Vec<Value>) -> Value {
    json!({"id": id, "type": "message", "status": status, "role": "assistant", "content": content})
}

/// A `function_call` item.
pub(super) fn call_item(id: &str, status: &str, call_id: &Value, name: &str, args: &str) -> Value {
    json!({"id": id, "type": "function_call", "status": status, "call_id": call_id,
        "name": name, "arguments": args})
}

/// The response object of chat completion `chat` for the request `echo`
/// repeats: its first choice's reasoning, text (and refusal) and tool
/// calls as output items, in that order.
pub fn from_chat(chat: &Value, echo: &Echo) -> Value {
    let choice = chat
        .get("choices")
        .and_then(|c| c.get(0))
        .unwrap_or(&Value::Null);
    let msg = choice.get("message").unwrap_or(&Value::Null);
    let finish = Some(
        choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .unwrap_or("stop"),
    );
    let status = match ending(finish).0 {
        "incomplete" => "incomplete",
        _ => "completed",
    };
    let text = |k: &str| msg.get(k).and_then(Value::as_str).filter(|t| !t.is_empty());
    let mut output = Vec::new();
    if let Some(t) = text("reasoning_content").or_else(|| text("reasoning")) {
        output.push(reasoning_item(&item_id("rs"), t));
    }
    let mut content = Vec::new();
    if let Some(t) = text("content") {
        content.push(text_part(t));
    }
    if let Some(r) = text("refusal") {
        content.push(json!({"type": "refusal", "refusal": r}));
    }
    if !content.is_empty() {
        output.push(message_item(&item_id("msg"), status, content));
    }
    for c in msg
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let f = c.get("function").unwrap_or(&Value::Null);
        let s = |k: &str| f.get(k).and_then(Value::as_str).unwrap_or("");
        let call_id = c
            .get("id")
            .cloned()
            .unwrap_or_else(|| item_id("call").into());
        output.push(call_item(
            &item_id("fc"),
            "completed",
            &call_id,
            s("name"),
            s("arguments"),
        ));
    }
    let usage = chat.get("usage").filter(|u| u.is_object()).map(usage);
    echo.finished(finish, output, usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fields the official SDK's `Response` requires.
    const REQUIRED: [&str; 8] = [
        "id",
        "created_at",
        "model",
        "object",
        "output",
        "parallel_tool_calls",
        "tool_choice",
        "tools",
    ];

    fn echo() -> Echo {
        let body = json!({"model": "p/m", "instructions": "Be brief.", "metadata": {"k": "v"},
            "text": {"verbosity": "low"}, "max_output_tokens": 50});
        Echo::of(body.as_object().unwrap(), "resp_1".into(), 1_700_000_000)
    }

    #[test]
    fn a_response_repeats_its_request_and_has_every_required_field() {
        let r = echo().response("in_progress", Vec::new(), None);
        for k in REQUIRED {
            assert!(r.get(k).is_some_and(|v| !v.is_null()), "{k}: {r}");
        }
        assert_eq!(r["object"], "response");
        assert_eq!(r["instructions"], "Be brief.");
        assert_eq!(r["metadata"], json!({"k": "v"}));
        assert_eq!(r["max_output_tokens"], 50);
        assert_eq!(
            r["text"],
            json!({"verbosity": "low", "format": {"type": "text"}})
        );
        assert_eq!(r["tool_choice"], "auto");
        assert_eq!(r["error"], Value::Null);
        assert_eq!(r["incomplete_details"], Value::Null);
        assert!(r.get("output_text").is_none());
        let r = echo().response("incomplete", Vec::new(), None);
        assert_eq!(
            r["incomplete_details"],
            json!({"reason": "max_output_tokens"})
        );
        assert!(response_id().starts_with("resp_") && response_id().len() == 53);
    }

    #[test]
    fn chat_text_becomes_a_message_and_usage_maps_with_its_cost() {
        let chat: Value = serde_json::from_str(
            r#"{"choices": [{"message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13,
                "prompt_tokens_details": {"cached_tokens": 4},
                "completion_tokens_details": {"reasoning_tokens": 1}, "cost": 0.00012000, "byok": false}}"#,
        )
        .unwrap();
        let r = from_chat(&chat, &echo());
        assert_eq!(r["status"], "completed");
        let out = r["output"].as_array().unwrap();
        assert_eq!(out.len(), 1);
        assert!(out[0]["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(out[0]["status"], "completed");
        assert_eq!(out[0]["role"], "assistant");
        assert_eq!(
            out[0]["content"],
            json!([{"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}])
        );
        assert_eq!(
            r["usage"].to_string(),
            r#"{"byok":false,"cost":0.00012000,"input_tokens":10,"input_tokens_details":{"cache_write_tokens":0,"cached_tokens":4},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":13}"#
        );
    }

    #[test]
    fn tool_calls_and_reasoning_become_items_in_order() {
        let chat = json!({"choices": [{"message": {"role": "assistant", "content": null,
            "reasoning_content": "Need the weather.",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"c\":1}"}},
                {"id": "call_2", "type": "function", "function": {"name": "time", "arguments": "{}"}}]},
            "finish_reason": "tool_calls"}]});
        let r = from_chat(&chat, &echo());
        assert_eq!(r["status"], "completed");
        assert_eq!(r["usage"], Value::Null);
        let out = r["output"].as_array().unwrap();
        let types: Vec<&str> = out.iter().map(|i| i["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["reasoning", "function_call", "function_call"]);
        assert_eq!(
            out[0]["summary"],
            json!([{"type": "summary_text", "text": "Need the weather."}])
        );
        assert!(out[1]["id"].as_str().unwrap().starts_with("fc_"));
        assert_eq!(out[1]["call_id"], "call_1");
        assert_eq!(out[1]["name"], "weather");
        assert_eq!(out[1]["arguments"], "{\"c\":1}");
        assert_eq!(out[1]["status"], "completed");
    }

    #[test]
    fn a_cut_answer_is_incomplete_with_its_reason() {
        for (finish, reason) in [
            ("length", "max_output_tokens"),
            ("content_filter", "content_filter"),
        ] {
            let chat =
                json!({"choices": [{"message": {"content": "Hel"}, "finish_reason": finish}]});
            let r = from_chat(&chat, &echo());
            assert_eq!(r["status"], "incomplete");
            assert_eq!(r["incomplete_details"], json!({ "reason": reason }));
            assert_eq!(r["output"][0]["status"], "incomplete");
        }
    }
}
