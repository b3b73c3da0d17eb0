//! `POST /synthesize`: the synthesis cluster (real WAV / MP3 audio with
//! per-character timestamps), and the cached audio rendering it shares with
//! media serving.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::fields::{int_field, required};
use super::handler::R;
use crate::audio;
use crate::request::Req;
use crate::response::{bad_field, full, not_found};
use crate::shared::{AudioKey, Rendered, Shared};

#[derive(Serialize)]
struct Timestamps {
    graph_chars: Vec<String>,
    graph_times: Vec<[f64; 2]>,
    phon_chars: Vec<String>,
    phon_times: Vec<[f64; 2]>,
}

#[derive(Serialize)]
/// The synthesis answer minus `success` and `audio_content`, which are
/// spliced in front without re-scanning the (large, escape-free) base64.
struct SynthOut<'a> {
    duration: f64,
    synth_duration: f64,
    output_format: &'a str,
    sample_rate: u32,
    audio_timestamps: Timestamps,
    issues: Vec<Value>,
}

/// Renders (or reuses) audio of `duration_ms`.
pub fn render_audio(
    sh: &Shared,
    mp3: bool,
    sample_rate: u32,
    bits: u16,
    duration_ms: u64,
) -> Arc<Rendered> {
    use base64::Engine as _;
    let key: AudioKey = (mp3, sample_rate, bits, duration_ms);
    if let Some(r) = sh.audio_cache.lock().unwrap().get(&key) {
        return r.clone();
    }
    let (bytes, duration, rate) = if mp3 {
        let (b, secs, rate) = audio::mp3_silence(duration_ms, sample_rate);
        (b, audio::round_ms(secs), rate)
    } else {
        (
            audio::wav_tone(duration_ms, sample_rate, bits),
            duration_ms as f64 / 1000.0,
            sample_rate,
        )
    };
    let rendered = Arc::new(Rendered {
        base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
        bytes: bytes.into(),
        duration,
        sample_rate: rate,
    });
    let mut cache = sh.audio_cache.lock().unwrap();
    if cache.len() >= 256 {
        cache.clear();
    }
    cache.insert(key, rendered.clone());
    rendered
}

/// The audio timestamps of `chars` spoken over `duration` seconds: each
/// character an equal share, in order (no phonemes).
fn timestamps(chars: &[char], duration: f64) -> Timestamps {
    let step = duration / chars.len() as f64;
    Timestamps {
        graph_chars: chars.iter().map(char::to_string).collect(),
        graph_times: (0..chars.len())
            .map(|i| {
                [
                    audio::round_ms(i as f64 * step),
                    audio::round_ms((i + 1) as f64 * step),
                ]
            })
            .collect(),
        phon_chars: Vec::new(),
        phon_times: Vec::new(),
    }
}

/// `POST /synthesize`.
pub(super) fn synthesize(sh: &Arc<Shared>, req: &Req) -> R {
    let started = Instant::now();
    let f = req.fields()?;
    let voice = required(&f, "voice_uuid")?;
    let data = match f.get("data") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.as_str(),
        _ => return Err(bad_field("data", "is required")),
    };
    let mp3 = match f.get("output_format") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("wav") => false,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("mp3") => true,
        _ => return Err(bad_field("output_format", "must be wav or mp3")),
    };
    let bits = match f
        .get("precision")
        .and_then(Value::as_str)
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("PCM_16") | Some("MULAW") => 16,
        Some("PCM_24") => 24,
        Some("PCM_32") => 32,
        Some(_) => {
            return Err(bad_field(
                "precision",
                "must be one of MULAW, PCM_16, PCM_24, PCM_32",
            ))
        }
    };
    let sample_rate = match int_field(&f, "sample_rate")? {
        None => 22050,
        Some(n) if (8000..=48000).contains(&n) => n as u32,
        Some(_) => return Err(bad_field("sample_rate", "must be between 8000 and 48000")),
    };
    if !sh.store.lock().unwrap().exists("voices", voice) {
        return Err(not_found("voice"));
    }
    let spc = sh.config.read().unwrap().seconds_per_char;
    let chars: Vec<char> = data.chars().collect();
    let rendered = render_audio(
        sh,
        mp3,
        sample_rate,
        bits,
        audio::synth_duration_ms(chars.len(), spc),
    );
    sh.store
        .lock()
        .unwrap()
        .billing
        .add("synth", rendered.duration);
    let out = SynthOut {
        duration: rendered.duration,
        synth_duration: audio::round_ms(started.elapsed().as_secs_f64()),
        output_format: if mp3 { "mp3" } else { "wav" },
        sample_rate: rendered.sample_rate,
        audio_timestamps: timestamps(&chars, rendered.duration),
        issues: Vec::new(),
    };
    let rest = serde_json::to_vec(&out).expect("serializable");
    let mut body = Vec::with_capacity(rendered.base64.len() + rest.len() + 48);
    body.extend_from_slice(br#"{"success":true,"audio_content":""#);
    body.extend_from_slice(rendered.base64.as_bytes());
    body.extend_from_slice(b"\",");
    body.extend_from_slice(&rest[1..]);
    let mut r = full(body);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(r)
}
