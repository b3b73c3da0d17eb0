//! One Realtime response in flight: the reply planned when
//! `response.create` arrives, sent as its head events at once, then one
//! delta step every `realtime_delta_ms`, then its done events, or cut
//! short by `response.cancel` (see [`super`] for the events and rules).

use serde_json::{json, Value};

use super::events::{self, Input, OUTPUT_AUDIO_TOKENS_PER_SEC, OUTPUT_BYTES_PER_SEC, OUTPUT_RATE};
use crate::audio;
use crate::llm::{self, Finish};

/// What `response.create` (with the session's settings) asks for.
pub struct Plan {
    /// The conversation's id.
    pub conversation_id: String,
    /// Audio (with its transcript) rather than text.
    pub audio: bool,
    /// The voice named in the answer.
    pub voice: String,
    /// `max_output_tokens` as in effect (a number or `"inf"`).
    pub max_output_tokens: Value,
    /// The last user text of the conversation (empty when none).
    pub prompt: String,
    /// The configured `seconds_per_char`.
    pub seconds_per_char: f64,
    /// The configured `realtime_usage_factor`.
    pub factor: f64,
    /// The input's counts.
    pub input: Input,
}

/// A response being sent.
pub struct Turn {
    /// `resp_…`.
    pub id: String,
    /// `item_…` of its assistant message.
    pub item_id: String,
    /// Its plan.
    plan: Plan,
    /// The reply's words (each with its leading space but the first).
    pieces: Vec<String>,
    /// The audio of each word (audio modality), PCM16 24 kHz mono.
    chunks: Vec<Vec<u8>>,
    /// How many words were sent.
    sent: usize,
    /// `max_output_tokens` cut the reply.
    cut: bool,
}

impl Turn {
    /// The response `plan` asks for: the reply by [`llm::text_reply`]'s
    /// rule, its audio as long as the text would be spoken.
    pub fn new(plan: Plan) -> Turn {
        let limit = plan.max_output_tokens.as_u64();
        let reply = llm::text_reply(&plan.prompt, None, limit, &[]);
        let pieces = reply.pieces.clone();
        let chunks = if plan.audio && !pieces.is_empty() {
            let text = reply.text();
            let ms = audio::synth_duration_ms(text.chars().count(), plan.seconds_per_char);
            let pcm = audio::wav_tone(ms, OUTPUT_RATE, 16)[44..].to_vec();
            split(&pcm, pieces.len())
        } else {
            Vec::new()
        };
        Turn {
            id: events::id("resp_"),
            item_id: events::id("item_"),
            plan,
            pieces,
            chunks,
            sent: 0,
            cut: reply.finish == Finish::MaxTokens,
        }
    }

    /// The text sent so far.
    pub fn text_sent(&self) -> String {
        self.pieces[..self.sent].concat()
    }

    /// The audio bytes sent so far.
    fn audio_sent(&self) -> u64 {
        self.chunks[..self.sent.min(self.chunks.len())]
            .iter()
            .map(|c| c.len() as u64)
            .sum()
    }

    /// Fields every event of the content part repeats.
    fn at(&self) -> Value {
        json!({"response_id": self.id, "item_id": self.item_id, "output_index": 0, "content_index": 0})
    }

    /// The content part with `text`.
    fn part(&self, text: &str) -> Value {
        if self.plan.audio {
            json!({"type": "output_audio", "transcript": text})
        } else {
            json!({"type": "output_text", "text": text})
        }
    }

    /// The response object.
    fn object(&self, status: &str, details: Value, output: Value, usage: Value) -> Value {
        let modality = if self.plan.audio { "audio" } else { "text" };
        json!({
            "object": "realtime.response",
            "id": self.id,
            "status": status,
            "status_details": details,
            "output": output,
            "conversation_id": self.plan.conversation_id,
            "output_modalities": [modality],
            "max_output_tokens": self.plan.max_output_tokens,
            "audio": {"output": {"format": {"type": "audio/pcm", "rate": OUTPUT_RATE}, "voice": self.plan.voice}},
            "usage": usage,
            "metadata": null,
        })
    }

    /// `response.created`, `response.output_item.added`,
    /// `response.content_part.added`.
    pub fn head(&self) -> Vec<Value> {
        let item = events::message(&self.item_id, "assistant", "in_progress", json!([]));
        let created = self.object("in_progress", Value::Null, json!([]), Value::Null);
        let mut part = self.at();
        part["part"] = self.part("");
        vec![
            events::event("response.created", json!({"response": created})),
            events::event(
                "response.output_item.added",
                json!({"response_id": self.id, "output_index": 0, "item": item}),
            ),
            events::event("response.content_part.added", part),
        ]
    }

    /// The next word's deltas (audio: its audio, then its transcript), or
    /// `None` when every word was sent.
    pub fn step(&mut self) -> Option<Vec<Value>> {
        let word = self.pieces.get(self.sent)?.clone();
        let mut out = Vec::new();
        if self.plan.audio {
            use base64::Engine;
            let mut a = self.at();
            a["delta"] =
                json!(base64::engine::general_purpose::STANDARD.encode(&self.chunks[self.sent]));
            out.push(events::event("response.output_audio.delta", a));
            let mut t = self.at();
            t["delta"] = json!(word);
            out.push(events::event("response.output_audio_transcript.delta", t));
        } else {
            let mut t = self.at();
            t["delta"] = json!(word);
            out.push(events::event("response.output_text.delta", t));
        }
        self.sent += 1;
        Some(out)
    }

    /// The done events and `response.done`: `completed`, `incomplete`
    /// when `max_output_tokens` cut the reply, `cancelled` when
    /// `cancelled` (with what was sent so far).
    pub fn finish(&self, cancelled: bool) -> Vec<Value> {
        let text = self.text_sent();
        let (status, details, item_status) = if cancelled {
            let d = json!({"type": "cancelled", "reason": "client_cancelled"});
            ("cancelled", d, "incomplete")
        } else if self.cut {
            let d = json!({"type": "incomplete", "reason": "max_output_tokens"});
            ("incomplete", d, "incomplete")
        } else {
            ("completed", Value::Null, "completed")
        };
        let part = self.part(&text);
        let item = events::message(&self.item_id, "assistant", item_status, json!([part]));
        let mut out = Vec::new();
        if self.plan.audio {
            out.push(events::event("response.output_audio.done", self.at()));
            let mut t = self.at();
            t["transcript"] = json!(text);
            out.push(events::event("response.output_audio_transcript.done", t));
        } else {
            let mut t = self.at();
            t["text"] = json!(text);
            out.push(events::event("response.output_text.done", t));
        }
        let mut p = self.at();
        p["part"] = part;
        out.push(events::event("response.content_part.done", p));
        out.push(events::event(
            "response.output_item.done",
            json!({"response_id": self.id, "output_index": 0, "item": item}),
        ));
        let out_audio = events::audio_tokens(
            self.audio_sent(),
            OUTPUT_BYTES_PER_SEC,
            OUTPUT_AUDIO_TOKENS_PER_SEC,
        );
        let usage = events::usage(
            self.plan.input,
            events::words(&text),
            out_audio,
            self.plan.factor,
        );
        let response = self.object(status, details, json!([item]), usage);
        out.push(events::event(
            "response.done",
            json!({"response": response}),
        ));
        out
    }
}

/// `pcm` (16-bit samples) in `n` pieces of whole samples, as even as can be.
fn split(pcm: &[u8], n: usize) -> Vec<Vec<u8>> {
    let samples = pcm.len() / 2;
    (0..n)
        .map(|i| pcm[2 * (samples * i / n)..2 * (samples * (i + 1) / n)].to_vec())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_every_sample() {
        let pcm = vec![0u8; 2 * 1001];
        let parts = split(&pcm, 7);
        assert_eq!(parts.len(), 7);
        assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), pcm.len());
        assert!(parts.iter().all(|p| p.len() % 2 == 0));
    }
}
