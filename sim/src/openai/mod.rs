//! The OpenAI-compatible model provider behind the general gateway area
//! (`base = "llm"` rows of `endpoints.toml`), under `/v1` on the same port
//! ([`crate::Sim::llm_url`]). Same pipeline as the voice provider: logged,
//! faultable, and credential-checked when `api_key` is configured.
//!
//! | Method | Path | Notes |
//! |---|---|---|
//! | POST | `/v1/chat/completions` | `messages` required; `stream: true` answers server-sent events, one word per chunk ([`stream_delay_ms`](crate::shared::Shared::stream_delay_ms) apart), `stream_options.include_usage` adds a usage chunk; `max_tokens` sets the reply length (finish `length`); a `response_format` of type `json_schema` makes the reply the schema's smallest instance ([`crate::schema`], finish `stop`); `n` choices (completions: `best_of` generated and billed); `usage.prompt_tokens` counts every field a provider counts ([`tokens`]) |
//! | | | `tools` given: a tool call when the last user text names one ([`tools`]) |
//! | POST | `/v1/completions` | `prompt` required; same streaming rules |
//! | POST | `/v1/responses` | OpenAI's Responses API ([`responses`]): the chat reply as output items (`reasoning` for a reasoning model, `function_call`, `message`), OpenAI's `Response` object, its streamed events (`sequence_number` from 0, no `[DONE]`); `max_output_tokens` cuts it (`incomplete`); only `function` tools (a hosted tool such as `web_search` is a 400: the simulator offers none); an unknown field is a 400 naming it; stored per API key unless `store: false`, continued by `previous_response_id`; `background: true` answers `queued`, completes after [`background_ms`](crate::shared::Shared::background_ms) |
//! | GET / DELETE | `/v1/responses/{id}` | the stored response as it stands / forgets it (then 404) |
//! | GET | `/v1/responses/{id}/input_items` | its input items, `after`, `limit` (default 20), `order` (default `desc`) → `{object: "list", data, first_id, last_id, has_more}` |
//! | POST | `/v1/responses/{id}/cancel` | an unfinished background response → `cancelled`; one made without `background`: 400 |
//! | POST | `/v1/embeddings` | `input` (or `text`): string or list; `dimensions` (default 16); deterministic unit vectors |
//! | POST | `/v1/images/generations` | `prompt` required; `n` (1..10), `size`, `response_format` `url` (PNG under `/__sim/media`) or `b64_json` |
//! | POST / GET | `/v1/videos`, `/v1/videos/{id}` | `queued` → `in_progress` → `completed` on the job clock |
//! | POST | `/v1/videos/{id}/cancel` | `cancelled` unless already finished (then 400) |
//! | GET | `/v1/videos/{id}/content` | the finished video (`video/mp4`, a small fixed MP4 header and payload: [`video::mp4_bytes`]); 400 `video_not_ready` before `completed` |
//! | POST | `/v1/audio/speech` | `input` required; `response_format` mp3 (default), wav or pcm; real audio, `x-sim-audio-duration` header |
//! | POST | `/v1/audio/transcriptions`, `/v1/audio/translations` | multipart `file` required; `response_format` json (default, with `usage.seconds`), text, verbose_json, srt, vtt; `usage.seconds` and `duration` claim `stt_duration_factor` × the measured seconds (in `x-sim-audio-duration`) |
//! | GET | `/v1/models`, `/v1/models/{id}` | a small fixed list |
//!
//! Errors use OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.
//!
//! The routes are here; each handler lives in the module named after what
//! it answers ([`chat`], [`responses`], [`embeddings`], [`images`],
//! [`videos`], [`speech`], [`transcription`]), with OpenAI's error shape in
//! [`errors`] and the records the store holds in [`video`] and
//! [`responses_store`].

pub mod chat;
pub mod embeddings;
pub mod errors;
pub mod images;
pub mod responses;
pub mod responses_answer;
pub mod responses_input;
pub mod responses_store;
pub mod responses_stream;
pub mod speech;
pub mod tokens;
pub mod tools;
pub mod transcription;
pub mod video;
pub mod videos;
pub mod wire;

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Value};

use crate::request::Req;
use crate::response::{json_response, Resp};
use crate::shared::Shared;

pub use embeddings::unit_vector;
pub use errors::{error_body, oai_error};
pub use images::{png_bytes, PNG_1X1};
pub use video::Video;
pub use videos::force_video;

/// Models listed by `GET /v1/models`.
pub const MODELS: [&str; 6] = [
    "sim-gpt",
    "sim-embed",
    "sim-image",
    "sim-video",
    "sim-tts",
    "sim-whisper",
];

/// Routes one `/v1/...` request.
pub fn route(sh: &Arc<Shared>, req: &Req) -> Resp {
    route_inner(sh, req).unwrap_or_else(|e| e)
}

fn route_inner(sh: &Arc<Shared>, req: &Req) -> Result<Resp, Resp> {
    let path = req.path.trim_end_matches('/');
    let segs: Vec<&str> = path.trim_start_matches("/v1/").split('/').collect();
    match (req.method.as_str(), segs.as_slice()) {
        ("POST", ["chat", "completions"]) => chat::chat(sh, req, true),
        ("POST", ["completions"]) => chat::chat(sh, req, false),
        ("POST", ["embeddings"]) => embeddings::embeddings(sh, req),
        ("POST", ["responses"]) => responses::create(sh, req),
        ("GET", ["responses", id]) => responses::get(sh, req, id),
        ("DELETE", ["responses", id]) => responses::delete(sh, req, id),
        ("GET", ["responses", id, "input_items"]) => responses::input_items(sh, req, id),
        ("POST", ["responses", id, "cancel"]) => responses::cancel(sh, req, id),
        ("POST", ["images", "generations"]) => images::images(sh, req),
        ("POST", ["videos"]) => videos::create(sh, req),
        ("GET", ["videos"]) => Ok(videos::list(sh)),
        ("GET", ["videos", id]) => videos::get(sh, id),
        ("GET", ["videos", id, "content"]) => videos::content(sh, id),
        ("POST", ["videos", id, "cancel"]) | ("DELETE", ["videos", id]) => videos::cancel(sh, id),
        ("POST", ["audio", "speech"]) => speech::speech(sh, req),
        ("POST", ["audio", "transcriptions"]) => transcription::transcription(sh, req, false),
        ("POST", ["audio", "translations"]) => transcription::transcription(sh, req, true),
        ("GET", ["models"]) => {
            let data: Vec<Value> = MODELS.iter().map(|m| model(m)).collect();
            Ok(json_response(
                StatusCode::OK,
                &json!({"object": "list", "data": data}),
            ))
        }
        ("GET", ["models", id]) if MODELS.contains(id) => {
            Ok(json_response(StatusCode::OK, &model(id)))
        }
        ("GET", ["models", id]) => Err(oai_error(
            StatusCode::NOT_FOUND,
            &format!("The model '{id}' does not exist"),
            Some("model"),
            Some("model_not_found"),
        )),
        _ => Err(oai_error(
            StatusCode::NOT_FOUND,
            &format!("Unknown request URL: {} {}", req.method, req.path),
            None,
            Some("unknown_url"),
        )),
    }
}

fn model(id: &str) -> Value {
    json!({"id": id, "object": "model", "created": 1_700_000_000, "owned_by": "provider-sim"})
}
