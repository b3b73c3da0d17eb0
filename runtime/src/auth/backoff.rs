//! The per-account back-off of failed logins.
//!
//! An account (or an unknown identifier: the same rule, so that the answer
//! does not tell them apart) may fail [`FREE_FAILURES`] logins in a row;
//! each further failure locks it for twice as long as the one before, from
//! 1 s up to [`MAX_LOCK`]. While locked, a login is answered 429 with
//! `Retry-After` before any password is checked, the right one included. A
//! successful login clears the count; so does an hour without failures.
//!
//! The state is this process's (one entry per account that failed lately,
//! at most [`MAX_ENTRIES`]); with several instances each keeps its own, and
//! the per-address limit of the `accounts` capability (shared through
//! Redis) bounds the rest.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed logins in a row allowed before the account is locked.
pub const FREE_FAILURES: u32 = 5;
/// The longest lock.
pub const MAX_LOCK: Duration = Duration::from_secs(15 * 60);
/// Failures older than this are forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// Most entries kept; beyond, the oldest half is dropped.
pub const MAX_ENTRIES: usize = 100_000;

/// Which login a back-off is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LoginKey {
    /// A known account.
    User(i64),
    /// An identifier that names no account (lower-cased).
    Unknown(String),
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    failures: u32,
    last: Instant,
    locked_until: Option<Instant>,
}

/// Failed logins per account, in this process.
#[derive(Debug, Default)]
pub struct LoginBackoff {
    entries: Mutex<HashMap<LoginKey, Entry>>,
}

impl LoginBackoff {
    /// `Err(retry_after_secs)` while `key` is locked.
    pub fn check(&self, key: &LoginKey) -> Result<(), u64> {
        let now = Instant::now();
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(key).and_then(|e| e.locked_until) {
            Some(until) if until > now => Err(crate::ratelimit::retry_after_secs(until - now)),
            _ => Ok(()),
        }
    }

    /// Counts a failed login of `key`.
    pub fn failed(&self, key: LoginKey) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            let mut ages: Vec<Instant> = entries.values().map(|e| e.last).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            entries.retain(|_, e| e.last > cut && now.duration_since(e.last) < FORGET_AFTER);
        }
        let e = entries.entry(key).or_insert(Entry {
            failures: 0,
            last: now,
            locked_until: None,
        });
        if now.duration_since(e.last) >= FORGET_AFTER {
            e.failures = 0;
        }
        e.failures = e.failures.saturating_add(1);
        e.last = now;
        if e.failures > FREE_FAILURES {
            let doublings = (e.failures - FREE_FAILURES - 1).min(20);
            let lock = Duration::from_secs(1u64 << doublings).min(MAX_LOCK);
            e.locked_until = Some(now + lock);
        }
    }

    /// A successful login of `key`: its failures are forgotten.
    pub fn succeeded(&self, key: &LoginKey) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_after_the_free_failures_and_clears_on_success() {
        let b = LoginBackoff::default();
        let k = LoginKey::User(7);
        for _ in 0..FREE_FAILURES {
            assert_eq!(b.check(&k), Ok(()));
            b.failed(k.clone());
        }
        assert_eq!(b.check(&k), Ok(()));
        b.failed(k.clone());
        assert_eq!(b.check(&k), Err(1));
        b.failed(k.clone());
        assert_eq!(b.check(&k), Err(2));
        assert_eq!(b.check(&LoginKey::User(8)), Ok(()));
        b.succeeded(&k);
        assert_eq!(b.check(&k), Ok(()));
    }
}
