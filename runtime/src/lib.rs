//! The gateway runtime: everything the generated handlers call.
//!
//! # Layers
//!
//! The request runtime: the top floor of the gateway's crates. Its modules
//! import from the crates below and from each other without a circle
//! (`tests/it/layout.rs`); ARCHITECTURE.md names the floors and why.
//!
//! Root (the composition root and what generated code names):
//!
//! * [`start`] — `Gateway::new`: every service built from the
//!   configuration and the table; the cluster bus's listener installed.
//! * `__private` — the names generated code uses.
//!
//! The pipeline and the background tasks:
//!
//! * [`server`] — accept loop, dispatch to the generated matcher, graceful shutdown.
//! * [`dashboard`] — the `/dashboard` page and its files.
//! * [`router`] — the interface between the generated matcher and the server.
//! * [`pipeline`] — the phases every request goes through (authenticate →
//!   gate → rate-limit → configured → validate → forward → record → answer).
//! * [`follower`] — pending jobs polled upstream until they finish.
//! * [`retention`] — the sweeper of expired objects.
//! * [`reconcile`] — usage totals against the upstream's billing usage.
//!
//! The modes:
//!
//! * [`modes`] — one module per mode family: how a row's request is forwarded
//!   and answered.
//!
//! The services the modes use:
//!
//! * [`services`] — `Gateway`: the services one running gateway shares.
//! * [`ctx`] — the request context (`Ctx`) and what a mode hands back (`Outcome`).
//! * [`config`] — environment → configuration.
//! * [`shape`] — mapping the gateway's request shape to the upstream's.
//! * [`owners`] — tenant isolation: who owns which upstream resource.
//! * [`progress`] — what one observation of a job changes (billed once,
//!   called back once).
//! * [`mirror`] — copying job results into the object store (once).
//! * [`generated`] — storing media generated for a caller (synthesis,
//!   speech, images): key, asset record, presigned URL.
//! * [`fetch`] — SSRF-safe fetching of callers' `audio_url`s.
//! * [`callbacks`] — signed job callbacks to callers' `callback_uri`s.
//! * [`money`] — the one door of money: what a request owes (`Bill`),
//!   its settlement into records, holds, prices and budgets.
//! * [`instance`] — this instance's registration among several.
//! * [`relay`] — model streams relayed and billed for what was streamed.
//! * [`videos`] — the general gateway's video jobs.
//!
//! The floors below are crates of their own, and Cargo keeps each from
//! importing a higher one: `gateway-models` (providers, routing, the cache,
//! bounds, the Messages dialect, cost), `gateway-adapters` (upstream client,
//! objects, cluster, auth, rate limits, OIDC, Stripe, mail),
//! `gateway-store` (the database) and `gateway-base` (values and leaves).
//! This crate re-exports their modules under the names generated code, the
//! `server` crate and the tests use (`runtime::store::Store`); its own files
//! name the crates.
//!
//! Architecture invariant: nothing here knows an individual route; what a
//! route does is data in its `EndpointSpec`.

#[doc(hidden)]
pub mod __private;
pub mod alerts;
pub mod batches;
pub mod callbacks;
pub mod check;
pub mod config;
pub mod config_files;
pub mod ctx;
pub mod dashboard;
pub mod erase;
pub mod fetch;
pub mod follower;
pub mod generated;
pub mod instance;
pub mod job_bound;
pub mod mirror;
pub mod model_call;
pub mod modes;
pub mod money;
pub mod owners;
pub mod pipeline;
pub mod progress;
pub mod ready;
pub mod reconcile;
pub mod relay;
pub mod reload;
pub mod retention;
pub mod router;
pub mod server;
pub mod services;
pub mod sessions;
pub mod shape;
pub mod start;
pub mod videos;

// The floors below, under the names the generated code, the `server` crate
// and the tests have always used (`runtime::store::Store`). Nothing in this
// crate imports through them: its files name the crates.
pub use gateway_adapters::{
    auth, cluster, mail, objects, oidc, ratelimit, streams, stripe, upstream,
};
pub use gateway_base::{
    access, audio, billing, body, errors, media, net, owner_cache, secret_file, signing, spec,
    spool, store_error, telemetry, tls, traces, validate, watchdog,
};
pub use gateway_models::{bounds, cache, cost, mcp, messages_api, providers, routing, usage_tail};
pub use gateway_store as store;

// For the `server` crate and tests; nothing in the runtime imports these
// through the crate root (no loop through `lib.rs`).
pub use services::{Gateway, Inner};
pub use start::StartError;
