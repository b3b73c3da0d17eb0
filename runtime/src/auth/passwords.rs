//! Passwords: argon2id hashes in the PHC string format. A password is never
//! logged, stored or answered; only its hash is stored.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

/// Shortest password accepted.
pub const MIN_LEN: usize = 8;
/// Longest password accepted (hashing cost is bounded).
pub const MAX_LEN: usize = 256;

/// The argon2id hash (PHC string) of `password`, with a random salt.
pub fn hash(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("hashing a password: {e}"))
}

/// Whether `password` matches the stored hash. `None` (an unknown user, an
/// account without a password) is checked against a fixed hash, so that the
/// answer takes the same time either way.
pub fn verify(password: &str, stored: Option<&str>) -> bool {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let dummy = DUMMY.get_or_init(|| hash("not a password of anyone").unwrap_or_default());
    let (phc, real) = match stored {
        Some(s) => (s, true),
        None => (dummy.as_str(), false),
    };
    let Ok(parsed) = PasswordHash::new(phc) else {
        return false;
    };
    Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok()
        && real
}

/// Why a new password is refused, if it is.
pub fn check(password: &str) -> Result<(), String> {
    let n = password.chars().count();
    if n < MIN_LEN {
        return Err(format!("password: at least {MIN_LEN} characters"));
    }
    if password.len() > MAX_LEN {
        return Err(format!("password: at most {MAX_LEN} bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_differ() {
        let a = hash("correct horse").unwrap();
        let b = hash("correct horse").unwrap();
        assert_ne!(a, b, "salted");
        assert!(a.starts_with("$argon2id$"));
        assert!(verify("correct horse", Some(&a)));
        assert!(!verify("wrong horse", Some(&a)));
        assert!(!verify("correct horse", None));
    }
}
