//! Reading [`Config`] from the environment: one line per variable, by
//! subject; every variable is read, so that one start names all the bad
//! ones.

use std::path::PathBuf;
use std::time::Duration;

use super::error::ConfigError;
use super::names::*;
use super::parse::*;
use super::settings::Config;

/// The variables being read and the bad ones found so far.
struct Vars<G> {
    get: G,
    bad: Vec<(&'static str, String)>,
}

impl<G: Fn(&str) -> Option<String>> Vars<G> {
    /// The value of `name`; empty counts as unset.
    fn raw(&self, name: &str) -> Option<String> {
        (self.get)(name).filter(|v| !v.trim().is_empty())
    }

    /// Notes a bad variable.
    fn bad(&mut self, name: &'static str, reason: impl Into<String>) {
        self.bad.push((name, reason.into()));
    }

    /// The parsed value of `name` when set; a value that does not parse is
    /// noted (and gives `None`).
    fn parse<T>(
        &mut self,
        name: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let v = self.raw(name)?;
        parse(&v).map_err(|reason| self.bad(name, reason)).ok()
    }

    /// Sets `slot` from `name` when it is set and parses.
    fn set<T>(
        &mut self,
        slot: &mut T,
        name: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) {
        if let Some(v) = self.parse(name, parse) {
            *slot = v;
        }
    }

    /// `c`, or every bad variable.
    fn finish(self, c: Config) -> Result<Config, ConfigError> {
        let mut bad = self.bad.into_iter();
        match bad.next() {
            None => Ok(c),
            Some((name, reason)) => Err(ConfigError {
                name,
                reason,
                also: bad.collect(),
            }),
        }
    }
}

impl Config {
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
