//! Request and token limits per window (`rpm`, `tpm`): an API key's, and
//! a model's or route's per user.
//!
//! Unlike the capability quotas (GCRA, one request at a time), these count
//! in the unit a provider bills, and a request's tokens are known only
//! when it ends. So a window is a fixed interval ([`Windows::window`], one
//! minute: what `rpm` and `tpm` say) with one counter per limit:
//!
//! - **admission** ([`Windows::admit`]): every limit that applies is
//!   checked and counted together, all or nothing. A request is admitted
//!   while each counter is *below* its ceiling (a request counts 1, its
//!   tokens count their bound: the most it can use); the first counter at
//!   or over its ceiling refuses it, with the time left in the window;
//! - **settlement** ([`Admission::settle`]): the tokens counter is
//!   corrected to what the request used (the bound's surplus taken back in
//!   the window it was admitted in), so a run of short answers is not
//!   throttled by its bounds. An admission dropped unsettled (the call
//!   failed) takes its whole bound back; its request stays counted.
//!
//! So a window admits at most its ceiling + one request's bound of tokens,
//! on any number of instances: with Redis the counters are shared and one
//! script ([`ADMIT`]) checks and counts atomically, on the Redis server's
//! clock; without it they are this process's. A store that fails admits
//! (fail open), as the capability quotas do.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::cluster::Cluster;

/// The length of a window: `rpm` and `tpm` are per minute.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Checks and counts every limit of a request at once. KEYS[i]: a
/// counter's name (the window's index is appended); ARGV[1]: the window in
/// ms; ARGV[2i], ARGV[2i+1]: limit i's ceiling and what the request counts.
/// Returns `{1, window, ms left, count₁, …}` (the counts after) or
/// `{0, window, ms left, i, count}` (refused by limit i).
pub const ADMIT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local w = tonumber(ARGV[1])
local window = math.floor(now / w)
local left = (window + 1) * w - now
for i, k in ipairs(KEYS) do
  local c = tonumber(redis.call('GET', k .. ':' .. window)) or 0
  if c >= tonumber(ARGV[2 * i]) then
    return {0, window, left, i, c}
  end
end
local out = {1, window, left}
for i, k in ipairs(KEYS) do
  local key = k .. ':' .. window
  out[3 + i] = redis.call('INCRBY', key, ARGV[2 * i + 1])
  redis.call('PEXPIRE', key, left + 1000)
end
return out
"#;

/// Takes ARGV[1] back from the counter KEYS[1] when it still exists (its
/// window not yet over).
pub const TAKE_BACK: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('DECRBY', KEYS[1], ARGV[1])
end
return 0
"#;

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Requests,
    Tokens,
}

/// One limit that applies to a request: whose counter (`scope`, e.g.
/// `key:12`), in what unit, and its ceiling per window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub scope: String,
    pub unit: Unit,
    pub ceiling: u64,
}

/// The tightest limit of a unit, as OpenAI's `x-ratelimit-*` headers say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    pub limit: u64,
    pub remaining: u64,
}

/// What the limits of a request stood at once it was counted (or refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Report {
    pub requests: Option<Standing>,
    pub tokens: Option<Standing>,
    /// Until the window ends.
    pub reset: Duration,
}

impl Report {
    /// OpenAI's headers: `x-ratelimit-limit-requests`,
    /// `x-ratelimit-remaining-requests`, `x-ratelimit-reset-requests` and
    /// the `-tokens` three, for each unit a limit applied in.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let reset = go_duration(self.reset);
        let mut out = Vec::with_capacity(6);
        if let Some(s) = self.requests {
            out.push(("x-ratelimit-limit-requests", s.limit.to_string()));
            out.push(("x-ratelimit-remaining-requests", s.remaining.to_string()));
            out.push(("x-ratelimit-reset-requests", reset.clone()));
        }
        if let Some(s) = self.tokens {
            out.push(("x-ratelimit-limit-tokens", s.limit.to_string()));
            out.push(("x-ratelimit-remaining-tokens", s.remaining.to_string()));
            out.push(("x-ratelimit-reset-tokens", reset));
        }
        out
    }
}

/// A refusal: the limit at or over its ceiling, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub limit: Limit,
    pub report: Report,
}

/// A request counted in a window, until it settles its tokens.
pub struct Admission {
    windows: Option<Arc<Windows>>,
    window: u64,
    /// The tokens counters and what they were counted.
    tokens: Vec<String>,
    bound: u64,
    pub report: Report,
}

impl Admission {
    /// An admission under no limit (or a store that failed).
    pub fn free() -> Admission {
        Admission {
            windows: None,
            window: 0,
            tokens: Vec::new(),
            bound: 0,
            report: Report::default(),
        }
    }

    /// The request used `used` tokens: the bound's surplus is taken back
    /// from its window's tokens counters (in a task of its own).
    pub fn settle(mut self, used: u64) {
        self.take_back(used);
    }

    fn take_back(&mut self, used: u64) {
        let Some(w) = self.windows.take() else { return };
        let back = self.bound.saturating_sub(used);
        if back == 0 || self.tokens.is_empty() {
            return;
        }
        let keys = std::mem::take(&mut self.tokens);
        let window = self.window;
        match &w.store {
            Counters::Local(local) => {
                let mut l = local.lock().unwrap_or_else(PoisonError::into_inner);
                if l.window == window {
                    for k in keys {
                        if let Some(c) = l.counts.get_mut(&k) {
                            *c = c.saturating_sub(back);
                        }
                    }
                }
            }
            Counters::Redis(_) => {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { w.redis_take_back(keys, window, back).await });
                }
            }
        }
    }
}

impl Drop for Admission {
    /// Unsettled: the call used nothing (it failed); its bound is taken back.
    fn drop(&mut self) {
        self.take_back(0);
    }
}

enum Counters {
    /// This process's counters of the current window.
    Local(Mutex<Local>),
    Redis(Cluster),
}

/// The current window's counters (counter name → count), emptied when
/// the next window begins.
#[derive(Default)]
struct Local {
    window: u64,
    counts: HashMap<String, u64>,
}

/// The windows' counters: this process's or Redis's.
pub struct Windows {
    store: Counters,
    window: Duration,
    admit: redis::Script,
    take_back: redis::Script,
}

impl Windows {
    /// Counters in this process.
    pub fn local(window: Duration) -> Windows {
        Windows::with(Counters::Local(Mutex::default()), window)
    }

    /// Counters in `cluster`'s Redis, shared by every instance on it.
    pub fn redis(cluster: Cluster, window: Duration) -> Windows {
        Windows::with(Counters::Redis(cluster), window)
    }

    fn with(store: Counters, window: Duration) -> Windows {
        Windows {
            store,
            window: window.max(Duration::from_millis(1)),
            admit: redis::Script::new(ADMIT),
            take_back: redis::Script::new(TAKE_BACK),
        }
    }

    /// The window's length.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Counts a request (1 against each requests limit, `tokens` against
    /// each tokens limit) if every limit is below its ceiling. `Err(None)`
    /// is a store failure (the caller admits: fail open).
    pub async fn admit(
        self: &Arc<Self>,
        limits: &[Limit],
        tokens: u64,
    ) -> Result<Admission, Option<Refused>> {
        if limits.is_empty() {
            return Ok(Admission::free());
        }
        let (window, left, counts) = match &self.store {
            Counters::Local(local) => self.local_admit(local, limits, tokens),
            Counters::Redis(c) => self.redis_admit(c, limits, tokens).await?,
        }
        .map_err(Some)?;
        let report = report(limits, &counts, left);
        Ok(Admission {
            windows: Some(self.clone()),
            window,
            tokens: limits
                .iter()
                .filter(|l| l.unit == Unit::Tokens)
                .map(|l| self.counter(l))
                .collect(),
            bound: tokens,
            report,
        })
    }

    /// A limit's counter's name.
    fn counter(&self, l: &Limit) -> String {
        let unit = match l.unit {
            Unit::Requests => "r",
            Unit::Tokens => "t",
        };
        let name = format!("tl:{}:{unit}", l.scope);
        match &self.store {
            Counters::Redis(c) => c.key(&name),
            Counters::Local(_) => name,
        }
    }

    fn window_ms(&self) -> u64 {
        u64::try_from(self.window.as_millis()).unwrap_or(u64::MAX)
    }

    #[allow(clippy::type_complexity)]
    fn local_admit(
        &self,
        local: &Mutex<Local>,
        limits: &[Limit],
        tokens: u64,
    ) -> Result<(u64, Duration, Vec<u64>), Refused> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as u64;
        let w = self.window_ms();
        let window = now / w;
        let left = Duration::from_millis((window + 1) * w - now);
        let mut l = local.lock().unwrap_or_else(PoisonError::into_inner);
        if l.window != window {
            l.window = window;
            l.counts.clear();
        }
        let names: Vec<String> = limits.iter().map(|l| self.counter(l)).collect();
        for (lim, n) in limits.iter().zip(&names) {
            let c = l.counts.get(n).copied().unwrap_or(0);
            if c >= lim.ceiling {
                return Err(refused(lim, c, left));
            }
        }
        let mut counts = Vec::with_capacity(limits.len());
        for (lim, n) in limits.iter().zip(names) {
            let e = l.counts.entry(n).or_insert(0);
            *e = e.saturating_add(amount(lim, tokens));
            counts.push(*e);
        }
        Ok((window, left, counts))
    }

    #[allow(clippy::type_complexity)]
    async fn redis_admit(
        &self,
        cluster: &Cluster,
        limits: &[Limit],
        tokens: u64,
    ) -> Result<Result<(u64, Duration, Vec<u64>), Refused>, Option<Refused>> {
        let mut inv = self.admit.prepare_invoke();
        inv.arg(self.window_ms());
        for l in limits {
            inv.key(self.counter(l));
            inv.arg(l.ceiling).arg(amount(l, tokens));
        }
        let answer = cluster
            .run(|mut c| async move { inv.invoke_async::<Vec<i64>>(&mut c).await })
            .await;
        let v = match answer {
            Ok(v) if v.len() >= 3 => v,
            Ok(_) => return Err(None),
            Err(e) => {
                tracing::debug!(error = %e, "token limits: Redis failed; admitted");
                return Err(None);
            }
        };
        let left = Duration::from_millis(v[2].max(0) as u64);
        if v[0] != 1 {
            let i = usize::try_from(v.get(3).copied().unwrap_or(1) - 1).unwrap_or(0);
            let c = v.get(4).copied().unwrap_or(0).max(0) as u64;
            let l = limits.get(i).unwrap_or(&limits[0]);
            return Ok(Err(refused(l, c, left)));
        }
        let counts = v[3..].iter().map(|c| (*c).max(0) as u64).collect();
        Ok(Ok((v[1].max(0) as u64, left, counts)))
    }

    async fn redis_take_back(&self, keys: Vec<String>, window: u64, back: u64) {
        let Counters::Redis(cluster) = &self.store else {
            return;
        };
        for k in keys {
            let key = format!("{k}:{window}");
            let script = &self.take_back;
            let r =
                cluster
                    .run(|mut c| async move {
                        script.key(key).arg(back).invoke_async::<i64>(&mut c).await
                    })
                    .await;
            if let Err(e) = r {
                tracing::debug!(error = %e, "token limits: a settlement's correction was lost");
            }
        }
    }
}

/// What a request counts against `l`.
fn amount(l: &Limit, tokens: u64) -> u64 {
    match l.unit {
        Unit::Requests => 1,
        Unit::Tokens => tokens,
    }
}

fn refused(l: &Limit, count: u64, left: Duration) -> Refused {
    let standing = Some(Standing {
        limit: l.ceiling,
        remaining: l.ceiling.saturating_sub(count),
    });
    let mut report = Report {
        reset: left,
        ..Report::default()
    };
    match l.unit {
        Unit::Requests => report.requests = standing,
        Unit::Tokens => report.tokens = standing,
    }
    Refused {
        limit: l.clone(),
        report,
    }
}

/// The tightest limit of each unit (the least remaining), from the counts
/// after the request was counted.
fn report(limits: &[Limit], counts: &[u64], reset: Duration) -> Report {
    let mut r = Report {
        reset,
        ..Report::default()
    };
    for (l, c) in limits.iter().zip(counts) {
        let s = Standing {
            limit: l.ceiling,
            remaining: l.ceiling.saturating_sub(*c),
        };
        let slot = match l.unit {
            Unit::Requests => &mut r.requests,
            Unit::Tokens => &mut r.tokens,
        };
        if slot.is_none_or(|t| s.remaining < t.remaining) {
            *slot = Some(s);
        }
    }
    r
}

/// A duration as OpenAI's headers write it: `20ms`, `1.5s`, `6m0s`.
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    let mut s = String::new();
    if ms < 1000 {
        let _ = write!(s, "{ms}ms");
    } else if ms < 60_000 {
        let secs = format!("{:.3}", d.as_secs_f64());
        let secs = secs.trim_end_matches('0').trim_end_matches('.');
        let _ = write!(s, "{secs}s");
    } else {
        let _ = write!(s, "{}m{}s", ms / 60_000, (ms % 60_000) / 1000);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(scope: &str, unit: Unit, ceiling: u64) -> Limit {
        Limit {
            scope: scope.into(),
            unit,
            ceiling,
        }
    }

    #[tokio::test]
    async fn a_window_admits_below_its_ceiling_and_settles_to_what_was_used() {
        let w = Arc::new(Windows::local(Duration::from_secs(3600)));
        let limits = [
            limit("key:1", Unit::Tokens, 1000),
            limit("key:1", Unit::Requests, 100),
        ];
        let a = w.admit(&limits, 600).await.unwrap();
        assert_eq!(a.report.tokens.unwrap().remaining, 400);
        assert_eq!(a.report.requests.unwrap().remaining, 99);
        a.settle(100);
        // 100 used: 900 left, so a bound of 600 goes through (below the ceiling).
        let b = w.admit(&limits, 600).await.unwrap();
        assert_eq!(b.report.tokens.unwrap().remaining, 300);
        drop(b); // failed: its bound comes back
        let c = w.admit(&limits, 950).await.unwrap();
        c.settle(950);
        let refused = w.admit(&limits, 1).await.err().unwrap().unwrap();
        assert_eq!(refused.limit.unit, Unit::Tokens);
        assert_eq!(refused.report.tokens.unwrap().remaining, 0);
    }

    #[test]
    fn durations_read_as_openai_writes_them() {
        assert_eq!(go_duration(Duration::from_millis(20)), "20ms");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_secs(2)), "2s");
        assert_eq!(go_duration(Duration::from_secs(360)), "6m0s");
    }
}
