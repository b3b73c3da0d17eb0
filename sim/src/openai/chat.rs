//! `POST /v1/chat/completions` and `POST /v1/completions`: one simulated
//! reply (`n` words of "This is a simulated reply to: …"), answered whole or
//! as server-sent events, one word per chunk. A tool call, when the request
//! gets one, is answered by [`super::tools`] instead.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::errors::{fields, invalid, missing};
use super::tokens::Tokenizer;
use super::tools;
use super::video::unix_now;
use super::wire::{frames, short_id, text_of};
use crate::request::Req;
use crate::response::{json_response, Resp};
use crate::shared::Shared;

/// What every answer object of one request repeats.
struct Head {
    /// Chat (`true`) or text completion.
    chat: bool,
    /// `chatcmpl-…` or `cmpl-…`.
    id: String,
    /// Unix seconds.
    created: u64,
    /// The model asked for (`sim-gpt` by default).
    model: String,
}

/// The text reply, as both the whole and the streamed answer give it.
struct Reply {
    /// The reply's words.
    words: Vec<String>,
    /// `stop`, or `length` when `max_tokens` was given.
    finish: &'static str,
    /// Choices answered (`n`).
    choices: u64,
    /// The `usage` object.
    usage: Value,
}

/// Chat (`chat = true`) and text completions.
pub(super) fn chat(sh: &Arc<Shared>, req: &Req, chat: bool) -> Result<Resp, Resp> {
    let f = fields(req)?;
    let prompt = prompt(&f, chat)?;
    let model = f
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("sim-gpt")
        .to_owned();
    let max_tokens = f
        .get("max_tokens")
        .or_else(|| f.get("max_completion_tokens"))
        .and_then(Value::as_u64);
    if max_tokens == Some(0) {
        return Err(invalid("max_tokens", "max_tokens must be at least 1"));
    }
    let n = max_tokens.map_or(12, |m| m.min(4096) as usize);
    let (choices, generated) = choices(&f, chat);
    let tok = Tokenizer {
        strict: sh.strict_tokens.load(Ordering::Relaxed),
    };
    let prompt_tokens = if chat {
        tok.chat(&Value::Object(f.clone()))
    } else {
        tok.texts(f.get("prompt").unwrap_or(&Value::Null))
    };
    let completion_tokens = n as u64 * generated;
    let head = Head {
        chat,
        id: short_id(if chat { "chatcmpl-" } else { "cmpl-" }),
        created: unix_now(),
        model,
    };
    if let Some(call) = tools::call(&f).filter(|_| chat) {
        let who = (head.id.as_str(), head.created, head.model.as_str());
        return Ok(tools::answer(sh, &f, call, prompt_tokens, who));
    }
    // Structured output: the text is the schema's smallest instance.
    let schema = f
        .get("response_format")
        .filter(|r| r.get("type").and_then(Value::as_str) == Some("json_schema"))
        .and_then(|r| r.pointer("/json_schema/schema"));
    let words = match schema {
        Some(s) => vec![crate::schema::instance(s).to_string()],
        None => reply_words(&prompt, n),
    };
    let reply = Reply {
        words,
        finish: if max_tokens.is_some() && schema.is_none() {
            "length"
        } else {
            "stop"
        },
        choices,
        usage: json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}),
    };
    if f.get("stream").and_then(Value::as_bool) != Some(true) {
        return Ok(whole(&head, &reply));
    }
    let include_usage = f
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        == Some(true);
    let events = streamed(&head, &reply, include_usage);
    Ok(crate::llm::sse_cut(sh, frames(&events), req.break_after))
}

/// The prompt's text: every message's content (chat) or the `prompt`;
/// OpenAI's 400 when it is missing.
fn prompt(f: &Map<String, Value>, chat: bool) -> Result<String, Resp> {
    if !chat {
        return match f.get("prompt") {
            Some(p @ (Value::String(_) | Value::Array(_))) => Ok(text_of(p)),
            _ => Err(missing("prompt")),
        };
    }
    let msgs = f
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| missing("messages"))?;
    if msgs.is_empty() {
        return Err(invalid(
            "messages",
            "'messages' must contain at least one message.",
        ));
    }
    Ok(msgs
        .iter()
        .map(|m| text_of(m.get("content").unwrap_or(&Value::Null)))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// (choices answered, choices generated): `n` choices are answered;
/// completions generate `best_of` upstream (billed, not all answered).
fn choices(f: &Map<String, Value>, chat: bool) -> (u64, u64) {
    let clamped = |k: &str| f.get(k).and_then(Value::as_u64).unwrap_or(1).clamp(1, 128);
    let choices = clamped("n");
    let generated = if chat {
        choices
    } else {
        choices.max(clamped("best_of"))
    };
    (choices, generated)
}

/// The simulated reply: `n` words (the Responses API answers the same).
pub(super) fn reply_words(prompt: &str, n: usize) -> Vec<String> {
    let base = format!(
        "This is a simulated reply to: {}",
        prompt
            .split_whitespace()
            .take(8)
            .collect::<Vec<_>>()
            .join(" ")
    );
    base.split_whitespace()
        .map(str::to_owned)
        .cycle()
        .take(n)
        .collect()
}

/// The whole answer: `choices` copies of the reply and the usage.
fn whole(head: &Head, reply: &Reply) -> Resp {
    let text = reply.words.join(" ");
    let finish = reply.finish;
    let all: Vec<Value> = (0..reply.choices)
        .map(|i| {
            if head.chat {
                json!({"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": finish, "logprobs": null})
            } else {
                json!({"index": i, "text": text, "finish_reason": finish, "logprobs": null})
            }
        })
        .collect();
    let object = if head.chat {
        "chat.completion"
    } else {
        "text_completion"
    };
    json_response(
        StatusCode::OK,
        &json!({"id": head.id, "object": object, "created": head.created, "model": head.model, "choices": all, "usage": reply.usage}),
    )
}

/// The streamed answer's events: (chat) a role chunk, one chunk per word,
/// the finish chunk, and the usage chunk when asked for.
fn streamed(head: &Head, reply: &Reply, include_usage: bool) -> Vec<Value> {
    let object = if head.chat {
        "chat.completion.chunk"
    } else {
        "text_completion"
    };
    let chunk = |choice: Value| json!({"id": head.id, "object": object, "created": head.created, "model": head.model, "choices": [choice]});
    let mut events = Vec::new();
    if head.chat {
        events.push(chunk(json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null})));
    }
    for (i, w) in reply.words.iter().enumerate() {
        let piece = if i == 0 { w.clone() } else { format!(" {w}") };
        events.push(chunk(if head.chat {
            json!({"index": 0, "delta": {"content": piece}, "finish_reason": null})
        } else {
            json!({"index": 0, "text": piece, "finish_reason": null})
        }));
    }
    events.push(chunk(if head.chat {
        json!({"index": 0, "delta": {}, "finish_reason": reply.finish})
    } else {
        json!({"index": 0, "text": "", "finish_reason": reply.finish})
    }));
    if include_usage {
        events.push(json!({"id": head.id, "object": object, "created": head.created, "model": head.model, "choices": [], "usage": reply.usage}));
    }
    events
}
