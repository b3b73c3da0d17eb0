//! The event sequence of a streamed Messages answer (order in the
//! [module docs](super)).

use http::StatusCode;
use serde_json::{json, Value};

use super::answer::{rendered, Answer, Message};
use super::cache::Usage;
use super::errors::error_body;

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The frames of a streamed answer; with `stream_error` (status, after) an
/// `error` event replaces everything after the `after`-th delta.
pub fn events(
    id: &str,
    model: &str,
    m: &Message,
    max: u64,
    usage: Usage,
    stream_error: Option<(StatusCode, usize)>,
) -> Vec<String> {
    let r = rendered(m, max);
    let (blocks, reason, seq, out) = (r.blocks, r.reason, r.sequence, r.output);
    // The index of the answer's first text block (after a thinking block).
    let first_text = usize::from(m.thinking.is_some());
    let mut frames = vec![event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": usage.input, "output_tokens": 1,
                "cache_creation_input_tokens": usage.creation,
                "cache_read_input_tokens": usage.read}}}),
    )];
    let mut deltas = 0;
    for (index, block) in blocks.iter().enumerate() {
        let (start, pieces): (Value, Vec<Value>) = match block["type"].as_str() {
            Some("thinking") => {
                let text = block["thinking"].as_str().unwrap_or_default();
                let mut deltas: Vec<Value> = text
                    .split_inclusive(' ')
                    .map(|w| json!({"type": "thinking_delta", "thinking": w}))
                    .collect();
                deltas.push(json!({"type": "signature_delta", "signature": block["signature"]}));
                (
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    deltas,
                )
            }
            Some("tool_use") => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                crate::llm::json_pieces(&block["input"].to_string())
                    .into_iter()
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect(),
            ),
            _ => {
                let text = block["text"].as_str().unwrap_or_default();
                let words = match &m.answer {
                    Answer::Text(r) if index == first_text => r.pieces.clone(),
                    Answer::Json(j) => crate::llm::json_pieces(j),
                    _ => text.split_inclusive(' ').map(str::to_owned).collect(),
                };
                (
                    json!({"type": "text", "text": ""}),
                    words
                        .into_iter()
                        .map(|w| json!({"type": "text_delta", "text": w}))
                        .collect(),
                )
            }
        };
        frames.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        if index == 0 {
            frames.push(event("ping", &json!({"type": "ping"})));
        }
        for delta in pieces {
            if let Some((status, after)) = stream_error {
                if deltas == after {
                    let msg = status.canonical_reason().unwrap_or("Overloaded");
                    frames.push(event("error", &error_body(status, msg)));
                    return frames;
                }
            }
            deltas += 1;
            frames.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        frames.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    if let Some((status, _)) = stream_error {
        // Fewer deltas than `after`: the error comes before message_delta.
        let msg = status.canonical_reason().unwrap_or("Overloaded");
        frames.push(event("error", &error_body(status, msg)));
        return frames;
    }
    frames.push(event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": seq},
            "usage": {"input_tokens": usage.input, "output_tokens": out,
                "cache_creation_input_tokens": usage.creation,
                "cache_read_input_tokens": usage.read}}),
    ));
    frames.push(event("message_stop", &json!({"type": "message_stop"})));
    frames
}
