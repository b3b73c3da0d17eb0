//! Quotas (`count/unit`) and the per-capability [`Limits`].

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use super::{capability_index, CAPABILITIES, DEFAULT_LIMITS, NUM_CAPABILITIES};

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
    pub(super) fn gcra(&self) -> Option<governor::Quota> {
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
