//! What the simulated model answers a Messages request ([`Answer`], by
//! [`crate::llm`]'s rules) and how an answer renders as content blocks. A
//! leaf of its own, because both the whole answer (in [`super`]) and the
//! stream ([`super::stream`]) render it.

use serde_json::{json, Map, Value};

use crate::llm::{self, Finish, Reply};
use crate::openai::tokens::Tokenizer;

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

/// What the simulated model answers.
pub enum Answer {
    /// Text only.
    Text(Reply),
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

/// What the model answers this request: a tool call when a tool is picked
/// (and the last user message holds no tool result), else text.
pub fn of(f: &Map<String, Value>) -> Answer {
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
        return Answer::Tool {
            id: llm::new_id("toolu_"),
            input: llm::sample_args(&schema),
            name,
        };
    }
    let stops: Vec<String> = f
        .get("stop_sequences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect();
    let max = f.get("max_tokens").and_then(Value::as_u64);
    Answer::Text(llm::text_reply(
        &user_text,
        has_result.then_some(result.as_str()),
        max,
        &stops,
    ))
}

/// (content blocks, stop_reason, stop_sequence, output tokens) of an answer.
pub fn rendered(a: &Answer, max: u64) -> (Vec<Value>, &'static str, Value, u64) {
    match a {
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
