//! The names of the variables [`super::Config`] is read from, each with its
//! default and meaning (the docs' list is [`super::variables::VARIABLES`]).

/// Required upstream key; without it voice routes answer 503.
pub const PROVIDER_API_KEY: &str = "PROVIDER_API_KEY";
/// Main upstream API. Default [`DEFAULT_BASE_URL`].
pub const PROVIDER_BASE_URL: &str = "PROVIDER_BASE_URL";
/// Synthesis cluster. Default [`DEFAULT_SYNTH_URL`].
pub const PROVIDER_SYNTH_URL: &str = "PROVIDER_SYNTH_URL";
/// Percent added to upstream cost. Default 20.0.
pub const PROVIDER_MARKUP_PCT: &str = "PROVIDER_MARKUP_PCT";
/// HMAC secret of the inbound webhook. Default: unset (every inbound webhook refused, 503).
pub const PROVIDER_WEBHOOK_SECRET: &str = "PROVIDER_WEBHOOK_SECRET";
/// Gate of cloning and voice design. Default false.
pub const PROVIDER_BUSINESS_PLAN_ACTIVE: &str = "PROVIDER_BUSINESS_PLAN_ACTIVE";
/// Listen address. Default 127.0.0.1:8080.
pub const GATEWAY_ADDR: &str = "GATEWAY_ADDR";
/// Data directory (database, local objects). Default `./data`.
pub const GATEWAY_DATA_DIR: &str = "GATEWAY_DATA_DIR";
/// SQLite file. Default `$GATEWAY_DATA_DIR/gateway.db`.
pub const GATEWAY_DB: &str = "GATEWAY_DB";
/// A PostgreSQL database (`postgres://user:password@host:port/db`) used
/// instead of the SQLite file: several instances share it. Default: unset.
pub const GATEWAY_DATABASE_URL: &str = "GATEWAY_DATABASE_URL";
/// Upstream call time-out in milliseconds. Default 120000 (spec §8).
pub const GATEWAY_UPSTREAM_TIMEOUT_MS: &str = "GATEWAY_UPSTREAM_TIMEOUT_MS";
/// Allow fetching `audio_url`s on loopback/private addresses. Default false.
pub const GATEWAY_ALLOW_PRIVATE_FETCH: &str = "GATEWAY_ALLOW_PRIVATE_FETCH";
/// Largest JSON request body accepted, in bytes. Default 1 MiB. A request
/// whose `Content-Length` is larger is answered 413 before its body is read.
pub const GATEWAY_MAX_JSON_BYTES: &str = "GATEWAY_MAX_JSON_BYTES";
/// Seconds a client has to send a request's headers, counted from the
/// connection's start or, on a keep-alive connection, from the first byte of
/// the next request; then the connection is closed. Default 10.
pub const GATEWAY_HEADER_TIMEOUT_SECS: &str = "GATEWAY_HEADER_TIMEOUT_SECS";
/// Seconds a keep-alive connection with no request in flight stays open.
/// Default 75.
pub const GATEWAY_IDLE_TIMEOUT_SECS: &str = "GATEWAY_IDLE_TIMEOUT_SECS";
/// Client connections open at once. Default: 10,000, or half the process's
/// open-file limit if that is lower (a client connection may need an
/// upstream connection too, and the database and objects need descriptors).
/// At the cap the gateway stops accepting: new clients wait in the kernel's
/// listen backlog and are accepted as connections close.
pub const GATEWAY_MAX_CONNECTIONS: &str = "GATEWAY_MAX_CONNECTIONS";

pub use gateway_adapters::oidc::GATEWAY_OAUTH_PROVIDERS;
/// Price table on top of the defaults: `product.unit=usd,...`. Default: the spec's known prices.
pub use gateway_base::access::GATEWAY_ACCESS_LOG;
pub use gateway_base::body::{BODY_MIN_RATE, GATEWAY_BODY_TIMEOUT_SECS};
pub use gateway_base::watchdog::{default_max_connections, GATEWAY_MAX_STREAMS_PER_CONNECTION};
/// `true`: `/models/trending` shows every tenant's request counts.
pub const GATEWAY_TRENDING_GLOBAL_COUNTS: &str = "GATEWAY_TRENDING_GLOBAL_COUNTS";
pub const GATEWAY_PRICES: &str = "GATEWAY_PRICES";
/// Base URL the gateway is reached at, for its own presigned URLs. Default `http://<GATEWAY_ADDR>`.
pub const GATEWAY_PUBLIC_URL: &str = "GATEWAY_PUBLIC_URL";
/// Extra hosts (comma-separated) whose result URLs may be mirrored, besides the upstream bases.
pub const GATEWAY_MIRROR_HOSTS: &str = "GATEWAY_MIRROR_HOSTS";
/// Ids (comma-separated) of voices shared by every user, besides the voices
/// the provider lists with `source: stock` (see [`crate::owners`]).
pub const GATEWAY_STOCK_VOICES: &str = "GATEWAY_STOCK_VOICES";
/// Seconds between retention sweeps; 0 disables the periodic sweep. Default 3600.
pub const GATEWAY_SWEEP_INTERVAL_SECS: &str = "GATEWAY_SWEEP_INTERVAL_SECS";
/// Days a stored response of the Responses API is kept. Default 30.
pub const GATEWAY_RESPONSES_RETENTION_DAYS: &str = "GATEWAY_RESPONSES_RETENTION_DAYS";
/// Largest file of `POST /files`, in bytes. Default 200 MiB.
pub const GATEWAY_MAX_FILE_BYTES: &str = "GATEWAY_MAX_FILE_BYTES";
pub const GATEWAY_BATCH_MAX_LINES: &str = "GATEWAY_BATCH_MAX_LINES";
pub const GATEWAY_BATCH_CONCURRENCY: &str = "GATEWAY_BATCH_CONCURRENCY";
pub const GATEWAY_BATCH_INSTANCE_CONCURRENCY: &str = "GATEWAY_BATCH_INSTANCE_CONCURRENCY";
pub const GATEWAY_BATCH_WINDOW_SECS: &str = "GATEWAY_BATCH_WINDOW_SECS";
/// Longest live WebSocket session (realtime, live transcription), in seconds. Default 3600.
pub const GATEWAY_REALTIME_MAX_SECS: &str = "GATEWAY_REALTIME_MAX_SECS";
/// Seconds a live session may go without a message from its caller. Default 300.
pub const GATEWAY_REALTIME_IDLE_SECS: &str = "GATEWAY_REALTIME_IDLE_SECS";
/// Largest WebSocket message of a live session, in bytes. Default 4 MiB.
pub const GATEWAY_REALTIME_MAX_FRAME_BYTES: &str = "GATEWAY_REALTIME_MAX_FRAME_BYTES";
/// Live sessions one user may hold open on an instance at once. Default 8.
pub const GATEWAY_REALTIME_MAX_SESSIONS: &str = "GATEWAY_REALTIME_MAX_SESSIONS";
/// Seconds of a live transcription's audio held and committed at a time. Default 10.
pub const GATEWAY_STREAM_BILLING_SECS: &str = "GATEWAY_STREAM_BILLING_SECS";
/// Whose stored responses a caller reaches: `user` (default) or `key`.
pub const GATEWAY_RESPONSES_SCOPE: &str = "GATEWAY_RESPONSES_SCOPE";
/// UTC time (`HH:MM`) of the nightly reconciliation, or `off`. Default `00:30`.
pub const GATEWAY_RECONCILE_AT: &str = "GATEWAY_RECONCILE_AT";
/// Seconds between the job follower's looks for due jobs; 0 disables it. Default 2.
pub const GATEWAY_JOB_FOLLOW_SECS: &str = "GATEWAY_JOB_FOLLOW_SECS";
/// Jobs the follower polls at once (per instance). Default 8.
pub const GATEWAY_JOB_FOLLOW_CONCURRENCY: &str = "GATEWAY_JOB_FOLLOW_CONCURRENCY";
/// This instance's id (letters, digits, `.`, `_`, `-`; at most 64), named
/// by the credit holds it takes. Default: the id kept in the file
/// `instance-id` of the data directory (made on first start; a second
/// process on the same directory takes `instance-id.1`, …). See
/// [`crate::instance`].
pub const GATEWAY_INSTANCE_ID: &str = "GATEWAY_INSTANCE_ID";
/// Seconds an instance's lease lasts; it is renewed every third of it.
/// The holds of an instance that stopped renewing count no more after it.
/// Default 120 (at least 3).
pub const GATEWAY_INSTANCE_LEASE_SECS: &str = "GATEWAY_INSTANCE_LEASE_SECS";

/// The general gateway's providers file (TOML; see [`gateway_models::providers`]).
/// Default: unset (no models; model routes answer 404).
pub const GATEWAY_PROVIDERS: &str = "GATEWAY_PROVIDERS";
pub const GATEWAY_MCP_SERVERS: &str = "GATEWAY_MCP_SERVERS";
pub const GATEWAY_MCP_LOG_ARGUMENTS: &str = "GATEWAY_MCP_LOG_ARGUMENTS";
pub const GATEWAY_MCP_CALL_TIMEOUT_SECS: &str = "GATEWAY_MCP_CALL_TIMEOUT_SECS";
pub const GATEWAY_MCP_MAX_SESSIONS: &str = "GATEWAY_MCP_MAX_SESSIONS";
/// Seconds a model stream may stay idle (before its first byte: 504; once
/// streaming: an error event ends it). Default 30 (spec §8).
pub const GATEWAY_STREAM_TIMEOUT_SECS: &str = "GATEWAY_STREAM_TIMEOUT_SECS";

/// The Redis shared by several instances (`redis://[:password@]host[:port][/db]`
/// or `unix:///path`): rate limits, cache invalidation, stop-stream (see
/// [`gateway_adapters::cluster`]). Default: unset (one instance; no Redis needed).
pub const GATEWAY_REDIS_URL: &str = "GATEWAY_REDIS_URL";
/// Prefix of every Redis key and channel of the gateway. Default `gateway:`.
pub const GATEWAY_REDIS_PREFIX: &str = "GATEWAY_REDIS_PREFIX";
pub use gateway_adapters::cluster::GATEWAY_REDIS_CA_FILE;

/// `full` (default): every commit is fsynced before answers are sent, so a
/// committed record survives a power cut. `normal`: commits survive a crash
/// of the gateway but the last ones may be lost with the machine (SQLite WAL
/// with `synchronous=NORMAL`); no fsync on the request path.
pub const GATEWAY_DB_SYNC: &str = "GATEWAY_DB_SYNC";

pub const DEFAULT_BASE_URL: &str = "https://app.resemble.ai/api/v2";
pub const DEFAULT_SYNTH_URL: &str = "https://f.cluster.resemble.ai";

/// The window of `rpm` and `tpm` limits, in seconds (60).
pub const GATEWAY_LIMIT_WINDOW_SECS: &str = "GATEWAY_LIMIT_WINDOW_SECS";

/// How long a stopping instance serves on with `/readyz` at 503, in seconds (0).
pub const GATEWAY_SHUTDOWN_DELAY_SECS: &str = "GATEWAY_SHUTDOWN_DELAY_SECS";
