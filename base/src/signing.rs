//! The signature scheme of spec §6, used both ways: verifying the provider's
//! inbound webhooks ([`crate::modes::webhook`]) and signing the job callbacks
//! the gateway sends to callers ([`crate::callbacks`]).
//!
//! `X-Provider-Signature: sha256=<hex>`, the HMAC-SHA256 of the raw body,
//! compared in constant time.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The signature header.
pub const SIGNATURE_HEADER: &str = "x-provider-signature";

/// `sha256=<hex>` of `body` keyed by `secret` (what senders put in the header).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Verifies a signature header value in constant time.
pub fn verify(secret: &[u8], body: &[u8], header: Option<&str>) -> Result<(), &'static str> {
    let header = header.ok_or("missing X-Provider-Signature")?;
    let hex_sig = header
        .trim()
        .strip_prefix("sha256=")
        .ok_or("malformed X-Provider-Signature: expected sha256=<hex>")?;
    let sig = hex::decode(hex_sig).map_err(|_| "malformed X-Provider-Signature: not hex")?;
    if sig.len() != 32 {
        return Err("malformed X-Provider-Signature: wrong length");
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    mac.verify_slice(&sig)
        .map_err(|_| "invalid X-Provider-Signature")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures() {
        let body = br#"{"event":"job.completed"}"#;
        let good = sign(b"secret", body);
        assert!(verify(b"secret", body, Some(&good)).is_ok());
        assert_eq!(
            verify(b"other", body, Some(&good)),
            Err("invalid X-Provider-Signature")
        );
        assert_eq!(
            verify(b"secret", body, None),
            Err("missing X-Provider-Signature")
        );
        assert!(
            verify(b"secret", body, Some(&good[..good.len() - 2])).is_err(),
            "truncated"
        );
        assert!(
            verify(b"secret", body, Some(good.trim_start_matches("sha256="))).is_err(),
            "no scheme"
        );
        assert!(verify(b"secret", b"{}", Some(&good)).is_err(), "other body");
    }
}
