//! The HTTP clients behind [`super::Upstream`] and the upstream answer's body.
//!
//! * Calls with a JSON body or none go through hyper-util's pooled client
//!   over hyper-rustls (rustls with the ring provider, webpki roots, HTTP/1.1):
//!   keep-alive pool (1024 idle per host, 60 s idle), `TCP_NODELAY`, a
//!   connect time-out, no proxy, no redirects.
//! * Multipart calls (file uploads to the provider) go through `reqwest`:
//!   its form encoder is the well-kept one that also gives the body its
//!   `Content-Length` when every part knows its size, which only reqwest's
//!   own request builder can read. These calls are dominated by the bytes
//!   they stream, not by the client's CPU per request; reqwest is in the
//!   dependency tree anyway (`rust-s3`, callers' URLs in [`crate::fetch`]).
//!
//! Both answers become an [`UpBody`], which enforces the call's deadline
//! (`GATEWAY_UPSTREAM_TIMEOUT_MS`, or a stream's lifetime) while the body is
//! read, like reqwest's total time-out did.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// Idle pooled connections kept per upstream host.
const POOL_IDLE_PER_HOST: usize = 1024;
/// How long a pooled connection may stay idle.
const POOL_IDLE: Duration = Duration::from_secs(60);
/// Longest connect time-out (the call's time-out when shorter).
const MAX_CONNECT: Duration = Duration::from_secs(10);

pub(crate) type Hyper =
    hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The two clients, shared by every call.
pub(crate) struct Clients {
    pub hyper: Hyper,
    pub reqwest: reqwest::Client,
}

impl Clients {
    pub fn new(timeout: Duration) -> Arc<Clients> {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(timeout.min(MAX_CONNECT)));
        http.enforce_http(false);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("rustls: the ring provider supports the default versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let hyper = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_max_idle_per_host(POOL_IDLE_PER_HOST)
            .pool_timer(TokioTimer::new())
            .build(https);
        let reqwest = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(MAX_CONNECT))
            .tcp_nodelay(true)
            .pool_max_idle_per_host(POOL_IDLE_PER_HOST)
            .pool_idle_timeout(POOL_IDLE)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("building the upstream HTTP client");
        Arc::new(Clients { hyper, reqwest })
    }
}

/// Why an upstream exchange failed (never holds the key: see
/// [`super::errors::Mapping::network_error`], which scrubs what it logs).
#[derive(Debug)]
pub enum Failure {
    /// The call's deadline passed (headers or body).
    Timeout,
    /// No connection could be made.
    Connect(String),
    /// The connection broke while the answer's body was read.
    Body(String),
    /// Any other transport error.
    Other(String),
    /// The request could not be built (an invalid upstream URL).
    Request(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout => f.write_str("timed out"),
            Failure::Connect(e) => write!(f, "connect: {e}"),
            Failure::Body(e) => write!(f, "reading the body: {e}"),
            Failure::Other(e) | Failure::Request(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for Failure {}

impl Failure {
    /// What failed, for [`super::Failed`].
    pub fn kind(&self) -> super::FailureKind {
        match self {
            Failure::Timeout => super::FailureKind::Timeout,
            Failure::Connect(_) => super::FailureKind::Connect,
            Failure::Body(_) => super::FailureKind::BodyBroken,
            Failure::Other(_) => super::FailureKind::Transport,
            Failure::Request(_) => super::FailureKind::Request,
        }
    }

    /// A hyper-util client error (sending, or waiting for the headers).
    pub fn from_client(e: hyper_util::client::legacy::Error) -> Failure {
        let text = error_chain(&e);
        if e.is_connect() {
            Failure::Connect(text)
        } else {
            Failure::Other(text)
        }
    }

    /// A reqwest error (multipart calls), its URL left out.
    pub fn from_reqwest(e: reqwest::Error) -> Failure {
        let (timeout, connect, body) =
            (e.is_timeout(), e.is_connect(), e.is_body() || e.is_decode());
        let text = error_chain(&e.without_url());
        if timeout {
            Failure::Timeout
        } else if connect {
            Failure::Connect(text)
        } else if body {
            Failure::Body(text)
        } else {
            Failure::Other(text)
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Where an answer's bytes come from.
enum Source {
    Hyper(hyper::body::Incoming),
    Reqwest(reqwest::Body),
}

/// An upstream answer's body: its frames until the call's deadline.
pub struct UpBody {
    source: Source,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl UpBody {
    pub(crate) fn hyper(
        body: hyper::body::Incoming,
        deadline: Pin<Box<tokio::time::Sleep>>,
    ) -> Self {
        UpBody {
            source: Source::Hyper(body),
            deadline,
        }
    }

    pub(crate) fn reqwest(body: reqwest::Body, deadline: Pin<Box<tokio::time::Sleep>>) -> Self {
        UpBody {
            source: Source::Reqwest(body),
            deadline,
        }
    }
}

impl Body for UpBody {
    type Data = Bytes;
    type Error = Failure;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Failure>>> {
        let this = &mut *self;
        if this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Failure::Timeout)));
        }
        match &mut this.source {
            Source::Hyper(b) => Pin::new(b)
                .poll_frame(cx)
                .map_err(|e| Failure::Body(error_chain(&e))),
            Source::Reqwest(b) => Pin::new(b).poll_frame(cx).map_err(Failure::from_reqwest),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.source {
            Source::Hyper(b) => b.is_end_stream(),
            Source::Reqwest(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.source {
            Source::Hyper(b) => b.size_hint(),
            Source::Reqwest(b) => b.size_hint(),
        }
    }
}
