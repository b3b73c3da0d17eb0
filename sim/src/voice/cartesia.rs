//! Cartesia: `POST /tts/bytes` (Sonic text to speech, the audio paced) and
//! `GET /voices`, under Cartesia's own paths (see [`super`] for the table).
//! The key is `X-API-Key: K` (or `Authorization: Bearer K`), and every call
//! needs a `Cartesia-Version` header (else 400).
//!
//! Errors are `{"error", "message"}` with 400, 401, 404 and 429: the shape
//! is assumed (Cartesia's public reference does not show its error bodies),
//! `error` being the status' snake-case name.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::common::{self, Audio};
use crate::request::Req;
use crate::response::{error_code, json_response, Resp};
use crate::shared::Shared;

type R = Result<Resp, Resp>;

/// The public voices: (id, name, description).
pub const VOICES: [(&str, &str, &str); 3] = [
    (
        "694f9389-aac1-45b6-b726-9d9369183238",
        "Sarah",
        "A calm, clear female voice for narration",
    ),
    (
        "a0e99841-438c-4a64-b679-ae501e7d6091",
        "Barbershop Man",
        "A warm male voice for conversation",
    ),
    (
        "79a125e8-cd45-4c13-8a67-188112f4dd22",
        "British Lady",
        "An elegant British female voice",
    ),
];

/// Sample rates `output_format.sample_rate` accepts.
const RATES: [u32; 6] = [8000, 16000, 22050, 24000, 44100, 48000];

/// `{"error", "message"}`.
pub fn error_body(status: StatusCode, message: &str) -> Value {
    json!({"error": error_code(status), "message": message})
}

fn err(status: StatusCode, message: &str) -> Resp {
    json_response(status, &error_body(status, message))
}

fn bad(message: &str) -> Resp {
    err(StatusCode::BAD_REQUEST, message)
}

/// The key (`X-API-Key`, else `Authorization: Bearer`) and the version.
fn authorize(sh: &Shared, req: &Req) -> Result<(), Resp> {
    let header = |k: &str| req.headers.get(k).and_then(|v| v.to_str().ok());
    let key = header("x-api-key").or_else(|| {
        header("authorization")
            .and_then(|v| v.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, k)| k)
    });
    if !common::key_ok(sh, key) {
        return Err(err(StatusCode::UNAUTHORIZED, "Invalid API key"));
    }
    if header("cartesia-version").is_none_or(|v| v.trim().is_empty()) {
        return Err(bad(
            "Cartesia-Version header is required (for example 2025-04-16)",
        ));
    }
    Ok(())
}

/// Answers one Cartesia request.
pub fn route(sh: &Arc<Shared>, req: &Req) -> Resp {
    if let Err(r) = authorize(sh, req) {
        return r;
    }
    let out = match (req.method.as_str(), req.path.trim_end_matches('/')) {
        ("POST", "/tts/bytes") => tts(sh, req),
        ("GET", "/voices") => Ok(voices()),
        _ => Err(err(
            StatusCode::NOT_FOUND,
            &format!("Not found: {} {}", req.method, req.path),
        )),
    };
    out.unwrap_or_else(|e| e)
}

/// `GET /voices`: the public voices, one page.
fn voices() -> Resp {
    let data: Vec<Value> = VOICES
        .iter()
        .map(|(id, name, description)| {
            json!({
                "id": id,
                "name": name,
                "description": description,
                "language": "en",
                "is_public": true,
                "is_owner": false,
                "gender": null,
                "created_at": "2024-05-01T00:00:00Z",
            })
        })
        .collect();
    json_response(
        StatusCode::OK,
        &json!({"data": data, "has_more": false, "next_page": null}),
    )
}

/// A required string field.
fn string<'a>(f: &'a Map<String, Value>, key: &str) -> Result<&'a str, Resp> {
    f.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| bad(&format!("{key} is required")))
}

/// `output_format`: `container` wav / raw (with `encoding` pcm_s16le or
/// pcm_f32le) or mp3 (with `bit_rate`), and `sample_rate`.
fn output_format(f: &Map<String, Value>) -> Result<Audio, Resp> {
    let o = f
        .get("output_format")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("output_format is required"))?;
    let rate = o
        .get("sample_rate")
        .and_then(Value::as_u64)
        .and_then(|r| u32::try_from(r).ok())
        .filter(|r| RATES.contains(r))
        .ok_or_else(|| {
            bad("output_format.sample_rate must be one of 8000, 16000, 22050, 24000, 44100, 48000")
        })?;
    let container = o.get("container").and_then(Value::as_str).unwrap_or("");
    let encoding = o.get("encoding").and_then(Value::as_str);
    let float = match (container, encoding) {
        ("mp3", _) => {
            if o.get("bit_rate").and_then(Value::as_u64).is_none() {
                return Err(bad("output_format.bit_rate is required for mp3"));
            }
            return Ok(Audio::Mp3(rate));
        }
        ("wav" | "raw", Some("pcm_s16le")) => false,
        ("wav" | "raw", Some("pcm_f32le")) => true,
        ("wav" | "raw", Some(e)) => {
            return Err(bad(&format!(
                "encoding {e} is not supported by the simulator (pcm_s16le, pcm_f32le)"
            )))
        }
        ("wav" | "raw", None) => return Err(bad("output_format.encoding is required")),
        (c, _) => {
            return Err(bad(&format!(
                "output_format.container must be raw, wav or mp3, not '{c}'"
            )))
        }
    };
    Ok(if container == "wav" {
        Audio::Wav { rate, float }
    } else {
        Audio::Pcm { rate, float }
    })
}

/// `speed` (a number, or `slow` / `normal` / `fast`) or
/// `generation_config.speed`; 1.0 without.
fn speed(f: &Map<String, Value>) -> f64 {
    let given = f
        .get("generation_config")
        .and_then(|g| g.get("speed"))
        .or_else(|| f.get("speed"));
    match given {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(1.0),
        Some(Value::String(s)) if s == "slow" => 0.8,
        Some(Value::String(s)) if s == "fast" => 1.25,
        _ => 1.0,
    }
}

/// `POST /tts/bytes`.
fn tts(sh: &Arc<Shared>, req: &Req) -> R {
    let f = match serde_json::from_slice::<Value>(&req.body) {
        Ok(Value::Object(m)) => m,
        _ => return Err(bad("The request body must be a JSON object")),
    };
    string(&f, "model_id")?;
    let transcript = string(&f, "transcript")?;
    let voice = f.get("voice").ok_or_else(|| bad("voice is required"))?;
    if voice.get("mode").and_then(Value::as_str).unwrap_or("id") != "id" {
        return Err(bad("voice.mode must be \"id\""));
    }
    let id = voice
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("voice.id is required"))?;
    let format = output_format(&f)?;
    if !VOICES.iter().any(|v| v.0 == id) {
        return Err(err(StatusCode::NOT_FOUND, &format!("Voice {id} not found")));
    }
    let chars = transcript.chars().count();
    let speech = common::speak(sh, chars, speed(&f), format, "application/octet-stream");
    let mut r = common::paced(sh, speech);
    common::header(&mut r, "x-request-id", &common::request_id());
    Ok(r)
}
