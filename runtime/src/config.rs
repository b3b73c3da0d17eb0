//! Configuration: environment → [`Config`].
//!
//! Precedence: a value set in the environment wins over the default listed
//! beside its name below. Names of the spec's configuration reference keep
//! their spec names (`PROVIDER_*`); the gateway's own start with `GATEWAY_`.
//! A value that does not parse is a [`ConfigError`] naming the variable, not
//! a silent default.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Required upstream key; without it voice routes answer 503.
pub const PROVIDER_API_KEY: &str = "PROVIDER_API_KEY";
/// Main upstream API. Default [`DEFAULT_BASE_URL`].
pub const PROVIDER_BASE_URL: &str = "PROVIDER_BASE_URL";
/// Synthesis cluster. Default [`DEFAULT_SYNTH_URL`].
pub const PROVIDER_SYNTH_URL: &str = "PROVIDER_SYNTH_URL";
/// Percent added to upstream cost. Default 20.0.
pub const PROVIDER_MARKUP_PCT: &str = "PROVIDER_MARKUP_PCT";
/// HMAC secret of the inbound webhook. Default: unset (unsigned accepted).
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

/// Price table on top of the defaults: `product.unit=usd,...`. Default: the spec's known prices.
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
/// UTC time (`HH:MM`) of the nightly reconciliation, or `off`. Default `00:30`.
pub const GATEWAY_RECONCILE_AT: &str = "GATEWAY_RECONCILE_AT";
/// Seconds between the job follower's looks for due jobs; 0 disables it. Default 2.
pub const GATEWAY_JOB_FOLLOW_SECS: &str = "GATEWAY_JOB_FOLLOW_SECS";
/// Jobs the follower polls at once (per instance). Default 8.
pub const GATEWAY_JOB_FOLLOW_CONCURRENCY: &str = "GATEWAY_JOB_FOLLOW_CONCURRENCY";

/// The general gateway's providers file (TOML; see [`crate::providers`]).
/// Default: unset (no models; model routes answer 404).
pub const GATEWAY_PROVIDERS: &str = "GATEWAY_PROVIDERS";
/// Seconds a model stream may stay idle (before its first byte: 504; once
/// streaming: an error event ends it). Default 30 (spec §8).
pub const GATEWAY_STREAM_TIMEOUT_SECS: &str = "GATEWAY_STREAM_TIMEOUT_SECS";

/// The Redis shared by several instances (`redis://[:password@]host[:port][/db]`
/// or `unix:///path`): rate limits, cache invalidation, stop-stream (see
/// [`crate::cluster`]). Default: unset (one instance; no Redis needed).
pub const GATEWAY_REDIS_URL: &str = "GATEWAY_REDIS_URL";
/// Prefix of every Redis key and channel of the gateway. Default `gateway:`.
pub const GATEWAY_REDIS_PREFIX: &str = "GATEWAY_REDIS_PREFIX";

/// `full` (default): every commit is fsynced before answers are sent, so a
/// committed record survives a power cut. `normal`: commits survive a crash
/// of the gateway but the last ones may be lost with the machine (SQLite WAL
/// with `synchronous=NORMAL`); no fsync on the request path.
pub const GATEWAY_DB_SYNC: &str = "GATEWAY_DB_SYNC";

pub const DEFAULT_BASE_URL: &str = "https://app.resemble.ai/api/v2";
pub const DEFAULT_SYNTH_URL: &str = "https://f.cluster.resemble.ai";

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
    /// Prices and markup.
    pub prices: crate::billing::Prices,
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
    /// Delay before a job's first poll; each later poll waits twice as long
    /// as the one before, up to [`Config::job_follow_max_delay`].
    pub job_follow_first_delay: Duration,
    /// The longest delay between two polls of a job.
    pub job_follow_max_delay: Duration,
    /// Object storage backend.
    pub objects: crate::objects::ObjectConfig,
    /// Whether every commit is fsynced (`GATEWAY_DB_SYNC=full`).
    pub db_sync_full: bool,
    /// Rate-limit overrides per capability (`GATEWAY_RATE_LIMITS`), applied over
    /// the route table's defaults when the gateway starts.
    pub rate_limits: crate::ratelimit::Limits,
    /// The Redis shared by several instances (`GATEWAY_REDIS_URL`,
    /// `GATEWAY_REDIS_PREFIX`); `None`: one instance, nothing shared.
    pub redis: Option<crate::cluster::RedisConfig>,
    /// A rate-limit store of one's own (tests); `None`: on Redis with
    /// [`Config::redis`], else in-process.
    pub limiter_store: Option<std::sync::Arc<dyn crate::ratelimit::LimiterStore>>,
    /// Accounts, tokens, admin key, mail (`crate::auth::config`).
    pub accounts: crate::auth::config::AccountConfig,
    /// The providers file (`GATEWAY_PROVIDERS`).
    pub providers_file: Option<PathBuf>,
    /// Idle time-out of model streams (`GATEWAY_STREAM_TIMEOUT_SECS`).
    pub stream_timeout: Duration,
}

impl Config {
    /// Where the database is: `GATEWAY_DATABASE_URL` when set, else the SQLite file.
    pub fn database(&self) -> crate::store::Location {
        match &self.database_url {
            Some(url) => crate::store::Location::Postgres(url.clone()),
            None => crate::store::Location::Sqlite(self.db_path.clone()),
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
                &self.database_url.as_deref().map(crate::store::redact_url),
            )
            .field("upstream_timeout", &self.upstream_timeout)
            .field("allow_private_fetch", &self.allow_private_fetch)
            .field("max_fetch_bytes", &self.max_fetch_bytes)
            .field("max_json_bytes", &self.max_json_bytes)
            .field("header_timeout", &self.header_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_connections", &self.max_connections)
            .field("prices", &self.prices)
            .field("public_url", &self.public_url)
            .field("mirror_hosts", &self.mirror_hosts)
            .field("stock_voices", &self.stock_voices)
            .field("sweep_interval", &self.sweep_interval)
            .field("reconcile_at", &self.reconcile_at)
            .field("job_follow_interval", &self.job_follow_interval)
            .field("job_follow_concurrency", &self.job_follow_concurrency)
            .field("job_follow_first_delay", &self.job_follow_first_delay)
            .field("job_follow_max_delay", &self.job_follow_max_delay)
            .field("objects", &self.objects)
            .field("db_sync_full", &self.db_sync_full)
            .field("providers_file", &self.providers_file)
            .field("stream_timeout", &self.stream_timeout)
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

/// A variable that is set but does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid value for {name}: {reason}")]
pub struct ConfigError {
    pub name: &'static str,
    pub reason: String,
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
            prices: crate::billing::Prices::parse(None, "20.0").expect("default prices"),
            public_url: None,
            mirror_hosts: Vec::new(),
            stock_voices: Vec::new(),
            sweep_interval: Some(Duration::from_secs(3600)),
            reconcile_at: chrono::NaiveTime::from_hms_opt(0, 30, 0),
            job_follow_interval: Some(Duration::from_secs(2)),
            job_follow_concurrency: 8,
            job_follow_first_delay: Duration::from_secs(2),
            job_follow_max_delay: Duration::from_secs(60),
            objects: crate::objects::ObjectConfig::default(),
            db_sync_full: true,
            rate_limits: crate::ratelimit::Limits::default(),
            redis: None,
            limiter_store: None,
            accounts: Default::default(),
            providers_file: None,
            stream_timeout: Duration::from_secs(30),
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
            crate::objects::ObjectBackend::Local => (GATEWAY_PUBLIC_URL, public_url),
            crate::objects::ObjectBackend::S3(s3) => ("the S3 endpoint", s3.endpoint.as_str()),
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

    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads configuration through `get` (the environment, or a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let data_dir = PathBuf::from(get(GATEWAY_DATA_DIR).unwrap_or_else(|| "./data".to_owned()));
        let mut c = Config::with_data_dir(data_dir);
        c.provider_api_key = get(PROVIDER_API_KEY);
        if let Some(v) = get(PROVIDER_BASE_URL) {
            c.provider_base_url = parse_url(PROVIDER_BASE_URL, &v)?;
        }
        if let Some(v) = get(PROVIDER_SYNTH_URL) {
            c.provider_synth_url = parse_url(PROVIDER_SYNTH_URL, &v)?;
        }
        let markup = match get(PROVIDER_MARKUP_PCT) {
            Some(v) => crate::billing::parse_markup(&v).map_err(|e| ConfigError {
                name: PROVIDER_MARKUP_PCT,
                reason: format!("{e}; expected a non-negative number"),
            })?,
            None => c.prices.markup_pct,
        };
        c.webhook_secret = get(PROVIDER_WEBHOOK_SECRET);
        if let Some(v) = get(PROVIDER_BUSINESS_PLAN_ACTIVE) {
            c.business_plan_active = parse_bool(PROVIDER_BUSINESS_PLAN_ACTIVE, &v)?;
        }
        if let Some(v) = get(GATEWAY_ADDR) {
            c.addr = v.parse().map_err(|e| ConfigError {
                name: GATEWAY_ADDR,
                reason: format!("{v:?}: {e}"),
            })?;
        }
        if let Some(v) = get(GATEWAY_DB) {
            c.db_path = PathBuf::from(v);
        }
        if let Some(v) = get(GATEWAY_DATABASE_URL) {
            let v = v.trim();
            if !(v.starts_with("postgres://") || v.starts_with("postgresql://")) {
                return Err(ConfigError {
                    name: GATEWAY_DATABASE_URL,
                    reason: "expected a postgres:// or postgresql:// URL".into(),
                });
            }
            crate::store::check_url(v).map_err(|e| ConfigError {
                name: GATEWAY_DATABASE_URL,
                reason: e.to_string(),
            })?;
            c.database_url = Some(v.to_owned());
        }
        if let Some(v) = get(GATEWAY_UPSTREAM_TIMEOUT_MS) {
            let ms: u64 = v.parse().map_err(|e| ConfigError {
                name: GATEWAY_UPSTREAM_TIMEOUT_MS,
                reason: format!("{v:?}: {e}"),
            })?;
            c.upstream_timeout = Duration::from_millis(ms.max(1));
        }
        if let Some(v) = get(GATEWAY_ALLOW_PRIVATE_FETCH) {
            c.allow_private_fetch = parse_bool(GATEWAY_ALLOW_PRIVATE_FETCH, &v)?;
        }
        if let Some(v) = get(GATEWAY_MAX_JSON_BYTES) {
            c.max_json_bytes = v.parse().map_err(|e| ConfigError {
                name: GATEWAY_MAX_JSON_BYTES,
                reason: format!("{v:?}: {e}"),
            })?;
        }
        if let Some(v) = get(GATEWAY_HEADER_TIMEOUT_SECS) {
            c.header_timeout =
                Duration::from_secs(parse_positive(GATEWAY_HEADER_TIMEOUT_SECS, &v)?);
        }
        if let Some(v) = get(GATEWAY_IDLE_TIMEOUT_SECS) {
            c.idle_timeout = Duration::from_secs(parse_positive(GATEWAY_IDLE_TIMEOUT_SECS, &v)?);
        }
        if let Some(v) = get(GATEWAY_MAX_CONNECTIONS) {
            c.max_connections = parse_positive(GATEWAY_MAX_CONNECTIONS, &v)? as usize;
        }
        c.prices = crate::billing::Prices::with_markup(get(GATEWAY_PRICES).as_deref(), markup)
            .map_err(|e| ConfigError {
                name: GATEWAY_PRICES,
                reason: e.to_string(),
            })?;
        if let Some(v) = get(GATEWAY_PUBLIC_URL) {
            c.public_url = Some(parse_url(GATEWAY_PUBLIC_URL, &v)?);
        }
        if let Some(v) = get(GATEWAY_MIRROR_HOSTS) {
            c.mirror_hosts = v
                .split(',')
                .map(|h| h.trim().to_ascii_lowercase())
                .filter(|h| !h.is_empty())
                .collect();
        }
        if let Some(v) = get(GATEWAY_STOCK_VOICES) {
            c.stock_voices = v
                .split(',')
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect();
        }
        if let Some(v) = get(GATEWAY_SWEEP_INTERVAL_SECS) {
            let secs: u64 = v.trim().parse().map_err(|e| ConfigError {
                name: GATEWAY_SWEEP_INTERVAL_SECS,
                reason: format!("{v:?}: {e}"),
            })?;
            c.sweep_interval = (secs > 0).then(|| Duration::from_secs(secs));
        }
        if let Some(v) = get(GATEWAY_RECONCILE_AT) {
            c.reconcile_at = if v.trim().eq_ignore_ascii_case("off") {
                None
            } else {
                Some(
                    chrono::NaiveTime::parse_from_str(v.trim(), "%H:%M").map_err(|e| {
                        ConfigError {
                            name: GATEWAY_RECONCILE_AT,
                            reason: format!("{v:?} is not HH:MM or off: {e}"),
                        }
                    })?,
                )
            };
        }
        if let Some(v) = get(GATEWAY_JOB_FOLLOW_SECS) {
            let secs: u64 = v.trim().parse().map_err(|e| ConfigError {
                name: GATEWAY_JOB_FOLLOW_SECS,
                reason: format!("{v:?}: {e}"),
            })?;
            c.job_follow_interval = (secs > 0).then(|| Duration::from_secs(secs));
        }
        if let Some(v) = get(GATEWAY_JOB_FOLLOW_CONCURRENCY) {
            let n: usize = v.trim().parse().map_err(|e| ConfigError {
                name: GATEWAY_JOB_FOLLOW_CONCURRENCY,
                reason: format!("{v:?}: {e}"),
            })?;
            if n == 0 {
                return Err(ConfigError {
                    name: GATEWAY_JOB_FOLLOW_CONCURRENCY,
                    reason: "must be at least 1 (GATEWAY_JOB_FOLLOW_SECS=0 disables the follower)"
                        .into(),
                });
            }
            c.job_follow_concurrency = n;
        }
        c.providers_file = get(GATEWAY_PROVIDERS).map(PathBuf::from);
        if let Some(v) = get(GATEWAY_STREAM_TIMEOUT_SECS) {
            c.stream_timeout =
                Duration::from_secs(parse_positive(GATEWAY_STREAM_TIMEOUT_SECS, &v)?);
        }
        if let Some(v) = get(GATEWAY_DB_SYNC) {
            c.db_sync_full = match v.trim().to_ascii_lowercase().as_str() {
                "full" => true,
                "normal" => false,
                _ => {
                    return Err(ConfigError {
                        name: GATEWAY_DB_SYNC,
                        reason: format!("{v:?} is not full or normal"),
                    })
                }
            };
        }
        c.rate_limits =
            crate::ratelimit::Limits::parse(get(crate::ratelimit::GATEWAY_RATE_LIMITS).as_deref())
                .map_err(|reason| ConfigError {
                    name: crate::ratelimit::GATEWAY_RATE_LIMITS,
                    reason,
                })?;
        if let Some(url) = get(GATEWAY_REDIS_URL) {
            let prefix = get(GATEWAY_REDIS_PREFIX);
            c.redis = Some(
                crate::cluster::RedisConfig::parse(&url, prefix.as_deref()).map_err(|reason| {
                    ConfigError {
                        name: GATEWAY_REDIS_URL,
                        reason,
                    }
                })?,
            );
        }
        c.objects = crate::objects::ObjectConfig::from_lookup(get).map_err(|e| ConfigError {
            name: "GATEWAY_OBJECT_STORE",
            reason: e,
        })?;
        c.accounts = crate::auth::config::AccountConfig::from_lookup(get)
            .map_err(|(name, reason)| ConfigError { name, reason })?;
        Ok(c)
    }
}

/// The default of `GATEWAY_MAX_CONNECTIONS`: 10,000, or half the soft
/// open-file limit if that is lower (at least 16).
pub fn default_max_connections() -> usize {
    const DEFAULT: usize = 10_000;
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0
            && lim.rlim_cur != libc::RLIM_INFINITY
        {
            return DEFAULT.min((lim.rlim_cur as usize / 2).max(16));
        }
    }
    DEFAULT
}

/// A whole number greater than zero.
fn parse_positive(name: &'static str, v: &str) -> Result<u64, ConfigError> {
    match v.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        Ok(_) => Err(ConfigError {
            name,
            reason: format!("{v:?} must be greater than 0"),
        }),
        Err(e) => Err(ConfigError {
            name,
            reason: format!("{v:?}: {e}"),
        }),
    }
}

fn parse_bool(name: &'static str, v: &str) -> Result<bool, ConfigError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(ConfigError {
            name,
            reason: format!("{v:?} is not a boolean (true/false)"),
        }),
    }
}

fn parse_url(name: &'static str, v: &str) -> Result<String, ConfigError> {
    let v = v.trim().trim_end_matches('/');
    match reqwest::Url::parse(v) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(v.to_owned()),
        Ok(_) => Err(ConfigError {
            name,
            reason: format!("{v:?} is not an http(s) URL"),
        }),
        Err(e) => Err(ConfigError {
            name,
            reason: format!("{v:?}: {e}"),
        }),
    }
}

/// Whether a URL's host is a loopback or private address (`None`: no host).
/// Names are not resolved: `localhost` and `*.localhost` are loopback, other
/// names are taken as public.
fn host_is_private(url: &str) -> Option<bool> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    Some(match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => crate::net::is_private(ip),
        Err(_) => {
            let d = bare.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    })
}

impl Config {
    /// The provider's part of the configuration, which the upstream client
    /// is built from.
    pub fn upstream_settings(&self) -> crate::upstream::Settings<'_> {
        crate::upstream::Settings {
            api_key: self.provider_api_key.as_deref(),
            base_url: &self.provider_base_url,
            synth_url: &self.provider_synth_url,
            timeout: self.upstream_timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

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
        assert_eq!(r.prefix, crate::cluster::DEFAULT_PREFIX);
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
