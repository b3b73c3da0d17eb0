//! [`Config`]: what the gateway runs with, its defaults, and what is
//! derived from it (the database's location, the upstream client's part).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::names::*;
use super::parse::host_is_private;

/// Everything the gateway reads from its environment.
#[derive(Clone)]
pub struct Config {
    /// `PROVIDER_API_KEY`; `None` means the voice integration is not configured.
    pub provider_api_key: Option<String>,
    /// Main upstream API base URL, without a trailing slash.
    pub provider_base_url: String,
    /// Synthesis cluster base URL, without a trailing slash.
    pub provider_synth_url: String,
    /// Secret of the inbound webhook's HMAC.
    pub webhook_secret: Option<String>,
    /// Whether business-plan routes are served.
    pub business_plan_active: bool,
    /// Where `gateway serve` listens.
    pub addr: SocketAddr,
    /// Directory holding the database and the local object store.
    pub data_dir: PathBuf,
    /// SQLite database file (when no `database_url` is set).
    pub db_path: PathBuf,
    /// PostgreSQL database URL (`GATEWAY_DATABASE_URL`); takes the place of `db_path`.
    pub database_url: Option<String>,
    /// Time-out of every upstream call.
    pub upstream_timeout: Duration,
    /// Whether `audio_url`s on private addresses may be fetched (tests, demo).
    pub allow_private_fetch: bool,
    /// Largest body of a fetched `audio_url` (500 MiB, the upload limit;
    /// counted while streaming). Not read from the environment.
    pub max_fetch_bytes: u64,
    /// Largest JSON request body accepted.
    pub max_json_bytes: usize,
    /// Time allowed for a request's headers (`GATEWAY_HEADER_TIMEOUT_SECS`).
    pub header_timeout: Duration,
    /// Idle keep-alive connections close after this (`GATEWAY_IDLE_TIMEOUT_SECS`).
    pub idle_timeout: Duration,
    /// Client connections open at once (`GATEWAY_MAX_CONNECTIONS`).
    pub max_connections: usize,
    /// Time a request body may take (`GATEWAY_BODY_TIMEOUT_SECS`), extended
    /// by one second per [`BODY_MIN_RATE`] bytes received.
    pub body_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection (`GATEWAY_MAX_STREAMS_PER_CONNECTION`).
    pub max_streams_per_connection: u32,
    /// Whether each request is logged on the `access` target (`GATEWAY_ACCESS_LOG`).
    pub access_log: bool,
    /// Whether `/models/trending` shows request counts of all traffic
    /// (`GATEWAY_TRENDING_GLOBAL_COUNTS`); by default it shows ranks only.
    pub trending_global_counts: bool,
    /// Who shares response cache entries (`GATEWAY_CACHE_SCOPE`: `user`,
    /// `key`, `global`; [`gateway_models::cache`]).
    pub cache_scope: gateway_models::cache::Scope,
    /// The in-process response cache's bound, MiB (`GATEWAY_CACHE_MAX_MB`,
    /// 64; unused with Redis).
    pub cache_max_mb: u64,
    /// Prices and markup.
    pub prices: gateway_base::billing::Prices,
    /// Base URL of the gateway itself; `None` until known (`http://<bound address>`).
    pub public_url: Option<String>,
    /// Extra hosts whose result URLs may be mirrored.
    pub mirror_hosts: Vec<String>,
    /// Voices shared by every user besides the provider's `source: stock` ones.
    pub stock_voices: Vec<String>,
    /// Interval of the retention sweeper; `None` disables it.
    pub sweep_interval: Option<Duration>,
    /// UTC time of the nightly reconciliation; `None` disables it.
    pub reconcile_at: Option<chrono::NaiveTime>,
    /// How often the job follower looks for due jobs; `None` disables it.
    pub job_follow_interval: Option<Duration>,
    /// How many jobs the follower polls at once.
    pub job_follow_concurrency: usize,
    /// This instance's configured id; `None`: the data directory's.
    pub instance_id: Option<String>,
    /// How long this instance's lease lasts (renewed every third of it).
    pub instance_lease: Duration,
    /// Delay before a job's first poll; each later poll waits twice as long
    /// as the one before, up to [`Config::job_follow_max_delay`].
    pub job_follow_first_delay: Duration,
    /// The longest delay between two polls of a job.
    pub job_follow_max_delay: Duration,
    /// Object storage backend.
    pub objects: gateway_adapters::objects::ObjectConfig,
    /// Whether every commit is fsynced (`GATEWAY_DB_SYNC=full`).
    pub db_sync_full: bool,
    /// Rate-limit overrides per capability (`GATEWAY_RATE_LIMITS`), applied over
    /// the route table's defaults when the gateway starts.
    pub rate_limits: gateway_adapters::ratelimit::Limits,
    /// The Redis shared by several instances (`GATEWAY_REDIS_URL`,
    /// `GATEWAY_REDIS_PREFIX`); `None`: one instance, nothing shared.
    pub redis: Option<gateway_adapters::cluster::RedisConfig>,
    /// A rate-limit store of one's own (tests); `None`: on Redis with
    /// [`Config::redis`], else in-process.
    pub limiter_store: Option<std::sync::Arc<dyn gateway_adapters::ratelimit::LimiterStore>>,
    /// Accounts, tokens, admin key, mail (`gateway_adapters::auth::config`).
    pub accounts: gateway_adapters::auth::config::AccountConfig,
    /// Stripe, for buying credits (`STRIPE_SECRET_KEY`, `STRIPE_WEBHOOK_SECRET`, `STRIPE_API_BASE`).
    pub stripe: gateway_adapters::stripe::StripeConfig,
    /// The providers file (`GATEWAY_PROVIDERS`).
    pub providers_file: Option<PathBuf>,
    /// Idle time-out of model streams (`GATEWAY_STREAM_TIMEOUT_SECS`).
    pub stream_timeout: Duration,
    /// Retries and cool-downs of model calls (`GATEWAY_RETRY_MAX`,
    /// `GATEWAY_RETRY_BASE_MS`, `GATEWAY_COOLDOWN_FAILS`, `GATEWAY_COOLDOWN_SECS`).
    pub routing: gateway_models::routing::Settings,
    /// OpenTelemetry traces (`OTEL_EXPORTER_OTLP_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); `None`: off.
    pub traces: Option<gateway_base::traces::Settings>,
    /// The sign-in (OpenID Connect) providers of the file
    /// `GATEWAY_OAUTH_PROVIDERS` (see [`gateway_adapters::oidc::config`]); empty: none.
    pub oauth_providers: Vec<gateway_adapters::oidc::ProviderConfig>,
}

impl Config {
    /// Where the database is: `GATEWAY_DATABASE_URL` when set, else the SQLite file.
    pub fn database(&self) -> gateway_store::Location {
        match &self.database_url {
            Some(url) => gateway_store::Location::Postgres(url.clone()),
            None => gateway_store::Location::Sqlite(self.db_path.clone()),
        }
    }
}

impl std::fmt::Debug for Config {
    // Hand-written so that the upstream key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field(
                "provider_api_key",
                &self.provider_api_key.as_ref().map(|_| "<set>"),
            )
            .field("provider_base_url", &self.provider_base_url)
            .field("provider_synth_url", &self.provider_synth_url)
            .field(
                "webhook_secret",
                &self.webhook_secret.as_ref().map(|_| "<set>"),
            )
            .field("business_plan_active", &self.business_plan_active)
            .field("addr", &self.addr)
            .field("data_dir", &self.data_dir)
            .field("db_path", &self.db_path)
            .field(
                "database_url",
                &self.database_url.as_deref().map(gateway_store::redact_url),
            )
            .field("upstream_timeout", &self.upstream_timeout)
            .field("allow_private_fetch", &self.allow_private_fetch)
            .field("max_fetch_bytes", &self.max_fetch_bytes)
            .field("max_json_bytes", &self.max_json_bytes)
            .field("header_timeout", &self.header_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_connections", &self.max_connections)
            .field("body_timeout", &self.body_timeout)
            .field(
                "max_streams_per_connection",
                &self.max_streams_per_connection,
            )
            .field("access_log", &self.access_log)
            .field("trending_global_counts", &self.trending_global_counts)
            .field("cache_scope", &self.cache_scope)
            .field("cache_max_mb", &self.cache_max_mb)
            .field("prices", &self.prices)
            .field("public_url", &self.public_url)
            .field("mirror_hosts", &self.mirror_hosts)
            .field("stock_voices", &self.stock_voices)
            .field("sweep_interval", &self.sweep_interval)
            .field("reconcile_at", &self.reconcile_at)
            .field("job_follow_interval", &self.job_follow_interval)
            .field("job_follow_concurrency", &self.job_follow_concurrency)
            .field("instance_id", &self.instance_id)
            .field("stripe", &self.stripe)
            .field("instance_lease", &self.instance_lease)
            .field("job_follow_first_delay", &self.job_follow_first_delay)
            .field("job_follow_max_delay", &self.job_follow_max_delay)
            .field("objects", &self.objects)
            .field("db_sync_full", &self.db_sync_full)
            .field("providers_file", &self.providers_file)
            .field("stream_timeout", &self.stream_timeout)
            .field("routing", &self.routing)
            .field("traces", &self.traces)
            .field("oauth_providers", &self.oauth_providers)
            .field("rate_limits", &self.rate_limits.to_string())
            .field("accounts", &self.accounts)
            .field("redis", &self.redis)
            .field(
                "limiter_store",
                &self.limiter_store.as_ref().map(|_| "<custom>"),
            )
            .finish()
    }
}

impl Config {
    /// Defaults for a data directory, as if the environment were empty.
    pub fn with_data_dir(data_dir: impl Into<PathBuf>) -> Config {
        let data_dir = data_dir.into();
        Config {
            provider_api_key: None,
            provider_base_url: DEFAULT_BASE_URL.to_owned(),
            provider_synth_url: DEFAULT_SYNTH_URL.to_owned(),
            webhook_secret: None,
            business_plan_active: false,
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            db_path: data_dir.join("gateway.db"),
            database_url: None,
            data_dir,
            upstream_timeout: Duration::from_secs(120),
            allow_private_fetch: false,
            max_fetch_bytes: 500 * 1024 * 1024,
            max_json_bytes: 1 << 20,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),
            max_connections: default_max_connections(),
            body_timeout: Duration::from_secs(30),
            max_streams_per_connection: 32,
            access_log: true,
            trending_global_counts: false,
            cache_scope: gateway_models::cache::Scope::User,
            cache_max_mb: gateway_models::cache::DEFAULT_MAX_MB,
            prices: gateway_base::billing::Prices::parse(None, "20.0").expect("default prices"),
            public_url: None,
            mirror_hosts: Vec::new(),
            stock_voices: Vec::new(),
            sweep_interval: Some(Duration::from_secs(3600)),
            reconcile_at: chrono::NaiveTime::from_hms_opt(0, 30, 0),
            job_follow_interval: Some(Duration::from_secs(2)),
            job_follow_concurrency: 8,
            instance_id: None,
            instance_lease: Duration::from_secs(120),
            job_follow_first_delay: Duration::from_secs(2),
            job_follow_max_delay: Duration::from_secs(60),
            objects: gateway_adapters::objects::ObjectConfig::default(),
            db_sync_full: true,
            rate_limits: gateway_adapters::ratelimit::Limits::default(),
            redis: None,
            limiter_store: None,
            accounts: Default::default(),
            stripe: Default::default(),
            providers_file: None,
            stream_timeout: Duration::from_secs(30),
            routing: Default::default(),
            traces: None,
            oauth_providers: Vec::new(),
        }
    }

    /// The start-up warning of a gateway whose stored objects its provider
    /// cannot fetch: routes whose upstream fetches `audio_url` itself
    /// (detect, intelligence, tracing, watermark, identity) pass the
    /// gateway's own presigned URLs, which name the public URL (the local
    /// store) or the S3 endpoint. When that host is a loopback or private
    /// address and a provider base is not, the provider cannot reach them.
    /// `public_url` is the URL objects are served under when
    /// `GATEWAY_PUBLIC_URL` is not set (`http://<bound address>`). Host
    /// names are not resolved: `localhost` (and `*.localhost`) count as
    /// loopback, other names as public.
    pub fn unreachable_objects_warning(&self, public_url: &str) -> Option<String> {
        let (what, objects_url) = match &self.objects.backend {
            gateway_adapters::objects::ObjectBackend::Local => (GATEWAY_PUBLIC_URL, public_url),
            gateway_adapters::objects::ObjectBackend::S3(s3) => {
                ("the S3 endpoint", s3.endpoint.as_str())
            }
        };
        if host_is_private(objects_url) != Some(true) {
            return None;
        }
        let public_provider = [&self.provider_base_url, &self.provider_synth_url]
            .into_iter()
            .find(|u| host_is_private(u) == Some(false))?;
        Some(format!(
            "{what} ({objects_url}) is a loopback or private address but the provider ({public_provider}) is not: \
             routes whose provider fetches audio_url itself (detect, intelligence, tracing, watermark, identity) \
             pass it presigned URLs it cannot reach; set {GATEWAY_PUBLIC_URL} to an address the provider can reach"
        ))
    }
}

impl Config {
    /// The provider's part of the configuration, which the upstream client
    /// is built from.
    pub fn upstream_settings(&self) -> gateway_adapters::upstream::Settings<'_> {
        gateway_adapters::upstream::Settings {
            api_key: self.provider_api_key.as_deref(),
            base_url: &self.provider_base_url,
            synth_url: &self.provider_synth_url,
            timeout: self.upstream_timeout,
        }
    }
}
