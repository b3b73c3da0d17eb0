//! The gateway runtime: everything the generated handlers call.
//!
//! # Layers
//!
//! The modules stand on floors; a module imports only from its own floor
//! (without a circle) or from floors below it. `tests/it/layout.rs` checks
//! it; ARCHITECTURE.md ("Layers") names the floors and why.
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
//! * [`validate`] — field rules of bodies and query strings.
//! * [`owners`] — tenant isolation: who owns which upstream resource;
//!   [`owner_cache`] its caches.
//! * [`progress`] — what one observation of a job changes (billed once,
//!   called back once).
//! * [`mirror`] — copying job results into the object store (once).
//! * [`generated`] — storing media generated for a caller (synthesis,
//!   speech, images): key, asset record, presigned URL.
//! * [`fetch`] — SSRF-safe fetching of callers' `audio_url`s.
//! * [`callbacks`] — signed job callbacks to callers' `callback_uri`s.
//! * [`credits`] — credit holds and settlements of model calls.
//! * [`relay`] — model streams relayed and billed for what was streamed.
//! * [`cost`] — what an answer says it cost (`usage.cost`, `X-Gateway-Cost`).
//! * [`usage_tail`] — a stream's last event, held back until it is
//!   settled (the usage event with its cost, `[DONE]`).
//! * [`messages_api`] — Anthropic's Messages API as an input dialect:
//!   its requests, answers and events translated to and from the chat shapes.
//! * [`streams`] — the open streams (stop-stream).
//! * [`videos`] — the general gateway's video jobs.
//! * [`providers`] — the general gateway's model providers.
//!
//! The adapters (each talks to one thing outside; none imports above):
//!
//! * [`upstream`] — the one way to call a provider (`Call` → `Answer`) and
//!   spec §7's error mapping.
//! * [`auth`] — API keys (hashed), tokens and the authentication cache.
//! * [`ratelimit`] — per user, per capability limits.
//! * [`cluster`] — the Redis several instances share: its connection, the
//!   bus (cache invalidation, stop-stream).
//! * [`store`] — the database (SQLite or PostgreSQL): migrations,
//!   repositories, group-commit writer.
//! * [`objects`] — object storage (local filesystem, S3) and presigned URLs.
//! * [`stripe`] — Stripe: a typed client of the checkout calls, webhook
//!   signatures.
//! * [`mail`] — outgoing mail.
//! * [`errors`] — one error type, three wire formats.
//!
//! The leaves (import nothing of the runtime but other leaves):
//!
//! * [`spec`] — the row type (`EndpointSpec`) and the whole-table facts
//!   (`Table`) generated code is made of.
//! * [`body`] — the request and response types, the body type and JSON
//!   answers; request bodies that must arrive in time.
//! * [`access`] — the access log: one line per request, when its answer ends.
//! * [`billing`] — prices, markup, charges (decimal).
//! * [`signing`] — the HMAC signature scheme of webhooks and callbacks.
//! * [`audio`] — measuring audio durations.
//! * [`net`] — which addresses are private.
//! * [`media`] — the media types the gateway knows.
//! * [`telemetry`] — Prometheus metrics.
//! * [`watchdog`] — per-connection time-outs.
//! * [`secret_file`] — secrets generated once into the data directory.
//! * [`spool`] — each instance's spool directory; a dead instance's swept.
//! * [`tls`] — TLS of the connections to PostgreSQL and Redis: CA files,
//!   verification levels (libpq's `sslmode`), refused certificates.
//!
//! Architecture invariant: nothing here knows an individual route; what a
//! route does is data in its `EndpointSpec`.

#[doc(hidden)]
pub mod __private;
pub mod access;
pub mod audio;
pub mod auth;
pub mod billing;
pub mod body;
pub mod bounds;
pub mod budgets;
pub mod cache;
pub mod callbacks;
pub mod cluster;
pub mod config;
pub mod cost;
pub mod credits;
pub mod ctx;
pub mod dashboard;
pub mod errors;
pub mod fetch;
pub mod follower;
pub mod generated;
pub mod instance;
pub mod job_bound;
pub mod mail;
pub mod media;
pub mod messages_api;
pub mod mirror;
pub mod modes;
pub mod net;
pub mod objects;
pub mod oidc;
pub mod owner_cache;
pub mod owners;
pub mod pipeline;
pub mod progress;
pub mod providers;
pub mod ratelimit;
pub mod reconcile;
pub mod relay;
pub mod retention;
pub mod router;
pub mod routing;
pub mod secret_file;
pub mod server;
pub mod services;
pub mod shape;
pub mod signing;
pub mod spec;
pub mod spool;
pub mod start;
pub mod store;
pub mod streams;
pub mod stripe;
pub mod telemetry;
pub mod tls;
pub mod traces;
pub mod upstream;
pub mod usage_tail;
pub mod validate;
pub mod videos;
pub mod watchdog;

// For the `server` crate and tests; nothing in the runtime imports these
// through the crate root (no loop through `lib.rs`).
pub use services::{Gateway, Inner};
pub use start::StartError;
