//! Anthropic's Messages API, on the same port ([`crate::Sim::url`] is its
//! base: the paths are Anthropic's own). Logged and faultable like every
//! provider call.
//!
//! | Method | Path | Notes |
//! |---|---|---|
//! | POST | `/v1/messages` | `model`, `max_tokens` (≥ 1) and `messages` (roles `user`, `assistant`, `system`) required; `system`, `stop_sequences`, `tools`, `tool_choice`, `temperature`, `top_p`, `top_k`, `metadata`, `thinking`, `output_config`, `context_management`, `cache_control` accepted ([`options`]); `stream: true` answers Anthropic's event sequence |
//! | POST | `/v1/messages/count_tokens` | `model`, `messages` required, the same options → `{"input_tokens": N}`: the input a message of the same request counts, in all (no cache effect) |
//!
//! **Key**: `x-api-key` is required; when `api_key` is configured it must be
//! that key (`Authorization` is not looked at). Otherwise 401
//! `authentication_error`. `anthropic-version` is required too (else 400).
//!
//! **Answers** follow [`crate::llm`]'s rules: a text block (`end_turn`,
//! `max_tokens`, or `stop_sequence` with the sequence in `stop_sequence`),
//! or when a tool is picked a text block `"Calling NAME."` and a `tool_use`
//! block `{id: "toolu_…", name, input}` (`tool_use`); with `thinking` a
//! `thinking` block first, with `output_config.format` a JSON document
//! ([`answer`]). Images (`base64` with
//! a JPEG/PNG/GIF/WebP `media_type`, or `url`) are accepted and counted.
//! Like Anthropic, a `tool_result` must answer a `tool_use` id of the
//! previous assistant message, and an assistant `tool_use` must be answered
//! by a `tool_result` in the next message (else 400). Input tokens and the
//! prompt cache: [`cache`]; output tokens: the words of the text plus the
//! tool input's count, at most `max_tokens`.
//!
//! **Stream** ([`stream`]): `message_start` (usage: the input figures and
//! `output_tokens: 1`), per block `content_block_start`, deltas
//! (`thinking_delta` one word each then one `signature_delta`;
//! `text_delta` one word each, a JSON document's in 10-character pieces;
//! `input_json_delta` the input JSON in 10-character pieces) and
//! `content_block_stop`, a `ping` after the first
//! `content_block_start`, `message_delta` (`stop_reason`, `stop_sequence`,
//! `usage`: the totals, cumulative, as today's API sends them) and
//! `message_stop`; events
//! [`stream_delay_ms`](crate::shared::Shared::stream_delay_ms) apart. A
//! `stream_error` fault ([`crate::faults`]) ends it with an `error` event.
//!
//! Errors: `{"type": "error", "error": {"type", "message"}}` ([`errors`]).

pub mod answer;
pub mod cache;
pub mod errors;
pub mod options;

pub mod stream;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Map, Value};

use crate::llm;
use crate::openai::tokens::Tokenizer;
use crate::request::Req;
use crate::response::{json_response, Resp};
use crate::shared::Shared;

use answer::blocks;
pub use answer::{rendered, Answer, Message};
use errors::{bad, err};
pub use errors::{error_body, error_type};

type R = Result<Resp, Resp>;

/// True for the paths this module answers.
pub fn owns(path: &str) -> bool {
    path == "/v1/messages" || path.starts_with("/v1/messages/")
}

/// Answers one request under `/v1/messages`; `stream_error` is a
/// `stream_error` fault that matched it.
pub fn route(sh: &Arc<Shared>, req: &Req, stream_error: Option<(StatusCode, usize)>) -> Resp {
    route_inner(sh, req, stream_error).unwrap_or_else(|e| e)
}

fn route_inner(sh: &Arc<Shared>, req: &Req, stream_error: Option<(StatusCode, usize)>) -> R {
    let header = |k: &str| req.headers.get(k).and_then(|v| v.to_str().ok());
    let key = sh.config.read().unwrap().api_key.clone();
    match (header("x-api-key"), key) {
        (None, _) => {
            return Err(err(
                StatusCode::UNAUTHORIZED,
                "x-api-key header is required",
            ))
        }
        (Some(got), Some(want)) if got.trim() != want => {
            return Err(err(StatusCode::UNAUTHORIZED, "invalid x-api-key"))
        }
        _ => {}
    }
    if header("anthropic-version").is_none() {
        return Err(bad("anthropic-version: header is required"));
    }
    let f = match serde_json::from_slice::<Value>(&req.body) {
        Ok(Value::Object(m)) => m,
        _ => return Err(bad("The request body is not valid JSON.")),
    };
    let tok = Tokenizer {
        strict: sh.strict_tokens.load(Ordering::Relaxed),
    };
    match (req.method.as_str(), req.path.trim_end_matches('/')) {
        ("POST", "/v1/messages") => messages(sh, tok, &f, stream_error),
        ("POST", "/v1/messages/count_tokens") => {
            validate(&f, false)?;
            let n = cache::count(tok, &Value::Object(f));
            Ok(json_response(StatusCode::OK, &json!({"input_tokens": n})))
        }
        _ => Err(err(
            StatusCode::NOT_FOUND,
            &format!("Not found: {} {}", req.method, req.path),
        )),
    }
}

fn ids(blocks: &[Value], ty: &str, key: &str) -> Vec<String> {
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some(ty))
        .filter_map(|b| b.get(key).and_then(Value::as_str).map(str::to_owned))
        .collect()
}

fn validate_block(b: &Value, at: &str) -> Result<(), Resp> {
    let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
    if ty == "text" && !b.get("text").is_some_and(Value::is_string) {
        return Err(bad(&format!("{at}.text: Field required")));
    }
    if ty == "image" {
        let src = b.get("source").cloned().unwrap_or(Value::Null);
        let s = |k: &str| src.get(k).and_then(Value::as_str);
        match s("type") {
            Some("base64") => {
                if !matches!(
                    s("media_type"),
                    Some("image/jpeg" | "image/png" | "image/gif" | "image/webp")
                ) {
                    return Err(bad(&format!("{at}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'")));
                }
                if s("data").is_none_or(str::is_empty) {
                    return Err(bad(&format!("{at}.source.base64.data: Field required")));
                }
            }
            Some("url") if s("url").is_some() => {}
            _ => {
                return Err(bad(&format!(
                    "{at}.source: Input tag is not one of 'base64', 'url'"
                )))
            }
        }
    }
    Ok(())
}

/// Checks a request the way Anthropic does (the parts the simulator reads).
fn validate(f: &Map<String, Value>, need_max: bool) -> Result<(), Resp> {
    if !f.get("model").is_some_and(Value::is_string) {
        return Err(bad("model: Field required"));
    }
    let max = f.get("max_tokens").and_then(Value::as_u64);
    if need_max && max.is_none_or(|m| m < 1) {
        return Err(bad("max_tokens: Field required (an integer, at least 1)"));
    }
    options::validate(f, max.filter(|_| need_max))?;
    let msgs = f
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("messages: Field required"))?;
    if msgs.is_empty() {
        return Err(bad("messages: at least one message is required"));
    }
    if msgs
        .iter()
        .all(|m| m.get("role").and_then(Value::as_str) == Some("system"))
    {
        return Err(bad(
            "messages: at least one 'user' or 'assistant' message is required",
        ));
    }
    if let Some(sys) = f.get("system") {
        if !sys.is_string() && !sys.is_array() {
            return Err(bad(
                "system: Input should be a valid string or list of text blocks",
            ));
        }
    }
    for (i, m) in msgs.iter().enumerate() {
        if !matches!(
            m.get("role").and_then(Value::as_str),
            Some("user" | "assistant" | "system")
        ) {
            return Err(bad(&format!(
                "messages.{i}.role: Input should be 'user', 'assistant' or 'system'"
            )));
        }
        let b = blocks(m);
        for (j, block) in b.iter().enumerate() {
            validate_block(block, &format!("messages.{i}.content.{j}"))?;
        }
        let prev = if i > 0 {
            blocks(&msgs[i - 1])
        } else {
            Vec::new()
        };
        let asked = ids(&prev, "tool_use", "id");
        for id in ids(&b, "tool_result", "tool_use_id") {
            if !asked.contains(&id) {
                return Err(bad(&format!("messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.")));
            }
        }
        if let Some(id) = asked
            .into_iter()
            .find(|id| !ids(&b, "tool_result", "tool_use_id").contains(id))
        {
            return Err(bad(&format!("messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {id}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i - 1)));
        }
    }
    Ok(())
}

fn messages(
    sh: &Arc<Shared>,
    tok: Tokenizer,
    f: &Map<String, Value>,
    stream_error: Option<(StatusCode, usize)>,
) -> R {
    validate(f, true)?;
    let body = Value::Object(f.clone());
    let usage = cache::usage(sh, tok, &body);
    let a = answer::of(f);
    let model = f
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let max = f.get("max_tokens").and_then(Value::as_u64).unwrap_or(1);
    let id = llm::new_id("msg_");
    if f.get("stream").and_then(Value::as_bool) == Some(true) {
        let frames = stream::events(&id, &model, &a, max, usage, stream_error);
        return Ok(llm::sse(sh, frames));
    }
    let r = rendered(&a, max);
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": r.blocks, "stop_reason": r.reason, "stop_sequence": r.sequence,
            "usage": {
                "input_tokens": usage.input, "output_tokens": r.output,
                "cache_creation_input_tokens": usage.creation,
                "cache_read_input_tokens": usage.read,
            },
        }),
    ))
}
