//! The services a running gateway shares: [`Gateway`] (cheap to clone) and
//! what it holds ([`Inner`]). Built by the composition root
//! ([`crate::start`], `Gateway::new`); handed to every request in its
//! [`crate::ctx::Ctx`] and to the background tasks.
//!
//! This module sits below everything that uses it (the services the modes
//! call, the modes, the pipeline, the tasks) and above the adapters it
//! holds: it imports only adapters and leaves. A mode reaches its services
//! as fields of `ctx.gw` (see ARCHITECTURE.md, "Layers", for why one struct
//! rather than one per mode).

use std::sync::Arc;

use crate::config;
use gateway_adapters::{auth, cluster, objects, oidc, ratelimit, streams, stripe, upstream};
use gateway_base::{owner_cache, spec, spool};
use gateway_models::{providers, routing};
use gateway_store::{self as store};

/// Shared state of a running gateway (cheap to clone).
#[derive(Clone)]
pub struct Gateway(pub(crate) Arc<Inner>);

/// What a [`Gateway`] holds.
pub struct Inner {
    /// Configuration, read once at start-up.
    pub config: config::Config,
    /// This instance's spool directory (swept at start-up when its owner died).
    pub spool: spool::SpoolDir,
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
    pub owner_cache: owner_cache::OwnerCache,
    /// The account's stock voices, as last read from the provider.
    pub stock_voices: owner_cache::StockVoices,
    /// The general gateway's model providers (`GATEWAY_PROVIDERS`).
    /// The catalogue (the providers file) in force: replaced whole by a
    /// reload (`crate::reload`); a request reads it once, at its start
    /// (`Ctx::catalogue`), and keeps that one to its end.
    pub providers: arc_swap::ArcSwap<providers::Providers>,
    /// The MCP servers (`GATEWAY_MCP_SERVERS`, [`crate::modes::mcp`]).
    /// The MCP servers file in force (replaced whole by a reload).
    pub mcp: arc_swap::ArcSwap<gateway_models::mcp::McpServers>,
    /// The speech providers' voice lists, as last read (`GET /audio/voices`).
    pub speech_voices: providers::speech::VoiceLists,
    /// Open model streams (stop-stream).
    pub streams: Arc<streams::Streams>,
    /// Open live WebSocket sessions ([`crate::sessions`]).
    pub sessions: Arc<crate::sessions::Sessions>,
    /// Wakes the batch executor ([`crate::batches`]) when a batch is made
    /// or cancelled on this instance.
    pub batch_wake: tokio::sync::Notify,
    /// The users charged since the spend alerts' last round (told by the
    /// record writer, `crate::alerts`).
    pub charged: Arc<crate::alerts::charged::Charged>,
    /// A graceful shutdown has begun: `/readyz` answers 503 (`crate::ready`).
    pub draining: std::sync::atomic::AtomicBool,
    /// The Redis shared with other instances (`GATEWAY_REDIS_URL`); `None`: a single instance.
    pub cluster: Option<cluster::Cluster>,
    /// The sign-in (OpenID Connect) providers (`GATEWAY_OAUTH_PROVIDERS`).
    /// The sign-in providers' client (replaced whole by a reload).
    pub oidc: arc_swap::ArcSwap<oidc::Oidc>,
    /// Stripe's client (buying credits; unconfigured without `STRIPE_SECRET_KEY`).
    pub stripe: stripe::Stripe,
    /// Routing of model calls: cool-downs and latencies of deployments.
    pub routing: routing::Routing,
    /// The exact response cache of model answers ([`gateway_models::cache`]).
    pub response_cache: gateway_models::cache::Cache,
    /// OpenTelemetry traces ([`gateway_base::traces`]); `None`: off, nothing traced.
    pub traces: Option<gateway_base::traces::Traces>,
}

impl std::ops::Deref for Gateway {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl Inner {
    /// The catalogue in force now (a request takes it once: `Ctx::catalogue`).
    pub fn catalogue(&self) -> Arc<providers::Providers> {
        self.providers.load_full()
    }

    /// A key revoked or its budget changed, or a user disabled, enabled or deleted: this
    /// instance's key cache is dropped at once, the other instances' through
    /// the bus.
    pub async fn credentials_changed(&self) {
        self.auth.invalidate_all();
        if let Some(cluster) = &self.cluster {
            cluster.announce(cluster::Event::Credentials).await;
        }
    }

    /// Ownership records committed (created, deleted, re-owned): this
    /// instance's owner cache takes the new owners, the other instances drop
    /// their entries through the bus.
    pub async fn owners_changed(&self, changes: Vec<(String, String, Option<i64>)>) {
        if changes.is_empty() {
            return;
        }
        let refs: Option<Vec<cluster::OwnerRef>> = self.cluster.as_ref().map(|_| {
            changes
                .iter()
                .map(|(kind, id, _)| cluster::OwnerRef {
                    kind: kind.clone(),
                    id: id.clone(),
                })
                .collect()
        });
        for (kind, id, owner) in changes {
            self.owner_cache.put(&kind, id, owner);
        }
        if let (Some(cluster), Some(changes)) = (&self.cluster, refs) {
            cluster.announce(cluster::Event::Owners { changes }).await;
        }
    }
}
