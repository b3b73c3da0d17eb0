//! Calls to the general gateway's model providers (the providers file,
//! [`gateway_models::providers`]): a provider's own base URL with that provider's
//! key, or, for one call, the caller's own key (BYOK).
//!
//! The key is held in a [`ProviderKey`], whose `Debug` never shows it, and
//! is added to the request here only; the answer is scrubbed of whichever
//! key was used, like every other upstream answer.

use std::sync::Arc;

use http::{header, HeaderValue};

use super::scrub::Key;
use super::{Call, Mapping, Upstream};
use gateway_base::spec::{Base, Method};

/// A provider key: read from its environment variable once, at start-up,
/// or given by the caller for one request (BYOK). Never logged, never stored.
/// Its bearer header and its scrubber's searcher are built once, with it.
#[derive(Clone)]
pub struct ProviderKey(Arc<Key>, Option<HeaderValue>, bool);

impl std::fmt::Debug for ProviderKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProviderKey(<redacted>)")
    }
}

impl ProviderKey {
    /// The key held by environment variable `name` (`None`: unset or empty).
    pub fn from_env(name: &str) -> Option<ProviderKey> {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| ProviderKey::new(v.trim(), false))
    }

    /// The caller's own key (BYOK), for one call.
    pub fn byok(key: &str) -> ProviderKey {
        ProviderKey::new(key.trim(), true)
    }

    /// The key's scrubber searcher.
    pub(super) fn secret(&self) -> &Arc<Key> {
        &self.0
    }

    fn new(key: &str, callers: bool) -> ProviderKey {
        let bearer = HeaderValue::try_from(format!("Bearer {key}"))
            .ok()
            .map(|mut v| {
                v.set_sensitive(true);
                v
            });
        ProviderKey(Key::new(key), bearer, callers)
    }
}

/// How a provider's key is presented: the form its API takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyForm {
    /// `Authorization: Bearer <key>` (OpenAI-compatible providers).
    Bearer,
    /// `x-api-key: <key>` and `anthropic-version: <version>` (Anthropic).
    XApiKey {
        /// The API version sent in `anthropic-version`.
        version: &'static str,
    },
    /// `x-goog-api-key: <key>` (Google's Gemini API; never `?key=`, so
    /// keys stay out of URLs and logs).
    GoogApiKey,
    /// `xi-api-key: <key>` (ElevenLabs).
    XiApiKey,
    /// `Authorization: Token <key>` (Deepgram).
    Token,
    /// `X-API-Key: <key>` and `Cartesia-Version: <version>` (Cartesia).
    Cartesia {
        /// The API version sent in `Cartesia-Version`.
        version: &'static str,
    },
}

impl Upstream {
    /// A call to `base_url` + `path` presenting `key` as a bearer token
    /// (OpenAI-compatible providers).
    pub fn llm_call(&self, method: Method, base_url: &str, path: &str, key: &ProviderKey) -> Call {
        self.llm_call_as(method, base_url, path, key, KeyForm::Bearer)
    }

    /// A call to `base_url` + `path` presenting `key` in `form`.
    pub fn llm_call_as(
        &self,
        method: Method,
        base_url: &str,
        path: &str,
        key: &ProviderKey,
        form: KeyForm,
    ) -> Call {
        let url = format!("{}{}", base_url.trim_end_matches('/'), path);
        let mapping = Mapping {
            base: Base::Llm,
            timeout: self.timeout,
            key: Some(key.0.clone()),
            callers_key: key.2,
        };
        let ((name, value), version) = key_headers(key, form);
        let call = Call::new(self, method.to_http(), url, name, value, mapping);
        match version {
            Some((name, value)) => call.with_header(name, value),
            None => call,
        }
    }
}

/// The headers presenting `key` in `form`: the credential, and the API
/// version header a form carries with it. The one maker of a provider
/// key's headers (HTTP calls and WebSockets, [`super::socket`]).
pub(super) fn key_headers(key: &ProviderKey, form: KeyForm) -> (Header, Option<Header>) {
    // A key no header can carry is refused before the call (the BYOK
    // 400 of `modes`); an empty value then fails as a 401 upstream.
    let raw = || {
        HeaderValue::from_str(key.0.as_str())
            .map(|mut v| {
                v.set_sensitive(true);
                v
            })
            .unwrap_or_else(|_| HeaderValue::from_static(""))
    };
    let credential = match form {
        KeyForm::Bearer => (
            header::AUTHORIZATION,
            key.1
                .clone()
                .unwrap_or_else(|| HeaderValue::from_static("")),
        ),
        KeyForm::XApiKey { .. } => (header::HeaderName::from_static("x-api-key"), raw()),
        KeyForm::GoogApiKey => (header::HeaderName::from_static("x-goog-api-key"), raw()),
        KeyForm::XiApiKey => (header::HeaderName::from_static("xi-api-key"), raw()),
        KeyForm::Cartesia { .. } => (header::HeaderName::from_static("x-api-key"), raw()),
        KeyForm::Token => (
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Token {}", key.0.as_str()))
                .map(|mut v| {
                    v.set_sensitive(true);
                    v
                })
                .unwrap_or_else(|_| HeaderValue::from_static("")),
        ),
    };
    let version = match form {
        KeyForm::XApiKey { version } => Some((
            header::HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(version),
        )),
        KeyForm::Cartesia { version } => Some((
            header::HeaderName::from_static("cartesia-version"),
            HeaderValue::from_static(version),
        )),
        _ => None,
    };
    (credential, version)
}

/// A header's name and value.
pub(super) type Header = (header::HeaderName, HeaderValue);
