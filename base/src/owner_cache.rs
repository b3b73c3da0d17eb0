//! The caches of tenant isolation ([`crate::owners`]): owners looked up,
//! and the account's stock voices. Held by the shared services
//! ([`crate::services`]) and kept fresh by the cluster bus; they know
//! nothing of a request.

use std::collections::HashMap;

/// How long a looked-up owner is remembered. Ownership never changes hands
/// (ids are the upstream's fresh UUIDs); a create or delete made through this
/// instance updates the cache at once; one made through another instance
/// drops the entry here through the cluster bus ([`gateway_adapters::cluster`]), or,
/// without Redis or while the bus is down, is seen within the TTL (a
/// deleted resource then answers the upstream's 404).
pub const CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(30);
/// Entries kept before the cache is emptied and refilled.
const CACHE_MAX: usize = 100_000;

/// kind → upstream id → (owner, when looked up). Nested so that a lookup
/// borrows the id instead of allocating a key.
type OwnerMap = HashMap<String, HashMap<String, (Option<i64>, std::time::Instant)>>;

/// Owner lookups, cached: the hot path of every owned route reads no database.
#[derive(Default)]
pub struct OwnerCache {
    map: std::sync::RwLock<OwnerMap>,
}

impl OwnerCache {
    pub fn get(&self, kind: &str, id: &str) -> Option<Option<i64>> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        match map.get(kind).and_then(|ids| ids.get(id)) {
            Some((owner, at)) if at.elapsed() < CACHE_TTL => Some(*owner),
            _ => None,
        }
    }

    /// Remembers (or, after a create or delete here, corrects) an owner.
    pub fn put(&self, kind: &str, id: String, owner: Option<i64>) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let ids = match map.get_mut(kind) {
            Some(ids) => ids,
            None => map.entry(kind.to_owned()).or_default(),
        };
        if ids.len() >= CACHE_MAX {
            ids.clear();
        }
        ids.insert(id, (owner, std::time::Instant::now()));
    }

    /// Drops one entry (changed by another instance).
    pub fn forget(&self, kind: &str, id: &str) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        if let Some(ids) = map.get_mut(kind) {
            ids.remove(id);
        }
    }

    /// Drops every entry.
    pub fn clear(&self) {
        self.map.write().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// How long the provider's list of stock voices is trusted.
pub const STOCK_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// The stock voices last read from the provider (see [`crate::owners`]).
#[derive(Default)]
pub struct StockVoices {
    pub known: std::sync::RwLock<Option<(std::collections::HashSet<String>, std::time::Instant)>>,
    /// One refresh at a time; the others wait for its result.
    pub refreshing: tokio::sync::Mutex<()>,
}

impl StockVoices {
    pub fn lookup(&self, id: &str) -> Option<bool> {
        let known = self.known.read().unwrap_or_else(|e| e.into_inner());
        match &*known {
            Some((ids, at)) if at.elapsed() < STOCK_TTL => Some(ids.contains(id)),
            _ => None,
        }
    }
}
