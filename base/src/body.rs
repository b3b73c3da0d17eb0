//! The request and response types every handler sees, the response body
//! type, and the JSON answer.

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full};

/// Boxed error carried by streaming bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Response body: a full buffer or a stream, boxed.
pub type Body = BoxBody<Bytes, BoxError>;

/// Request type handlers receive.
pub type Request = http::Request<ReqBody>;
/// Response type handlers produce.
pub type Response = http::Response<Body>;

/// The address of the client, the TCP peer (a request extension the server
/// sets on every request): the account routes limit each address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::IpAddr);

/// A body holding these bytes.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// An empty body.
pub fn empty() -> Body {
    Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed()
}

/// A JSON answer with a status.
pub fn json(status: http::StatusCode, v: &serde_json::Value) -> http::Response<Body> {
    json_text(status, v.to_string())
}

/// A JSON answer with a status, of JSON text already written (an answer
/// whose text is also kept: serialised once).
pub fn json_text(status: http::StatusCode, text: String) -> http::Response<Body> {
    let mut out = http::Response::new(full(Bytes::from(text)));
    *out.status_mut() = status;
    out.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    out
}

/// The whole body of an answer made in memory (a batch line's), as text
/// (lossy where it is not UTF-8; what could not be read is left out).
pub async fn collect_text(response: http::Response<Body>) -> String {
    match response.into_body().collect().await {
        Ok(c) => String::from_utf8_lossy(&c.to_bytes()).into_owned(),
        Err(_) => String::new(),
    }
}

/// Seconds a request body may take to arrive, plus one second per
/// [`BODY_MIN_RATE`] bytes it delivered: a slower body is cut with 408.
pub const GATEWAY_BODY_TIMEOUT_SECS: &str = "GATEWAY_BODY_TIMEOUT_SECS";

/// Bytes per second a request body must keep up, on average, once its
/// time-out (`GATEWAY_BODY_TIMEOUT_SECS`) has passed: 16 KiB/s.
pub const BODY_MIN_RATE: u64 = 16 * 1024;

/// What a request tells its connection (the server's accept loop sheds
/// connections at the connection cap, preferring those that are slow and
/// unauthenticated: `crate::watchdog`). Shared by the connection and its
/// requests' bodies as one `Arc`: nothing is allocated per request.
pub trait Connection: Send + Sync {
    /// A request body began to arrive (it is not complete yet).
    fn body_started(&self);
    /// That body arrived whole, was cut, or was dropped unread.
    fn body_ended(&self);
    /// A request of the connection presented a valid credential.
    fn authenticated(&self);
}

/// A request body that must arrive in time: within the body time-out
/// (`GATEWAY_BODY_TIMEOUT_SECS`) of its request's headers, plus one second
/// per [`BODY_MIN_RATE`] bytes it delivered, i.e. a minimum
/// average rate once the time-out has passed. A body that falls behind ends
/// with [`BodyTimedOut`] (408 where the body is read). The timer is
/// allocated only when the body first has to wait.
pub struct ReqBody {
    inner: Inner,
    started: tokio::time::Instant,
    timeout: std::time::Duration,
    received: u64,
    timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    timed_out: bool,
    /// The connection it arrives on, told when it starts and ends.
    conn: Option<std::sync::Arc<dyn Connection>>,
    /// Counted as arriving on `conn` and not ended yet.
    arriving: bool,
}

/// Where a request body comes from: a connection, or memory (a batch's
/// line, run inside the gateway as a request of its own).
enum Inner {
    Incoming(hyper::body::Incoming),
    /// The whole body; taken by the first read.
    Whole(Option<Bytes>),
}

impl Inner {
    fn is_end_stream(&self) -> bool {
        match self {
            Inner::Incoming(i) => http_body::Body::is_end_stream(i),
            Inner::Whole(b) => b.is_none(),
        }
    }
}

/// The error of a body that arrived too slowly.
#[derive(Debug)]
pub struct BodyTimedOut;

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body arrived too slowly")
    }
}

impl std::error::Error for BodyTimedOut {}

impl ReqBody {
    pub fn new(inner: hyper::body::Incoming, timeout: std::time::Duration) -> ReqBody {
        ReqBody {
            inner: Inner::Incoming(inner),
            started: tokio::time::Instant::now(),
            timeout,
            received: 0,
            timer: None,
            timed_out: false,
            conn: None,
            arriving: false,
        }
    }

    /// A body already whole in memory (a batch line's): no connection,
    /// never timed out.
    pub fn whole(bytes: Bytes) -> ReqBody {
        ReqBody {
            inner: Inner::Whole(Some(bytes)),
            started: tokio::time::Instant::now(),
            timeout: std::time::Duration::from_secs(3600),
            received: 0,
            timer: None,
            timed_out: false,
            conn: None,
            arriving: false,
        }
    }

    /// [`ReqBody::new`], arriving on `conn`: counted there as arriving
    /// until it is complete (or cut, or dropped).
    pub fn on(
        inner: hyper::body::Incoming,
        timeout: std::time::Duration,
        conn: std::sync::Arc<dyn Connection>,
    ) -> ReqBody {
        let arriving = !http_body::Body::is_end_stream(&inner);
        if arriving {
            conn.body_started();
        }
        let mut body = ReqBody::new(inner, timeout);
        body.conn = Some(conn);
        body.arriving = arriving;
        body
    }

    /// Tells the connection that its client presented a valid credential
    /// (the pipeline, once the caller is authenticated).
    pub fn authenticated(&self) {
        if let Some(c) = &self.conn {
            c.authenticated();
        }
    }

    fn ended(&mut self) {
        if std::mem::take(&mut self.arriving) {
            if let Some(c) = &self.conn {
                c.body_ended();
            }
        }
    }

    fn deadline(&self) -> tokio::time::Instant {
        let allowance = self.received / BODY_MIN_RATE;
        self.started + self.timeout + std::time::Duration::from_secs(allowance)
    }

    /// Whether an error of a body read (possibly wrapped) is a time-out.
    pub fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
        let mut cur = Some(e);
        while let Some(e) = cur {
            if e.is::<BodyTimedOut>() {
                return true;
            }
            cur = e.source();
        }
        false
    }
}

impl http_body::Body for ReqBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        use std::future::Future;
        use std::task::Poll;
        let this = self.get_mut();
        if this.timed_out {
            return Poll::Ready(None);
        }
        let inner = match &mut this.inner {
            Inner::Incoming(i) => i,
            Inner::Whole(b) => return Poll::Ready(b.take().map(|b| Ok(http_body::Frame::data(b)))),
        };
        match std::pin::Pin::new(&mut *inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.received += d.len() as u64;
                }
                if inner.is_end_stream() {
                    this.ended();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.ended();
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => {
                this.ended();
                Poll::Ready(None)
            }
            Poll::Pending => {
                let deadline = this.deadline();
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if timer.deadline() != deadline {
                    timer.as_mut().reset(deadline);
                }
                if timer.as_mut().poll(cx).is_ready() {
                    this.timed_out = true;
                    this.ended();
                    return Poll::Ready(Some(Err(Box::new(BodyTimedOut))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.timed_out || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match &self.inner {
            Inner::Incoming(i) => i.size_hint(),
            Inner::Whole(b) => {
                http_body::SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64))
            }
        }
    }
}

impl Drop for ReqBody {
    fn drop(&mut self) {
        self.ended();
    }
}
