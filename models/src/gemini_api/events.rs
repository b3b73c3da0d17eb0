//! Chat completion chunks (OpenAI's server-sent events, as the relay
//! passes them) → Gemini's `alt=sse` events, each `data:` a whole
//! `GenerateContentResponse`, one upstream chunk at a time: a text delta
//! is an event of its text part at once; a tool call's pieces are kept
//! until the choice finishes, then go as one `functionCall` part; the
//! last event carries the `finishReason` and `usageMetadata` (sent when
//! the usage chunk comes, else at `[DONE]` or the upstream's end, without
//! usage: a stream stopped midway). An error event of the relay (or the
//! provider) becomes Google's `{"error": {"code", "message", "status"}}`
//! event, and the stream ends there.

use serde_json::{json, Value};

/// Most bytes of one unfinished line kept.
const MAX_LINE: usize = 1 << 20;

/// The translation of one stream.
#[derive(Debug, Default)]
pub struct Translator {
    model: String,
    id: Value,
    line: Vec<u8>,
    ended: bool,
    /// Tool calls of the first choice, by index: id, name, arguments.
    calls: Vec<(Value, String, String)>,
    finish: Option<&'static str>,
}

fn event(data: &Value) -> String {
    format!("data: {data}\r\n\r\n")
}

impl Translator {
    /// A translator answering for `model` (the name the caller gave).
    pub fn new(model: &str) -> Translator {
        Translator {
            model: model.to_owned(),
            id: Value::Null,
            ..Translator::default()
        }
    }

    /// The Gemini events of an upstream chunk.
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

    /// The last event when the upstream ended (nothing after an end).
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.end(None, &mut out);
        out
    }

    fn response(&self, candidate: Value) -> Value {
        json!({"candidates": [candidate], "modelVersion": self.model, "responseId": self.id})
    }

    fn end(&mut self, usage: Option<&Value>, out: &mut String) {
        if self.ended {
            return;
        }
        self.ended = true;
        let calls: Vec<Value> = self
            .calls
            .iter()
            .map(
                |(id, name, args)| json!({"id": id, "function": {"name": name, "arguments": args}}),
            )
            .collect();
        let mut candidate = json!({"content": {"role": "model", "parts": super::answer::parts("", &calls)},
            "index": 0});
        if let Some(f) = self.finish {
            candidate["finishReason"] = json!(f);
        }
        let mut v = self.response(candidate);
        if let Some(u) = usage {
            v["usageMetadata"] = super::usage(u);
        }
        out.push_str(&event(&v));
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
            return self.end(None, out);
        }
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
            return self.error(e, out);
        }
        if let Some(id) = v.get("id").filter(|i| i.is_string()) {
            self.id = id.clone();
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            if self.finish.is_some() {
                return self.end(Some(u), out);
            }
        }
        let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else {
            return;
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(t) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            let candidate =
                json!({"content": {"role": "model", "parts": [{"text": t}]}, "index": 0});
            out.push_str(&event(&self.response(candidate)));
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.tool_call(call);
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(super::finish_reason(f));
            // A provider that sends its usage with the finish.
            if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                self.end(Some(u), out);
            }
        }
    }

    fn tool_call(&mut self, call: &Value) {
        let index = call.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        while self.calls.len() <= index {
            self.calls.push((Value::Null, String::new(), String::new()));
        }
        let c = &mut self.calls[index];
        if let Some(id) = call.get("id").filter(|i| i.is_string()) {
            c.0 = id.clone();
        }
        let f = call.get("function").unwrap_or(&Value::Null);
        if let Some(n) = f.get("name").and_then(Value::as_str) {
            c.1.push_str(n);
        }
        if let Some(a) = f.get("arguments").and_then(Value::as_str) {
            c.2.push_str(a);
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
        out.push_str(&event(&gateway_base::errors::gemini_body(status, message)));
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

    fn events(s: &str) -> Vec<Value> {
        s.split("\r\n\r\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    #[test]
    fn text_then_tool_call_then_usage() {
        let mut t = Translator::new("p/m");
        let mut all = t.feed(b"data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\nda");
        all += &t.feed(b"ta: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t1\",\"function\":{\"name\":\"f\",\"arguments\":\"\"}}]}}]}\n\n");
        all += &t.feed(b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}}]}\n\n");
        all +=
            &t.feed(b"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n");
        all += &t.feed(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n");
        all += &t.finish();
        let e = events(&all);
        assert_eq!(e.len(), 2, "{all}");
        assert_eq!(
            e[0]["candidates"][0]["content"]["parts"],
            json!([{"text": "Hi"}])
        );
        assert_eq!(e[0]["responseId"], "c1");
        assert_eq!(
            e[1]["candidates"][0],
            json!({"content": {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}, "id": "t1"}}]},
                "finishReason": "STOP", "index": 0})
        );
        assert_eq!(e[1]["usageMetadata"]["totalTokenCount"], 5);
    }

    #[test]
    fn a_stopped_stream_ends_without_usage_and_an_error_ends_it() {
        let mut t = Translator::new("p/m");
        let all =
            t.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n") + &t.finish();
        let e = events(&all);
        assert_eq!(e.len(), 2);
        assert!(e[1].get("usageMetadata").is_none());
        let mut t = Translator::new("p/m");
        let all =
            t.feed(b"data: {\"error\":{\"code\":503,\"message\":\"busy\"}}\n\n") + &t.finish();
        assert_eq!(
            events(&all),
            [json!({"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}})]
        );
    }
}
