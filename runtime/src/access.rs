//! The access log: one line per request on the `access` target, at `info`
//! (`GATEWAY_ACCESS_LOG=off` silences it; `RUST_LOG=access=off` filters it).
//!
//! Fields: `method`, `route` (the row's id, or `unmatched` / the server's
//! own path's name), `status`, `duration_ms`, `bytes_out`, `request_id`,
//! `user_id` (when authenticated), and `complete` (false when the client
//! went away before the body was sent). No path, query string, header or
//! body is logged, so no credential can be.
//!
//! The line is written when the response body is dropped, i.e. when it has
//! been sent (a stream's when it ends): [`Logged`] wraps the body, counts
//! its bytes and logs in its `Drop`. Nothing is allocated for it beyond
//! tracing's own work: the method is an `http::Method` (standard ones are
//! inline), the request id the response header's shared bytes, and the
//! pipeline hands the route and user through a response extension
//! ([`Served`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Method};
use tokio::time::Instant;

/// `on` (default) or `off`: one `access` line per request.
pub const GATEWAY_ACCESS_LOG: &str = "GATEWAY_ACCESS_LOG";

/// What the pipeline tells the access log about a request it served.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    /// The row's id.
    pub route: &'static str,
    /// The authenticated caller.
    pub user_id: Option<i64>,
}

/// One request's access line, written when dropped.
pub struct Line {
    method: Method,
    route: &'static str,
    status: u16,
    started: Instant,
    request_id: Option<HeaderValue>,
    user_id: Option<i64>,
    bytes_out: u64,
    complete: bool,
}

impl Line {
    /// The line of `response`, started at `started`. The route is the
    /// pipeline's [`Served`] extension, else `fallback` (`unmatched`, ...).
    pub fn of<B>(
        method: Method,
        started: Instant,
        response: &http::Response<B>,
        fallback: &'static str,
    ) -> Line {
        let served = response.extensions().get::<Served>().copied();
        Line {
            method,
            route: served.map_or(fallback, |s| s.route),
            status: response.status().as_u16(),
            started,
            request_id: response.headers().get("x-request-id").cloned(),
            user_id: served.and_then(|s| s.user_id),
            bytes_out: 0,
            complete: false,
        }
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let request_id = self
            .request_id
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        tracing::info!(
            target: "access",
            method = self.method.as_str(),
            route = self.route,
            status = self.status,
            duration_ms = self.started.elapsed().as_millis() as u64,
            bytes_out = self.bytes_out,
            request_id,
            user_id = self.user_id,
            complete = self.complete,
            "request"
        );
    }
}

/// A response body that counts what it sends and logs its [`Line`] when dropped.
pub struct Logged<B> {
    inner: B,
    line: Line,
}

impl<B: http_body::Body> Logged<B> {
    pub fn new(inner: B, line: Line) -> Logged<B> {
        let mut l = Logged { inner, line };
        if l.inner.is_end_stream() {
            l.line.complete = true;
        }
        l
    }
}

impl<B> http_body::Body for Logged<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.line.bytes_out += d.len() as u64;
                }
                if this.inner.is_end_stream() {
                    this.line.complete = true;
                }
            }
            Poll::Ready(None) => this.line.complete = true,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
