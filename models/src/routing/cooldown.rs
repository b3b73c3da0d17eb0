//! Cool-downs of deployments: after `cooldown_fails` failures within
//! `cooldown_window`, a deployment is skipped for `cooldown`, then one
//! request is admitted as a probe: its success ends the cool-down, its
//! failure starts another.
//!
//! With a [`Cluster`] (`GATEWAY_REDIS_URL`) the state is in Redis, shared
//! by every instance (one Lua script per check, per failure; a delete
//! after a successful probe): `{prefix}cool:{name}` (cooling, expires with
//! the cool-down), `{prefix}tripped:{name}` (a probe is owed),
//! `{prefix}probe:{name}` (the probe's claim), `{prefix}fails:{name}` (the
//! window's count). When Redis fails the instance's own state decides
//! (fail open: at worst a deployment is tried while another instance
//! thinks it is cooling). Without Redis the state is per instance.

use std::collections::{HashMap, VecDeque};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use gateway_adapters::cluster::Cluster;

use super::settings::Settings;

/// Whether a deployment may be tried now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Healthy.
    Yes,
    /// Its cool-down is over and this request is the one probe.
    Probe,
    /// Cooling down (or another request is probing it).
    No,
}

/// KEYS: cool, tripped, probe. ARGV: the probe claim's time to live (ms).
const ADMIT: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then return 1 end
if redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[1]) then return 2 end
return 0
"#;

/// KEYS: fails, cool, tripped, probe. ARGV: window ms, threshold,
/// cool-down ms, how long a probe stays owed (ms). 1: a cool-down started.
const FAIL: &str = r#"
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
if n >= tonumber(ARGV[2]) or redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[4])
  redis.call('DEL', KEYS[1], KEYS[4])
  return 1
end
return 0
"#;

static ADMIT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(ADMIT));
static FAIL_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(FAIL));

/// One deployment's state on this instance.
#[derive(Default)]
struct State {
    fails: VecDeque<Instant>,
    /// Cooling until then; past it, a probe is owed.
    until: Option<Instant>,
    /// When the probe was admitted (another after a cool-down, should
    /// that probe never end).
    probe: Option<Instant>,
}

/// The cool-downs, in Redis or on this instance.
pub struct Cooldown {
    fails: u32,
    window: Duration,
    cooldown: Duration,
    cluster: Option<Cluster>,
    local: Mutex<HashMap<String, State>>,
}

impl Cooldown {
    pub fn new(s: &Settings, cluster: Option<Cluster>) -> Cooldown {
        Cooldown {
            fails: s.cooldown_fails.max(1),
            window: s.cooldown_window,
            cooldown: s.cooldown,
            cluster,
            local: Mutex::default(),
        }
    }

    fn keys(c: &Cluster, name: &str) -> [String; 4] {
        ["fails", "cool", "tripped", "probe"].map(|k| c.key(&format!("{k}:{name}")))
    }

    /// Whether `name` may be tried now.
    pub async fn admit(&self, name: &str) -> Admit {
        if let Some(c) = &self.cluster {
            let [_, cool, tripped, probe] = Self::keys(c, name);
            let ttl = self.cooldown.as_millis().max(1) as u64;
            let r = c
                .run(|mut conn| async move {
                    ADMIT_SCRIPT
                        .key(cool)
                        .key(tripped)
                        .key(probe)
                        .arg(ttl)
                        .invoke_async::<i64>(&mut conn)
                        .await
                })
                .await;
            match r {
                Ok(1) => return Admit::Yes,
                Ok(2) => return Admit::Probe,
                Ok(_) => return Admit::No,
                Err(e) => {
                    tracing::warn!(error = %e.0, "cool-downs: Redis failed; this instance's state decides")
                }
            }
        }
        self.admit_local(name, Instant::now())
    }

    fn admit_local(&self, name: &str, now: Instant) -> Admit {
        let mut map = self.local.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = map.get_mut(name) else {
            return Admit::Yes;
        };
        match s.until {
            None => Admit::Yes,
            Some(until) if now < until => Admit::No,
            Some(_) => match s.probe {
                Some(at) if now.duration_since(at) < self.cooldown => Admit::No,
                _ => {
                    s.probe = Some(now);
                    Admit::Probe
                }
            },
        }
    }

    /// Counts a failure of `name`; whether a cool-down started.
    pub async fn failure(&self, name: &str) -> bool {
        if let Some(c) = &self.cluster {
            let keys = Self::keys(c, name);
            let args = [
                self.window.as_millis().max(1) as u64,
                u64::from(self.fails),
                self.cooldown.as_millis().max(1) as u64,
                // A probe stays owed for ten cool-downs, then it is forgotten.
                (self.cooldown.as_millis().max(1) * 10) as u64,
            ];
            let r = c
                .run(|mut conn| async move {
                    let mut inv = FAIL_SCRIPT.prepare_invoke();
                    for k in keys {
                        inv.key(k);
                    }
                    for a in args {
                        inv.arg(a);
                    }
                    inv.invoke_async::<i64>(&mut conn).await
                })
                .await;
            match r {
                Ok(v) => return v == 1,
                Err(e) => {
                    tracing::warn!(error = %e.0, "cool-downs: Redis failed; counting on this instance")
                }
            }
        }
        self.failure_local(name, Instant::now())
    }

    fn failure_local(&self, name: &str, now: Instant) -> bool {
        let mut map = self.local.lock().unwrap_or_else(|e| e.into_inner());
        let s = map.entry(name.to_owned()).or_default();
        while s
            .fails
            .front()
            .is_some_and(|t| now.duration_since(*t) > self.window)
        {
            s.fails.pop_front();
        }
        s.fails.push_back(now);
        let probing = s.until.is_some_and(|u| now >= u);
        if s.fails.len() >= self.fails as usize || probing {
            s.until = Some(now + self.cooldown);
            s.probe = None;
            s.fails.clear();
            return true;
        }
        false
    }

    /// A success of `name` (admitted as `admit`): a probe's ends its cool-down.
    pub async fn success(&self, name: &str, admit: Admit) {
        if admit != Admit::Probe {
            return;
        }
        if let Some(c) = &self.cluster {
            let keys = Self::keys(c, name);
            let r = c
                .run(|mut conn| async move {
                    redis::cmd("DEL")
                        .arg(&keys[..])
                        .query_async::<i64>(&mut conn)
                        .await
                })
                .await;
            if let Err(e) = r {
                tracing::warn!(error = %e.0, "cool-downs: Redis failed ending a cool-down");
            }
        }
        let mut map = self.local.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_failures_cool_a_deployment_then_one_probe_is_admitted() {
        let s = Settings {
            cooldown: Duration::from_secs(30),
            ..Settings::default()
        };
        let c = Cooldown::new(&s, None);
        let t0 = Instant::now();
        assert!(!c.failure_local("a", t0));
        assert!(!c.failure_local("a", t0));
        assert_eq!(c.admit_local("a", t0), Admit::Yes);
        assert!(c.failure_local("a", t0));
        assert_eq!(c.admit_local("a", t0), Admit::No);
        assert_eq!(c.admit_local("b", t0), Admit::Yes);
        let later = t0 + Duration::from_secs(31);
        assert_eq!(c.admit_local("a", later), Admit::Probe);
        assert_eq!(c.admit_local("a", later), Admit::No);
        // The probe failed: cooling again at once.
        assert!(c.failure_local("a", later));
        assert_eq!(c.admit_local("a", later), Admit::No);
    }
}
