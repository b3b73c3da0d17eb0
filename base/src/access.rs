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
//! been sent (a stream's when it ends): the response body's one wrapper,
//! `watchdog::Tracked`, carries the [`Line`], counts its bytes and drops it
//! with the body. Nothing is allocated for it beyond
//! tracing's own work: the method is an `http::Method` (standard ones are
//! inline), the request id the response header's shared bytes, and the
//! pipeline hands the route and user through a response extension
//! ([`Served`]).

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

    /// `n` more bytes of the body went out.
    pub fn sent(&mut self, n: usize) {
        self.bytes_out += n as u64;
    }

    /// The whole body went out.
    pub fn completed(&mut self) {
        self.complete = true;
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
