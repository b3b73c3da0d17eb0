//! OpenAI's Realtime API as the gateway reads it: what a conversation may
//! make the provider read (the hold's bound of a response, [`Conversation`])
//! and what a `response.done` reports ([`RealtimeUsage`]).
//!
//! **The bound of a response** is the conversation's input so far plus its
//! output cap:
//!
//! * text: one token per byte of the JSON of every item the caller created
//!   (audio data left out), of the instructions and tools in effect, and
//!   every output token of the earlier responses (their text and audio
//!   join the conversation; an output audio token is 50 ms, an input one
//!   100 ms, so the output count bounds what it becomes as input);
//! * audio: ⌈10 × seconds⌉ of every piece of audio the caller sent,
//!   measured from its bytes (PCM16 at the session's rate, 2 bytes a
//!   sample; G.711 8,000 bytes a second), OpenAI's "one token per 100 ms";
//!   the input buffer not yet committed counts too, as it may be;
//! * output: the response's `max_output_tokens`, made finite by the
//!   gateway (at most [`MAX_OUTPUT`]) and sent upstream with it, so a
//!   report above it is implausible and billed at it.

use serde_json::{Map, Value};

use crate::providers::Tokens;

/// The largest output cap of a response (OpenAI's limit), and the cap of
/// one that names none (`"inf"`).
pub const MAX_OUTPUT: u64 = 4096;

/// Audio input tokens a second (one per 100 ms).
const AUDIO_TOKENS_PER_SEC: u64 = 10;

/// What a response's `usage` reports, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RealtimeUsage {
    pub text_in: u64,
    pub audio_in: u64,
    /// Cached input tokens (inside `text_in` and `audio_in`).
    pub cached_text: u64,
    pub cached_audio: u64,
    pub text_out: u64,
    pub audio_out: u64,
}

fn count(v: &Value, path: &str) -> u64 {
    v.pointer(path).and_then(Value::as_u64).unwrap_or(0)
}

impl RealtimeUsage {
    /// Read from a `response.done`'s `response.usage`; `None` when absent.
    pub fn of(usage: &Value) -> Option<RealtimeUsage> {
        if !usage.is_object() {
            return None;
        }
        let text_in = count(usage, "/input_token_details/text_tokens");
        let audio_in = count(usage, "/input_token_details/audio_tokens");
        let mut cached_text = count(
            usage,
            "/input_token_details/cached_tokens_details/text_tokens",
        );
        let mut cached_audio = count(
            usage,
            "/input_token_details/cached_tokens_details/audio_tokens",
        );
        let cached = count(usage, "/input_token_details/cached_tokens");
        if cached_text + cached_audio == 0 && cached > 0 {
            cached_text = cached;
        }
        cached_text = cached_text.min(text_in);
        cached_audio = cached_audio.min(audio_in);
        Some(RealtimeUsage {
            text_in,
            audio_in,
            cached_text,
            cached_audio,
            text_out: count(usage, "/output_token_details/text_tokens"),
            audio_out: count(usage, "/output_token_details/audio_tokens"),
        })
    }

    /// The report within `bound` (each kind at most its bound's; output
    /// text first, then audio, within the cap); `true` when it was beyond.
    pub fn at_most(self, bound: &ResponseBound) -> (RealtimeUsage, bool) {
        let text_in = self.text_in.min(bound.text_in);
        let audio_in = self.audio_in.min(bound.audio_in);
        let text_out = self.text_out.min(bound.output);
        let audio_out = self.audio_out.min(bound.output - text_out);
        let u = RealtimeUsage {
            text_in,
            audio_in,
            cached_text: self.cached_text.min(text_in),
            cached_audio: self.cached_audio.min(audio_in),
            text_out,
            audio_out,
        };
        (u, u != self)
    }

    /// The four counts of a usage record: cached input read from the
    /// cache, the rest input; output text and audio together.
    pub fn tokens(&self) -> Tokens {
        let cached = self.cached_text + self.cached_audio;
        Tokens {
            input: self.text_in + self.audio_in - cached,
            output: self.text_out + self.audio_out,
            cache_read: cached,
            cache_write: 0,
        }
    }
}

/// The most one response can use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResponseBound {
    pub text_in: u64,
    pub audio_in: u64,
    pub output: u64,
}

/// What a session's conversation holds so far, for the bound of its next
/// response (see the module's rule).
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    /// Bytes of the instructions and tools in effect (the session's).
    session_bytes: u64,
    /// The session's output cap (`None`: `"inf"`).
    session_cap: Option<u64>,
    /// Bytes of a sample of input audio, a second (0: PCM16 at 24 kHz).
    audio_rate: u64,
    items_bytes: u64,
    audio_tokens: u64,
    /// Input audio appended and not yet committed, in bytes.
    buffer: u64,
    outputs: u64,
}

impl Conversation {
    /// Whether the client events of `kind` change the bound (the others
    /// need not be read).
    pub fn follows(kind: &str) -> bool {
        matches!(
            kind,
            "session.update"
                | "input_audio_buffer.append"
                | "input_audio_buffer.clear"
                | "conversation.item.create"
        )
    }

    /// A client event seen on its way upstream (`session.update`,
    /// `input_audio_buffer.*`, `conversation.item.create`).
    pub fn client_event(&mut self, kind: &str, event: &Value) {
        match kind {
            "session.update" => {
                if let Some(s) = event.get("session") {
                    self.session(s);
                }
            }
            "input_audio_buffer.append" => {
                self.buffer += event.get("audio").map_or(0, decoded_len);
            }
            "input_audio_buffer.clear" => self.buffer = 0,
            "conversation.item.create" => {
                if let Some(item) = event.get("item") {
                    let (bytes, audio) = item_size(item);
                    self.items_bytes += bytes;
                    self.audio_tokens += self.audio_tokens_of(audio);
                }
            }
            _ => {}
        }
    }

    /// A server event: the session as the provider has it, the buffer
    /// committed or cleared.
    pub fn server_event(&mut self, kind: &str, event: &Value) {
        match kind {
            "session.created" | "session.updated" => {
                if let Some(s) = event.get("session") {
                    self.session(s);
                }
            }
            "input_audio_buffer.committed" => {
                self.audio_tokens += self.audio_tokens_of(self.buffer);
                self.buffer = 0;
            }
            "input_audio_buffer.cleared" => self.buffer = 0,
            _ => {}
        }
    }

    fn session(&mut self, s: &Value) {
        let size = |k: &str| s.get(k).map_or(0, |v| v.to_string().len() as u64);
        if s.get("instructions").is_some() || s.get("tools").is_some() {
            self.session_bytes = size("instructions") + size("tools");
        }
        if let Some(cap) = s.get("max_output_tokens") {
            self.session_cap = cap.as_u64();
        }
        if let Some(f) = s.pointer("/audio/input/format") {
            self.audio_rate = match f.get("type").and_then(Value::as_str) {
                Some("audio/pcmu" | "audio/pcma") => 8000,
                _ => 2 * f.get("rate").and_then(Value::as_u64).unwrap_or(24_000),
            };
        }
    }

    fn audio_tokens_of(&self, bytes: u64) -> u64 {
        if bytes == 0 {
            return 0;
        }
        let rate = if self.audio_rate == 0 {
            48_000
        } else {
            self.audio_rate
        };
        (bytes * AUDIO_TOKENS_PER_SEC).div_ceil(rate)
    }

    /// The bound of a response created by `event` (`response.create`),
    /// whose `response.max_output_tokens` is set to the cap it is held for
    /// (the caller's, the session's, at most [`MAX_OUTPUT`]).
    pub fn response(&self, event: &mut Value) -> ResponseBound {
        let asked = event
            .pointer("/response/max_output_tokens")
            .map(|v| v.as_u64())
            .unwrap_or(self.session_cap);
        let output = asked.unwrap_or(MAX_OUTPUT).clamp(1, MAX_OUTPUT);
        let own = event
            .get("response")
            .map_or(0, |r| r.to_string().len() as u64);
        if let Some(obj) = event.as_object_mut() {
            let r = obj
                .entry("response")
                .or_insert_with(|| Value::Object(Map::new()));
            // `"response": null` is no response object: one with the cap.
            if r.is_null() {
                *r = Value::Object(Map::new());
            }
            if let Some(r) = r.as_object_mut() {
                r.insert("max_output_tokens".into(), output.into());
            }
        }
        ResponseBound {
            text_in: self.session_bytes + self.items_bytes + self.outputs + own,
            audio_in: self.audio_tokens + self.audio_tokens_of(self.buffer),
            output,
        }
    }

    /// A response's output joins the conversation.
    pub fn answered(&mut self, used: &RealtimeUsage) {
        self.outputs += used.text_out + used.audio_out;
    }
}

/// Bytes of base64 `v` decoded (0 when it is not a string).
fn decoded_len(v: &Value) -> u64 {
    v.as_str().map_or(0, |s| {
        let s = s.trim_end_matches('=');
        (s.len() as u64 * 3) / 4
    })
}

/// An item's JSON bytes without its audio data, and its audio's bytes.
fn item_size(item: &Value) -> (u64, u64) {
    let mut audio = 0;
    let mut item = item.clone();
    if let Some(parts) = item.get_mut("content").and_then(Value::as_array_mut) {
        for p in parts {
            if let Some(a) = p.get_mut("audio") {
                audio += decoded_len(a);
                *a = Value::Null;
            }
        }
    }
    (item.to_string().len() as u64, audio)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use serde_json::json;

    #[test]
    fn bound_counts_the_conversation_and_caps_the_output() {
        let mut c = Conversation::default();
        c.server_event(
            "session.created",
            &json!({"session": {"instructions": "", "max_output_tokens": "inf",
                "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}}}}}),
        );
        let item = json!({"type": "conversation.item.create", "item": {"type": "message",
            "role": "user", "content": [{"type": "input_text", "text": "hello there"}]}});
        c.client_event("conversation.item.create", &item);
        // one second of PCM16 at 24 kHz
        let audio = base64::engine::general_purpose::STANDARD.encode(vec![0u8; 48_000]);
        c.client_event("input_audio_buffer.append", &json!({"audio": audio}));
        let mut create = json!({"type": "response.create"});
        let b = c.response(&mut create);
        assert_eq!(create["response"]["max_output_tokens"], 4096);
        assert_eq!(b.audio_in, 10);
        assert!(b.text_in >= "hello there".len() as u64);
        let mut capped = json!({"type": "response.create", "response": {"max_output_tokens": 20}});
        assert_eq!(c.response(&mut capped).output, 20);
    }

    #[test]
    fn usage_reads_and_bounds() {
        let u = RealtimeUsage::of(&json!({"input_token_details": {"text_tokens": 10,
            "audio_tokens": 5, "cached_tokens": 4, "cached_tokens_details": {"text_tokens": 4,
            "audio_tokens": 0}}, "output_token_details": {"text_tokens": 3, "audio_tokens": 7}}))
        .unwrap();
        assert_eq!(
            u.tokens(),
            Tokens {
                input: 11,
                output: 10,
                cache_read: 4,
                cache_write: 0
            }
        );
        let b = ResponseBound {
            text_in: 8,
            audio_in: 5,
            output: 6,
        };
        let (a, beyond) = u.at_most(&b);
        assert!(beyond);
        assert_eq!((a.text_in, a.text_out, a.audio_out), (8, 3, 3));
    }
}
