//! The sign-in providers file (`GATEWAY_OAUTH_PROVIDERS`): a TOML file of
//! `[[provider]]` tables, read whole when the configuration is read, so a
//! mistake stops start-up with the file and the key at fault.
//!
//! ```toml
//! [[provider]]
//! id = "google"                            # the {provider} of the routes: a-z, 0-9, '-', '_'
//! issuer = "https://accounts.google.com"   # discovery: {issuer}/.well-known/openid-configuration
//! client_id = "1234.apps.googleusercontent.com"
//! client_secret_env = "GOOGLE_CLIENT_SECRET"  # the NAME of the variable holding the secret
//! scopes = ["openid", "email", "profile"]  # optional; this is the default ("openid" is always asked)
//! ```

use serde::Deserialize;

/// The path of the sign-in providers file. Default: unset (no providers;
/// the sign-in routes answer 404).
pub const GATEWAY_OAUTH_PROVIDERS: &str = "GATEWAY_OAUTH_PROVIDERS";

/// Scopes asked when a provider names none.
pub const DEFAULT_SCOPES: &[&str] = &["openid", "email", "profile"];

/// One sign-in provider, its client secret read from its variable.
#[derive(Clone)]
pub struct ProviderConfig {
    /// The `{provider}` path segment.
    pub id: String,
    /// The issuer URL, exactly as the provider's ID tokens name it.
    pub issuer: String,
    pub client_id: String,
    /// Never printed (see the `Debug` below).
    pub client_secret: String,
    /// The variable the secret was read from (for messages).
    pub client_secret_env: String,
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for ProviderConfig {
    // Hand-written so that the client secret never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("id", &self.id)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<set>")
            .field("client_secret_env", &self.client_secret_env)
            .field("scopes", &self.scopes)
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default)]
    provider: Vec<ProviderDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderDoc {
    id: String,
    issuer: String,
    client_id: String,
    client_secret_env: String,
    scopes: Option<Vec<String>>,
}

/// Reads the providers file named by [`GATEWAY_OAUTH_PROVIDERS`] (through
/// `get`, which also gives each provider's secret variable). Unset: no
/// providers. Every mistake is one entry of the error, naming the file and
/// the provider's key.
pub fn from_lookup(
    get: impl Fn(&str) -> Option<String>,
) -> Result<Vec<ProviderConfig>, Vec<(&'static str, String)>> {
    let Some(path) = get(GATEWAY_OAUTH_PROVIDERS) else {
        return Ok(Vec::new());
    };
    let bad = |reason: String| vec![(GATEWAY_OAUTH_PROVIDERS, reason)];
    let text = std::fs::read_to_string(&path).map_err(|e| bad(format!("{path}: {e}")))?;
    parse(&text, &path, get).map_err(|reasons| {
        reasons
            .into_iter()
            .map(|r| (GATEWAY_OAUTH_PROVIDERS, r))
            .collect()
    })
}

/// Parses the text of the providers file `file`; every mistake found.
pub fn parse(
    text: &str,
    file: &str,
    get: impl Fn(&str) -> Option<String>,
) -> Result<Vec<ProviderConfig>, Vec<String>> {
    let doc: FileDoc = toml::from_str(text).map_err(|e| vec![format!("{file}: {e}")])?;
    let mut out: Vec<ProviderConfig> = Vec::new();
    let mut bad = Vec::new();
    for p in doc.provider {
        let at = format!("{file}: provider {:?}", p.id);
        let mut wrong = |key: &str, why: String| bad.push(format!("{at}: {key}: {why}"));
        if p.id.is_empty()
            || !p
                .id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            wrong("id", "must be non-empty: a-z, 0-9, '-' or '_'".into());
        } else if out.iter().any(|x| x.id == p.id) {
            wrong("id", "a provider with this id comes earlier".into());
        }
        match openidconnect::url::Url::parse(&p.issuer) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.query().is_none() => {}
            _ => wrong(
                "issuer",
                format!("{:?} is not an http(s) URL without a query", p.issuer),
            ),
        }
        if p.client_id.trim().is_empty() {
            wrong("client_id", "must not be empty".into());
        }
        let secret = get(&p.client_secret_env).filter(|s| !s.trim().is_empty());
        if secret.is_none() {
            wrong(
                "client_secret_env",
                format!("the variable {:?} is unset or empty", p.client_secret_env),
            );
        }
        let scopes = p
            .scopes
            .unwrap_or_else(|| DEFAULT_SCOPES.iter().map(|s| s.to_string()).collect());
        if let Some(s) = scopes
            .iter()
            .find(|s| s.is_empty() || s.contains(char::is_whitespace))
        {
            wrong("scopes", format!("{s:?} is not one scope"));
        }
        out.push(ProviderConfig {
            id: p.id,
            issuer: p.issuer,
            client_id: p.client_id,
            client_secret: secret.unwrap_or_default(),
            client_secret_env: p.client_secret_env,
            scopes,
        });
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "IDP_SECRET").then(|| "s3cret-value".to_owned())
    }

    #[test]
    fn a_good_file_parses_with_default_scopes_and_a_hidden_secret() {
        let p = parse(
            r#"
            [[provider]]
            id = "idp"
            issuer = "http://127.0.0.1:9000"
            client_id = "gateway"
            client_secret_env = "IDP_SECRET"
            "#,
            "p.toml",
            env,
        )
        .unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].client_secret, "s3cret-value");
        assert_eq!(p[0].scopes, ["openid", "email", "profile"]);
        assert!(!format!("{p:?}").contains("s3cret"));
    }

    #[test]
    fn every_mistake_names_the_file_provider_and_key() {
        let e = parse(
            r#"
            [[provider]]
            id = "Bad Id"
            issuer = "ftp://x"
            client_id = ""
            client_secret_env = "UNSET_VAR"
            scopes = ["openid email"]
            [[provider]]
            id = "ok"
            issuer = "https://idp.example.com"
            client_id = "c"
            client_secret_env = "IDP_SECRET"
            [[provider]]
            id = "ok"
            issuer = "https://idp.example.com"
            client_id = "c"
            client_secret_env = "IDP_SECRET"
            "#,
            "p.toml",
            env,
        )
        .err()
        .unwrap();
        for want in [
            "p.toml: provider \"Bad Id\": id:",
            "p.toml: provider \"Bad Id\": issuer:",
            "p.toml: provider \"Bad Id\": client_id:",
            "p.toml: provider \"Bad Id\": client_secret_env: the variable \"UNSET_VAR\"",
            "p.toml: provider \"Bad Id\": scopes:",
            "p.toml: provider \"ok\": id: a provider with this id comes earlier",
        ] {
            assert!(e.iter().any(|m| m.starts_with(want)), "{want} in {e:#?}");
        }
        assert_eq!(e.len(), 6, "{e:#?}");
        let e = parse("[[provider]]\nid = \"x\"\nnope = 1\n", "p.toml", env)
            .err()
            .unwrap();
        assert!(
            e[0].starts_with("p.toml: ") && e[0].contains("nope"),
            "{e:?}"
        );
    }

    #[test]
    fn unset_is_no_providers_and_a_missing_file_names_the_variable() {
        assert!(from_lookup(|_| None).unwrap().is_empty());
        let e = from_lookup(|n| {
            (n == GATEWAY_OAUTH_PROVIDERS).then(|| "/nonexistent/oauth.toml".to_owned())
        })
        .err()
        .unwrap();
        assert_eq!(e[0].0, GATEWAY_OAUTH_PROVIDERS);
        assert!(e[0].1.starts_with("/nonexistent/oauth.toml: "), "{e:?}");
    }
}
