//! Three voice vendors' APIs on the same port, each under its own real
//! paths with its own key header and error shape ([`crate::Sim::url`] is
//! every one's base). Logged and faultable like every provider call; an
//! injected error without a `body` takes the vendor's shape
//! ([`error_body`]).
//!
//! | Vendor | Method | Path | Notes |
//! |---|---|---|---|
//! | ElevenLabs | POST | `/v1/text-to-speech/{voice_id}` | JSON `text` (required), `model_id`, `voice_settings` (`speed` 0.7–1.2 shortens or lengthens), `language_code`, `seed`; query `output_format` (`mp3_{22050,24000,44100}_<kbps>`, `pcm_<rate>`, `wav_<rate>`; default `mp3_44100_128`; else 422); headers `request-id`, `x-character-count`, `history-item-id`, `x-sim-audio-duration` |
//! | ElevenLabs | POST | `/v1/text-to-speech/{voice_id}/stream` | the same, the audio paced ([`common::paced`]) |
//! | ElevenLabs | POST | `/v1/speech-to-text` | multipart `model_id` (`scribe_v1`, `scribe_v2`), `file` or `cloud_storage_url` ([`elevenlabs_stt`]) |
//! | ElevenLabs | GET | `/v1/voices`, `/v2/voices` | five premade voices |
//! | Deepgram | POST | `/v1/listen` | raw audio or JSON `{"url"}`; query `model`, `punctuate`, `smart_format` (punctuated words), others accepted ([`deepgram`]) |
//! | Deepgram | GET (WebSocket) | `/v1/listen` | live transcription: `encoding` (`linear16`, `linear32`, `mulaw`, `alaw`) with `sample_rate`, or none for a WAV stream; binary audio, a `Results` message a second, `KeepAlive`, `Finalize`, `CloseStream` (then `Metadata` and a normal close) ([`deepgram_live`]) |
//! | Deepgram | POST | `/v1/speak` | JSON `{"text"}`; query `model` (`aura-…`, else 400), `encoding` (`mp3` default, `linear16`), `container` (`wav`, `none`), `sample_rate`; paced; headers `dg-model-name`, `dg-model-uuid`, `dg-char-count`, `dg-request-id` |
//! | Cartesia | POST | `/tts/bytes` | JSON `model_id`, `transcript`, `voice` `{"mode": "id", "id"}`, `output_format` (all required), `language`, `speed`; paced ([`cartesia`]) |
//! | Cartesia | GET | `/voices` | three public voices |
//!
//! Keys: ElevenLabs `xi-api-key`, Deepgram `Authorization: Token K`,
//! Cartesia `X-API-Key` or `Authorization: Bearer` (plus `Cartesia-Version`):
//! required, and equal to [`crate::SimConfig::api_key`] when one is set.
//!
//! Speech is as long as the OpenAI speech would be for the text
//! (`seconds_per_char`); the paced answers come in [`common::CHUNKS`]
//! pieces `tts_chunk_ms` apart. Transcriptions answer a fixed sentence,
//! timed over the claimed duration (`stt_duration_factor` × measured).

pub mod cartesia;
pub mod common;
pub mod deepgram;
pub mod deepgram_live;
pub mod elevenlabs;
pub mod elevenlabs_stt;

use std::sync::Arc;

use http::StatusCode;
use serde_json::Value;

use crate::request::Req;
use crate::response::Resp;
use crate::shared::Shared;

/// Whose API a path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// ElevenLabs.
    ElevenLabs,
    /// Deepgram.
    Deepgram,
    /// Cartesia.
    Cartesia,
}

/// The vendor owning `path` (a named provider's `/p/{name}` prefix
/// dropped), if any.
pub fn owner(path: &str) -> Option<Vendor> {
    let path = match path
        .strip_prefix("/p/")
        .and_then(|r| r.find('/').map(|i| &r[i..]))
    {
        Some(rest) => rest,
        None => path,
    };
    let path = path.trim_end_matches('/');
    let under = |p: &str| path == p || path.starts_with(&format!("{p}/"));
    if under("/v1/text-to-speech")
        || under("/v1/speech-to-text")
        || path == "/v1/voices"
        || path == "/v2/voices"
    {
        Some(Vendor::ElevenLabs)
    } else if path == "/v1/listen" || path == "/v1/speak" {
        Some(Vendor::Deepgram)
    } else if under("/tts") || path == "/voices" {
        Some(Vendor::Cartesia)
    } else {
        None
    }
}

/// Answers one request of `vendor` (each checks its own key).
pub async fn route(sh: &Arc<Shared>, req: &Req, vendor: Vendor) -> Resp {
    match vendor {
        Vendor::ElevenLabs => {
            if let Err(r) = elevenlabs::authorize(sh, req) {
                return r;
            }
            if req.path.trim_end_matches('/') == "/v1/speech-to-text" {
                elevenlabs_stt::transcribe(sh, req).await
            } else {
                elevenlabs::route(sh, req)
            }
        }
        Vendor::Deepgram => deepgram::route(sh, req).await,
        Vendor::Cartesia => cartesia::route(sh, req),
    }
}

/// The error body a vendor path answers with this status, when `path` is a
/// vendor's.
pub fn error_body(status: StatusCode, path: &str, message: &str) -> Option<Value> {
    Some(match owner(path)? {
        Vendor::ElevenLabs => elevenlabs::error_body(status, message),
        Vendor::Deepgram => deepgram::error_body(status, message),
        Vendor::Cartesia => cartesia::error_body(status, message),
    })
}
