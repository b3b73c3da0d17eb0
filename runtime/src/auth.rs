//! Authentication by gateway API key.
//!
//! A key is `gk_` followed by 64 lowercase hex characters (256 random bits).
//! Only its SHA-256 hash (hex) is stored. The hot path does not touch the
//! database: a small cache maps key hash → user for [`CACHE_TTL`]; a revoke or
//! a disable made through this process's [`Auth`] drops the entry at once,
//! one made by another process (the CLI) is seen within the TTL.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use http::HeaderMap;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::errors::ApiError;
use crate::store::{Store, User};

/// Prefix of every gateway API key.
pub const KEY_PREFIX: &str = "gk_";
/// How long a looked-up key stays cached.
pub const CACHE_TTL: Duration = Duration::from_secs(30);

/// A new random API key (shown once, never stored).
pub fn generate_key() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    format!("{KEY_PREFIX}{}", hex::encode(bytes))
}

/// SHA-256 of the key, hex: the only form that is stored.
pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

fn well_formed(key: &str) -> bool {
    key.strip_prefix(KEY_PREFIX).is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Creates a key for a user and stores its hash; returns the key.
pub fn create_key(store: &Store, user_id: i64) -> Result<String, ApiError> {
    match store.user(user_id) {
        Ok(Some(_)) => {}
        Ok(None) => return Err(ApiError::NotFound(format!("no user with id {user_id}"))),
        Err(e) => return Err(ApiError::Internal(e.to_string())),
    }
    let key = generate_key();
    store
        .insert_key_hash(user_id, &hash_key(&key))
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(key)
}

/// The authenticator: store plus cache.
pub struct Auth {
    store: Store,
    cache: RwLock<HashMap<String, (Option<User>, Instant)>>,
}

impl Auth {
    pub fn new(store: Store) -> Auth {
        Auth {
            store,
            cache: RwLock::new(HashMap::new()),
        }
    }

    /// The user behind the request's `Authorization: Bearer` key.
    ///
    /// 401 when the header is missing, is not a bearer credential, the key is
    /// malformed or unknown (or revoked); 403 when the user is disabled.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<User, ApiError> {
        let value = headers.get(http::header::AUTHORIZATION).ok_or_else(|| {
            ApiError::Unauthorized(
                "missing credentials: send Authorization: Bearer <API key>".into(),
            )
        })?;
        let value = value
            .to_str()
            .map_err(|_| ApiError::Unauthorized("malformed Authorization header".into()))?;
        let (scheme, key) = value.trim().split_once(' ').unwrap_or((value, ""));
        if !scheme.eq_ignore_ascii_case("bearer") || key.trim().is_empty() {
            return Err(ApiError::Unauthorized(
                "malformed Authorization header: expected Bearer <API key>".into(),
            ));
        }
        let key = key.trim();
        if !well_formed(key) {
            return Err(ApiError::Unauthorized("malformed API key".into()));
        }
        let hash = hash_key(key);
        let user = match self.cached(&hash) {
            Some(u) => u,
            None => {
                let h = hash.clone();
                let found = self
                    .store
                    .blocking(move |store| store.user_by_key_hash(&h))
                    .await?;
                self.cache
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(hash, (found.clone(), Instant::now()));
                found
            }
        };
        let user = user.ok_or_else(|| ApiError::Unauthorized("invalid API key".into()))?;
        if user.disabled {
            return Err(ApiError::Forbidden("account disabled".into()));
        }
        Ok(user)
    }

    fn cached(&self, hash: &str) -> Option<Option<User>> {
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        match cache.get(hash) {
            Some((u, at)) if at.elapsed() < CACHE_TTL => Some(u.clone()),
            _ => None,
        }
    }

    /// Forgets every cached lookup (after a revoke or a disable).
    pub fn invalidate_all(&self) {
        self.cache
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_well_formed_and_hashes_are_stable() {
        let k = generate_key();
        assert!(well_formed(&k), "{k}");
        assert_eq!(hash_key(&k), hash_key(&k));
        assert_eq!(hash_key(&k).len(), 64);
        assert!(!well_formed("gk_short"));
        assert!(!well_formed(&k.to_uppercase()));
        assert!(!well_formed(&k[3..]));
    }
}
