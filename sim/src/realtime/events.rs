//! The Realtime API's objects as the server sends them: ids, the `error`
//! event, the default session, conversation items, and the `usage` of a
//! response with the token rules of [`super`] applied (a leaf: it holds
//! no state).

use serde_json::{json, Value};

/// Tokens of input audio per second (the real API counts about 10).
pub const INPUT_AUDIO_TOKENS_PER_SEC: u64 = 10;
/// Tokens of output audio per second (the real API counts about 20).
pub const OUTPUT_AUDIO_TOKENS_PER_SEC: u64 = 20;
/// Output audio: PCM16 mono at 24 kHz, so 48000 bytes a second.
pub const OUTPUT_RATE: u32 = 24_000;
/// Bytes of a second of output audio.
pub const OUTPUT_BYTES_PER_SEC: u64 = 48_000;

/// `prefix` and 20 random hex digits (`event_…`, `item_…`, `resp_…`).
pub fn id(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..20]
    )
}

/// Text tokens: one per whitespace-separated word.
pub fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// Audio tokens of `bytes` of audio at `bytes_per_sec`, `per_sec` a
/// second, rounded up: `⌈bytes × per_sec / bytes_per_sec⌉`.
pub fn audio_tokens(bytes: u64, bytes_per_sec: u64, per_sec: u64) -> u64 {
    (bytes * per_sec).div_ceil(bytes_per_sec.max(1))
}

/// An event of `kind` with a fresh `event_id` and `fields`.
pub fn event(kind: &str, fields: Value) -> Value {
    let mut e = json!({"type": kind, "event_id": id("event_")});
    if let (Some(e), Value::Object(f)) = (e.as_object_mut(), fields) {
        e.extend(f);
    }
    e
}

/// The `error` event: an `invalid_request_error` with `code` and
/// `message`, naming the client's `event_id` when it gave one.
pub fn error(code: &str, message: &str, client_event_id: Option<&str>) -> Value {
    event(
        "error",
        json!({"error": {
            "type": "invalid_request_error",
            "code": code,
            "message": message,
            "param": null,
            "event_id": client_event_id,
        }}),
    )
}

/// A fresh session for `model`.
pub fn session(model: &str) -> Value {
    json!({
        "type": "realtime",
        "object": "realtime.session",
        "id": id("sess_"),
        "model": model,
        "output_modalities": ["audio"],
        "instructions": "",
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "audio": {
            "input": {"format": {"type": "audio/pcm", "rate": 24000}, "turn_detection": null},
            "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "alloy", "speed": 1.0},
        },
    })
}

/// `target` with `patch` merged in: objects field by field (recursively),
/// anything else replaced.
pub fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                match t.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// A conversation item (`realtime.item`) of a message.
pub fn message(id: &str, role: &str, status: &str, content: Value) -> Value {
    json!({
        "id": id,
        "object": "realtime.item",
        "type": "message",
        "status": status,
        "role": role,
        "content": content,
    })
}

/// What a response's input counted, before the usage factor.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Input {
    /// Text tokens of the conversation (instructions included).
    pub text: u64,
    /// Audio tokens of the conversation's input audio.
    pub audio: u64,
    /// Of `text`, those the previous response's input already held.
    pub cached_text: u64,
    /// Of `audio`, those the previous response's input already held.
    pub cached_audio: u64,
}

impl Input {
    /// This input with its cached part from `previous` (the input of the
    /// session's previous response): each kind the smaller of the two.
    pub fn cached_after(mut self, previous: Option<Input>) -> Input {
        if let Some(p) = previous {
            self.cached_text = p.text.min(self.text);
            self.cached_audio = p.audio.min(self.audio);
        }
        self
    }
}

/// The `usage` object: every figure × `factor` (rounded), the sums
/// (`input_tokens`, `output_tokens`, `total_tokens`, `cached_tokens`)
/// taken of the scaled figures.
pub fn usage(input: Input, out_text: u64, out_audio: u64, factor: f64) -> Value {
    let f = |n: u64| {
        let x = (n as f64 * factor).round();
        if x.is_finite() && x > 0.0 {
            x as u64
        } else {
            0
        }
    };
    let (it, ia, ct, ca) = (
        f(input.text),
        f(input.audio),
        f(input.cached_text),
        f(input.cached_audio),
    );
    let (ot, oa) = (f(out_text), f(out_audio));
    json!({
        "total_tokens": it + ia + ot + oa,
        "input_tokens": it + ia,
        "output_tokens": ot + oa,
        "input_token_details": {
            "text_tokens": it,
            "audio_tokens": ia,
            "image_tokens": 0,
            "cached_tokens": ct + ca,
            "cached_tokens_details": {"text_tokens": ct, "audio_tokens": ca, "image_tokens": 0},
        },
        "output_token_details": {"text_tokens": ot, "audio_tokens": oa},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_tokens_round_up() {
        assert_eq!(audio_tokens(48_000, 48_000, 10), 10);
        assert_eq!(audio_tokens(1, 48_000, 10), 1);
        assert_eq!(audio_tokens(0, 48_000, 20), 0);
    }

    #[test]
    fn merge_is_deep() {
        let mut s = session("m");
        merge(
            &mut s,
            &json!({"audio": {"output": {"voice": "ash"}}, "instructions": "x"}),
        );
        assert_eq!(s["audio"]["output"]["voice"], "ash");
        assert_eq!(s["audio"]["output"]["format"]["rate"], 24000);
        assert_eq!(s["instructions"], "x");
    }

    #[test]
    fn usage_scales_and_sums() {
        let i = Input {
            text: 10,
            audio: 5,
            cached_text: 4,
            cached_audio: 0,
        };
        let u = usage(i, 3, 7, 2.0);
        assert_eq!(u["input_tokens"], 30);
        assert_eq!(u["output_tokens"], 20);
        assert_eq!(u["total_tokens"], 50);
        assert_eq!(u["input_token_details"]["cached_tokens"], 8);
    }
}
