//! Quotas (`count/unit`), the operator's [`Limits`] and the [`Quotas`] in
//! force (the route table's defaults overridden by the limits).

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::time::Duration;

use gateway_base::spec::{Capability, QuotaSpec};

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

    /// A quota as the route table writes it (`[capabilities]`).
    pub const fn from_spec(spec: QuotaSpec) -> Quota {
        Quota {
            count: spec.count,
            per: Duration::from_secs(spec.per_secs),
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

impl From<QuotaSpec> for Quota {
    fn from(spec: QuotaSpec) -> Quota {
        Quota::from_spec(spec)
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
// Limits: what the operator said
// ---------------------------------------------------------------------------

/// The operator's quotas ([`GATEWAY_RATE_LIMITS`](super::GATEWAY_RATE_LIMITS)),
/// capability by capability, in the order given; `None` is `off`.
///
/// Which capabilities exist is the route table's business: the names are
/// checked against it when the limiter is built ([`Quotas::resolve`]).
/// [`Limits::default`] overrides nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    overrides: Vec<(Box<str>, Option<Quota>)>,
}

impl Limits {
    /// `spec` (the value of [`GATEWAY_RATE_LIMITS`](super::GATEWAY_RATE_LIMITS)):
    /// comma-separated `capability=count/unit` or `capability=off`. `None` or
    /// a blank spec overrides nothing. The error names the offending
    /// capability or item.
    pub fn parse(spec: Option<&str>) -> Result<Limits, String> {
        let mut limits = Limits::default();
        let Some(spec) = spec else { return Ok(limits) };
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, value) = item.split_once('=').ok_or_else(|| {
                format!("{item:?}: expected `capability=count/unit` or `capability=off`")
            })?;
            let (name, value) = (name.trim(), value.trim());
            if limits.iter().any(|(given, _)| given == name) {
                return Err(format!("capability {name:?} is given more than once"));
            }
            let quota = if value.eq_ignore_ascii_case("off") {
                None
            } else {
                Some(value.parse::<Quota>().map_err(|e| format!("{name}: {e}"))?)
            };
            limits.overrides.push((name.into(), quota));
        }
        Ok(limits)
    }

    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        self.overrides.is_empty()
    }

    /// Every capability given, with its quota (`None`: `off`), in the order given.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<&Quota>)> + '_ {
        self.overrides
            .iter()
            .map(|(name, quota)| (&**name, quota.as_ref()))
    }
}

impl fmt::Display for Limits {
    /// In [`GATEWAY_RATE_LIMITS`](super::GATEWAY_RATE_LIMITS) syntax; empty when nothing is overridden.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_quotas(f, self.iter())
    }
}

// ---------------------------------------------------------------------------
// Quotas: the table's capabilities, each with its quota in force
// ---------------------------------------------------------------------------

/// The quota in force for every capability of the route table (`None`: not
/// limited): the table's default, unless [`Limits`] overrides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quotas {
    /// In table order. A few dozen entries: [`get`](Self::get) scans them,
    /// which neither hashes nor allocates.
    entries: Box<[(&'static str, Option<Quota>)]>,
}

impl Quotas {
    /// The defaults of `capabilities` (the route table's `[capabilities]`)
    /// overridden by `limits`. A capability of `limits` that the table does
    /// not have is an error naming it and listing the known ones.
    pub fn resolve(capabilities: &'static [Capability], limits: &Limits) -> Result<Quotas, String> {
        let mut entries: Box<[(&'static str, Option<Quota>)]> = capabilities
            .iter()
            .map(|c| (c.name, c.quota.map(Quota::from_spec)))
            .collect();
        for (name, quota) in limits.iter() {
            let Some(entry) = entries.iter_mut().find(|(known, _)| *known == name) else {
                let known: Vec<&str> = capabilities.iter().map(|c| c.name).collect();
                return Err(format!(
                    "unknown capability {name:?} (known: {})",
                    known.join(", ")
                ));
            };
            entry.1 = quota.copied();
        }
        Ok(Quotas { entries })
    }

    /// The quota of `capability`; `None` when it is not limited or not a known capability.
    pub fn get(&self, capability: &str) -> Option<&Quota> {
        self.entries
            .iter()
            .find(|(name, _)| *name == capability)?
            .1
            .as_ref()
    }

    /// Every capability with its quota, in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, Option<&Quota>)> + '_ {
        self.entries
            .iter()
            .map(|(name, quota)| (*name, quota.as_ref()))
    }
}

impl fmt::Display for Quotas {
    /// In [`GATEWAY_RATE_LIMITS`](super::GATEWAY_RATE_LIMITS) syntax
    /// (`name=60/m,...,name=off`), for start-up logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_quotas(f, self.iter())
    }
}

/// `name=quota` (or `name=off`), comma-separated.
fn write_quotas<'n, 'q>(
    f: &mut fmt::Formatter<'_>,
    quotas: impl Iterator<Item = (&'n str, Option<&'q Quota>)>,
) -> fmt::Result {
    for (i, (name, quota)) in quotas.enumerate() {
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
