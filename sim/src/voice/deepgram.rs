//! Deepgram: pre-recorded transcription (`POST /v1/listen`) and Aura text
//! to speech (`POST /v1/speak`), under Deepgram's own paths (see [`super`]
//! for the table). The key is `Authorization: Token K` (not `Token
//! token=K`, not `Bearer`).
//!
//! `/v1/listen` takes raw audio (any content type but JSON) or JSON
//! `{"url": ...}`, downloaded with the simulator's client (so a
//! `/__sim/media/...` URL of the simulator itself works, logged as a
//! download). `metadata.duration` is the CLAIMED duration (measured ×
//! `stt_duration_factor`); the measured one is in `x-sim-audio-duration`.
//!
//! Errors are Deepgram's `{"err_code", "err_msg", "request_id"}`.

use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::common::{self, Audio};
use crate::audio;
use crate::request::Req;
use crate::response::{json_response, Resp};
use crate::shared::Shared;

type R = Result<Resp, Resp>;

/// The model uuid every answer names (one per simulator, like a release).
pub(super) const MODEL_UUID: &str = "3b3aabe4-608a-46ac-9585-7960a25daf1a";

/// Deepgram's `err_code` for an error status.
fn err_code(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "INVALID_AUTH",
        402 => "ASR_PAYMENT_REQUIRED",
        403 => "INSUFFICIENT_PERMISSIONS",
        404 => "NOT_FOUND",
        429 => "TOO_MANY_REQUESTS",
        500.. => "INTERNAL_SERVER_ERROR",
        _ => "Bad Request",
    }
}

/// `{"err_code", "err_msg", "request_id"}`.
pub fn error_body(status: StatusCode, message: &str) -> Value {
    json!({"err_code": err_code(status), "err_msg": message, "request_id": common::request_id()})
}

/// Deepgram's error answer.
pub(super) fn err(status: StatusCode, message: &str) -> Resp {
    json_response(status, &error_body(status, message))
}

fn bad(message: &str) -> Resp {
    err(StatusCode::BAD_REQUEST, message)
}

/// The key of `Authorization: Token K`.
pub(super) fn token(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("token"))
        .map(|(_, key)| key)
}

/// The model's name in `model_info` (`base`: `general`, else
/// `general-<model>`).
pub(super) fn model_name(model: &str) -> String {
    match model {
        "base" => "general".to_owned(),
        m => format!("general-{m}"),
    }
}

/// Answers one Deepgram request.
pub async fn route(sh: &Arc<Shared>, req: &Req) -> Resp {
    if !common::key_ok(sh, token(&req.headers)) {
        return err(StatusCode::UNAUTHORIZED, "Invalid credentials.");
    }
    let out = match (req.method.as_str(), req.path.trim_end_matches('/')) {
        ("POST", "/v1/listen") => listen(sh, req).await,
        ("POST", "/v1/speak") => speak(sh, req),
        _ => Err(err(
            StatusCode::NOT_FOUND,
            &format!("Not found: {} {}", req.method, req.path),
        )),
    };
    out.unwrap_or_else(|e| e)
}

/// A query flag set to `true`.
pub(super) fn flag(req: &Req, name: &str) -> bool {
    req.query_param(name).is_some_and(|v| v == "true")
}

/// The audio of a `/v1/listen` request: the body, or the download of a
/// JSON body's `url`.
async fn audio_of(sh: &Shared, req: &Req) -> Result<Bytes, Resp> {
    let json = req
        .content_type
        .as_deref()
        .is_some_and(|ct| ct.to_ascii_lowercase().contains("json"));
    if !json {
        if req.body.is_empty() {
            return Err(bad(
                "Bad Request: failed to process audio: corrupt or unsupported data",
            ));
        }
        return Ok(req.body.clone());
    }
    let url = serde_json::from_slice::<Value>(&req.body)
        .ok()
        .and_then(|v| v.get("url").and_then(Value::as_str).map(str::to_owned))
        .ok_or_else(|| bad("Bad Request: the JSON body must be {\"url\": \"...\"}"))?;
    common::fetch(sh, &url)
        .await
        .map_err(|e| bad(&format!("Bad Request: {e}")))
}

/// `POST /v1/listen?model=...`: the fixed transcript, timed over the
/// claimed duration.
async fn listen(sh: &Arc<Shared>, req: &Req) -> R {
    let data = audio_of(sh, req).await?;
    let measured = audio::probe_duration(&data);
    let claimed = common::claimed(sh, measured);
    let model = req.query_param("model").unwrap_or_else(|| "base".into());
    let punctuated = flag(req, "punctuate") || flag(req, "smart_format");
    let words: Vec<Value> = common::timed_words(claimed)
        .into_iter()
        .map(|(w, start, end)| {
            let bare: String = w.chars().filter(|c| c.is_alphanumeric()).collect();
            let mut word = json!({"word": bare.to_lowercase(), "start": start, "end": end, "confidence": 0.99});
            if punctuated {
                word["punctuated_word"] = json!(w);
            }
            word
        })
        .collect();
    let transcript = if punctuated {
        common::TRANSCRIPT.to_owned()
    } else {
        let bare: Vec<&str> = words.iter().filter_map(|w| w["word"].as_str()).collect();
        bare.join(" ")
    };
    let request_id = common::request_id();
    let name = model_name(&model);
    let body = json!({
        "metadata": {
            "transaction_key": "deprecated",
            "request_id": request_id,
            "sha256": hex::encode(Sha256::digest(&data)),
            "created": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "duration": claimed,
            "channels": 1,
            "models": [MODEL_UUID],
            "model_info": {MODEL_UUID: {"name": name, "version": "2025-01-01.0", "arch": model}},
        },
        "results": {"channels": [{"alternatives": [{"transcript": transcript, "confidence": 0.99, "words": words}]}]},
    });
    let mut r = json_response(StatusCode::OK, &body);
    common::header(&mut r, "dg-request-id", &request_id);
    common::header(&mut r, "x-sim-audio-duration", &measured.to_string());
    Ok(r)
}

/// The audio `/v1/speak` sends: `encoding` (default mp3), `container`,
/// `sample_rate` (linear16: default 24000).
fn speak_format(req: &Req) -> Result<Audio, Resp> {
    let encoding = req.query_param("encoding").unwrap_or_else(|| "mp3".into());
    let container = req.query_param("container");
    let rate = match req.query_param("sample_rate") {
        None => None,
        Some(r) => Some(
            r.parse::<u32>()
                .ok()
                .filter(|r| [8000, 16000, 24000, 32000, 48000].contains(r))
                .ok_or_else(|| bad(&format!("Bad Request: unsupported sample_rate {r}")))?,
        ),
    };
    match (encoding.as_str(), container.as_deref()) {
        ("mp3", None) if rate.is_none() => Ok(Audio::Mp3(22050)),
        ("mp3", _) => Err(bad("Bad Request: mp3 takes neither a container nor a sample_rate")),
        ("linear16", None | Some("wav")) => Ok(Audio::Wav { rate: rate.unwrap_or(24000), float: false }),
        ("linear16", Some("none")) => Ok(Audio::Pcm { rate: rate.unwrap_or(24000), float: false }),
        (e, c) => Err(bad(&format!(
            "Bad Request: encoding {e} with container {} is not supported by the simulator (mp3, linear16 with wav or none)",
            c.unwrap_or("(default)")
        ))),
    }
}

/// `POST /v1/speak?model=aura-...`: JSON `{"text"}`, the audio paced.
fn speak(sh: &Arc<Shared>, req: &Req) -> R {
    let model = req
        .query_param("model")
        .unwrap_or_else(|| "aura-asteria-en".into());
    if !model.starts_with("aura-") {
        return Err(bad(&format!(
            "Bad Request: no such model/version/tier combination found: {model}"
        )));
    }
    let text = serde_json::from_slice::<Value>(&req.body)
        .ok()
        .and_then(|v| v.get("text").and_then(Value::as_str).map(str::to_owned))
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| bad("Bad Request: the JSON body must have a non-empty \"text\""))?;
    let format = speak_format(req)?;
    let chars = text.chars().count();
    let speech = common::speak(sh, chars, 1.0, format, "application/octet-stream");
    let mut r = common::paced(sh, speech);
    common::header(&mut r, "dg-model-name", &model);
    common::header(&mut r, "dg-model-uuid", MODEL_UUID);
    common::header(&mut r, "dg-char-count", &chars.to_string());
    common::header(&mut r, "dg-request-id", &common::request_id());
    Ok(r)
}
