//! `stt_stream`: live transcription over a WebSocket (`GET
//! /audio/stt/stream?model=…`), Deepgram's live protocol both ways (binary
//! audio in, JSON results out, `{"type": "CloseStream"}` to finish),
//! relayed to a `deepgram` model's live `/v1/listen`. The query goes on as
//! it came (`model` made the provider's id).
//!
//! **Money by periods.** The audio is measured from its bytes ([`meter`])
//! and billed per second at the model's price, a period
//! (`GATEWAY_STREAM_BILLING_SECS`, 10 s) at a time: the first period is
//! held before the upgrade (402 when it does not fit); audio beyond the
//! held seconds waits until the period before it is committed (its usage
//! record, debit, end of hold and audit record, under its own request id
//! `res_….N`) and the next is held. A period that cannot be held ends the
//! session with 1008 and a reason naming the credit; the end of a session
//! (however it ends) commits the seconds received since the last period.

mod meter;

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use rust_decimal::Decimal;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use crate::ctx::{Ctx, Later, Outcome, Settlement};
use crate::modes::common::{self, LivePayer};
use crate::money::{self, Settle};
use crate::sessions::{self, Clock, End, Slot, Socket};
use gateway_adapters::upstream::encode_segment;
use gateway_adapters::upstream::socket::UpSocket;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_models::providers::ModelType;
use gateway_store::Record;
use meter::Meter;

/// The subprotocol Deepgram's browser clients offer with the key.
const PROTOCOL: &str = "token";

/// How long a closing stream waits for the provider's last results.
const LAST_RESULTS: Duration = Duration::from_secs(5);

/// Opens a live transcription (see the module).
pub async fn open(ctx: &mut Ctx, mut req: Request) -> Result<Outcome, ApiError> {
    let path = req.uri().path().to_owned();
    let payer = common::LivePayer::of(ctx, &path, ModelType::Stt)?;
    let (p, m) = (&payer.provider, &payer.model);
    let Some(live) = p.adapter.live_path(ModelType::Stt) else {
        return Err(ApiError::BadRequest(format!(
            "model: {}/{} has no live transcription (a deepgram model has)",
            p.id, m.id
        )));
    };
    let mut path = format!("{live}?model={}", encode_segment(&m.id));
    for (k, v) in ctx.query.iter().filter(|(k, _)| k != "model") {
        path.push_str(&format!("&{}={}", encode_segment(k), encode_segment(v)));
    }
    let meter = Meter::of(&ctx.query).map_err(ApiError::BadRequest)?;
    let handshake = sessions::handshake_key(&req)?;
    let slot = ctx.gw.sessions.take(payer.user.id)?;
    let limits = ctx.gw.config.sessions;
    let mut periods = Periods {
        payer,
        made: 0,
        current: None,
        held_secs: 0,
        billed: 0,
        cost: Decimal::ZERO,
        period: u64::from(limits.billing_period),
    };
    periods.hold_next().await?;
    let up = periods.payer.socket(&path, limits.max_frame).await?;
    let clock = sessions::Clock::start(limits, ctx.gw.sessions.going_away());
    let resp = sessions::accept(
        &mut req,
        handshake,
        Some(PROTOCOL),
        limits.max_frame,
        move |caller| {
            run(Live {
                caller,
                up,
                meter,
                periods,
                clock,
                slot,
                frames: 0,
            })
        },
    );
    Ok(Outcome::new(resp, Some(101)).settled(Settlement::Later(Later::Session)))
}

/// A live transcription's periods: the one held, and what was committed.
struct Periods {
    /// Who pays, and the session's span (ended with the session).
    payer: LivePayer,
    made: u64,
    /// The period held now, and when it began.
    current: Option<(Settle, Instant)>,
    /// Seconds of audio held so far (the end of the current period).
    held_secs: u64,
    /// Bytes of audio committed.
    billed: u64,
    cost: Decimal,
    period: u64,
}

impl Periods {
    /// Holds the next period's seconds under a request id of its own.
    async fn hold_next(&mut self) -> Result<(), ApiError> {
        self.made += 1;
        let request_id = self.payer.turn_id(self.made);
        let p = &self.payer;
        let amount = money::seconds_cost(&p.provider, &p.model, Decimal::from(self.period))?;
        let settle = p.hold(&request_id, amount).await?;
        self.current = Some((settle, Instant::now()));
        self.held_secs += self.period;
        Ok(())
    }

    /// Commits the audio received since the last commit (`to` bytes of
    /// audio in all, measured by `meter`) with the end of the current
    /// period's hold.
    async fn settle_period(&mut self, meter: &Meter, to: u64) -> Result<(), ApiError> {
        let Some((settle, started)) = self.current.take() else {
            return Ok(());
        };
        let seconds = meter.seconds(to - self.billed);
        if seconds.is_zero() {
            settle.abandon();
            return Ok(());
        }
        let request_id = settle.request_id.clone();
        let mut records = settle.seconds_records("audio_seconds", seconds);
        records.push(Record::Audit(self.payer.audit(request_id, started)));
        let cost = gateway_models::cost::Cost::of(&records);
        sessions::commit_turn(&self.payer.gw.store, records).await?;
        self.billed = to;
        self.cost += cost.map_or(Decimal::ZERO, |c| c.charged);
        gateway_base::telemetry::session_seconds_billed(
            rust_decimal::prelude::ToPrimitive::to_f64(&seconds).unwrap_or(0.0),
        );
        Ok(())
    }
}

/// An open live transcription.
struct Live {
    caller: Socket,
    up: UpSocket,
    meter: Meter,
    periods: Periods,
    clock: Clock,
    slot: Slot,
    frames: u64,
}

async fn run(mut s: Live) {
    let started = Instant::now();
    let end = s.relay().await;
    let audio = s.meter.audio;
    let end = match s.periods.settle_period(&s.meter, audio).await {
        Ok(()) => end,
        Err(e) => {
            tracing::error!(error = %e, "a live transcription's last period could not be committed");
            End::new(CloseCode::Error, "the gateway could not record the audio")
        }
    };
    let _ = s
        .caller
        .close(Some(CloseFrame {
            code: end.code,
            reason: end.reason.clone().into(),
        }))
        .await;
    s.up.close().await;
    tracing::info!(
        target: "access",
        route = s.periods.payer.route_id,
        request_id = %s.periods.payer.session_id,
        user_id = s.periods.payer.user.id,
        duration_ms = started.elapsed().as_millis() as u64,
        frames = s.frames,
        audio_bytes = s.meter.audio,
        periods = s.periods.made,
        cost = %s.periods.cost,
        close_code = u16::from(end.code),
        reason = %end.reason,
        "session"
    );
    s.periods.payer.trace.end(101);
    drop(s.slot);
}

impl Live {
    async fn relay(&mut self) -> End {
        loop {
            tokio::select! {
                m = self.caller.next() => {
                    self.clock.heard();
                    match m {
                        Some(Ok(Message::Binary(b))) if b.is_empty() => return self.finish(Message::Binary(b)).await,
                        Some(Ok(Message::Binary(b))) => {
                            if let Err(end) = self.audio(b).await {
                                return end;
                            }
                        }
                        Some(Ok(Message::Text(t))) => {
                            let closing = t.as_str().contains("\"CloseStream\"");
                            if closing {
                                return self.finish(Message::Text(t)).await;
                            }
                            if self.up.send(Message::Text(t)).await.is_err() {
                                return End::new(CloseCode::Error, "the model provider's socket ended");
                            }
                        }
                        Some(Ok(Message::Close(_))) | None => return End::new(CloseCode::Normal, ""),
                        Some(Ok(_)) => {}
                        Some(Err(_)) => return End::new(CloseCode::Normal, "the caller left"),
                    }
                }
                m = self.up.next() => match m {
                    Some(Ok(Message::Close(f))) => return provider_closed(f),
                    Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => {
                        self.frames += 1;
                        gateway_base::telemetry::session_frames(false, 1);
                        if self.caller.send(m).await.is_err() {
                            return End::new(CloseCode::Normal, "the caller left");
                        }
                    }
                    Some(Ok(_)) => {}
                    None | Some(Err(_)) => return End::new(CloseCode::Error, "the model provider's socket ended"),
                },
                end = self.clock.expired() => return end,
            }
        }
    }

    /// A piece of audio: relayed within the seconds held; at a period's
    /// end, the period committed and the next held first.
    async fn audio(&mut self, b: bytes::Bytes) -> Result<(), End> {
        let header = self
            .meter
            .header(&b)
            .map_err(|m| End::new(CloseCode::Unsupported, m))?;
        let mut at = header;
        self.send_up(b.slice(..header)).await?;
        while at < b.len() {
            let room = self.meter.room(self.periods.held_secs) as usize;
            let take = room.min(b.len() - at);
            self.send_up(b.slice(at..at + take)).await?;
            self.meter.audio += take as u64;
            at += take;
            if at < b.len() {
                let audio = self.meter.audio;
                if let Err(e) = self.periods.settle_period(&self.meter, audio).await {
                    tracing::error!(error = %e, "a live transcription's period could not be committed");
                    return Err(End::new(
                        CloseCode::Error,
                        "the gateway could not record the audio",
                    ));
                }
                self.periods
                    .hold_next()
                    .await
                    .map_err(|e| End::unheld(&e))?;
            }
        }
        Ok(())
    }

    async fn send_up(&mut self, b: bytes::Bytes) -> Result<(), End> {
        if b.is_empty() {
            return Ok(());
        }
        gateway_base::telemetry::session_frames(true, 1);
        self.up
            .send(Message::Binary(b))
            .await
            .map_err(|_| End::new(CloseCode::Error, "the model provider's socket ended"))
    }

    /// The caller finished: the provider is told, and its last results
    /// relayed until it closes (at most [`LAST_RESULTS`]).
    async fn finish(&mut self, closing: Message) -> End {
        if self.up.send(closing).await.is_err() {
            return End::new(CloseCode::Normal, "");
        }
        let until = tokio::time::sleep(LAST_RESULTS);
        tokio::pin!(until);
        loop {
            tokio::select! {
                m = self.up.next() => match m {
                    Some(Ok(m @ (Message::Text(_) | Message::Binary(_)))) => {
                        self.frames += 1;
                        let _ = self.caller.send(m).await;
                    }
                    Some(Ok(Message::Close(f))) => return provider_closed(f),
                    Some(Ok(_)) => {}
                    None | Some(Err(_)) => return End::new(CloseCode::Normal, ""),
                },
                _ = &mut until => return End::new(CloseCode::Normal, ""),
            }
        }
    }
}

/// The provider closed: its code and reason (scrubbed by the socket).
fn provider_closed(f: Option<CloseFrame>) -> End {
    match f {
        Some(f) => End::new(f.code, f.reason.to_string()),
        None => End::new(CloseCode::Normal, ""),
    }
}
