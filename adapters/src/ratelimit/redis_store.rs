//! The Redis store: one budget per user and capability shared by every
//! gateway instance on the same Redis and prefix.
//!
//! The same GCRA as the in-process store (burst `count`, one request
//! replenished every `per / count`, governor's arithmetic), run atomically
//! per key by one Lua script ([`GCRA`], sent by `EVALSHA`, loaded on
//! `NOSCRIPT`). Time is the Redis server's (`TIME` inside the script), so
//! instances whose clocks disagree still agree on every decision.
//!
//! Key: `{prefix}rl:{capability}:{user_id}:{count}/{per_ms}` holding the
//! theoretical arrival time in microseconds; it expires when the user's
//! burst is fully replenished, so idle users cost nothing. The quota is part
//! of the key: a changed quota starts afresh, as in-process.
//!
//! A check that Redis does not answer within [`TIMEOUT`](crate::cluster::TIMEOUT)
//! fails (and the request is allowed). After a failure the store does not
//! ask Redis again for [`REST`]: each of those checks fails at once, so a
//! Redis that black-holes packets costs one slow request per [`REST`], not
//! one per request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::decision::{stateless, CheckFuture, Decision, LimiterStore, StoreUnavailable};
use super::quota::Quota;
use crate::cluster::Cluster;

/// How long the store leaves Redis alone after a failure.
pub const REST: Duration = Duration::from_secs(1);

/// GCRA of one request. KEYS[1]: the key; ARGV[1]: emission interval T in
/// µs; ARGV[2]: burst. Returns `{1, 0}` (allowed) or `{0, wait in µs}`.
/// As governor: tolerance τ = T × (burst − 1); a request at `now` conforms
/// unless `now < tat − τ`; conforming moves `tat` to `max(tat, now) + T`.
pub const GCRA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = interval * (tonumber(ARGV[2]) - 1)
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
if now < tat - tolerance then
  return {0, tat - tolerance - now}
end
tat = tat + interval
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000))
return {1, 0}
"#;

/// The Redis [`LimiterStore`].
pub struct RedisStore {
    cluster: Cluster,
    script: redis::Script,
    epoch: Instant,
    /// Milliseconds since `epoch` before which Redis is not asked.
    rest_until: AtomicU64,
}

impl RedisStore {
    pub fn new(cluster: Cluster) -> RedisStore {
        RedisStore {
            cluster,
            script: redis::Script::new(GCRA),
            epoch: Instant::now(),
            rest_until: AtomicU64::new(0),
        }
    }

    /// The Redis it asks.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The key of `user_id`'s state for `quota` of `capability`.
    pub fn key(&self, user_id: i64, capability: &str, quota: &Quota) -> String {
        self.cluster.key(&format!(
            "rl:{capability}:{user_id}:{}/{}",
            quota.count,
            quota.per.as_millis()
        ))
    }

    /// Counts one request of `user_id` against `quota` of `capability`.
    pub async fn check(
        &self,
        user_id: i64,
        capability: &str,
        quota: &Quota,
    ) -> Result<Decision, StoreUnavailable> {
        if let Some(d) = stateless(quota) {
            return Ok(d);
        }
        if self.now_ms() < self.rest_until.load(Ordering::Relaxed) {
            return Err(StoreUnavailable(format!(
                "Redis failed less than {} ms ago; not asked",
                REST.as_millis()
            )));
        }
        let key = self.key(user_id, capability, quota);
        let interval_us = u64::try_from((quota.per / quota.count).as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let script = &self.script;
        let answer = self
            .cluster
            .run(|mut c| async move {
                script
                    .key(key)
                    .arg(interval_us)
                    .arg(quota.count)
                    .invoke_async::<(i64, i64)>(&mut c)
                    .await
            })
            .await;
        match answer {
            Ok((1, _)) => Ok(Decision::Allow),
            Ok((_, wait_us)) => Ok(Decision::Deny {
                retry_after: Duration::from_micros(wait_us.max(0) as u64),
            }),
            Err(e) => {
                self.rest_until.store(
                    self.now_ms().saturating_add(REST.as_millis() as u64),
                    Ordering::Relaxed,
                );
                Err(StoreUnavailable(e.to_string()))
            }
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

impl LimiterStore for RedisStore {
    fn check<'a>(&'a self, user_id: i64, capability: &'a str, quota: &'a Quota) -> CheckFuture<'a> {
        Box::pin(RedisStore::check(self, user_id, capability, quota))
    }
}
