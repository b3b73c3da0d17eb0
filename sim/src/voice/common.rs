//! What the three voice vendors' handlers share: their key check, the
//! audio they render (how long it is, in which container), the paced
//! stream that sends it in chunks, the remote audio they fetch, and the
//! transcript with its word timings. A leaf: it names no vendor.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::HeaderValue;
use http_body_util::{Either, StreamBody};
use hyper::body::Frame;

use crate::audio;
use crate::response::{full, FrameStream, Resp};
use crate::shared::Shared;

/// The sentence every transcription answers.
pub const TRANSCRIPT: &str = "The quick brown fox jumps over the lazy dog.";

/// How many pieces a paced answer is sent in (fewer for a tiny body).
pub const CHUNKS: usize = 6;

/// A vendor's key header: required, and equal to the key when one is set.
pub fn key_ok(sh: &Shared, got: Option<&str>) -> bool {
    let Some(got) = got.map(str::trim).filter(|g| !g.is_empty()) else {
        return false;
    };
    match sh.config.read().unwrap().api_key.as_deref() {
        Some(want) => got == want,
        None => true,
    }
}

/// How audio is delivered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Audio {
    /// MPEG Layer III at (about) this sample rate.
    Mp3(u32),
    /// A WAV file of 16-bit (or, when `float`, 32-bit float) samples.
    Wav {
        /// Sample rate.
        rate: u32,
        /// IEEE float samples instead of 16-bit integers.
        float: bool,
    },
    /// Headerless mono samples, 16-bit little-endian (or 32-bit float).
    Pcm {
        /// Sample rate.
        rate: u32,
        /// IEEE float samples instead of 16-bit integers.
        float: bool,
    },
}

/// Rendered speech: the bytes, their exact seconds and their media type.
pub struct Speech {
    /// The audio.
    pub bytes: Vec<u8>,
    /// Its duration in seconds (ms precision).
    pub secs: f64,
    /// `Content-Type` of the answer.
    pub content_type: &'static str,
}

/// Speech for `chars` characters at `speed` (1.0: the configured
/// `seconds_per_char`, at least 0.5 s), in `format`; `raw` is the media type
/// of headerless PCM.
pub fn speak(sh: &Shared, chars: usize, speed: f64, format: Audio, raw: &'static str) -> Speech {
    let spc = sh.config.read().unwrap().seconds_per_char;
    let speed = if speed.is_finite() && speed > 0.0 {
        speed
    } else {
        1.0
    };
    let ms = ((audio::synth_duration_ms(chars, spc) as f64 / speed).round() as u64).max(1);
    let exact = ms as f64 / 1000.0;
    match format {
        Audio::Mp3(rate) => {
            let (bytes, secs, _) = audio::mp3_silence(ms, rate);
            let secs = audio::round_ms(secs);
            Speech {
                bytes,
                secs,
                content_type: "audio/mpeg",
            }
        }
        Audio::Wav { rate, float } => Speech {
            bytes: if float {
                audio::float_tone(ms, rate, true)
            } else {
                audio::wav_tone(ms, rate, 16)
            },
            secs: exact,
            content_type: "audio/wav",
        },
        Audio::Pcm { rate, float } => Speech {
            bytes: if float {
                audio::float_tone(ms, rate, false)
            } else {
                audio::wav_tone(ms, rate, 16)[44..].to_vec()
            },
            secs: exact,
            content_type: raw,
        },
    }
}

/// Adds a header (a value that is not a valid header value is skipped).
pub fn header(resp: &mut Resp, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(name, v);
    }
}

/// The speech as one whole body, with `x-sim-audio-duration`.
pub fn whole(speech: Speech) -> Resp {
    let mut r = full(speech.bytes);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(speech.content_type));
    header(&mut r, "x-sim-audio-duration", &speech.secs.to_string());
    r
}

/// The speech streamed in [`CHUNKS`] pieces, `tts_chunk_ms` apart (chunked
/// transfer, no `Content-Length`); the pieces together are the whole file,
/// its header first. `x-sim-audio-duration` carries its length.
pub fn paced(sh: &Arc<Shared>, speech: Speech) -> Resp {
    let delay = Duration::from_millis(sh.config.read().unwrap().tts_chunk_ms);
    let bytes = Bytes::from(speech.bytes);
    let size = bytes.len().div_ceil(CHUNKS).max(1);
    let pieces: Vec<Bytes> = (0..bytes.len())
        .step_by(size)
        .map(|at| bytes.slice(at..(at + size).min(bytes.len())))
        .collect();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(CHUNKS);
    sh.spawn(async move {
        for (i, piece) in pieces.into_iter().enumerate() {
            if i > 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if tx.send(piece).await.is_err() {
                return;
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let piece = rx.recv().await?;
        Some((Ok(Frame::data(piece)), rx))
    });
    let stream: FrameStream = Box::pin(stream);
    let mut r = http::Response::new(Either::Right(StreamBody::new(stream)));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(speech.content_type));
    r.headers_mut().remove(CONTENT_LENGTH);
    header(&mut r, "x-sim-audio-duration", &speech.secs.to_string());
    r
}

/// The duration a transcription claims for `measured` seconds:
/// `measured × stt_duration_factor`, to the millisecond.
pub fn claimed(sh: &Shared, measured: f64) -> f64 {
    let factor = sh.config.read().unwrap().stt_duration_factor;
    audio::round_ms(measured * factor)
}

/// Downloads remote audio with the simulator's client (its own
/// `/__sim/media/...` URLs included: they are served, logged and faultable
/// like any download); a failure or a non-2xx answer is an error message.
pub async fn fetch(sh: &Shared, url: &str) -> Result<Bytes, String> {
    let resp = sh
        .client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("could not fetch {url}: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("fetching {url} answered {}", resp.status()));
    }
    resp.bytes()
        .await
        .map_err(|e| format!("could not read {url}: {e}"))
}

/// The transcript's words with `(start, end)` seconds, spread evenly over
/// `secs` (the last word ends at `secs`).
pub fn timed_words(secs: f64) -> Vec<(&'static str, f64, f64)> {
    let words: Vec<&'static str> = TRANSCRIPT.split_whitespace().collect();
    let step = secs / words.len() as f64;
    words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let start = audio::round_ms(step * i as f64);
            let end = if i + 1 == words.len() {
                audio::round_ms(secs)
            } else {
                audio::round_ms(step * (i + 1) as f64)
            };
            (*w, start, end)
        })
        .collect()
}

/// A fresh request id (a UUID).
pub fn request_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_cover_the_duration() {
        let w = timed_words(2.0);
        assert_eq!(w.len(), 9);
        assert_eq!((w[0].1, w[8].2), (0.0, 2.0));
        assert!(w.windows(2).all(|p| p[0].2 == p[1].1));
    }
}
