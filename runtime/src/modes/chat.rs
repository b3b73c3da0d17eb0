//! `chat`, `completion` and `stop_stream`: OpenAI-compatible chat and text
//! completions through the model named `provider/model`. This file is the
//! operations' translation ([`Completion`]: their model type, bound and
//! usage); the model call itself (the hold and its settlement, routing,
//! the response cache, the stream relayed under an `X-Stream-Id` the
//! caller can stop) is [`crate::model_call`]'s.
//! [`messages`]: Anthropic's Messages API through the same path.

pub mod messages;
pub mod responses;

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::common::read_body;
use crate::ctx::{Ctx, Outcome};
use crate::model_call::{self, Operation, Used};
use gateway_base::body::{self, Request};
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;
use gateway_models::bounds::{Bound, Shape};
use gateway_models::cache::Ask;
use gateway_models::providers::{Model, ModelType, Op, Tokens};

/// The text of a chat message's `content` (a string or a list of parts).
fn content_len(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Array(parts) => parts.iter().map(|p| p.to_string().len()).sum(),
        Value::Null => 0,
        other => other.to_string().len(),
    }
}

/// Bytes of prompt text and number of messages of a request.
fn prompt_size(body: &Map<String, Value>, chat: bool) -> Result<(usize, usize), ApiError> {
    if chat {
        let msgs = body
            .get("messages")
            .and_then(Value::as_array)
            .ok_or_else(|| ApiError::BadRequest("messages: must be a list".into()))?;
        if msgs.is_empty() {
            return Err(ApiError::BadRequest(
                "messages: must hold at least one message".into(),
            ));
        }
        let mut bytes = 0;
        for m in msgs {
            let m = m.as_object().ok_or_else(|| {
                ApiError::BadRequest("messages: each message must be an object".into())
            })?;
            bytes += m.get("content").map_or(0, content_len);
        }
        Ok((bytes, msgs.len()))
    } else {
        Ok((body.get("prompt").map_or(0, content_len), 1))
    }
}

/// Tokens of the answer's text when the upstream gives no `usage`.
fn counted_output(v: &Value) -> u64 {
    let chars: usize = v
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            c.get("message")
                .and_then(|m| m.get("content"))
                .or_else(|| c.get("text"))
                .and_then(Value::as_str)
        })
        .map(str::len)
        .sum();
    chars.div_ceil(4) as u64
}

/// `chat` (`chat = true`) and `completion`.
pub async fn complete(ctx: &mut Ctx, req: Request, chat: bool) -> Result<Outcome, ApiError> {
    let ask = Ask::from_headers(req.headers())?;
    let body = read_body(ctx, req).await?;
    let op = completion(&body, chat)?;
    model_call::run(ctx, &op, body, Some(&ask)).await
}

/// The operation of a body already read (and validated): the model call
/// runs it with the request's response-cache headers
/// ([`gateway_models::cache`]).
fn completion(body: &Map<String, Value>, chat: bool) -> Result<Completion, ApiError> {
    let (bytes, _messages) = prompt_size(body, chat)?;
    Ok(Completion {
        chat,
        stream: body.get("stream") == Some(&Value::Bool(true)),
        usage_wanted: gateway_models::usage_tail::UsageTail::of(body).usage_wanted(),
        prompt_bytes: bytes,
    })
}

/// A chat or text completion, as the model call asks it.
struct Completion {
    chat: bool,
    stream: bool,
    usage_wanted: bool,
    /// Bytes of prompt text (its tokens counted when the provider reports none).
    prompt_bytes: usize,
}

impl Operation for Completion {
    fn model_type(&self) -> ModelType {
        if self.chat {
            ModelType::Chat
        } else {
            ModelType::Completion
        }
    }

    fn op(&self) -> Op {
        if self.chat {
            Op::Chat
        } else {
            Op::Completion
        }
    }

    fn what(&self) -> &'static str {
        "a completion"
    }

    /// Everything the upstream body asks for ([`gateway_models::bounds`]).
    fn bound(&self, m: &Model, up: &Map<String, Value>, shape: Shape) -> Result<Bound, ApiError> {
        if self.chat {
            gateway_models::bounds::chat(up, shape, m.context_window)
        } else {
            gateway_models::bounds::completion(up, m.context_window)
        }
    }

    fn streamed(&self) -> bool {
        self.stream
    }

    fn usage_wanted(&self) -> bool {
        self.usage_wanted
    }

    fn counted_prompt(&self) -> u64 {
        self.prompt_bytes.div_ceil(4) as u64
    }

    fn used(&self, v: &Value) -> Result<Used, ApiError> {
        Ok(match v.get("usage").and_then(Tokens::from_openai) {
            Some(tokens) => Used::Tokens {
                tokens,
                counted: false,
            },
            None => Used::Tokens {
                tokens: Tokens::new(self.counted_prompt(), counted_output(v)),
                counted: true,
            },
        })
    }

    fn finish_reasons(&self, v: &Value) -> Vec<String> {
        finish_reasons(v)
    }
}

/// The `finish_reason` of each choice of a completion (for its span).
fn finish_reasons(v: &Value) -> Vec<String> {
    v.get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("finish_reason").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// `stop_stream`: ends the caller's open stream.
pub async fn stop(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let id = params
        .get("stream_id")
        .ok_or_else(|| ApiError::bug("stop_stream row without {stream_id}"))?;
    if !ctx.gw.streams.stop(&id, ctx.user_id()).await {
        return Err(ApiError::NotFound(
            "stream not found (finished, stopped or never created)".into(),
        ));
    }
    Ok(Outcome::new(
        body::json(StatusCode::OK, &json!({"success": true})),
        None,
    ))
}
