//! Deepgram's live transcription: `GET /v1/listen` (also
//! `/p/{name}/v1/listen`) with `Upgrade: websocket` (a `POST /v1/listen`
//! stays the pre-recorded API of [`super::deepgram`]). Logged and
//! faultable like any request: a fault rule on the path answers its status
//! instead of the upgrade.
//!
//! **Before the upgrade**: the key, `Authorization: Token K` (or the
//! subprotocols `token, K`, answered `token`), else 401 in Deepgram's error
//! shape; the query: `encoding` `linear16` (2 bytes a sample), `linear32`
//! (4), `mulaw` or `alaw` (1) with `sample_rate` (required) and `channels`
//! (default 1) is raw audio; no `encoding` is a container stream (WAV
//! measured from its header as it comes; any other container measured
//! when the stream ends); another encoding, or a missing or bad
//! `sample_rate`: 400. `model` (default `base`), `punctuate` /
//! `smart_format` as the pre-recorded API. The `101` carries
//! `dg-request-id`.
//!
//! **Messages**: binary messages are audio. For each whole second of audio
//! received (measured from the bytes: raw, bytes / (bytes a sample ×
//! `sample_rate` × `channels`)) one `Results` message is sent at once:
//! `{"type": "Results", "channel_index": [0, 1], "duration", "start",
//! "is_final": true, "speech_final": true, "from_finalize": false,
//! "channel": {"alternatives": [{"transcript", "confidence": 0.99,
//! "words"}]}, "metadata": {"request_id", "model_info": {"name",
//! "version", "arch"}, "model_uuid"}}`: every segment's transcript is the
//! fixed sentence of the pre-recorded API, its words timed over the
//! segment. Text messages: `{"type": "KeepAlive"}` (no answer),
//! `{"type": "Finalize"}` (the rest of the audio, under a second, as one
//! more `Results` with `from_finalize: true`), `{"type": "CloseStream"}`
//! (or an empty binary message: the rest as a `Results`, then `{"type":
//! "Metadata", "transaction_key": "deprecated", "request_id", "sha256" (of
//! all the audio), "created", "duration", "channels"}` and a normal close,
//! 1000). Any other text message is ignored. Every message is recorded in
//! the client-event log (`GET /__sim/realtime/events`, `api:
//! "deepgram-live"`).
//!
//! **Claimed durations**: `start`, `duration`, word timings and the
//! `Metadata` `duration` are the measured seconds × `stt_duration_factor`
//! (rounded to ms), as the pre-recorded API claims.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use http::StatusCode;
use hyper::upgrade::OnUpgrade;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use super::common;
use super::deepgram::{err, flag, model_name, token, MODEL_UUID};
use crate::audio;
use crate::request::Req;
use crate::response::Resp;
use crate::shared::Shared;
use crate::upgrade::{self, Socket};

/// The `api` of this API's entries in the client-event log.
pub const API: &str = "deepgram-live";

/// One live stream.
struct Live {
    /// State shared with the server (config).
    sh: Arc<Shared>,
    /// Bytes a second of raw audio; `None`: a container stream.
    raw: Option<u64>,
    /// `channels`.
    channels: u32,
    /// The audio so far.
    data: Vec<u8>,
    /// Measured seconds already answered.
    done: f64,
    /// The stream's `request_id`.
    request_id: String,
    /// The `model` asked for.
    model: String,
    /// `punctuate` or `smart_format`.
    punctuated: bool,
}

/// Bytes a second of raw audio as the query describes it (`None`: a
/// container), and `channels`.
fn format_of(req: &Req) -> Result<(Option<u64>, u32), String> {
    let channels = match req.query_param("channels") {
        None => 1,
        Some(c) => c
            .parse::<u32>()
            .ok()
            .filter(|c| (1..=16).contains(c))
            .ok_or_else(|| format!("Bad Request: invalid channels {c}"))?,
    };
    let Some(encoding) = req.query_param("encoding") else {
        return Ok((None, channels));
    };
    let width: u64 = match encoding.as_str() {
        "linear16" => 2,
        "linear32" => 4,
        "mulaw" | "alaw" => 1,
        e => return Err(format!("Bad Request: encoding {e} is not supported by the simulator (linear16, linear32, mulaw, alaw, or none for a container)")),
    };
    let rate = req
        .query_param("sample_rate")
        .ok_or("Bad Request: sample_rate is required with encoding")?;
    let rate = rate
        .parse::<u64>()
        .ok()
        .filter(|r| (1000..=192_000).contains(r))
        .ok_or_else(|| format!("Bad Request: invalid sample_rate {rate}"))?;
    Ok((Some(width * rate * u64::from(channels)), channels))
}

/// `GET /v1/listen` with `Upgrade: websocket`: the key and the query, then
/// the upgrade and the stream.
pub fn connect(sh: &Arc<Shared>, req: &Req, on: OnUpgrade) -> Resp {
    let offered = upgrade::offered(&req.headers);
    let by_protocol = match offered.as_slice() {
        [scheme, key, ..] if scheme.eq_ignore_ascii_case("token") => Some(key.as_str()),
        _ => None,
    };
    if !common::key_ok(sh, token(&req.headers).or(by_protocol)) {
        return err(StatusCode::UNAUTHORIZED, "Invalid credentials.");
    }
    let (raw, channels) = match format_of(req) {
        Ok(f) => f,
        Err(m) => return err(StatusCode::BAD_REQUEST, &m),
    };
    let live = Live {
        sh: sh.clone(),
        raw,
        channels,
        data: Vec::new(),
        done: 0.0,
        request_id: common::request_id(),
        model: req.query_param("model").unwrap_or_else(|| "base".into()),
        punctuated: flag(req, "punctuate") || flag(req, "smart_format"),
    };
    let protocol = by_protocol.map(|_| "token");
    let extra = [("dg-request-id", live.request_id.clone())];
    upgrade::accept(sh, &req.headers, on, protocol, &extra, move |ws| {
        run(ws, live)
    })
}

/// The data offset and bytes a second of a WAV file's header, once the
/// `fmt ` and `data` chunk headers have arrived.
fn wav_layout(data: &[u8]) -> Option<(usize, u64)> {
    if data.len() < 12 || &data[..4] != b"RIFF" || &data[8..12] != b"WAVE" {
        return None;
    }
    let (mut at, mut per_sec) = (12, None);
    while at + 8 <= data.len() {
        let size = u32::from_le_bytes(data[at + 4..at + 8].try_into().ok()?) as usize;
        match &data[at..at + 4] {
            b"fmt " if at + 24 <= data.len() => {
                let u16_at = |i: usize| u64::from(u16::from_le_bytes([data[i], data[i + 1]]));
                let channels = u16_at(at + 10);
                let rate = u64::from(u32::from_le_bytes(data[at + 12..at + 16].try_into().ok()?));
                let bits = u16_at(at + 22);
                per_sec = Some(channels * rate * bits.div_ceil(8));
            }
            b"data" => return Some((at + 8, per_sec.filter(|p| *p > 0)?)),
            _ => {}
        }
        at += 8 + size + size % 2;
    }
    None
}

impl Live {
    /// Seconds of audio received (a container other than WAV: only once
    /// `closing`).
    fn measured(&self, closing: bool) -> f64 {
        let len = self.data.len();
        match (self.raw, wav_layout(&self.data)) {
            (Some(per_sec), _) => len as f64 / per_sec as f64,
            (None, Some((header, per_sec))) => len.saturating_sub(header) as f64 / per_sec as f64,
            (None, None) if closing => audio::probe_duration(&self.data),
            (None, None) => 0.0,
        }
    }

    /// A `Results` message for measured `[start, start + secs]`.
    fn result(&self, start: f64, secs: f64, from_finalize: bool) -> Value {
        let (start, secs) = (
            common::claimed(&self.sh, start),
            common::claimed(&self.sh, secs),
        );
        let words: Vec<Value> = common::timed_words(secs)
            .into_iter()
            .map(|(w, s, e)| {
                let bare: String = w.chars().filter(|c| c.is_alphanumeric()).collect();
                let (s, e) = (audio::round_ms(start + s), audio::round_ms(start + e));
                let mut word =
                    json!({"word": bare.to_lowercase(), "start": s, "end": e, "confidence": 0.99});
                if self.punctuated {
                    word["punctuated_word"] = json!(w);
                }
                word
            })
            .collect();
        let transcript = if self.punctuated {
            common::TRANSCRIPT.to_owned()
        } else {
            let bare: Vec<&str> = words.iter().filter_map(|w| w["word"].as_str()).collect();
            bare.join(" ")
        };
        json!({
            "type": "Results",
            "channel_index": [0, 1],
            "duration": secs,
            "start": start,
            "is_final": true,
            "speech_final": true,
            "from_finalize": from_finalize,
            "channel": {"alternatives": [{"transcript": transcript, "confidence": 0.99, "words": words}]},
            "metadata": {
                "request_id": self.request_id,
                "model_info": {"name": model_name(&self.model), "version": "2025-01-01.0", "arch": self.model},
                "model_uuid": MODEL_UUID,
            },
        })
    }

    /// `Results` for each whole second not answered yet and, when
    /// `rest`, for what is left under a second.
    fn results(&mut self, rest: bool, closing: bool, from_finalize: bool) -> Vec<Value> {
        let measured = self.measured(closing);
        let mut out = Vec::new();
        while measured - self.done >= 1.0 - 1e-9 {
            out.push(self.result(self.done, 1.0, false));
            self.done += 1.0;
        }
        if rest && measured - self.done > 1e-9 {
            out.push(self.result(self.done, measured - self.done, from_finalize));
            self.done = measured;
        }
        out
    }

    /// The last `Results` and the `Metadata` message.
    fn close(&mut self) -> Vec<Value> {
        let mut out = self.results(true, true, false);
        out.push(json!({
            "type": "Metadata",
            "transaction_key": "deprecated",
            "request_id": self.request_id,
            "sha256": hex::encode(Sha256::digest(&self.data)),
            "created": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "duration": common::claimed(&self.sh, self.measured(true)),
            "channels": self.channels,
        }));
        out
    }

    /// The answers to one client message, and whether the stream ends.
    fn on_message(&mut self, msg: Message) -> (Vec<Value>, bool) {
        match msg {
            Message::Binary(b) => {
                self.sh.ws_events.push(API, &self.request_id, None, b.len());
                if b.is_empty() {
                    return (self.close(), true);
                }
                self.data.extend_from_slice(&b);
                (self.results(false, false, false), false)
            }
            Message::Text(t) => {
                self.sh
                    .ws_events
                    .push(API, &self.request_id, Some(t.as_str()), t.len());
                let kind = serde_json::from_str::<Value>(t.as_str())
                    .ok()
                    .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned));
                match kind.as_deref() {
                    Some("Finalize") => (self.results(true, false, true), false),
                    Some("CloseStream") => (self.close(), true),
                    _ => (Vec::new(), false),
                }
            }
            _ => (Vec::new(), false),
        }
    }
}

/// One stream: answers as audio and messages come, until `CloseStream`
/// (then a normal close) or the client goes.
async fn run(ws: Socket, mut live: Live) {
    let (mut tx, mut rx) = ws.split();
    while let Some(Ok(msg)) = rx.next().await {
        if msg.is_close() {
            break;
        }
        let (out, end) = live.on_message(msg);
        for v in out {
            if tx.feed(Message::text(v.to_string())).await.is_err() {
                return;
            }
        }
        if tx.flush().await.is_err() {
            return;
        }
        if end {
            let frame = CloseFrame {
                code: CloseCode::Normal,
                reason: "".into(),
            };
            let _ = tx.send(Message::Close(Some(frame))).await;
            // The client's close answer, briefly.
            let _ = tokio::time::timeout(Duration::from_secs(1), async {
                while let Some(Ok(m)) = rx.next().await {
                    if m.is_close() {
                        break;
                    }
                }
            })
            .await;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wav_header_is_read() {
        let wav = audio::wav_tone(1000, 16000, 16);
        assert_eq!(wav_layout(&wav), Some((44, 32000)));
        assert_eq!(wav_layout(&wav[..30]), None);
    }
}
