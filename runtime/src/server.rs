//! The HTTP server: accept loop, dispatch to the generated router, shutdown.
//!
//! `serve(listener, gateway, route, shutdown)` takes its dependencies (the
//! mini-redis shape): the binary binds, the tests bind `127.0.0.1:0`.
//! Every accepted socket gets `TCP_NODELAY` (without it a response written
//! in two pieces waits for a delayed ACK on keep-alive connections). Each
//! request's handler runs in its own task, so a client that hangs up cannot
//! cancel work that must finish (records, billing).

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use http::{header, HeaderValue};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::ctx::new_request_id;
use crate::router::{Request, Response, RouteFn, RouteMatch};
use crate::services::Gateway;
use gateway_base::body;
use gateway_base::errors::ApiError;
use gateway_base::spec::ErrorFormat;
use gateway_base::watchdog::{ConnState, Tracked, Watched};

/// How long shutdown waits for requests in flight.
const DRAIN: Duration = Duration::from_secs(30);

/// At the connection cap: how long a connection may have been sending its
/// headers before it is closed to make room, and how often the loop asks
/// again while it stays at the cap.
const SHED_GRACE: Duration = Duration::from_secs(1);
const SHED_EVERY: Duration = Duration::from_millis(250);

/// A `200` with a static body of `content_type`.
fn static_answer(body: &'static str, content_type: &'static str) -> Response {
    let mut r = http::Response::new(body::full(body));
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// Routes one request. Every answer carries `X-Request-Id`: the pipeline
/// sets the request's own; answers made here (404, 405, `/healthz`, ...)
/// get a fresh one, the same as in an envelope error's body.
pub async fn dispatch(gw: Gateway, route: RouteFn, req: Request) -> Response {
    let mut id = None;
    let mut resp = answer(gw, route, req, &mut id).await;
    if !resp.headers().contains_key(REQUEST_ID) {
        let id = id.unwrap_or_else(new_request_id);
        if let Ok(v) = HeaderValue::from_str(&id) {
            resp.headers_mut().insert(REQUEST_ID, v);
        }
    }
    resp
}

/// The header every answer carries.
pub const REQUEST_ID: &str = "x-request-id";

/// An answer the gateway could not give: the error and the format its
/// path's callers read errors in.
type Refusal = (ApiError, ErrorFormat);

/// The gateway's own answers first, then the table's routes; a refusal is
/// answered with a fresh request id, kept in `id` for the header.
async fn answer(gw: Gateway, route: RouteFn, req: Request, id: &mut Option<String>) -> Response {
    let path = req.uri().path().to_owned();
    let answered = match own_answer(&gw, &req, &path).await {
        Some(answered) => answered,
        None => routed(gw, route, req, &path).await,
    };
    answered.unwrap_or_else(|(e, format)| {
        let rid = new_request_id();
        let r = e.into_response(format, &rid);
        *id = Some(rid);
        r
    })
}

/// What the gateway answers itself, outside the table: the local object
/// store's presigned URLs, the dashboard, health, the OpenAPI document, the
/// docs and the metrics. `None`: the path is the table's.
async fn own_answer(gw: &Gateway, req: &Request, path: &str) -> Option<Result<Response, Refusal>> {
    if path.starts_with(gateway_adapters::objects::serve::PATH_PREFIX) {
        // The local object store's presigned URLs (S3 serves its own).
        return Some(match gw.objects.as_local() {
            Some(local) => Ok(gateway_adapters::objects::serve_presigned(
                local,
                req.method(),
                req.uri(),
                req.headers(),
            )
            .await),
            None => Err((
                ApiError::NotFound("no such object".into()),
                ErrorFormat::Detail,
            )),
        });
    }
    if path == crate::dashboard::SESSION {
        let format = gw.table.errors_for_path(path);
        let answer = crate::dashboard::session_answer(gw, req.method(), req.headers()).await;
        return Some(answer.map_err(|e| (e, format)));
    }
    if crate::dashboard::is_dashboard(path) {
        return Some(crate::dashboard::answer(gw, path).ok_or_else(|| {
            gateway_base::telemetry::unmatched(404);
            let message = format!("no dashboard file {path}");
            (ApiError::NotFound(message), gw.table.errors_for_path(path))
        }));
    }
    if path == "/readyz" {
        return Some(Ok(crate::ready::answer(gw).await));
    }
    Some(Ok(match path {
        "/healthz" => static_answer(r#"{"status":"ok"}"#, "application/json"),
        "/openapi.json" => static_answer(gw.table.openapi, "application/json"),
        "/docs" => static_answer(gw.table.docs, "text/html; charset=utf-8"),
        "/metrics" => {
            let mut r = http::Response::new(body::full(gateway_base::telemetry::render()));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            r
        }
        _ => return None,
    }))
}

/// The table's route for the request, its handler run in a task of its
/// own; no route is a 404 or 405 in the error format of the path's area.
async fn routed(
    gw: Gateway,
    route: RouteFn,
    req: Request,
    path: &str,
) -> Result<Response, Refusal> {
    let table = gw.table;
    match route(req.method(), path) {
        RouteMatch::Found {
            handler, params, ..
        } => {
            // Detached: the handler finishes even if the client goes away.
            tokio::spawn(handler(gw, req, params)).await.map_err(|e| {
                tracing::error!(error = %e, "handler panicked");
                (
                    ApiError::bug("handler panicked"),
                    table.errors_for_path(path),
                )
            })
        }
        RouteMatch::MethodNotAllowed { allowed } => {
            gateway_base::telemetry::unmatched(405);
            Err((
                ApiError::MethodNotAllowed(allowed),
                table.errors_for_path(path),
            ))
        }
        RouteMatch::NotFound => {
            gateway_base::telemetry::unmatched(404);
            let message = format!("no route for {} {}", req.method(), path);
            Err((ApiError::NotFound(message), table.errors_for_path(path)))
        }
    }
}

/// One request of a connection: its body timed ([`body::ReqBody`]), its
/// answer tracked by the watchdog until sent and, with the access log on,
/// logged when sent ([`gateway_base::access`]).
async fn serve_one(
    gw: Gateway,
    route: RouteFn,
    conn: std::sync::Arc<ConnState>,
    limits: Limits,
    req: http::Request<hyper::body::Incoming>,
) -> Result<http::Response<Tracked<body::Body>>, Infallible> {
    let started = Instant::now();
    let guard = conn.begin();
    let req = req.map(|b| body::ReqBody::on(b, limits.body_timeout, conn));
    let access = limits
        .access_log
        .then(|| (req.method().clone(), unrouted_name(req.uri().path())));
    let resp = dispatch(gw, route, req).await;
    let line = access
        .map(|(method, fallback)| gateway_base::access::Line::of(method, started, &resp, fallback));
    Ok(resp.map(|b| Tracked::new(b, guard, line)))
}

/// A connection slot: at once if one is free; at the cap, rings `pressure`
/// (every [`SHED_EVERY`]) until one frees, so that idle and slow
/// connections close to make room. A ring is a new value of a `watch`
/// (not a `Notify`): a connection busy when it rings (its bytes arriving,
/// its timer firing) still sees it at its next turn, so every connection
/// sheddable at the cap closes, not only those waiting at that instant.
async fn slot(
    permits: &std::sync::Arc<Semaphore>,
    pressure: &tokio::sync::watch::Sender<u64>,
) -> tokio::sync::OwnedSemaphorePermit {
    if let Ok(p) = permits.clone().try_acquire_owned() {
        return p;
    }
    loop {
        pressure.send_modify(|rings| *rings = rings.wrapping_add(1));
        tokio::select! {
            p = permits.clone().acquire_owned() => return p.expect("the semaphore is never closed"),
            _ = tokio::time::sleep(SHED_EVERY) => {}
        }
    }
}

/// The access log's name of a request no row serves.
fn unrouted_name(path: &str) -> &'static str {
    match path {
        "/healthz" => "healthz",
        "/openapi.json" => "openapi",
        "/docs" => "docs",
        p if crate::dashboard::is_dashboard(p) => "dashboard",
        "/metrics" => "metrics",
        p if p.starts_with(gateway_adapters::objects::serve::PATH_PREFIX) => "objects",
        _ => "unmatched",
    }
}

/// Limits of the accept loop and of each connection (from [`crate::config::Config`]).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Headers must be complete this long after the connection opened or
    /// after the first byte of a keep-alive connection's next request.
    pub header_timeout: Duration,
    /// A connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// Connections open at once; beyond, new ones wait in the kernel's backlog.
    pub max_connections: usize,
    /// Time a request body may take (see [`gateway_base::body::ReqBody`]).
    pub body_timeout: Duration,
    /// Concurrent streams of one HTTP/2 connection.
    pub max_streams: u32,
    /// Whether the access log is on.
    pub access_log: bool,
}

impl Limits {
    pub fn of(config: &crate::config::Config) -> Limits {
        Limits {
            header_timeout: config.header_timeout,
            idle_timeout: config.idle_timeout,
            max_connections: config.max_connections.max(1),
            body_timeout: config.body_timeout,
            max_streams: config.max_streams_per_connection.max(1),
            access_log: config.access_log,
        }
    }
}

/// Back-off of a failing `accept` (e.g. out of file descriptors): 10 ms,
/// doubling up to 1 s; logged at most once a second.
struct AcceptBackoff {
    delay: Duration,
    last_log: Option<std::time::Instant>,
    suppressed: u64,
}

impl AcceptBackoff {
    const FIRST: Duration = Duration::from_millis(10);
    const MAX: Duration = Duration::from_secs(1);

    fn new() -> AcceptBackoff {
        AcceptBackoff {
            delay: Self::FIRST,
            last_log: None,
            suppressed: 0,
        }
    }

    fn reset(&mut self) {
        self.delay = Self::FIRST;
    }

    /// Logs (rate-limited) and returns how long to wait before accepting again.
    fn failed(&mut self, e: &std::io::Error) -> Duration {
        let now = std::time::Instant::now();
        if self
            .last_log
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            tracing::warn!(error = %e, retry_in = ?self.delay, suppressed = self.suppressed, "accept failed");
            self.last_log = Some(now);
            self.suppressed = 0;
        } else {
            self.suppressed += 1;
        }
        let wait = self.delay;
        self.delay = (self.delay * 2).min(Self::MAX);
        wait
    }
}

/// Serves until `shutdown` resolves, then drains requests in flight.
///
/// At most `max_connections` connections are open at once: the loop stops
/// accepting while the cap is reached, so further clients wait in the
/// kernel's listen backlog (and are served as connections close) instead of
/// taking descriptors the open connections need. At the cap, connections
/// with no request in flight that are idle, or have been sending their
/// headers for [`SHED_GRACE`] (slow clients, not yet authenticated), and
/// connections that never authenticated whose request body has been
/// arriving for [`SHED_GRACE`], are closed to make room; an authenticated
/// connection with a request in flight never is
/// ([`ConnState::sheddable`]). Each connection runs under the
/// [`gateway_base::watchdog`] (header and idle time-outs); an HTTP/2 connection
/// opens at most `GATEWAY_MAX_STREAMS_PER_CONNECTION` streams; request
/// bodies must arrive in time ([`gateway_base::body::ReqBody`]); every request
/// gets its [`gateway_base::access`] line.
pub async fn serve(
    listener: TcpListener,
    gw: Gateway,
    route: RouteFn,
    shutdown: impl Future<Output = ()>,
) {
    let limits = Limits::of(&gw.config);
    let shutdown = draining(gw.clone(), shutdown);
    let permits = std::sync::Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // The watchdog times headers; hyper's own timer would also close idle
    // keep-alive connections after the header time-out.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None);
    // One HTTP/2 connection may not hold more than this many requests.
    builder.http2().max_concurrent_streams(limits.max_streams);
    let mut backoff = AcceptBackoff::new();
    // Rung at the cap: connections idle or slow with their headers close.
    let pressure = tokio::sync::watch::Sender::new(0u64);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = slot(&permits, &pressure) => p,
            _ = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(s) => {
                    backoff.reset();
                    s
                }
                Err(e) => {
                    let wait = backoff.failed(&e);
                    drop(permit);
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => continue,
                        _ = &mut shutdown => break,
                    }
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let state = ConnState::new();
        let gw = gw.clone();
        let in_service = state.clone();
        let client = gateway_base::body::ClientAddr(peer.ip());
        let service = service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(client);
            serve_one(gw.clone(), route, in_service.clone(), limits, req)
        });
        let conn = builder
            .serve_connection_with_upgrades(
                TokioIo::new(Watched::new(stream, state.clone())),
                service,
            )
            .into_owned();
        let stop = stop_rx.clone();
        // Rings from now on (the ones before this connection are seen).
        let pressure = pressure.subscribe();
        tokio::spawn(async move {
            let _permit = permit;
            watch_connection(conn, state, limits, pressure, stop).await;
        });
    }
    drop(listener);
    tracing::info!("shutting down: draining requests in flight");
    let _ = stop_tx.send(true);
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    // Live sessions settle and close ("going away") beside the drain.
    let sessions = gw.sessions.clone();
    tokio::select! {
        _ = async { tokio::join!(permits.acquire_many(all), sessions.shut_down()) } => {}
        _ = tokio::time::sleep(DRAIN) => tracing::warn!("drain timed out"),
    }
}

/// `shutdown`, then `/readyz` at 503 at once, and the instance serving on
/// for `GATEWAY_SHUTDOWN_DELAY_SECS` (a balancer's probe sees it and stops
/// sending) before the accept loop stops and the drain begins.
async fn draining(gw: Gateway, shutdown: impl Future<Output = ()>) {
    shutdown.await;
    gw.draining
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let delay = gw.config.shutdown_delay;
    if !delay.is_zero() {
        tracing::info!(
            delay_secs = delay.as_secs(),
            "shutting down: /readyz answers 503; serving on until the delay ends"
        );
        tokio::time::sleep(delay).await;
    }
}

/// One connection's life under the watchdog, until it ends: closed at its
/// header or idle deadline, or at the connection cap when it is sheddable
/// (a ring of `pressure`, [`slot`]), and shut down gracefully on `stop`.
async fn watch_connection<C>(
    conn: C,
    state: std::sync::Arc<ConnState>,
    limits: Limits,
    mut pressure: tokio::sync::watch::Receiver<u64>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) where
    C: hyper_util::server::graceful::GracefulConnection,
    C::Error: std::fmt::Display,
{
    tokio::pin!(conn);
    // A deadline that appears while the timer sleeps (a request ends, a
    // next one starts) is at least the shorter time-out away, so waking
    // at least that often catches every deadline on time.
    let period = limits.header_timeout.min(limits.idle_timeout);
    let next = |now: Instant| match state.deadline(limits.header_timeout, limits.idle_timeout) {
        Some(d) => d.min(now + period),
        None => now + period,
    };
    let timer = tokio::time::sleep_until(next(Instant::now()));
    tokio::pin!(timer);
    let mut stopping = false;
    let mut ringing = true;
    loop {
        tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            rang = pressure.changed(), if ringing => match rang {
                Ok(()) if state.sheddable(SHED_GRACE) => {
                    tracing::debug!("closing an idle, slow or slow anonymous connection: at the connection cap");
                    return;
                }
                Ok(()) => {}
                // The accept loop ended (shutting down): no more rings.
                Err(_) => ringing = false,
            },
            _ = stop.changed(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = timer.as_mut() => {
                let now = Instant::now();
                if state
                    .deadline(limits.header_timeout, limits.idle_timeout)
                    .is_some_and(|d| d <= now)
                {
                    tracing::debug!("closing a connection: header or idle time-out");
                    return; // nothing in flight: dropping closes the socket
                }
                timer.as_mut().reset(next(now));
            }
        }
    }
}
