//! Chat completion chunks (OpenAI's server-sent events, as the relay
//! passes them) → Anthropic's event sequence, one upstream chunk at a
//! time (nothing is held back but an unfinished line):
//!
//! `message_start` (its usage zero: a chat stream tells its usage only at
//! the end) at the first event; per block `content_block_start`, deltas
//! (`text_delta`; the reasoning of OpenAI-compatible APIs,
//! `reasoning_content` or `reasoning`, as a `thinking` block's
//! `thinking_delta`; a tool call's argument pieces as `input_json_delta`) and
//! `content_block_stop`; at the end (`[DONE]`, or the upstream's end)
//! `message_delta` with the `stop_reason` and the whole usage (Anthropic's
//! four counts, [`super::usage`]; without the provider's usage chunk, a
//! stream stopped midway, only `output_tokens`: the content events
//! counted) and `message_stop`. A stopped stream has `stop_reason: null`.
//! An error event of the relay (or the provider) becomes Anthropic's
//! `error` event, and the stream ends there.

use serde_json::{json, Value};

/// Most bytes of one unfinished line kept.
const MAX_LINE: usize = 1 << 20;

#[derive(Debug, PartialEq)]
enum Block {
    None,
    Text,
    Thinking,
    /// A tool call, by its index in the chunks' `tool_calls`.
    Tool(u64),
}

/// The translation of one stream.
#[derive(Debug)]
pub struct Translator {
    model: String,
    line: Vec<u8>,
    started: bool,
    ended: bool,
    block: Block,
    /// Index of the next content block.
    next: u64,
    stop_reason: Option<&'static str>,
    usage: Option<Value>,
    /// Content events seen (the output when no usage comes).
    events: u64,
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

impl Translator {
    /// A translator answering for `model` (the name the caller gave).
    pub fn new(model: &str) -> Translator {
        Translator {
            model: model.to_owned(),
            line: Vec::new(),
            started: false,
            ended: false,
            block: Block::None,
            next: 0,
            stop_reason: None,
            usage: None,
            events: 0,
        }
    }

    /// The Anthropic events of an upstream chunk.
    pub fn feed(&mut self, chunk: &[u8]) -> String {
        let mut out = String::new();
        for &b in chunk {
            if b == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.line_done(&line, &mut out);
            } else if self.line.len() < MAX_LINE {
                self.line.push(b);
            }
        }
        out
    }

    /// The closing events when the upstream ended (nothing after an end).
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.end(&mut out);
        out
    }

    fn start(&mut self, out: &mut String) {
        if !self.started {
            self.started = true;
            out.push_str(&event(
                "message_start",
                &json!({"type": "message_start", "message": {
                "id": super::message_id(), "type": "message", "role": "assistant",
                "model": self.model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 0, "output_tokens": 0}}}),
            ));
        }
    }

    fn close_block(&mut self, out: &mut String) {
        if self.block != Block::None {
            self.block = Block::None;
            let index = self.next - 1;
            out.push_str(&event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
    }

    fn open_block(&mut self, block: Block, content: Value, out: &mut String) {
        self.close_block(out);
        self.block = block;
        let index = self.next;
        self.next += 1;
        out.push_str(&event(
            "content_block_start",
            &json!({"type": "content_block_start",
            "index": index, "content_block": content}),
        ));
    }

    fn delta(&mut self, delta: Value, out: &mut String) {
        self.events += 1;
        let index = self.next - 1;
        out.push_str(&event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
    }

    fn end(&mut self, out: &mut String) {
        if self.ended {
            return;
        }
        self.start(out);
        self.close_block(out);
        self.ended = true;
        let usage = match &self.usage {
            Some(u) => super::usage(u),
            None => json!({"output_tokens": self.events}),
        };
        out.push_str(&event(
            "message_delta",
            &json!({"type": "message_delta",
            "delta": {"stop_reason": self.stop_reason, "stop_sequence": null}, "usage": usage}),
        ));
        out.push_str(&event("message_stop", &json!({"type": "message_stop"})));
    }

    fn line_done(&mut self, line: &[u8], out: &mut String) {
        if self.ended {
            return;
        }
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let data = data.trim_ascii();
        if data == b"[DONE]" {
            return self.end(out);
        }
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
            return self.error(e, out);
        }
        self.start(out);
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(u.clone());
        }
        let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else {
            return;
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        let reasoning = ["reasoning_content", "reasoning"]
            .iter()
            .find_map(|k| delta.get(*k).and_then(Value::as_str))
            .filter(|t| !t.is_empty());
        if let Some(t) = reasoning {
            if self.block != Block::Thinking {
                let b = json!({"type": "thinking", "thinking": "", "signature": ""});
                self.open_block(Block::Thinking, b, out);
            }
            self.delta(json!({"type": "thinking_delta", "thinking": t}), out);
        }
        if let Some(t) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            if self.block != Block::Text {
                self.open_block(Block::Text, json!({"type": "text", "text": ""}), out);
            }
            self.delta(json!({"type": "text_delta", "text": t}), out);
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.tool_call(call, out);
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.close_block(out);
            self.stop_reason = Some(super::stop_reason(f));
        }
    }

    fn tool_call(&mut self, call: &Value, out: &mut String) {
        let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let f = call.get("function").unwrap_or(&Value::Null);
        if call.get("id").is_some_and(|i| !i.is_null()) || self.block != Block::Tool(index) {
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .map_or_else(super::message_id, str::to_owned);
            let name = f.get("name").and_then(Value::as_str).unwrap_or("");
            let block = json!({"type": "tool_use", "id": id, "name": name, "input": {}});
            self.open_block(Block::Tool(index), block, out);
        }
        if let Some(a) = f
            .get("arguments")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
        {
            self.delta(json!({"type": "input_json_delta", "partial_json": a}), out);
        }
    }

    fn error(&mut self, e: &Value, out: &mut String) {
        self.ended = true;
        let status = e
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| http::StatusCode::from_u16(c as u16).ok())
            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        let message = e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the model provider's stream failed");
        out.push_str(&event(
            "error",
            &gateway_base::errors::anthropic_body(status, message),
        ));
    }
}

impl crate::restream::Rechunk for Translator {
    fn feed(&mut self, chunk: &[u8]) -> String {
        Translator::feed(self, chunk)
    }

    fn finish(&mut self) -> String {
        Translator::finish(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &str) -> Vec<&str> {
        s.lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .collect()
    }

    #[test]
    fn text_then_tool_call_then_usage() {
        let mut t = Translator::new("p/m");
        let mut all = t.feed(b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\nda");
        all += &t.feed(b"ta: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n");
        all += &t.feed(b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n");
        all +=
            &t.feed(b"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n");
        all += &t.feed(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n");
        all += &t.finish();
        assert_eq!(
            names(&all),
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert!(all.contains("\"stop_reason\":\"tool_use\""));
        assert!(all.contains("\"input_tokens\":3"));
    }

    #[test]
    fn reasoning_deltas_open_a_thinking_block() {
        let mut t = Translator::new("p/m");
        let mut all =
            t.feed(b"data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"Hm\"}}]}\n\n");
        all += &t.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"Yes\"},\"finish_reason\":\"stop\"}]}\n\n");
        all += &t.finish();
        assert!(
            all.contains(
                "\"content_block\":{\"signature\":\"\",\"thinking\":\"\",\"type\":\"thinking\"}"
            ),
            "{all}"
        );
        assert!(
            all.contains("\"delta\":{\"thinking\":\"Hm\",\"type\":\"thinking_delta\"},\"index\":0"),
            "{all}"
        );
        assert!(
            all.contains("\"delta\":{\"text\":\"Yes\",\"type\":\"text_delta\"},\"index\":1"),
            "{all}"
        );
    }
}
