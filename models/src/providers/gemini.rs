//! The `gemini` adapter: Google's Gemini API (`x-goog-api-key`).
//!
//! * Chat: `{base_url}/v1beta/models/{model}:generateContent`, streamed
//!   `:streamGenerateContent?alt=sse`. `system` / `developer` messages →
//!   `systemInstruction`; messages → `contents` of `parts` (roles `user` and
//!   `model`; text, images as `inlineData` from a `data:` URL or `fileData`
//!   from a URL, a `file` part holding a PDF inline as `inlineData`; assistant `tool_calls` → `functionCall`, `tool` messages →
//!   `functionResponse` named by the call they answer; consecutive contents
//!   of one role merged); `generationConfig` (`maxOutputTokens`,
//!   `temperature`, `topP`, `stopSequences`, `seed`, the penalties,
//!   `responseMimeType` for a JSON `response_format` and
//!   `responseJsonSchema` for its schema, `thinkingConfig` from
//!   `reasoning_effort`: [`convert::thinking_budget`]'s budget, thoughts
//!   included); `tools` → `functionDeclarations`; `tool_choice` →
//!   `toolConfig`; Gemini's own `safetySettings`, `labels` (through
//!   `additional_params`) pass. `user`, `safety_identifier`, `metadata`,
//!   `store`, `prompt_cache_key` are hints, dropped; any other field that
//!   asks something (`n` above 1, `logprobs`, `parallel_tool_calls:
//!   false`, ...) is refused with a 400 naming it ([`convert::check`]); an
//!   assistant's `reasoning_content` is dropped (Gemini takes back only its
//!   own signed thoughts). A
//!   `cachedContent` is refused before this (400, a cache of the provider's
//!   account: [`crate::bounds::PROVIDER_CACHES`]) and never sent.
//! * Answer: the first candidate's parts (text → `content`, a thought's
//!   text (`thought: true`) → `reasoning_content`, `functionCall`
//!   → `tool_calls`, with ids made here); `finishReason` `STOP` → `stop`
//!   (`tool_calls` when it called a function), `MAX_TOKENS` → `length`,
//!   safety and recitation → `content_filter`; `usageMetadata`:
//!   `promptTokenCount` (which includes `cachedContentTokenCount`, taken out
//!   of the input), `candidatesTokenCount` (+ `thoughtsTokenCount`).
//! * Stream ([`Chunks`]): each event is a whole GenerateContentResponse:
//!   its parts become deltas, a function call one whole tool call; its
//!   `usageMetadata` the usage (final with the `finishReason`); an `error`
//!   object an error event. The end comes with the upstream's.
//! * Embeddings: one text → `:embedContent`, a list →
//!   `:batchEmbedContents`; answered as OpenAI's list (Gemini reports no
//!   tokens: the gateway counts them).

use serde_json::{json, Map, Value};

use super::adapter::{Adapter, Native, Op};
use super::convert::{self, Completion, Image, ToolChoice};
use super::model::{Model, ModelType};
use super::stream::{Dialect, Emit, StreamTranslator, Translator};
use super::usage::Tokens;
use gateway_adapters::upstream::encode_segment;
use gateway_adapters::upstream::llm::KeyForm;
use gateway_base::errors::ApiError;

#[derive(Debug)]
pub struct Gemini;

fn image_part(part: &Value) -> Result<Value, ApiError> {
    Ok(match convert::image(part)? {
        Image::Inline { media_type, data } => {
            json!({"inlineData": {"mimeType": media_type, "data": data}})
        }
        Image::Url(url) => {
            let lower = url.to_ascii_lowercase();
            let ext = lower.rsplit('.').next().unwrap_or("");
            let mime = match ext {
                "png" => "image/png",
                "gif" => "image/gif",
                "webp" => "image/webp",
                _ => "image/jpeg",
            };
            json!({"fileData": {"mimeType": mime, "fileUri": url}})
        }
    })
}

fn parts(content: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::new();
    match content {
        Some(Value::String(s)) if !s.is_empty() => out.push(json!({"text": s})),
        Some(Value::Array(ps)) => {
            for p in ps {
                out.push(match p.get("type").and_then(Value::as_str) {
                    Some("image_url") => image_part(p)?,
                    Some("file") => json!({"inlineData": {"mimeType": "application/pdf",
                        "data": convert::pdf(p)?}}),
                    Some("text") => json!({"text": p.get("text").cloned().unwrap_or_default()}),
                    _ => {
                        return Err(ApiError::BadRequest(format!(
                        "messages: a content part of type {} cannot be sent to a gemini provider",
                        p.get("type").unwrap_or(&Value::Null)
                    )))
                    }
                });
            }
        }
        _ => {}
    }
    Ok(out)
}

/// The function name of the tool call `id` among the assistant messages.
fn call_name<'a>(messages: &'a [Value], id: &str) -> Option<&'a str> {
    messages
        .iter()
        .flat_map(|m| {
            m.get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .find(|c| c.get("id").and_then(Value::as_str) == Some(id))
        .and_then(|c| c.get("function")?.get("name")?.as_str())
}

/// `contents` and the `systemInstruction` parts of an OpenAI chat body.
fn conversation(body: &Map<String, Value>) -> Result<(Vec<Value>, Vec<Value>), ApiError> {
    let msgs = convert::messages(body)?;
    let mut system = Vec::new();
    let mut out: Vec<(&str, Vec<Value>)> = Vec::new();
    for m in msgs {
        let (role, p) = match convert::role(m) {
            "system" | "developer" => {
                system.extend(parts(m.get("content"))?);
                continue;
            }
            "assistant" => {
                let mut p = parts(m.get("content"))?;
                for c in m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let f = c.get("function").cloned().unwrap_or_default();
                    p.push(
                        json!({"functionCall": {"name": f.get("name").cloned().unwrap_or_default(),
                        "args": super::stream::parsed_arguments(f.get("arguments"))}}),
                    );
                }
                ("model", p)
            }
            "tool" => {
                let id = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let name = call_name(msgs, id).unwrap_or(id);
                let text = convert::text_of(m.get("content"));
                let response = match serde_json::from_str::<Value>(&text) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => json!({"content": text}),
                };
                (
                    "user",
                    vec![json!({"functionResponse": {"name": name, "response": response}})],
                )
            }
            _ => ("user", parts(m.get("content"))?),
        };
        match out.last_mut() {
            Some((last, prev)) if *last == role => prev.extend(p),
            _ => out.push((role, p)),
        }
    }
    let contents = out
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect();
    Ok((system, contents))
}

fn generation_config(m: &Model, body: &Map<String, Value>) -> Map<String, Value> {
    let mut gc = Map::new();
    if let Some(n) = convert::max_tokens(body, m) {
        gc.insert("maxOutputTokens".into(), json!(n));
    }
    if let Some(s) = convert::stops(body) {
        gc.insert("stopSequences".into(), s);
    }
    for (from, to) in [
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("seed", "seed"),
        ("presence_penalty", "presencePenalty"),
        ("frequency_penalty", "frequencyPenalty"),
    ] {
        if let Some(v) = body.get(from).filter(|v| !v.is_null()) {
            gc.insert(to.into(), v.clone());
        }
    }
    if let Ok(Some(f)) = convert::json_schema(body) {
        gc.insert("responseMimeType".into(), json!("application/json"));
        if let convert::Format::Schema(s) = f {
            gc.insert("responseJsonSchema".into(), s.clone());
        }
    }
    if let Some(b) = body.get("reasoning_effort").map(convert::thinking_budget) {
        let b = b.unwrap_or_default();
        gc.insert(
            "thinkingConfig".into(),
            json!({"thinkingBudget": b, "includeThoughts": b > 0}),
        );
    }
    gc
}

/// The OpenAI fields this adapter translates (or passes as Gemini's own),
/// separated by spaces.
const TRANSLATED: &str = "model messages max_tokens max_completion_tokens stop temperature top_p \
     seed presence_penalty frequency_penalty stream stream_options tools \
     tool_choice parallel_tool_calls response_format reasoning_effort safetySettings labels";

/// 400 for what Gemini cannot be asked ([`convert::check`]).
fn check(body: &Map<String, Value>) -> Result<(), ApiError> {
    let hints = [
        "user",
        "safety_identifier",
        "metadata",
        "store",
        "prompt_cache_key",
    ];
    convert::check(
        body,
        &convert::Fields {
            provider: "a gemini provider",
            translated: &TRANSLATED.split_whitespace().collect::<Vec<_>>(),
            hints: &hints,
        },
    )?;
    if body.get("parallel_tool_calls") == Some(&Value::Bool(false)) {
        return Err(ApiError::BadRequest(
            "parallel_tool_calls (tool_choice.disable_parallel_tool_use): a gemini provider cannot be kept to one tool call; leave it out".into(),
        ));
    }
    convert::json_schema(body)?;
    if let Some(e) = body.get("reasoning_effort").filter(|e| !e.is_null()) {
        convert::thinking_budget(e)?;
    }
    Ok(())
}

fn tools(body: &Map<String, Value>, out: &mut Map<String, Value>) {
    let decls: Vec<Value> = convert::functions(body)
        .into_iter()
        .map(|(name, description, params)| {
            let mut d = json!({"name": name, "parameters": params});
            if let Some(desc) = description {
                d["description"] = desc.clone();
            }
            d
        })
        .collect();
    if decls.is_empty() {
        return;
    }
    out.insert("tools".into(), json!([{"functionDeclarations": decls}]));
    let config = match convert::tool_choice(body) {
        None | Some(ToolChoice::Auto) => return,
        Some(ToolChoice::None) => json!({"mode": "NONE"}),
        Some(ToolChoice::Any) => json!({"mode": "ANY"}),
        Some(ToolChoice::Named(n)) => json!({"mode": "ANY", "allowedFunctionNames": [n]}),
    };
    out.insert(
        "toolConfig".into(),
        json!({"functionCallingConfig": config}),
    );
}

/// Gemini's body of an OpenAI chat body.
pub fn chat_body(m: &Model, body: &Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
    check(body)?;
    let (system, contents) = conversation(body)?;
    let mut out = Map::new();
    if !system.is_empty() {
        out.insert("systemInstruction".into(), json!({"parts": system}));
    }
    out.insert("contents".into(), Value::Array(contents));
    let gc = generation_config(m, body);
    if !gc.is_empty() {
        out.insert("generationConfig".into(), Value::Object(gc));
    }
    tools(body, &mut out);
    for k in OWN_FIELDS {
        if let Some(v) = body.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    Ok(out)
}

/// Fields of Gemini's own a caller may add through `additional_params`
/// (never `cachedContent`: [`crate::bounds::PROVIDER_CACHES`]).
const OWN_FIELDS: [&str; 2] = ["safetySettings", "labels"];

fn embed_body(
    model: &str,
    body: &Map<String, Value>,
) -> Result<(bool, Map<String, Value>), ApiError> {
    let content = |t: &Value| -> Result<Value, ApiError> {
        let t = t.as_str().ok_or_else(|| {
            ApiError::BadRequest(
                "input: a gemini provider embeds texts only (no token arrays)".into(),
            )
        })?;
        Ok(json!({"parts": [{"text": t}]}))
    };
    let dims = body.get("dimensions").cloned();
    let one = |t: &Value, named: bool| -> Result<Value, ApiError> {
        let mut r = json!({"content": content(t)?});
        if named {
            r["model"] = json!(format!("models/{model}"));
        }
        if let Some(d) = &dims {
            r["outputDimensionality"] = d.clone();
        }
        Ok(r)
    };
    let input = body.get("input").unwrap_or(&Value::Null);
    match input {
        Value::Array(items) => {
            let reqs = items
                .iter()
                .map(|t| one(t, true))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((
                true,
                json!({"requests": reqs})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ))
        }
        t => Ok((
            false,
            one(t, false)?.as_object().cloned().unwrap_or_default(),
        )),
    }
}

/// OpenAI's finish reason of Gemini's.
pub fn finish_reason(reason: &str, called: bool) -> &'static str {
    match reason {
        "MAX_TOKENS" => "length",
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            "content_filter"
        }
        _ if called => "tool_calls",
        _ => "stop",
    }
}

/// The four counts of `usageMetadata` (`promptTokenCount` includes the
/// cached content's tokens: they are taken out of the input).
pub fn tokens(u: &Value) -> Tokens {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let prompt = n("promptTokenCount");
    let cached = n("cachedContentTokenCount").min(prompt);
    Tokens {
        input: prompt - cached,
        output: n("candidatesTokenCount") + n("thoughtsTokenCount"),
        cache_read: cached,
        cache_write: 0,
    }
}

/// Whether a part is a thought (its text the model's reasoning).
fn thought(p: &Value) -> bool {
    p.get("thought") == Some(&Value::Bool(true))
}

fn call_id() -> String {
    format!("call_{}", hex::encode(rand::random::<[u8; 12]>()))
}

/// OpenAI's chat completion of a GenerateContentResponse.
pub fn completion(v: &Value, model: &str) -> Result<Value, ApiError> {
    let cand = v
        .get("candidates")
        .and_then(|c| c.get(0))
        .ok_or_else(|| convert::unexpected("a response without candidates"))?;
    let mut text: Option<String> = None;
    let mut reasoning: Option<String> = None;
    let mut calls = Vec::new();
    for p in cand
        .get("content")
        .and_then(|c| c.get("parts"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = p.get("text").and_then(Value::as_str) {
            let into = if thought(p) {
                &mut reasoning
            } else {
                &mut text
            };
            into.get_or_insert_with(String::new).push_str(t);
        } else if let Some(c) = p.get("functionCall") {
            calls.push(convert::tool_call(
                &call_id(),
                c.get("name").and_then(Value::as_str).unwrap_or_default(),
                super::stream::arguments_text(c.get("args").unwrap_or(&Value::Null)),
            ));
        }
    }
    let reason = cand
        .get("finishReason")
        .and_then(Value::as_str)
        .unwrap_or("STOP");
    Ok(Completion {
        id: v
            .get("responseId")
            .and_then(Value::as_str)
            .unwrap_or("gemini")
            .to_owned(),
        model: model.to_owned(),
        finish: finish_reason(reason, !calls.is_empty()),
        text,
        reasoning,
        tool_calls: calls,
        usage: v.get("usageMetadata").filter(|u| u.is_object()).map(tokens),
    }
    .json())
}

/// OpenAI's embeddings list of `{"embedding"}` / `{"embeddings"}`.
fn embeddings(v: &Value, model: &str) -> Result<Value, ApiError> {
    let list: Vec<&Value> = match (
        v.get("embedding"),
        v.get("embeddings").and_then(Value::as_array),
    ) {
        (Some(e), _) => vec![e],
        (None, Some(es)) => es.iter().collect(),
        _ => return Err(convert::unexpected("embeddings")),
    };
    let data: Vec<Value> = list
        .into_iter()
        .enumerate()
        .map(|(i, e)| json!({"object": "embedding", "index": i, "embedding": e.get("values").cloned().unwrap_or_default()}))
        .collect();
    Ok(json!({"object": "list", "data": data, "model": model}))
}

/// Gemini's stream events (whole responses), read into OpenAI chunks.
#[derive(Debug, Default)]
pub struct Chunks {
    calls: usize,
}

impl Dialect for Chunks {
    fn event(&mut self, v: &Value, e: &mut Emit<'_>) {
        if let Some(err) = v.get("error") {
            let status = err.get("code").and_then(Value::as_u64).unwrap_or(502) as u16;
            let status = if status == 429 || status == 503 || status == 400 {
                status
            } else {
                502
            };
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the model provider failed");
            e.error(status, message);
            return;
        }
        if let Some(id) = v.get("responseId").and_then(Value::as_str) {
            e.id(id);
        }
        let cand = v.get("candidates").and_then(|c| c.get(0));
        for p in cand
            .and_then(|c| c.get("content"))
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(t) = p.get("text").and_then(Value::as_str) {
                let k = if thought(p) {
                    "reasoning_content"
                } else {
                    "content"
                };
                if !t.is_empty() {
                    let mut d = json!({});
                    d[k] = json!(t);
                    e.delta(d);
                }
            } else if let Some(c) = p.get("functionCall") {
                let k = self.calls;
                self.calls += 1;
                e.delta(json!({"tool_calls": [{"index": k, "id": call_id(), "type": "function",
                    "function": {"name": c.get("name").cloned().unwrap_or_default(),
                        "arguments": super::stream::arguments_text(c.get("args").unwrap_or(&Value::Null))}}]}));
            }
        }
        let reason = cand
            .and_then(|c| c.get("finishReason"))
            .and_then(Value::as_str);
        if let Some(u) = v.get("usageMetadata").filter(|u| u.is_object()) {
            e.usage(tokens(u), reason.is_some());
        }
        if let Some(r) = reason {
            e.finish(finish_reason(r, self.calls > 0));
        }
    }
}

impl Adapter for Gemini {
    fn path(&self, op: Op) -> &'static str {
        match op {
            Op::Chat => "/v1beta/models/{model}:generateContent",
            Op::Embedding => "/v1beta/models/{model}:embedContent",
            _ => "/v1beta/unsupported",
        }
    }

    fn supports(&self, t: ModelType) -> bool {
        matches!(t, ModelType::Chat | ModelType::Embedding)
    }

    fn models_path(&self) -> &'static str {
        "/v1beta/models"
    }
    fn key_form(&self) -> KeyForm {
        KeyForm::GoogApiKey
    }

    fn shape(&self) -> crate::bounds::Shape {
        crate::bounds::Shape::Gemini
    }

    fn own_path(&self, model: &str, method: &str) -> String {
        format!("/v1beta/models/{}:{method}", encode_segment(model))
    }

    /// Gemini names the model in the path.
    fn own_body(&self, mut body: Map<String, Value>) -> Map<String, Value> {
        body.remove("model");
        body
    }

    fn native(&self, op: Op, m: &Model, body: Map<String, Value>) -> Result<Native, ApiError> {
        let model = encode_segment(&m.id);
        match op {
            Op::Chat => {
                let stream = body.get("stream") == Some(&Value::Bool(true));
                let method = if stream {
                    "streamGenerateContent?alt=sse"
                } else {
                    "generateContent"
                };
                Ok(Native {
                    path: format!("/v1beta/models/{model}:{method}"),
                    body: chat_body(m, &body)?,
                })
            }
            Op::Embedding => {
                let (batch, b) = embed_body(&m.id, &body)?;
                let method = if batch {
                    "batchEmbedContents"
                } else {
                    "embedContent"
                };
                Ok(Native {
                    path: format!("/v1beta/models/{model}:{method}"),
                    body: b,
                })
            }
            _ => Err(ApiError::BadRequest(
                "a gemini provider only chats and embeds".into(),
            )),
        }
    }

    fn answer(&self, op: Op, model: &str, v: Value) -> Result<Value, ApiError> {
        match op {
            Op::Embedding => embeddings(&v, model),
            _ => completion(&v, model),
        }
    }

    fn stream(
        &self,
        _op: Op,
        model: &str,
        include_usage: bool,
    ) -> Option<Box<dyn StreamTranslator>> {
        Some(Box::new(Translator::new(
            Chunks::default(),
            model,
            include_usage,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Model {
        Model {
            id: "gemini-x".into(),
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
            max_output_tokens: None,
            cache_ttl_secs: None,
            cache_hit_price_pct: Default::default(),
            batch_price_pct: Default::default(),
            limits: Default::default(),
        }
    }

    #[test]
    fn a_chat_body_becomes_geminis() {
        let body = json!({"model": "gemini-x", "stream": true, "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Look"},
                {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}]},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"}],
            "max_tokens": 9, "stop": ["END"],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "tool_choice": {"type": "function", "function": {"name": "f"}}});
        let n = Gemini
            .native(Op::Chat, &model(), body.as_object().unwrap().clone())
            .unwrap();
        assert_eq!(
            n.path,
            "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            Value::Object(n.body),
            json!({"systemInstruction": {"parts": [{"text": "Be brief."}]},
                "contents": [
                    {"role": "user", "parts": [{"text": "Look"}, {"fileData": {"mimeType": "image/png", "fileUri": "https://x.test/a.png"}}]},
                    {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]},
                    {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"content": "42"}}}]}],
                "generationConfig": {"maxOutputTokens": 9, "stopSequences": ["END"]},
                "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "object"}}]}],
                "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["f"]}}})
        );
    }

    #[test]
    fn format_and_reasoning_are_translated_and_the_rest_refused() {
        let base = json!({"model": "gemini-x", "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": {"type": "object"}}},
            "reasoning_effort": "low", "user": "u", "seed": 2});
        let out = chat_body(&model(), base.as_object().unwrap()).unwrap();
        assert_eq!(
            out["generationConfig"],
            json!({"seed": 2, "responseMimeType": "application/json",
                "responseJsonSchema": {"type": "object"},
                "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true}})
        );
        for (k, v) in [
            ("n", json!(2)),
            ("logprobs", json!(true)),
            ("parallel_tool_calls", json!(false)),
        ] {
            let mut b = base.clone();
            b[k] = v;
            let ApiError::BadRequest(m) = chat_body(&model(), b.as_object().unwrap()).unwrap_err()
            else {
                panic!()
            };
            assert!(m.starts_with(k), "{m}");
        }
        let v = json!({"candidates": [{"content": {"parts": [{"text": "hm", "thought": true}, {"text": "4"}]},
            "finishReason": "STOP"}]});
        let c = completion(&v, "gemini-x").unwrap();
        assert_eq!(c["choices"][0]["message"]["reasoning_content"], "hm");
        assert_eq!(c["choices"][0]["message"]["content"], "4");
    }

    #[test]
    fn cached_content_is_taken_out_of_the_input() {
        let u = json!({"promptTokenCount": 50, "candidatesTokenCount": 4, "cachedContentTokenCount": 30});
        assert_eq!(
            tokens(&u),
            Tokens {
                input: 20,
                output: 4,
                cache_read: 30,
                cache_write: 0
            }
        );
    }
}
