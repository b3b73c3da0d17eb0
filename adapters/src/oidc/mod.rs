//! Sign-in with OpenID Connect: the client of the providers of
//! `GATEWAY_OAUTH_PROVIDERS` ([`config`]), on the well-kept `openidconnect`
//! crate (discovery, PKCE S256, the code exchange, and the ID token's
//! checks: signature by the provider's JWKS, issuer, audience, expiry,
//! nonce). An adapter: it talks to the providers and to nothing else of the
//! gateway; what a sign-in does to accounts is `modes::account`'s and
//! `store::accounts`'s.
//!
//! *Discovery is lazy*: a provider's metadata and keys are fetched on its
//! first use, cached for [`METADATA_TTL`], and fetched again when a sign-in
//! finds them stale or an ID token names a key they lack (the provider
//! rotated its keys). A provider that is down therefore never stops the
//! gateway from starting; its routes answer 503 with `Retry-After` until it
//! answers.
//!
//! *HTTP*: the crate is handed [`Http`], a client over the gateway's
//! `reqwest` (rustls, ring), which follows no redirects and reads each
//! answer bounded ([`MAX_ANSWER`]); so `openidconnect` is built without an
//! HTTP client of its own and no native TLS enters the build.

pub mod config;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, HttpRequest,
    HttpResponse, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    SignatureVerificationError, TokenResponse,
};

pub use config::{ProviderConfig, GATEWAY_OAUTH_PROVIDERS};

/// How long discovered metadata and keys are used before they are fetched again.
pub const METADATA_TTL: Duration = Duration::from_secs(3600);
/// The path under which provider `id`'s callback is `{id}/callback` (the
/// `oauth_callback` row of `endpoints.toml`): with the public URL before it,
/// the `redirect_uri` the provider sends the browser back to.
pub const CALLBACK_PREFIX: &str = "/api/v1/auth/oauth/";
/// The largest answer read from a provider (discovery, keys, tokens).
pub const MAX_ANSWER: usize = 1 << 20;
/// Time allowed for one exchange with a provider.
const TIMEOUT: Duration = Duration::from_secs(15);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a sign-in could not be done with the provider.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// No provider has this id.
    #[error("unknown sign-in provider")]
    UnknownProvider,
    /// The provider could not be reached (connection, time-out).
    #[error("the sign-in provider {0} could not be reached")]
    Unreachable(String),
    /// The provider answered, but not as it must (an error answer, a refused
    /// code, metadata or keys that do not parse).
    #[error("the sign-in provider {provider} failed: {why}")]
    Provider { provider: String, why: String },
    /// The ID token failed a check (signature, issuer, audience, expiry, nonce).
    #[error("the sign-in provider {provider}'s ID token is invalid: {why}")]
    InvalidToken { provider: String, why: String },
}

/// Where a sign-in starts: the provider's authorization URL, and what the
/// callback will need (kept server-side, never sent to the browser but
/// `state` inside the URL).
pub struct Authorization {
    pub url: String,
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
}

/// Who signed in, from a checked ID token.
#[derive(Debug, Clone)]
pub struct Identity {
    pub subject: String,
    pub email: Option<String>,
    /// The provider says the address is the user's (`email_verified`).
    pub email_verified: bool,
    pub preferred_username: Option<String>,
}

/// The HTTP layer's error, handed through `openidconnect`'s errors.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    Transport(#[from] reqwest::Error),
    #[error("the answer is larger than {MAX_ANSWER} bytes")]
    TooLarge,
    #[error("{0}")]
    Http(#[from] openidconnect::http::Error),
}

struct Provider {
    config: ProviderConfig,
    /// Discovered metadata (with the keys) and when it was fetched.
    metadata: tokio::sync::Mutex<Option<(Arc<CoreProviderMetadata>, Instant)>>,
}

/// The HTTP client handed to `openidconnect`: [`Http::call`] over the
/// gateway's `reqwest`, no redirects, answers read bounded.
#[derive(Clone)]
struct Http(reqwest::Client);

impl<'c> openidconnect::AsyncHttpClient<'c> for Http {
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + Sync + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(self.exchange(request))
    }
}

impl Http {
    /// One HTTP exchange: no redirects, the answer read up to
    /// [`MAX_ANSWER`] bytes.
    async fn exchange(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let req = reqwest::Request::try_from(req)?;
        let mut resp = self.0.execute(req).await?;
        let mut out = openidconnect::http::Response::builder().status(resp.status());
        for (name, value) in resp.headers() {
            out = out.header(name, value);
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await? {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(HttpError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(out.body(body)?)
    }
}

/// The sign-in providers (cheap to clone).
#[derive(Clone)]
pub struct Oidc {
    providers: Arc<HashMap<String, Provider>>,
    http: Http,
    /// `{public URL}/api/v1/auth/oauth/`: the callback is this + `{id}/callback`.
    callback_base: String,
}

impl Oidc {
    /// The providers of the configuration; callbacks under `callback_base`
    /// (`{public URL}/api/v1/auth/oauth/`). Nothing is fetched here.
    pub fn new(providers: &[ProviderConfig], callback_base: String) -> Oidc {
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("building the sign-in HTTP client");
        let providers = providers
            .iter()
            .map(|c| {
                let p = Provider {
                    config: c.clone(),
                    metadata: tokio::sync::Mutex::new(None),
                };
                (c.id.clone(), p)
            })
            .collect();
        Oidc {
            providers: Arc::new(providers),
            http: Http(http),
            callback_base,
        }
    }

    /// Whether a provider has this id.
    pub fn knows(&self, id: &str) -> bool {
        self.providers.contains_key(id)
    }

    /// The callback URL of provider `id` (its `redirect_uri`).
    pub fn redirect_uri(&self, id: &str) -> String {
        format!("{}{id}/callback", self.callback_base)
    }

    /// The authorization request of a new sign-in with provider `id`:
    /// code flow, PKCE S256, a fresh `state` and `nonce`.
    pub async fn authorize(&self, id: &str) -> Result<Authorization, OidcError> {
        let p = self.provider(id)?;
        let metadata = self.metadata(p, false).await?;
        let client = self.client(p, &metadata)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client.authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        );
        // `openid` is always asked by the crate.
        for s in p.config.scopes.iter().filter(|s| *s != "openid") {
            request = request.add_scope(Scope::new(s.clone()));
        }
        let (url, state, nonce) = request.set_pkce_challenge(challenge).url();
        Ok(Authorization {
            url: url.to_string(),
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
        })
    }

    /// Exchanges `code` (with the client secret and the PKCE verifier) and
    /// checks the ID token against the provider's keys, issuer, this client
    /// as audience, its expiry and `nonce`. Keys that do not know the
    /// token's key are fetched again once.
    pub async fn sign_in(
        &self,
        id: &str,
        code: &str,
        pkce_verifier: &str,
        nonce: &str,
    ) -> Result<Identity, OidcError> {
        let p = self.provider(id)?;
        let metadata = self.metadata(p, false).await?;
        let client = self.client(p, &metadata)?;
        let answer = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| provider(p, format!("no token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_owned()))
            .request_async(&self.http)
            .await
            .map_err(|e| token_error(p, e))?;
        let token = answer
            .id_token()
            .ok_or_else(|| provider(p, "the token answer has no id_token".into()))?;
        let nonce = Nonce::new(nonce.to_owned());
        let claims = match token.claims(&client.id_token_verifier(), &nonce) {
            Err(ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey,
            )) => {
                // Keys rotated since they were fetched: fetch them once more.
                let metadata = self.metadata(p, true).await?;
                let client = self.client(p, &metadata)?;
                let verifier = client.id_token_verifier();
                token.claims(&verifier, &nonce).cloned()
            }
            other => other.cloned(),
        }
        .map_err(|e| OidcError::InvalidToken {
            provider: p.config.id.clone(),
            why: e.to_string(),
        })?;
        Ok(Identity {
            subject: claims.subject().as_str().to_owned(),
            email: claims.email().map(|e| e.as_str().to_owned()),
            email_verified: claims.email_verified().unwrap_or(false),
            preferred_username: claims.preferred_username().map(|u| u.as_str().to_owned()),
        })
    }

    fn provider(&self, id: &str) -> Result<&Provider, OidcError> {
        self.providers.get(id).ok_or(OidcError::UnknownProvider)
    }

    /// The provider's metadata and keys: cached unless stale or `refresh`.
    /// One fetch at a time per provider; a failed fetch caches nothing.
    async fn metadata(
        &self,
        p: &Provider,
        refresh: bool,
    ) -> Result<Arc<CoreProviderMetadata>, OidcError> {
        let mut slot = p.metadata.lock().await;
        if let Some((m, at)) = slot.as_ref() {
            if !refresh && at.elapsed() < METADATA_TTL {
                return Ok(m.clone());
            }
        }
        let issuer = IssuerUrl::new(p.config.issuer.clone())
            .map_err(|e| provider(p, format!("issuer: {e}")))?;
        let m = CoreProviderMetadata::discover_async(issuer, &self.http)
            .await
            .map_err(|e| discovery_error(p, e))?;
        let m = Arc::new(m);
        *slot = Some((m.clone(), Instant::now()));
        Ok(m)
    }

    fn client(
        &self,
        p: &Provider,
        metadata: &CoreProviderMetadata,
    ) -> Result<
        CoreClient<
            openidconnect::EndpointSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointMaybeSet,
            openidconnect::EndpointMaybeSet,
        >,
        OidcError,
    > {
        let redirect = RedirectUrl::new(self.redirect_uri(&p.config.id))
            .map_err(|e| provider(p, format!("redirect URI: {e}")))?;
        Ok(CoreClient::from_provider_metadata(
            metadata.clone(),
            ClientId::new(p.config.client_id.clone()),
            Some(ClientSecret::new(p.config.client_secret.clone())),
        )
        .set_redirect_uri(redirect))
    }
}

fn provider(p: &Provider, why: String) -> OidcError {
    OidcError::Provider {
        provider: p.config.id.clone(),
        why,
    }
}

/// A transport failure that means "not reachable" (connection, time-out).
fn unreachable(p: &Provider, e: &HttpError) -> Option<OidcError> {
    match e {
        HttpError::Transport(t) if t.is_connect() || t.is_timeout() => {
            Some(OidcError::Unreachable(p.config.id.clone()))
        }
        _ => None,
    }
}

fn discovery_error(p: &Provider, e: openidconnect::DiscoveryError<HttpError>) -> OidcError {
    use openidconnect::DiscoveryError as D;
    if let D::Request(h) = &e {
        if let Some(u) = unreachable(p, h) {
            return u;
        }
    }
    let why = match &e {
        D::Response(status, _, msg) => format!("discovery answered {status}: {msg}"),
        D::Request(h) => format!("discovery: {h}"),
        other => format!("discovery: {other}"),
    };
    provider(p, why)
}

fn token_error<T: openidconnect::ErrorResponse + 'static>(
    p: &Provider,
    e: openidconnect::RequestTokenError<HttpError, T>,
) -> OidcError {
    use openidconnect::RequestTokenError as R;
    if let R::Request(h) = &e {
        if let Some(u) = unreachable(p, h) {
            return u;
        }
    }
    let why = match &e {
        R::ServerResponse(r) => format!("the token endpoint refused the code: {r}"),
        R::Request(h) => format!("token endpoint: {h}"),
        other => format!("token endpoint: {other}"),
    };
    provider(p, why)
}
