//! The gateway runtime: everything the generated handlers call.
//!
//! # Layout
//!
//! Where a request goes, in order:
//!
//! * [`server`] — accept loop, dispatch to the generated matcher, graceful shutdown.
//! * [`router`] — the interface between the generated matcher and the server.
//! * [`spec`] — the row type (`EndpointSpec`) and the whole-table facts
//!   (`Table`) generated code is made of.
//! * [`pipeline`] — the phases every request goes through (authenticate →
//!   gate → rate-limit → configured → validate → forward → record → answer).
//! * [`ctx`] — the request context (`Ctx`) and what a mode hands back (`Outcome`).
//! * [`modes`] — one module per mode family: how a row's request is forwarded
//!   and answered.
//!
//! What the modes use:
//!
//! * [`upstream`] — the one way to call a provider (`Call` → `Answer`) and
//!   spec §7's error mapping.
//! * [`shape`] — mapping the gateway's request shape to the upstream's.
//! * [`validate`] — field rules of bodies and query strings.
//! * [`owners`] — tenant isolation: who owns which upstream resource.
//! * [`progress`] — what one observation of a job changes (billed once,
//!   called back once).
//! * [`mirror`] — copying job results into the object store (once).
//! * [`generated`] — storing media generated for a caller (synthesis,
//!   speech, images): key, asset record, presigned URL.
//! * [`fetch`] — SSRF-safe fetching of callers' `audio_url`s.
//! * [`callbacks`] — signed job callbacks to callers' `callback_uri`s.
//! * [`signing`] — the HMAC signature scheme of webhooks and callbacks.
//! * [`billing`] — prices, markup, charges (decimal).
//! * [`audio`] — measuring audio durations.
//! * [`body`] — the response body type and JSON answers.
//!
//! Underneath:
//!
//! * [`auth`] — API keys (hashed) and the authentication cache.
//! * [`ratelimit`] — per user, per capability limits.
//! * [`cluster`] — the Redis several instances share: its connection, the
//!   bus (cache invalidation, stop-stream).
//! * [`store`] — SQLite: migrations, repositories, group-commit writer.
//! * [`objects`] — object storage (local filesystem, S3) and presigned URLs.
//! * [`retention`] — the sweeper of expired objects.
//! * [`follower`] — pending jobs polled upstream until they finish.
//! * [`reconcile`] — usage totals against the upstream's billing usage.
//! * [`secret_file`] — secrets generated once into the data directory.
//! * [`errors`] — one error type, three wire formats.
//! * [`config`] — environment → configuration.
//!
//! Architecture invariant: nothing here knows an individual route; what a
//! route does is data in its `EndpointSpec`.

pub mod audio;
pub mod auth;
pub mod billing;
pub mod body;
pub mod bounds;
pub mod callbacks;
pub mod cluster;
pub mod config;
pub mod credits;
pub mod ctx;
pub mod errors;
pub mod fetch;
pub mod follower;
pub mod generated;
pub mod instance;
pub mod mail;
pub mod media;
pub mod mirror;
pub mod modes;
pub mod objects;
pub mod owners;
pub mod pipeline;
pub mod progress;
pub mod providers;
pub mod ratelimit;
pub mod reconcile;
pub mod relay;
pub mod retention;
pub mod router;
pub mod secret_file;
pub mod server;
pub mod shape;
pub mod signing;
pub mod spec;
pub mod store;
pub mod streams;
pub mod telemetry;
pub mod upstream;
pub mod validate;
pub mod videos;
pub mod watchdog;

use std::sync::Arc;

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
    /// The generated table: rows, capabilities, job kinds, bases.
    pub table: &'static spec::Table,
    /// Per user, per capability rate limits.
    pub limiter: ratelimit::RateLimiter,
    /// Cached owner lookups of tenant isolation.
    pub owner_cache: owners::OwnerCache,
    /// The account's stock voices, as last read from the provider.
    pub stock_voices: owners::StockVoices,
    /// The general gateway's model providers (`GATEWAY_PROVIDERS`).
    pub providers: providers::Providers,
    /// Open model streams (stop-stream).
    pub streams: Arc<streams::Streams>,
    /// The Redis shared with other instances (`GATEWAY_REDIS_URL`); `None`: a single instance.
    pub cluster: Option<cluster::Cluster>,
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
    #[error(transparent)]
    Providers(#[from] providers::ProvidersError),
}

impl Gateway {
    /// Builds the rate limiter (the table's capabilities overridden by
    /// `config.rate_limits`; an unknown capability is a configuration error
    /// of `GATEWAY_RATE_LIMITS`; on Redis with `config.redis`, unless
    /// `config.limiter_store` gives a store), opens the database (migrating it) and the
    /// object store, and builds the upstream client. Without
    /// `config.public_url`, the gateway's own object URLs start with
    /// `http://<config.addr>`.
    pub fn new(config: config::Config, table: &'static spec::Table) -> Result<Gateway, StartError> {
        let capabilities = table.capabilities;
        telemetry::install();
        // Connects on first use, never here: an unreachable Redis is no
        // reason not to start (see `cluster`).
        let cluster =
            match &config.redis {
                Some(r) => Some(cluster::Cluster::new(r).map_err(|e| {
                    config::ConfigError::new(config::GATEWAY_REDIS_URL, e.to_string())
                })?),
                None => None,
            };
        // Before anything is opened: a bad GATEWAY_RATE_LIMITS leaves no trace.
        let limits = &config.rate_limits;
        let limiter = match (&config.limiter_store, &cluster) {
            (Some(custom), _) => ratelimit::RateLimiter::new(capabilities, limits, custom.clone()),
            (None, Some(c)) => ratelimit::RateLimiter::redis(capabilities, limits, c.clone()),
            (None, None) => ratelimit::RateLimiter::in_process(capabilities, limits),
        }
        .map_err(|reason| config::ConfigError::new(ratelimit::GATEWAY_RATE_LIMITS, reason))?;
        let providers = match &config.providers_file {
            Some(path) => providers::Providers::load(path, config.prices.markup_pct)?,
            None => providers::Providers::default(),
        };
        let store = store::Store::open_at_with(&config.database(), config.db_sync_full)?;
        let accounts = &config.accounts;
        let jwt_secret = match &accounts.jwt_secret {
            Some(s) => s.clone(),
            None => auth::config::load_or_create_secret(
                &config.data_dir.join(auth::config::JWT_KEY_FILE),
            )
            .map_err(|reason| config::ConfigError::new(auth::config::GATEWAY_JWT_SECRET, reason))?,
        };
        let tokens = auth::tokens::Tokens::new(
            jwt_secret,
            accounts.env.clone(),
            accounts.access_ttl,
            accounts.refresh_ttl,
        );
        let auth = auth::Auth::new(store.clone(), tokens, accounts.admin_key.clone());
        let upstream = upstream::Upstream::new(&config);
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", config.addr));
        let objects = objects::open(
            &config.objects,
            &config.data_dir,
            &public_url,
            config.db_sync_full,
        )?;
        if let Some(local) = objects.as_local() {
            // Packed objects are found through their asset records. The
            // locator holds the store only (no cycle through the Gateway).
            local.set_locator(packed_locator(store.clone()));
        }
        Ok(Gateway(Arc::new(Inner {
            config,
            store,
            auth,
            upstream,
            objects,
            table,
            limiter,
            owner_cache: Default::default(),
            stock_voices: Default::default(),
            providers,
            streams: Arc::new(streams::Streams::new(cluster.clone())),
            cluster,
        })))
    }
}

/// The local store's locator of packed objects: the live asset record of
/// a key, read on the blocking pool.
fn packed_locator(store: store::Store) -> objects::pack::Locator {
    Arc::new(move |key: String| {
        let store = store.clone();
        Box::pin(async move {
            let found = store
                .blocking(move |s| s.packed_object(&key))
                .await
                .map_err(|e| {
                    objects::ObjectError::Backend(format!("locating a packed object: {e}"))
                })?;
            Ok(
                found.map(|(pack, offset, size, content_type)| objects::pack::Packed {
                    pack,
                    offset,
                    size,
                    content_type,
                }),
            )
        })
    })
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
