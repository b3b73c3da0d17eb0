//! Anthropic's input token count and prompt cache.
//!
//! The prompt is a sequence of units in Anthropic's cache order: each tool
//! (its JSON text), each `system` block (a string `system` is one), then each
//! content block of each message (a string `content` is one). A unit counts
//! with [`Tokenizer`]: `text` blocks their text, `image` blocks
//! [`Tokenizer::image`], `tool_use` blocks id + name + input JSON,
//! `tool_result` blocks tool_use_id + content (text or blocks), any other
//! block its JSON text; with `strict_tokens` a message's first unit also
//! counts 4 + its role, and the request 3 more.
//!
//! **Cache** (deterministic, no minimum length, no expiry until
//! `/__sim/reset`): a unit marked with `cache_control` is a breakpoint (a
//! `cache_control` at the request's top level marks its last unit, as
//! Anthropic's automatic caching does). Each
//! prefix is known by a hash of the model and its units (`cache_control`
//! marks left out). At every unit up to the last breakpoint, a prefix written
//! before is a hit: the longest hit is `cache_read_input_tokens`; the rest up
//! to the last breakpoint is `cache_creation_input_tokens`; the prefixes at
//! the breakpoints are then written. `input_tokens` is what is left: the
//! cached and written tokens are not counted again, as Anthropic reports.

use serde_json::{json, Value};

use crate::openai::tokens::{Tokenizer, ANTHROPIC_PDF_PAGE};
use crate::shared::Shared;

/// Input token figures of one request.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// Tokens neither read from nor written to the cache.
    pub input: u64,
    /// Tokens written to the cache.
    pub creation: u64,
    /// Tokens read from the cache.
    pub read: u64,
}

struct Unit {
    tokens: u64,
    hash: u64,
    breakpoint: bool,
}

fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

fn unmarked(v: &Value) -> String {
    match v {
        Value::Object(m) if m.contains_key("cache_control") => {
            let mut m = m.clone();
            m.remove("cache_control");
            Value::Object(m).to_string()
        }
        other => other.to_string(),
    }
}

fn marked(v: &Value) -> bool {
    v.get("cache_control").is_some_and(|c| !c.is_null())
}

/// Tokens of one content block.
pub fn block_tokens(tok: Tokenizer, b: &Value) -> u64 {
    let s = |k: &str| b.get(k).and_then(Value::as_str).map_or(0, |t| tok.text(t));
    match b.get("type").and_then(Value::as_str) {
        _ if b.is_string() => tok.json(b),
        Some("text") => s("text"),
        Some("image") => tok.image(),
        Some("document") if b.pointer("/source/media_type") == Some(&json!("application/pdf")) => b
            .pointer("/source/data")
            .and_then(Value::as_str)
            .and_then(|data| tok.pdf(data, ANTHROPIC_PDF_PAGE))
            .unwrap_or_else(|| tok.json(b)),
        Some("tool_use") => s("id") + s("name") + b.get("input").map_or(0, |i| tok.json(i)),
        Some("tool_result") => {
            s("tool_use_id")
                + match b.get("content") {
                    Some(Value::Array(parts)) => parts.iter().map(|p| block_tokens(tok, p)).sum(),
                    Some(Value::String(t)) => tok.text(t),
                    _ => 0,
                }
        }
        _ => tok.json(b),
    }
}

fn units(tok: Tokenizer, body: &Value) -> Vec<Unit> {
    let model = body.get("model").and_then(Value::as_str).unwrap_or("");
    let mut h = fnv(0xcbf2_9ce4_8422_2325, model.as_bytes());
    let mut out = Vec::new();
    let mut push = |v: &Value, tokens: u64| {
        h = fnv(h, unmarked(v).as_bytes());
        out.push(Unit {
            tokens,
            hash: h,
            breakpoint: marked(v),
        });
    };
    for t in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        push(t, tok.json(&Value::String(unmarked(t))));
    }
    match body.get("system") {
        Some(Value::Array(blocks)) => blocks.iter().for_each(|b| push(b, block_tokens(tok, b))),
        Some(s @ Value::String(t)) => push(s, tok.text(t)),
        _ => {}
    }
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        let overhead = if tok.strict { 4 + tok.text(role) } else { 0 };
        match m.get("content") {
            Some(Value::Array(blocks)) if !blocks.is_empty() => {
                for (i, b) in blocks.iter().enumerate() {
                    push(b, block_tokens(tok, b) + if i == 0 { overhead } else { 0 });
                }
            }
            Some(Value::String(t)) => push(&Value::String(t.clone()), tok.text(t) + overhead),
            _ => push(&Value::Null, overhead),
        }
    }
    if marked(body) {
        if let Some(last) = out.last_mut() {
            last.breakpoint = true;
        }
    }
    out
}

/// Input tokens of a request body, without touching the cache
/// (`count_tokens`).
pub fn count(tok: Tokenizer, body: &Value) -> u64 {
    units(tok, body).iter().map(|u| u.tokens).sum::<u64>() + if tok.strict { 3 } else { 0 }
}

/// Input token figures of a request body, reading and writing the cache.
pub fn usage(sh: &Shared, tok: Tokenizer, body: &Value) -> Usage {
    let units = units(tok, body);
    let total = units.iter().map(|u| u.tokens).sum::<u64>() + if tok.strict { 3 } else { 0 };
    let Some(last) = units.iter().rposition(|u| u.breakpoint) else {
        return Usage {
            input: total,
            ..Usage::default()
        };
    };
    let mut store = sh.store.lock().unwrap();
    let cache = &mut store.prompt_cache;
    let upto = |i: usize| units[..=i].iter().map(|u| u.tokens).sum::<u64>();
    let read = (0..=last)
        .rev()
        .find(|i| cache.contains(&units[*i].hash))
        .map_or(0, upto);
    let cached = upto(last);
    for u in units.iter().filter(|u| u.breakpoint) {
        cache.insert(u.hash);
    }
    Usage {
        input: total - cached,
        creation: cached - read,
        read,
    }
}
