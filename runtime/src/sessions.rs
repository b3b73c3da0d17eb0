//! Live WebSocket sessions (a realtime session, a live transcription):
//! the caller's side of the socket, the instance's registry of open
//! sessions, and the one door their turns are committed through.
//!
//! * [`accept`] — the upgrade: a `GET` with `Upgrade: websocket`, version
//!   13 and a key (else 400, nothing opened), answered `101` with the
//!   chosen subprotocol; the socket is handed to the session's task once
//!   hyper lets go of the connection.
//! * [`Sessions`] — how many sessions each user holds open here (at most
//!   `GATEWAY_REALTIME_MAX_SESSIONS`, 429 before the upgrade), and the
//!   shut-down signal: at a graceful shut-down every session settles what
//!   it owes and closes with 1001 ("going away"); the drain waits for them.
//! * [`commit_turn`] — a turn's records (its usage record and debit, the
//!   end of its hold, its audit record), committed before the event that
//!   reports the turn leaves for the caller (who pays, and how a turn is
//!   held, is `modes::common::LivePayer`).
//! * [`End`] — why a session ended: its close code and reason; [`Clock`]
//!   — the limits that end it (longest duration, idle caller, shut-down).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use http::header::{CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_PROTOCOL, UPGRADE};
use http::{HeaderMap, HeaderValue, StatusCode};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::sync::{watch, Notify};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::WebSocketStream;

use gateway_base::body::{Request, Response};
use gateway_base::errors::ApiError;
use gateway_store::{OutsideRecordPhase, Record, Store};

/// The caller's side of a session.
pub type Socket = WebSocketStream<TokioIo<Upgraded>>;

/// Answers an upgrade request whose `key` [`handshake_key`] read: `101`
/// with `protocol` (when the caller offered it), and `session` run on the
/// socket as a task of its own once the connection is handed over.
pub fn accept<F, Fut>(
    req: &mut Request,
    key: String,
    protocol: Option<&'static str>,
    max_frame: usize,
    session: F,
) -> Response
where
    F: FnOnce(Socket) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let on = hyper::upgrade::on(&mut *req);
    let config = gateway_adapters::upstream::socket::socket_config(max_frame);
    tokio::spawn(tracing::Instrument::in_current_span(async move {
        match on.await {
            Ok(up) => {
                let socket =
                    WebSocketStream::from_raw_socket(TokioIo::new(up), Role::Server, Some(config))
                        .await;
                session(socket).await;
            }
            Err(e) => tracing::debug!(error = %e, "a WebSocket upgrade was not completed"),
        }
    }));
    let mut resp = http::Response::new(gateway_base::body::empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert(SEC_WEBSOCKET_ACCEPT, v);
    }
    if let Some(p) = protocol.filter(|p| offered(req.headers(), p)) {
        h.insert(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(p));
    }
    resp
}

/// The client's `Sec-WebSocket-Key` of a well-formed upgrade request
/// (asked before anything is opened for it); else 400.
pub fn handshake_key(req: &Request) -> Result<String, ApiError> {
    if req.version() != http::Version::HTTP_11 {
        return Err(ApiError::BadRequest(
            "this route is a WebSocket: it is opened over HTTP/1.1".into(),
        ));
    }
    let h = req.headers();
    let has = |name: http::header::HeaderName, want: &str| {
        h.get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|p| p.trim().eq_ignore_ascii_case(want)))
    };
    if !has(UPGRADE, "websocket") || !has(CONNECTION, "upgrade") {
        return Err(ApiError::BadRequest(
            "this route is a WebSocket: send a GET with `Connection: Upgrade` and `Upgrade: websocket`".into(),
        ));
    }
    if !has(http::header::SEC_WEBSOCKET_VERSION, "13") {
        return Err(ApiError::BadRequest(
            "Sec-WebSocket-Version: only version 13 is spoken".into(),
        ));
    }
    h.get(http::header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| ApiError::BadRequest("Sec-WebSocket-Key is required".into()))
}

/// Whether the caller offered the subprotocol `p`.
fn offered(h: &HeaderMap, p: &str) -> bool {
    h.get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|o| o.trim().eq_ignore_ascii_case(p))
}

/// Why a session ended: the close code and reason the caller is given.
#[derive(Debug, Clone)]
pub struct End {
    pub code: CloseCode,
    pub reason: String,
}

impl End {
    pub fn new(code: CloseCode, reason: impl Into<String>) -> End {
        End {
            code,
            reason: reason.into(),
        }
    }

    /// What comes next could not be held: the credit (or the key's
    /// budget) cannot cover it (1008, naming it), or the hold failed
    /// (1011).
    pub fn unheld(e: &ApiError) -> End {
        match e {
            ApiError::InsufficientCredits { .. } | ApiError::PaymentRequired(_) => {
                End::new(CloseCode::Policy, format!("insufficient credits: {e}"))
            }
            _ => End::new(
                CloseCode::Error,
                "the gateway could not hold the next period",
            ),
        }
    }
}

/// The open sessions of this instance.
pub struct Sessions {
    per_user: Mutex<HashMap<i64, usize>>,
    most: usize,
    going_away: watch::Sender<bool>,
    ended: Notify,
}

/// A user's place among the open sessions, given back when dropped.
pub struct Slot {
    sessions: Arc<Sessions>,
    user: i64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.sessions.open();
        if let Some(n) = open.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.user);
            }
        }
        let none = open.is_empty();
        drop(open);
        gateway_base::telemetry::open_sessions(-1.0);
        if none {
            self.sessions.ended.notify_waiters();
        }
    }
}

impl Sessions {
    /// At most `most` sessions a user.
    pub fn new(most: usize) -> Arc<Sessions> {
        Arc::new(Sessions {
            per_user: Mutex::new(HashMap::new()),
            most,
            going_away: watch::Sender::new(false),
            ended: Notify::new(),
        })
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<i64, usize>> {
        self.per_user.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for one more session of `user`: 429 when it holds the most.
    pub fn take(self: &Arc<Self>, user: i64) -> Result<Slot, ApiError> {
        let mut open = self.open();
        let n = open.entry(user).or_default();
        if *n >= self.most {
            return Err(ApiError::RateLimited {
                message: format!(
                    "too many open sessions: at most {} at once (GATEWAY_REALTIME_MAX_SESSIONS)",
                    self.most
                ),
                retry_after: 1,
            });
        }
        *n += 1;
        gateway_base::telemetry::open_sessions(1.0);
        Ok(Slot {
            sessions: self.clone(),
            user,
        })
    }

    /// Becomes `true` when the instance shuts down.
    pub fn going_away(&self) -> watch::Receiver<bool> {
        self.going_away.subscribe()
    }

    /// Tells every session to settle and close, and waits until they have.
    pub async fn shut_down(&self) {
        let _ = self.going_away.send(true);
        loop {
            let ended = self.ended.notified();
            if self.open().is_empty() {
                return;
            }
            ended.await;
        }
    }
}

/// Commits a session turn's records (usage record and debit, the end of
/// its hold, its audit record) through the door of records written
/// outside the record phase; the caller hears of the turn only after.
pub async fn commit_turn(store: &Store, records: Vec<Record>) -> Result<(), ApiError> {
    store
        .commit_outside_record_phase(OutsideRecordPhase::SessionTurn, records)
        .await
        .map(|_| ())
        .map_err(|e| ApiError::internal("committing a session turn", e))
}

/// The clock of a session's limits: its longest duration, its caller's
/// silence, and the instance's shut-down.
pub struct Clock {
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
    idle: std::pin::Pin<Box<tokio::time::Sleep>>,
    limits: crate::config::SessionLimits,
    going_away: watch::Receiver<bool>,
}

impl Clock {
    /// Started now, under `limits`, told of the shut-down by `going_away`.
    pub fn start(limits: crate::config::SessionLimits, going_away: watch::Receiver<bool>) -> Clock {
        let now = tokio::time::Instant::now();
        Clock {
            deadline: Box::pin(tokio::time::sleep_until(now + limits.max_duration)),
            idle: Box::pin(tokio::time::sleep_until(now + limits.idle)),
            limits,
            going_away,
        }
    }

    /// The caller spoke: its silence starts again.
    pub fn heard(&mut self) {
        let at = tokio::time::Instant::now() + self.limits.idle;
        self.idle.as_mut().reset(at);
    }

    /// Resolves with the end a limit imposes (cancel-safe: a `select!`
    /// branch).
    pub async fn expired(&mut self) -> End {
        let l = self.limits;
        tokio::select! {
            _ = self.deadline.as_mut() => End::new(
                CloseCode::Policy,
                format!("the session reached its longest duration ({} s, GATEWAY_REALTIME_MAX_SECS)", l.max_duration.as_secs()),
            ),
            _ = self.idle.as_mut() => End::new(
                CloseCode::Normal,
                format!("idle time-out: no message for {} s (GATEWAY_REALTIME_IDLE_SECS)", l.idle.as_secs()),
            ),
            _ = self.going_away.wait_for(|g| *g) => End::new(
                CloseCode::Away,
                "going away: the gateway is shutting down",
            ),
        }
    }
}
