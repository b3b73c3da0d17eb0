//! Stripe, the payment processor credits are bought through (adapters
//! floor): its configuration, a typed client of the two calls the gateway
//! makes, and the verification of its webhook signatures.
//!
//! * **Calls** ([`Stripe`]): `POST /v1/checkout/sessions` (form-encoded with
//!   Stripe's bracket keys, `Idempotency-Key` header) and
//!   `GET /v1/checkout/sessions/{id}`, with the secret key as bearer, over
//!   the `reqwest` client the gateway already builds on (rustls, no proxy,
//!   no redirects). Each call is bounded by `GATEWAY_UPSTREAM_TIMEOUT_MS`,
//!   at most [`MAX_TIMEOUT`]. A transport failure or time-out is
//!   [`StripeError::Unreachable`]; an answer in Stripe's error shape
//!   (`{"error": {"type", "message", ...}}`) or any other non-2xx is
//!   [`StripeError::Refused`].
//! * **Why not a Stripe crate**: `async-stripe` (1.0, with only the
//!   `checkout_session` feature of `async-stripe-checkout`) was measured
//!   against this client (docs/credits.md, "Buying credits"): it adds dozens of
//!   crates and minutes of cold build for two calls whose shapes fit in
//!   this file.
//! * **Signatures** ([`verify_signature`]): `Stripe-Signature:
//!   t=<unix>,v1=<hex>[,v1=<hex>...]`, each `v1` an HMAC-SHA256 of
//!   `"{t}.{raw body}"` keyed by `STRIPE_WEBHOOK_SECRET`, compared in
//!   constant time; `t` must be within [`TOLERANCE_SECS`] of now.
//! * **Secrets**: the secret key is sent only in the `Authorization`
//!   header; it never appears in an error, a log line or `Debug` output
//!   (errors carry Stripe's message with the key scrubbed, should Stripe
//!   echo it).

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::Sha256;

/// Stripe's secret API key (`sk_live_...` / `sk_test_...`). Unset: the
/// payment routes answer 503.
pub const STRIPE_SECRET_KEY: &str = "STRIPE_SECRET_KEY";
/// The signing secret of the webhook endpoint (`whsec_...`).
pub const STRIPE_WEBHOOK_SECRET: &str = "STRIPE_WEBHOOK_SECRET";
/// Stripe's API base URL. Default [`DEFAULT_API_BASE`].
pub const STRIPE_API_BASE: &str = "STRIPE_API_BASE";
/// Stripe's API.
pub const DEFAULT_API_BASE: &str = "https://api.stripe.com";
/// The signature header of Stripe's webhooks.
pub const SIGNATURE_HEADER: &str = "stripe-signature";
/// How far a webhook's signed timestamp may be from now (Stripe's default).
pub const TOLERANCE_SECS: i64 = 300;
/// The longest a call to Stripe may take (`GATEWAY_UPSTREAM_TIMEOUT_MS`
/// when shorter).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read from Stripe.
const MAX_ANSWER: usize = 256 << 10;

/// Stripe's part of the configuration.
#[derive(Clone, Default)]
pub struct StripeConfig {
    /// `STRIPE_SECRET_KEY`; `None`: payments are not configured.
    pub secret_key: Option<String>,
    /// `STRIPE_WEBHOOK_SECRET`; `None`: no webhook can be verified.
    pub webhook_secret: Option<String>,
    /// `STRIPE_API_BASE`, without a trailing slash; `None`: [`DEFAULT_API_BASE`].
    pub api_base: Option<String>,
}

impl std::fmt::Debug for StripeConfig {
    // Hand-written so that neither secret reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = |o: &Option<String>| o.as_ref().map(|_| "<set>");
        f.debug_struct("StripeConfig")
            .field("secret_key", &set(&self.secret_key))
            .field("webhook_secret", &set(&self.webhook_secret))
            .field("api_base", &self.api_base)
            .finish()
    }
}

impl StripeConfig {
    /// Reads the three variables through `get`; the error names each bad one.
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<StripeConfig, Vec<(&'static str, String)>> {
        let nonempty = |name| get(name).filter(|v: &String| !v.trim().is_empty());
        let mut bad = Vec::new();
        let api_base = nonempty(STRIPE_API_BASE).and_then(|v| {
            let v = v.trim().trim_end_matches('/').to_owned();
            match reqwest::Url::parse(&v) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => Some(v),
                _ => {
                    bad.push((STRIPE_API_BASE, format!("{v:?} is not an http(s) URL")));
                    None
                }
            }
        });
        let c = StripeConfig {
            secret_key: nonempty(STRIPE_SECRET_KEY),
            webhook_secret: nonempty(STRIPE_WEBHOOK_SECRET),
            api_base,
        };
        if bad.is_empty() {
            Ok(c)
        } else {
            Err(bad)
        }
    }

    /// The API base in force.
    pub fn base(&self) -> &str {
        self.api_base.as_deref().unwrap_or(DEFAULT_API_BASE)
    }
}

/// Why a call to Stripe failed.
#[derive(Debug, thiserror::Error)]
pub enum StripeError {
    /// No answer: connection refused, reset, TLS, or the time-out.
    #[error("Stripe unreachable: {0}")]
    Unreachable(String),
    /// Stripe answered with an error (its status, type and message).
    #[error("Stripe refused ({status}, {kind}): {message}")]
    Refused {
        status: u16,
        kind: String,
        message: String,
    },
}

/// A Checkout Session as Stripe answers it (the fields the gateway reads).
#[derive(Debug, Clone, Deserialize)]
pub struct Session {
    pub id: String,
    /// The page the buyer pays on (absent once the session is complete).
    #[serde(default)]
    pub url: Option<String>,
    /// Unix time the session expires at.
    #[serde(default)]
    pub expires_at: Option<i64>,
    /// `paid`, `unpaid` or `no_payment_required`.
    #[serde(default)]
    pub payment_status: Option<String>,
    /// `open`, `complete` or `expired`.
    #[serde(default)]
    pub status: Option<String>,
    /// In the currency's smallest unit (cents).
    #[serde(default)]
    pub amount_total: Option<i64>,
    #[serde(default)]
    pub currency: Option<String>,
    #[serde(default)]
    pub client_reference_id: Option<String>,
}

/// What a purchase asks Stripe for: one line item in USD cents.
#[derive(Debug, Clone)]
pub struct CheckoutRequest<'a> {
    pub unit_amount_cents: i64,
    pub product_name: &'a str,
    pub success_url: &'a str,
    pub cancel_url: &'a str,
    pub user_id: i64,
    /// The amount as the gateway records it (`"25.00"`), for `metadata`.
    pub amount_usd: &'a str,
}

impl CheckoutRequest<'_> {
    /// The form fields, in Stripe's bracket notation.
    pub fn form(&self) -> String {
        let user = self.user_id.to_string();
        let cents = self.unit_amount_cents.to_string();
        form_urlencoded::Serializer::new(String::new())
            .append_pair("mode", "payment")
            .append_pair("line_items[0][price_data][currency]", "usd")
            .append_pair("line_items[0][price_data][unit_amount]", &cents)
            .append_pair(
                "line_items[0][price_data][product_data][name]",
                self.product_name,
            )
            .append_pair("line_items[0][quantity]", "1")
            .append_pair("success_url", self.success_url)
            .append_pair("cancel_url", self.cancel_url)
            .append_pair("client_reference_id", &user)
            .append_pair("metadata[user_id]", &user)
            .append_pair("metadata[amount_usd]", self.amount_usd)
            .finish()
    }
}

/// The typed client of Stripe's two calls (see the module docs).
pub struct Stripe {
    config: StripeConfig,
    client: reqwest::Client,
}

impl Stripe {
    /// A client of `config`, each call bounded by `timeout` (at most [`MAX_TIMEOUT`]).
    pub fn new(config: StripeConfig, timeout: Duration) -> Stripe {
        let timeout = timeout.min(MAX_TIMEOUT);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .tcp_nodelay(true)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("building the Stripe HTTP client");
        Stripe { config, client }
    }

    /// The configuration (the webhook secret is read from it).
    pub fn config(&self) -> &StripeConfig {
        &self.config
    }

    /// Whether `STRIPE_SECRET_KEY` is set.
    pub fn configured(&self) -> bool {
        self.config.secret_key.is_some()
    }

    /// `POST /v1/checkout/sessions`, at most once per `idempotency_key`.
    pub async fn create_session(
        &self,
        req: &CheckoutRequest<'_>,
        idempotency_key: &str,
    ) -> Result<Session, StripeError> {
        let call = self
            .client
            .post(format!("{}/v1/checkout/sessions", self.config.base()))
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header("Idempotency-Key", idempotency_key)
            .body(req.form());
        self.send(call).await
    }

    /// `GET /v1/checkout/sessions/{id}`.
    pub async fn retrieve_session(&self, id: &str) -> Result<Session, StripeError> {
        // Session ids are `cs_...`: anything else is encoded, never a path.
        const ID: &percent_encoding::AsciiSet =
            &percent_encoding::NON_ALPHANUMERIC.remove(b'_').remove(b'-');
        let id: String = percent_encoding::utf8_percent_encode(id, ID).collect();
        let call = self
            .client
            .get(format!("{}/v1/checkout/sessions/{id}", self.config.base()));
        self.send(call).await
    }

    async fn send(&self, call: reqwest::RequestBuilder) -> Result<Session, StripeError> {
        let key = self.config.secret_key.as_deref().unwrap_or_default();
        let unreachable =
            |e: reqwest::Error| StripeError::Unreachable(self.scrub(&e.without_url().to_string()));
        let mut resp = call.bearer_auth(key).send().await.map_err(unreachable)?;
        let status = resp.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(unreachable)? {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(self.refused(status, "answer_too_large", "answer over 256 KiB"));
            }
            body.extend_from_slice(&chunk);
        }
        let value: Option<Value> = serde_json::from_slice(&body).ok();
        if !(200..300).contains(&status) {
            let error = value.as_ref().and_then(|v| v.get("error"));
            let text = |k: &str| error.and_then(|e| e.get(k)).and_then(Value::as_str);
            return Err(self.refused(
                status,
                text("type").unwrap_or("http_error"),
                text("message").unwrap_or("no message"),
            ));
        }
        value
            .and_then(|v| serde_json::from_value::<Session>(v).ok())
            .ok_or_else(|| self.refused(status, "malformed_answer", "not a Checkout Session"))
    }

    fn refused(&self, status: u16, kind: &str, message: &str) -> StripeError {
        StripeError::Refused {
            status,
            kind: self.scrub(kind),
            message: self.scrub(message),
        }
    }

    /// `text` with the secret key (should it be echoed) replaced.
    fn scrub(&self, text: &str) -> String {
        match self.config.secret_key.as_deref() {
            Some(key) if !key.is_empty() => text.replace(key, "sk_***"),
            _ => text.to_owned(),
        }
    }
}

/// Checks a `Stripe-Signature` header against the raw `body` (see the
/// module docs); `now` is the current unix time. The error says why, for
/// the 400 the webhook answers.
pub fn verify_signature(
    secret: &str,
    header: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), &'static str> {
    let header = header.ok_or("missing Stripe-Signature header")?;
    let mut t: Option<i64> = None;
    let mut v1: Vec<Vec<u8>> = Vec::new();
    for part in header.split(',') {
        let Some((k, v)) = part.trim().split_once('=') else {
            continue;
        };
        match k {
            "t" => {
                t = Some(
                    v.parse()
                        .map_err(|_| "malformed Stripe-Signature timestamp")?,
                )
            }
            "v1" => v1.extend(hex::decode(v).ok().filter(|s| s.len() == 32)),
            _ => {}
        }
    }
    let t = t.ok_or("malformed Stripe-Signature: no timestamp")?;
    if v1.is_empty() {
        return Err("malformed Stripe-Signature: no v1 signature");
    }
    if (now - t).abs() > TOLERANCE_SECS {
        return Err("Stripe-Signature timestamp outside the tolerance of 300 seconds");
    }
    let mac = {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
        mac.update(t.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    };
    if v1.iter().any(|sig| mac.clone().verify_slice(sig).is_ok()) {
        Ok(())
    } else {
        Err("no Stripe-Signature v1 signature matches")
    }
}

/// `t=<now>,v1=<hex>`: what Stripe sends (the simulator and tests sign this way).
pub fn sign(secret: &str, body: &[u8], t: i64) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// A verified event, as far as the gateway reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub data: EventData,
}

/// An event's `data`.
#[derive(Debug, Clone, Deserialize)]
pub struct EventData {
    pub object: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_within_the_tolerance_only() {
        let body = br#"{"id":"evt_1"}"#;
        let h = sign("whsec_x", body, 1_000_000);
        assert_eq!(
            verify_signature("whsec_x", Some(&h), body, 1_000_100),
            Ok(())
        );
        assert!(verify_signature("whsec_x", Some(&h), body, 1_000_301).is_err());
        assert!(verify_signature("whsec_y", Some(&h), body, 1_000_000).is_err());
        assert!(verify_signature("whsec_x", Some(&h), b"{}", 1_000_000).is_err());
        assert!(verify_signature("whsec_x", None, body, 1_000_000).is_err());
        // Several v1 (a secret being rolled): any one matching is enough.
        let other = sign("whsec_old", body, 1_000_000);
        let both = format!("{},{}", other, h.split(',').nth(1).unwrap());
        assert_eq!(
            verify_signature("whsec_x", Some(&both), body, 1_000_000),
            Ok(())
        );
    }

    #[test]
    fn the_form_uses_bracket_keys() {
        let f = CheckoutRequest {
            unit_amount_cents: 2500,
            product_name: "Gateway credit",
            success_url: "https://a.example/ok",
            cancel_url: "https://a.example/no",
            user_id: 7,
            amount_usd: "25.00",
        }
        .form();
        let pairs: Vec<(String, String)> =
            form_urlencoded::parse(f.as_bytes()).into_owned().collect();
        assert!(pairs.contains(&(
            "line_items[0][price_data][unit_amount]".into(),
            "2500".into()
        )));
        assert!(pairs.contains(&("metadata[user_id]".into(), "7".into())));
        assert!(pairs.contains(&("client_reference_id".into(), "7".into())));
    }
}
