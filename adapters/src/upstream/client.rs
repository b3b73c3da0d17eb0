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

use super::failed::{Cause, FailureKind};

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
    /// The TLS configuration of both, for WebSockets too ([`super::socket`]).
    pub tls: Arc<rustls::ClientConfig>,
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
            .with_tls_config(tls.clone())
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
        Arc::new(Clients {
            hyper,
            reqwest,
            tls: Arc::new(tls),
        })
    }
}

/// Why an upstream exchange failed: what failed, and the transport's error
/// as its source (never holds the key: see
/// [`super::errors::Mapping::network_error`] and [`super::Failed`], which
/// scrub what they show).
#[derive(Debug)]
pub struct Failure {
    kind: FailureKind,
    source: Option<Cause>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let chain = || {
            self.source
                .as_deref()
                .map(|e| error_chain(e))
                .unwrap_or_default()
        };
        match self.kind {
            FailureKind::Timeout => f.write_str("timed out"),
            FailureKind::Connect => write!(f, "connect: {}", chain()),
            FailureKind::BodyBroken => write!(f, "reading the body: {}", chain()),
            _ => f.write_str(&chain()),
        }
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl Failure {
    /// The call's deadline passed (headers or body).
    pub fn timeout() -> Failure {
        Failure {
            kind: FailureKind::Timeout,
            source: None,
        }
    }

    /// `kind` (a transport failure), caused by `source`.
    pub fn new(kind: FailureKind, source: impl Into<Cause>) -> Failure {
        Failure {
            kind,
            source: Some(source.into()),
        }
    }

    /// What failed, for [`super::Failed`].
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// A hyper-util client error (sending, or waiting for the headers): no
    /// connection could be made (TCP, DNS or the TLS handshake), or any
    /// other transport error.
    pub fn from_client(e: hyper_util::client::legacy::Error) -> Failure {
        let kind = if e.is_connect() {
            FailureKind::Connect
        } else {
            FailureKind::Transport
        };
        Failure::new(kind, e)
    }

    /// A reqwest error (multipart calls), its URL left out.
    pub fn from_reqwest(e: reqwest::Error) -> Failure {
        if e.is_timeout() {
            return Failure::timeout();
        }
        let kind = if e.is_connect() {
            FailureKind::Connect
        } else if e.is_body() || e.is_decode() {
            FailureKind::BodyBroken
        } else {
            FailureKind::Transport
        };
        Failure::new(kind, e.without_url())
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
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
            return Poll::Ready(Some(Err(Failure::timeout())));
        }
        match &mut this.source {
            Source::Hyper(b) => Pin::new(b)
                .poll_frame(cx)
                .map_err(|e| Failure::new(FailureKind::BodyBroken, e)),
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
