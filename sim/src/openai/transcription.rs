//! `POST /v1/audio/transcriptions` and `/v1/audio/translations`: a fixed
//! sentence for any uploaded `file`, with its probed duration, in each of
//! OpenAI's response formats.

use http::header::CONTENT_TYPE;
use http::{HeaderValue, StatusCode};
use serde_json::{json, Value};

use super::errors::{fields, invalid, missing};
use crate::audio;
use crate::request::Req;
use crate::response::{full, json_response, Resp};
use crate::shared::Shared;

/// Transcription, or translation (`translate`) into English.
/// `usage.seconds` and `duration` are the claimed duration (measured ×
/// `stt_duration_factor`); the measured one is in `x-sim-audio-duration`.
pub(super) fn transcription(sh: &Shared, req: &Req, translate: bool) -> Result<Resp, Resp> {
    let file = req
        .parts
        .as_ref()
        .and_then(|ps| ps.iter().find(|p| p.name == "file"))
        .ok_or_else(|| missing("file"))?;
    let f = fields(req)?;
    let measured = audio::probe_duration(&file.data);
    let secs = audio::round_ms(measured * sh.config.read().unwrap().stt_duration_factor);
    let text = "The quick brown fox jumps over the lazy dog.";
    let format = f
        .get("response_format")
        .and_then(Value::as_str)
        .unwrap_or("json");
    let text_resp = |body: String, ctype: &'static str| {
        let mut r = full(body);
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
        r
    };
    let end = format!("00:00:{:06.3}", secs.min(59.999));
    let mut r = match format {
        "json" => json_response(
            StatusCode::OK,
            &json!({"text": text, "usage": {"type": "duration", "seconds": secs.ceil()}}),
        ),
        "verbose_json" => json_response(
            StatusCode::OK,
            &json!({
                "task": if translate { "translate" } else { "transcribe" },
                "language": if translate { "english" } else { f.get("language").and_then(Value::as_str).unwrap_or("english") },
                "duration": secs,
                "text": text,
                "segments": [{"id": 0, "seek": 0, "start": 0.0, "end": secs, "text": text}],
                "usage": {"type": "duration", "seconds": secs.ceil()},
            }),
        ),
        "text" => text_resp(format!("{text}\n"), "text/plain"),
        "srt" => text_resp(
            format!("1\n00:00:00,000 --> {}\n{text}\n", end.replace('.', ",")),
            "text/plain",
        ),
        "vtt" => text_resp(
            format!("WEBVTT\n\n00:00:00.000 --> {end}\n{text}\n"),
            "text/vtt",
        ),
        other => {
            return Err(invalid(
                "response_format",
                &format!("unsupported response_format '{other}'"),
            ))
        }
    };
    r.headers_mut().insert(
        "x-sim-audio-duration",
        HeaderValue::from_str(&measured.to_string()).expect("number"),
    );
    Ok(r)
}
