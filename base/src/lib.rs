//! The ground floor of the gateway: values and leaves every other crate
//! shares, and nothing that talks to the outside world.
//!
//! Nothing here imports another gateway crate but the route table's
//! vocabulary (`gateway-spec`); Cargo keeps it so.
//!
//! * [`spec`] — the row type (`EndpointSpec`) and the whole-table facts.
//! * [`body`] — the request and response types, the body type and JSON
//!   answers; request bodies that must arrive in time.
//! * [`errors`] — one error type, three wire formats;
//!   [`store_error`] the database's error, which it must recognise.
//! * [`validate`] — field rules of bodies and query strings.
//! * [`billing`] — prices, markup, charges (decimal).
//! * [`access`] — the access log: one line per request, when its answer ends.
//! * [`watchdog`] — per-connection time-outs and the requests in flight.
//! * [`telemetry`] — Prometheus metrics; [`traces`] — OpenTelemetry spans.
//! * [`signing`] — the HMAC signature scheme of webhooks and callbacks.
//! * [`audio`] — measuring audio durations; [`media`] — the media types.
//! * [`net`] — which addresses are private.
//! * [`tls`] — TLS of the connections to PostgreSQL and Redis.
//! * [`secret_file`] — secrets generated once into the data directory.
//! * [`spool`] — each instance's spool directory.
//! * [`owner_cache`] — the caches of who owns which upstream resource.

pub mod access;
pub mod audio;
pub mod billing;
pub mod body;
pub mod errors;
pub mod media;
pub mod net;
pub mod owner_cache;
pub mod secret_file;
pub mod signing;
pub mod spec;
pub mod spool;
pub mod store_error;
pub mod telemetry;
pub mod tls;
pub mod traces;
pub mod validate;
pub mod watchdog;
