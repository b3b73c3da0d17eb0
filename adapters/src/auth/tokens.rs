//! Access and refresh tokens: HS256 JWTs (`jsonwebtoken`) keyed by
//! `GATEWAY_JWT_SECRET`. Claims: `sub` (the user id, as text), `exp`, `iat`,
//! `jti`, `typ` (`access` / `refresh`), `env` (`GATEWAY_ENV`), and `iat_ms`
//! (`iat` in milliseconds: a password reset revokes the tokens issued
//! before it, to the millisecond).
//!
//! Expiry is checked here, without leeway, after the signature and the
//! environment, so that each failure has its own cause.

use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::cause::Cause;

/// What a token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Typ {
    Access,
    Refresh,
}

impl Typ {
    pub fn as_str(self) -> &'static str {
        match self {
            Typ::Access => "access",
            Typ::Refresh => "refresh",
        }
    }
}

/// The claims the gateway issues.
#[derive(Debug, Clone, Serialize)]
pub struct Claims {
    pub sub: String,
    pub exp: i64,
    pub iat: i64,
    pub iat_ms: i64,
    pub jti: String,
    pub typ: &'static str,
    pub env: String,
}

/// The claims as read: anything may be missing.
#[derive(Debug, Deserialize)]
struct RawClaims {
    sub: Option<Value>,
    exp: Option<i64>,
    iat: Option<i64>,
    iat_ms: Option<i64>,
    jti: Option<String>,
    typ: Option<String>,
    env: Option<String>,
}

/// A token whose signature, environment and expiry were checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub user_id: i64,
    pub jti: String,
    pub exp: i64,
    pub typ: Typ,
    /// When it was issued, in milliseconds since the epoch (`iat_ms`, else
    /// `iat` × 1000, else 0).
    pub issued_ms: i64,
}

/// Issuer and verifier.
pub struct Tokens {
    secret: Vec<u8>,
    env: String,
    pub access_ttl: Duration,
    pub refresh_ttl: Duration,
}

/// Signs any claims with `secret` (HS256). Tests forge tokens with it.
pub fn sign(secret: &[u8], claims: &impl Serialize) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret),
    )
    .expect("HS256 signing of JSON claims cannot fail")
}

/// Whether a bearer credential looks like a JWT (three base64url parts)
/// rather than an API key.
pub fn looks_like_jwt(s: &str) -> bool {
    s.split('.').count() == 3
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

impl Tokens {
    /// The dashboard session's CSRF token for the refresh token `jti`
    /// ([`super::session`]).
    pub fn csrf(&self, jti: &str) -> String {
        super::session::csrf_token(&self.secret, jti)
    }

    pub fn new(secret: Vec<u8>, env: String, access_ttl: Duration, refresh_ttl: Duration) -> Self {
        Tokens {
            secret,
            env,
            access_ttl,
            refresh_ttl,
        }
    }

    /// A new token of `typ` for `user_id`, and its claims.
    pub fn issue(&self, user_id: i64, typ: Typ) -> (String, Claims) {
        let now_ms = chrono::Utc::now().timestamp_millis();
        let now = now_ms.div_euclid(1000);
        let ttl = match typ {
            Typ::Access => self.access_ttl,
            Typ::Refresh => self.refresh_ttl,
        };
        let claims = Claims {
            sub: user_id.to_string(),
            exp: now + ttl.as_secs() as i64,
            iat: now,
            iat_ms: now_ms,
            jti: uuid::Uuid::new_v4().simple().to_string(),
            typ: typ.as_str(),
            env: self.env.clone(),
        };
        (sign(&self.secret, &claims), claims)
    }

    /// Checks signature, environment, user id and expiry, in that order.
    pub fn verify(&self, token: &str) -> Result<Verified, Cause> {
        let mut v = Validation::new(Algorithm::HS256);
        v.validate_exp = false;
        v.validate_nbf = false;
        v.validate_aud = false;
        v.required_spec_claims = Default::default();
        let raw =
            jsonwebtoken::decode::<RawClaims>(token, &DecodingKey::from_secret(&self.secret), &v)
                .map_err(|_| Cause::TokenUndecodable)?
                .claims;
        let (Some(exp), Some(jti), Some(typ)) = (raw.exp, raw.jti, raw.typ) else {
            return Err(Cause::TokenUndecodable);
        };
        let typ = match typ.as_str() {
            "access" => Typ::Access,
            "refresh" => Typ::Refresh,
            _ => return Err(Cause::TokenUndecodable),
        };
        if raw.env.as_deref() != Some(self.env.as_str()) {
            return Err(Cause::TokenOtherEnv);
        }
        let user_id = match &raw.sub {
            Some(Value::String(s)) => s.parse::<i64>().ok(),
            Some(Value::Number(n)) => n.as_i64(),
            _ => None,
        }
        .ok_or(Cause::TokenNoUser)?;
        if exp <= chrono::Utc::now().timestamp() {
            return Err(Cause::TokenExpired);
        }
        let issued_ms = raw
            .iat_ms
            .or_else(|| raw.iat.map(|s| s.saturating_mul(1000)))
            .unwrap_or(0);
        Ok(Verified {
            user_id,
            jti,
            exp,
            typ,
            issued_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tokens() -> Tokens {
        Tokens::new(
            b"secret".to_vec(),
            "test".into(),
            Duration::from_secs(60),
            Duration::from_secs(600),
        )
    }

    #[test]
    fn issued_tokens_verify_and_each_fault_has_its_cause() {
        let t = tokens();
        let (tok, c) = t.issue(7, Typ::Access);
        let v = t.verify(&tok).unwrap();
        assert_eq!((v.user_id, v.typ, v.jti), (7, Typ::Access, c.jti));
        let now = chrono::Utc::now().timestamp();
        let forged = |secret: &[u8], claims: Value| t.verify(&sign(secret, &claims));
        let base = json!({"sub": "7", "exp": now + 60, "iat": now, "jti": "j", "typ": "access", "env": "test"});
        assert!(forged(b"secret", base.clone()).is_ok());
        assert_eq!(forged(b"other", base.clone()), Err(Cause::TokenUndecodable));
        let mut b = base.clone();
        b["env"] = json!("staging");
        assert_eq!(forged(b"secret", b), Err(Cause::TokenOtherEnv));
        let mut b = base.clone();
        b.as_object_mut().unwrap().remove("sub");
        assert_eq!(forged(b"secret", b), Err(Cause::TokenNoUser));
        let mut b = base.clone();
        b["exp"] = json!(now - 1);
        assert_eq!(forged(b"secret", b), Err(Cause::TokenExpired));
        assert_eq!(t.verify("a.b.c"), Err(Cause::TokenUndecodable));
        assert!(looks_like_jwt(&tok));
        assert!(!looks_like_jwt("gk_abc"));
    }
}
