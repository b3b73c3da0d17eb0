//! A Responses event stream of a provider that serves `/responses` itself,
//! passed to the caller as it was sent (wrapped in
//! [`crate::providers::stream::Tap`]) and read on the side for its usage alone:
//! the `response.usage` of its last event (`response.completed`,
//! `response.incomplete` or `response.failed`).

use serde_json::Value;

use crate::providers::{StreamTranslator, Tokens};
use crate::restream::Rechunk;

/// Most bytes of one unfinished line kept; a longer line is dropped (no
/// usage-bearing event is that large but for its output, which is
/// re-read whole only at the last event).
const MAX_LINE: usize = 16 << 20;

/// Events whose `response` is the whole, final one.
const LAST: [&str; 3] = [
    "response.completed",
    "response.incomplete",
    "response.failed",
];

/// A native Responses stream's usage reader, for [`crate::providers::stream::Tap`].
pub fn usage_reader() -> Box<dyn StreamTranslator> {
    Box::new(UsageReader::default())
}

#[derive(Debug, Default)]
struct UsageReader {
    line: Vec<u8>,
    usage: Option<Tokens>,
}

impl UsageReader {
    fn line_done(&mut self) {
        let line = std::mem::take(&mut self.line);
        let Some(data) = line.trim_ascii().strip_prefix(b"data:") else {
            return;
        };
        // Only the last events are parsed: a delta never carries usage.
        if !LAST
            .iter()
            .any(|t| memchr::memmem::find(data, t.as_bytes()).is_some())
        {
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(data.trim_ascii()) else {
            return;
        };
        let last = v
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| LAST.contains(&t));
        if let Some(t) = v
            .pointer("/response/usage")
            .filter(|_| last)
            .and_then(Tokens::from_responses)
        {
            self.usage = Some(t);
        }
    }
}

impl StreamTranslator for UsageReader {
    fn feed(&mut self, chunk: &[u8], _out: &mut Vec<u8>) {
        let mut rest = chunk;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            if self.line.len() + i <= MAX_LINE {
                self.line.extend_from_slice(&rest[..i]);
            }
            rest = &rest[i + 1..];
            self.line_done();
        }
        if self.line.len() + rest.len() <= MAX_LINE {
            self.line.extend_from_slice(rest);
        }
    }

    fn finish(&mut self, _out: &mut Vec<u8>) {
        if !self.line.is_empty() {
            self.line_done();
        }
    }

    fn usage(&self) -> Option<(Tokens, bool)> {
        self.usage.map(|u| (u, true))
    }
}

/// A native Responses stream passed to the caller as it was sent, its
/// final response kept on the way ([`crate::restream::restream_kept`]):
/// whole lines pass as they come; the last event (from its `event:` line)
/// is held until the upstream ends, when its `response` is the
/// [`Rechunk::outcome`], so that it is kept before the caller sees it. A
/// stream is text: its lines are UTF-8, and only an unfinished line waits.
#[derive(Debug, Default)]
pub struct Kept {
    /// The unfinished last line.
    partial: Vec<u8>,
    /// The last event's lines, held.
    held: String,
    /// The final response, once seen.
    response: Option<Value>,
}

impl Kept {
    pub fn new() -> Kept {
        Kept::default()
    }

    /// One whole line (with its `\n`): passed on, or held from the last
    /// event's `event:` line on.
    fn line(&mut self, line: &[u8], out: &mut String) {
        let text = String::from_utf8_lossy(line);
        let opens_last = LAST
            .iter()
            .any(|t| text.trim_end() == format!("event: {t}"));
        if opens_last || !self.held.is_empty() {
            if let Some(data) = text.trim().strip_prefix("data:") {
                if let Ok(v) = serde_json::from_str::<Value>(data.trim()) {
                    self.response = v.get("response").cloned();
                }
            }
            self.held.push_str(&text);
        } else {
            out.push_str(&text);
        }
    }
}

impl Rechunk for Kept {
    fn feed(&mut self, chunk: &[u8]) -> String {
        let mut out = String::new();
        self.partial.extend_from_slice(chunk);
        while let Some(i) = memchr::memchr(b'\n', &self.partial) {
            let line: Vec<u8> = self.partial.drain(..=i).collect();
            self.line(&line, &mut out);
        }
        out
    }

    fn finish(&mut self) -> String {
        let mut out = String::new();
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, &mut out);
        }
        out.push_str(&std::mem::take(&mut self.held));
        out
    }

    /// The final response, when it completed or was cut short (a failed
    /// one is not kept).
    fn outcome(&mut self) -> Option<Value> {
        let r = self.response.take()?;
        match r.get("status").and_then(Value::as_str) {
            Some("completed" | "incomplete") => Some(r),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::stream::Tap;

    #[test]
    fn the_usage_of_the_last_event_is_read_and_the_bytes_pass() {
        let s = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n\
            event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"response.completed\"}\n\n\
            event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":\
            {\"input_tokens\":9,\"input_tokens_details\":{\"cached_tokens\":4,\"cache_write_tokens\":0},\
            \"output_tokens\":3,\"output_tokens_details\":{\"reasoning_tokens\":1},\"total_tokens\":12}}}\n\n";
        let mut tap = Tap::new(usage_reader());
        let mut out = Vec::new();
        for b in s.as_bytes().chunks(7) {
            tap.feed(b, &mut out);
            if out.len() < s.len() {
                assert!(tap.usage().is_none());
            }
        }
        tap.finish(&mut out);
        assert_eq!(out, s.as_bytes());
        let t = Tokens {
            input: 5,
            output: 3,
            cache_read: 4,
            cache_write: 0,
        };
        assert_eq!(tap.usage(), Some((t, true)));
    }

    #[test]
    fn a_kept_stream_passes_as_sent_and_holds_its_last_event() {
        let stream = "event: response.created\ndata: {\"type\":\"response.created\"}\n\nevent: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hé\"}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\"}}\n\n";
        let mut k = Kept::new();
        let mut seen = String::new();
        for b in stream.as_bytes().chunks(3) {
            seen.push_str(&k.feed(b));
        }
        assert!(!seen.contains("response.completed"), "{seen}");
        seen.push_str(&k.finish());
        assert_eq!(seen, stream);
        assert_eq!(k.outcome().unwrap()["id"], "resp_1");
    }
}
