//! The gateway runtime: everything the generated handlers call.
//!
//! # Layout
//!
//! * [`spec`] — the row type (`EndpointSpec`) generated code is made of.
//! * [`router`] — the interface between the generated matcher and the server.
//! * [`server`] — accept loop, dispatch, graceful shutdown.
//! * [`pipeline`] — the phases every request goes through.
//! * [`forward`], [`synthesis`] — the modes: how a row's request is forwarded
//!   and answered.
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

pub mod auth;
pub mod billing;
pub mod body;
pub mod config;
pub mod errors;
pub mod fetch;
pub mod forward;
pub mod pipeline;
pub mod router;
pub mod server;
pub mod shape;
pub mod spec;
pub mod store;
pub mod synthesis;
pub mod upstream;
pub mod validate;

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
}

impl Gateway {
    /// Opens the database (migrating it) and builds the upstream client.
    pub fn new(config: config::Config) -> Result<Gateway, StartError> {
        let store = store::Store::open(&config.db_path)?;
        let auth = auth::Auth::new(store.clone());
        let upstream = upstream::Upstream::new(&config);
        Ok(Gateway(Arc::new(Inner { config, store, auth, upstream })))
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
