//! Who is calling: one authenticator for API keys, access tokens (JWT) and
//! the admin key, answering each of spec §5's 401 causes with a message of
//! its own ([`Cause`]).
//!
//! * [`keys`] — gateway API keys (SHA-256 hashes).
//! * [`tokens`] — access and refresh tokens: issue, verify.
//! * [`passwords`] — argon2 hashes, on a small pool of their own.
//! * [`backoff`] — the per-account back-off of failed logins.
//! * [`cause`] — the 401 causes, each with its own message.
//! * [`config`] — the variables of accounts and tokens.
//!
//! The hot path of an API key does not touch the database: a small cache
//! maps key hash → owner for [`keys::CACHE_TTL`]; a revoke, disable or delete
//! made through this process's [`Auth`] drops the cache at once; one made by
//! another process (the CLI, another instance) drops it through the cluster
//! bus when Redis is configured ([`crate::cluster`]), else is seen within
//! the TTL.
//! Access tokens are checked against the database (revocation, deleted
//! users) on every request. A password reset revokes every token of its
//! user issued before it (one row, [`gateway_store::Store::set_password_revoking`]).

pub mod backoff;
pub mod cause;
pub mod config;
pub mod keys;
pub mod passwords;
pub mod session;
pub mod tokens;

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use http::HeaderMap;

pub use cause::Cause;
use gateway_base::errors::ApiError;
use gateway_base::spec::Auth as RowAuth;
use gateway_store::{Accounts, KeyOwner, Keys, Store, User};
pub use keys::{create_key, create_named_key, generate_key, hash_key, CACHE_TTL, KEY_PREFIX};
use tokens::{Tokens, Typ, Verified};

/// Header carrying the admin key on admin routes.
pub const ADMIN_KEY_HEADER: &str = "x-admin-key";
/// Where Anthropic's clients put the API key (rows with `auth = "x_api_key"`).
pub const X_API_KEY: &str = "x-api-key";

/// Where Google's clients put the API key (rows with `auth = "goog_api_key"`).
pub const X_GOOG_API_KEY: &str = "x-goog-api-key";

/// The 403 of a disabled account.
pub fn disabled() -> ApiError {
    ApiError::Forbidden("account disabled".into())
}

/// The 403 of a non-admin on an admin route.
pub fn not_admin() -> ApiError {
    ApiError::Forbidden("Insufficient privileges. Admin access required.".into())
}

/// A new access token and refresh token.
#[derive(Debug, Clone)]
pub struct TokenPair {
    pub access_token: String,
    pub refresh_token: String,
    /// Seconds the access token lives.
    pub expires_in: u64,
}

/// The authenticator: store, key cache, token issuer, password pool,
/// login back-off.
pub struct Auth {
    store: Store,
    cache: RwLock<HashMap<String, (Option<KeyOwner>, Instant)>>,
    tokens: Tokens,
    admin_key: Option<String>,
    /// Where passwords are hashed and checked.
    pub passwords: passwords::Pool,
    /// Failed logins per account.
    pub login_backoff: backoff::LoginBackoff,
}

impl Auth {
    /// The admin key and the password pool's size and wait come from `accounts`.
    pub fn new(store: Store, tokens: Tokens, accounts: &config::AccountConfig) -> Auth {
        Auth {
            store,
            cache: RwLock::new(HashMap::new()),
            tokens,
            admin_key: accounts.admin_key.clone(),
            passwords: passwords::Pool::new(accounts.password_hashers, accounts.password_hash_wait),
            login_backoff: backoff::LoginBackoff::default(),
        }
    }

    /// The caller of a row with `auth`: `None` on rows without a user
    /// (`none`, `signature`) and for the admin key on `admin` rows.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        auth: RowAuth,
    ) -> Result<Option<User>, ApiError> {
        match auth {
            RowAuth::None | RowAuth::Signature => Ok(None),
            RowAuth::Bearer => self.caller(headers, false).await.map(Some),
            // Anthropic's clients send the key in `x-api-key`.
            RowAuth::XApiKey => self.key_header_or_bearer(headers, X_API_KEY).await,
            // Google's clients send the key in `x-goog-api-key`.
            RowAuth::GoogApiKey => self.key_header_or_bearer(headers, X_GOOG_API_KEY).await,
            RowAuth::AccessToken => self.caller(headers, true).await.map(Some),
            RowAuth::WebSocket => self.socket_caller(headers).await.map(Some),
            RowAuth::Admin => {
                if let Some(v) = headers.get(ADMIN_KEY_HEADER) {
                    let ok = match (&self.admin_key, v.to_str()) {
                        (Some(expected), Ok(given)) => same_secret(expected, given),
                        _ => false,
                    };
                    return if ok {
                        Ok(None)
                    } else {
                        Err(Cause::WrongAdminKey.into())
                    };
                }
                let user = self.caller(headers, false).await?;
                if !user.is_admin {
                    return Err(not_admin());
                }
                Ok(Some(user))
            }
        }
    }

    /// The user of the API key in the header `name` when the request has
    /// no `Authorization`, else of `Authorization: Bearer`.
    async fn key_header_or_bearer(
        &self,
        headers: &HeaderMap,
        name: &str,
    ) -> Result<Option<User>, ApiError> {
        match headers.get(name) {
            Some(v) if headers.get(http::header::AUTHORIZATION).is_none() => {
                let key = v.to_str().map_err(|_| Cause::MalformedHeader)?.trim();
                self.key_user(key).await.map(Some)
            }
            _ => self.caller(headers, false).await.map(Some),
        }
    }

    /// A WebSocket's caller: `Authorization: Bearer` (or `Token`, as
    /// Deepgram's clients send it), else the API key in the
    /// `Sec-WebSocket-Protocol` list ([`socket_key`]).
    async fn socket_caller(&self, headers: &HeaderMap) -> Result<User, ApiError> {
        if let Some(v) = headers.get(http::header::AUTHORIZATION) {
            let v = v.to_str().map_err(|_| Cause::MalformedHeader)?.trim();
            if let Some((scheme, key)) = v.split_once(' ') {
                if scheme.eq_ignore_ascii_case("token") && !key.trim().is_empty() {
                    return self.key_user(key.trim()).await;
                }
            }
            return self.caller(headers, false).await;
        }
        match socket_key(headers) {
            Some(key) => self.key_user(&key).await,
            None => Err(Cause::NoCredentials.into()),
        }
    }

    /// The user behind `Authorization: Bearer` (an API key, or an access
    /// token; only an access token when `token_only`).
    async fn caller(&self, headers: &HeaderMap, token_only: bool) -> Result<User, ApiError> {
        // The dashboard's session, when no credential is presented.
        if headers.get(http::header::AUTHORIZATION).is_none() {
            if let Some(token) = session::cookie(headers) {
                return self.session_user(headers, token).await;
            }
        }
        let value = bearer(headers)?;
        if tokens::looks_like_jwt(value) {
            return self.token_user(value, Typ::Access).await.map(|(u, _)| u);
        }
        if token_only {
            return Err(Cause::AccessTokenRequired.into());
        }
        self.key_user(value).await
    }

    async fn key_user(&self, key: &str) -> Result<User, ApiError> {
        if !keys::well_formed(key) {
            return Err(Cause::MalformedKey.into());
        }
        let hash = hash_key(key);
        let owner = match self.cached(&hash) {
            Some(o) => o,
            None => {
                let h = hash.clone();
                let found = self.store.blocking(move |s| s.key_owner(&h)).await?;
                self.cache
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(hash, (found.clone(), Instant::now()));
                found
            }
        };
        let owner = owner.ok_or(Cause::UnknownKey)?;
        if owner.revoked {
            return Err(Cause::KeyRevoked.into());
        }
        live(owner.user)
    }

    /// The user of a token of type `want`, checked against the database
    /// (revoked token, deleted or disabled user).
    pub async fn token_user(&self, token: &str, want: Typ) -> Result<(User, Verified), ApiError> {
        let v = self.tokens.verify(token)?;
        if v.typ != want {
            return Err(match want {
                Typ::Access => Cause::RefreshNotAccess,
                Typ::Refresh => Cause::AccessNotRefresh,
            }
            .into());
        }
        let (uid, jti, issued_ms) = (v.user_id, v.jti.clone(), v.issued_ms);
        let (user, revoked) = self
            .store
            .blocking(move |s| s.token_subject(uid, &jti, issued_ms))
            .await?;
        if revoked {
            return Err(Cause::TokenRevoked.into());
        }
        let user = live(user.ok_or(Cause::UserDeleted)?)?;
        Ok((user, v))
    }

    /// The user of the session cookie `token` ([`session`]), with the
    /// session's CSRF token in its header (else 403).
    async fn session_user(&self, headers: &HeaderMap, token: &str) -> Result<User, ApiError> {
        let (user, v) = self.token_user(token, Typ::Refresh).await?;
        if !self.csrf_ok(headers, &v) {
            return Err(ApiError::Forbidden(
                "a request the session cookie signs in must carry the session's X-CSRF-Token header"
                    .into(),
            ));
        }
        Ok(user)
    }

    /// The session of the cookie in `headers` (no CSRF token asked: the
    /// dashboard's `GET` and `DELETE /dashboard/session`): its user, its
    /// verified refresh token and its CSRF token.
    pub async fn session(&self, headers: &HeaderMap) -> Result<(User, Verified, String), ApiError> {
        let token = session::cookie(headers).ok_or(Cause::NoCredentials)?;
        let (user, v) = self.token_user(token, Typ::Refresh).await?;
        let csrf = self.tokens.csrf(&v.jti);
        Ok((user, v, csrf))
    }

    /// The refresh token's life: the session cookie's.
    pub fn session_ttl(&self) -> Duration {
        self.tokens.refresh_ttl
    }

    /// Whether `headers` carry the CSRF token of the session `v` (compared
    /// in constant time).
    pub fn csrf_ok(&self, headers: &HeaderMap, v: &Verified) -> bool {
        let sent = headers
            .get(session::CSRF_HEADER)
            .and_then(|h| h.to_str().ok());
        sent.is_some_and(|s| same_secret(&self.tokens.csrf(&v.jti), s.trim()))
    }

    /// The CSRF token of a verified refresh token.
    pub fn csrf_of(&self, v: &Verified) -> String {
        self.tokens.csrf(&v.jti)
    }

    /// The verified access token of the request (after authentication).
    pub fn presented_token(&self, headers: &HeaderMap) -> Result<Verified, ApiError> {
        Ok(self.tokens.verify(bearer(headers)?)?)
    }

    /// A new token pair for a user.
    pub fn issue(&self, user_id: i64) -> TokenPair {
        let (access_token, _) = self.tokens.issue(user_id, Typ::Access);
        let (refresh_token, _) = self.tokens.issue(user_id, Typ::Refresh);
        TokenPair {
            access_token,
            refresh_token,
            expires_in: self.tokens.access_ttl.as_secs(),
        }
    }

    /// Revokes a token by its id until it would expire anyway. `false` when
    /// it was revoked already.
    pub async fn revoke(&self, v: &Verified, user_id: i64) -> Result<bool, ApiError> {
        let (jti, exp) = (v.jti.clone(), v.exp);
        let expires_at = chrono::DateTime::from_timestamp(exp, 0).unwrap_or_default();
        Ok(self
            .store
            .blocking(move |s| s.revoke_token(&jti, user_id, &gateway_store::rfc3339(expires_at)))
            .await?)
    }

    /// Exchanges a refresh token for a new pair; the old refresh token is
    /// revoked (used once).
    pub async fn refresh(&self, refresh_token: &str) -> Result<TokenPair, ApiError> {
        let (user, v) = self.token_user(refresh_token, Typ::Refresh).await?;
        if !self.revoke(&v, user.id).await? {
            return Err(Cause::TokenRevoked.into());
        }
        Ok(self.issue(user.id))
    }

    fn cached(&self, hash: &str) -> Option<Option<KeyOwner>> {
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        match cache.get(hash) {
            Some((u, at)) if at.elapsed() < CACHE_TTL => Some(u.clone()),
            _ => None,
        }
    }

    /// Forgets every cached lookup (after a revoke, a disable or a delete).
    pub fn invalidate_all(&self) {
        self.cache
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// A user that may call: not deleted (401), not disabled (403).
fn live(user: User) -> Result<User, ApiError> {
    if user.deleted {
        return Err(Cause::UserDeleted.into());
    }
    if user.disabled {
        return Err(disabled());
    }
    Ok(user)
}

/// Compares two secrets in time independent of where they differ (their
/// SHA-256 digests, so the lengths do not show either).
fn same_secret(a: &str, b: &str) -> bool {
    use sha2::{Digest, Sha256};
    let (x, y) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    x.iter()
        .zip(y.iter())
        .fold(0u8, |acc, (p, q)| acc | (p ^ q))
        == 0
}

/// The credential of `Authorization: Bearer <credential>`.
/// The API key a browser's WebSocket offers among its subprotocols (it
/// cannot set headers): OpenAI's `openai-insecure-api-key.<key>`, or
/// Deepgram's pair `token, <key>` (the entry after `token`).
pub fn socket_key(headers: &HeaderMap) -> Option<String> {
    let offered: Vec<&str> = headers
        .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    if let Some(k) = offered
        .iter()
        .find_map(|p| p.strip_prefix("openai-insecure-api-key."))
    {
        return Some(k.to_owned());
    }
    offered
        .windows(2)
        .find(|w| w[0].eq_ignore_ascii_case("token"))
        .map(|w| w[1].to_owned())
}

fn bearer(headers: &HeaderMap) -> Result<&str, Cause> {
    let value = headers
        .get(http::header::AUTHORIZATION)
        .ok_or(Cause::NoCredentials)?;
    let value = value.to_str().map_err(|_| Cause::MalformedHeader)?;
    let (scheme, cred) = value.trim().split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") || cred.trim().is_empty() {
        return Err(Cause::MalformedHeader);
    }
    Ok(cred.trim())
}
