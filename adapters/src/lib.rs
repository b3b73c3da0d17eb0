//! The adapters: each talks to one thing outside the gateway, and none knows
//! a route, a mode or a model.
//!
//! Stands on `gateway-base` and `gateway-store`; Cargo keeps it from the
//! floors above.
//!
//! * [`upstream`] — the one way to call a provider (`Call` → `Answer`), its
//!   typed failures and spec §7's error mapping; the only holder of
//!   provider credentials.
//! * [`objects`] — object storage (local filesystem, S3) and presigned URLs.
//! * [`cluster`] — the Redis several instances share: its connection, the
//!   bus (cache invalidation, stop-stream).
//! * [`streams`] — the open streams (stop-stream).
//! * [`auth`] — API keys (hashed), tokens and the authentication cache.
//! * [`ratelimit`] — per user, per capability limits.
//! * [`oidc`] — OpenID Connect sign-in.
//! * [`stripe`] — Stripe: a typed client of the checkout calls, webhook
//!   signatures.
//! * [`mail`] — outgoing mail.

pub mod auth;
pub mod cluster;
pub mod mail;
pub mod objects;
pub mod oidc;
pub mod ratelimit;
pub mod streams;
pub mod stripe;
pub mod upstream;
