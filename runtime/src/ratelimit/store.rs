//! The store interface ([`LimiterStore`]) and the in-process store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;

use super::{Quota, SWEEP_EVERY};

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
            limiters: RwLock::new(HashMap::new()),
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
