//! The local store's presigned URLs: their path ([`PATH_PREFIX`], keys
//! percent-encoded segment by segment, [`decode_key`]) and their HMAC.
//!
//! A URL for `key` valid until `expires` (Unix seconds) carries
//! `signature = hex(HMAC-SHA256(signing_key, "GET\n{key}\n{expires}"))`.
//! The key is the decoded object key, so the signature does not depend on
//! how the URL was percent-encoded. Verification is constant-time.

use hmac::{Hmac, Mac};
use percent_encoding::percent_decode_str;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The path prefix of presigned URLs.
pub const PATH_PREFIX: &str = "/objects/";

/// The object key of a request path (after `/objects/`), percent-decoded
/// segment by segment. `None` when a segment is not UTF-8 or decodes to
/// something holding `/`.
pub(crate) fn decode_key(raw: &str) -> Option<String> {
    let mut segments = Vec::new();
    for seg in raw.split('/') {
        let decoded = percent_decode_str(seg).decode_utf8().ok()?;
        if decoded.contains('/') {
            return None;
        }
        segments.push(decoded);
    }
    Some(segments.join("/"))
}

/// Why a presigned URL is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureError {
    /// `expires` or `signature` is absent.
    Missing,
    /// `expires` is not a number, or `signature` is not 64 hex digits.
    Malformed,
    /// The signature does not match the key and expiry (tampered URL).
    Invalid,
    /// The expiry has passed.
    Expired,
}

impl SignatureError {
    /// The message shown to the client.
    pub fn detail(self) -> &'static str {
        match self {
            SignatureError::Missing => "missing signature",
            SignatureError::Malformed => "malformed signature",
            SignatureError::Invalid => "invalid signature",
            SignatureError::Expired => "link expired",
        }
    }
}

fn mac(signing_key: &[u8], key: &str, expires: u64) -> HmacSha256 {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = HmacSha256::new_from_slice(signing_key).expect("HMAC takes keys of any length");
    mac.update(b"GET\n");
    mac.update(key.as_bytes());
    mac.update(b"\n");
    mac.update(expires.to_string().as_bytes());
    mac
}

/// The hex signature of `key` valid until `expires` (Unix seconds).
pub fn sign(signing_key: &[u8], key: &str, expires: u64) -> String {
    hex::encode(mac(signing_key, key, expires).finalize().into_bytes())
}

/// Checks the raw `expires` and `signature` query values of a URL for `key`
/// at time `now` (Unix seconds). Returns the expiry on success.
///
/// The signature is checked before the expiry, in constant time.
pub fn verify(
    signing_key: &[u8],
    key: &str,
    expires: Option<&str>,
    signature: Option<&str>,
    now: u64,
) -> Result<u64, SignatureError> {
    let (Some(expires), Some(signature)) = (expires, signature) else {
        return Err(SignatureError::Missing);
    };
    // Only the canonical spelling is accepted (plain digits without leading
    // zeros, lower-case hex), so that any change to the URL is refused.
    let canonical_number = !expires.is_empty()
        && expires.len() <= 20
        && expires.bytes().all(|b| b.is_ascii_digit())
        && (expires == "0" || !expires.starts_with('0'));
    if !canonical_number {
        return Err(SignatureError::Malformed);
    }
    let expires: u64 = expires.parse().map_err(|_| SignatureError::Malformed)?;
    if signature.len() != 64
        || !signature
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(SignatureError::Malformed);
    }
    let signature = hex::decode(signature).map_err(|_| SignatureError::Malformed)?;
    mac(signing_key, key, expires)
        .verify_slice(&signature)
        .map_err(|_| SignatureError::Invalid)?;
    if now >= expires {
        return Err(SignatureError::Expired);
    }
    Ok(expires)
}

/// The current time in Unix seconds.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn round_trip_and_every_tamper_is_refused() {
        let sig = sign(K, "a/b.mp3", 2_000);
        assert_eq!(
            verify(K, "a/b.mp3", Some("2000"), Some(&sig), 1_000),
            Ok(2_000)
        );
        // Other spellings of the same values are refused too.
        assert_eq!(
            verify(K, "a/b.mp3", Some("2000"), Some(&sig.to_uppercase()), 1_000),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(K, "a/b.mp3", Some("02000"), Some(&sig), 1_000),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(K, "a/c.mp3", Some("2000"), Some(&sig), 1_000),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            verify(K, "a/b.mp3", Some("2001"), Some(&sig), 1_000),
            Err(SignatureError::Invalid)
        );
        assert_eq!(
            verify(b"other", "a/b.mp3", Some("2000"), Some(&sig), 1_000),
            Err(SignatureError::Invalid)
        );
        let mut flipped = sig.clone().into_bytes();
        flipped[10] = if flipped[10] == b'0' { b'1' } else { b'0' };
        let flipped = String::from_utf8(flipped).unwrap();
        assert_eq!(
            verify(K, "a/b.mp3", Some("2000"), Some(&flipped), 1_000),
            Err(SignatureError::Invalid)
        );
    }

    #[test]
    fn missing_malformed_expired() {
        let sig = sign(K, "k", 2_000);
        assert_eq!(
            verify(K, "k", None, Some(&sig), 0),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(K, "k", Some("2000"), None, 0),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(K, "k", Some("+2000"), Some(&sig), 0),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(K, "k", Some(""), Some(&sig), 0),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(K, "k", Some("2000"), Some("zz"), 0),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(K, "k", Some("2000"), Some(&sig[..62]), 0),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(K, "k", Some("2000"), Some(&sig), 2_000),
            Err(SignatureError::Expired)
        );
        assert_eq!(verify(K, "k", Some("2000"), Some(&sig), 1_999), Ok(2_000));
    }
}
