//! Rate limiting: per user, per capability (GCRA, with `governor`).
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
//! Defaults ([`DEFAULT_LIMITS`]); `off` means no limit:
//!
//! | capability     | default | area             |
//! |----------------|---------|------------------|
//! | `tts`          | 60/m    | voice            |
//! | `voices`       | 10/m    | voice            |
//! | `recordings`   | 120/m   | voice            |
//! | `voice_design` | 10/m    | voice            |
//! | `stt`          | 30/m    | voice            |
//! | `enhance`      | 30/m    | voice            |
//! | `edit`         | 30/m    | voice            |
//! | `detect`       | 30/m    | voice            |
//! | `intelligence` | 30/m    | voice            |
//! | `tracing`      | 30/m    | voice            |
//! | `watermark`    | 30/m    | voice            |
//! | `identity`     | 30/m    | voice            |
//! | `projects`     | 120/m   | voice            |
//! | `agents`       | 120/m   | voice            |
//! | `uploads`      | 20/m    | voice            |
//! | `webhook`      | off     | voice            |
//! | `chat`         | 120/m   | general gateway  |
//! | `completions`  | 120/m   | general gateway  |
//! | `embeddings`   | 120/m   | general gateway  |
//! | `images`       | 20/m    | general gateway  |
//! | `videos`       | 20/m    | general gateway  |
//! | `audio`        | 60/m    | general gateway  |
//! | `models`       | 300/m   | general gateway  |
//!
//! `webhook` is off by default: it is the provider calling in, not a user.
//! It can still be limited like any other capability.
//!
//! # Configuration
//!
//! [`GATEWAY_RATE_LIMITS`] overrides the defaults, capability by capability:
//! `tts=60/m, stt=30/m, detect=600/h, webhook=off`. Capability names are the
//! route table's; an unknown name, a capability given twice, a quota of 0,
//! a count that is not a whole number or an unknown unit is an error naming
//! it ([`Limits::parse`]). White space around names, counts and units is
//! ignored; so are empty items (a trailing comma).
//!
//! # Stores
//!
//! [`RateLimiter`] holds the quotas and asks a [`LimiterStore`] for each
//! decision. [`InProcessStore`] keeps the state in this process; a shared
//! store (Redis, …) implementing the same trait lets several gateway
//! instances share one budget per user. When the store fails, the request is
//! **allowed** (fail open) and a warning is logged — at most one line per
//! [`WARN_EVERY`], carrying the number of failures it stands for.
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
//! The hot path allocates nothing once a capability has been seen: a read
//! lock on the capability map, a lookup by `&str`, a `DashMap` lookup by
//! `i64` and one compare-and-swap.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;

use crate::errors::ApiError;

/// Per-capability quotas on top of the defaults: `tts=60/m,stt=30/m,detect=600/h,webhook=off`.
/// Default: [`DEFAULT_LIMITS`].
pub const GATEWAY_RATE_LIMITS: &str = "GATEWAY_RATE_LIMITS";

/// How often the in-process store drops stale per-user states.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// At most one "store failed" warning per this interval.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

const NUM_CAPABILITIES: usize = 23;

/// Every capability of the route table with its default quota (`None`: no limit).
/// The module documentation shows the same table.
pub const DEFAULT_LIMITS: [(&str, Option<Quota>); NUM_CAPABILITIES] = [
    // voice area
    ("tts", Some(Quota::per_minute(60))),
    ("voices", Some(Quota::per_minute(10))),
    ("recordings", Some(Quota::per_minute(120))),
    ("voice_design", Some(Quota::per_minute(10))),
    ("stt", Some(Quota::per_minute(30))),
    ("enhance", Some(Quota::per_minute(30))),
    ("edit", Some(Quota::per_minute(30))),
    ("detect", Some(Quota::per_minute(30))),
    ("intelligence", Some(Quota::per_minute(30))),
    ("tracing", Some(Quota::per_minute(30))),
    ("watermark", Some(Quota::per_minute(30))),
    ("identity", Some(Quota::per_minute(30))),
    ("projects", Some(Quota::per_minute(120))),
    ("agents", Some(Quota::per_minute(120))),
    ("uploads", Some(Quota::per_minute(20))),
    ("webhook", None),
    // general gateway
    ("chat", Some(Quota::per_minute(120))),
    ("completions", Some(Quota::per_minute(120))),
    ("embeddings", Some(Quota::per_minute(120))),
    ("images", Some(Quota::per_minute(20))),
    ("videos", Some(Quota::per_minute(20))),
    ("audio", Some(Quota::per_minute(60))),
    ("models", Some(Quota::per_minute(300))),
];

/// The capability names of the route table, in [`DEFAULT_LIMITS`] order.
pub const CAPABILITIES: [&str; NUM_CAPABILITIES] = {
    let mut names = [""; NUM_CAPABILITIES];
    let mut i = 0;
    while i < NUM_CAPABILITIES {
        names[i] = DEFAULT_LIMITS[i].0;
        i += 1;
    }
    names
};

fn capability_index(name: &str) -> Option<usize> {
    CAPABILITIES.iter().position(|c| *c == name)
}

// ---------------------------------------------------------------------------
// Quotas
// ---------------------------------------------------------------------------

/// `count` requests per `per` (`"60/m"`), as a burst of `count` refilled evenly over `per`.
///
/// Parsed quotas have `count ≥ 1` and `per ≥ 1 s`. A hand-built quota with
/// `count == 0` denies every request; one with `per == 0` is not limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub count: u32,
    pub per: Duration,
}

impl Quota {
    pub const fn per_second(count: u32) -> Quota {
        Quota {
            count,
            per: Duration::from_secs(1),
        }
    }
    pub const fn per_minute(count: u32) -> Quota {
        Quota {
            count,
            per: Duration::from_secs(60),
        }
    }
    pub const fn per_hour(count: u32) -> Quota {
        Quota {
            count,
            per: Duration::from_secs(3600),
        }
    }
    pub const fn per_day(count: u32) -> Quota {
        Quota {
            count,
            per: Duration::from_secs(86_400),
        }
    }

    /// The governor quota: burst `count`, one request replenished every `per / count`.
    /// `None` when `count == 0`.
    fn gcra(&self) -> Option<governor::Quota> {
        let burst = NonZeroU32::new(self.count)?;
        let period = (self.per / self.count).max(Duration::from_nanos(1));
        governor::Quota::with_period(period).map(|q| q.allow_burst(burst))
    }
}

impl FromStr for Quota {
    type Err = String;

    /// `count/unit`, unit `s`, `m`, `h` or `d`; white space tolerated.
    fn from_str(s: &str) -> Result<Quota, String> {
        let (count, unit) = s.split_once('/').ok_or_else(|| {
            format!(
                "{:?} is not a quota (expected `count/unit`, e.g. `60/m`, or `off`)",
                s.trim()
            )
        })?;
        let (count, unit) = (count.trim(), unit.trim());
        let count: u32 = count
            .parse()
            .map_err(|_| format!("{count:?} is not a whole number of requests"))?;
        if count == 0 {
            return Err("a quota of 0 requests is not allowed (use `off` for no limit)".to_owned());
        }
        let per = match unit {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "d" => Duration::from_secs(86_400),
            other => return Err(format!("unknown unit {other:?} (expected s, m, h or d)")),
        };
        Ok(Quota { count, per })
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.per.as_secs() {
            _ if self.per.subsec_nanos() != 0 => write!(f, "{}/{:?}", self.count, self.per),
            1 => write!(f, "{}/s", self.count),
            60 => write!(f, "{}/m", self.count),
            3600 => write!(f, "{}/h", self.count),
            86_400 => write!(f, "{}/d", self.count),
            secs => write!(f, "{}/{secs}s", self.count),
        }
    }
}

// ---------------------------------------------------------------------------
// Limits: capability -> quota
// ---------------------------------------------------------------------------

/// The quota of every capability (`None`: not limited).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Indexed like [`CAPABILITIES`].
    quotas: [Option<Quota>; NUM_CAPABILITIES],
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::defaults()
    }
}

impl Limits {
    /// The documented defaults ([`DEFAULT_LIMITS`]).
    pub fn defaults() -> Limits {
        Limits {
            quotas: DEFAULT_LIMITS.map(|(_, q)| q),
        }
    }

    /// No capability limited.
    pub fn unlimited() -> Limits {
        Limits {
            quotas: [None; NUM_CAPABILITIES],
        }
    }

    /// The defaults overridden by `spec` (the value of [`GATEWAY_RATE_LIMITS`]):
    /// comma-separated `capability=count/unit` or `capability=off`.
    /// `None` or a blank spec gives the defaults. The error names the offending capability or item.
    pub fn parse(spec: Option<&str>) -> Result<Limits, String> {
        let mut limits = Limits::defaults();
        let Some(spec) = spec else { return Ok(limits) };
        let mut seen = [false; NUM_CAPABILITIES];
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, value) = item.split_once('=').ok_or_else(|| {
                format!("{item:?}: expected `capability=count/unit` or `capability=off`")
            })?;
            let (name, value) = (name.trim(), value.trim());
            let index = capability_index(name).ok_or_else(|| {
                format!(
                    "unknown capability {name:?} (known: {})",
                    CAPABILITIES.join(", ")
                )
            })?;
            if std::mem::replace(&mut seen[index], true) {
                return Err(format!("capability {name:?} is given more than once"));
            }
            limits.quotas[index] = if value.eq_ignore_ascii_case("off") {
                None
            } else {
                Some(value.parse::<Quota>().map_err(|e| format!("{name}: {e}"))?)
            };
        }
        Ok(limits)
    }

    /// The quota of `capability`; `None` when it is not limited or not a known capability.
    pub fn get(&self, capability: &str) -> Option<&Quota> {
        self.quotas[capability_index(capability)?].as_ref()
    }

    /// Every capability with its quota, in [`CAPABILITIES`] order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, Option<&Quota>)> + '_ {
        CAPABILITIES
            .iter()
            .copied()
            .zip(self.quotas.iter().map(Option::as_ref))
    }
}

impl fmt::Display for Limits {
    /// In [`GATEWAY_RATE_LIMITS`] syntax (`tts=60/m,...,webhook=off`), for start-up logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (name, quota)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match quota {
                Some(q) => write!(f, "{name}={q}")?,
                None => write!(f, "{name}=off")?,
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// The store interface
// ---------------------------------------------------------------------------

/// A store's answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Over the quota; the earliest time a retry can succeed.
    Deny {
        retry_after: Duration,
    },
}

/// The store could not decide (network, shared store down, …); the request is allowed.
#[derive(Debug, thiserror::Error)]
#[error("rate-limit store: {0}")]
pub struct StoreUnavailable(pub String);

/// The store interface: in-process (governor) now; Redis or another shared store later.
///
/// `check` counts one request of `user_id` against `quota` of `capability`
/// and says whether it conforms. It is called on the hot path of every
/// limited request and must not block for long.
pub trait LimiterStore: Send + Sync + 'static {
    fn check(
        &self,
        user_id: i64,
        capability: &str,
        quota: &Quota,
    ) -> Result<Decision, StoreUnavailable>;
}

// ---------------------------------------------------------------------------
// In-process store
// ---------------------------------------------------------------------------

type KeyedLimiter<C> =
    governor::RateLimiter<i64, DashMapStateStore<i64>, C, NoOpMiddleware<<C as Clock>::Instant>>;

/// One capability's limiter: the quota it was built for and a state per user.
struct CapabilityLimiter<C: Clock> {
    quota: Quota,
    limiter: KeyedLimiter<C>,
}

impl<C: Clock> CapabilityLimiter<C> {
    fn decide(&self, user_id: i64, clock: &C) -> Decision {
        match self.limiter.check_key(&user_id) {
            Ok(()) => Decision::Allow,
            Err(not_until) => Decision::Deny {
                retry_after: not_until.wait_time_from(clock.now()),
            },
        }
    }
}

/// The in-process [`LimiterStore`]: one governor keyed limiter (by user id)
/// per capability, stale states swept every [`SWEEP_EVERY`] (see the module
/// documentation). `C` is the clock; tests use governor's `FakeRelativeClock`.
pub struct InProcessStore<C: Clock = DefaultClock> {
    clock: C,
    start: C::Instant,
    /// Capability → its limiter. The key is allocated once per capability.
    limiters: RwLock<HashMap<Box<str>, CapabilityLimiter<C>>>,
    /// Clock time (ns since `start`) at which the next sweep is due.
    next_sweep: AtomicU64,
}

impl InProcessStore<DefaultClock> {
    /// A store on the real (monotonic) clock.
    pub fn new() -> InProcessStore<DefaultClock> {
        InProcessStore::with_clock(DefaultClock::default())
    }
}

impl Default for InProcessStore<DefaultClock> {
    fn default() -> Self {
        InProcessStore::new()
    }
}

impl<C: Clock + Clone> InProcessStore<C> {
    /// A store on `clock`.
    pub fn with_clock(clock: C) -> InProcessStore<C> {
        let start = clock.now();
        InProcessStore {
            clock,
            start,
            limiters: RwLock::new(HashMap::with_capacity(NUM_CAPABILITIES)),
            next_sweep: AtomicU64::new(nanos(SWEEP_EVERY)),
        }
    }

    /// Drops every per-user state that a fresh one would equal (burst fully
    /// replenished) and shrinks the maps. Runs by itself every
    /// [`SWEEP_EVERY`]; callable at any time.
    pub fn sweep(&self) {
        let limiters = self.limiters.read().unwrap_or_else(PoisonError::into_inner);
        for cap in limiters.values() {
            cap.limiter.retain_recent();
            cap.limiter.shrink_to_fit();
        }
    }

    /// How many (user, capability) states are held (an estimate under concurrency).
    pub fn tracked_keys(&self) -> usize {
        let limiters = self.limiters.read().unwrap_or_else(PoisonError::into_inner);
        limiters.values().map(|cap| cap.limiter.len()).sum()
    }

    /// Sweeps when due; one caller wins the sweep, the others go on.
    fn maybe_sweep(&self) {
        let now = self.clock.now().duration_since(self.start).as_u64();
        let due = self.next_sweep.load(Ordering::Relaxed);
        if now < due {
            return;
        }
        let next = now.saturating_add(nanos(SWEEP_EVERY));
        if self
            .next_sweep
            .compare_exchange(due, next, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            self.sweep();
        }
    }
}

impl<C> LimiterStore for InProcessStore<C>
where
    C: Clock + Clone + Send + Sync + 'static,
{
    fn check(
        &self,
        user_id: i64,
        capability: &str,
        quota: &Quota,
    ) -> Result<Decision, StoreUnavailable> {
        if quota.count == 0 {
            return Ok(Decision::Deny {
                retry_after: quota.per.max(Duration::from_secs(1)),
            });
        }
        if quota.per.is_zero() {
            return Ok(Decision::Allow);
        }
        self.maybe_sweep();
        {
            // Fast path: the capability has been seen with this quota.
            let limiters = self.limiters.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(cap) = limiters.get(capability) {
                if cap.quota == *quota {
                    return Ok(cap.decide(user_id, &self.clock));
                }
            }
        }
        // First request of the capability, or its quota changed (which starts it afresh).
        let Some(gcra) = quota.gcra() else {
            return Ok(Decision::Deny {
                retry_after: quota.per.max(Duration::from_secs(1)),
            });
        };
        let mut limiters = self
            .limiters
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // Another request may have created it meanwhile.
        if limiters
            .get(capability)
            .is_none_or(|cap| cap.quota != *quota)
        {
            let fresh = CapabilityLimiter {
                quota: *quota,
                limiter: governor::RateLimiter::dashmap_with_clock(gcra, self.clock.clone()),
            };
            limiters.insert(capability.into(), fresh);
        }
        Ok(limiters[capability].decide(user_id, &self.clock))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------
// The limiter the pipeline calls
// ---------------------------------------------------------------------------

/// Quotas + a store: the rate-limit phase of the pipeline.
pub struct RateLimiter {
    limits: Limits,
    store: Arc<dyn LimiterStore>,
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
            .field("limits", &self.limits)
            .field("store_failures", &self.store_failures())
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    pub fn new(limits: Limits, store: Arc<dyn LimiterStore>) -> RateLimiter {
        RateLimiter {
            limits,
            store,
            epoch: Instant::now(),
            next_warning: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
            store_failures: AtomicU64::new(0),
            warnings: AtomicU64::new(0),
        }
    }

    /// `limits` on an [`InProcessStore`] (real clock).
    pub fn in_process(limits: Limits) -> RateLimiter {
        RateLimiter::new(limits, Arc::new(InProcessStore::new()))
    }

    /// The quotas in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// How many checks the store failed (each allowed its request).
    pub fn store_failures(&self) -> u64 {
        self.store_failures.load(Ordering::Relaxed)
    }

    /// Ok(()) to proceed; Err(retry_after_secs) (whole seconds, ≥ 1, rounded
    /// up) when limited. A capability without a quota (or unknown) is not
    /// limited and does not reach the store. A failing store allows the
    /// request and logs a warning (at most one per [`WARN_EVERY`]).
    pub fn check(&self, user_id: i64, capability: &str) -> Result<(), u64> {
        let Some(quota) = self.limits.get(capability) else {
            return Ok(());
        };
        match self.store.check(user_id, capability, quota) {
            Ok(Decision::Allow) => Ok(()),
            Ok(Decision::Deny { retry_after }) => Err(retry_after_secs(retry_after)),
            Err(e) => {
                self.store_failed(user_id, capability, &e);
                Ok(())
            }
        }
    }

    /// [`check`](Self::check) as the pipeline's error: 429 with `Retry-After`.
    pub fn enforce(&self, user_id: i64, capability: &str) -> Result<(), ApiError> {
        self.check(user_id, capability)
            .map_err(|retry_after| ApiError::RateLimited {
                message: format!("rate limit exceeded for {capability}; retry in {retry_after} s"),
                retry_after,
            })
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

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;

    fn fake() -> (FakeRelativeClock, Arc<InProcessStore<FakeRelativeClock>>) {
        let clock = FakeRelativeClock::default();
        (clock.clone(), Arc::new(InProcessStore::with_clock(clock)))
    }

    fn limiter(
        spec: &str,
    ) -> (
        FakeRelativeClock,
        Arc<InProcessStore<FakeRelativeClock>>,
        RateLimiter,
    ) {
        let (clock, store) = fake();
        let rl = RateLimiter::new(Limits::parse(Some(spec)).unwrap(), store.clone());
        (clock, store, rl)
    }

    // ---- parsing ----

    #[test]
    fn parse_good_specs() {
        assert_eq!(Limits::parse(None).unwrap(), Limits::defaults());
        assert_eq!(Limits::parse(Some("")).unwrap(), Limits::defaults());
        assert_eq!(Limits::parse(Some("  ")).unwrap(), Limits::defaults());

        let l = Limits::parse(Some("tts=60/m,stt=30/m,detect=600/h")).unwrap();
        assert_eq!(l.get("tts"), Some(&Quota::per_minute(60)));
        assert_eq!(l.get("stt"), Some(&Quota::per_minute(30)));
        assert_eq!(l.get("detect"), Some(&Quota::per_hour(600)));
        // Untouched capabilities keep their defaults.
        assert_eq!(l.get("models"), Some(&Quota::per_minute(300)));

        let l = Limits::parse(Some(
            " tts = 5 / s ,\tvoices=2/d , chat= off, webhook=100/h ,",
        ))
        .unwrap();
        assert_eq!(
            l.get("tts"),
            Some(&Quota {
                count: 5,
                per: Duration::from_secs(1)
            })
        );
        assert_eq!(
            l.get("voices"),
            Some(&Quota {
                count: 2,
                per: Duration::from_secs(86_400)
            })
        );
        assert_eq!(l.get("chat"), None);
        assert_eq!(l.get("webhook"), Some(&Quota::per_hour(100)));
        assert_eq!(Limits::parse(Some("tts=OFF")).unwrap().get("tts"), None);
    }

    #[test]
    fn parse_errors_name_the_culprit() {
        let err = |s: &str| Limits::parse(Some(s)).unwrap_err();
        let e = err("tts=60/m,speech=10/m");
        assert!(e.contains("unknown capability \"speech\""), "{e}");
        assert!(
            e.contains("tts") && e.contains("models"),
            "lists the known names: {e}"
        );
        assert!(err("=10/m").contains("unknown capability \"\""));
        assert!(err("TTS=10/m").contains("unknown capability \"TTS\""));
        let e = err("tts=0/m");
        assert!(e.starts_with("tts: ") && e.contains("0"), "{e}");
        let e = err("stt=10/w");
        assert!(
            e.starts_with("stt: ") && e.contains("unknown unit \"w\""),
            "{e}"
        );
        let e = err("stt=ten/m");
        assert!(e.starts_with("stt: ") && e.contains("\"ten\""), "{e}");
        assert!(err("stt=-1/m").contains("\"-1\""));
        assert!(err("stt=1.5/m").contains("\"1.5\""));
        assert!(err("stt=99999999999/m").contains("not a whole number"));
        let e = err("stt=10");
        assert!(e.starts_with("stt: ") && e.contains("count/unit"), "{e}");
        assert!(err("stt=").starts_with("stt: "));
        assert!(err("stt 10/m").contains("\"stt 10/m\""));
        let e = err("tts=1/s, tts=2/s");
        assert!(e.contains("\"tts\"") && e.contains("more than once"), "{e}");
    }

    #[test]
    fn quota_display_round_trips() {
        for s in ["60/s", "60/m", "600/h", "1/d"] {
            assert_eq!(s.parse::<Quota>().unwrap().to_string(), s);
        }
        let l = Limits::parse(Some("tts=1/s")).unwrap();
        let shown = l.to_string();
        assert!(
            shown.starts_with("tts=1/s,voices=10/m,") && shown.contains("webhook=off"),
            "{shown}"
        );
        assert_eq!(Limits::parse(Some(&shown)).unwrap(), l);
    }

    // ---- defaults ----

    #[test]
    fn defaults_cover_every_capability() {
        let table = [
            "tts",
            "voices",
            "recordings",
            "voice_design",
            "stt",
            "enhance",
            "edit",
            "detect",
            "intelligence",
            "tracing",
            "watermark",
            "identity",
            "projects",
            "agents",
            "uploads",
            "webhook",
            "chat",
            "completions",
            "embeddings",
            "images",
            "videos",
            "audio",
            "models",
        ];
        assert_eq!(CAPABILITIES.len(), table.len());
        let d = Limits::defaults();
        for cap in table {
            assert!(CAPABILITIES.contains(&cap), "{cap}");
            if cap == "webhook" {
                assert_eq!(d.get(cap), None, "webhook is not limited by default");
            } else {
                let q = d.get(cap).unwrap_or_else(|| panic!("{cap} has no default"));
                assert!(
                    q.count >= 1 && q.per >= Duration::from_secs(1),
                    "{cap}: {q}"
                );
            }
        }
        assert_eq!(d.get("tts"), Some(&Quota::per_minute(60)));
        assert_eq!(d.get("stt"), Some(&Quota::per_minute(30)));
        assert_eq!(d.get("nope"), None);
    }

    #[test]
    fn module_doc_table_matches_the_defaults() {
        let source = include_str!("ratelimit.rs");
        for (name, quota) in DEFAULT_LIMITS {
            let shown = quota.map_or_else(|| "off".to_owned(), |q| q.to_string());
            let row = source
                .lines()
                .find(|l| l.starts_with(&format!("//! | `{name}` ")))
                .unwrap_or_else(|| panic!("no doc row for {name}"));
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            assert_eq!(cells[2], shown, "doc row of {name}");
        }
    }

    // ---- the in-process store ----

    #[test]
    fn the_61st_request_of_60_per_minute_is_denied() {
        let (clock, _, rl) = limiter("tts=60/m");
        for i in 0..60 {
            assert_eq!(rl.check(7, "tts"), Ok(()), "request {}", i + 1);
        }
        let retry = rl.check(7, "tts").unwrap_err();
        assert!((1..=60).contains(&retry), "{retry}");
        assert_eq!(retry, 1, "GCRA: one request comes back every second");
        // Still denied a moment later, allowed once the time has passed.
        clock.advance(Duration::from_millis(500));
        assert_eq!(rl.check(7, "tts"), Err(1));
        clock.advance(Duration::from_millis(500));
        assert_eq!(rl.check(7, "tts"), Ok(()));
        assert_eq!(rl.check(7, "tts"), Err(1));
        // A full period later the whole burst is back.
        clock.advance(Duration::from_secs(60));
        for _ in 0..60 {
            assert_eq!(rl.check(7, "tts"), Ok(()));
        }
        assert!(rl.check(7, "tts").is_err());
    }

    #[test]
    fn other_users_and_capabilities_are_unaffected() {
        let (_, _, rl) = limiter("tts=60/m,stt=2/m");
        for _ in 0..60 {
            rl.check(1, "tts").unwrap();
        }
        assert!(rl.check(1, "tts").is_err());
        for _ in 0..60 {
            assert_eq!(rl.check(2, "tts"), Ok(()), "another user");
        }
        assert_eq!(rl.check(1, "stt"), Ok(()), "another capability");
        assert_eq!(rl.check(1, "stt"), Ok(()));
        assert_eq!(rl.check(1, "stt"), Err(30), "2/m: one every 30 s");
        assert_eq!(rl.check(-1, "stt"), Ok(()));
        // Unlimited and unknown capabilities never reach the store.
        for _ in 0..1000 {
            assert_eq!(rl.check(1, "webhook"), Ok(()));
            assert_eq!(rl.check(1, "no_such_capability"), Ok(()));
        }
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_at_least_one() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_nanos(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_millis(59_500)), 60);
        assert_eq!(retry_after_secs(Duration::from_secs(3600)), 3600);

        // Through the store: 1/h leaves 3600 s to wait, then less but never 0.
        let (clock, _, rl) = limiter("tts=1/h");
        rl.check(1, "tts").unwrap();
        assert_eq!(rl.check(1, "tts"), Err(3600));
        clock.advance(Duration::from_millis(1500));
        assert_eq!(rl.check(1, "tts"), Err(3599), "3598.5 s rounds up");
        clock.advance(Duration::from_millis(3_598_499));
        assert_eq!(rl.check(1, "tts"), Err(1), "1 ms left is 1 s");
    }

    #[test]
    fn a_changed_quota_starts_afresh() {
        let (_, store) = fake();
        assert_eq!(
            store.check(1, "tts", &Quota::per_minute(1)).unwrap(),
            Decision::Allow
        );
        assert!(matches!(
            store.check(1, "tts", &Quota::per_minute(1)).unwrap(),
            Decision::Deny { .. }
        ));
        assert_eq!(
            store.check(1, "tts", &Quota::per_minute(2)).unwrap(),
            Decision::Allow
        );
        // Degenerate hand-built quotas.
        let zero = Quota {
            count: 0,
            per: Duration::from_secs(60),
        };
        assert_eq!(
            store.check(1, "x", &zero).unwrap(),
            Decision::Deny {
                retry_after: Duration::from_secs(60)
            }
        );
        let instant = Quota {
            count: 5,
            per: Duration::ZERO,
        };
        for _ in 0..100 {
            assert_eq!(store.check(1, "y", &instant).unwrap(), Decision::Allow);
        }
    }

    #[test]
    fn stale_states_are_swept() {
        let (clock, store, rl) = limiter("tts=60/m,stt=30/m");
        for user in 0..1000 {
            rl.check(user, "tts").unwrap();
            rl.check(user, "stt").unwrap();
        }
        // One user uses its whole burst: its state stays relevant for a minute.
        for _ in 0..60 {
            rl.check(5000, "tts").unwrap();
        }
        assert_eq!(store.tracked_keys(), 2001);
        clock.advance(Duration::from_secs(10));
        store.sweep();
        assert_eq!(
            store.tracked_keys(),
            1,
            "only the busy user is still remembered"
        );
        // 10 s later, the busy user has 10 requests back, not a fresh burst.
        for _ in 0..10 {
            rl.check(5000, "tts").unwrap();
        }
        assert!(
            rl.check(5000, "tts").is_err(),
            "sweeping forgot nothing that matters"
        );
        // The sweep also runs by itself once SWEEP_EVERY has passed.
        for user in 0..100 {
            rl.check(user, "tts").unwrap();
        }
        clock.advance(SWEEP_EVERY + Duration::from_secs(20));
        rl.check(9999, "stt").unwrap();
        assert_eq!(
            store.tracked_keys(),
            1,
            "the sweep ran before the request was counted"
        );
    }

    #[test]
    fn in_process_on_the_real_clock() {
        // 60/h: no request comes back within the test, whatever the machine's speed.
        let rl = RateLimiter::in_process(Limits::parse(Some("tts=60/h")).unwrap());
        for _ in 0..60 {
            assert_eq!(rl.check(1, "tts"), Ok(()));
        }
        let retry = rl.check(1, "tts").unwrap_err();
        assert!((1..=60).contains(&retry), "{retry}");
        assert_eq!(rl.check(2, "tts"), Ok(()));
        assert_eq!(rl.check(1, "stt"), Ok(()));
        match rl.enforce(1, "tts").unwrap_err() {
            ApiError::RateLimited {
                message,
                retry_after,
            } => {
                assert!((1..=60).contains(&retry_after));
                assert!(message.contains("tts"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn concurrent_checks_never_exceed_the_burst() {
        let (_, _, rl) = limiter("tts=100/h");
        let rl = Arc::new(rl);
        let allowed = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (rl, allowed) = (rl.clone(), allowed.clone());
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        if rl.check(1, "tts").is_ok() {
                            allowed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(allowed.load(Ordering::Relaxed), 100);
    }

    // ---- fail open ----

    struct FailingStore {
        calls: AtomicU64,
    }

    impl LimiterStore for FailingStore {
        fn check(&self, _: i64, _: &str, _: &Quota) -> Result<Decision, StoreUnavailable> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            Err(StoreUnavailable("connection refused".to_owned()))
        }
    }

    #[test]
    fn a_failing_store_allows_every_request_and_warns_rarely() {
        let store = Arc::new(FailingStore {
            calls: AtomicU64::new(0),
        });
        let started = Instant::now();
        let rl = RateLimiter::new(Limits::parse(Some("tts=1/d")).unwrap(), store.clone());
        for _ in 0..1000 {
            assert_eq!(rl.check(1, "tts"), Ok(()), "fail open");
        }
        assert_eq!(rl.enforce(1, "tts"), Ok(()));
        assert_eq!(
            store.calls.load(Ordering::Relaxed),
            1001,
            "the store was asked every time"
        );
        assert_eq!(rl.store_failures(), 1001);
        let warnings = rl.warnings.load(Ordering::Relaxed);
        let bound = 1 + started.elapsed().as_secs() / WARN_EVERY.as_secs();
        assert!(
            warnings >= 1 && warnings <= bound,
            "the warning was logged, not once per request: {warnings}"
        );
        assert_eq!(warnings + rl.suppressed.load(Ordering::Relaxed), 1001);
        // Not limited capabilities do not ask the store.
        rl.check(1, "webhook").unwrap();
        assert_eq!(store.calls.load(Ordering::Relaxed), 1001);
    }

    #[test]
    fn store_decisions_map_to_whole_seconds() {
        struct Fixed(Decision);
        impl LimiterStore for Fixed {
            fn check(&self, _: i64, _: &str, _: &Quota) -> Result<Decision, StoreUnavailable> {
                Ok(self.0)
            }
        }
        let check =
            |d: Decision| RateLimiter::new(Limits::defaults(), Arc::new(Fixed(d))).check(1, "tts");
        assert_eq!(check(Decision::Allow), Ok(()));
        assert_eq!(
            check(Decision::Deny {
                retry_after: Duration::ZERO
            }),
            Err(1)
        );
        assert_eq!(
            check(Decision::Deny {
                retry_after: Duration::from_millis(1500)
            }),
            Err(2)
        );
        assert_eq!(
            check(Decision::Deny {
                retry_after: Duration::from_secs(30)
            }),
            Err(30)
        );
    }
}
