//! The HTTP client to the upstream providers: the one place a request to a
//! provider is built, sent and read.
//!
//! * [`Upstream::call`] builds a [`Call`] from a row's upstream (base,
//!   method, filled path, query) with the credential in the base's form —
//!   the upstream key is added here and nowhere else.
//! * [`Call::send`] sends it once; a non-success status or a transport
//!   failure becomes the [`ApiError`] of spec §7 ([`errors`]).
//! * The [`Answer`] is read as bounded JSON ([`Answer::json`]), bounded bytes
//!   ([`Answer::bytes`]), or streamed back to the caller ([`Answer::stream`]).
//!
//! Successful answers are scrubbed of the upstream key too, streamed ones
//! chunk by chunk ([`scrub`]): an upstream that echoes the key in a 200
//! answer does not hand it to a caller.
//!
//! This is the single seam where the HTTP client is chosen ([`client`]):
//! hyper-util's pooled client over hyper-rustls for every call but multipart
//! uploads, which go through `reqwest`'s form encoder; both keep a
//! keep-alive pool to every upstream, with `TCP_NODELAY` and the configured
//! time-out (120 s by default), enforced until the answer's body is read.
//! Modes never see them. Every message taken from an upstream answer is
//! scrubbed of the key before it can reach a caller or a log.

pub mod client;
pub mod errors;
mod failed;
pub mod llm;
pub mod mcp;
pub mod scrub;
pub mod socket;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt, Full};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;

use client::{Clients, Failure, UpBody};
use errors::Mapping;
pub use errors::{map_status, provider_name, read_bounded, upstream_message};
pub use failed::{Cause, Failed, FailureKind, Side};
use gateway_base::body::Response;
use gateway_base::errors::ApiError;
use gateway_base::spec::{self, Base, UpstreamAuth};
use scrub::{Key, Scrubbed};

/// Characters kept as they are in a path segment: RFC 3986 unreserved.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Largest JSON answer the gateway reads from an upstream (a synthesis
/// answer carries its audio as base64: minutes of WAV fit). Larger answers
/// are refused with 502 rather than held in memory.
pub const MAX_JSON_ANSWER: usize = 64 << 20;

/// Percent-encodes one path segment.
pub fn encode_segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// The main key's credential headers, one per form, built once.
struct Credential {
    key: Arc<Key>,
    bearer: HeaderValue,
    token: HeaderValue,
    access_token: HeaderValue,
}

impl Credential {
    fn new(key: &str) -> Option<Credential> {
        let sensitive = |s: String| {
            let mut v = HeaderValue::try_from(s).ok()?;
            v.set_sensitive(true);
            Some(v)
        };
        Some(Credential {
            key: Key::new(key),
            bearer: sensitive(format!("Bearer {key}"))?,
            token: sensitive(format!("Token token={key}"))?,
            access_token: sensitive(key.to_owned())?,
        })
    }
}

/// An answer's body as a stream of chunks ([`Answer::byte_stream`]).
pub type ByteStream = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = Result<Bytes, gateway_base::body::BoxError>> + Send>,
>;

/// What the upstream client is built from: the provider's part of the
/// configuration (`crate::config::Config::upstream_settings`).
#[derive(Clone, Copy)]
pub struct Settings<'a> {
    /// The main key (`PROVIDER_API_KEY`); `None`: voice routes answer 503.
    pub api_key: Option<&'a str>,
    /// Main upstream API base URL, without a trailing slash.
    pub base_url: &'a str,
    /// Synthesis cluster base URL, without a trailing slash.
    pub synth_url: &'a str,
    /// Time-out of every upstream call.
    pub timeout: Duration,
}

/// The upstream client.
pub struct Upstream {
    clients: Arc<Clients>,
    main: String,
    synth: String,
    credential: Option<Credential>,
    timeout: Duration,
}

impl Upstream {
    pub fn new(settings: Settings<'_>) -> Upstream {
        let credential = settings.api_key.and_then(|k| {
            let c = Credential::new(k);
            if c.is_none() {
                tracing::error!(
                    "PROVIDER_API_KEY cannot be sent in a header; voice routes answer 503"
                );
            }
            c
        });
        Upstream {
            clients: Clients::new(settings.timeout),
            main: settings.base_url.to_owned(),
            synth: settings.synth_url.to_owned(),
            credential,
            timeout: settings.timeout,
        }
    }

    /// Whether `PROVIDER_API_KEY` is set.
    pub fn configured(&self) -> bool {
        self.credential.is_some()
    }

    /// The shared `reqwest` client, for fetching result media from upstream
    /// hosts (never with credentials: see [`crate::mirror`]).
    pub fn client(&self) -> &reqwest::Client {
        &self.clients.reqwest
    }

    fn base_url(&self, base: Base) -> Result<&str, ApiError> {
        match base {
            Base::Main => Ok(&self.main),
            Base::Synth => Ok(&self.synth),
            Base::Llm => Err(ApiError::NotImplemented(
                "the general gateway's model provider is not configured".into(),
            )),
        }
    }

    /// A call to `path` (already filled and encoded) on the row's base,
    /// with the upstream credential in the base's form.
    pub fn call(
        &self,
        up: &spec::Upstream,
        path: &str,
        query: &[(String, String)],
    ) -> Result<Call, ApiError> {
        let cred = self
            .credential
            .as_ref()
            .ok_or_else(|| ApiError::Unavailable("upstream integration not configured".into()))?;
        let mut url = format!("{}{}", self.base_url(up.base)?, path);
        if !query.is_empty() {
            url.push(if url.contains('?') { '&' } else { '?' });
            let start = url.len();
            let mut q = form_urlencoded::Serializer::for_suffix(url, start);
            q.extend_pairs(query);
            url = q.finish();
        }
        let (name, value) = match up.auth {
            UpstreamAuth::Bearer => (header::AUTHORIZATION, &cred.bearer),
            UpstreamAuth::Token => (header::AUTHORIZATION, &cred.token),
            UpstreamAuth::AccessToken => (
                header::HeaderName::from_static("x-access-token"),
                &cred.access_token,
            ),
        };
        let mapping = Mapping {
            base: up.base,
            timeout: self.timeout,
            key: Some(cred.key.clone()),
            callers_key: false,
        };
        Ok(Call::new(
            self,
            up.method.to_http(),
            url,
            name,
            value.clone(),
            mapping,
        ))
    }
}

/// What a call sends.
enum Payload {
    Empty,
    Json(Bytes),
    Multipart(reqwest::multipart::Form),
    /// A streamed body of a known length (an audio file sent as it is).
    Stream(reqwest::Body),
}

/// One upstream request, built once ([`Upstream::call`]) and sent once.
pub struct Call {
    clients: Arc<Clients>,
    method: Method,
    url: String,
    headers: HeaderMap,
    payload: Payload,
    timeout: Duration,
    mapping: Mapping,
}

impl Call {
    fn new(
        up: &Upstream,
        method: Method,
        url: String,
        name: header::HeaderName,
        credential: HeaderValue,
        mapping: Mapping,
    ) -> Call {
        let mut headers = HeaderMap::with_capacity(4);
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        headers.insert(name, credential);
        Call {
            clients: up.clients.clone(),
            method,
            url,
            headers,
            payload: Payload::Empty,
            timeout: up.timeout,
            mapping,
        }
    }

    /// Sends `body` as JSON.
    pub fn json<T: serde::Serialize + ?Sized>(mut self, body: &T) -> Call {
        // Serializing a `Value` or a derived type into memory cannot fail.
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        self.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        self.payload = Payload::Json(Bytes::from(bytes));
        self
    }

    /// Sets a header that is not a credential (an API version, a caller's
    /// `anthropic-beta`), replacing one set before.
    pub fn with_header(mut self, name: header::HeaderName, value: HeaderValue) -> Call {
        self.headers.insert(name, value);
        self
    }

    /// Replaces the client's time-out for this call (a stream's lifetime).
    pub fn timeout(mut self, d: Duration) -> Call {
        self.timeout = d;
        self
    }

    /// Sends a multipart form (file parts stream; see [`client`] for why
    /// this goes through reqwest).
    pub fn multipart(mut self, form: reqwest::multipart::Form) -> Call {
        self.headers.remove(header::CONTENT_TYPE);
        self.payload = Payload::Multipart(form);
        self
    }

    /// Sends `body` (streamed, `len` bytes) as the request's body, of
    /// `content_type` (an audio file sent as it is: Deepgram's `/listen`).
    pub fn body_stream(mut self, body: reqwest::Body, len: u64, content_type: &str) -> Call {
        if let Ok(v) = HeaderValue::from_str(content_type) {
            self.headers.insert(header::CONTENT_TYPE, v);
        }
        self.headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        self.payload = Payload::Stream(body);
        self
    }

    /// Sends the call; a non-success status or a network failure becomes the
    /// [`ApiError`] of spec §7.
    pub async fn send(self) -> Result<Answer, ApiError> {
        self.try_send().await.map_err(|f| f.error)
    }

    /// [`Call::send`], saying of a failure whether another attempt may
    /// succeed ([`Failed`]: what [`gateway_models::routing`] retries on).
    pub async fn try_send(self) -> Result<Answer, Failed> {
        let Call {
            clients,
            method,
            url,
            headers,
            payload,
            timeout,
            mapping,
        } = self;
        let started = std::time::Instant::now();
        let mut deadline = Box::pin(tokio::time::sleep(timeout));
        let sent = tokio::select! {
            biased;
            r = exchange(&clients, method, url, headers, payload) => r,
            _ = deadline.as_mut() => Err(Failure::timeout()),
        };
        gateway_base::telemetry::upstream_latency(started.elapsed());
        let resp = match sent {
            Ok(resp) => resp.map(|source| source.into_body(deadline)),
            Err(e) => {
                let kind = e.kind();
                gateway_base::telemetry::upstream_error(kind.as_str());
                let error = mapping.network_error(&e);
                return Err(Failed::new(kind, error).caused_by(Box::new(e), mapping.key.clone()));
            }
        };
        if resp.status().is_success() {
            return Ok(Answer { resp, mapping });
        }
        let kind = FailureKind::Status(resp.status().as_u16());
        gateway_base::telemetry::upstream_error(kind.as_str());
        let retry_after = resp
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let (error, message) = mapping.error_from_response(resp).await;
        let mut failed = Failed::new(kind, error);
        if !message.trim().is_empty() {
            failed = failed.caused_by(message.into(), mapping.key.clone());
        }
        failed.retry_after = retry_after;
        Err(failed)
    }
}

/// An answer's body before it carries the deadline.
enum Received {
    Hyper(hyper::body::Incoming),
    Reqwest(reqwest::Body),
}

impl Received {
    fn into_body(self, deadline: std::pin::Pin<Box<tokio::time::Sleep>>) -> UpBody {
        match self {
            Received::Hyper(b) => UpBody::hyper(b, deadline),
            Received::Reqwest(b) => UpBody::reqwest(b, deadline),
        }
    }
}

/// Sends one request and waits for the answer's headers.
async fn exchange(
    clients: &Clients,
    method: Method,
    url: String,
    headers: HeaderMap,
    payload: Payload,
) -> Result<http::Response<Received>, Failure> {
    let body = match payload {
        Payload::Empty => Bytes::new(),
        Payload::Json(b) => b,
        Payload::Multipart(form) => {
            let request = clients.reqwest.request(method, url).headers(headers);
            return reqwest_exchange(request.multipart(form)).await;
        }
        Payload::Stream(body) => {
            let request = clients.reqwest.request(method, url).headers(headers);
            return reqwest_exchange(request.body(body)).await;
        }
    };
    let uri: http::Uri = url.parse().map_err(|e: http::uri::InvalidUri| {
        Failure::new(FailureKind::Request, format!("invalid upstream URL: {e}"))
    })?;
    let mut req = http::Request::new(Full::new(body));
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    let resp = clients
        .hyper
        .request(req)
        .await
        .map_err(Failure::from_client)?;
    Ok(resp.map(Received::Hyper))
}

/// Sends a request whose body streams (through reqwest, see [`client`])
/// and waits for the answer's headers.
async fn reqwest_exchange(
    request: reqwest::RequestBuilder,
) -> Result<http::Response<Received>, Failure> {
    let resp = request.send().await.map_err(Failure::from_reqwest)?;
    Ok(http::Response::<reqwest::Body>::from(resp).map(Received::Reqwest))
}

/// A successful upstream answer, not yet read.
pub struct Answer {
    resp: http::Response<UpBody>,
    mapping: Mapping,
}

impl Answer {
    /// The upstream's status (2xx).
    pub fn status(&self) -> u16 {
        self.resp.status().as_u16()
    }

    /// A header of the answer.
    pub fn header(&self, name: &str) -> Option<&HeaderValue> {
        self.resp.headers().get(name)
    }

    /// Reads the whole body, at most `limit` bytes (502 beyond). A body
    /// that arrives in one frame is kept as it came (no copy).
    pub async fn bytes(self, limit: usize) -> Result<Bytes, ApiError> {
        let Answer { resp, mapping } = self;
        let too_large = || {
            ApiError::BadGateway(format!(
                "{} answered with more than {limit} bytes",
                provider_name(mapping.base)
            ))
        };
        let declared = resp
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        let mut body = resp.into_body();
        let mut first: Option<Bytes> = None;
        let mut buf = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| mapping.network_error(&e))?;
            let Ok(chunk) = frame.into_data() else {
                continue;
            };
            let have = first.as_ref().map_or(0, Bytes::len) + buf.len();
            if have + chunk.len() > limit {
                return Err(too_large());
            }
            match first.take() {
                None if buf.is_empty() => first = Some(chunk),
                held => {
                    if buf.is_empty() {
                        buf.reserve(declared.unwrap_or(8 * 1024).min(limit));
                    }
                    if let Some(held) = held {
                        buf.extend_from_slice(&held);
                    }
                    buf.extend_from_slice(&chunk);
                }
            }
        }
        let whole = first.unwrap_or_else(|| buf.freeze());
        Ok(match &mapping.key {
            Some(key) => scrub::scrub_all(whole, key),
            None => whole,
        })
    }

    /// Reads the body as JSON (at most [`MAX_JSON_ANSWER`] bytes); `what`
    /// names the answer in the 502 of a body that is not JSON
    /// ("`<provider>` answered `<what>` that is not JSON").
    pub async fn json(self, what: &str) -> Result<Value, ApiError> {
        let who = provider_name(self.mapping.base);
        let bytes = self.bytes(MAX_JSON_ANSWER).await?;
        serde_json::from_slice(&bytes)
            .map_err(|_| ApiError::BadGateway(format!("{who} answered {what} that is not JSON")))
    }

    /// The body as a stream of chunks, scrubbed of the key (a relay that
    /// reads what it passes on: [`crate::relay`]).
    pub fn byte_stream(self) -> ByteStream {
        let Answer { resp, mapping } = self;
        Box::pin(futures_util::TryStreamExt::map_err(
            Scrubbed::new(resp.into_body(), mapping.key),
            |e| -> gateway_base::body::BoxError { Box::new(e) },
        ))
    }

    /// Streams the answer back to the caller: status and content type kept,
    /// the body streamed as it arrives (scrubbed, one box).
    pub fn stream(self) -> Response {
        let Answer { resp, mapping } = self;
        let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::OK);
        let (mut parts, body) = resp.into_parts();
        let content_type = parts.headers.remove(header::CONTENT_TYPE);
        let body = BodyExt::boxed(BodyExt::map_err(
            Scrubbed::new(body, mapping.key),
            |e| -> gateway_base::body::BoxError { Box::new(e) },
        ));
        let mut out = http::Response::new(body);
        *out.status_mut() = status;
        if let Some(ct) = content_type {
            out.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        out
    }
}
