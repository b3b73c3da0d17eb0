//! `POST /v1/audio/speech`: real audio (mp3, wav or pcm) as long as the
//! synthesis cluster would make it for the input, its length in the
//! `x-sim-audio-duration` header.

use std::sync::Arc;

use http::header::CONTENT_TYPE;
use http::HeaderValue;
use serde_json::Value;

use super::errors::{fields, invalid, missing};
use crate::audio;
use crate::request::Req;
use crate::response::{full, Resp};
use crate::shared::Shared;

/// `POST /v1/audio/speech`.
pub(super) fn speech(sh: &Arc<Shared>, req: &Req) -> Result<Resp, Resp> {
    let f = fields(req)?;
    let input = f
        .get("input")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| missing("input"))?;
    let speed = f.get("speed").and_then(Value::as_f64).unwrap_or(1.0);
    if !(0.25..=4.0).contains(&speed) {
        return Err(invalid("speed", "speed must be between 0.25 and 4.0"));
    }
    let format = f
        .get("response_format")
        .and_then(Value::as_str)
        .unwrap_or("mp3");
    let spc = sh.config.read().unwrap().seconds_per_char;
    let ms = ((audio::synth_duration_ms(input.chars().count(), spc) as f64 / speed).round() as u64)
        .max(1);
    let (bytes, secs, ctype): (Vec<u8>, f64, &'static str) = match format {
        "mp3" => {
            let (b, secs, _) = audio::mp3_silence(ms, 24000);
            (b, audio::round_ms(secs), "audio/mpeg")
        }
        "wav" => (
            audio::wav_tone(ms, 24000, 16),
            ms as f64 / 1000.0,
            "audio/wav",
        ),
        "pcm" => {
            let wav = audio::wav_tone(ms, 24000, 16);
            (wav[44..].to_vec(), ms as f64 / 1000.0, "audio/pcm")
        }
        other => {
            return Err(invalid(
                "response_format",
                &format!(
                    "response_format '{other}' is not supported by the simulator (mp3, wav, pcm)"
                ),
            ))
        }
    };
    let mut r = full(bytes);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    r.headers_mut().insert(
        "x-sim-audio-duration",
        HeaderValue::from_str(&secs.to_string()).expect("number"),
    );
    Ok(r)
}
