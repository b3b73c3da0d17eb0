//! Reply rules shared by the Anthropic ([`crate::anthropic`]) and Gemini
//! ([`crate::gemini`]) simulations, so both answer alike and tests can
//! predict every figure:
//!
//! * **Text**: `"This is a simulated reply to: "` followed by the first 8
//!   words of the last user text, words cycled to [`NATURAL_WORDS`] words
//!   (`"Using the tool result: "` + its first 8 words when the last user
//!   turn carries a tool result). A `max_tokens` / `maxOutputTokens` below
//!   that cuts the reply to that many words (finish: max tokens). A stop
//!   sequence found in the reply cuts it just before the first occurrence
//!   (finish: stop sequence). Output tokens are the words sent.
//! * **Tool calls** ([`pick_tool`]): when tools are given and the last user
//!   turn is not a tool result, the first tool (in the request's order)
//!   whose name occurs in the last user text is called (a forced choice —
//!   Anthropic's `tool_choice` `tool` / `any`, Gemini's `ANY` mode — calls
//!   the named tool or, failing a mention, the first one; `none` / `NONE`
//!   never calls). The arguments come from the tool's JSON schema
//!   ([`sample_args`]): each property its first `enum` value, else `"sim"`
//!   for strings, `1` for numbers and integers, `true` for booleans, `[]`
//!   for arrays, nested objects filled the same way.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::HeaderValue;
use http_body_util::{Either, StreamBody};
use hyper::body::Frame;
use serde_json::{Map, Value};

use crate::response::{FrameStream, Resp};
use crate::shared::Shared;

/// Words of a reply nothing cuts short.
pub const NATURAL_WORDS: usize = 12;

/// Why a text reply ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Finish {
    /// It ended naturally.
    End,
    /// The output limit cut it.
    MaxTokens,
    /// This stop sequence cut it.
    Stop(String),
}

/// A text reply.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The words, each with its leading space (but the first).
    pub pieces: Vec<String>,
    /// Why it ended.
    pub finish: Finish,
}

impl Reply {
    /// The whole text.
    pub fn text(&self) -> String {
        self.pieces.concat()
    }

    /// Output tokens: the words sent.
    pub fn tokens(&self) -> u64 {
        self.text().split_whitespace().count() as u64
    }
}

/// The text reply to `prompt` (the last user text) or, when given, to a
/// tool's result, under the output limit and stop sequences.
pub fn text_reply(
    prompt: &str,
    tool_result: Option<&str>,
    max: Option<u64>,
    stops: &[String],
) -> Reply {
    let first8 = |s: &str| s.split_whitespace().take(8).collect::<Vec<_>>().join(" ");
    let base = match tool_result {
        Some(r) => format!("Using the tool result: {}", first8(r)),
        None => format!("This is a simulated reply to: {}", first8(prompt)),
    };
    let limit = max.map_or(NATURAL_WORDS, |m| (m as usize).min(NATURAL_WORDS));
    let words: Vec<&str> = base
        .split_whitespace()
        .cycle()
        .take(limit.min(NATURAL_WORDS))
        .collect();
    let text = words.join(" ");
    let cut = stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()).map(|i| (i, s)))
        .min_by_key(|(i, _)| *i);
    if let Some((i, stop)) = cut {
        return Reply {
            pieces: split_words(&text[..i]),
            finish: Finish::Stop(stop.clone()),
        };
    }
    let finish = if limit < NATURAL_WORDS {
        Finish::MaxTokens
    } else {
        Finish::End
    };
    Reply {
        pieces: split_words(&text),
        finish,
    }
}

/// Splits a text into pieces of one word each, keeping every character
/// (a piece is its leading spaces and a word; trailing spaces stay on the
/// last piece).
fn split_words(text: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    for c in text.chars() {
        if c.is_whitespace() && in_word && !cur.is_empty() {
            pieces.push(std::mem::take(&mut cur));
            in_word = false;
        } else if !c.is_whitespace() {
            in_word = true;
        }
        cur.push(c);
    }
    match pieces.last_mut() {
        Some(last) if !in_word => last.push_str(&cur),
        _ if !cur.is_empty() => pieces.push(cur),
        _ => {}
    }
    pieces
}

/// The tool to call, by the rule in the module docs: `names` in the
/// request's order, `forced` when the caller requires a call (`Some(name)`
/// for one tool, `Some("")` for any), `never` when it forbids one.
pub fn pick_tool(
    names: &[String],
    user_text: &str,
    forced: Option<&str>,
    never: bool,
) -> Option<String> {
    if never || names.is_empty() {
        return None;
    }
    if let Some(name) = forced.filter(|n| !n.is_empty()) {
        return Some(name.to_owned());
    }
    let mentioned = names.iter().find(|n| user_text.contains(n.as_str()));
    match (mentioned, forced) {
        (Some(n), _) => Some(n.clone()),
        (None, Some(_)) => Some(names[0].clone()),
        (None, None) => None,
    }
}

/// Arguments filled from a JSON schema (rule in the module docs).
pub fn sample_args(schema: &Value) -> Value {
    let mut out = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, p) in props {
            out.insert(k.clone(), sample_value(p));
        }
    }
    Value::Object(out)
}

fn sample_value(p: &Value) -> Value {
    if let Some(first) = p
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    let ty = p
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string")
        .to_ascii_lowercase();
    match ty.as_str() {
        "number" | "integer" => Value::from(1),
        "boolean" => Value::Bool(true),
        "array" => Value::Array(Vec::new()),
        "object" => sample_args(p),
        _ => Value::String("sim".into()),
    }
}

/// Splits a JSON text into pieces of at most 10 characters (a streamed
/// tool input).
pub fn json_pieces(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(10).map(|c| c.iter().collect()).collect()
}

/// A 24-hex-digit random id with a prefix.
pub fn new_id(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..24]
    )
}

/// A server-sent-events answer sending `frames` (each a whole event,
/// separators included) [`Shared::stream_delay_ms`] apart, its body ending
/// [`Shared::stream_linger_ms`] after the last.
pub fn sse(sh: &Arc<Shared>, frames: Vec<String>) -> Resp {
    sse_cut(sh, frames, None)
}

/// [`sse`], but with `break_after` the connection breaks (a body error,
/// no last chunk) after that many frames, as a provider that fails midway.
pub fn sse_cut(sh: &Arc<Shared>, frames: Vec<String>, break_after: Option<usize>) -> Resp {
    let delay = Duration::from_millis(sh.stream_delay_ms.load(Ordering::Relaxed));
    let linger = Duration::from_millis(sh.stream_linger_ms.load(Ordering::Relaxed));
    let (tx, rx) = tokio::sync::mpsc::channel::<Option<Bytes>>(8);
    sh.spawn(async move {
        for (i, f) in frames.into_iter().enumerate() {
            if i > 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if break_after == Some(i) {
                let _ = tx.send(None).await;
                return;
            }
            if tx.send(Some(Bytes::from(f))).await.is_err() {
                return;
            }
        }
        if !linger.is_zero() {
            tokio::time::sleep(linger).await;
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await? {
            Some(b) => Some((Ok(Frame::data(b)), rx)),
            None => Some((Err(std::io::Error::other("injected stream break")), rx)),
        }
    });
    let stream: FrameStream = Box::pin(stream);
    let mut r = http::Response::new(Either::Right(StreamBody::new(stream)));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_cut_by_limits_and_stops() {
        let r = text_reply("hello there", None, Some(100), &[]);
        assert_eq!(r.tokens(), 12);
        assert_eq!(r.finish, Finish::End);
        assert!(r
            .text()
            .starts_with("This is a simulated reply to: hello there This"));
        let r = text_reply("hello", None, Some(3), &[]);
        assert_eq!(
            (r.text().as_str(), r.finish),
            ("This is a", Finish::MaxTokens)
        );
        let r = text_reply("hello", None, None, &["simulated".into(), "is".into()]);
        assert_eq!(r.text(), "Th");
        assert_eq!(r.finish, Finish::Stop("is".into()));
        let r = text_reply("x", Some("22 degrees"), None, &[" reply".into()]);
        assert!(r.text().starts_with("Using the tool result: 22 degrees"));
        assert_eq!(split_words("a b  c "), vec!["a", " b", "  c "]);
    }

    #[test]
    fn tools_and_args() {
        let names = vec!["get_weather".to_owned(), "get_time".to_owned()];
        assert_eq!(
            pick_tool(&names, "use get_time", None, false).as_deref(),
            Some("get_time")
        );
        assert_eq!(pick_tool(&names, "hello", None, false), None);
        assert_eq!(
            pick_tool(&names, "hello", Some(""), false).as_deref(),
            Some("get_weather")
        );
        assert_eq!(pick_tool(&names, "get_time", None, true), None);
        let schema = serde_json::json!({"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "f"]},
            "days": {"type": "integer"}}});
        assert_eq!(
            sample_args(&schema),
            serde_json::json!({"city": "sim", "unit": "celsius", "days": 1})
        );
        assert_eq!(json_pieces("abcdefghijkl"), vec!["abcdefghij", "kl"]);
    }
}
