//! What the simulated model answers a Messages request ([`Message`]: its
//! thinking, if asked for, and its [`Answer`], by [`crate::llm`]'s rules)
//! and how it renders as content blocks. A leaf of its own, because both
//! the whole answer (in [`super`]) and the stream ([`super::stream`])
//! render it.
//!
//! **Thinking** (`thinking` of type `enabled` or `adaptive`): the message
//! starts with a `thinking` block, `"Let me think about: "` and the first
//! 4 words of the last user text, with a `signature` (`"sim"` and 16 hex
//! digits of the thinking's hash). Its words are output tokens, and
//! `max_tokens` bounds them and the reply together: the reply gets what
//! the thinking left.
//!
//! **Structured output** (`output_config.format` of type `json_schema`):
//! the text is the smallest document valid for the schema
//! ([`crate::schema`]), never cut (neither `max_tokens` nor a stop
//! sequence applies to it); its output tokens are its 10-character pieces
//! (as streamed), at most `max_tokens`.

use serde_json::{json, Map, Value};

use crate::llm::{self, Finish, Reply};
use crate::openai::tokens::Tokenizer;
use crate::schema;

/// The content blocks of a message (a string content is one text block).
pub(super) fn blocks(m: &Value) -> Vec<Value> {
    match m.get("content") {
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(b)) => b.clone(),
        _ => Vec::new(),
    }
}

/// Text of blocks (`text` blocks, strings, `tool_result` contents).
fn text_of(blocks: &[Value], ty: &str) -> String {
    let mut out = Vec::new();
    for b in blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some(ty))
    {
        match (ty, b.get("content")) {
            ("tool_result", Some(Value::String(s))) => out.push(s.clone()),
            ("tool_result", Some(Value::Array(inner))) => out.push(text_of(inner, "text")),
            _ => out.extend(b.get("text").and_then(Value::as_str).map(str::to_owned)),
        }
    }
    out.join(" ")
}

/// What the simulated model answers: its thinking, then its answer.
pub struct Message {
    /// The thinking block's text, when thinking was asked for.
    pub thinking: Option<String>,
    /// The answer after it.
    pub answer: Answer,
}

/// What the simulated model answers after its thinking.
pub enum Answer {
    /// Text only.
    Text(Reply),
    /// A JSON document (structured output).
    Json(String),
    /// A short text, then a call of tool `name` with `input`.
    Tool {
        /// `toolu_…`.
        id: String,
        /// The tool.
        name: String,
        /// Its arguments.
        input: Value,
    },
}

/// Whether the request asks for thinking (`enabled` or `adaptive`).
fn thinks(f: &Map<String, Value>) -> bool {
    matches!(at(f, "thinking", "/type"), Some("enabled" | "adaptive"))
}

/// The string at `pointer` inside the request's field `field`.
pub(super) fn at<'a>(f: &'a Map<String, Value>, field: &str, pointer: &str) -> Option<&'a str> {
    f.get(field)?.pointer(pointer)?.as_str()
}

/// A thinking's signature: `"sim"` and 16 hex digits of its text's hash.
pub fn signature(thinking: &str) -> String {
    let h = thinking.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("sim{h:016x}")
}

/// What the model answers this request: its thinking when asked for, then
/// a tool call when a tool is picked (and the last user message holds no
/// tool result), else the structured output's document, else text.
pub fn of(f: &Map<String, Value>) -> Message {
    let msgs = f
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let last = msgs
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"));
    let last = last.map(blocks).unwrap_or_default();
    let result = text_of(&last, "tool_result");
    let has_result = last
        .iter()
        .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"));
    let user_text = text_of(&last, "text");
    let thinking = thinks(f).then(|| {
        let first4: Vec<&str> = user_text.split_whitespace().take(4).collect();
        format!("Let me think about: {}", first4.join(" "))
    });
    let tools: Vec<Value> = f
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<String> = tools
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let choice = f.get("tool_choice");
    let ty = choice.and_then(|c| c.get("type")).and_then(Value::as_str);
    let forced = match ty {
        Some("tool") => choice.and_then(|c| c.get("name")).and_then(Value::as_str),
        Some("any") => Some(""),
        _ => None,
    };
    let pick = (!has_result)
        .then(|| llm::pick_tool(&names, &user_text, forced, ty == Some("none")))
        .flatten();
    if let Some(name) = pick {
        let schema = tools
            .iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(name.as_str()))
            .and_then(|t| t.get("input_schema"))
            .cloned()
            .unwrap_or(Value::Null);
        let answer = Answer::Tool {
            id: llm::new_id("toolu_"),
            input: llm::sample_args(&schema),
            name,
        };
        return Message { thinking, answer };
    }
    if at(f, "output_config", "/format/type") == Some("json_schema") {
        let schema = f
            .get("output_config")
            .and_then(|c| c.pointer("/format/schema"))
            .unwrap_or(&Value::Null);
        let answer = Answer::Json(schema::instance(schema).to_string());
        return Message { thinking, answer };
    }
    let stops: Vec<String> = f
        .get("stop_sequences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    // The reply gets what the thinking left of `max_tokens`.
    let thought = thinking.as_deref().map_or(0, words);
    let max = f
        .get("max_tokens")
        .and_then(Value::as_u64)
        .map(|m| m.saturating_sub(thought));
    let answer = Answer::Text(llm::text_reply(
        &user_text,
        has_result.then_some(result.as_str()),
        max,
        &stops,
    ));
    Message { thinking, answer }
}

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// A rendered message: content blocks, `stop_reason`, `stop_sequence`
/// and output tokens.
pub struct Rendered {
    pub blocks: Vec<Value>,
    pub reason: &'static str,
    pub sequence: Value,
    pub output: u64,
}

/// A message rendered under `max` output tokens.
pub fn rendered(m: &Message, max: u64) -> Rendered {
    let (mut blocks, reason, sequence, mut output) = answer_blocks(&m.answer, max);
    if let Some(t) = &m.thinking {
        blocks.insert(
            0,
            json!({"type": "thinking", "thinking": t, "signature": signature(t)}),
        );
        output = (output + words(t)).min(max);
    }
    Rendered {
        blocks,
        reason,
        sequence,
        output,
    }
}

/// (content blocks, stop_reason, stop_sequence, output tokens) of an answer.
fn answer_blocks(a: &Answer, max: u64) -> (Vec<Value>, &'static str, Value, u64) {
    match a {
        Answer::Json(text) => {
            let n = (llm::json_pieces(text).len() as u64).min(max);
            (
                vec![json!({"type": "text", "text": text})],
                "end_turn",
                Value::Null,
                n,
            )
        }
        Answer::Text(r) => {
            let (reason, seq) = match &r.finish {
                Finish::End => ("end_turn", Value::Null),
                Finish::MaxTokens => ("max_tokens", Value::Null),
                Finish::Stop(s) => ("stop_sequence", Value::String(s.clone())),
            };
            (
                vec![json!({"type": "text", "text": r.text()})],
                reason,
                seq,
                r.tokens(),
            )
        }
        Answer::Tool { id, name, input } => {
            let preface = format!("Calling {name}.");
            let out = Tokenizer { strict: false };
            let n = (out.text(&preface) + out.json(input)).min(max);
            let blocks = vec![
                json!({"type": "text", "text": preface}),
                json!({"type": "tool_use", "id": id, "name": name, "input": input}),
            ];
            (blocks, "tool_use", Value::Null, n)
        }
    }
}
