//! The back-off of failed logins, by account and client address.
//!
//! A failed login counts against its account (or an unknown identifier:
//! the same rule, so that the answer does not tell them apart) from the
//! client's address (the login route's address key; IPv6 by its prefix):
//!
//! - *Per account and address*: an address may fail [`FREE_FAILURES`]
//!   logins of an account in a row; each further failure locks that
//!   account's logins *from that address* for twice as long as the one
//!   before, from 1 s up to [`MAX_LOCK`]. While locked, a login from the
//!   address is answered 429 with `Retry-After` before any password is
//!   checked, the right one included. A successful login from the address
//!   clears its count; so does an hour without failures.
//! - *Per account, from every address*: an account that failed more than
//!   [`ACCOUNT_FREE_FAILURES`] logins within the hour is under attack:
//!   while it is, an address that fails it has no free failures left (each
//!   failure locks it, doubling). Only an hour without failures clears
//!   this count, not a success.
//!
//! So nobody's failures refuse a login from an address that has not failed
//! itself: a stranger cannot keep the owner out, and an attacker with many
//! addresses gets one guess per address while the account is under attack.
//!
//! The state is this process's (one entry per account and per account and
//! address that failed lately, at most [`MAX_ENTRIES`] of each); with
//! several instances each keeps its own, and the per-address limit of the
//! `accounts` capability (shared through Redis) bounds the rest.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed logins of an account in a row allowed from one address before
/// the address is locked out of it.
pub const FREE_FAILURES: u32 = 5;
/// Failed logins of an account from every address, within
/// [`FORGET_AFTER`] of each other, beyond which an address has no free
/// failures left.
pub const ACCOUNT_FREE_FAILURES: u32 = 20;
/// The longest lock.
pub const MAX_LOCK: Duration = Duration::from_secs(15 * 60);
/// Failures older than this are forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// Most entries kept (of each kind); beyond, the oldest half is dropped.
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

impl Entry {
    /// One more failure at `now` (the count restarts after [`FORGET_AFTER`]).
    fn count(&mut self, now: Instant) -> u32 {
        if now.duration_since(self.last) >= FORGET_AFTER {
            self.failures = 0;
        }
        self.failures = self.failures.saturating_add(1);
        self.last = now;
        self.failures
    }
}

/// The entry of `key`, made room for: at [`MAX_ENTRIES`] the older half
/// and the forgotten are dropped first.
fn entry<K: Eq + Hash>(entries: &mut HashMap<K, Entry>, key: K, now: Instant) -> &mut Entry {
    if entries.len() >= MAX_ENTRIES {
        let mut ages: Vec<Instant> = entries.values().map(|e| e.last).collect();
        ages.sort_unstable();
        let cut = ages[ages.len() / 2];
        entries.retain(|_, e| e.last > cut && now.duration_since(e.last) < FORGET_AFTER);
    }
    entries.entry(key).or_insert(Entry {
        failures: 0,
        last: now,
        locked_until: None,
    })
}

#[derive(Debug, Default)]
struct State {
    /// Per account and address (the address key, 0 when unknown).
    from: HashMap<(LoginKey, i64), Entry>,
    /// Per account, from every address (never locked itself).
    accounts: HashMap<LoginKey, Entry>,
}

/// Failed logins per account and address, in this process.
#[derive(Debug, Default)]
pub struct LoginBackoff {
    state: Mutex<State>,
}

impl LoginBackoff {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Err(retry_after_secs)` while `key` is locked for address `from`.
    pub fn check(&self, key: &LoginKey, from: i64) -> Result<(), u64> {
        let now = Instant::now();
        let state = self.state();
        match state
            .from
            .get(&(key.clone(), from))
            .and_then(|e| e.locked_until)
        {
            Some(until) if until > now => Err(crate::ratelimit::retry_after_secs(until - now)),
            _ => Ok(()),
        }
    }

    /// Counts a failed login of `key` from address `from`.
    pub fn failed(&self, key: LoginKey, from: i64) {
        let now = Instant::now();
        let mut state = self.state();
        let under_attack =
            entry(&mut state.accounts, key.clone(), now).count(now) > ACCOUNT_FREE_FAILURES;
        let free = if under_attack { 0 } else { FREE_FAILURES };
        let e = entry(&mut state.from, (key, from), now);
        let failures = e.count(now);
        if failures > free {
            let doublings = (failures - free - 1).min(20);
            let lock = Duration::from_secs(1u64 << doublings).min(MAX_LOCK);
            e.locked_until = Some(now + lock);
        }
    }

    /// A successful login of `key` from address `from`: that address's
    /// failures are forgotten (not the account's, nor other addresses').
    pub fn succeeded(&self, key: &LoginKey, from: i64) {
        self.state().from.remove(&(key.clone(), from));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOME: i64 = -1;
    const STRANGER: i64 = -2;

    #[test]
    fn locks_an_address_after_its_free_failures_and_clears_on_its_success() {
        let b = LoginBackoff::default();
        let k = LoginKey::User(7);
        for _ in 0..FREE_FAILURES {
            assert_eq!(b.check(&k, STRANGER), Ok(()));
            b.failed(k.clone(), STRANGER);
        }
        assert_eq!(b.check(&k, STRANGER), Ok(()));
        b.failed(k.clone(), STRANGER);
        assert_eq!(b.check(&k, STRANGER), Err(1));
        b.failed(k.clone(), STRANGER);
        assert_eq!(b.check(&k, STRANGER), Err(2));
        assert_eq!(b.check(&LoginKey::User(8), STRANGER), Ok(()));
        b.succeeded(&k, STRANGER);
        assert_eq!(b.check(&k, STRANGER), Ok(()));
    }

    #[test]
    fn a_strangers_failures_never_refuse_another_address() {
        let b = LoginBackoff::default();
        let k = LoginKey::User(7);
        for _ in 0..FREE_FAILURES + 3 {
            b.failed(k.clone(), STRANGER);
        }
        assert_eq!(b.check(&k, STRANGER), Err(4));
        assert_eq!(b.check(&k, HOME), Ok(()));
        // The owner's success leaves the stranger locked.
        b.succeeded(&k, HOME);
        assert_eq!(b.check(&k, STRANGER), Err(4));
    }

    #[test]
    fn under_attack_a_failing_address_has_no_free_failures_and_a_fresh_one_is_let_in() {
        let b = LoginBackoff::default();
        let k = LoginKey::Unknown("kim@example.com".into());
        // The account's free failures, from many addresses, each within its own.
        let addresses = (ACCOUNT_FREE_FAILURES / FREE_FAILURES) as i64;
        for address in -100 - addresses..-100 {
            for _ in 0..FREE_FAILURES {
                b.failed(k.clone(), address);
            }
            assert_eq!(b.check(&k, address), Ok(()));
        }
        // Under attack now: one more failure locks its address at once.
        b.failed(k.clone(), -100);
        assert_eq!(b.check(&k, -100), Err(1));
        // A fresh address is let in; its first failure locks it.
        assert_eq!(b.check(&k, HOME), Ok(()));
        b.failed(k.clone(), HOME);
        assert_eq!(b.check(&k, HOME), Err(1));
        b.failed(k.clone(), HOME);
        assert_eq!(b.check(&k, HOME), Err(2));
        // The owner's success clears the owner's address only.
        b.succeeded(&k, HOME);
        assert_eq!(b.check(&k, HOME), Ok(()));
        assert_eq!(b.check(&k, -100), Err(1));
    }
}
