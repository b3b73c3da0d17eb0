//! ElevenLabs: text to speech, speech to text and the voice list, under
//! ElevenLabs' own paths (see [`super`] for the table). The key is the
//! `xi-api-key` header.
//!
//! Errors are ElevenLabs' shapes: `{"detail": {"status", "message"}}` for
//! 401 (`invalid_api_key`), 404 (`voice_not_found`), 429
//! (`too_many_concurrent_requests`) and the others, and FastAPI's
//! validation list `{"detail": [{"loc", "msg", "type"}]}` for 422.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::common::{self, Audio, Speech};
use crate::request::Req;
use crate::response::{json_response, Resp};
use crate::shared::Shared;

type R = Result<Resp, Resp>;

/// The premade voices: (voice_id, name, accent, gender, age, use case).
pub const VOICES: [(&str, &str, &str, &str, &str, &str); 5] = [
    (
        "21m00Tcm4TlvDq8ikWAM",
        "Rachel",
        "american",
        "female",
        "young",
        "narration",
    ),
    (
        "JBFqnCBsd6RMkjVDRZzb",
        "George",
        "british",
        "male",
        "middle aged",
        "narration",
    ),
    (
        "EXAVITQu4vr4xnSDxMaL",
        "Sarah",
        "american",
        "female",
        "young",
        "news",
    ),
    (
        "pNInz6obpgDQGcFmaJgB",
        "Adam",
        "american",
        "male",
        "middle aged",
        "narration",
    ),
    (
        "ErXwobaYiN019PkySvjV",
        "Antoni",
        "american",
        "male",
        "young",
        "narration",
    ),
];

/// Speech and transcription models accepted.
const TTS_MODELS: [&str; 6] = [
    "eleven_multilingual_v2",
    "eleven_flash_v2_5",
    "eleven_turbo_v2_5",
    "eleven_v3",
    "eleven_flash_v2",
    "eleven_turbo_v2",
];
const STT_MODELS: [&str; 2] = ["scribe_v1", "scribe_v2"];

/// ElevenLabs' `detail.status` for an error status.
fn status_name(status: StatusCode) -> String {
    match status.as_u16() {
        401 => "invalid_api_key".into(),
        404 => "not_found".into(),
        429 => "too_many_concurrent_requests".into(),
        _ => crate::response::error_code(status),
    }
}

/// The body of an error answer with `message` (422: the validation list).
pub fn error_body(status: StatusCode, message: &str) -> Value {
    if status == StatusCode::UNPROCESSABLE_ENTITY {
        return json!({"detail": [{"loc": ["body"], "msg": message, "type": "value_error"}]});
    }
    json!({"detail": {"status": status_name(status), "message": message}})
}

fn err(status: StatusCode, status_name: &str, message: &str) -> Resp {
    json_response(
        status,
        &json!({"detail": {"status": status_name, "message": message}}),
    )
}

/// A 422 validation error on one field (`loc` `["body"|"query", field]`).
fn invalid(place: &str, field: &str, msg: &str, kind: &str) -> Resp {
    json_response(
        StatusCode::UNPROCESSABLE_ENTITY,
        &json!({"detail": [{"loc": [place, field], "msg": msg, "type": kind}]}),
    )
}

fn missing(field: &str) -> Resp {
    invalid("body", field, "Field required", "missing")
}

/// The `xi-api-key` check: required, and the key when one is set.
pub fn authorize(sh: &Shared, req: &Req) -> Result<(), Resp> {
    let key = req.headers.get("xi-api-key").and_then(|v| v.to_str().ok());
    if common::key_ok(sh, key) {
        Ok(())
    } else {
        Err(err(
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            "Invalid API key",
        ))
    }
}

/// Answers one authorized ElevenLabs request other than speech to text.
pub fn route(sh: &Arc<Shared>, req: &Req) -> Resp {
    let path = req.path.trim_end_matches('/');
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let out = match (req.method.as_str(), segs.as_slice()) {
        ("POST", ["v1", "text-to-speech", voice]) => tts(sh, req, voice, false),
        ("POST", ["v1", "text-to-speech", voice, "stream"]) => tts(sh, req, voice, true),
        ("GET", ["v1" | "v2", "voices"]) => Ok(voices()),
        _ => Err(not_found(req)),
    };
    out.unwrap_or_else(|e| e)
}

/// 404 for a path or method ElevenLabs has not.
pub(super) fn not_found(req: &Req) -> Resp {
    err(
        StatusCode::NOT_FOUND,
        "not_found",
        &format!("Not found: {} {}", req.method, req.path),
    )
}

/// `GET /v1/voices` (and `/v2/voices`): the premade voices, one page.
fn voices() -> Resp {
    let list: Vec<Value> = VOICES
        .iter()
        .map(|(id, name, accent, gender, age, use_case)| {
            json!({
                "voice_id": id,
                "name": name,
                "category": "premade",
                "labels": {"accent": accent, "gender": gender, "age": age, "use_case": use_case},
                "description": null,
                "preview_url": format!("https://storage.googleapis.com/eleven-public-prod/premade/voices/{id}/preview.mp3"),
                "available_for_tiers": [],
                "settings": null,
            })
        })
        .collect();
    json_response(
        StatusCode::OK,
        &json!({"voices": list, "has_more": false, "total_count": VOICES.len(), "next_page_token": null}),
    )
}

/// The `output_format` query parameter (default `mp3_44100_128`):
/// `mp3_<rate>_<kbps>`, `pcm_<rate>`, `wav_<rate>`.
fn output_format(req: &Req) -> Result<Audio, Resp> {
    let f = req
        .query_param("output_format")
        .unwrap_or_else(|| "mp3_44100_128".into());
    let parts: Vec<&str> = f.split('_').collect();
    let rate = |s: &str| s.parse::<u32>().ok();
    const PCM: [u32; 6] = [8000, 16000, 22050, 24000, 44100, 48000];
    let format = match parts.as_slice() {
        ["mp3", r, kbps] if kbps.parse::<u32>().is_ok() => match rate(r) {
            Some(r @ (22050 | 24000 | 44100)) => Some(Audio::Mp3(r)),
            _ => None,
        },
        ["pcm", r] => rate(r)
            .filter(|r| PCM.contains(r))
            .map(|rate| Audio::Pcm { rate, float: false }),
        ["wav", r] => rate(r)
            .filter(|r| PCM.contains(r))
            .map(|rate| Audio::Wav { rate, float: false }),
        _ => None,
    };
    format.ok_or_else(|| {
        invalid(
            "query",
            "output_format",
            &format!("Input should be a supported output format (mp3_<rate>_<kbps>, pcm_<rate>, wav_<rate>), got '{f}'"),
            "enum",
        )
    })
}

/// The JSON body as an object (anything else: 422).
fn body(req: &Req) -> Result<Map<String, Value>, Resp> {
    match serde_json::from_slice::<Value>(&req.body) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(invalid(
            "body",
            "body",
            "Input should be a valid JSON object",
            "model_attributes_type",
        )),
    }
}

/// `voice_settings.speed` (0.7 to 1.2; default 1.0).
fn speed(f: &Map<String, Value>) -> Result<f64, Resp> {
    let Some(settings) = f.get("voice_settings").filter(|v| !v.is_null()) else {
        return Ok(1.0);
    };
    let Some(settings) = settings.as_object() else {
        return Err(invalid(
            "body",
            "voice_settings",
            "Input should be an object",
            "model_type",
        ));
    };
    match settings.get("speed").filter(|v| !v.is_null()) {
        None => Ok(1.0),
        Some(s) => s
            .as_f64()
            .filter(|s| (0.7..=1.2).contains(s))
            .ok_or_else(|| {
                invalid(
                    "body",
                    "speed",
                    "Input should be between 0.7 and 1.2",
                    "value_error",
                )
            }),
    }
}

/// `POST /v1/text-to-speech/{voice_id}` (whole) and `.../stream` (paced).
fn tts(sh: &Arc<Shared>, req: &Req, voice: &str, stream: bool) -> R {
    let f = body(req)?;
    let text = match f.get("text") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => {
            return Err(invalid(
                "body",
                "text",
                "Input should be a valid string",
                "string_type",
            ))
        }
        None => return Err(missing("text")),
    };
    if text.trim().is_empty() {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "empty_text",
            "Text must not be empty.",
        ));
    }
    let model = f
        .get("model_id")
        .and_then(Value::as_str)
        .unwrap_or("eleven_multilingual_v2");
    if !TTS_MODELS.contains(&model) {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "model_not_found",
            &format!("A model with model ID {model} does not exist."),
        ));
    }
    let format = output_format(req)?;
    let speed = speed(&f)?;
    if !VOICES.iter().any(|v| v.0 == voice) {
        return Err(err(
            StatusCode::NOT_FOUND,
            "voice_not_found",
            &format!("A voice with the voice_id {voice} was not found."),
        ));
    }
    let chars = text.chars().count();
    let speech: Speech = common::speak(sh, chars, speed, format, "audio/pcm");
    let mut r = if stream {
        common::paced(sh, speech)
    } else {
        common::whole(speech)
    };
    common::header(&mut r, "request-id", &common::request_id());
    common::header(&mut r, "x-character-count", &chars.to_string());
    common::header(
        &mut r,
        "history-item-id",
        &common::request_id().replace('-', ""),
    );
    Ok(r)
}

/// Whether `model` is a speech-to-text model (`scribe_v1`, `scribe_v2`).
pub(super) fn stt_model(model: &str) -> bool {
    STT_MODELS.contains(&model)
}

/// A 422 for a body field (multipart: missing or invalid).
pub(super) fn invalid_field(field: &str, msg: &str, kind: &str) -> Resp {
    invalid("body", field, msg, kind)
}

/// A `{"detail": {"status", "message"}}` error.
pub(super) fn detail(status: StatusCode, name: &str, message: &str) -> Resp {
    err(status, name, message)
}
