//! Gateway API keys.
//!
//! A key is `gk_` followed by 64 lowercase hex characters (256 random bits).
//! Only its SHA-256 hash (hex) is stored, with a short display prefix
//! (`gk_` and 8 characters) and an optional name.

use std::time::Duration;

use rand::RngCore;
use sha2::{Digest, Sha256};

use gateway_base::errors::ApiError;
use gateway_store::{Accounts, Keys, Store};

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

/// What a key list shows of a key: `gk_` and its first 8 characters.
pub fn display_prefix(key: &str) -> String {
    key.chars().take(KEY_PREFIX.len() + 8).collect()
}

pub(crate) fn well_formed(key: &str) -> bool {
    key.strip_prefix(KEY_PREFIX).is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Creates a key for a user and stores its hash; returns the key.
pub fn create_key(store: &Store, user_id: i64) -> Result<String, ApiError> {
    create_named_key(store, user_id, None, None).map(|(_, key)| key)
}

/// Creates a key with a name and a budget; returns its id and the key
/// (shown once).
pub fn create_named_key(
    store: &Store,
    user_id: i64,
    name: Option<&str>,
    budget: Option<gateway_store::Budget>,
) -> Result<(i64, String), ApiError> {
    match store.user(user_id) {
        Ok(Some(_)) => {}
        Ok(None) => return Err(ApiError::NotFound(format!("no user with id {user_id}"))),
        Err(e) => return Err(ApiError::internal("reading the key's user", e)),
    }
    let key = generate_key();
    let id = store
        .insert_key(
            user_id,
            &hash_key(&key),
            name,
            &display_prefix(&key),
            budget,
        )
        .map_err(|e| ApiError::internal("storing the key", e))?;
    Ok((id, key))
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
