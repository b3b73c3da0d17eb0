//! The output of a simulated Responses answer: the chat model's reply
//! ([`super::chat`]'s words, [`super::tools`]' call, [`crate::schema`]'s
//! instance) as output items, with the usage and the status.
//!
//! * A **reasoning** model (its name `o` and a digit, or holding
//!   `reasoning`, or any request with `reasoning.effort` other than
//!   `none`) first writes a `reasoning` item worth [`reasoning_tokens`]
//!   output tokens (`output_tokens_details.reasoning_tokens`), its
//!   `summary` one `summary_text` when `reasoning.summary` is set.
//! * Then a **function call** when chat would call a tool (`call_…`,
//!   `fc_…`; a token per 4 bytes of its arguments), else a **message**: the
//!   reply's [`NATURAL_WORDS`] words, a token each, or with a `json_schema`
//!   text format the schema's smallest instance (a token per 4 bytes).
//! * `max_output_tokens` is spent by the reasoning first, then the reply:
//!   what does not fit is cut (words, or characters 4 a token), the item
//!   and the response `incomplete` (`incomplete_details.reason:
//!   "max_output_tokens"`); with nothing left after the reasoning, no
//!   message is written.

use serde_json::{json, Map, Value};

use super::chat::reply_words;
use super::tokens::Tokenizer;
use super::tools;
use super::wire::{short_id, text_of};
use crate::llm::NATURAL_WORDS;

/// What the model writes for one request.
pub(super) struct Output {
    /// The output items.
    pub items: Vec<Value>,
    /// The `usage` object.
    pub usage: Value,
    /// True when `max_output_tokens` cut it.
    pub cut: bool,
}

/// How the model should answer, read from the request.
pub(super) struct Ask<'a> {
    /// The model's name.
    pub model: &'a str,
    /// The request's `reasoning` object, if any.
    pub reasoning: Option<&'a Value>,
    /// `max_output_tokens`.
    pub max: Option<u64>,
    /// The chat request it amounts to (instructions, history, input, tools).
    pub chat: &'a Map<String, Value>,
    /// Count tokens as the strict tokenizer does.
    pub strict: bool,
}

/// Reasoning tokens by `reasoning.effort` (`medium` when not given).
pub fn reasoning_tokens(effort: &str) -> u64 {
    match effort {
        "minimal" => 8,
        "low" => 16,
        "high" => 64,
        "xhigh" => 128,
        _ => 32,
    }
}

/// The effort a model reasons with, or `None` when it does not reason.
pub(super) fn effort(model: &str, reasoning: Option<&Value>) -> Option<String> {
    let asked = reasoning
        .and_then(|r| r.get("effort"))
        .and_then(Value::as_str);
    if asked == Some("none") {
        return None;
    }
    let mut chars = model.chars();
    let by_name = (chars.next() == Some('o') && chars.next().is_some_and(|c| c.is_ascii_digit()))
        || model.contains("reasoning");
    (by_name || asked.is_some()).then(|| asked.unwrap_or("medium").to_owned())
}

/// The output of `ask` (rules in the module docs).
pub(super) fn generate(ask: &Ask) -> Output {
    let tok = Tokenizer { strict: ask.strict };
    let input_tokens = tok.chat(&Value::Object(ask.chat.clone()));
    let prompt = ask.chat["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| text_of(m.get("content").unwrap_or(&Value::Null)))
        .collect::<Vec<_>>()
        .join("\n");
    let mut items = Vec::new();
    let mut budget = ask.max.unwrap_or(u64::MAX);
    let mut reasoning = 0;
    let mut cut = false;
    if let Some(effort) = effort(ask.model, ask.reasoning) {
        reasoning = reasoning_tokens(&effort).min(budget);
        cut = reasoning < reasoning_tokens(&effort);
        budget -= reasoning;
        items.push(reasoning_item(ask.reasoning, &prompt, cut));
    }
    let mut reply = 0;
    if budget > 0 {
        let (item, tokens, short) = reply_item(ask, &prompt, budget);
        items.push(item);
        reply = tokens;
        cut |= short;
    }
    let output = reasoning + reply;
    Output {
        items,
        usage: json!({
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input_tokens + output,
        }),
        cut,
    }
}

/// The `reasoning` item: a summary when `reasoning.summary` asks for one.
fn reasoning_item(reasoning: Option<&Value>, prompt: &str, cut: bool) -> Value {
    let wants_summary = reasoning
        .and_then(|r| r.get("summary"))
        .is_some_and(|s| !s.is_null());
    let summary = if wants_summary && !cut {
        let words: Vec<&str> = prompt.split_whitespace().take(8).collect();
        let text = format!("Considering how to reply to: {}", words.join(" "));
        json!([{"type": "summary_text", "text": text}])
    } else {
        json!([])
    };
    let status = if cut { "incomplete" } else { "completed" };
    json!({"id": short_id("rs_"), "type": "reasoning", "summary": summary, "status": status})
}

/// The reply item within `budget` tokens: (item, its tokens, cut).
fn reply_item(ask: &Ask, prompt: &str, budget: u64) -> (Value, u64, bool) {
    if let Some(call) = tools::call(ask.chat) {
        let full = (call.arguments.len() as u64).div_ceil(4).max(1);
        let (arguments, tokens) = if full > budget {
            let cut: String = call.arguments.chars().take(budget as usize * 4).collect();
            (cut, budget)
        } else {
            (call.arguments, full)
        };
        let status = if tokens < full {
            "incomplete"
        } else {
            "completed"
        };
        let item = json!({"id": short_id("fc_"), "type": "function_call", "status": status,
            "arguments": arguments, "call_id": call.id, "name": call.name});
        return (item, tokens, tokens < full);
    }
    let schema = ask
        .chat
        .get("response_format")
        .filter(|r| r.get("type").and_then(Value::as_str) == Some("json_schema"))
        .and_then(|r| r.pointer("/json_schema/schema"));
    let (text, tokens, short) = match schema {
        Some(s) => {
            let text = crate::schema::instance(s).to_string();
            let full = (text.len() as u64).div_ceil(4).max(1);
            let tokens = full.min(budget);
            let text: String = text.chars().take(tokens as usize * 4).collect();
            (text, tokens, tokens < full)
        }
        None => {
            let n = (NATURAL_WORDS as u64).min(budget);
            let words = reply_words(prompt, n as usize);
            (words.join(" "), n, n < NATURAL_WORDS as u64)
        }
    };
    let status = if short { "incomplete" } else { "completed" };
    let item = json!({"id": short_id("msg_"), "type": "message", "status": status,
        "role": "assistant", "content": [{"type": "output_text", "text": text,
            "annotations": [], "logprobs": []}]});
    (item, tokens, short)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_models_by_name_or_effort() {
        assert_eq!(effort("o3-mini", None).as_deref(), Some("medium"));
        assert_eq!(effort("sim-reasoning", None).as_deref(), Some("medium"));
        assert_eq!(effort("omni", None), None);
        let low = json!({"effort": "low"});
        assert_eq!(effort("sim-gpt", Some(&low)).as_deref(), Some("low"));
        assert_eq!(effort("o3", Some(&json!({"effort": "none"}))), None);
    }

    #[test]
    fn the_limit_cuts_reasoning_then_reply() {
        let chat = json!({"messages": [{"role": "user", "content": "hello there"}]});
        let chat = chat.as_object().unwrap();
        let ask = |max| Ask {
            model: "o3",
            reasoning: None,
            max,
            chat,
            strict: false,
        };
        let o = generate(&ask(None));
        assert_eq!(
            (o.usage["output_tokens"].clone(), o.cut),
            (json!(32 + 12), false)
        );
        let o = generate(&ask(Some(35)));
        assert_eq!(o.items[1]["content"][0]["text"], "This is a");
        assert!(o.cut);
        let o = generate(&ask(Some(20)));
        assert_eq!(
            (o.items.len(), o.usage["output_tokens"].clone()),
            (1, json!(20))
        );
    }
}
