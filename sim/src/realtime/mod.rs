//! OpenAI's Realtime API (GA shape) over a WebSocket on the simulator's
//! port: `GET /v1/realtime?model=M` (also `/p/{name}/v1/realtime`) with
//! `Upgrade: websocket`. Logged and faultable like any `/v1` request: a
//! fault rule on the path answers its status instead of the upgrade.
//!
//! **Credentials** (checked before the upgrade, 401 otherwise, when
//! `api_key` is set): `Authorization: Bearer K` (or the simulator's other
//! credential headers), or the browser form, subprotocols `realtime,
//! openai-insecure-api-key.K`. The `realtime` subprotocol, when offered,
//! is answered.
//!
//! **On connect**: `session.created` with the session: `type: "realtime"`,
//! `id` (`sess_…`), `object: "realtime.session"`, `model` (the query's,
//! `gpt-realtime` without one), `output_modalities: ["audio"]`,
//! `instructions: ""`, `audio.input.format` and `audio.output.format`
//! `{"type": "audio/pcm", "rate": 24000}`, `audio.output.voice: "alloy"`,
//! `max_output_tokens: "inf"`.
//!
//! **Client events** (every text message is recorded, in order, with the
//! session id: `GET /__sim/realtime/events`, see [`crate::log::ClientEvents`]):
//!
//! | Event | Answer |
//! |---|---|
//! | `session.update` | its `session` fields merged in (objects field by field; `output_modalities` `["text"]` or `["audio"]`, `max_output_tokens` 1..=4096 or `"inf"`) → `session.updated` with the whole session |
//! | `input_audio_buffer.append` | `audio` (base64) added to the buffer; no answer |
//! | `input_audio_buffer.commit` | the buffer (at least 100 ms, else error `input_audio_buffer_commit_empty`) becomes a user item with an `input_audio` part → `input_audio_buffer.committed` (`previous_item_id`, `item_id`), `conversation.item.added`, `conversation.item.done` |
//! | `input_audio_buffer.clear` | `input_audio_buffer.cleared` |
//! | `conversation.item.create` | a `message` item: `user`/`system` with `input_text` (and `input_audio`) parts, `assistant` with `output_text` → `conversation.item.added`, `conversation.item.done` |
//! | `response.create` | a response (below); optional `response` with `output_modalities`, `max_output_tokens`, `instructions` (else the session's); one in flight already: error `conversation_already_has_active_response` |
//! | `response.cancel` | the response in flight ends, `response.done` with `status: "cancelled"` (`status_details.reason: "client_cancelled"`) and what was sent; none: error `response_cancel_not_active` |
//!
//! Anything else (unknown `type`, no `type`, not JSON, a binary message,
//! a bad field) gets `{"type": "error", "event_id", "error": {"type":
//! "invalid_request_error", "code", "message", "param": null, "event_id":
//! <the client's>}}` and the session goes on.
//!
//! **A response**: `response.created`, `response.output_item.added`,
//! `response.content_part.added`, then one step a word,
//! `realtime_delta_ms` apart (config, default 5): text modality
//! `response.output_text.delta`; audio modality `response.output_audio.delta`
//! (base64 PCM16 24 kHz mono of a 440 Hz tone: that word's share of audio
//! as long as the whole text would be spoken, `seconds_per_char` a
//! character, at least 0.5 s) then `response.output_audio_transcript.delta`;
//! then `response.output_text.done` (`text`), or `response.output_audio.done`
//! and `response.output_audio_transcript.done` (`transcript`);
//! `response.content_part.done`, `response.output_item.done` and
//! `response.done` with the `realtime.response` (`id` `resp_…`, `status`,
//! `status_details`, `output` [the assistant message], `usage`).
//!
//! **The reply** is [`crate::llm::text_reply`]'s to the last user item's
//! text (an audio item has none): `"This is a simulated reply to: "` and
//! its first 8 words, cycled to 12 words. `max_output_tokens` below 12 cuts
//! it to that many words: `status: "incomplete"`, `status_details:
//! {"type": "incomplete", "reason": "max_output_tokens"}`. The reply's
//! text (what was sent of it) joins the conversation as an assistant item.
//!
//! **Usage** (`usage` of `response.done`; a token of text is a
//! whitespace-separated word):
//!
//! * `input_token_details.text_tokens`: the words of the instructions in
//!   effect plus of every text item of the conversation so far (user,
//!   system, and the earlier replies' text);
//! * `input_token_details.audio_tokens`: for each input audio item,
//!   ⌈10 × its seconds⌉ (PCM16: bytes / (2 × rate); G.711: bytes / 8000);
//! * `cached_tokens`: 0 for the session's first response; after, of each
//!   kind the smaller of this input's and the previous response's
//!   (`cached_tokens_details.text_tokens`, `.audio_tokens`; their sum);
//! * `output_token_details.text_tokens`: the words sent;
//!   `.audio_tokens`: ⌈20 × seconds of audio sent⌉ (0 for text);
//! * `input_tokens`, `output_tokens`, `total_tokens`: the sums.
//!
//! `realtime_usage_factor` (config, default 1.0) multiplies each figure
//! (rounded) before the sums, so a gateway can be shown implausible
//! reports. Not simulated: server VAD (`turn_detection` is stored only),
//! tools, input transcription, `conversation.item.retrieve`/`delete`/
//! `truncate`, WebRTC; output audio is PCM16 24 kHz whatever the format.
//!
//! The session is [`session`], a response [`response`], the objects and
//! usage [`events`].

pub mod events;
pub mod response;
pub mod session;

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use http::StatusCode;
use hyper::upgrade::OnUpgrade;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use crate::request::Req;
use crate::response::{error, Resp};
use crate::shared::Shared;
use crate::upgrade::{self, Socket};

/// The `api` of this API's entries in the client-event log.
pub const API: &str = "openai-realtime";

/// The browser form's subprotocol prefix before the key.
const KEY_PROTOCOL: &str = "openai-insecure-api-key.";

/// `GET /v1/realtime` with `Upgrade: websocket`: credentials, then the
/// upgrade and the session.
pub fn connect(sh: &Arc<Shared>, req: &Req, on: OnUpgrade) -> Resp {
    let offered = upgrade::offered(&req.headers);
    let key = sh.config.read().unwrap().api_key.clone();
    let by_protocol = offered
        .iter()
        .filter_map(|p| p.strip_prefix(KEY_PROTOCOL))
        .any(|k| key.as_deref().is_none_or(|want| k == want));
    if !sh.authorized(&req.headers) && !by_protocol {
        return error(
            StatusCode::UNAUTHORIZED,
            "Invalid or missing API token",
            None,
        );
    }
    let protocol = offered
        .iter()
        .any(|p| p == "realtime")
        .then_some("realtime");
    let model = req
        .query_param("model")
        .unwrap_or_else(|| "gpt-realtime".into());
    let shared = sh.clone();
    upgrade::accept(sh, &req.headers, on, protocol, &[], move |ws| {
        run(shared, ws, model)
    })
}

/// Sends `events`, one text message each.
async fn send(
    ws: &mut futures_util::stream::SplitSink<Socket, Message>,
    events: Vec<Value>,
) -> bool {
    for e in events {
        if ws.feed(Message::text(e.to_string())).await.is_err() {
            return false;
        }
    }
    ws.flush().await.is_ok()
}

/// One session: client events answered as they come, the response in
/// flight stepped every `realtime_delta_ms`.
async fn run(sh: Arc<Shared>, ws: Socket, model: String) {
    let (mut tx, mut rx) = ws.split();
    let mut s = session::Session::new(&model);
    let sid = s.id();
    if !send(&mut tx, vec![s.created()]).await {
        return;
    }
    loop {
        let delay = Duration::from_millis(sh.config.read().unwrap().realtime_delta_ms);
        let active = s.turn.is_some();
        let out = tokio::select! {
            msg = rx.next() => match msg {
                Some(Ok(Message::Text(t))) => {
                    sh.ws_events.push(API, &sid, Some(t.as_str()), t.len());
                    s.handle(t.as_str(), &sh.config())
                }
                Some(Ok(Message::Binary(b))) => {
                    sh.ws_events.push(API, &sid, None, b.len());
                    let m = "Binary messages are not supported: send events as JSON text.";
                    vec![events::error("invalid_json", m, None)]
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => Vec::new(),
            },
            _ = tokio::time::sleep(delay), if active => s.tick(),
        };
        if !send(&mut tx, out).await {
            break;
        }
    }
}
