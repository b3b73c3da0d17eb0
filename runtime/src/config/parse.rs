//! Parsing of the configuration's values: each returns the value, or why
//! it is not one (the caller names the variable).

use std::time::Duration;

/// A whole number.
pub(super) fn parse_u64(v: &str) -> Result<u64, String> {
    v.trim().parse::<u64>().map_err(|e| format!("{v:?}: {e}"))
}

/// A whole number greater than zero.
pub(super) fn parse_positive(v: &str) -> Result<u64, String> {
    match parse_u64(v)? {
        0 => Err(format!("{v:?} must be greater than 0")),
        n => Ok(n),
    }
}

/// Whole seconds greater than zero.
pub(super) fn secs(v: &str) -> Result<Duration, String> {
    parse_positive(v).map(Duration::from_secs)
}

/// Whole seconds; 0 is off.
pub(super) fn secs_or_off(v: &str) -> Result<Option<Duration>, String> {
    let n = parse_u64(v)?;
    Ok((n > 0).then(|| Duration::from_secs(n)))
}

/// `HH:MM`, or `off`.
pub(super) fn parse_time_or_off(v: &str) -> Result<Option<chrono::NaiveTime>, String> {
    if v.trim().eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    chrono::NaiveTime::parse_from_str(v.trim(), "%H:%M")
        .map(Some)
        .map_err(|e| format!("{v:?} is not HH:MM or off: {e}"))
}

pub(super) fn parse_concurrency(v: &str) -> Result<usize, String> {
    match v.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1 (GATEWAY_JOB_FOLLOW_SECS=0 disables the follower)".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{v:?}: {e}")),
    }
}

pub(super) fn parse_db_sync(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "full" => Ok(true),
        "normal" => Ok(false),
        _ => Err(format!("{v:?} is not full or normal")),
    }
}

pub(super) fn parse_database_url(v: &str) -> Result<String, String> {
    let v = v.trim();
    if !(v.starts_with("postgres://") || v.starts_with("postgresql://")) {
        return Err("expected a postgres:// or postgresql:// URL".into());
    }
    gateway_store::check_url(v).map_err(|e| e.to_string())?;
    Ok(v.to_owned())
}

/// Comma-separated items, trimmed, empty ones dropped.
pub(super) fn comma_list(v: &str, lowercase: bool) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| {
            if lowercase {
                h.to_ascii_lowercase()
            } else {
                h.to_owned()
            }
        })
        .collect()
}

pub(super) fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!("{v:?} is not a boolean (true/false)")),
    }
}

pub(super) fn parse_url(v: &str) -> Result<String, String> {
    let v = v.trim().trim_end_matches('/');
    match reqwest::Url::parse(v) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(v.to_owned()),
        Ok(_) => Err(format!("{v:?} is not an http(s) URL")),
        Err(e) => Err(format!("{v:?}: {e}")),
    }
}

/// Whether a URL's host is a loopback or private address (`None`: no host).
/// Names are not resolved: `localhost` and `*.localhost` are loopback, other
/// names are taken as public.
pub(super) fn host_is_private(url: &str) -> Option<bool> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    Some(match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => gateway_base::net::is_private(ip),
        Err(_) => {
            let d = bare.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    })
}
