//! The dashboard's session: a signed-in person's refresh token kept in a
//! cookie the page's script cannot read, so that a reload keeps them
//! signed in, and a CSRF token the page sends with every call the cookie
//! authenticates.
//!
//! - The cookie, [`COOKIE`]: `HttpOnly; Secure; SameSite=Strict; Path=/`,
//!   for the refresh token's life. It is set by `POST /dashboard/session`
//!   presenting the refresh token as a bearer token (so no other site can
//!   make one), and dropped by `DELETE /dashboard/session` (the token
//!   revoked).
//! - A request without `Authorization` but with the cookie is the cookie's
//!   user only with [`CSRF_HEADER`] equal to the session's CSRF token, an
//!   HMAC of the refresh token's id under the token secret (another site's
//!   page can neither read it nor set the header on a request the browser
//!   would send with the cookie); without it the request is refused (403).
//!   API callers keep using keys and bearer tokens: `Authorization` always
//!   wins over the cookie.

use hmac::{Hmac, Mac};
use http::HeaderMap;
use sha2::Sha256;

/// The session cookie's name.
pub const COOKIE: &str = "gateway_session";

/// The header carrying the session's CSRF token.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The session's CSRF token: HMAC-SHA256 of `jti` under `secret`, in hex.
pub fn csrf_token(secret: &[u8], jti: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(b"csrf:");
    mac.update(jti.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The session cookie's value in `headers`, if any.
pub fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|v| !v.is_empty())
}

/// `Set-Cookie` for `token`, living `max_age_secs` (0: dropped).
pub fn set_cookie(token: &str, max_age_secs: u64) -> String {
    format!("{COOKIE}={token}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age={max_age_secs}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_found_among_others_and_the_csrf_token_is_the_sessions() {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::COOKIE,
            "a=1; gateway_session=tok; b=2".parse().unwrap(),
        );
        assert_eq!(cookie(&h), Some("tok"));
        assert_ne!(csrf_token(b"k", "j1"), csrf_token(b"k", "j2"));
        assert_eq!(csrf_token(b"k", "j1").len(), 64);
        assert!(set_cookie("t", 60).contains("HttpOnly; Secure; SameSite=Strict"));
    }
}
