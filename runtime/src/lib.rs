//! The gateway runtime: everything the generated handlers call.
//!
//! # Layout
//!
//! * [`spec`] — the row type (`EndpointSpec`) generated code is made of.
//! * [`router`] — the interface between the generated matcher and the server.
//! * [`server`] — accept loop, dispatch, graceful shutdown.
//! * [`pipeline`] — the phases every request goes through.
//! * [`forward`], [`synthesis`], [`jobs`], [`uploads`] — the modes: how a
//!   row's request is forwarded and answered.
//! * [`mirror`] — copying job results into the object store (once).
//! * [`owners`] — tenant isolation: who owns which upstream resource.
//! * [`webhook`] — the inbound, signed provider webhook.
//! * [`callbacks`] — signed job callbacks to callers' `callback_uri`s.
//! * [`ratelimit`] — per user, per capability limits.
//! * [`billing`] — prices, markup, charges (decimal).
//! * [`objects`] — object storage (local filesystem, S3) and presigned URLs.
//! * [`retention`] — the sweeper of expired objects.
//! * [`reconcile`] — usage totals against the upstream's billing usage.
//! * [`audio`] — measuring audio durations.
//! * [`shape`] — mapping the gateway's request shape to the upstream's.
//! * [`validate`] — field rules of bodies and query strings.
//! * [`upstream`] — the HTTP client to providers and error mapping (spec §7).
//! * [`fetch`] — SSRF-safe fetching of callers' `audio_url`s.
//! * [`auth`] — API keys (hashed) and the authentication cache.
//! * [`store`] — SQLite: migrations, repositories, group-commit writer.
//! * [`errors`] — one error type, three wire formats.
//! * [`config`] — environment → configuration.
//! * [`body`] — the response body type.
//!
//! Architecture invariant: nothing here knows an individual route; what a
//! route does is data in its `EndpointSpec`.

pub mod audio;
pub mod auth;
pub mod billing;
pub mod body;
pub mod callbacks;
pub mod config;
pub mod errors;
pub mod fetch;
pub mod forward;
pub mod jobs;
pub mod mirror;
pub mod objects;
pub mod owners;
pub mod pipeline;
pub mod ratelimit;
pub mod reconcile;
pub mod retention;
pub mod router;
pub mod server;
pub mod shape;
pub mod spec;
pub mod store;
pub mod synthesis;
pub mod uploads;
pub mod upstream;
pub mod validate;
pub mod webhook;

use std::sync::Arc;

// TEMPORARY: replaced by the generated routes::TABLE.capabilities on merge
/// The route table's capabilities with their default quotas (`None`: off),
/// until `[capabilities]` of `endpoints.toml` is generated.
pub const DEFAULT_CAPABILITIES_TEMP: &[spec::Capability] = &[
    // voice area
    temp_capability("tts", Some(60)),
    temp_capability("voices", Some(10)),
    temp_capability("recordings", Some(120)),
    temp_capability("voice_design", Some(10)),
    temp_capability("stt", Some(30)),
    temp_capability("enhance", Some(30)),
    temp_capability("edit", Some(30)),
    temp_capability("detect", Some(30)),
    temp_capability("intelligence", Some(30)),
    temp_capability("tracing", Some(30)),
    temp_capability("watermark", Some(30)),
    temp_capability("identity", Some(30)),
    temp_capability("projects", Some(120)),
    temp_capability("agents", Some(120)),
    temp_capability("uploads", Some(20)),
    temp_capability("webhook", None),
    // general gateway
    temp_capability("chat", Some(120)),
    temp_capability("completions", Some(120)),
    temp_capability("embeddings", Some(120)),
    temp_capability("images", Some(20)),
    temp_capability("videos", Some(20)),
    temp_capability("audio", Some(60)),
    temp_capability("models", Some(300)),
];

// TEMPORARY: goes with DEFAULT_CAPABILITIES_TEMP.
/// `name` limited to `per_minute` requests a minute (`None`: off).
const fn temp_capability(name: &'static str, per_minute: Option<u32>) -> spec::Capability {
    spec::Capability {
        name,
        quota: match per_minute {
            Some(count) => Some(spec::QuotaSpec {
                count,
                per_secs: 60,
            }),
            None => None,
        },
    }
}

/// Shared state of a running gateway (cheap to clone).
#[derive(Clone)]
pub struct Gateway(Arc<Inner>);

/// What a [`Gateway`] holds.
pub struct Inner {
    /// Configuration, read once at start-up.
    pub config: config::Config,
    /// The database.
    pub store: store::Store,
    /// API-key authentication with its cache.
    pub auth: auth::Auth,
    /// The upstream client.
    pub upstream: upstream::Upstream,
    /// Object storage.
    pub objects: std::sync::Arc<dyn objects::ObjectStore>,
    /// Every generated row, so that a job's submit row can be found by id.
    pub routes: &'static [&'static spec::EndpointSpec],
    /// Per user, per capability rate limits.
    pub limiter: ratelimit::RateLimiter,
    /// Cached owner lookups of tenant isolation.
    pub owner_cache: owners::OwnerCache,
}

impl std::ops::Deref for Gateway {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

/// Why a gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error(transparent)]
    Objects(#[from] objects::ObjectError),
}

impl Gateway {
    /// Builds the rate limiter (the table's capabilities overridden by
    /// `config.rate_limits`; an unknown capability is a configuration error
    /// of `GATEWAY_RATE_LIMITS`), opens the database (migrating it) and the
    /// object store, and builds the upstream client. Without
    /// `config.public_url`, the gateway's own object URLs start with
    /// `http://<config.addr>`.
    pub fn new(
        config: config::Config,
        routes: &'static [&'static spec::EndpointSpec],
    ) -> Result<Gateway, StartError> {
        // The route table's capabilities (TEMPORARY: routes::TABLE.capabilities on merge).
        let capabilities = DEFAULT_CAPABILITIES_TEMP;
        // Before anything is opened: a bad GATEWAY_RATE_LIMITS leaves no trace.
        let limiter = match &config.limiter_store {
            Some(shared) => {
                ratelimit::RateLimiter::new(capabilities, &config.rate_limits, shared.clone())
            }
            None => ratelimit::RateLimiter::in_process(capabilities, &config.rate_limits),
        }
        .map_err(|reason| config::ConfigError {
            name: ratelimit::GATEWAY_RATE_LIMITS,
            reason,
        })?;
        let store = store::Store::open_with(&config.db_path, config.db_sync_full)?;
        let auth = auth::Auth::new(store.clone());
        let upstream = upstream::Upstream::new(&config);
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", config.addr));
        let objects = objects::open(&config.objects, &config.data_dir, &public_url)?;
        Ok(Gateway(Arc::new(Inner {
            config,
            store,
            auth,
            upstream,
            objects,
            routes,
            limiter,
            owner_cache: Default::default(),
        })))
    }

    /// How the table presents the upstream key to `base` (`[bases.*].auth`,
    /// carried by every row calling that base); bearer when no row does.
    pub fn base_auth(&self, base: spec::Base) -> spec::UpstreamAuth {
        self.routes
            .iter()
            .find_map(|r| r.upstream.filter(|u| u.base == base).map(|u| u.auth))
            .unwrap_or(spec::UpstreamAuth::Bearer)
    }

    /// The generated row with this id.
    pub fn route_by_id(&self, id: &str) -> Option<&'static spec::EndpointSpec> {
        self.routes.iter().copied().find(|r| r.id == id)
    }
}

/// Names used by generated code, so that it never depends on the caller's imports.
#[doc(hidden)]
pub mod __private {
    pub use crate::pipeline::handle;
    pub use crate::router::{Handler, HandlerFuture, Request, RouteMatch};
    pub use crate::spec::*;
    pub use crate::Gateway;
    pub use http::Method as HttpMethod;
}
