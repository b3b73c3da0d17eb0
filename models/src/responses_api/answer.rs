//! A chat completion (OpenAI's JSON) → a Responses `response` object, and
//! what every response object repeats of its request ([`Echo`]): every
//! field the official SDK's `Response` requires is present, the optional
//! ones it repeats are the request's (or OpenAI's defaults).

use std::sync::LazyLock;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Map, Value};

/// The value a response shows for a field its request left out.
type Unset = fn() -> Value;

/// Fields a response repeats from its request, with the value it shows
/// when the request left them out (OpenAI's defaults); in the order of
/// their names (a response object's keys are written in that order).
const REPEATED: [(&str, Unset); 15] = [
    ("background", || json!(false)),
    ("instructions", || Value::Null),
    ("max_output_tokens", || Value::Null),
    ("metadata", || json!({})),
    ("parallel_tool_calls", || json!(true)),
    ("previous_response_id", || Value::Null),
    ("reasoning", || json!({"effort": null, "summary": null})),
    ("store", || json!(true)),
    ("temperature", || Value::Null),
    ("text", || json!({"format": {"type": "text"}})),
    ("tool_choice", || json!("auto")),
    ("tools", || json!([])),
    ("top_p", || Value::Null),
    ("truncation", || json!("disabled")),
    ("user", || Value::Null),
];

/// [`REPEATED`]'s defaults, made once.
static DEFAULTS: LazyLock<[Value; 15]> = LazyLock::new(|| REPEATED.map(|(_, unset)| unset()));

/// The response object's own fields (not its request's), in the order of
/// their names.
#[derive(Clone, Copy)]
enum Own {
    CreatedAt,
    Error,
    Id,
    IncompleteDetails,
    Model,
    Object,
    Output,
    Status,
    Usage,
}

const OWN: [(&str, Own); 9] = [
    ("created_at", Own::CreatedAt),
    ("error", Own::Error),
    ("id", Own::Id),
    ("incomplete_details", Own::IncompleteDetails),
    ("model", Own::Model),
    ("object", Own::Object),
    ("output", Own::Output),
    ("status", Own::Status),
    ("usage", Own::Usage),
];

/// What a response object repeats from its request: its id and creation
/// time (the gateway's), the model as the caller named it, and the
/// request's settings ([`REPEATED`]: each the request's, or the default).
#[derive(Debug, Clone, PartialEq)]
pub struct Echo {
    /// The response's id (`resp_…`, [`response_id`]).
    pub id: String,
    /// When it was created (Unix seconds).
    pub created_at: u64,
    /// The model as the caller named it.
    pub model: Value,
    /// The settings the request gave (not null), by [`REPEATED`]'s index;
    /// `None`: the default.
    given: [Option<Value>; 15],
}

impl Echo {
    /// What a response to request `body` repeats, under `id`, created at
    /// `created_at`.
    pub fn of(body: &Map<String, Value>, id: String, created_at: u64) -> Echo {
        let mut given = REPEATED.map(|(k, _)| body.get(k).filter(|v| !v.is_null()).cloned());
        let text = REPEATED.iter().position(|(k, _)| *k == "text");
        if let Some(Some(Value::Object(t))) = text.map(|i| &mut given[i]) {
            t.entry("format").or_insert_with(|| json!({"type": "text"}));
        }
        Echo {
            id,
            created_at,
            model: body.get("model").cloned().unwrap_or(Value::Null),
            given,
        }
    }

    /// The whole `response` object of `status` (`in_progress`,
    /// `completed`, `incomplete`, `failed`) with its `output` items and
    /// `usage` (a Responses usage, [`usage`]); an incomplete one says
    /// `max_output_tokens` (the usual reason: [`Echo::finished`] says
    /// others), `error` is null.
    pub fn response(&self, status: &str, output: Vec<Value>, usage: Option<Value>) -> Value {
        let reason = (status == "incomplete").then_some(Some("max_output_tokens"));
        self.object(status, reason, &output, usage.as_ref())
            .to_value()
    }

    /// The response object of `status`, its `incomplete_details` of
    /// `reason` (`None`: null details; `Some(None)`: no reason).
    fn object<'a>(
        &'a self,
        status: &'a str,
        reason: Option<Option<&'a str>>,
        output: &'a [Value],
        usage: Option<&'a Value>,
    ) -> Object<'a> {
        Object {
            echo: self,
            status,
            reason,
            output,
            usage,
        }
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
        let reason = (status == "incomplete").then_some(reason);
        self.object(status, reason, &output, usage.as_ref())
            .to_value()
    }
}

/// A response object as it is written: what its request repeats
/// ([`Echo`]) and its state. Serialised straight to text for a whole
/// answer (no `Value` built: [`from_chat_text`]); its keys in the order of
/// their names, as a `Value`'s are, so that both forms write the same text.
struct Object<'a> {
    echo: &'a Echo,
    status: &'a str,
    /// `incomplete_details`: `None` null, else `{"reason": …}`.
    reason: Option<Option<&'a str>>,
    output: &'a [Value],
    usage: Option<&'a Value>,
}

impl Object<'_> {
    /// The object as a `Value` (a stream's events carry it so).
    fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Writes the object's own `field` under `key`.
    fn own<M: SerializeMap>(&self, m: &mut M, key: &str, field: Own) -> Result<(), M::Error> {
        let e = self.echo;
        match field {
            Own::CreatedAt => m.serialize_entry(key, &e.created_at),
            Own::Error => m.serialize_entry(key, &()),
            Own::Id => m.serialize_entry(key, &e.id),
            Own::IncompleteDetails => match self.reason {
                None => m.serialize_entry(key, &()),
                Some(reason) => m.serialize_entry(key, &Reason { reason }),
            },
            Own::Model => m.serialize_entry(key, &e.model),
            Own::Object => m.serialize_entry(key, "response"),
            Own::Output => m.serialize_entry(key, self.output),
            Own::Status => m.serialize_entry(key, self.status),
            Own::Usage => m.serialize_entry(key, &self.usage),
        }
    }
}

impl Serialize for Object<'_> {
    /// [`OWN`] and [`REPEATED`] merged by name.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(OWN.len() + REPEATED.len()))?;
        let (mut own, mut repeated) = (
            OWN.iter().peekable(),
            REPEATED.iter().enumerate().peekable(),
        );
        loop {
            match (own.peek(), repeated.peek()) {
                (Some((k, f)), Some((_, (r, _)))) if k < r => {
                    self.own(&mut m, k, *f)?;
                    own.next();
                }
                (_, Some((i, (r, _)))) => {
                    let v = self.echo.given[*i].as_ref().unwrap_or(&DEFAULTS[*i]);
                    m.serialize_entry(r, v)?;
                    repeated.next();
                }
                (Some((k, f)), None) => {
                    self.own(&mut m, k, *f)?;
                    own.next();
                }
                (None, None) => break,
            }
        }
        m.end()
    }
}

/// `incomplete_details`.
#[derive(serde::Serialize)]
struct Reason<'a> {
    reason: Option<&'a str>,
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

/// A new response id: `resp_` and 48 hex digits, the first 12 the
/// milliseconds since the epoch, the other 36 random (144 bits). An id of
/// a later millisecond sorts later, so that the stored responses' key
/// index grows at its end (a random key dirties a page of the index per response: a group
/// commit of `k` responses wrote `k` index pages, a time-ordered one
/// writes one); unguessable all the same.
pub fn response_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let b: [u8; 18] = rand::random();
    format!("resp_{:012x}{}", ms & 0xffff_ffff_ffff, hex::encode(b))
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
    let (finish, output, usage) = read_chat(chat);
    echo.finished(Some(finish), output, usage)
}

/// [`from_chat`]'s response object as its JSON text (written straight
/// from the chat answer and the echo, no `Value` built: a whole answer's
/// hot path), and its status (`completed` or `incomplete`).
pub fn from_chat_text(chat: &Value, echo: &Echo) -> (String, &'static str) {
    let (finish, output, usage) = read_chat(chat);
    let (status, reason) = ending(Some(finish));
    let reason = (status == "incomplete").then_some(reason);
    let object = echo.object(status, reason, &output, usage.as_ref());
    (serde_json::to_string(&object).unwrap_or_default(), status)
}

/// A chat answer's finish reason (`stop` when it gave none), output items
/// and Responses usage.
fn read_chat(chat: &Value) -> (&str, Vec<Value>, Option<Value>) {
    let choice = chat
        .get("choices")
        .and_then(|c| c.get(0))
        .unwrap_or(&Value::Null);
    let msg = choice.get("message").unwrap_or(&Value::Null);
    let finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .unwrap_or("stop");
    let status = ending(Some(finish)).0;
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
    (finish, output, usage)
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
        let (a, b) = (response_id(), response_id());
        assert!(a[..17] <= b[..17] && a != b, "{a} {b}");
    }

    /// The merge of [`OWN`] and [`REPEATED`] writes keys in order only
    /// when each list is in order.
    #[test]
    fn the_fields_are_listed_in_name_order() {
        let own: Vec<&str> = OWN.iter().map(|(k, _)| *k).collect();
        let repeated: Vec<&str> = REPEATED.iter().map(|(k, _)| *k).collect();
        for keys in [own, repeated] {
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
        }
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

    /// The text written straight is the `Value`'s text (keys in the same
    /// order), but for the items' new ids.
    #[test]
    fn the_text_written_straight_is_the_objects_text() {
        let chat = json!({"choices": [{"message": {"content": "Hi", "reasoning_content": "R",
            "tool_calls": [{"id": "call_1", "function": {"name": "f", "arguments": "{}"}}]},
            "finish_reason": "length"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "cost": 0.5}});
        let body = json!({"model": "p/m", "instructions": "I", "text": {"verbosity": "low"},
            "tools": [{"type": "function", "name": "f"}], "store": null});
        let echo = Echo::of(body.as_object().unwrap(), "resp_1".into(), 7);
        let (text, status) = from_chat_text(&chat, &echo);
        assert_eq!(status, "incomplete");
        let mut written: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(written.to_string(), text, "keys in a Value's order");
        let mut built = from_chat(&chat, &echo);
        for v in [&mut written, &mut built] {
            for item in v["output"].as_array_mut().unwrap() {
                item["id"] = Value::Null;
            }
        }
        assert_eq!(written, built);
        assert_eq!(written["store"], true);
        assert_eq!(
            written["incomplete_details"],
            json!({"reason": "max_output_tokens"})
        );
        assert_eq!(
            written["text"],
            json!({"verbosity": "low", "format": {"type": "text"}})
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
