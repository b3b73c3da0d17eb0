//! Pieces of OpenAI's chat wire format that both the plain answer
//! ([`super::chat`]) and the tool call ([`super::tools`]) use: a content's
//! text, ids, and server-sent event framing. A leaf, so neither answer has
//! to reach into the other.

use std::sync::Arc;

use serde_json::Value;

use crate::response::Resp;
use crate::shared::Shared;

/// The text of a message `content` or a `prompt`: a string as it is, the
/// `text` of each part of a list joined by spaces.
pub(super) fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// `prefix` and 24 random hex digits (`chatcmpl-…`, `video_…`).
pub(super) fn short_id(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..24]
    )
}

/// The `data:` frames of `events`, then `data: [DONE]`.
pub(super) fn frames(events: &[Value]) -> Vec<String> {
    let mut frames: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    frames.push("data: [DONE]\n\n".to_owned());
    frames
}

/// Server-sent events, one `data:` line per event, then `data: [DONE]`.
pub(super) fn sse(sh: &Arc<Shared>, events: Vec<Value>) -> Resp {
    crate::llm::sse(sh, frames(&events))
}
