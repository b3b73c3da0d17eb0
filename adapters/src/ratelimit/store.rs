//! The stores ([`Store`]: in process, Redis, or one's own [`LimiterStore`])
//! and the in-process store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;

use super::decision::{stateless, CheckFuture, Decision, LimiterStore, StoreUnavailable};
use super::quota::Quota;
use super::redis_store::RedisStore;

/// How often the in-process store drops stale per-user states.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// The store a [`RateLimiter`](super::RateLimiter) asks.
pub enum Store {
    /// This process only ([`InProcessStore`]): a plain function call.
    InProcess(InProcessStore),
    /// Shared by every instance on one Redis ([`RedisStore`]).
    Redis(RedisStore),
    /// Any other, through the trait (one boxed future per check).
    Custom(Arc<dyn LimiterStore>),
}

impl Store {
    pub(super) async fn check(
        &self,
        user_id: i64,
        capability: &str,
        quota: &Quota,
    ) -> Result<Decision, StoreUnavailable> {
        match self {
            Store::InProcess(s) => Ok(s.decide(user_id, capability, quota)),
            // Boxed: a network round trip anyway, and the pipeline's future
            // stays small.
            Store::Redis(s) => Box::pin(s.check(user_id, capability, quota)).await,
            Store::Custom(s) => s.check(user_id, capability, quota).await,
        }
    }
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

impl<C: Clock + Clone> InProcessStore<C> {
    /// Counts one request of `user_id` against `quota` of `capability`:
    /// the in-process check, synchronous and allocation-free once the
    /// capability has been seen with this quota.
    pub fn decide(&self, user_id: i64, capability: &str, quota: &Quota) -> Decision {
        if let Some(d) = stateless(quota) {
            return d;
        }
        self.maybe_sweep();
        {
            // Fast path: the capability has been seen with this quota.
            let limiters = self.limiters.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(cap) = limiters.get(capability) {
                if cap.quota == *quota {
                    return cap.decide(user_id, &self.clock);
                }
            }
        }
        // First request of the capability, or its quota changed (which starts it afresh).
        let Some(gcra) = quota.gcra() else {
            return Decision::Deny {
                retry_after: quota.per.max(Duration::from_secs(1)),
            };
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
        limiters[capability].decide(user_id, &self.clock)
    }
}

impl<C> LimiterStore for InProcessStore<C>
where
    C: Clock + Clone + Send + Sync + 'static,
{
    fn check<'a>(&'a self, user_id: i64, capability: &'a str, quota: &'a Quota) -> CheckFuture<'a> {
        Box::pin(std::future::ready(Ok(
            self.decide(user_id, capability, quota)
        )))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
