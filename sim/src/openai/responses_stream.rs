//! A Responses answer as OpenAI streams it: `event: <type>` and `data:
//! <json>` frames, `sequence_number` from 0, no `[DONE]`.
//!
//! `response.created` and `response.in_progress` (the response without
//! output or usage), then per output item `response.output_item.added`,
//! its parts, `response.output_item.done`, and last `response.completed`
//! (or `response.incomplete`) with the whole response. A reasoning item's
//! summary streams as `response.reasoning_summary_part.added`,
//! `response.reasoning_summary_text.delta` (a word each) and `.done`,
//! `response.reasoning_summary_part.done`; a message as
//! `response.content_part.added`, `response.output_text.delta` (a word
//! each, as chat streams a word a chunk), `response.output_text.done`,
//! `response.content_part.done`; a function call as
//! `response.function_call_arguments.delta` (10 characters each, as chat)
//! and `.done`.

use serde_json::{json, Value};

/// The events under construction, numbered as they are pushed.
struct Events {
    /// The frames so far.
    frames: Vec<String>,
}

impl Events {
    /// Adds an event of `kind` with `fields` and the next sequence number.
    fn push(&mut self, kind: &str, mut fields: Value) {
        fields["type"] = json!(kind);
        fields["sequence_number"] = json!(self.frames.len());
        self.frames
            .push(format!("event: {kind}\ndata: {fields}\n\n"));
    }
}

/// The frames of `response` streamed (rules in the module docs).
pub(super) fn frames(response: &Value) -> Vec<String> {
    let mut ev = Events { frames: Vec::new() };
    let mut start = response.clone();
    start["status"] = json!("in_progress");
    start["output"] = json!([]);
    start["usage"] = Value::Null;
    start["incomplete_details"] = Value::Null;
    start["completed_at"] = Value::Null;
    ev.push("response.created", json!({"response": start}));
    ev.push("response.in_progress", json!({"response": start}));
    for (i, item) in response["output"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        item_events(&mut ev, i, item);
    }
    let last = if response["status"] == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    ev.push(last, json!({"response": response}));
    ev.frames
}

/// A text's pieces: its words, each but the first with its leading space.
fn pieces(text: &str) -> Vec<String> {
    text.split(' ')
        .enumerate()
        .map(|(i, w)| {
            if i == 0 {
                w.to_owned()
            } else {
                format!(" {w}")
            }
        })
        .collect()
}

/// The events of output item `index`.
fn item_events(ev: &mut Events, index: usize, item: &Value) {
    let id = item["id"].clone();
    let at = |extra: Value| {
        let mut v = json!({"item_id": id, "output_index": index});
        for (k, x) in extra.as_object().into_iter().flatten() {
            v[k] = x.clone();
        }
        v
    };
    let mut added = item.clone();
    added["status"] = json!("in_progress");
    match item["type"].as_str() {
        Some("message") => added["content"] = json!([]),
        Some("reasoning") => added["summary"] = json!([]),
        Some("function_call") => added["arguments"] = json!(""),
        _ => {}
    }
    ev.push(
        "response.output_item.added",
        json!({"output_index": index, "item": added}),
    );
    match item["type"].as_str() {
        Some("message") => message(ev, item, &at),
        Some("reasoning") => summary(ev, item, &at),
        Some("function_call") => {
            let args = item["arguments"].as_str().unwrap_or("");
            for piece in crate::llm::json_pieces(args) {
                ev.push(
                    "response.function_call_arguments.delta",
                    at(json!({"delta": piece})),
                );
            }
            ev.push(
                "response.function_call_arguments.done",
                at(json!({"arguments": args})),
            );
        }
        _ => {}
    }
    ev.push(
        "response.output_item.done",
        json!({"output_index": index, "item": item}),
    );
}

/// A message's content parts, word by word.
fn message(ev: &mut Events, item: &Value, at: &dyn Fn(Value) -> Value) {
    for (c, part) in item["content"].as_array().into_iter().flatten().enumerate() {
        let text = part["text"].as_str().unwrap_or("");
        let empty = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
        ev.push(
            "response.content_part.added",
            at(json!({"content_index": c, "part": empty})),
        );
        for piece in pieces(text) {
            ev.push(
                "response.output_text.delta",
                at(json!({"content_index": c, "delta": piece, "logprobs": []})),
            );
        }
        ev.push(
            "response.output_text.done",
            at(json!({"content_index": c, "text": text, "logprobs": []})),
        );
        ev.push(
            "response.content_part.done",
            at(json!({"content_index": c, "part": part})),
        );
    }
}

/// A reasoning item's summary parts, word by word.
fn summary(ev: &mut Events, item: &Value, at: &dyn Fn(Value) -> Value) {
    for (s, part) in item["summary"].as_array().into_iter().flatten().enumerate() {
        let text = part["text"].as_str().unwrap_or("");
        ev.push(
            "response.reasoning_summary_part.added",
            at(json!({"summary_index": s, "part": {"type": "summary_text", "text": ""}})),
        );
        for piece in pieces(text) {
            ev.push(
                "response.reasoning_summary_text.delta",
                at(json!({"summary_index": s, "delta": piece})),
            );
        }
        ev.push(
            "response.reasoning_summary_text.done",
            at(json!({"summary_index": s, "text": text})),
        );
        ev.push(
            "response.reasoning_summary_part.done",
            at(json!({"summary_index": s, "part": part})),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_in_order_numbered_from_zero() {
        let r = json!({"id": "resp_1", "status": "completed", "output": [
            {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": "a b c", "annotations": [], "logprobs": []}]}]});
        let f = frames(&r);
        let kinds: Vec<&str> = f
            .iter()
            .map(|e| e.lines().next().unwrap().trim_start_matches("event: "))
            .collect();
        assert_eq!(
            kinds[..4],
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added"
            ]
        );
        assert_eq!(
            kinds
                .iter()
                .filter(|k| **k == "response.output_text.delta")
                .count(),
            3
        );
        assert_eq!(*kinds.last().unwrap(), "response.completed");
        assert_eq!(pieces("a b c").concat(), "a b c");
        assert!(f[9].contains("\"sequence_number\":9"));
    }
}
