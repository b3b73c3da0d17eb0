//! What the native adapters ([`super::anthropic`], [`super::gemini`])
//! share when they read an OpenAI chat body and write an OpenAI answer.

use serde_json::{json, Map, Value};

use super::model::Model;
use super::usage::Tokens;
use gateway_base::errors::ApiError;

/// An image of a content part: inline bytes (a `data:` URL) or a URL.
pub enum Image<'a> {
    /// `data:<media type>;base64,<data>`.
    Inline { media_type: &'a str, data: &'a str },
    /// An http(s) URL the provider fetches.
    Url(&'a str),
}

/// The image of an OpenAI `image_url` part; 400 for a `data:` URL that is
/// not base64 or not of an image type (`image/…`: a document or a video
/// would be read, and billed, by its pages or seconds, not as an image).
pub fn image(part: &Value) -> Result<Image<'_>, ApiError> {
    let url = part
        .get("image_url")
        .and_then(|u| u.get("url").or(Some(u)))
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::BadRequest("image_url: must hold a url".into()))?;
    match url.strip_prefix("data:") {
        Some(rest) => {
            let (media_type, data) = rest.split_once(";base64,").ok_or_else(|| {
                ApiError::BadRequest("image_url: a data URL must be base64".into())
            })?;
            if !media_type.starts_with("image/") {
                return Err(ApiError::BadRequest(
                    "image_url: a data URL must hold an image (image/*)".into(),
                ));
            }
            Ok(Image::Inline { media_type, data })
        }
        None => Ok(Image::Url(url)),
    }
}

/// The base64 data of an OpenAI `file` part holding a PDF inline
/// (`file.file_data`, `data:application/pdf;base64,…`), the only document
/// the native APIs read inline by pages; 400 for any other file part (a
/// file held by OpenAI means nothing to another provider).
pub fn pdf(part: &Value) -> Result<&str, ApiError> {
    part.pointer("/file/file_data")
        .and_then(Value::as_str)
        .and_then(|u| u.strip_prefix("data:application/pdf;base64,"))
        .ok_or_else(|| {
            ApiError::BadRequest(
                "file: only a PDF given inline (file_data: data:application/pdf;base64,...) can be sent to this provider".into(),
            )
        })
}

/// The text of a `content` (a string, or the text of its text parts).
pub fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The messages of a chat body (400 when not a list of objects).
pub fn messages(body: &Map<String, Value>) -> Result<&Vec<Value>, ApiError> {
    body.get("messages")
        .and_then(Value::as_array)
        .filter(|m| m.iter().all(Value::is_object))
        .ok_or_else(|| ApiError::BadRequest("messages: must be a list of objects".into()))
}

/// The role of a message.
pub fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("user")
}

/// The reply's length: the caller's `max_tokens` / `max_completion_tokens`,
/// else the model's `max_output_tokens`, else `None`.
pub fn max_tokens(body: &Map<String, Value>, m: &Model) -> Option<u64> {
    ["max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_u64))
        .or(m.max_output_tokens)
}

/// `stop` (a string or a list) as a list of strings.
pub fn stops(body: &Map<String, Value>) -> Option<Value> {
    match body.get("stop") {
        Some(Value::String(s)) => Some(json!([s])),
        Some(Value::Array(a)) if !a.is_empty() => Some(Value::Array(a.clone())),
        _ => None,
    }
}

/// The function tools of a chat body: (name, description, parameters).
pub fn functions(body: &Map<String, Value>) -> Vec<(&str, Option<&Value>, Value)> {
    body.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("function"))
        .filter_map(|f| {
            let name = f.get("name")?.as_str()?;
            let params = f
                .get("parameters")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
            Some((name, f.get("description"), params))
        })
        .collect()
}

/// What `tool_choice` asks.
pub enum ToolChoice<'a> {
    Auto,
    None,
    /// Some tool (`required`).
    Any,
    /// This one.
    Named(&'a str),
}

/// The body's `tool_choice`, `None` when absent.
pub fn tool_choice(body: &Map<String, Value>) -> Option<ToolChoice<'_>> {
    match body.get("tool_choice")? {
        Value::String(s) if s == "none" => Some(ToolChoice::None),
        Value::String(s) if s == "required" => Some(ToolChoice::Any),
        Value::Object(o) => o
            .get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .map(ToolChoice::Named),
        _ => Some(ToolChoice::Auto),
    }
}

/// What a native adapter does with each top-level field of an OpenAI
/// chat (or completion) body: a field is translated (or is the provider's
/// own, given through `additional_params`), dropped as a hint (it changes
/// nothing in the answer and the provider has no equivalent), asks
/// nothing at its default value ([`at_default`]), or is refused: 400
/// naming it. Nothing is dropped silently.
pub struct Fields<'a> {
    /// The provider kind in errors (`"an anthropic provider"`).
    pub provider: &'a str,
    pub translated: &'a [&'a str],
    pub hints: &'a [&'a str],
}

/// Whether `v` of field `k` asks nothing of a provider (null, `n: 1`,
/// zero penalties, `logprobs: false`, text modalities alone, ...).
pub fn at_default(k: &str, v: &Value) -> bool {
    match (k, v) {
        (_, Value::Null) => true,
        ("n" | "best_of", v) => v.as_u64() == Some(1),
        ("logprobs" | "echo", Value::Bool(b)) => !b,
        ("presence_penalty" | "frequency_penalty", v) => v.as_f64() == Some(0.0),
        ("logit_bias", Value::Object(o)) => o.is_empty(),
        ("modalities", Value::Array(a)) => a.iter().all(|m| m == "text"),
        ("suffix", Value::String(s)) => s.is_empty(),
        ("service_tier", Value::String(s)) => matches!(s.as_str(), "auto" | "default"),
        _ => false,
    }
}

/// 400 for the first field of `body` that `f` neither translates nor
/// drops as a hint and that asks something; 400 for a tool that is not a
/// function, or a message's `name` (no native API names a speaker).
pub fn check(body: &Map<String, Value>, f: &Fields<'_>) -> Result<(), ApiError> {
    for (k, v) in body {
        let k = k.as_str();
        if f.translated.contains(&k) || f.hints.contains(&k) || at_default(k, v) {
            continue;
        }
        return Err(ApiError::BadRequest(format!(
            "{k}: {} has no equivalent of this field; leave it out",
            f.provider
        )));
    }
    for (i, t) in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if t.get("type").and_then(Value::as_str) != Some("function")
            || t.pointer("/function/name")
                .and_then(Value::as_str)
                .is_none()
        {
            return Err(ApiError::BadRequest(format!(
                "tools.{i}: {} takes function tools only ({{type: function, function: {{name, parameters}}}})",
                f.provider
            )));
        }
    }
    for (i, m) in messages(body)?.iter().enumerate() {
        if m.get("name").is_some_and(|n| !n.is_null()) {
            return Err(ApiError::BadRequest(format!(
                "messages.{i}.name: {} has no names of speakers; leave it out",
                f.provider
            )));
        }
    }
    Ok(())
}

/// The reasoning budget in tokens of an OpenAI `reasoning_effort` (the
/// scale Google's OpenAI-compatible API uses); 400 for another value.
pub fn thinking_budget(effort: &Value) -> Result<u64, ApiError> {
    Ok(match effort.as_str() {
        Some("none") => 0,
        Some("minimal" | "low") => 1024,
        Some("medium") => 8192,
        Some("high") => 24576,
        Some("xhigh") => 32768,
        _ => {
            return Err(ApiError::BadRequest(
                "reasoning_effort: must be one of none, minimal, low, medium, high, xhigh".into(),
            ))
        }
    })
}

/// The `reasoning_effort` of a reasoning budget in tokens (the inverse of
/// [`thinking_budget`], rounded up to the next level).
pub fn effort_of_budget(budget: u64) -> &'static str {
    match budget {
        0 => "none",
        1..=1024 => "low",
        1025..=8192 => "medium",
        8193..=24576 => "high",
        _ => "xhigh",
    }
}

/// The JSON schema of a `response_format` of type `json_schema`; `None`
/// for `text` (or none); 400 naming what is wrong.
pub fn json_schema(body: &Map<String, Value>) -> Result<Option<Format<'_>>, ApiError> {
    let Some(f) = body.get("response_format").filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    match f.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(Format::Object)),
        Some("json_schema") => f
            .pointer("/json_schema/schema")
            .filter(|s| s.is_object())
            .map(|s| Some(Format::Schema(s)))
            .ok_or_else(|| {
                ApiError::BadRequest("response_format.json_schema.schema: must be an object".into())
            }),
        _ => Err(ApiError::BadRequest(
            "response_format.type: must be text, json_object or json_schema".into(),
        )),
    }
}

/// What a `response_format` asks.
pub enum Format<'a> {
    /// Any JSON object.
    Object,
    /// JSON of this schema.
    Schema(&'a Value),
}

/// An OpenAI chat completion of one choice.
pub struct Completion {
    pub id: String,
    pub model: String,
    pub text: Option<String>,
    /// The model's reasoning, as OpenAI-compatible APIs give it
    /// (`reasoning_content`).
    pub reasoning: Option<String>,
    /// `tool_calls` entries.
    pub tool_calls: Vec<Value>,
    pub finish: &'static str,
    pub usage: Option<Tokens>,
}

impl Completion {
    pub fn json(self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.text});
        if let Some(r) = self.reasoning {
            message["reasoning_content"] = Value::String(r);
        }
        if !self.tool_calls.is_empty() {
            message["tool_calls"] = Value::Array(self.tool_calls);
        }
        let mut v = json!({
            "id": format!("chatcmpl-{}", self.id), "object": "chat.completion",
            "created": chrono::Utc::now().timestamp(), "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish, "logprobs": null}],
        });
        if let Some(u) = self.usage {
            v["usage"] = u.to_openai();
        }
        v
    }
}

/// One `tool_calls` entry.
pub fn tool_call(id: &str, name: &str, arguments: String) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
}

/// 502: the provider's answer is not its own shape.
pub fn unexpected(what: &str) -> ApiError {
    ApiError::BadGateway(format!(
        "the model provider answered {what} in an unexpected shape"
    ))
}

/// A chat completion as a text completion (`choices[].text`).
pub fn as_text_completion(mut v: Value) -> Value {
    v["object"] = json!("text_completion");
    if let Some(choices) = v.get_mut("choices").and_then(Value::as_array_mut) {
        for c in choices {
            let text = c
                .get("message")
                .and_then(|m| m.get("content"))
                .cloned()
                .unwrap_or(json!(""));
            if let Some(c) = c.as_object_mut() {
                c.remove("message");
                c.insert("text".into(), text);
            }
        }
    }
    v
}

/// A completion body (`prompt`) as a chat body of one user message; 400
/// for a prompt that is not text.
pub fn prompt_as_chat(mut body: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    let prompt = match body.remove("prompt") {
        Some(Value::String(s)) => s,
        Some(Value::Array(items)) if items.len() == 1 && items[0].is_string() => {
            items[0].as_str().unwrap_or_default().to_owned()
        }
        _ => {
            return Err(ApiError::BadRequest(
                "prompt: must be one text for this provider".into(),
            ))
        }
    };
    body.insert(
        "messages".into(),
        json!([{"role": "user", "content": prompt}]),
    );
    Ok(body)
}
