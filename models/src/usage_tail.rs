//! The last event of a model stream, sent only once the stream's
//! settlement is committed ([`crate::relay`]): the upstream's `data: [DONE]`
//! is held back as it passes, and, when the caller asked for usage
//! (`stream_options.include_usage`), its usage event too. When the stream
//! ends (finished, stopped, timed out or broken off) the usage event, with
//! the request's `cost` and `byok` ([`crate::cost`]), is sent last before
//! `[DONE]` (asked for), or `[DONE]` alone. Lines pass as soon as they are
//! whole; only the unfinished last line and the one usage event are kept,
//! so the stream is never buffered.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Map, Value};

use crate::bounds::Shape;
use crate::cost::Cost;
use crate::providers::Tokens;

/// Longest unfinished line kept back; a longer one is passed on as it is.
const MAX_LINE: usize = 1 << 20;

/// What a stream holds back for its last event.
#[derive(Debug, Default)]
pub struct UsageTail {
    /// The caller asked for the usage event (else only `[DONE]` is held).
    wanted: bool,
    /// The unfinished last line.
    partial: Vec<u8>,
    /// The upstream's usage event (its JSON), kept for the end.
    usage: Option<Value>,
    /// The blank line ending a held-back event is dropped with it.
    skip_blank: bool,
    /// A stream in the caller's own API ([`UsageTail::own`]): nothing
    /// added, the provider's last event held back when it has one.
    own: Option<Own>,
}

/// What the tail of a stream in the caller's own API holds back.
#[derive(Debug)]
struct Own {
    /// The API the stream speaks.
    shape: Shape,
    /// The last event, from the line that opens it on.
    held: BytesMut,
}

/// The lines that open a Responses stream's last event (one of them).
const RESPONSES_LAST: [&[u8]; 3] = [
    b"event: response.completed",
    b"event: response.incomplete",
    b"event: response.failed",
];

impl Own {
    /// Whether `line` (trimmed) opens the API's last event (Anthropic's
    /// `event: message_stop`; the Responses API's `event:
    /// response.completed`, `.incomplete` or `.failed`); never, where the
    /// stream's end is its last event (OpenAI's, Gemini's).
    fn last(&self, line: &[u8]) -> bool {
        match self.shape {
            Shape::Anthropic => line == b"event: message_stop",
            Shape::Responses => RESPONSES_LAST.contains(&line),
            Shape::OpenAi | Shape::Gemini => false,
        }
    }
}

impl UsageTail {
    /// The tail of a stream whose request body is `body`: with the usage
    /// event when it asks for usage in its stream.
    pub fn of(body: &Map<String, Value>) -> UsageTail {
        let asked = body
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            == Some(&Value::Bool(true));
        UsageTail {
            wanted: asked,
            ..UsageTail::default()
        }
    }

    /// The tail of a stream whose caller asked for the usage event
    /// (`wanted`) or not, read from its body already ([`UsageTail::of`]).
    pub fn wanting(wanted: bool) -> UsageTail {
        UsageTail {
            wanted,
            ..UsageTail::default()
        }
    }

    /// The tail of a stream passed through in the caller's own API, the
    /// one `shape` names (the provider's events as it sent them): no usage
    /// event or `[DONE]` is added; the API's last event (Anthropic's
    /// `message_stop`, the Responses API's final `response.…`), when it
    /// has one, is held back and sent at the end.
    pub fn own(shape: Shape) -> UsageTail {
        UsageTail {
            own: Some(Own {
                shape,
                held: BytesMut::new(),
            }),
            ..UsageTail::default()
        }
    }

    /// The tail of a Responses API stream passed through (a provider that
    /// serves `/responses`): [`UsageTail::own`] of [`Shape::Responses`],
    /// its last event (`response.completed`, `response.incomplete` or
    /// `response.failed`) held back.
    pub fn own_responses() -> UsageTail {
        UsageTail::own(Shape::Responses)
    }

    /// An error event in the stream's API: OpenAI's (format 2's fields),
    /// Anthropic's `error` event, Gemini's error object, or the Responses
    /// API's `error` event (`code` `rate_limit_exceeded` for a 429, else
    /// `server_error`).
    pub fn error_event(&self, status: u16, message: &str) -> Vec<u8> {
        match self.own.as_ref().map(|o| o.shape) {
            Some(Shape::Responses) => {
                let code = match status {
                    429 => "rate_limit_exceeded",
                    _ => "server_error",
                };
                let v = json!({"type": "error", "code": code, "message": message,
                    "param": null, "sequence_number": 0});
                format!("event: error\ndata: {v}\n\n").into_bytes()
            }
            Some(Shape::Anthropic) => {
                let kind = match status {
                    503 | 529 => "overloaded_error",
                    504 => "timeout_error",
                    _ => "api_error",
                };
                let v = json!({"type": "error", "error": {"type": kind, "message": message}});
                format!("event: error\ndata: {v}\n\n").into_bytes()
            }
            Some(Shape::Gemini) => {
                let v = json!({"error": {"code": status, "message": message,
                    "status": if status == 504 { "DEADLINE_EXCEEDED" } else { "UNAVAILABLE" }}});
                format!("data: {v}\n\n").into_bytes()
            }
            Some(Shape::OpenAi) | None => {
                let v = json!({"error": {"message": message, "code": status}, "success": false, "message": message});
                format!("data: {v}\n\n").into_bytes()
            }
        }
    }

    /// Whether the caller asked for the usage event.
    pub fn usage_wanted(&self) -> bool {
        self.wanted
    }

    /// What of `chunk` goes to the caller now: its whole lines, but for
    /// `data: [DONE]` and, when usage is wanted, an event carrying a
    /// `usage` object (kept).
    pub fn filter(&mut self, chunk: &[u8]) -> Bytes {
        let mut out = BytesMut::with_capacity(chunk.len() + self.partial.len());
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            let (line, after) = rest.split_at(i + 1);
            rest = after;
            if self.partial.is_empty() {
                self.line(line, &mut out);
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(line);
                self.line(&whole, &mut out);
            }
        }
        self.partial.extend_from_slice(rest);
        if self.partial.len() > MAX_LINE {
            out.put_slice(&std::mem::take(&mut self.partial));
        }
        out.freeze()
    }

    /// One whole line (with its `\n`): passed on, or held back.
    fn line(&mut self, line: &[u8], out: &mut BytesMut) {
        if let Some(own) = &mut self.own {
            let last = own.last(line.trim_ascii());
            if last || !own.held.is_empty() {
                own.held.put_slice(line);
            } else {
                out.put_slice(line);
            }
            return;
        }
        let text = line.trim_ascii();
        if text.is_empty() && std::mem::take(&mut self.skip_blank) {
            return;
        }
        self.skip_blank = false;
        if let Some(data) = text.strip_prefix(b"data:").map(<[u8]>::trim_ascii) {
            if data == b"[DONE]" {
                self.skip_blank = true;
                return;
            }
            if self.wanted && memchr::memmem::find(data, b"\"usage\"").is_some() {
                if let Ok(v) = serde_json::from_slice::<Value>(data) {
                    if v.get("usage").is_some_and(Value::is_object) {
                        if let Some(earlier) = self.usage.replace(v) {
                            out.put_slice(format!("data: {earlier}\n\n").as_bytes());
                        }
                        self.skip_blank = true;
                        return;
                    }
                }
            }
        }
        out.put_slice(line);
    }

    /// What is left of an unfinished line (as a whole event), if any.
    pub fn rest(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        if !self.partial.is_empty() {
            out.put_slice(&std::mem::take(&mut self.partial));
            out.put_slice(b"\n\n");
        }
        out.freeze()
    }

    /// The stream's last bytes once it is settled: what is left of an
    /// unfinished line, the usage event when wanted (the upstream's, else
    /// one of `tokens`) with the cost, then `[DONE]`; in the caller's own
    /// API, its held-back last event alone (the Responses API's with the
    /// cost in its `response.usage`, as a whole answer of that API has it).
    pub fn close(&mut self, cost: Option<Cost>, tokens: Tokens) -> Bytes {
        let mut out = BytesMut::from(&self.rest()[..]);
        if let Some(own) = &mut self.own {
            let held = std::mem::take(&mut own.held);
            match (own.shape, cost) {
                (Shape::Responses, Some(c)) => out.put_slice(&costed(&held, &c)),
                _ => out.put_slice(&held),
            }
            return out.freeze();
        }
        if !self.wanted {
            out.put_slice(b"data: [DONE]\n\n");
            return out.freeze();
        }
        let mut v = self.usage.take().unwrap_or_else(|| {
            json!({
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": tokens.to_openai(),
            })
        });
        if let Some(c) = cost {
            c.annotate(&mut v);
        }
        out.put_slice(format!("data: {v}\n\ndata: [DONE]\n\n").as_bytes());
        out.freeze()
    }
}

/// A Responses API last event (`held`) with `cost` added to the usage of
/// its `response`; as it was when its data is not that.
fn costed(held: &[u8], cost: &Cost) -> Vec<u8> {
    let text = String::from_utf8_lossy(held);
    let mut out = String::with_capacity(text.len() + 40);
    for line in text.split_inclusive('\n') {
        let data = line.trim_end().strip_prefix("data:").map(str::trim);
        let parsed = data.and_then(|d| serde_json::from_str::<Value>(d).ok());
        match parsed {
            Some(mut v) if v.get("response").is_some_and(Value::is_object) => {
                cost.annotate(&mut v["response"]);
                out.push_str(&format!("data: {v}\n"));
            }
            _ => out.push_str(line),
        }
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_own_stream_passes_as_sent_and_holds_back_only_its_last_event() {
        let mut t = UsageTail::own(Shape::Anthropic);
        let a = t.filter(
            b"event: message_delta\ndata: {\"usage\":{\"output_tokens\":2}}\n\nevent: message_st",
        );
        assert_eq!(
            &a[..],
            b"event: message_delta\ndata: {\"usage\":{\"output_tokens\":2}}\n\n"
        );
        let b = t.filter(b"op\ndata: {\"type\":\"message_stop\"}\n\n");
        assert!(b.is_empty(), "{b:?}");
        let end = t.close(None, Tokens::default());
        assert_eq!(
            &end[..],
            b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
        );
        let e = String::from_utf8(t.error_event(503, "down")).unwrap();
        assert!(e.starts_with("event: error\ndata: {"), "{e}");
        // Gemini's stream ends with its body: nothing held, nothing added.
        let mut g = UsageTail::own(Shape::Gemini);
        assert_eq!(
            &g.filter(b"data: {\"candidates\":[]}\n\n")[..],
            b"data: {\"candidates\":[]}\n\n"
        );
        assert!(g.close(None, Tokens::default()).is_empty());
    }

    #[test]
    fn a_responses_stream_holds_back_its_final_event() {
        for last in ["completed", "incomplete", "failed"] {
            let mut t = UsageTail::own_responses();
            let delta = "event: response.output_text.delta\ndata: {\"delta\":\"Hi\"}\n\n";
            let a = t.filter(format!("{delta}event: response.{last}\r\nda").as_bytes());
            assert_eq!(&a[..], delta.as_bytes());
            let b = t.filter(b"ta: {\"type\":\"response.x\"}\n\n");
            assert!(b.is_empty(), "{b:?}");
            let end = t.close(None, Tokens::default());
            assert_eq!(
                String::from_utf8(end.to_vec()).unwrap(),
                format!("event: response.{last}\r\ndata: {{\"type\":\"response.x\"}}\n\n")
            );
        }
        // Settled with a cost: the response's usage says it.
        let mut t = UsageTail::own_responses();
        let done =
            "event: response.completed\ndata: {\"response\":{\"usage\":{\"input_tokens\":3}}}\n\n";
        assert!(t.filter(done.as_bytes()).is_empty());
        let c = Cost {
            charged: "0.5".parse().unwrap(),
            byok: false,
        };
        let end = String::from_utf8(t.close(Some(c), Tokens::default()).to_vec()).unwrap();
        assert_eq!(
            end,
            "event: response.completed\ndata: {\"response\":{\"usage\":{\"byok\":false,\"cost\":0.50000000,\"input_tokens\":3}}}\n\n"
        );
        let e = String::from_utf8(UsageTail::own_responses().error_event(429, "slow")).unwrap();
        assert_eq!(
            e,
            "event: error\ndata: {\"code\":\"rate_limit_exceeded\",\"message\":\"slow\",\"param\":null,\"sequence_number\":0,\"type\":\"error\"}\n\n"
        );
    }

    #[test]
    fn holds_back_done_and_the_usage_event_across_chunks() {
        let mut t = UsageTail {
            wanted: true,
            ..UsageTail::default()
        };
        let a = t
            .filter(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\nda");
        assert_eq!(
            &a[..],
            b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n"
        );
        let b = t.filter(b"ta: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n");
        assert!(b.is_empty(), "{b:?}");
        let c = Cost {
            charged: rust_decimal::Decimal::new(5, 1),
            byok: false,
        };
        let end = String::from_utf8(t.close(Some(c), Tokens::default()).to_vec()).unwrap();
        assert_eq!(
            end,
            "data: {\"choices\":[],\"usage\":{\"byok\":false,\"completion_tokens\":2,\"cost\":0.50000000,\"prompt_tokens\":3}}\n\ndata: [DONE]\n\n"
        );
    }

    #[test]
    fn makes_a_usage_event_when_the_upstream_sent_none() {
        let mut t = UsageTail {
            wanted: true,
            ..UsageTail::default()
        };
        assert_eq!(
            &t.filter(b"data: {\"choices\":[]}\n\n")[..],
            b"data: {\"choices\":[]}\n\n"
        );
        let end = String::from_utf8(t.close(None, Tokens::new(4, 1)).to_vec()).unwrap();
        assert!(end.contains("\"total_tokens\":5"), "{end}");
        assert!(end.ends_with("\n\ndata: [DONE]\n\n"), "{end}");
    }

    #[test]
    fn without_usage_wanted_holds_back_only_done() {
        let mut t = UsageTail::of(&serde_json::Map::new());
        let usage = b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n";
        assert_eq!(&t.filter(usage)[..], usage);
        assert!(t.filter(b"data: [DONE]\n\n").is_empty());
        let c = Cost {
            charged: rust_decimal::Decimal::new(5, 1),
            byok: false,
        };
        assert_eq!(
            &t.close(Some(c), Tokens::new(3, 1))[..],
            b"data: [DONE]\n\n"
        );
    }
}
