//! The `anthropic` adapter: chat and text completions through Anthropic's
//! Messages API (`{base_url}/v1/messages`, `x-api-key` and
//! `anthropic-version`; a completion's `prompt` is one user message, its
//! answer and stream chunks `choices[].text`).
//!
//! Request: `system` (and `developer`) messages → `system`; user and
//! assistant content (text parts, images as a `data:` URL → a `base64`
//! source, else a `url` source; a `file` part holding a PDF inline → a
//! `document` block of a `base64` source; `cache_control` marks kept), assistant
//! `tool_calls` → `tool_use` blocks, `tool` messages → `tool_result` blocks
//! (consecutive messages of one role merged, as Anthropic pairs a tool use
//! with the results in the next message); `max_tokens` (required: the
//! model's `max_output_tokens` when the caller gives none, else
//! [`crate::bounds::DEFAULT_MAX_OUTPUT`]); `stop` → `stop_sequences`;
//! `temperature`, `top_p`, `stream`; `tools` → `input_schema` tools;
//! `tool_choice` (`auto`, `none`, `required` → `any`, a function → `tool`;
//! `parallel_tool_calls: false` → `disable_parallel_tool_use`); `user` (or
//! `safety_identifier`) → `metadata.user_id`; `response_format`
//! `json_schema` → `output_config.format` (`json_object` is refused: a
//! schema is needed); `reasoning_effort` → `thinking` (`none` → disabled,
//! else enabled with [`convert::thinking_budget`]'s budget, kept below
//! `max_tokens`); Anthropic's own `top_k`, `metadata`, `thinking`,
//! `service_tier` (through `additional_params`) pass. `store`,
//! `prompt_cache_key` are hints, dropped; any other field that asks
//! something is refused with a 400 naming it ([`convert::check`]); an
//! assistant's `reasoning_content` is dropped (Anthropic takes back only
//! its own signed thinking).
//!
//! Answer: text blocks → `content`, `thinking` → `reasoning_content`
//! (`redacted_thinking` has nothing readable), `tool_use` → `tool_calls`;
//! `stop_reason` `end_turn` / `stop_sequence` / `pause_turn` → `stop`, `max_tokens` →
//! `length`, `tool_use` → `tool_calls`, `refusal` → `content_filter`;
//! usage: `input_tokens` + `cache_read_input_tokens` +
//! `cache_creation_input_tokens` → `prompt_tokens` with the cached and
//! written parts in `prompt_tokens_details` ([`super::usage`]).
//!
//! Stream ([`Events`]): `message_start` (id, the input usage),
//! `content_block_start` (a `tool_use` opens a tool call: id and name),
//! `content_block_delta` (`text_delta` → content, `thinking_delta` →
//! `reasoning_content`, `input_json_delta` →
//! the call's argument delta), `message_delta` (finish reason, the output
//! count), `message_stop` (the end), `error` (an error event, the end);
//! `ping` and the rest are skipped.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::adapter::{Adapter, Native, Op};
use super::convert::{self, Completion, Image, ToolChoice};
use super::model::{Model, ModelType};
use super::stream::{Dialect, Emit, StreamTranslator, Translator};
use super::usage::Tokens;
use gateway_adapters::upstream::llm::KeyForm;
use gateway_base::errors::ApiError;

/// The `anthropic-version` sent.
pub const VERSION: &str = "2023-06-01";

#[derive(Debug)]
pub struct Anthropic;

/// Fields of Anthropic's own a caller may add through `additional_params`.
const OWN_FIELDS: [&str; 4] = ["top_k", "metadata", "thinking", "service_tier"];

fn image_block(part: &Value) -> Result<Value, ApiError> {
    Ok(match convert::image(part)? {
        Image::Inline { media_type, data } => {
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        Image::Url(url) => json!({"type": "image", "source": {"type": "url", "url": url}}),
    })
}

/// The content blocks of a user or assistant `content`.
fn blocks(content: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::new();
    match content {
        Some(Value::String(s)) if !s.is_empty() => out.push(json!({"type": "text", "text": s})),
        Some(Value::Array(parts)) => {
            for p in parts {
                let mut b = match p.get("type").and_then(Value::as_str) {
                    Some("image_url") => image_block(p)?,
                    Some("file") => json!({"type": "document", "source": {"type": "base64",
                        "media_type": "application/pdf", "data": convert::pdf(p)?}}),
                    Some("text") => json!({"type": "text", "text": p.get("text").cloned().unwrap_or_default()}),
                    _ => {
                        return Err(ApiError::BadRequest(format!(
                            "messages: a content part of type {} cannot be sent to an anthropic provider",
                            p.get("type").unwrap_or(&Value::Null)
                        )))
                    }
                };
                if let Some(c) = p.get("cache_control") {
                    b["cache_control"] = c.clone();
                }
                out.push(b);
            }
        }
        _ => {}
    }
    Ok(out)
}

/// One OpenAI message as (role, blocks) of Anthropic's.
fn message(m: &Value) -> Result<(&'static str, Vec<Value>), ApiError> {
    Ok(match convert::role(m) {
        "assistant" => {
            let mut b = blocks(m.get("content"))?;
            for c in m
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let f = c.get("function").cloned().unwrap_or_default();
                b.push(
                    json!({"type": "tool_use", "id": c.get("id").cloned().unwrap_or_default(),
                    "name": f.get("name").cloned().unwrap_or_default(),
                    "input": super::stream::parsed_arguments(f.get("arguments"))}),
                );
            }
            ("assistant", b)
        }
        "tool" => {
            let content = match m.get("content") {
                Some(Value::Array(_)) => Value::Array(blocks(m.get("content"))?),
                other => Value::String(convert::text_of(other)),
            };
            let id = m.get("tool_call_id").cloned().unwrap_or_default();
            (
                "user",
                vec![json!({"type": "tool_result", "tool_use_id": id, "content": content})],
            )
        }
        _ => ("user", blocks(m.get("content"))?),
    })
}

/// `messages` and `system` of an OpenAI chat body.
fn conversation(body: &Map<String, Value>) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    let mut system = Vec::new();
    let mut out: Vec<(&str, Vec<Value>)> = Vec::new();
    for m in convert::messages(body)? {
        if matches!(convert::role(m), "system" | "developer") {
            system.extend(blocks(m.get("content"))?);
            continue;
        }
        let (role, b) = message(m)?;
        match out.last_mut() {
            Some((last, prev)) if *last == role => prev.extend(b),
            _ => out.push((role, b)),
        }
    }
    let messages = out
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    Ok((system, messages))
}

fn tools(body: &Map<String, Value>, out: &mut Map<String, Value>) {
    let tools: Vec<Value> = convert::functions(body)
        .into_iter()
        .map(|(name, description, params)| {
            let mut t = json!({"name": name, "input_schema": params});
            if let Some(d) = description {
                t["description"] = d.clone();
            }
            t
        })
        .collect();
    if !tools.is_empty() {
        out.insert("tools".into(), Value::Array(tools));
    }
    let mut choice = match convert::tool_choice(body) {
        None if out.contains_key("tools") => json!({"type": "auto"}),
        None => return,
        Some(ToolChoice::Auto) => json!({"type": "auto"}),
        Some(ToolChoice::None) => json!({"type": "none"}),
        Some(ToolChoice::Any) => json!({"type": "any"}),
        Some(ToolChoice::Named(n)) => json!({"type": "tool", "name": n}),
    };
    if body.get("parallel_tool_calls") == Some(&Value::Bool(false)) && choice["type"] != "none" {
        choice["disable_parallel_tool_use"] = json!(true);
    }
    if out.contains_key("tools") {
        out.insert("tool_choice".into(), choice);
    }
}

/// The OpenAI fields this adapter translates (or passes as Anthropic's own),
/// separated by spaces.
const TRANSLATED: &str = "model messages max_tokens max_completion_tokens stop temperature top_p \
     stream stream_options tools tool_choice parallel_tool_calls user \
     safety_identifier response_format reasoning_effort top_k metadata \
     thinking service_tier";

/// `response_format` → `output_config.format`, `reasoning_effort` →
/// `thinking` (unless given as Anthropic's own).
fn reasoning_and_format(
    body: &Map<String, Value>,
    max: u64,
    out: &mut Map<String, Value>,
) -> Result<(), ApiError> {
    match convert::json_schema(body)? {
        None => {}
        Some(convert::Format::Schema(s)) => {
            out.insert(
                "output_config".into(),
                json!({"format": {"type": "json_schema", "schema": s}}),
            );
        }
        Some(convert::Format::Object) => {
            return Err(ApiError::BadRequest(
                "response_format.type: an anthropic provider needs a schema (json_schema); json_object has no equivalent".into(),
            ))
        }
    }
    let Some(effort) = body.get("reasoning_effort").filter(|e| !e.is_null()) else {
        return Ok(());
    };
    let thinking = match convert::thinking_budget(effort)? {
        0 => json!({"type": "disabled"}),
        b if max > 1024 => json!({"type": "enabled", "budget_tokens": b.min(max - 1)}),
        _ => {
            return Err(ApiError::BadRequest(
                "reasoning_effort: an anthropic provider thinks at least 1024 tokens, within max_tokens: give max_tokens above 1024".into(),
            ))
        }
    };
    out.entry("thinking").or_insert(thinking);
    Ok(())
}

/// Anthropic's body of an OpenAI chat body.
pub fn chat_body(m: &Model, body: &Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    convert::check(
        body,
        &convert::Fields {
            provider: "an anthropic provider",
            translated: &TRANSLATED.split_whitespace().collect::<Vec<_>>(),
            hints: &["store", "prompt_cache_key"],
        },
    )?;
    let (system, messages) = conversation(body)?;
    let mut out = Map::new();
    out.insert(
        "model".into(),
        body.get("model").cloned().unwrap_or_default(),
    );
    if !system.is_empty() {
        let plain = system.iter().all(|b| b.get("cache_control").is_none());
        let sys = if plain {
            Value::String(convert::text_of(Some(&Value::Array(system))))
        } else {
            Value::Array(system)
        };
        out.insert("system".into(), sys);
    }
    out.insert("messages".into(), Value::Array(messages));
    let max = convert::max_tokens(body, m).unwrap_or(crate::bounds::DEFAULT_MAX_OUTPUT);
    out.insert("max_tokens".into(), json!(max));
    if let Some(s) = convert::stops(body) {
        out.insert("stop_sequences".into(), s);
    }
    for k in ["temperature", "top_p", "stream"] {
        if let Some(v) = body.get(k).filter(|v| !v.is_null()) {
            out.insert(k.into(), v.clone());
        }
    }
    for k in OWN_FIELDS {
        if let Some(v) = body.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    reasoning_and_format(body, max, &mut out)?;
    let user = body.get("user").or_else(|| body.get("safety_identifier"));
    if let Some(u) = user.and_then(Value::as_str) {
        out.entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|md| md.insert("user_id".into(), json!(u)));
    }
    tools(body, &mut out);
    Ok(out)
}

/// OpenAI's finish reason of Anthropic's stop reason.
pub fn finish_reason(stop: &str) -> &'static str {
    match stop {
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        _ => "stop",
    }
}

fn count(u: &Value, k: &str) -> Option<u64> {
    u.get(k).and_then(Value::as_u64)
}

/// The four counts of Anthropic's `usage` (`input_tokens` excludes the
/// cache's, as Anthropic reports it).
pub fn tokens(u: &Value) -> Tokens {
    Tokens {
        input: count(u, "input_tokens").unwrap_or(0),
        output: count(u, "output_tokens").unwrap_or(0),
        cache_read: count(u, "cache_read_input_tokens").unwrap_or(0),
        cache_write: count(u, "cache_creation_input_tokens").unwrap_or(0),
    }
}

/// OpenAI's chat completion of Anthropic's `message`.
pub fn completion(v: &Value, model: &str) -> Result<Value, ApiError> {
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| convert::unexpected("a message"))?;
    let mut text: Option<String> = None;
    let mut reasoning: Option<String> = None;
    let mut calls = Vec::new();
    for b in content {
        let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or_default();
        match b.get("type").and_then(Value::as_str) {
            Some("text") => text.get_or_insert_with(String::new).push_str(s("text")),
            Some("thinking") => reasoning
                .get_or_insert_with(String::new)
                .push_str(s("thinking")),
            Some("tool_use") => calls.push(convert::tool_call(
                b.get("id").and_then(Value::as_str).unwrap_or_default(),
                b.get("name").and_then(Value::as_str).unwrap_or_default(),
                super::stream::arguments_text(b.get("input").unwrap_or(&Value::Null)),
            )),
            _ => {}
        }
    }
    let stop = v
        .get("stop_reason")
        .and_then(Value::as_str)
        .unwrap_or("end_turn");
    Ok(Completion {
        id: v
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("msg")
            .to_owned(),
        model: model.to_owned(),
        text,
        reasoning,
        tool_calls: calls,
        finish: finish_reason(stop),
        usage: v.get("usage").filter(|u| u.is_object()).map(tokens),
    }
    .json())
}

/// The gateway status of an `error` event's type.
fn error_status(kind: &str) -> u16 {
    match kind {
        "overloaded_error" => 503,
        "rate_limit_error" => 429,
        "invalid_request_error" => 400,
        _ => 502,
    }
}

/// Anthropic's stream events, read into OpenAI chunks.
#[derive(Debug, Default)]
pub struct Events {
    /// Content block index → tool call index.
    calls: HashMap<u64, usize>,
}

impl Dialect for Events {
    fn event(&mut self, v: &Value, e: &mut Emit<'_>) {
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match v.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                let m = v.get("message").cloned().unwrap_or_default();
                if let Some(id) = m.get("id").and_then(Value::as_str) {
                    e.id(id);
                }
                if let Some(u) = m.get("usage").filter(|u| u.is_object()) {
                    // `output_tokens` here is a placeholder: the final
                    // count comes with `message_delta`.
                    e.usage(tokens(u), false);
                }
            }
            Some("content_block_start") => {
                let b = v.get("content_block").cloned().unwrap_or_default();
                if b.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let k = self.calls.len();
                    self.calls.insert(index, k);
                    e.delta(
                        json!({"tool_calls": [{"index": k, "id": b["id"], "type": "function",
                        "function": {"name": b["name"], "arguments": ""}}]}),
                    );
                }
            }
            Some("content_block_delta") => {
                let d = v.get("delta").cloned().unwrap_or_default();
                match d.get("type").and_then(Value::as_str) {
                    Some("text_delta") => e.delta(json!({"content": d["text"]})),
                    Some("thinking_delta") => e.delta(json!({"reasoning_content": d["thinking"]})),
                    Some("input_json_delta") => {
                        let k = self.calls.get(&index).copied().unwrap_or(0);
                        e.delta(json!({"tool_calls": [{"index": k,
                            "function": {"arguments": d["partial_json"]}}]}));
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                    let mut t = e.usage_so_far().unwrap_or_default();
                    let late = tokens(u);
                    t.output = late.output;
                    // Newer API versions repeat the input figures here.
                    for (k, slot) in [
                        ("input_tokens", &mut t.input),
                        ("cache_read_input_tokens", &mut t.cache_read),
                        ("cache_creation_input_tokens", &mut t.cache_write),
                    ] {
                        if let Some(n) = count(u, k) {
                            *slot = n;
                        }
                    }
                    e.usage(t, true);
                }
                if let Some(stop) = v
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    e.finish(finish_reason(stop));
                }
            }
            Some("message_stop") => e.end(),
            Some("error") => {
                let err = v.get("error").cloned().unwrap_or_default();
                let kind = err
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("api_error");
                let message = err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the model provider failed");
                e.error(error_status(kind), message);
            }
            _ => {}
        }
    }
}

impl Adapter for Anthropic {
    fn path(&self, op: Op) -> &'static str {
        match op {
            Op::Chat | Op::Completion => "/v1/messages",
            _ => "/v1/unsupported",
        }
    }

    fn supports(&self, t: ModelType) -> bool {
        matches!(t, ModelType::Chat | ModelType::Completion)
    }

    fn models_path(&self) -> &'static str {
        "/v1/models"
    }
    fn key_form(&self) -> KeyForm {
        KeyForm::XApiKey { version: VERSION }
    }

    fn own_path(&self, _model: &str, method: &str) -> String {
        format!("/v1/{method}")
    }

    fn shape(&self) -> crate::bounds::Shape {
        crate::bounds::Shape::Anthropic
    }

    fn native(&self, op: Op, m: &Model, body: Map<String, Value>) -> Result<Native, ApiError> {
        let body = match op {
            Op::Chat => body,
            Op::Completion => convert::prompt_as_chat(body)?,
            _ => {
                return Err(ApiError::BadRequest(
                    "an anthropic provider only chats and completes".into(),
                ))
            }
        };
        Ok(Native {
            path: "/v1/messages".to_owned(),
            body: chat_body(m, &body)?,
        })
    }

    fn answer(&self, op: Op, model: &str, v: Value) -> Result<Value, ApiError> {
        let chat = completion(&v, model)?;
        Ok(match op {
            Op::Completion => convert::as_text_completion(chat),
            _ => chat,
        })
    }

    fn stream(
        &self,
        op: Op,
        model: &str,
        include_usage: bool,
    ) -> Option<Box<dyn StreamTranslator>> {
        let t = Translator::new(Events::default(), model, include_usage);
        Some(match op {
            Op::Completion => Box::new(t.for_completions()),
            _ => Box::new(t),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Model {
        Model {
            id: "claude".into(),
            kind: ModelType::Chat,
            context_window: None,
            aliases: vec![],
            input_per_mtok: None,
            output_per_mtok: None,
            cache_read_per_mtok: None,
            cache_write_per_mtok: None,
            per_image: None,
            per_second: None,
            per_minute: None,
            per_1k_chars: None,
            input_audio_per_mtok: None,
            output_audio_per_mtok: None,
            max_output_tokens: Some(321),
            cache_ttl_secs: None,
            cache_hit_price_pct: Default::default(),
            batch_price_pct: Default::default(),
            limits: Default::default(),
        }
    }

    #[test]
    fn a_chat_body_becomes_anthropics() {
        let body = json!({"model": "claude", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function",
                "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "42"}],
            "stop": "END", "temperature": 0.2, "store": true,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "tool_choice": "required"});
        let out = chat_body(&model(), body.as_object().unwrap()).unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"model": "claude", "system": "Be brief.", "max_tokens": 321,
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Look"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]}],
                "stop_sequences": ["END"], "temperature": 0.2,
                "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
                "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "any"}})
        );
    }

    #[test]
    fn what_has_no_equivalent_is_refused_by_name() {
        let base = json!({"model": "claude", "messages": [{"role": "user", "content": "x"}]});
        for (k, v) in [
            ("seed", json!(3)),
            ("n", json!(2)),
            ("logprobs", json!(true)),
            ("presence_penalty", json!(0.5)),
            ("frobnicate", json!(1)),
        ] {
            let mut b = base.clone();
            b[k] = v;
            let ApiError::BadRequest(m) = chat_body(&model(), b.as_object().unwrap()).unwrap_err()
            else {
                panic!()
            };
            assert!(m.starts_with(&format!("{k}: ")), "{m}");
        }
        let mut b = base.clone();
        b["n"] = json!(1);
        b["reasoning_effort"] = json!("high");
        b["max_tokens"] = json!(4000);
        let out = chat_body(&model(), b.as_object().unwrap()).unwrap();
        assert_eq!(
            out["thinking"],
            json!({"type": "enabled", "budget_tokens": 3999})
        );
    }

    #[test]
    fn a_stream_becomes_openai_chunks_with_usage() {
        let mut t = Translator::new(Events::default(), "claude", true);
        let mut out = Vec::new();
        let events = [
            json!({"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 3}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
            json!({"type": "message_stop"}),
        ];
        let text: String = events
            .iter()
            .map(|e| format!("event: x\r\ndata: {e}\r\n\r\n"))
            .collect();
        // Split mid-line: the translator keeps the unfinished line.
        let (a, b) = text.as_bytes().split_at(37);
        t.feed(a, &mut out);
        t.feed(b, &mut out);
        t.finish(&mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains("\"content\":\"Hi\""), "{s}");
        assert!(s.contains("\"role\":\"assistant\""), "{s}");
        assert!(s.contains("\"id\":\"toolu_1\""), "{s}");
        assert!(s.contains("\"arguments\":\"{\\\"a\\\":\""), "{s}");
        assert!(s.contains("\"finish_reason\":\"tool_calls\""), "{s}");
        assert!(s.contains("\"prompt_tokens\":15"), "{s}");
        assert!(s.contains("\"cached_tokens\":7"), "{s}");
        assert!(
            s.ends_with("data: [DONE]\n\n") && s.matches("[DONE]").count() == 1,
            "{s}"
        );
        assert_eq!(
            t.usage(),
            Some((
                Tokens {
                    input: 5,
                    output: 9,
                    cache_read: 7,
                    cache_write: 3
                },
                true
            ))
        );
    }
}
