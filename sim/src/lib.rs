//! # Provider simulator
//!
//! An in-memory stand-in for the upstream voice provider (Resemble AI) that the
//! gateway proxies. It speaks the provider's real paths and shapes (as
//! `upstream.md` records them), so pointing `PROVIDER_BASE_URL` at
//! [`Sim::base_url`] and `PROVIDER_SYNTH_URL` at [`Sim::synth_url`] exercises the
//! gateway end to end without the network.
//!
//! One port serves everything:
//!
//! * `/api/v2/...`: the main REST API (voices, recordings, voice design,
//!   speech-to-text, enhance, edit, detect, intelligence, tracing, watermark,
//!   identity, projects, clips, agents, knowledge items, billing usage);
//! * `POST /synthesize`: the synthesis cluster (real WAV / MP3 audio);
//! * `/v1/...`: an OpenAI-compatible model provider ([`Sim::llm_url`]);
//! * `/v1/checkout/sessions...`: Stripe's Checkout Sessions, and
//!   `/__sim/stripe/...` its control calls (pay a session: a signed
//!   webhook), see [`stripe`];
//! * `/v1/messages`, `/v1/messages/count_tokens`: Anthropic's Messages API
//!   (key in `x-api-key`), and `/v1beta/...`: Google's Gemini API (key in
//!   `x-goog-api-key`), both with [`Sim::url`] as their base;
//! * ElevenLabs' `/v1/text-to-speech/{voice_id}[/stream]`,
//!   `/v1/speech-to-text`, `/v1/voices` (key in `xi-api-key`), Deepgram's
//!   `/v1/listen`, `/v1/speak` (`Authorization: Token K`) and Cartesia's
//!   `/tts/bytes`, `/voices` (`X-API-Key` or `Authorization: Bearer`, and
//!   `Cartesia-Version`), all with [`Sim::url`] as their base, see [`voice`];
//! * WebSockets (a `GET` with `Upgrade: websocket`, [`upgrade`]): OpenAI's
//!   Realtime API at `/v1/realtime?model=M` (`Authorization: Bearer K`, or
//!   the browser's `realtime, openai-insecure-api-key.K` subprotocols;
//!   session, conversation and responses with text or PCM16 audio deltas
//!   and documented token counts, see [`realtime`]) and Deepgram's live
//!   transcription at `/v1/listen?encoding=linear16&sample_rate=…`
//!   (`Authorization: Token K`; a `Results` message a second of audio, a
//!   `Metadata` message on `CloseStream`, see [`voice::deepgram_live`]);
//!   both also under `/p/{name}/`, logged, faultable before the upgrade,
//!   their clients' messages listed by `GET /__sim/realtime/events`;
//! * `/__sim/...`: the control plane (faults, request log, WebSocket client
//!   events, jobs, config, webhooks, billing override, reset), never faulted, never logged, no
//!   credentials;
//! * `/__sim/media/{id}.{wav|mp3|png}`: result media (no credentials, but
//!   logged and faultable like any upstream call, since the gateway downloads it).
//!
//! With [`SimConfig::api_key`] set, provider requests need
//! `Authorization: Bearer K`, `Authorization: Token token=K` or
//! `x-access-token: K` (any of them, on every host); otherwise 401. The
//! Anthropic, Gemini and voice-vendor paths check their own headers instead
//! (`x-api-key`, `x-goog-api-key`, `xi-api-key`, `Authorization: Token K`
//! for Deepgram, `X-API-Key` or `Authorization: Bearer K` for Cartesia:
//! required, and equal to the key when one is set).
//!
//! Asynchronous jobs move `pending` (first third of the job duration) →
//! `processing` → `completed`; on completion a signed webhook is sent to the
//! configured URL (see [`webhook`]).
//!
//! ```no_run
//! # async fn demo() {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! let sim = sim::start(listener, sim::SimConfig::default()).await;
//! println!("main API at {}, synthesis at {}", sim.base_url(), sim.synth_url());
//! # }
//! ```
//!
//! # Layout
//!
//! * [`server`]: accept loop (hyper 1, TCP_NODELAY) and the per-request pipeline
//!   (buffer body → log → faults → credentials → route);
//! * [`shared`]: the state shared by the server, handlers and background tasks;
//! * [`request`]: the buffered request (query, body fields, multipart parts);
//! * [`response`]: response types and helpers (JSON, upstream-style errors);
//! * [`control`]: the `/__sim/...` control plane and media serving;
//! * [`resources`]: the provider API routes and handlers, with a generic
//!   in-memory CRUD [store](resources::store);
//! * [`jobs`]: asynchronous jobs: the [model](jobs::model) (status clock,
//!   result items) and the runtime (submission, completion, probes);
//! * [`openai`]: the OpenAI-compatible model provider under `/v1` (chat,
//!   completions with SSE streaming, the Responses API, embeddings, images,
//!   videos, speech, transcription) for the general gateway area;
//! * [`anthropic`]: Anthropic's Messages API (answers, SSE events, prompt
//!   cache, token count) and [`gemini`]: Google's Gemini API (generate,
//!   stream, embed, cached contents), both following the reply rules of
//!   [`llm`];
//! * [`voice`]: ElevenLabs', Deepgram's and Cartesia's speech and
//!   transcription APIs (paced audio streams, claimed durations), with
//!   Deepgram's live transcription over a WebSocket
//!   ([`voice::deepgram_live`]);
//! * [`realtime`]: OpenAI's Realtime API over a WebSocket: the
//!   [session](realtime::session) and its client events, the
//!   [response](realtime::response) in flight, the [events](realtime::events)
//!   and usage (token rules);
//! * [`upgrade`]: the WebSocket handshake over hyper's upgrade (`101`,
//!   `Sec-WebSocket-Accept`, the subprotocol) and the session task;
//! * [`webhook`]: HMAC signing and delivery with retries;
//! * [`stripe`]: Stripe's side of buying credits (sessions, signed events);
//! * [`faults`]: fault-injection rules and matching;
//! * [`log`]: the bounded request log;
//! * [`audio`]: WAV (hound) and MP3 (silent MPEG frames) generation and probing;
//! * [`billing`]: per-day usage counters behind `GET /account/billing_usage`.

// Handlers return `Result<Response, Response>` so `?` can short-circuit with an
// error response; the large `Err` variant is deliberate.
#![allow(clippy::result_large_err)]

pub mod anthropic;
pub mod audio;
pub mod billing;
pub mod control;
pub mod faults;
pub mod gemini;
pub mod jobs;
pub mod llm;
pub mod log;
pub mod openai;
pub mod realtime;
pub mod request;
pub mod resources;
pub mod response;
pub mod schema;
pub mod server;
pub mod shared;
pub mod stripe;
pub mod upgrade;
pub mod voice;
pub mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use shared::Shared;

/// Simulator settings. Each can also be changed at run time with
/// `POST /__sim/config` (`job_duration` as `job_duration_ms`).
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// How long an asynchronous job (or voice build) takes to complete.
    pub job_duration: Duration,
    /// Where completion webhooks are POSTed; none are sent when `None`.
    pub webhook_url: Option<String>,
    /// Key of the `X-Provider-Signature: sha256=<hex>` HMAC; unsigned when `None`.
    pub webhook_secret: Option<String>,
    /// When set, provider requests without this credential get 401.
    pub api_key: Option<String>,
    /// Synthesized audio length per input character (at least 0.5 s in total).
    pub seconds_per_char: f64,
    /// Pause between the chunks of a streamed voice-vendor speech answer
    /// (ElevenLabs `/stream`, Deepgram `/v1/speak`, Cartesia `/tts/bytes`), ms.
    pub tts_chunk_ms: u64,
    /// Factor on the audio duration a voice vendor's transcription CLAIMS
    /// (Deepgram `metadata.duration`, ElevenLabs word timings, OpenAI
    /// `usage.seconds`); the measured one stays in `x-sim-audio-duration`.
    pub stt_duration_factor: f64,
    /// Pause between the delta events of a Realtime API response
    /// ([`realtime`]), ms.
    pub realtime_delta_ms: u64,
    /// Factor on every figure of a Realtime API response's `usage` (1.0:
    /// the documented counts), so a gateway meets implausible reports.
    pub realtime_usage_factor: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            job_duration: Duration::from_millis(300),
            webhook_url: None,
            webhook_secret: None,
            api_key: None,
            seconds_per_char: 0.06,
            tts_chunk_ms: 20,
            stt_duration_factor: 1.0,
            realtime_delta_ms: 5,
            realtime_usage_factor: 1.0,
        }
    }
}

/// A running simulator. Dropping it (or calling [`Sim::shutdown`]) stops the
/// accept loop, open connections and pending job timers.
pub struct Sim {
    /// The bound address.
    pub addr: SocketAddr,
    /// State shared with the server and background tasks.
    shared: Arc<Shared>,
    /// The accept loop.
    accept: tokio::task::JoinHandle<()>,
}

/// Starts serving on `listener` in the background and returns the handle.
pub async fn start(listener: tokio::net::TcpListener, config: SimConfig) -> Sim {
    let addr = listener.local_addr().expect("listener has a local address");
    let shared = Shared::new(addr, config);
    let accept = tokio::spawn(server::accept_loop(listener, shared.clone()));
    Sim {
        addr,
        shared,
        accept,
    }
}

impl Sim {
    /// The main API base, `http://ADDR/api/v2` (for `PROVIDER_BASE_URL`).
    pub fn base_url(&self) -> String {
        format!("http://{}/api/v2", self.addr)
    }

    /// The synthesis cluster base, `http://ADDR` (for `PROVIDER_SYNTH_URL`).
    pub fn synth_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The OpenAI-compatible base, `http://ADDR/v1` (the `llm` upstream base).
    pub fn llm_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The server root, `http://ADDR` (control plane under `/__sim`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the simulator (same as dropping it) and waits for the accept loop.
    pub async fn shutdown(mut self) {
        self.shared.stop();
        let accept = std::mem::replace(&mut self.accept, tokio::spawn(async {}));
        let _ = accept.await;
    }

    /// The request log, as `GET /__sim/requests` returns its entries.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.log.render()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.shared.log.clear();
    }

    /// Adds a fault rule (same JSON as `POST /__sim/faults`); returns its id.
    pub fn add_fault(&self, rule: Value) -> Result<u64, String> {
        self.shared.faults.add(&rule)
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    /// Completes every job with this uuid now (as `POST /__sim/jobs/{uuid}/complete`).
    /// Returns false when no such job exists.
    pub fn complete_job(&self, uuid: &str) -> bool {
        jobs::force(&self.shared, uuid, jobs::Status::Completed).is_some()
    }

    /// Webhook deliveries so far, as `GET /__sim/webhooks` returns them.
    pub fn webhooks(&self) -> Vec<Value> {
        self.shared.webhook_log()
    }

    /// Shared state, for in-process tests that need more than the helpers above.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.shared.stop();
        self.accept.abort();
    }
}
