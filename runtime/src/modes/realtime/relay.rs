//! A realtime session's relay: the caller's events to the provider and
//! the provider's to the caller, as they come, in one task (so a turn's
//! settlement is committed before anything after its `response.done`
//! moves either way).
//!
//! Events pass through unchanged but for what money needs
//! ([`super::turns`]): a `response.create` carries the output cap it was
//! held for (or is answered with the gateway's `error`), and a
//! `response.done` the `cost` of its response. Only the events the money
//! follows are parsed whole; a delta is read for its `type` only.
//!
//! The session ends when either side closes, at the longest duration, when
//! the caller is silent too long, or when the instance shuts down; what is
//! in flight is then cancelled upstream and settled (waiting a few seconds
//! for its `response.done`) before the caller gets its close.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use super::turns::Turns;
use crate::sessions::{Clock, End, Slot, Socket};
use gateway_adapters::upstream::socket::UpSocket;
use gateway_models::realtime::Conversation;

/// How long the end of a session waits for its responses in flight.
const SETTLE_WAIT: Duration = Duration::from_secs(5);

/// An open session.
pub(super) struct Session {
    pub caller: Socket,
    pub up: UpSocket,
    pub turns: Turns,
    pub clock: Clock,
    pub slot: Slot,
    pub counts: Counts,
    /// The caller still listens (after it left, a response in flight is
    /// still settled).
    pub caller_open: bool,
    pub vad: super::vad::Vad,
}

/// The reason of a session its caller left.
const CALLER_LEFT: &str = "the caller left";

/// What a session relayed.
#[derive(Default)]
pub(super) struct Counts {
    pub frames_up: u64,
    pub frames_down: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
}

/// The `type` of an event, read without parsing the rest.
#[derive(serde::Deserialize)]
struct Kind<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Cow<'a, str>>,
}

fn kind_of(text: &str) -> Option<Cow<'_, str>> {
    // OpenAI's events begin with their type (or their `event_id`, then
    // their type): read it without scanning the rest (a delta's base64
    // audio); any other form is parsed whole.
    let head = match text.strip_prefix(r#"{"event_id":""#) {
        Some(rest) => rest.split_once(r#"",""#),
        None => text.strip_prefix('{').map(|tail| ("", tail)),
    };
    if let Some(rest) = head
        .filter(|(id, _)| !id.contains(['"', '\\']))
        .and_then(|(_, tail)| tail.strip_prefix(r#""type":""#))
    {
        if let Some((k, _)) = rest.split_once('"').filter(|(k, _)| !k.contains('\\')) {
            return Some(Cow::Borrowed(k));
        }
    }
    serde_json::from_str::<Kind<'_>>(text)
        .ok()
        .and_then(|k| k.kind)
}

/// Server events the money follows (parsed whole).
fn followed(kind: &str) -> bool {
    matches!(
        kind,
        "response.created"
            | "response.done"
            | "error"
            | "session.created"
            | "session.updated"
            | "input_audio_buffer.committed"
            | "input_audio_buffer.cleared"
    )
}

/// Runs the session to its end, then settles what is in flight, closes
/// both sides and logs the session's line.
pub(super) async fn run(mut s: Session) {
    let started = Instant::now();
    let end = s.relay().await;
    if end.reason == CALLER_LEFT {
        s.caller_open = false;
    }
    if s.turns.in_flight() > 0 && end.code != CloseCode::Error {
        s.settle_in_flight().await;
    }
    s.turns.end();
    s.turns.payer.trace.end(101);
    let _ = s
        .caller
        .close(Some(CloseFrame {
            code: end.code,
            reason: end.reason.clone().into(),
        }))
        .await;
    s.up.close().await;
    let p = &s.turns.payer;
    tracing::info!(
        target: "access",
        route = p.route_id,
        request_id = %p.session_id,
        user_id = p.user.id,
        duration_ms = started.elapsed().as_millis() as u64,
        frames_up = s.counts.frames_up,
        frames_down = s.counts.frames_down,
        bytes_up = s.counts.bytes_up,
        bytes_down = s.counts.bytes_down,
        turns = s.turns.settled,
        cost = %s.turns.cost,
        close_code = u16::from(end.code),
        reason = %end.reason,
        "session"
    );
    drop(s.slot);
}

impl Session {
    async fn relay(&mut self) -> End {
        loop {
            tokio::select! {
                m = self.caller.next() => {
                    self.clock.heard();
                    if let Err(end) = self.from_caller(m).await {
                        return end;
                    }
                }
                m = self.up.next() => {
                    if let Err(end) = self.from_provider(m).await {
                        return end;
                    }
                }
                end = self.clock.expired() => return end,
            }
        }
    }

    async fn from_caller(
        &mut self,
        m: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    ) -> Result<(), End> {
        let m = match m {
            None => return Err(End::new(CloseCode::Normal, CALLER_LEFT)),
            Some(Err(e)) => return Err(caller_error(e)),
            Some(Ok(m)) => m,
        };
        if matches!(m, Message::Text(_) | Message::Binary(_)) {
            self.counts.frames_up += 1;
            self.counts.bytes_up += m.len() as u64;
        }
        let text = match m {
            Message::Text(t) => t,
            Message::Close(_) => return Err(End::new(CloseCode::Normal, "")),
            Message::Binary(b) => return self.up_send(Message::Binary(b)).await,
            _ => return Ok(()),
        };
        let kind = kind_of(text.as_str()).map(Cow::into_owned);
        match kind.as_deref() {
            Some(k @ ("response.create" | "session.update")) => {
                let mut event: Value = match serde_json::from_str(text.as_str()) {
                    Ok(v) => v,
                    Err(_) => return self.up_send(Message::Text(text)).await,
                };
                if k == "response.create" {
                    return self.create(event).await;
                }
                self.vad.client_update(&mut event);
                self.turns.conversation.client_event(k, &event);
                self.up_send(Message::Text(event.to_string().into())).await
            }
            Some(k) if Conversation::follows(k) => {
                if let Ok(event) = serde_json::from_str::<Value>(text.as_str()) {
                    self.turns.conversation.client_event(k, &event);
                }
                self.up_send(Message::Text(text)).await
            }
            _ => self.up_send(Message::Text(text)).await,
        }
    }

    async fn from_provider(
        &mut self,
        m: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
    ) -> Result<(), End> {
        let m = match m {
            None => return Err(provider_gone(None)),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "the provider's realtime socket failed");
                return Err(provider_gone(None));
            }
            Some(Ok(m)) => m,
        };
        let text = match m {
            Message::Text(t) => t,
            Message::Close(frame) => return Err(provider_gone(frame)),
            Message::Binary(b) => return self.down_send(Message::Binary(b)).await,
            _ => return Ok(()),
        };
        let kind = kind_of(text.as_str()).map(Cow::into_owned);
        let out = match kind.as_deref().filter(|k| followed(k)) {
            Some(k) => {
                let Ok(mut event) = serde_json::from_str::<Value>(text.as_str()) else {
                    return self.down_send(Message::Text(text)).await;
                };
                if let Err(e) = self.turns.server(k, &mut event).await {
                    tracing::error!(error = %e, "a realtime response could not be settled; the session ends");
                    return Err(End::new(
                        CloseCode::Error,
                        "the gateway could not record a response",
                    ));
                }
                match k {
                    "session.created" | "session.updated" => {
                        if let Some(fix) = self.vad.server_session(&mut event) {
                            self.up_send(Message::Text(fix.to_string().into())).await?;
                        }
                        Message::Text(event.to_string().into())
                    }
                    "response.done" => Message::Text(event.to_string().into()),
                    "input_audio_buffer.committed" if self.vad.responds() => {
                        self.down_send(Message::Text(text)).await?;
                        return self
                            .create(serde_json::json!({"type": "response.create"}))
                            .await;
                    }
                    _ => Message::Text(text),
                }
            }
            None => Message::Text(text),
        };
        self.down_send(out).await
    }

    /// A `response.create` (the caller's, or the gateway's for server
    /// VAD, [`super::vad`]): held and sent on, or refused to the caller.
    async fn create(&mut self, event: Value) -> Result<(), End> {
        match self.turns.create(event).await {
            Ok(e) => self.up_send(Message::Text(e.to_string().into())).await,
            Err(refusal) => {
                self.down_send(Message::Text(refusal.to_string().into()))
                    .await
            }
        }
    }

    async fn up_send(&mut self, m: Message) -> Result<(), End> {
        gateway_base::telemetry::session_frames(true, 1);
        self.up.send(m).await.map_err(|_| provider_gone(None))
    }

    async fn down_send(&mut self, m: Message) -> Result<(), End> {
        if !self.caller_open {
            return Ok(());
        }
        self.counts.frames_down += 1;
        self.counts.bytes_down += m.len() as u64;
        gateway_base::telemetry::session_frames(false, 1);
        if self.caller.send(m).await.is_err() {
            self.caller_open = false;
            return Err(End::new(CloseCode::Normal, CALLER_LEFT));
        }
        Ok(())
    }

    /// Cancels what is in flight and settles it from the provider's
    /// `response.done` (passed on to the caller while it listens), for at
    /// most [`SETTLE_WAIT`].
    async fn settle_in_flight(&mut self) {
        let cancel = serde_json::json!({"type": "response.cancel"}).to_string();
        if self.up.send(Message::Text(cancel.into())).await.is_err() {
            return;
        }
        let until = tokio::time::sleep(SETTLE_WAIT);
        tokio::pin!(until);
        while self.turns.in_flight() > 0 {
            tokio::select! {
                m = self.up.next() => match self.from_provider(m).await {
                    Err(e) if e.reason != CALLER_LEFT => return,
                    _ => {}
                },
                _ = &mut until => return,
            }
        }
    }
}

/// The end of a session whose caller's socket failed: a message over the
/// largest size is 1009, anything else a broken connection.
fn caller_error(e: tokio_tungstenite::tungstenite::Error) -> End {
    use tokio_tungstenite::tungstenite::error::CapacityError;
    use tokio_tungstenite::tungstenite::Error;
    match e {
        Error::Capacity(CapacityError::MessageTooLong { size, max_size }) => End::new(
            CloseCode::Size,
            format!("message of {size} bytes over the largest, {max_size} (GATEWAY_REALTIME_MAX_FRAME_BYTES)"),
        ),
        _ => End::new(CloseCode::Normal, CALLER_LEFT),
    }
}

/// The end of a session the provider closed (its code and reason, else
/// 1011).
fn provider_gone(frame: Option<CloseFrame>) -> End {
    match frame {
        Some(f) if f.code == CloseCode::Normal => End::new(CloseCode::Normal, f.reason.to_string()),
        Some(f) => End::new(
            CloseCode::Error,
            format!("the model provider closed the session: {}", f.reason),
        ),
        None => End::new(CloseCode::Error, "the model provider's socket ended"),
    }
}

#[cfg(test)]
mod tests {
    use super::kind_of;

    #[test]
    fn an_events_type_is_read_fast_or_parsed() {
        assert_eq!(
            kind_of(r#"{"type":"response.done","x":1}"#).unwrap(),
            "response.done"
        );
        assert_eq!(kind_of(r#"{ "x": 1, "type": "error" }"#).unwrap(), "error");
        assert_eq!(kind_of(r#"{"type":"a\"b"}"#).unwrap(), "a\"b");
        let after_id = r#"{"event_id":"event_1","type":"response.created"}"#;
        assert_eq!(kind_of(after_id).unwrap(), "response.created");
        assert_eq!(
            kind_of(r#"{"event_id":"e","x":{"type":"no"},"type":"yes"}"#).unwrap(),
            "yes"
        );
        assert!(kind_of(r#"{"type":"unterminated"#).is_none());
        assert!(kind_of("not json").is_none());
    }
}
