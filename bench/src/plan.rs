//! What a run is asked to do ([`Scenario`]s in a [`Plan`]) and where its
//! pieces run ([`Env`]: the simulator, the forwarder, the gateway and its key).

use std::net::SocketAddr;
use std::time::Duration;

use http::header::{HeaderName, HeaderValue, AUTHORIZATION};

use crate::row::Target;

/// A scenario, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Free pass-through GET of one voice.
    Free,
    /// Billed synthesis (audio stored, audit and usage committed).
    Billed,
    /// Streamed upload of a large file.
    Upload,
    /// Later GETs of a completed, mirrored enhance job.
    Mirror,
    /// A chat completion (JSON answer).
    Chat,
    /// A streamed chat completion (time to first and to last byte).
    #[value(name = "chat_stream")]
    ChatStream,
    /// The `chat` through the `anthropic` adapter (translation both ways).
    #[value(name = "chat_anthropic")]
    ChatAnthropic,
    /// `chat` through a route whose second deployment fails half its
    /// requests before the first byte.
    #[value(name = "chat_failover")]
    ChatFailover,
    /// A chat completion answered from the gateway's response cache.
    #[value(name = "chat_cached")]
    ChatCached,
    /// `chat` through the Responses API (translated both ways, stored).
    Responses,
    /// Streamed speech from an ElevenLabs deployment (time to first and
    /// to last audio byte).
    #[value(name = "tts_stream")]
    TtsStream,
    /// Realtime sessions over WebSocket, turns back to back (time per turn).
    Realtime,
    /// A batch of chat lines run by the gateway (lines/s against the same
    /// lines in a closed loop), and `chat`'s latency while one runs.
    Batch,
}

impl Scenario {
    /// Every scenario, in running order. The upload runs first, on the
    /// fresh gateway, so that its peak RSS is what the upload itself costs
    /// rather than the heap and idle connections the c=64 runs leave behind
    /// (those show in their own rows' peak RSS). The batches run last: the
    /// lines they leave in the database are no other scenario's.
    pub const ALL: [Scenario; 13] = [
        Scenario::Upload,
        Scenario::Free,
        Scenario::Billed,
        Scenario::Mirror,
        Scenario::Chat,
        Scenario::ChatStream,
        Scenario::ChatAnthropic,
        Scenario::ChatFailover,
        Scenario::ChatCached,
        Scenario::Responses,
        Scenario::TtsStream,
        Scenario::Realtime,
        Scenario::Batch,
    ];

    /// Its name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Free => "free",
            Scenario::Billed => "billed",
            Scenario::Upload => "upload",
            Scenario::Mirror => "mirror",
            Scenario::Chat => "chat",
            Scenario::ChatStream => "chat_stream",
            Scenario::ChatAnthropic => "chat_anthropic",
            Scenario::ChatFailover => "chat_failover",
            Scenario::ChatCached => "chat_cached",
            Scenario::Responses => "responses",
            Scenario::TtsStream => "tts_stream",
            Scenario::Realtime => "realtime",
            Scenario::Batch => "batch",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Scenarios, in order.
    pub scenarios: Vec<Scenario>,
    /// Concurrencies of `free` and `billed`.
    pub concurrency: Vec<usize>,
    /// Measured time per run.
    pub duration: Duration,
    /// Warm-up per run.
    pub warmup: Duration,
    /// Open-loop rate (requests/s), closed loop when `None`.
    pub rate: Option<f64>,
    /// Size of the uploaded file (bytes).
    pub upload_bytes: u64,
    /// Longest time one request may take.
    pub timeout: Duration,
    /// The targets each scenario runs at, in order (all three; the gateway
    /// alone for the second sync mode's runs).
    pub targets: Vec<Target>,
}

/// The running pieces.
pub struct Env {
    /// Simulator address and pid.
    pub sim: (SocketAddr, u32),
    /// Forwarder address and pid.
    pub forwarder: (SocketAddr, u32),
    /// Gateway address and pid.
    pub gateway: (SocketAddr, u32),
    /// API key of the gateway user.
    pub key: String,
}

impl Env {
    pub(crate) fn bearer(key: &str) -> Vec<(HeaderName, HeaderValue)> {
        vec![(
            AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {key}")).expect("key is a valid header value"),
        )]
    }

    /// Headers for the gateway.
    pub(crate) fn gateway_auth(&self) -> Vec<(HeaderName, HeaderValue)> {
        Env::bearer(&self.key)
    }

    /// Headers for the simulator (direct, or through the forwarder).
    pub(crate) fn sim_auth(&self) -> Vec<(HeaderName, HeaderValue)> {
        Env::bearer(crate::procs::SIM_KEY)
    }

    /// Anthropic's headers for the simulator.
    pub(crate) fn sim_anthropic_auth(&self) -> Vec<(HeaderName, HeaderValue)> {
        vec![
            (
                HeaderName::from_static("x-api-key"),
                HeaderValue::from_static(crate::procs::SIM_KEY),
            ),
            (
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static("2023-06-01"),
            ),
        ]
    }

    /// Address and pid of the process under test for `target` (the simulator for `direct`).
    pub fn endpoint(&self, target: Target) -> (SocketAddr, u32) {
        match target {
            Target::Direct => self.sim,
            Target::Forwarder => self.forwarder,
            Target::Gateway => self.gateway,
        }
    }
}
