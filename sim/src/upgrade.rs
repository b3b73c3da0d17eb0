//! WebSocket upgrades on the simulator's one port: a `GET` with
//! `Upgrade: websocket` to a WebSocket path ([`crate::realtime`],
//! [`crate::voice::deepgram_live`]) is answered `101 Switching Protocols`
//! (`Sec-WebSocket-Accept` derived from the client's key, the chosen
//! subprotocol echoed), then the connection hyper hands over is spoken to
//! as a server-side WebSocket. A request without `Sec-WebSocket-Key`, or
//! with a `Sec-WebSocket-Version` other than 13, is a 400 and no upgrade.
//!
//! Whatever refuses a connection (credentials, a fault rule, a bad query)
//! does so before this, with a plain HTTP answer. A leaf: it names no API.

use std::future::Future;
use std::sync::Arc;

use http::header::{CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_PROTOCOL, UPGRADE};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::WebSocketStream;

use crate::response::{error, full, Resp};
use crate::shared::Shared;

/// The server side of an accepted WebSocket.
pub type Socket = WebSocketStream<TokioIo<Upgraded>>;

/// True for a `GET` asking to become a WebSocket (`Upgrade: websocket`).
pub fn requested(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::GET
        && headers
            .get(UPGRADE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(',')
                    .any(|p| p.trim().eq_ignore_ascii_case("websocket"))
            })
}

/// The subprotocols the client offers (`Sec-WebSocket-Protocol`, every
/// header line, split at commas, trimmed), in order.
pub fn offered(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Answers `101` (with `protocol` echoed, and `extra` headers) and, once
/// hyper hands the connection over, runs `session` on it as a task the
/// simulator's stop cancels. A missing key or another version: 400.
pub fn accept<F, Fut>(
    sh: &Arc<Shared>,
    headers: &HeaderMap,
    on: OnUpgrade,
    protocol: Option<&str>,
    extra: &[(&'static str, String)],
    session: F,
) -> Resp
where
    F: FnOnce(Socket) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let version_ok = headers
        .get("sec-websocket-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() == "13");
    let Some(key) = headers.get("sec-websocket-key").filter(|_| version_ok) else {
        return error(
            StatusCode::BAD_REQUEST,
            "a WebSocket upgrade needs Sec-WebSocket-Key and Sec-WebSocket-Version: 13",
            None,
        );
    };
    let mut resp = full(bytes::Bytes::new());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    let accept = derive_accept_key(key.as_bytes());
    h.insert(
        SEC_WEBSOCKET_ACCEPT,
        HeaderValue::from_str(&accept).expect("base64"),
    );
    if let Some(p) = protocol.and_then(|p| HeaderValue::from_str(p).ok()) {
        h.insert(SEC_WEBSOCKET_PROTOCOL, p);
    }
    for (name, value) in extra {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(*name, v);
        }
    }
    sh.spawn(async move {
        let Ok(upgraded) = on.await else { return };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        session(ws).await;
    });
    resp
}
