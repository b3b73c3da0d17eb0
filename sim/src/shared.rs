//! State shared by the server, the handlers and background tasks
//! ([`Shared`]): configuration, the store, the request log, fault rules, the
//! outbound client, the synthesis audio cache, webhook records and the stop
//! signal.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::HeaderMap;
use serde_json::Value;
use tokio::sync::watch;

use crate::resources::store::Store;
use crate::SimConfig;

/// Cache key of rendered synthesis audio: (mp3?, sample rate, bits, duration ms).
pub type AudioKey = (bool, u32, u16, u64);

/// Rendered synthesis audio, cached by [`AudioKey`].
#[derive(Debug)]
pub struct Rendered {
    /// The audio file.
    pub bytes: Bytes,
    /// Base64 of the audio file.
    pub base64: String,
    /// Exact duration in seconds (ms precision).
    pub duration: f64,
    /// Sample rate actually used.
    pub sample_rate: u32,
}

/// State shared by the server, handlers and background tasks.
pub struct Shared {
    /// Bound address.
    pub addr: SocketAddr,
    /// `http://ADDR`, the prefix of media URLs.
    pub root: String,
    /// Run-time configuration (`POST /__sim/config` changes it).
    pub config: RwLock<SimConfig>,
    /// Resources, jobs, media and billing.
    pub store: Mutex<Store>,
    /// Request log.
    pub log: crate::log::RequestLog,
    /// What WebSocket clients sent (`GET /__sim/realtime/events`).
    pub ws_events: crate::log::ClientEvents,
    /// Fault rules.
    pub faults: crate::faults::Faults,
    /// Outbound HTTP client (webhooks, URL probes).
    pub client: reqwest::Client,
    /// Delay between server-sent events of streamed completions (ms).
    pub stream_delay_ms: std::sync::atomic::AtomicU64,
    /// How long a streamed answer's connection stays open after its last
    /// event before its body ends (ms; 0: at once), as a provider that
    /// closes late.
    pub stream_linger_ms: std::sync::atomic::AtomicU64,
    /// How long a background response of the Responses API takes to
    /// complete (ms; `queued` its first quarter, then `in_progress`).
    pub background_ms: std::sync::atomic::AtomicU64,
    /// Count prompt tokens as the worst byte-level tokenizer would
    /// ([`crate::openai::tokens`]); words otherwise.
    pub strict_tokens: std::sync::atomic::AtomicBool,
    /// Rendered synthesis audio.
    pub audio_cache: Mutex<HashMap<AudioKey, Arc<Rendered>>>,
    /// Stripe's side (see [`crate::stripe`]).
    pub stripe: crate::stripe::state::StripeSim,
    /// Webhook delivery records (see [`crate::webhook`]).
    webhooks: Mutex<Vec<Value>>,
    /// Becomes true when the simulator stops.
    pub(crate) shutdown: watch::Sender<bool>,
}

impl Shared {
    /// Fresh state with stock voices seeded.
    pub fn new(addr: SocketAddr, config: SimConfig) -> Arc<Shared> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("HTTP client");
        Arc::new(Shared {
            addr,
            root: format!("http://{addr}"),
            config: RwLock::new(config),
            store: Mutex::new(Store::new()),
            log: Default::default(),
            ws_events: Default::default(),
            faults: Default::default(),
            client,
            stream_delay_ms: std::sync::atomic::AtomicU64::new(15),
            stream_linger_ms: std::sync::atomic::AtomicU64::new(0),
            background_ms: std::sync::atomic::AtomicU64::new(200),
            strict_tokens: std::sync::atomic::AtomicBool::new(false),
            audio_cache: Mutex::new(HashMap::new()),
            stripe: Default::default(),
            webhooks: Mutex::new(Vec::new()),
            shutdown: watch::channel(false).0,
        })
    }

    /// A copy of the current configuration.
    pub fn config(&self) -> SimConfig {
        self.config.read().unwrap().clone()
    }

    /// Signals the accept loop, connections and background tasks to stop.
    pub fn stop(&self) {
        self.shutdown.send_replace(true);
    }

    /// True once [`Shared::stop`] was called.
    pub fn stopped(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Spawns a task that is cancelled when the simulator stops.
    pub fn spawn<F>(&self, fut: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let mut rx = self.shutdown.subscribe();
        tokio::spawn(async move {
            tokio::select! {
                _ = wait_stopped(&mut rx) => {}
                _ = fut => {}
            }
        });
    }

    /// Records a webhook delivery (see [`crate::webhook`]).
    pub fn record_webhook(&self, entry: Value) {
        let mut w = self.webhooks.lock().unwrap();
        if w.len() >= 10_000 {
            w.remove(0);
        }
        w.push(entry);
    }

    /// Webhook deliveries so far.
    pub fn webhook_log(&self) -> Vec<Value> {
        self.webhooks.lock().unwrap().clone()
    }

    /// Forgets recorded webhook deliveries.
    pub fn clear_webhooks(&self) {
        self.webhooks.lock().unwrap().clear();
    }

    /// Credential check: `Authorization: Bearer K`, `Authorization: Token token=K`
    /// or `x-access-token: K`; always true without a configured key.
    pub fn authorized(&self, headers: &HeaderMap) -> bool {
        let cfg = self.config.read().unwrap();
        let Some(key) = cfg.api_key.as_deref() else {
            return true;
        };
        if let Some(v) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) {
            let v = v.trim();
            let (scheme, rest) = v.split_once(' ').unwrap_or((v, ""));
            let rest = rest.trim();
            if scheme.eq_ignore_ascii_case("bearer") && rest == key {
                return true;
            }
            if scheme.eq_ignore_ascii_case("token") {
                let token = rest
                    .strip_prefix("token=")
                    .unwrap_or(rest)
                    .trim_matches('"');
                if token == key {
                    return true;
                }
            }
        }
        headers
            .get("x-access-token")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() == key)
    }
}

/// Resolves once `rx` sees the stop signal.
pub(crate) async fn wait_stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|stopped| *stopped).await;
}
