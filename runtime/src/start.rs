//! The composition root: [`Gateway::new`] builds every service from the
//! configuration and the generated table, and installs what lower layers
//! are handed instead of reaching up ([`bus`]: the cluster bus's listener;
//! the local object store's locator of packed objects).

use std::sync::Arc;

use gateway_store::Assets;

use crate::config;
use crate::services::{Gateway, Inner};
use gateway_adapters::{auth, cluster, objects, ratelimit, streams, upstream};
use gateway_base::{spec, spool, telemetry};
use gateway_models::providers;
use gateway_store as store;

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
    #[error(transparent)]
    Mcp(#[from] gateway_models::mcp::McpError),
    #[error("the spool directory under GATEWAY_DATA_DIR: {0}")]
    Spool(std::io::Error),
    #[error("OpenTelemetry traces (OTEL_EXPORTER_OTLP_ENDPOINT): {0}")]
    Traces(String),
}

impl Gateway {
    /// Builds the rate limiter (the table's capabilities overridden by
    /// `config.rate_limits`; an unknown capability is a configuration error
    /// of `GATEWAY_RATE_LIMITS`; on Redis with `config.redis`, unless
    /// `config.limiter_store` gives a store), opens the database (migrating it) and the
    /// object store, and builds the upstream client. Without
    /// `config.public_url`, the gateway's own object URLs start with
    /// `http://<config.addr>`.
    pub fn new(
        mut config: config::Config,
        table: &'static spec::Table,
    ) -> Result<Gateway, StartError> {
        // The table's known prices under GATEWAY_PRICES.
        config.prices = config
            .prices
            .with_defaults(table.prices)
            .map_err(|e| config::ConfigError::new(config::GATEWAY_PRICES, e.0))?;
        telemetry::install();
        let cluster = cluster(&config)?;
        // Before anything is opened: a bad GATEWAY_RATE_LIMITS leaves no trace.
        let limiter = limiter(&config, table.capabilities, &cluster)?;
        let providers = match &config.providers_file {
            Some(path) => providers::Providers::load(path, config.prices.markup_pct)?,
            None => providers::Providers::default(),
        };
        let mcp = crate::config_files::mcp_servers(&config, table)?;
        let store = store::Store::open_at_with(&config.database(), config.db_sync_full)?;
        let auth = accounts(&config, &store)?;
        let upstream = upstream::Upstream::new(config.upstream_settings());
        let public_url = config.public_base();
        let objects = open_objects(&config, &public_url, &store)?;
        let oidc = crate::config_files::sign_in(&config, &config.oauth_providers);
        let spool = claim_spool(&config)?;
        let stripe =
            gateway_adapters::stripe::Stripe::new(config.stripe.clone(), config.upstream_timeout);
        let config_routing = config.routing.clone();
        let sessions_per_user = config.sessions.per_user;
        let traces = match &config.traces {
            Some(t) => Some(gateway_base::traces::Traces::start(t).map_err(StartError::Traces)?),
            None => None,
        };
        let response_cache = gateway_models::cache::Cache::new(
            config.cache_scope,
            config.cache_max_mb.saturating_mul(1 << 20),
            cluster.clone(),
        );
        let charged = Arc::new(crate::alerts::charged::Charged::default());
        store.on_charge(crate::alerts::listener(charged.clone()));
        Ok(Gateway(Arc::new(Inner {
            charged,
            draining: Default::default(),
            stripe,
            config,
            spool,
            store,
            auth,
            upstream,
            objects,
            table,
            limiter,
            owner_cache: Default::default(),
            stock_voices: Default::default(),
            speech_voices: Default::default(),
            providers: arc_swap::ArcSwap::from_pointee(providers),
            mcp: arc_swap::ArcSwap::from_pointee(mcp),
            streams: Arc::new(streams::Streams::new(cluster.clone())),
            sessions: crate::sessions::Sessions::new(sessions_per_user),
            batch_wake: Default::default(),
            routing: gateway_models::routing::Routing::new(config_routing, cluster.clone()),
            response_cache,
            cluster,
            oidc: arc_swap::ArcSwap::from_pointee(oidc),
            traces,
        })))
    }

    /// Exports the spans not yet exported and stops the exporter (graceful
    /// shutdown; nothing without traces).
    pub async fn stop_traces(&self) {
        if self.traces.is_none() {
            return;
        }
        let gw = self.clone();
        let stopped = tokio::task::spawn_blocking(move || {
            if let Some(t) = &gw.traces {
                t.shutdown();
            }
        });
        let _ = stopped.await;
    }
}

/// The cluster bus on `config.redis`, if any. It connects on first use,
/// never here: an unreachable Redis is no reason not to start (see
/// `cluster`).
fn cluster(config: &config::Config) -> Result<Option<cluster::Cluster>, StartError> {
    let Some(r) = &config.redis else {
        return Ok(None);
    };
    let c = cluster::Cluster::new(r)
        .map_err(|e| config::ConfigError::new(config::GATEWAY_REDIS_URL, e.to_string()))?;
    Ok(Some(c))
}

/// The rate limiter of the table's `capabilities` under
/// `config.rate_limits`: in `config.limiter_store` when one is given, else
/// on the cluster's Redis, else in this process.
fn limiter(
    config: &config::Config,
    capabilities: &'static [spec::Capability],
    cluster: &Option<cluster::Cluster>,
) -> Result<ratelimit::RateLimiter, StartError> {
    let limits = &config.rate_limits;
    let limiter = match (&config.limiter_store, cluster) {
        (Some(custom), _) => ratelimit::RateLimiter::new(capabilities, limits, custom.clone()),
        (None, Some(c)) => ratelimit::RateLimiter::redis(capabilities, limits, c.clone()),
        (None, None) => ratelimit::RateLimiter::in_process(capabilities, limits),
    }
    .map_err(|reason| config::ConfigError::new(ratelimit::GATEWAY_RATE_LIMITS, reason))?;
    Ok(limiter.with_window(config.limit_window))
}

/// Accounts and tokens, signed with the configured JWT secret or the one
/// kept in the data directory (made on the first start).
fn accounts(config: &config::Config, store: &store::Store) -> Result<auth::Auth, StartError> {
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
    Ok(auth::Auth::new(store.clone(), tokens, accounts))
}

/// The object store, its URLs under `public_url`; a local one finds its
/// packed objects through their asset records in `store`.
fn open_objects(
    config: &config::Config,
    public_url: &str,
    store: &store::Store,
) -> Result<Arc<dyn objects::ObjectStore>, StartError> {
    let objects = objects::open(
        &config.objects,
        &config.data_dir,
        public_url,
        config.db_sync_full,
    )?;
    if let Some(local) = objects.as_local() {
        // The locator holds the store only (no cycle through the Gateway).
        local.set_locator(packed_locator(store.clone()));
    }
    Ok(objects)
}

/// This instance's spool directory; what crashed instances left spooled is
/// swept first.
fn claim_spool(config: &config::Config) -> Result<spool::SpoolDir, StartError> {
    let (spool, swept) = spool::SpoolDir::open(&config.data_dir).map_err(StartError::Spool)?;
    if swept > 0 {
        tracing::info!(swept, "swept spool files left by a stopped instance");
    }
    Ok(spool)
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

/// The cluster bus's subscriber with this gateway's caches as its listener
/// (run by `server` as a background task). Returns at once without a
/// cluster.
pub async fn bus(gw: Gateway) {
    let Some(cluster) = gw.cluster.clone() else {
        return;
    };
    cluster::bus::run(cluster, Arc::new(Caches(gw))).await
}

/// What the other instances' events change here: the key cache, the owner
/// cache, the open streams.
struct Caches(Gateway);

impl cluster::Listener for Caches {
    fn apply(&self, event: cluster::Event) {
        let gw = &self.0;
        match event {
            cluster::Event::Credentials => gw.auth.invalidate_all(),
            cluster::Event::Owners { changes } => {
                for c in changes {
                    gw.owner_cache.forget(&c.kind, &c.id);
                }
            }
            cluster::Event::StopStream { id } => {
                gw.streams.stop_claimed(&id);
            }
            cluster::Event::Reload { request } => crate::reload::on_request(gw.clone(), request),
        }
    }

    fn forget_cached(&self) {
        self.0.auth.invalidate_all();
        self.0.owner_cache.clear();
    }
}
