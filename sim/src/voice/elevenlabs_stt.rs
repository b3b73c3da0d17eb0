//! ElevenLabs' `POST /v1/speech-to-text`: multipart `model_id` (`scribe_v1`,
//! `scribe_v2`) and either a `file` or a `cloud_storage_url` (downloaded
//! with the simulator's client); answers the fixed transcript with word and
//! spacing entries timed over the CLAIMED duration (measured ×
//! `stt_duration_factor`), the measured seconds in `x-sim-audio-duration`
//! and the claimed ones in `x-sim-claimed-duration`.

use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Value};

use super::common;
use super::elevenlabs::{detail, invalid_field, not_found, stt_model};
use crate::audio;
use crate::request::Req;
use crate::response::{json_response, Resp};
use crate::shared::Shared;

/// `POST /v1/speech-to-text` (already authorized).
pub async fn transcribe(sh: &Arc<Shared>, req: &Req) -> Resp {
    if req.method != http::Method::POST {
        return not_found(req);
    }
    match answer(sh, req).await {
        Ok(r) | Err(r) => r,
    }
}

/// A multipart text field.
fn field(req: &Req, name: &str) -> Option<String> {
    let p = req.part(name).filter(|p| p.filename.is_none())?;
    std::str::from_utf8(&p.data)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The audio: the `file` part, or the download of `cloud_storage_url`.
async fn audio_of(sh: &Shared, req: &Req) -> Result<Bytes, Resp> {
    let file = req.part("file").map(|p| p.data.clone());
    let url = field(req, "cloud_storage_url").filter(|u| !u.is_empty());
    match (file, url) {
        (Some(_), Some(_)) | (None, None) => Err(detail(
            StatusCode::BAD_REQUEST,
            "invalid_parameters",
            "Exactly one of the parameters file or cloud_storage_url must be provided.",
        )),
        (Some(f), None) if f.is_empty() => Err(detail(
            StatusCode::BAD_REQUEST,
            "invalid_audio",
            "The uploaded file is empty.",
        )),
        (Some(f), None) => Ok(f),
        (None, Some(u)) => common::fetch(sh, &u)
            .await
            .map_err(|e| detail(StatusCode::BAD_REQUEST, "invalid_cloud_storage_url", &e)),
    }
}

async fn answer(sh: &Arc<Shared>, req: &Req) -> Result<Resp, Resp> {
    let model = field(req, "model_id")
        .ok_or_else(|| invalid_field("model_id", "Field required", "missing"))?;
    if !stt_model(&model) {
        return Err(invalid_field(
            "model_id",
            "Input should be 'scribe_v1' or 'scribe_v2'",
            "literal_error",
        ));
    }
    let data = audio_of(sh, req).await?;
    let measured = audio::probe_duration(&data);
    let claimed = common::claimed(sh, measured);
    let language = field(req, "language_code")
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| "en".into());
    let timed = common::timed_words(claimed);
    let mut words: Vec<Value> = Vec::new();
    for (i, (w, start, end)) in timed.iter().enumerate() {
        if i > 0 {
            words.push(json!({"text": " ", "start": start, "end": start, "type": "spacing", "speaker_id": "speaker_0", "logprob": 0.0}));
        }
        words.push(json!({"text": w, "start": start, "end": end, "type": "word", "speaker_id": "speaker_0", "logprob": 0.0}));
    }
    let body = json!({
        "language_code": language,
        "language_probability": 0.98,
        "text": common::TRANSCRIPT,
        "words": words,
        "transcription_id": uuid::Uuid::new_v4().simple().to_string(),
    });
    let mut r = json_response(StatusCode::OK, &body);
    common::header(&mut r, "request-id", &common::request_id());
    common::header(&mut r, "x-sim-audio-duration", &measured.to_string());
    common::header(&mut r, "x-sim-claimed-duration", &claimed.to_string());
    Ok(r)
}
