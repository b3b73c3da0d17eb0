//! A WebSocket client for the simulator's WebSocket APIs (tokio-tungstenite's).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use http::HeaderValue;
use serde_json::Value;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// A client socket.
pub type Ws = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

/// Connects to `url` (`ws://…`) with `headers`: the socket and the `101`'s
/// headers, or the refusal's status.
pub async fn connect(url: &str, headers: &[(&str, &str)]) -> Result<(Ws, http::HeaderMap), u16> {
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, resp)) => Ok((ws, resp.headers().clone())),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => Err(resp.status().as_u16()),
        Err(e) => panic!("connect {url}: {e}"),
    }
}

/// Sends a JSON text message.
pub async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::text(v.to_string())).await.unwrap();
}

/// The next message: a text one as JSON, `None` once closed (a close
/// frame's code as `{"close": code}`).
pub async fn next(ws: &mut Ws) -> Option<Value> {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("a message within 5 s");
        match msg {
            Some(Ok(Message::Text(t))) => return Some(serde_json::from_str(t.as_str()).unwrap()),
            Some(Ok(Message::Close(f))) => {
                return Some(serde_json::json!({"close": f.map(|f| u16::from(f.code))}))
            }
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => return None,
        }
    }
}

/// Messages up to and including the first of type `kind`.
pub async fn until(ws: &mut Ws, kind: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let v = next(ws).await.expect("the socket stays open");
        let done = v["type"] == kind;
        out.push(v);
        if done {
            return out;
        }
    }
}

/// The `type` of each event.
pub fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect()
}
