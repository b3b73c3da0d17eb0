//! Rate limiting: per user, per capability (GCRA: `governor` in-process, a Lua script in Redis).
//!
//! Every row of the route table names a `capability`; a request is counted
//! against the quota of its row's capability for the authenticated user. A
//! request over the quota is answered 429 with `Retry-After` (whole seconds,
//! ≥ 1, rounded up) and never reaches the upstream.
//!
//! # Quotas
//!
//! A quota is `count/unit`, unit one of `s`, `m`, `h`, `d`. It is enforced
//! with GCRA and a burst of `count`: `60/m` lets 60 requests through at once,
//! denies the 61st, and then lets one more through every second (60 s / 60).
//! So no window of one `unit` ever sees more than `count` + the requests
//! replenished within it, and a client that spaces its calls evenly is never
//! limited.
//!
//! The capabilities and their default quotas are data of the route table:
//! the `[capabilities]` section of `endpoints.toml` (`name = "60/m"`, or
//! `"off"` for no limit), generated as [`Capability`]. This module
//! names no capability; it gets the table's when the [`RateLimiter`] is
//! built.
//!
//! # Configuration
//!
//! [`GATEWAY_RATE_LIMITS`] overrides the defaults, capability by capability,
//! e.g. `tts=60/m, stt=30/m, detect=600/h, webhook=off`. A capability given
//! twice, a quota of 0, a count that is not a whole number or an unknown unit
//! is an error naming it ([`Limits::parse`], when the configuration is read).
//! White space around names, counts and units is ignored; so are empty items
//! (a trailing comma). Capability names are the route table's: a name the
//! table does not have is an error naming it and listing the known ones
//! ([`Quotas::resolve`], when the limiter is built at gateway start).
//! [`RateLimiter::quotas`] shows the quotas in force.
//!
//! # Stores
//!
//! [`RateLimiter`] holds the quotas and asks a [`Store`] for each decision:
//!
//! * [`InProcessStore`] (the default) keeps the state in this process;
//! * [`RedisStore`] (with `GATEWAY_REDIS_URL`, see [`crate::cluster`]) keeps
//!   it in Redis, so several gateway instances share one budget per user;
//! * any other [`LimiterStore`] (`Config::limiter_store`, e.g. in tests).
//!
//! The check is async (Redis is a round trip away), but the in-process
//! store is called directly, not through a boxed future: its check neither
//! allocates nor suspends. When the store fails (Redis unreachable or slower
//! than [`crate::cluster::TIMEOUT`]), the request is **allowed** (fail open)
//! and a warning is logged — at most one line per [`WARN_EVERY`], carrying
//! the number of failures it stands for.
//!
//! ## Memory of the in-process store
//!
//! One governor keyed limiter (`DashMap<i64, state>`, keyed by user id) per
//! capability, created on the capability's first request. A user's state is
//! one `u64`. Every [`SWEEP_EVERY`], the request that finds the sweep due
//! drops the states that are indistinguishable from a fresh one (governor's
//! `retain_recent`: the user's burst is fully replenished) and shrinks the
//! maps (`shrink_to_fit`). The store thus holds only the users active within
//! about one quota period, whatever the number of users seen; idle users
//! cost nothing. (Chosen over a map of per-key direct limiters because
//! governor only offers this stale-state test on keyed limiters.)
//!
//! The hot path allocates nothing once a capability has been seen: a scan
//! of the quotas in force by `&str`, a read lock on the store's capability
//! map, a lookup by `&str`, a `DashMap` lookup by `i64` and one
//! compare-and-swap.

mod decision;
mod quota;
mod redis_store;
#[cfg(test)]
mod redis_tests;
mod store;
#[cfg(test)]
mod tests;
pub mod windows;

pub use decision::{CheckFuture, Decision, LimiterStore, StoreUnavailable};
pub use quota::{Limits, Quota, Quotas};
pub use redis_store::{RedisStore, GCRA, REST};
pub use store::{InProcessStore, Store, SWEEP_EVERY};
pub use windows::{Admission, Limit, Report, Unit, Windows};

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::Cluster;
use gateway_base::errors::ApiError;
use gateway_base::spec::Capability;

/// Per-capability quotas on top of the route table's defaults:
/// `capability=count/unit` or `capability=off`, comma-separated ([`Limits::parse`]).
/// Default: none (the table's `[capabilities]` as they are).
pub const GATEWAY_RATE_LIMITS: &str = "GATEWAY_RATE_LIMITS";

/// At most one "store failed" warning per this interval.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// The limiter the pipeline calls
// ---------------------------------------------------------------------------

/// Quotas + a store: the rate-limit phase of the pipeline.
pub struct RateLimiter {
    quotas: Quotas,
    store: Store,
    /// Request and token limits per window (`rpm`, `tpm`), beside the quotas.
    windows: Arc<Windows>,
    /// Reference point of `next_warning`.
    epoch: Instant,
    /// Milliseconds since `epoch` before which no store warning is logged.
    next_warning: AtomicU64,
    /// Store failures not logged since the last warning.
    suppressed: AtomicU64,
    /// All store failures (every one allowed its request).
    store_failures: AtomicU64,
    /// Warnings logged.
    warnings: AtomicU64,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("quotas", &self.quotas)
            .field("store_failures", &self.store_failures())
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// The quotas of `capabilities` (the route table's `[capabilities]`)
    /// overridden by `limits`, on `store`. A capability of `limits` that the
    /// table does not have is an error naming it ([`Quotas::resolve`]).
    pub fn new(
        capabilities: &'static [Capability],
        limits: &Limits,
        store: Arc<dyn LimiterStore>,
    ) -> Result<RateLimiter, String> {
        Ok(RateLimiter::with_quotas(
            Quotas::resolve(capabilities, limits)?,
            Store::Custom(store),
        ))
    }

    /// [`new`](Self::new) on an [`InProcessStore`] (real clock).
    pub fn in_process(
        capabilities: &'static [Capability],
        limits: &Limits,
    ) -> Result<RateLimiter, String> {
        Ok(RateLimiter::with_quotas(
            Quotas::resolve(capabilities, limits)?,
            Store::InProcess(InProcessStore::new()),
        ))
    }

    /// [`new`](Self::new) on a [`RedisStore`] of `cluster`.
    pub fn redis(
        capabilities: &'static [Capability],
        limits: &Limits,
        cluster: Cluster,
    ) -> Result<RateLimiter, String> {
        let mut limiter = RateLimiter::with_quotas(
            Quotas::resolve(capabilities, limits)?,
            Store::Redis(RedisStore::new(cluster.clone())),
        );
        limiter.windows = Arc::new(Windows::redis(cluster, windows::WINDOW));
        Ok(limiter)
    }

    /// The same limiter, its `rpm`/`tpm` windows `window` long (60 s
    /// unless `GATEWAY_LIMIT_WINDOW_SECS` says otherwise).
    pub fn with_window(mut self, window: Duration) -> RateLimiter {
        self.windows = Arc::new(match &self.store {
            Store::Redis(s) => Windows::redis(s.cluster().clone(), window),
            _ => Windows::local(window),
        });
        self
    }

    /// `quotas`, already resolved, on `store`.
    pub fn with_quotas(quotas: Quotas, store: Store) -> RateLimiter {
        RateLimiter {
            quotas,
            store,
            windows: Arc::new(Windows::local(windows::WINDOW)),
            epoch: Instant::now(),
            next_warning: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
            store_failures: AtomicU64::new(0),
            warnings: AtomicU64::new(0),
        }
    }

    /// The quotas in force, capability by capability.
    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }

    /// How many checks the store failed (each allowed its request).
    pub fn store_failures(&self) -> u64 {
        self.store_failures.load(Ordering::Relaxed)
    }

    /// Ok(()) to proceed; Err(retry_after_secs) (whole seconds, ≥ 1, rounded
    /// up) when limited. A capability without a quota (or unknown) is not
    /// limited and does not reach the store. A failing store allows the
    /// request and logs a warning (at most one per [`WARN_EVERY`]).
    pub async fn check(&self, user_id: i64, capability: &str) -> Result<(), u64> {
        let Some(quota) = self.quotas.get(capability) else {
            return Ok(());
        };
        match self.store.check(user_id, capability, quota).await {
            Ok(Decision::Allow) => Ok(()),
            Ok(Decision::Deny { retry_after }) => Err(retry_after_secs(retry_after)),
            Err(e) => {
                self.store_failed(user_id, capability, &e);
                Ok(())
            }
        }
    }

    /// Counts one event of `key` against a quota of the caller's own, named
    /// `name` (not one of the table's capabilities: e.g. the reset mails of
    /// an account). Same store, same fail-open rule as [`check`](Self::check).
    pub async fn check_quota(&self, key: i64, name: &str, quota: &Quota) -> Result<(), u64> {
        match self.store.check(key, name, quota).await {
            Ok(Decision::Allow) => Ok(()),
            Ok(Decision::Deny { retry_after }) => Err(retry_after_secs(retry_after)),
            Err(e) => {
                self.store_failed(key, name, &e);
                Ok(())
            }
        }
    }

    /// [`check`](Self::check) as the pipeline's error: 429 with `Retry-After`.
    pub async fn enforce(&self, user_id: i64, capability: &str) -> Result<(), ApiError> {
        self.check(user_id, capability)
            .await
            .map_err(|retry_after| ApiError::RateLimited {
                message: format!("rate limit exceeded for {capability}; retry in {retry_after} s"),
                retry_after,
            })
    }

    /// Counts a request against `limits` (its `rpm` and `tpm`: 1 request,
    /// `tokens` its bound) ([`windows`]): the admission to settle with the
    /// tokens used, or 429 with `Retry-After` (the rest of the window)
    /// naming the limit. A store that fails admits (fail open, logged as
    /// [`check`](Self::check)'s failures are).
    pub async fn admit(&self, limits: &[Limit], tokens: u64) -> Result<Admission, ApiError> {
        match self.windows.admit(limits, tokens).await {
            Ok(a) => Ok(a),
            Err(Some(r)) => {
                let retry_after = retry_after_secs(r.report.reset);
                let unit = match r.limit.unit {
                    Unit::Requests => "requests",
                    Unit::Tokens => "tokens",
                };
                Err(ApiError::RateLimited {
                    message: format!(
                        "rate limit exceeded: {} {unit} per {} s ({}); retry in {retry_after} s",
                        r.limit.ceiling,
                        self.windows.window().as_secs(),
                        r.limit.scope
                    ),
                    retry_after,
                })
            }
            Err(None) => {
                self.store_failed(0, "rpm/tpm", &StoreUnavailable("Redis failed".into()));
                Ok(Admission::free())
            }
        }
    }

    fn store_failed(&self, user_id: i64, capability: &str, error: &StoreUnavailable) {
        self.store_failures.fetch_add(1, Ordering::Relaxed);
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        let due = self.next_warning.load(Ordering::Relaxed);
        let won = now >= due
            && self
                .next_warning
                .compare_exchange(
                    due,
                    now.saturating_add(WARN_EVERY.as_millis() as u64),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok();
        if !won {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let suppressed = self.suppressed.swap(0, Ordering::Relaxed);
        self.warnings.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            %error,
            user_id,
            capability,
            suppressed,
            "rate-limit store failed; request allowed (fail open); `suppressed` failures since the last warning were not logged"
        );
    }
}

/// Whole seconds, rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}
