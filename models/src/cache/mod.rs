//! The exact response cache (#28): a repeated model request answered
//! without the provider, billed as a hit, a stream replayed.
//!
//! * **Opt-in**: a model's `cache_ttl_secs` in the providers file, or the
//!   request's `X-Gateway-Cache: use | refresh | off` with
//!   `X-Gateway-Cache-TTL: <secs>` (1 to [`MAX_TTL`]). Default off. Chat,
//!   completions, embeddings and `/api/v1/messages` only.
//! * **Key** ([`key`]): SHA-256 of the deployment (`provider/model`, or
//!   the route's name), the operation, the scope and the upstream body for
//!   it in canonical JSON, less `stream`, `stream_options`, `user` and
//!   `byok_api_key`. The scope (`GATEWAY_CACHE_SCOPE`): `user` (default),
//!   `key` (the presented API key; a session token falls back to its user)
//!   or `global`; a BYOK request is cached only within its own key (its
//!   SHA-256 in the scope).
//! * **Whose answer** (#37): an answer is stored under the key of the
//!   deployment that served it (a route's under the route's), and names it
//!   ([`Entry::served`]); a request looks up the key of each deployment
//!   that may serve it, in order ([`Lookup`]), and an entry is a hit only
//!   when one of the deployments stored under its key served it. So a
//!   fallback's answer is never a hit for a plain request of the first
//!   model; a hit carries its original's `X-Gateway-Model` and prices.
//! * **Store** ([`store`]): Redis when `GATEWAY_REDIS_URL` is set, else in
//!   process bounded by `GATEWAY_CACHE_MAX_MB` (64). An entry over
//!   [`MAX_ENTRY_BYTES`] is not stored. A read that fails or takes over
//!   [`SLOW`] is skipped: the request goes upstream (`BYPASS`), and what it
//!   answers is not stored.
//! * **Entries** ([`entry`]): the JSON answer or the stream's events, so
//!   that either kind of request is answered from either kind of entry.
//!   Never stored: errors, streams that did not complete, answers finished
//!   other than `stop` or `length`; requests with `n` > 1 bypass the cache
//!   unless they say `X-Gateway-Cache: use`.
//! * **Answers** carry `X-Gateway-Cache: HIT | MISS | BYPASS` (none when
//!   the cache was not asked for). Metrics: `gateway_cache_hits_total`,
//!   `gateway_cache_misses_total`, `gateway_cache_bypasses_total`,
//!   `gateway_cache_stores_total`, `gateway_cache_evictions_total`,
//!   `gateway_cache_bytes` (in process).
//!
//! The modes decide nothing here but call [`Cache::lookup`] and
//! [`Lookup::begin`] before the credit hold, and answer a hit themselves (with `Settle`'s records marked
//! `cache_hit` and priced by [`hit_records`]).

pub mod entry;
pub mod key;
pub mod scope;
pub mod store;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use rust_decimal::Decimal;
use serde_json::{Map, Value};

pub use entry::{Capture, Entry};
pub use key::Key;
pub use scope::Scope;

use crate::providers::usage::Tokens;
use gateway_base::errors::ApiError;
use gateway_store::Record;

/// The scope of entries: `user`, `key` or `global`.
pub const GATEWAY_CACHE_SCOPE: &str = "GATEWAY_CACHE_SCOPE";
/// The in-process store's bound, MiB (default [`DEFAULT_MAX_MB`]).
pub const GATEWAY_CACHE_MAX_MB: &str = "GATEWAY_CACHE_MAX_MB";
pub const DEFAULT_MAX_MB: u64 = 64;
/// The request's cache directive.
pub const HEADER: &str = "x-gateway-cache";
/// The request's TTL, seconds.
pub const TTL_HEADER: &str = "x-gateway-cache-ttl";
/// Longest TTL a request or a model may ask for: one day.
pub const MAX_TTL: Duration = Duration::from_secs(86_400);
/// TTL of a request that says `use` or `refresh` without a TTL, on a
/// model without `cache_ttl_secs`: five minutes.
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);
/// Largest entry stored (its JSON text): 1 MiB.
pub const MAX_ENTRY_BYTES: usize = 1 << 20;
/// A store read slower than this is skipped.
pub const SLOW: Duration = Duration::from_millis(50);

/// What the request's headers ask of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Directive {
    /// No header: the model's `cache_ttl_secs` decides.
    #[default]
    Default,
    Use,
    /// Go upstream and store the answer.
    Refresh,
    Off,
}

/// The request's cache headers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ask {
    pub directive: Directive,
    pub ttl: Option<Duration>,
}

impl Ask {
    /// Reads `X-Gateway-Cache` and `X-Gateway-Cache-TTL` (400 when either
    /// is not one of its values).
    pub fn from_headers(h: &HeaderMap) -> Result<Ask, ApiError> {
        let text = |name: &str| {
            h.get(name)
                .map(|v| v.to_str().unwrap_or("\u{0}").trim().to_ascii_lowercase())
        };
        let directive = match text(HEADER).as_deref() {
            None => Directive::Default,
            Some("use") => Directive::Use,
            Some("refresh") => Directive::Refresh,
            Some("off") => Directive::Off,
            Some(_) => {
                return Err(ApiError::BadRequest(
                    "X-Gateway-Cache: must be one of use, refresh, off".into(),
                ))
            }
        };
        let ttl = match text(TTL_HEADER) {
            None => None,
            Some(t) => {
                let secs = t
                    .parse::<u64>()
                    .ok()
                    .filter(|s| (1..=MAX_TTL.as_secs()).contains(s));
                Some(Duration::from_secs(secs.ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "X-Gateway-Cache-TTL: must be a whole number of seconds from 1 to {}",
                        MAX_TTL.as_secs()
                    ))
                })?))
            }
        };
        Ok(Ask { directive, ttl })
    }
}

/// The request being looked up: who asks, and how.
pub struct Request<'a> {
    /// `chat`, `text_completion`, `embeddings`.
    pub op: &'a str,
    /// The model's (or the route's) `cache_ttl_secs`.
    pub model_ttl: Option<u64>,
    /// The caller's body (its `n`).
    pub body: &'a Map<String, Value>,
    pub user: Option<i64>,
    pub key: Option<i64>,
    pub byok: Option<&'a str>,
    /// The answer is to be streamed.
    pub stream: bool,
}

/// What [`Lookup::begin`] found.
pub enum Begun {
    /// An entry, with the deployment that served it ([`Entry::served`]).
    Hit(Entry),
    /// Go upstream; the cache's part in it.
    Go(Miss),
}

/// The response cache of one gateway (cheap to clone).
#[derive(Clone)]
pub struct Cache(Arc<Inner>);

struct Inner {
    store: store::Store,
    scope: Scope,
}

impl Cache {
    /// In Redis (`cluster`), else in memory bounded by `max_bytes`.
    pub fn new(
        scope: Scope,
        max_bytes: u64,
        cluster: Option<gateway_adapters::cluster::Cluster>,
    ) -> Cache {
        let store = match cluster {
            Some(c) => store::Store::Redis(c),
            None => store::Store::memory(max_bytes),
        };
        Cache(Arc::new(Inner { store, scope }))
    }

    /// What `ask` makes of `r`: the [`Lookup`] to fill with the request's
    /// deployments, or (`Err`) the cache's part when it is not used
    /// (not asked for, `off`, `n` > 1).
    pub fn lookup(&self, ask: &Ask, r: &Request<'_>) -> Result<Lookup, Miss> {
        let ttl = ask
            .ttl
            .or(r.model_ttl.map(|s| Duration::from_secs(s).min(MAX_TTL)))
            .filter(|t| !t.is_zero());
        let ttl = match (ask.directive, ttl) {
            (Directive::Off, _) => return Err(Miss::state("BYPASS")),
            (Directive::Default, None) => return Err(Miss::default()),
            (_, Some(t)) => t,
            (_, None) => DEFAULT_TTL,
        };
        let n = r.body.get("n").and_then(Value::as_u64).unwrap_or(1);
        if n > 1 && ask.directive != Directive::Use {
            return Err(Miss::state("BYPASS"));
        }
        Ok(Lookup {
            cache: self.clone(),
            ttl,
            refresh: ask.directive == Directive::Refresh,
            stream: r.stream,
            op: r.op.to_owned(),
            scope: key::scope_text(self.0.scope, r.user, r.key, r.byok),
            sources: Vec::new(),
        })
    }

    fn bypassed(&self) -> Miss {
        gateway_base::telemetry::cache_event("bypasses");
        Miss::state("BYPASS")
    }

    /// Stores `entry` in the background (a failure is logged).
    fn put(&self, key: Key, entry: Entry, ttl: Duration) {
        let text = match serde_json::to_vec(&entry) {
            Ok(t) if t.len() <= MAX_ENTRY_BYTES => Bytes::from(t),
            Ok(_) => return,
            Err(e) => return tracing::warn!(error = %e, "a cache entry could not be written"),
        };
        let len = text.len();
        if let store::Store::Memory { .. } = &self.0.store {
            // Immediate in memory: done now, so the next request finds it.
            let put = self.0.store.put(&key.0, text, ttl);
            if let Some(Ok(())) = futures_util::FutureExt::now_or_never(put) {
                gateway_base::telemetry::cache_stored(len as u64);
            }
            return;
        }
        let cache = self.clone();
        let work = async move {
            match tokio::time::timeout(SLOW * 4, cache.0.store.put(&key.0, text, ttl)).await {
                Ok(Ok(())) => gateway_base::telemetry::cache_stored(len as u64),
                Ok(Err(e)) => tracing::warn!(error = %e, "storing a response cache entry failed"),
                Err(_) => tracing::warn!("storing a response cache entry timed out"),
            }
        };
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            h.spawn(work);
        }
    }
}

/// A request the cache applies to, and the deployments that may serve it:
/// each with the key its answer is stored under (its own, or its route's).
pub struct Lookup {
    cache: Cache,
    ttl: Duration,
    refresh: bool,
    stream: bool,
    op: String,
    scope: String,
    /// `(provider/model, key)`, in the order the deployments are tried.
    sources: Vec<(String, Key)>,
}

impl Lookup {
    /// The key of `body` (the upstream body, OpenAI-shaped) under `name`:
    /// a deployment's `provider/model`, or a route's name.
    pub fn key(&self, name: &str, body: &Map<String, Value>) -> Key {
        key::key(name, &self.op, &self.scope, body)
    }

    /// The deployment `served` (`provider/model`) may answer the request;
    /// its answer is stored under `key`.
    pub fn source(&mut self, served: String, key: Key) {
        self.sources.push((served, key));
    }

    /// Looks the request up (each key once, in the order of its
    /// deployments, read together within [`SLOW`]): the first entry that
    /// can take the asked form and was served by a deployment stored under
    /// its key; else what to do with the answer.
    pub async fn begin(self) -> Begun {
        let store = |state| Miss {
            state: Some(state),
            store: Some(Stored {
                cache: self.cache.clone(),
                ttl: self.ttl,
                sources: self.sources.clone(),
            }),
        };
        if self.refresh || self.sources.is_empty() {
            gateway_base::telemetry::cache_event("misses");
            return Begun::Go(store("MISS"));
        }
        let mut keys: Vec<&Key> = Vec::with_capacity(self.sources.len());
        for (_, k) in &self.sources {
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let gets = keys.iter().map(|k| self.cache.0.store.get(&k.0));
        let found = match tokio::time::timeout(SLOW, futures_util::future::join_all(gets)).await {
            Ok(found) => found,
            Err(_) => {
                tracing::warn!("the response cache took over 50 ms; bypassed");
                return Begun::Go(self.cache.bypassed());
            }
        };
        let mut hit = None;
        for (k, got) in keys.iter().zip(found) {
            let text = match got {
                Ok(text) => text,
                Err(e) => {
                    tracing::warn!(error = %e, "the response cache failed; bypassed");
                    return Begun::Go(self.cache.bypassed());
                }
            };
            if hit.is_none() {
                hit = text.and_then(|t| self.usable(k, &t));
            }
        }
        match hit {
            Some(e) => {
                gateway_base::telemetry::cache_event("hits");
                Begun::Hit(e)
            }
            None => {
                gateway_base::telemetry::cache_event("misses");
                Begun::Go(store("MISS"))
            }
        }
    }

    /// The entry of `text` found under `key`, if it answers this request:
    /// readable, in a form the request can take (else it is replaced), and
    /// served by one of the deployments whose answers `key` holds.
    fn usable(&self, key: &Key, text: &[u8]) -> Option<Entry> {
        let e = match serde_json::from_slice::<Entry>(text) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "an unreadable cache entry; treated as a miss");
                return None;
            }
        };
        let form = if self.stream {
            e.to_events().is_some()
        } else {
            e.to_json().is_some()
        };
        let served = e.served.as_deref()?;
        let could = self
            .sources
            .iter()
            .any(|(s, k)| k == key && s.as_str() == served);
        (form && could).then_some(e)
    }
}

/// Where a request's answer is stored: under the key of the deployment
/// that served it.
#[derive(Clone)]
struct Stored {
    cache: Cache,
    ttl: Duration,
    sources: Vec<(String, Key)>,
}

impl Stored {
    /// The key of the answer `served` (`provider/model`) gave.
    fn key(&self, served: &str) -> Option<Key> {
        self.sources
            .iter()
            .find(|(s, _)| s == served)
            .map(|(_, k)| k.clone())
    }
}

/// The cache's part in a request that went upstream: the answer's header,
/// and where its answer is stored (a miss or a refresh).
#[derive(Default)]
pub struct Miss {
    state: Option<&'static str>,
    store: Option<Stored>,
}

impl Miss {
    /// The `X-Gateway-Cache: HIT` of an answer from the cache.
    pub fn hit() -> Miss {
        Miss::state("HIT")
    }

    fn state(s: &'static str) -> Miss {
        Miss {
            state: Some(s),
            store: None,
        }
    }

    /// Sets `X-Gateway-Cache` on the answer (when the cache was asked for).
    pub fn mark<B>(&self, resp: &mut http::Response<B>) {
        if let Some(s) = self.state {
            resp.headers_mut()
                .insert(HEADER, http::HeaderValue::from_static(s));
        }
    }

    /// Stores a JSON answer that finished normally, as the answer of
    /// `served` (`provider/model`, the deployment that gave it).
    pub fn store_json(&self, served: &str, v: &Value, tokens: Tokens, counted: bool) {
        let Some(stored) = &self.store else {
            return;
        };
        let Some(key) = stored.key(served) else {
            return;
        };
        if entry::finished_normally(v) {
            let e = Entry {
                json: Some(v.clone()),
                served: Some(served.to_owned()),
                ..Entry::of(tokens, counted)
            };
            stored.cache.put(key, e, stored.ttl);
        }
    }

    /// The capture of a streamed answer of `served` (`provider/model`),
    /// stored when it completes.
    pub fn capture(&self, served: &str) -> Option<StreamCapture> {
        let stored = self.store.as_ref()?;
        Some(StreamCapture {
            capture: Capture::new(MAX_ENTRY_BYTES),
            cache: stored.cache.clone(),
            key: stored.key(served)?,
            served: served.to_owned(),
            ttl: stored.ttl,
        })
    }
}

/// A stream being captured for the cache ([`crate::relay`] feeds it).
pub struct StreamCapture {
    capture: Capture,
    cache: Cache,
    key: Key,
    served: String,
    ttl: Duration,
}

impl StreamCapture {
    /// Feeds a chunk as relayed.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.capture.feed(chunk);
    }

    /// The stream completed: stored when it may be. (Dropped unfinished,
    /// nothing is stored.)
    pub fn complete(self, tokens: Tokens, counted: bool) {
        if let Some(mut e) = self.capture.finish(tokens, counted) {
            e.served = Some(self.served);
            self.cache.put(self.key, e, self.ttl);
        }
    }
}

/// The records of a hit: `records` (from the model's `Settle`, ended
/// `cache_hit`, without the model's bound held) with the charge cut to `pct` %
/// of the original's; the caller holds that charge ([`crate::modes`]' `Hit`).
pub fn hit_records(mut records: Vec<Record>, pct: Decimal) -> Vec<Record> {
    for r in &mut records {
        if let Record::Usage(u) = r {
            u.charged = gateway_base::billing::round_charge(u.charged * pct / Decimal::ONE_HUNDRED);
        }
    }
    records
}

/// The SSE body of a replayed stream: each event as it was, then `usage`
/// (when the caller asked for usage), then `[DONE]`.
pub fn replay(events: Vec<Value>, usage: Option<Value>) -> gateway_base::body::Body {
    use http_body_util::BodyExt;
    let mut frames: Vec<Bytes> = events.iter().map(entry::frame).collect();
    if let Some(u) = usage {
        frames.push(entry::frame(&u));
    }
    frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
    let stream = futures_util::stream::iter(
        frames
            .into_iter()
            .map(|b| Ok::<_, gateway_base::body::BoxError>(hyper::body::Frame::data(b))),
    );
    http_body_util::StreamBody::new(stream).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn headers_read_and_bounded() {
        let a = Ask::from_headers(&headers(&[(HEADER, "Use"), (TTL_HEADER, "60")])).unwrap();
        assert_eq!(a.directive, Directive::Use);
        assert_eq!(a.ttl, Some(Duration::from_secs(60)));
        for bad in [
            (HEADER, "maybe"),
            (TTL_HEADER, "0"),
            (TTL_HEADER, "86401"),
            (TTL_HEADER, "x"),
        ] {
            assert_eq!(
                Ask::from_headers(&headers(&[bad])).unwrap_err().status(),
                400
            );
        }
        assert_eq!("global".parse::<Scope>(), Ok(Scope::Global));
        assert!("all".parse::<Scope>().is_err());
    }

    /// An entry answers only a request one of whose deployments stored
    /// under its key served it; one naming no deployment is a miss.
    #[tokio::test]
    async fn an_entry_answers_only_requests_its_deployment_could_have_served() {
        let cache = Cache::new(Scope::Global, 1 << 20, None);
        let ask = Ask {
            directive: Directive::Use,
            ttl: None,
        };
        let body = Map::new();
        let r = Request {
            op: "chat",
            model_ttl: None,
            body: &body,
            user: Some(1),
            key: None,
            byok: None,
            stream: false,
        };
        let lookup = |sources: &[(&str, &str)]| {
            let mut l = cache.lookup(&ask, &r).ok().unwrap();
            for (served, under) in sources {
                let k = l.key(under, &body);
                l.source(served.to_string(), k);
            }
            l
        };
        let answer = serde_json::json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "hi"}}]});
        let l = lookup(&[("a/m", "a/m")]);
        let key = l.key("a/m", &body);
        let entry = |served: Option<&str>| Entry {
            json: Some(answer.clone()),
            served: served.map(str::to_owned),
            ..Entry::of(Tokens::new(1, 1), false)
        };
        let hit = |l: Lookup| async move { matches!(l.begin().await, Begun::Hit(_)) };
        cache.put(key.clone(), entry(None), MAX_TTL);
        assert!(!hit(lookup(&[("a/m", "a/m")])).await, "no deployment named");
        cache.put(key.clone(), entry(Some("b/m")), MAX_TTL);
        assert!(!hit(lookup(&[("a/m", "a/m")])).await, "another's answer");
        cache.put(key.clone(), entry(Some("a/m")), MAX_TTL);
        assert!(hit(lookup(&[("b/m", "b/m"), ("a/m", "a/m")])).await);
        // A route's key holds any of its deployments' answers.
        let l = lookup(&[]);
        cache.put(l.key("route", &body), entry(Some("b/m")), MAX_TTL);
        assert!(hit(lookup(&[("a/m", "route"), ("b/m", "route")])).await);
        assert!(
            !hit(lookup(&[("a/m", "route")])).await,
            "not the route's now"
        );
    }

    #[tokio::test]
    async fn memory_entries_expire_and_are_bounded() {
        let s = store::Store::memory(1 << 20);
        s.put("a", Bytes::from_static(b"{}"), Duration::from_millis(30))
            .await
            .unwrap();
        assert!(s.get("a").await.unwrap().is_some());
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(s.get("a").await.unwrap().is_none());
        let small = store::Store::memory(64 * 1024);
        for i in 0..100 {
            small
                .put(
                    &format!("k{i}"),
                    Bytes::from(vec![b'x'; 4096]),
                    Duration::from_secs(60),
                )
                .await
                .unwrap();
        }
        let mut kept = 0;
        for i in 0..100 {
            kept += small.get(&format!("k{i}")).await.unwrap().is_some() as usize;
        }
        assert!(kept < 20, "{kept} entries of 4 KiB kept in 64 KiB");
    }
}
