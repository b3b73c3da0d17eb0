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
//! This is the single seam where the HTTP client is chosen: one shared
//! `reqwest` client keeps a keep-alive pool to every upstream, with
//! `TCP_NODELAY` and the configured time-out (120 s by default). Modes never
//! see it. Every message taken from an upstream answer is scrubbed of the key
//! before it can reach a caller or a log.

pub mod errors;
pub mod llm;
pub mod scrub;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::TryStreamExt;
use http::{header, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;

use crate::config::Config;
use crate::errors::ApiError;
use crate::router::Response;
use crate::spec::{self, Base, UpstreamAuth};
use errors::Mapping;
pub use errors::{map_status, provider_name, read_bounded, upstream_message};

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

/// The upstream client.
pub struct Upstream {
    client: reqwest::Client,
    main: String,
    synth: String,
    key: Option<Arc<str>>,
    timeout: Duration,
}

impl Upstream {
    pub fn new(config: &Config) -> Upstream {
        let client = reqwest::Client::builder()
            .timeout(config.upstream_timeout)
            .connect_timeout(config.upstream_timeout.min(Duration::from_secs(10)))
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1024)
            .pool_idle_timeout(Duration::from_secs(60))
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("building the upstream HTTP client");
        Upstream {
            client,
            main: config.provider_base_url.clone(),
            synth: config.provider_synth_url.clone(),
            key: config.provider_api_key.as_deref().map(Arc::from),
            timeout: config.upstream_timeout,
        }
    }

    /// Whether `PROVIDER_API_KEY` is set.
    pub fn configured(&self) -> bool {
        self.key.is_some()
    }

    /// The shared client, for fetching result media from upstream hosts
    /// (never with credentials: see [`crate::mirror`]).
    pub fn client(&self) -> &reqwest::Client {
        &self.client
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

    fn mapping(&self, base: Base) -> Mapping {
        Mapping {
            base,
            timeout: self.timeout,
            key: self.key.clone(),
            callers_key: false,
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
        let key = self
            .key
            .as_deref()
            .ok_or_else(|| ApiError::Unavailable("upstream integration not configured".into()))?;
        let url = format!("{}{}", self.base_url(up.base)?, path);
        let mut rb = self.client.request(up.method.to_http(), url);
        if !query.is_empty() {
            rb = rb.query(query);
        }
        rb = match up.auth {
            UpstreamAuth::Bearer => rb.header(header::AUTHORIZATION, format!("Bearer {key}")),
            UpstreamAuth::Token => rb.header(header::AUTHORIZATION, format!("Token token={key}")),
            UpstreamAuth::AccessToken => rb.header("x-access-token", key),
        };
        Ok(Call {
            rb,
            mapping: self.mapping(up.base),
        })
    }
}

/// One upstream request, built once ([`Upstream::call`]) and sent once.
pub struct Call {
    rb: reqwest::RequestBuilder,
    mapping: Mapping,
}

impl Call {
    /// Sends `body` as JSON.
    pub fn json<T: serde::Serialize + ?Sized>(mut self, body: &T) -> Call {
        self.rb = self.rb.json(body);
        self
    }

    /// Replaces the client's time-out for this call (a stream's lifetime).
    pub fn timeout(mut self, d: Duration) -> Call {
        self.rb = self.rb.timeout(d);
        self
    }

    /// Sends a multipart form (file parts stream).
    pub fn multipart(mut self, form: reqwest::multipart::Form) -> Call {
        self.rb = self.rb.multipart(form);
        self
    }

    /// Sends the call; a non-success status or a network failure becomes the
    /// [`ApiError`] of spec §7.
    pub async fn send(self) -> Result<Answer, ApiError> {
        let Call { rb, mapping } = self;
        let started = std::time::Instant::now();
        let sent = rb.send().await;
        crate::telemetry::upstream_latency(started.elapsed());
        let resp = sent.map_err(|e| {
            crate::telemetry::upstream_error(if e.is_timeout() { "timeout" } else { "network" });
            mapping.network_error(&e)
        })?;
        if resp.status().is_success() {
            return Ok(Answer { resp, mapping });
        }
        crate::telemetry::upstream_error(match resp.status().as_u16() {
            429 => "rate_limited",
            400..=499 => "status_4xx",
            _ => "status_5xx",
        });
        Err(mapping.error_from_response(resp).await)
    }
}

/// A successful upstream answer, not yet read.
pub struct Answer {
    resp: reqwest::Response,
    mapping: Mapping,
}

impl Answer {
    /// The upstream's status (2xx).
    pub fn status(&self) -> u16 {
        self.resp.status().as_u16()
    }

    /// Reads the whole body, at most `limit` bytes (502 beyond).
    pub async fn bytes(self, limit: usize) -> Result<Bytes, ApiError> {
        let Answer { mut resp, mapping } = self;
        let mut buf = Vec::with_capacity(
            resp.content_length()
                .map_or(8 * 1024, |n| n as usize)
                .min(limit),
        );
        while let Some(chunk) = resp.chunk().await.map_err(|e| mapping.network_error(&e))? {
            if buf.len() + chunk.len() > limit {
                return Err(ApiError::BadGateway(format!(
                    "{} answered with more than {limit} bytes",
                    provider_name(mapping.base)
                )));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(match &mapping.key {
            Some(key) => scrub::scrub_all(Bytes::from(buf), key),
            None => Bytes::from(buf),
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
    pub fn byte_stream(
        self,
    ) -> std::pin::Pin<
        Box<dyn futures_util::Stream<Item = Result<Bytes, crate::body::BoxError>> + Send>,
    > {
        let Answer { resp, mapping } = self;
        let bytes = resp
            .bytes_stream()
            .map_err(|e| -> crate::body::BoxError { Box::new(e.without_url()) });
        match mapping.key {
            Some(key) => Box::pin(scrubbed(bytes, key)),
            None => Box::pin(bytes),
        }
    }

    /// Streams the answer back to the caller: status and content type kept,
    /// the body as a stream.
    pub fn stream(self) -> Response {
        let Answer { resp, mapping } = self;
        let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::OK);
        let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
        let bytes = resp
            .bytes_stream()
            .map_err(|e| -> crate::body::BoxError { Box::new(e.without_url()) });
        let body = match mapping.key {
            Some(key) => BodyExt::boxed(StreamBody::new(scrubbed(bytes, key).map_ok(Frame::data))),
            None => BodyExt::boxed(StreamBody::new(bytes.map_ok(Frame::data))),
        };
        let mut out = http::Response::new(body);
        *out.status_mut() = status;
        if let Some(ct) = content_type {
            out.headers_mut().insert(header::CONTENT_TYPE, ct);
        }
        out
    }
}

/// `bytes` with the key scrubbed out as they stream (see [`scrub`]).
fn scrubbed(
    bytes: impl futures_util::Stream<Item = Result<Bytes, crate::body::BoxError>> + Send + 'static,
    key: Arc<str>,
) -> impl futures_util::Stream<Item = Result<Bytes, crate::body::BoxError>> + Send + 'static {
    use futures_util::StreamExt;
    let start = (Box::pin(bytes), scrub::Scrubber::new(key));
    futures_util::stream::unfold(Some(start), |state| async move {
        let (mut inner, mut scrubber) = state?;
        loop {
            match inner.next().await {
                Some(Ok(chunk)) => {
                    let out = scrubber.feed(chunk);
                    if !out.is_empty() {
                        return Some((Ok(out), Some((inner, scrubber))));
                    }
                }
                Some(Err(e)) => return Some((Err(e), None)),
                None => {
                    let rest = scrubber.finish();
                    return (!rest.is_empty()).then_some((Ok(rest), None));
                }
            }
        }
    })
}
