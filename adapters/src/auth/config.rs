//! Configuration of accounts and tokens: environment names, defaults, and
//! the JWT secret kept in the data directory when none is configured.

use std::path::Path;
use std::time::Duration;

/// HS256 secret of access and refresh tokens, at least [`MIN_JWT_SECRET_LEN`]
/// bytes. Unset: generated once and kept in `<data dir>/jwt.key`.
pub const GATEWAY_JWT_SECRET: &str = "GATEWAY_JWT_SECRET";
/// Shortest `GATEWAY_JWT_SECRET` accepted, in bytes (HS256's key size).
pub const MIN_JWT_SECRET_LEN: usize = 32;
/// How many passwords are hashed or checked at once (argon2 takes 19 MiB
/// each). Default: the number of CPUs, at most 4.
pub const GATEWAY_PASSWORD_HASHERS: &str = "GATEWAY_PASSWORD_HASHERS";
/// How long a request waits for a free hasher before it is answered 429, in
/// milliseconds. Default 2000.
pub const GATEWAY_PASSWORD_HASH_WAIT_MS: &str = "GATEWAY_PASSWORD_HASH_WAIT_MS";
/// The environment tokens are issued for (`env` claim). Default `production`.
pub const GATEWAY_ENV: &str = "GATEWAY_ENV";
/// `true`: a new account cannot log in before its e-mail address is confirmed.
pub const GATEWAY_REQUIRE_EMAIL_CONFIRMATION: &str = "GATEWAY_REQUIRE_EMAIL_CONFIRMATION";
/// The admin key accepted in `X-Admin-Key` on admin routes. Unset: none is.
pub const GATEWAY_ADMIN_KEY: &str = "GATEWAY_ADMIN_KEY";
/// `smtp://` or `smtps://` URL of the mail server; unset: `.eml` files in
/// `<data dir>/outbox/`.
pub const GATEWAY_SMTP_URL: &str = "GATEWAY_SMTP_URL";
/// The sender address of the gateway's mail. Default `gateway@localhost`.
pub const GATEWAY_MAIL_FROM: &str = "GATEWAY_MAIL_FROM";
/// Lifetime of an access token in seconds. Default 900 (15 minutes).
pub const GATEWAY_ACCESS_TOKEN_TTL_SECS: &str = "GATEWAY_ACCESS_TOKEN_TTL_SECS";
/// Lifetime of a refresh token in seconds. Default 2,592,000 (30 days).
pub const GATEWAY_REFRESH_TOKEN_TTL_SECS: &str = "GATEWAY_REFRESH_TOKEN_TTL_SECS";

/// File under the data directory holding the generated JWT secret.
pub const JWT_KEY_FILE: &str = "jwt.key";

/// Accounts and tokens.
#[derive(Clone)]
pub struct AccountConfig {
    /// `None`: read or created in the data directory at start.
    pub jwt_secret: Option<Vec<u8>>,
    pub env: String,
    pub require_email_confirmation: bool,
    pub admin_key: Option<String>,
    pub smtp_url: Option<String>,
    pub mail_from: String,
    pub access_ttl: Duration,
    pub refresh_ttl: Duration,
    /// Passwords hashed or checked at once ([`GATEWAY_PASSWORD_HASHERS`]).
    pub password_hashers: usize,
    /// Longest wait for a hasher ([`GATEWAY_PASSWORD_HASH_WAIT_MS`]).
    pub password_hash_wait: Duration,
}

impl std::fmt::Debug for AccountConfig {
    // Hand-written so that no secret reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountConfig")
            .field("jwt_secret", &self.jwt_secret.as_ref().map(|_| "<set>"))
            .field("env", &self.env)
            .field(
                "require_email_confirmation",
                &self.require_email_confirmation,
            )
            .field("admin_key", &self.admin_key.as_ref().map(|_| "<set>"))
            .field("smtp_url", &self.smtp_url.as_ref().map(|_| "<set>"))
            .field("mail_from", &self.mail_from)
            .field("access_ttl", &self.access_ttl)
            .field("refresh_ttl", &self.refresh_ttl)
            .field("password_hashers", &self.password_hashers)
            .field("password_hash_wait", &self.password_hash_wait)
            .finish()
    }
}

impl Default for AccountConfig {
    fn default() -> Self {
        AccountConfig {
            jwt_secret: None,
            env: "production".to_owned(),
            require_email_confirmation: false,
            admin_key: None,
            smtp_url: None,
            mail_from: "gateway@localhost".to_owned(),
            access_ttl: Duration::from_secs(15 * 60),
            refresh_ttl: Duration::from_secs(30 * 24 * 3600),
            password_hashers: std::thread::available_parallelism()
                .map_or(2, usize::from)
                .clamp(1, 4),
            password_hash_wait: Duration::from_secs(2),
        }
    }
}

impl AccountConfig {
    /// Reads the variables through `get` (empty values count as unset); the
    /// error names the variable. Every bad variable is reported, in the order
    /// below, so that one start names all that need fixing.
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<AccountConfig, Vec<(&'static str, String)>> {
        let mut vars = Vars {
            get,
            bad: Vec::new(),
        };
        let d = AccountConfig::default();
        let c = AccountConfig {
            jwt_secret: vars.jwt_secret(),
            env: vars.text(GATEWAY_ENV).unwrap_or(d.env),
            require_email_confirmation: vars
                .parsed(
                    GATEWAY_REQUIRE_EMAIL_CONFIRMATION,
                    "true or false",
                    parse_bool,
                )
                .unwrap_or(d.require_email_confirmation),
            admin_key: vars.text(GATEWAY_ADMIN_KEY),
            smtp_url: vars.text(GATEWAY_SMTP_URL),
            mail_from: vars.text(GATEWAY_MAIL_FROM).unwrap_or(d.mail_from),
            access_ttl: vars
                .parsed(GATEWAY_ACCESS_TOKEN_TTL_SECS, ABOVE_0, positive_secs)
                .unwrap_or(d.access_ttl),
            refresh_ttl: vars
                .parsed(GATEWAY_REFRESH_TOKEN_TTL_SECS, ABOVE_0, positive_secs)
                .unwrap_or(d.refresh_ttl),
            password_hashers: vars
                .parsed(
                    GATEWAY_PASSWORD_HASHERS,
                    "a whole number from 1 to 256",
                    |v| v.parse().ok().filter(|n| (1..=256).contains(n)),
                )
                .unwrap_or(d.password_hashers),
            password_hash_wait: vars
                .parsed(GATEWAY_PASSWORD_HASH_WAIT_MS, "a whole number", |v| {
                    v.parse().ok().map(Duration::from_millis)
                })
                .unwrap_or(d.password_hash_wait),
        };
        if vars.bad.is_empty() {
            Ok(c)
        } else {
            Err(vars.bad)
        }
    }
}

/// What a lifetime must be.
const ABOVE_0: &str = "a whole number above 0";

/// The environment as [`AccountConfig::from_lookup`] reads it: trimmed
/// values, empty ones unset, and the bad ones collected rather than returned
/// at the first, so that the caller can name them all.
struct Vars<G> {
    get: G,
    bad: Vec<(&'static str, String)>,
}

impl<G: Fn(&str) -> Option<String>> Vars<G> {
    /// The trimmed value of `name`; `None` when unset or empty.
    fn text(&self, name: &str) -> Option<String> {
        (self.get)(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// The value of `name` read by `parse`; a value it refuses is noted as
    /// "is not `what`" and reads as unset, so the default stays.
    fn parsed<T>(
        &mut self,
        name: &'static str,
        what: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Option<T> {
        let v = self.text(name)?;
        let parsed = parse(&v);
        if parsed.is_none() {
            self.bad.push((name, format!("{v:?} is not {what}")));
        }
        parsed
    }

    /// The configured JWT secret; one shorter than HS256's key is noted (and
    /// still returned: the error stops the start anyway).
    fn jwt_secret(&mut self) -> Option<Vec<u8>> {
        let s = self.text(GATEWAY_JWT_SECRET)?.into_bytes();
        if s.len() < MIN_JWT_SECRET_LEN {
            self.bad.push((
                GATEWAY_JWT_SECRET,
                format!(
                    "{} bytes is too short: at least {MIN_JWT_SECRET_LEN} (e.g. `openssl rand -hex 32`)",
                    s.len()
                ),
            ));
        }
        Some(s)
    }
}

/// The spellings of a yes or a no that operators write.
fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Seconds above zero: a lifetime of 0 would issue tokens already expired.
fn positive_secs(v: &str) -> Option<Duration> {
    v.parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .map(Duration::from_secs)
}

/// Reads the JWT secret file (hex), creating it with 32 random bytes (mode
/// 0600) when it does not exist yet.
pub fn load_or_create_secret(path: &Path) -> Result<Vec<u8>, String> {
    gateway_base::secret_file::load_or_create(path, 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(vars: &[(&str, &str)]) -> Result<AccountConfig, Vec<(&'static str, String)>> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        AccountConfig::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_overrides_and_errors_naming_the_variable() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.env, "production");
        assert_eq!(c.access_ttl, Duration::from_secs(900));
        assert_eq!(c.refresh_ttl, Duration::from_secs(30 * 24 * 3600));
        assert!(!c.require_email_confirmation && c.jwt_secret.is_none() && c.admin_key.is_none());
        let c = parse(&[
            (GATEWAY_JWT_SECRET, "s3cret-s3cret-s3cret-s3cret-s3cret"),
            (GATEWAY_ENV, "staging"),
            (GATEWAY_REQUIRE_EMAIL_CONFIRMATION, "true"),
            (GATEWAY_ADMIN_KEY, "adm"),
            (GATEWAY_ACCESS_TOKEN_TTL_SECS, "60"),
            (GATEWAY_REFRESH_TOKEN_TTL_SECS, "3600"),
        ])
        .unwrap();
        assert_eq!(
            c.jwt_secret.as_deref(),
            Some(&b"s3cret-s3cret-s3cret-s3cret-s3cret"[..])
        );
        assert_eq!(
            (c.env.as_str(), c.require_email_confirmation),
            ("staging", true)
        );
        assert_eq!(
            (c.access_ttl.as_secs(), c.refresh_ttl.as_secs()),
            (60, 3600)
        );
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("s3cret") && !dbg.contains("adm\""), "{dbg}");
        assert_eq!(
            parse(&[(GATEWAY_ACCESS_TOKEN_TTL_SECS, "0")]).unwrap_err()[0].0,
            GATEWAY_ACCESS_TOKEN_TTL_SECS
        );
        let short = parse(&[(GATEWAY_JWT_SECRET, "x")]).unwrap_err();
        assert_eq!(short[0].0, GATEWAY_JWT_SECRET);
        assert!(short[0].1.contains("at least 32"), "{short:?}");
        assert_eq!(
            parse(&[(GATEWAY_PASSWORD_HASHERS, "0")]).unwrap_err()[0].0,
            GATEWAY_PASSWORD_HASHERS
        );
        assert_eq!(
            parse(&[(GATEWAY_REQUIRE_EMAIL_CONFIRMATION, "maybe")]).unwrap_err()[0].0,
            GATEWAY_REQUIRE_EMAIL_CONFIRMATION
        );
        let both = parse(&[
            (GATEWAY_REQUIRE_EMAIL_CONFIRMATION, "maybe"),
            (GATEWAY_REFRESH_TOKEN_TTL_SECS, "soon"),
        ])
        .unwrap_err();
        let names: Vec<&str> = both.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                GATEWAY_REQUIRE_EMAIL_CONFIRMATION,
                GATEWAY_REFRESH_TOKEN_TTL_SECS
            ]
        );
    }

    #[test]
    fn the_generated_secret_is_kept() {
        let dir = std::env::temp_dir().join(format!("jwt-key-{}", rand::random::<u64>()));
        let path = dir.join(JWT_KEY_FILE);
        let a = load_or_create_secret(&path).unwrap();
        let b = load_or_create_secret(&path).unwrap();
        assert_eq!((a.len(), &a), (32, &b));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
