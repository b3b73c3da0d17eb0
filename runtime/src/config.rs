//! Configuration: environment → [`Config`].
//!
//! Precedence: a value set in the environment wins over the default listed
//! beside its name below. Names of the spec's configuration reference keep
//! their spec names (`PROVIDER_*`); the gateway's own start with `GATEWAY_`.
//! A value that does not parse is a [`ConfigError`] naming the variable, not
//! a silent default.
//!
//! Every variable the workspace reads, with its default and meaning, is a
//! row of [`variables::VARIABLES`], from which `docs/configuration.md` is
//! generated.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

mod error;
mod limits;
mod names;
mod parse;
pub mod variables;
mod vars;

pub use error::ConfigError;
pub use limits::{BatchLimits, McpConfig, SessionLimits};
pub use names::*;
use parse::*;
use vars::Vars;

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
    /// How long a stored response of the Responses API is kept
    /// (`GATEWAY_RESPONSES_RETENTION_DAYS`, 30 days), then swept.
    pub responses_retention: Duration,
    /// Whose stored responses a caller may continue, read and delete
    /// (`GATEWAY_RESPONSES_SCOPE`): `false` the user's (any of its keys),
    /// `true` only the presented key's.
    pub responses_by_key: bool,
    /// Largest file of `POST /files` (`GATEWAY_MAX_FILE_BYTES`, 200 MiB).
    pub max_file_bytes: u64,
    /// The limits of live WebSocket sessions (`GATEWAY_REALTIME_*`,
    /// `GATEWAY_STREAM_BILLING_SECS`).
    pub sessions: SessionLimits,
    /// How batches run (`GATEWAY_BATCH_*`).
    pub batches: BatchLimits,
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
    /// The window of keys' and models' `rpm` and `tpm` limits
    /// (`GATEWAY_LIMIT_WINDOW_SECS`, 60 s).
    pub limit_window: Duration,
    /// How long a stopping instance serves on, `/readyz` at 503, before it
    /// stops accepting and drains (`GATEWAY_SHUTDOWN_DELAY_SECS`, 0).
    pub shutdown_delay: Duration,
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
    /// The MCP gateway (`GATEWAY_MCP_*`).
    pub mcp: McpConfig,
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
            responses_retention: Duration::from_secs(30 * 86_400),
            sessions: SessionLimits::default(),
            batches: BatchLimits::default(),
            max_file_bytes: 200 << 20,
            responses_by_key: false,
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
            limit_window: gateway_adapters::ratelimit::windows::WINDOW,
            shutdown_delay: Duration::ZERO,
            redis: None,
            limiter_store: None,
            accounts: Default::default(),
            stripe: Default::default(),
            providers_file: None,
            mcp: McpConfig::default(),
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

impl Config {
    /// The gateway's own URL (`GATEWAY_PUBLIC_URL`, else `http://<addr>`).
    pub fn public_base(&self) -> String {
        self.public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", self.addr))
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads configuration through `get` (the environment, or a map in
    /// tests): one line per variable. Every variable is read; the error
    /// names every bad one.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let mut v = Vars {
            get,
            bad: Vec::new(),
        };
        let data_dir = v
            .raw(GATEWAY_DATA_DIR)
            .unwrap_or_else(|| "./data".to_owned());
        let mut c = Config::with_data_dir(PathBuf::from(data_dir));
        c.read_provider(&mut v);
        c.read_server(&mut v);
        c.read_background(&mut v);
        c.read_sessions(&mut v);
        c.read_services(&mut v);
        v.finish(c)
    }

    /// The voice provider and prices.
    fn read_provider(&mut self, v: &mut Vars<impl Fn(&str) -> Option<String>>) {
        self.provider_api_key = v.raw(PROVIDER_API_KEY);
        v.set(&mut self.provider_base_url, PROVIDER_BASE_URL, parse_url);
        v.set(&mut self.provider_synth_url, PROVIDER_SYNTH_URL, parse_url);
        self.webhook_secret = v.raw(PROVIDER_WEBHOOK_SECRET);
        v.set(
            &mut self.business_plan_active,
            PROVIDER_BUSINESS_PLAN_ACTIVE,
            parse_bool,
        );
        let markup = v.parse(PROVIDER_MARKUP_PCT, |s| {
            gateway_base::billing::parse_markup(s)
                .map_err(|e| format!("{e}; expected a non-negative number"))
        });
        let markup = markup.unwrap_or(self.prices.markup_pct);
        match gateway_base::billing::Prices::with_markup(v.raw(GATEWAY_PRICES).as_deref(), markup) {
            Ok(p) => self.prices = p,
            Err(e) => v.bad(GATEWAY_PRICES, e.to_string()),
        }
        self.public_url = v.parse(GATEWAY_PUBLIC_URL, parse_url);
        self.providers_file = v.raw(GATEWAY_PROVIDERS).map(PathBuf::from);
        limits::read_mcp(&mut self.mcp, v);
    }

    /// The listener, the database and request limits.
    fn read_server(&mut self, v: &mut Vars<impl Fn(&str) -> Option<String>>) {
        v.set(&mut self.addr, GATEWAY_ADDR, |s| {
            s.parse().map_err(|e| format!("{s:?}: {e}"))
        });
        if let Some(p) = v.raw(GATEWAY_DB) {
            self.db_path = PathBuf::from(p);
        }
        self.database_url = v.parse(GATEWAY_DATABASE_URL, parse_database_url);
        v.set(&mut self.db_sync_full, GATEWAY_DB_SYNC, parse_db_sync);
        v.set(
            &mut self.upstream_timeout,
            GATEWAY_UPSTREAM_TIMEOUT_MS,
            |s| Ok(Duration::from_millis(parse_u64(s)?.max(1))),
        );
        v.set(
            &mut self.allow_private_fetch,
            GATEWAY_ALLOW_PRIVATE_FETCH,
            parse_bool,
        );
        v.set(&mut self.max_json_bytes, GATEWAY_MAX_JSON_BYTES, |s| {
            s.parse().map_err(|e| format!("{s:?}: {e}"))
        });
        v.set(&mut self.header_timeout, GATEWAY_HEADER_TIMEOUT_SECS, secs);
        v.set(&mut self.idle_timeout, GATEWAY_IDLE_TIMEOUT_SECS, secs);
        v.set(&mut self.max_connections, GATEWAY_MAX_CONNECTIONS, |s| {
            Ok(parse_positive(s)? as usize)
        });
        v.set(&mut self.stream_timeout, GATEWAY_STREAM_TIMEOUT_SECS, secs);
        self.read_routing(v);
        self.traces = gateway_base::traces::Settings::from_env(|k| v.raw(k));
        v.set(&mut self.body_timeout, GATEWAY_BODY_TIMEOUT_SECS, secs);
        v.set(
            &mut self.max_streams_per_connection,
            GATEWAY_MAX_STREAMS_PER_CONNECTION,
            |s| u32::try_from(parse_positive(s)?).map_err(|e| format!("{s:?}: {e}")),
        );
        v.set(&mut self.access_log, GATEWAY_ACCESS_LOG, parse_bool);
        v.set(
            &mut self.trending_global_counts,
            GATEWAY_TRENDING_GLOBAL_COUNTS,
            parse_bool,
        );
        v.set(
            &mut self.cache_scope,
            gateway_models::cache::GATEWAY_CACHE_SCOPE,
            |s| s.parse(),
        );
        v.set(
            &mut self.cache_max_mb,
            gateway_models::cache::GATEWAY_CACHE_MAX_MB,
            parse_positive,
        );
    }

    /// Retries and cool-downs of model calls ([`gateway_models::routing`]).
    fn read_routing(&mut self, v: &mut Vars<impl Fn(&str) -> Option<String>>) {
        use gateway_models::routing as r;
        let s = &mut self.routing;
        v.set(&mut s.retry_max, r::GATEWAY_RETRY_MAX, |x| {
            u32::try_from(parse_u64(x)?).map_err(|e| format!("{x:?}: {e}"))
        });
        v.set(&mut s.retry_base, r::GATEWAY_RETRY_BASE_MS, |x| {
            Ok(Duration::from_millis(parse_u64(x)?))
        });
        v.set(&mut s.cooldown_fails, r::GATEWAY_COOLDOWN_FAILS, |x| {
            u32::try_from(parse_positive(x)?).map_err(|e| format!("{x:?}: {e}"))
        });
        v.set(&mut s.cooldown, r::GATEWAY_COOLDOWN_SECS, secs);
    }

    /// The limits of live sessions.
    fn read_sessions(&mut self, v: &mut Vars<impl Fn(&str) -> Option<String>>) {
        v.set(
            &mut self.max_file_bytes,
            GATEWAY_MAX_FILE_BYTES,
            parse_positive,
        );
        limits::read_batches(&mut self.batches, v);
        let s = &mut self.sessions;
        let secs = |t: &str| parse_positive(t).map(Duration::from_secs);
        v.set(&mut s.max_duration, GATEWAY_REALTIME_MAX_SECS, secs);
        v.set(&mut s.idle, GATEWAY_REALTIME_IDLE_SECS, secs);
        v.set(&mut s.max_frame, GATEWAY_REALTIME_MAX_FRAME_BYTES, |t| {
            parse_positive(t).map(|n| n as usize)
        });
        v.set(&mut s.per_user, GATEWAY_REALTIME_MAX_SESSIONS, |t| {
            parse_positive(t).map(|n| n as usize)
        });
        v.set(&mut s.billing_period, GATEWAY_STREAM_BILLING_SECS, |t| {
            parse_positive(t).map(|n| n as u32)
        });
    }

    /// The background tasks: sweeper, reconciliation, job follower.
    fn read_background(&mut self, v: &mut Vars<impl Fn(&str) -> Option<String>>) {
        v.set(&mut self.mirror_hosts, GATEWAY_MIRROR_HOSTS, |s| {
            Ok(comma_list(s, true))
        });
        v.set(&mut self.stock_voices, GATEWAY_STOCK_VOICES, |s| {
            Ok(comma_list(s, false))
        });
        v.set(
            &mut self.sweep_interval,
            GATEWAY_SWEEP_INTERVAL_SECS,
            secs_or_off,
        );
        v.set(
            &mut self.responses_retention,
            GATEWAY_RESPONSES_RETENTION_DAYS,
            |s| {
                Ok(Duration::from_secs(
                    parse_positive(s)?.saturating_mul(86_400),
                ))
            },
        );
        v.set(
            &mut self.responses_by_key,
            GATEWAY_RESPONSES_SCOPE,
            |s| match s.trim() {
                "user" => Ok(false),
                "key" => Ok(true),
                other => Err(format!("{other:?}: must be `user` or `key`")),
            },
        );
        v.set(
            &mut self.reconcile_at,
            GATEWAY_RECONCILE_AT,
            parse_time_or_off,
        );
        v.set(
            &mut self.job_follow_interval,
            GATEWAY_JOB_FOLLOW_SECS,
            secs_or_off,
        );
        v.set(
            &mut self.job_follow_concurrency,
            GATEWAY_JOB_FOLLOW_CONCURRENCY,
            parse_concurrency,
        );
        self.instance_id = v.parse(GATEWAY_INSTANCE_ID, crate::instance::parse_id);
        v.set(
            &mut self.instance_lease,
            GATEWAY_INSTANCE_LEASE_SECS,
            crate::instance::parse_lease,
        );
    }

    /// Rate limits, Redis, object storage, accounts, sign-in providers.
    fn read_services(&mut self, v: &mut Vars<impl Fn(&str) -> Option<String>>) {
        let limits = v.raw(gateway_adapters::ratelimit::GATEWAY_RATE_LIMITS);
        match gateway_adapters::ratelimit::Limits::parse(limits.as_deref()) {
            Ok(l) => self.rate_limits = l,
            Err(reason) => v.bad(gateway_adapters::ratelimit::GATEWAY_RATE_LIMITS, reason),
        }
        v.set(&mut self.limit_window, GATEWAY_LIMIT_WINDOW_SECS, |t| {
            parse_positive(t).map(Duration::from_secs)
        });
        v.set(&mut self.shutdown_delay, GATEWAY_SHUTDOWN_DELAY_SECS, |t| {
            secs_or_off(t).map(Option::unwrap_or_default)
        });
        let prefix = v.raw(GATEWAY_REDIS_PREFIX);
        self.redis = v.parse(GATEWAY_REDIS_URL, |url| {
            gateway_adapters::cluster::RedisConfig::parse(url, prefix.as_deref())
        });
        if let Some(ca) = v.raw(GATEWAY_REDIS_CA_FILE) {
            match self.redis.take() {
                Some(r) => {
                    self.redis = v.parse(GATEWAY_REDIS_CA_FILE, |_| {
                        r.with_ca_file(std::path::Path::new(ca.trim()))
                    })
                }
                None if v.raw(GATEWAY_REDIS_URL).is_none() => {
                    v.bad(GATEWAY_REDIS_CA_FILE, "set without GATEWAY_REDIS_URL")
                }
                None => {} // GATEWAY_REDIS_URL's own error says it
            }
        }
        match gateway_adapters::objects::ObjectConfig::from_lookup(|n| v.raw(n)) {
            Ok(o) => self.objects = o,
            Err(bad) => v.bad.extend(bad),
        }
        match gateway_adapters::auth::config::AccountConfig::from_lookup(|n| v.raw(n)) {
            Ok(a) => self.accounts = a,
            Err(bad) => v.bad.extend(bad),
        }
        match gateway_adapters::oidc::config::from_lookup(|n| v.raw(n)) {
            Ok(p) => self.oauth_providers = p,
            Err(bad) => v.bad.extend(bad),
        }
        match gateway_adapters::stripe::StripeConfig::from_lookup(|n| v.raw(n)) {
            Ok(s) => self.stripe = s,
            Err(bad) => v.bad.extend(bad),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::time::Duration;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_follow_the_spec() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.prices.markup_pct, rust_decimal::Decimal::from(20));
        assert!(!c.business_plan_active);
        assert_eq!(c.upstream_timeout, Duration::from_secs(120));
        assert_eq!(c.provider_base_url, DEFAULT_BASE_URL);
        assert!(c.provider_api_key.is_none());
        assert_eq!(c.db_path, PathBuf::from("./data/gateway.db"));
        assert_eq!(c.header_timeout, Duration::from_secs(10));
        assert_eq!(c.idle_timeout, Duration::from_secs(75));
        assert!((16..=10_000).contains(&c.max_connections));
    }

    #[test]
    fn connection_limits_parse() {
        let c = cfg(&[
            (GATEWAY_HEADER_TIMEOUT_SECS, "3"),
            (GATEWAY_IDLE_TIMEOUT_SECS, "30"),
            (GATEWAY_MAX_CONNECTIONS, "20"),
        ])
        .unwrap();
        assert_eq!(c.header_timeout, Duration::from_secs(3));
        assert_eq!(c.idle_timeout, Duration::from_secs(30));
        assert_eq!(c.max_connections, 20);
        for name in [
            GATEWAY_HEADER_TIMEOUT_SECS,
            GATEWAY_IDLE_TIMEOUT_SECS,
            GATEWAY_MAX_CONNECTIONS,
        ] {
            assert_eq!(cfg(&[(name, "0")]).err().unwrap().name, name);
            assert_eq!(cfg(&[(name, "soon")]).err().unwrap().name, name);
        }
    }

    #[test]
    fn bad_values_name_the_variable() {
        let e = cfg(&[(PROVIDER_BUSINESS_PLAN_ACTIVE, "maybe")])
            .err()
            .unwrap();
        assert_eq!(e.name, PROVIDER_BUSINESS_PLAN_ACTIVE);
        let e = cfg(&[(PROVIDER_BASE_URL, "ftp://x")]).err().unwrap();
        assert_eq!(e.name, PROVIDER_BASE_URL);
        let e = cfg(&[(PROVIDER_MARKUP_PCT, "-3")]).err().unwrap();
        assert_eq!(e.name, PROVIDER_MARKUP_PCT);
    }

    #[test]
    fn every_bad_variable_is_reported_by_its_own_name() {
        let e = cfg(&[
            (PROVIDER_BASE_URL, "ftp://x"),
            (GATEWAY_DB_SYNC, "sometimes"),
            (
                gateway_adapters::objects::config::GATEWAY_OBJECT_STORE,
                "s3",
            ),
            (gateway_adapters::objects::config::GATEWAY_S3_BUCKET, "b"),
            (
                gateway_adapters::objects::config::GATEWAY_S3_ACCESS_KEY,
                "ak",
            ),
            (
                gateway_adapters::objects::config::GATEWAY_S3_SECRET_KEY,
                "sk",
            ),
            (
                gateway_adapters::objects::config::GATEWAY_S3_PATH_STYLE,
                "maybe",
            ),
            (
                gateway_adapters::objects::config::GATEWAY_S3_TIMEOUT_SECS,
                "0",
            ),
        ])
        .err()
        .unwrap();
        assert_eq!(
            e.names(),
            [
                PROVIDER_BASE_URL,
                GATEWAY_DB_SYNC,
                gateway_adapters::objects::config::GATEWAY_S3_PATH_STYLE,
                gateway_adapters::objects::config::GATEWAY_S3_TIMEOUT_SECS
            ]
        );
        let text = e.to_string();
        for name in [
            "PROVIDER_BASE_URL",
            "GATEWAY_DB_SYNC",
            "GATEWAY_S3_PATH_STYLE",
            "GATEWAY_S3_TIMEOUT_SECS",
        ] {
            assert!(text.contains(name), "{text}");
        }
        assert!(!text.contains("GATEWAY_OBJECT_STORE"), "{text}");
    }

    #[test]
    fn a_bad_sign_in_providers_file_is_reported_beside_the_other_variables() {
        let path = std::env::temp_dir().join(format!("gw-oauth-{}.toml", std::process::id()));
        std::fs::write(
            &path,
            "[[provider]]\nid = \"idp\"\nissuer = \"https://idp.example.com\"\nclient_id = \"c\"\nclient_secret_env = \"GW_TEST_UNSET_SECRET\"\n",
        )
        .unwrap();
        let file = path.to_str().unwrap();
        let e = cfg(&[
            (GATEWAY_DB_SYNC, "sometimes"),
            (GATEWAY_OAUTH_PROVIDERS, file),
        ])
        .err()
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(e.names(), [GATEWAY_DB_SYNC, GATEWAY_OAUTH_PROVIDERS]);
        let text = e.to_string();
        assert!(
            text.contains(&format!("{file}: provider \"idp\": client_secret_env")),
            "{text}"
        );
    }

    #[test]
    fn the_job_follower_is_on_every_two_seconds_unless_zero() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.job_follow_interval, Some(Duration::from_secs(2)));
        assert_eq!(c.job_follow_concurrency, 8);
        let c = cfg(&[(GATEWAY_JOB_FOLLOW_SECS, "0")]).unwrap();
        assert_eq!(c.job_follow_interval, None);
        let c = cfg(&[
            (GATEWAY_JOB_FOLLOW_SECS, "5"),
            (GATEWAY_JOB_FOLLOW_CONCURRENCY, "3"),
        ])
        .unwrap();
        assert_eq!(c.job_follow_interval, Some(Duration::from_secs(5)));
        assert_eq!(c.job_follow_concurrency, 3);
        let e = cfg(&[(GATEWAY_JOB_FOLLOW_CONCURRENCY, "0")]).err().unwrap();
        assert_eq!(e.name, GATEWAY_JOB_FOLLOW_CONCURRENCY);
        let e = cfg(&[(GATEWAY_JOB_FOLLOW_SECS, "soon")]).err().unwrap();
        assert_eq!(e.name, GATEWAY_JOB_FOLLOW_SECS);
    }

    #[test]
    fn redis_is_off_unless_configured() {
        assert!(cfg(&[(GATEWAY_REDIS_PREFIX, "x:")])
            .unwrap()
            .redis
            .is_none());
        let c = cfg(&[(GATEWAY_REDIS_URL, "redis://:pw@127.0.0.1:6379/2")]).unwrap();
        let r = c.redis.as_ref().unwrap();
        assert_eq!(r.prefix, gateway_adapters::cluster::DEFAULT_PREFIX);
        assert!(!format!("{c:?}").contains("pw@"), "{c:?}");
        let c = cfg(&[
            (GATEWAY_REDIS_URL, "redis://127.0.0.1"),
            (GATEWAY_REDIS_PREFIX, "gw-eu:"),
        ])
        .unwrap();
        assert_eq!(c.redis.unwrap().prefix, "gw-eu:");
        for bad in ["http://127.0.0.1:6379", "redis://", "not a url"] {
            let e = cfg(&[(GATEWAY_REDIS_URL, bad)]).err().unwrap();
            assert_eq!(e.name, GATEWAY_REDIS_URL, "{bad}");
        }
    }

    #[test]
    fn tls_settings_that_cannot_be_used_name_their_variable() {
        let c = cfg(&[(GATEWAY_REDIS_URL, "rediss://:pw@cache.example:6380")]).unwrap();
        assert!(c.redis.as_ref().unwrap().is_tls());
        let not_pem = std::env::temp_dir().join(format!("gw-not-pem-{}", std::process::id()));
        std::fs::write(&not_pem, "hello").unwrap();
        let not_pem = not_pem.to_str().unwrap();
        for (url, ca, why) in [
            (
                "rediss://h",
                "/no/such/ca.pem",
                "cannot read /no/such/ca.pem",
            ),
            ("rediss://h", not_pem, "no certificate"),
            ("redis://h", not_pem, "not rediss://"),
            ("", not_pem, "without GATEWAY_REDIS_URL"),
        ] {
            let e = cfg(&[(GATEWAY_REDIS_URL, url), (GATEWAY_REDIS_CA_FILE, ca)])
                .err()
                .unwrap();
            assert_eq!(e.name, GATEWAY_REDIS_CA_FILE, "{url} {ca}");
            assert!(e.reason.contains(why), "{url} {ca}: {}", e.reason);
        }
        for (url, why) in [
            (
                "postgres://u:secret@h/d?sslmode=verify-full",
                "needs sslrootcert",
            ),
            ("postgres://u:secret@h/d?sslmode=maybe", "expected disable"),
            (
                "postgres://u:secret@h/d?sslmode=verify-ca&sslrootcert=/no/ca.pem",
                "cannot read",
            ),
            (
                &format!("postgres://u:secret@h/d?sslmode=require&sslrootcert={not_pem}"),
                "no certificate",
            ),
        ] {
            let e = cfg(&[(GATEWAY_DATABASE_URL, url)]).err().unwrap();
            assert_eq!(e.name, GATEWAY_DATABASE_URL, "{url}");
            assert!(e.reason.contains(why), "{url}: {}", e.reason);
            assert!(!e.to_string().contains("secret"), "{e}");
        }
        let _ = std::fs::remove_file(not_pem);
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = cfg(&[(PROVIDER_API_KEY, "sk-very-secret")]).unwrap();
        assert!(!format!("{c:?}").contains("very-secret"));
    }

    #[test]
    fn objects_the_provider_cannot_reach_are_warned_about() {
        let mut c = Config::with_data_dir("/tmp/x");
        c.provider_base_url = "https://api.example.com/v2".into();
        c.provider_synth_url = "https://f.example.com".into();
        let w = c
            .unreachable_objects_warning("http://127.0.0.1:8080")
            .unwrap();
        assert!(
            w.contains("GATEWAY_PUBLIC_URL") && w.contains("https://api.example.com/v2"),
            "{w}"
        );
        assert!(c
            .unreachable_objects_warning("http://localhost:8080")
            .is_some());
        assert!(c.unreachable_objects_warning("http://[::1]:8080").is_some());
        assert!(c.unreachable_objects_warning("http://10.1.2.3").is_some());
        assert!(c
            .unreachable_objects_warning("https://gw.example.com")
            .is_none());
        c.provider_base_url = "http://127.0.0.1:9000".into();
        c.provider_synth_url = "http://127.0.0.1:9001".into();
        assert!(
            c.unreachable_objects_warning("http://127.0.0.1:8080")
                .is_none(),
            "both local: fine"
        );
    }
}
