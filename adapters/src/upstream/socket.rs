//! WebSockets to providers: a realtime session's, a live transcription's.
//!
//! [`Upstream::socket`] opens one to `base_url` + `path` (`http` becomes
//! `ws`, `https` `wss`, over the same rustls configuration as the HTTP
//! client) with the provider's key in its form ([`super::llm::key_headers`],
//! the one maker of those headers): the key is added here and nowhere
//! else. A refused handshake is the [`ApiError`] its status maps to, as an
//! HTTP call's would be ([`super::map_status`]), its message scrubbed.
//!
//! Everything read from the socket passes the scrubber before a caller can
//! see it ([`UpSocket::next`]: a text message, a close reason), so a
//! provider that echoes the key does not hand it on.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use http::StatusCode;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use super::llm::{key_headers, KeyForm, ProviderKey};
use super::scrub::Key;
use super::{map_status, Upstream};
use gateway_base::errors::ApiError;
use gateway_base::spec::Base;

/// An open WebSocket to a provider.
pub struct UpSocket {
    inner: WebSocketStream<MaybeTlsStream<TcpStream>>,
    key: Arc<Key>,
}

impl Upstream {
    /// Opens a WebSocket to `base_url` + `path` (with its query) presenting
    /// `key` in `form`; messages larger than `max_message` are refused by
    /// the reader. Fails within the upstream time-out.
    pub async fn socket(
        &self,
        base_url: &str,
        path: &str,
        key: &ProviderKey,
        form: KeyForm,
        max_message: usize,
    ) -> Result<UpSocket, ApiError> {
        let url = format!("{}{}", base_url.trim_end_matches('/'), path);
        let url = match url.split_once("://") {
            Some(("https", rest)) => format!("wss://{rest}"),
            Some(("http", rest)) => format!("ws://{rest}"),
            _ => url,
        };
        let mut req = url.as_str().into_client_request().map_err(|e| {
            ApiError::BadGateway(format!(
                "the provider's WebSocket address is not usable: {e}"
            ))
        })?;
        let (credential, version) = key_headers(key, form);
        req.headers_mut().insert(credential.0, credential.1);
        if let Some((name, value)) = version {
            req.headers_mut().insert(name, value);
        }
        let config = socket_config(max_message);
        let connector = Connector::Rustls(self.clients.tls.clone());
        let opened = tokio::time::timeout(
            self.timeout.min(Duration::from_secs(30)),
            tokio_tungstenite::connect_async_tls_with_config(
                req,
                Some(config),
                true,
                Some(connector),
            ),
        )
        .await;
        let scrub = key.secret();
        match opened {
            Err(_) => Err(ApiError::GatewayTimeout(
                "the model provider did not accept the WebSocket in time".into(),
            )),
            Ok(Ok((inner, _))) => Ok(UpSocket {
                inner,
                key: scrub.clone(),
            }),
            Ok(Err(WsError::Http(resp))) => {
                let status =
                    StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
                let body = resp
                    .body()
                    .as_deref()
                    .map(|b| scrub.scrub_str(&String::from_utf8_lossy(b)))
                    .unwrap_or_default();
                let message = super::upstream_message(body.as_bytes()).unwrap_or_default();
                Err(map_status(Base::Llm, status, None, message))
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %scrub.scrub_str(&e.to_string()), "opening the provider's WebSocket failed");
                Err(ApiError::BadGateway(
                    "the model provider's WebSocket could not be opened".into(),
                ))
            }
        }
    }
}

/// A live socket's configuration: messages and frames at most `max`, and
/// a read buffer of [`READ_BUFFER`].
pub fn socket_config(max: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
}

/// Bytes read from a socket at a time. tungstenite zero-fills this much
/// before every read (128 KiB by default): a realtime turn's twenty-odd
/// reads of small events zeroed 3.5 MB a turn, 79 % of the gateway's
/// instructions in a profile (`docs/performance.md`). A larger message
/// takes more reads.
pub const READ_BUFFER: usize = 16 << 10;

impl UpSocket {
    /// The next message from the provider, scrubbed of the key; `None`
    /// when the socket has ended.
    pub async fn next(&mut self) -> Option<Result<Message, WsError>> {
        let m = self.inner.next().await?;
        Some(m.map(|m| match m {
            Message::Text(t) => Message::Text(self.key.scrub_str(t.as_str()).into()),
            Message::Close(Some(f)) => Message::Close(Some(CloseFrame {
                code: f.code,
                reason: self.key.scrub_str(f.reason.as_str()).into(),
            })),
            other => other,
        }))
    }

    /// Sends one message to the provider.
    pub async fn send(&mut self, m: Message) -> Result<(), WsError> {
        self.inner.send(m).await
    }

    /// Closes the socket normally (what is unsent is flushed first).
    pub async fn close(&mut self) {
        let frame = CloseFrame {
            code: CloseCode::Normal,
            reason: "".into(),
        };
        let _ = self.inner.close(Some(frame)).await;
    }
}
