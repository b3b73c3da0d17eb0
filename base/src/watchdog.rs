//! Per-connection time-outs: headers must arrive within the header time-out
//! (`GATEWAY_HEADER_TIMEOUT_SECS`), a keep-alive connection with no request
//! in flight is closed after the idle time-out (`GATEWAY_IDLE_TIMEOUT_SECS`).
//!
//! hyper's own `header_read_timeout` restarts when a keep-alive connection
//! goes idle, so it cannot tell "idle" from "slow headers"; this watchdog
//! can. One [`ConnState`] per connection (one allocation per connection,
//! none per request) is shared by:
//!
//! * [`Watched`], the socket: notes when the first byte arrives after the
//!   connection went idle (the start of the next request's headers);
//! * [`InFlight`], a guard created when hyper hands a request to the service
//!   and carried by the response body ([`Tracked`]) until it is dropped, so a
//!   long streamed answer is a request in flight;
//! * [`ConnState::deadline`], asked by the connection task whenever its
//!   timer fires: `None` while a request is in flight, else the instant the
//!   connection must be closed by.
//!
//! The guards also keep one process-wide count, [`requests_in_flight`]:
//! the record writer reads it to tell a lone request (which may write its
//! own commit) from concurrent ones (whose commits it groups).
//!
//! A connection past its deadline has no request in flight, so the
//! connection task simply drops it (closing the socket).
//!
//! At the connection cap ([`ConnState::sheddable`]) the server closes, to
//! make room, connections that cost a slot without using it: idle ones,
//! ones slow with their headers, and ones whose request body has been
//! arriving for a while from a client that never authenticated (no valid
//! key or token on any of the connection's requests; told by the request's
//! body, [`crate::body::Connection`]). A connection that authenticated is
//! never closed while a request is in flight, however slow its body: its
//! owner is known, limited and billed; a slow anonymous body (a login
//! form sent a byte at a time) is what an attacker holding many
//! connections sends.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use crate::access;

/// Concurrent streams one HTTP/2 connection may open.
pub const GATEWAY_MAX_STREAMS_PER_CONNECTION: &str = "GATEWAY_MAX_STREAMS_PER_CONNECTION";

/// The default of `GATEWAY_MAX_CONNECTIONS`: 10,000, or half the soft
/// open-file limit if that is lower (at least 16).
pub fn default_max_connections() -> usize {
    const DEFAULT: usize = 10_000;
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0
            && lim.rlim_cur != libc::RLIM_INFINITY
        {
            return DEFAULT.min((lim.rlim_cur as usize / 2).max(16));
        }
    }
    DEFAULT
}

/// Requests in flight in this process, over every connection (see
/// [`requests_in_flight`]).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// How many requests this process has in flight (handed to the service,
/// answer not finished), over every connection: one atomic load.
pub fn requests_in_flight() -> usize {
    IN_FLIGHT.load(Ordering::Relaxed)
}

/// Shared state of one connection. Times are milliseconds since `epoch`
/// plus one (0 means "not set").
pub struct ConnState {
    epoch: Instant,
    /// Requests handed to the service whose answer is not yet finished.
    in_flight: AtomicU32,
    /// When the last request in flight finished (0: none finished yet).
    idle_since: AtomicU64,
    /// When the first byte arrived while no request was in flight (0: none).
    first_byte: AtomicU64,
    /// Request bodies still arriving.
    receiving: AtomicU32,
    /// Since when bodies have been arriving without a pause (0: none arriving).
    receiving_since: AtomicU64,
    /// Whether a request of the connection presented a valid credential.
    authenticated: AtomicBool,
}

impl ConnState {
    pub fn new() -> Arc<ConnState> {
        Arc::new(ConnState {
            epoch: Instant::now(),
            in_flight: AtomicU32::new(0),
            idle_since: AtomicU64::new(0),
            first_byte: AtomicU64::new(0),
            receiving: AtomicU32::new(0),
            receiving_since: AtomicU64::new(0),
            authenticated: AtomicBool::new(false),
        })
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    fn at(&self, stamp: u64) -> Instant {
        self.epoch + Duration::from_millis(stamp.saturating_sub(1))
    }

    /// Marks a request as in flight until the guard is dropped.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// The instant by which the connection must be closed, or `None` while
    /// a request is in flight. Before the first request: connection start +
    /// `header`; idle after a request: `idle` after it finished, or, once
    /// the next request's first byte arrived, `header` after that byte.
    pub fn deadline(&self, header: Duration, idle: Duration) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let idle_since = self.idle_since.load(Ordering::Acquire);
        let first_byte = self.first_byte.load(Ordering::Acquire);
        Some(if idle_since == 0 {
            self.epoch + header
        } else if first_byte != 0 {
            self.at(first_byte) + header
        } else {
            self.at(idle_since) + idle
        })
    }

    /// Whether the connection may be closed to make room at the connection
    /// cap: with no request in flight, when idle between requests or
    /// sending headers for at least `grace` (a slow client, which has not
    /// even authenticated yet); with requests in flight, only when it never
    /// authenticated and a request body has been arriving for at least
    /// `grace`.
    pub fn sheddable(&self, grace: Duration) -> bool {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            if self.authenticated.load(Ordering::Acquire) {
                return false;
            }
            let since = self.receiving_since.load(Ordering::Acquire);
            return since != 0 && self.at(since).elapsed() >= grace;
        }
        let idle_since = self.idle_since.load(Ordering::Acquire);
        let first_byte = self.first_byte.load(Ordering::Acquire);
        let headers_from = if idle_since == 0 {
            self.epoch
        } else if first_byte != 0 {
            self.at(first_byte)
        } else {
            return true;
        };
        headers_from.elapsed() >= grace
    }

    fn saw_bytes(&self) {
        // Only the first byte after going idle matters; one load otherwise.
        if self.first_byte.load(Ordering::Relaxed) == 0
            && self.idle_since.load(Ordering::Relaxed) != 0
            && self.in_flight.load(Ordering::Relaxed) == 0
        {
            let _ = self.first_byte.compare_exchange(
                0,
                self.now(),
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
        }
    }
}

impl crate::body::Connection for ConnState {
    fn body_started(&self) {
        if self.receiving.fetch_add(1, Ordering::AcqRel) == 0 {
            self.receiving_since.store(self.now(), Ordering::Release);
        }
    }

    fn body_ended(&self) {
        if self.receiving.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.receiving_since.store(0, Ordering::Release);
        }
    }

    fn authenticated(&self) {
        // One load once it is set (every authenticated request tells it).
        if !self.authenticated.load(Ordering::Relaxed) {
            self.authenticated.store(true, Ordering::Release);
        }
    }
}

/// A request in flight on its connection (see [`ConnState::begin`]).
pub struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let s = &self.0;
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
        if s.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            s.first_byte.store(0, Ordering::Release);
            s.idle_since.store(s.now(), Ordering::Release);
        }
    }
}

/// A response body carrying its request's [`InFlight`] guard and, with
/// the access log on, its [`access::Line`] (bytes counted as they go out,
/// written when the body is dropped): one wrapper for both, so a response
/// costs no second boxed body.
pub struct Tracked<B> {
    inner: B,
    _guard: InFlight,
    line: Option<access::Line>,
}

impl<B: http_body::Body> Tracked<B> {
    pub fn new(inner: B, guard: InFlight, mut line: Option<access::Line>) -> Tracked<B> {
        if inner.is_end_stream() {
            if let Some(l) = &mut line {
                l.completed();
            }
        }
        Tracked {
            inner,
            _guard: guard,
            line,
        }
    }
}

impl<B> http_body::Body for Tracked<B>
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
        if let Some(line) = &mut this.line {
            match &polled {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Some(d) = frame.data_ref() {
                        line.sent(d.len());
                    }
                    if this.inner.is_end_stream() {
                        line.completed();
                    }
                }
                Poll::Ready(None) => line.completed(),
                _ => {}
            }
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

/// A socket that reports the first byte read after its connection went idle.
pub struct Watched<S> {
    inner: S,
    state: Arc<ConnState>,
}

impl<S> Watched<S> {
    pub fn new(inner: S, state: Arc<ConnState>) -> Watched<S> {
        Watched { inner, state }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.state.saw_bytes();
        }
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Duration = Duration::from_secs(10);
    const I: Duration = Duration::from_secs(75);

    #[tokio::test(start_paused = true)]
    async fn deadlines_follow_the_connection_phase() {
        let s = ConnState::new();
        let start = Instant::now();
        // Nothing sent yet: the header time-out from the start.
        assert_eq!(s.deadline(H, I), Some(s.epoch + H));
        let g = s.begin();
        assert_eq!(s.deadline(H, I), None, "a request is in flight");
        tokio::time::advance(Duration::from_secs(100)).await;
        drop(g);
        let d = s.deadline(H, I).unwrap();
        assert!(d >= start + Duration::from_secs(100) + I - Duration::from_millis(2));
        // The next request's first byte: the header time-out from it.
        tokio::time::advance(Duration::from_secs(5)).await;
        s.saw_bytes();
        let d = s.deadline(H, I).unwrap();
        assert!(d <= start + Duration::from_secs(105) + H + Duration::from_millis(2));
        assert!(d >= start + Duration::from_secs(105) + H - Duration::from_millis(2));
    }

    #[tokio::test(start_paused = true)]
    async fn slow_anonymous_bodies_are_shed_authenticated_ones_are_not() {
        use crate::body::Connection;
        const GRACE: Duration = Duration::from_secs(1);
        let anonymous = ConnState::new();
        let known = ConnState::new();
        let mut guards = Vec::new();
        for s in [&anonymous, &known] {
            guards.push(s.begin());
            s.body_started();
        }
        known.authenticated();
        assert!(!anonymous.sheddable(GRACE), "not before the grace");
        tokio::time::advance(GRACE).await;
        assert!(anonymous.sheddable(GRACE));
        assert!(!known.sheddable(GRACE));
        // Its body arrived: a request being answered is not shed.
        anonymous.body_ended();
        assert!(!anonymous.sheddable(GRACE));
        drop(guards);
    }
}
