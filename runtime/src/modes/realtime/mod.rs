//! `realtime`: OpenAI's Realtime API over a WebSocket (`GET /realtime?model=…`
//! with `Upgrade: websocket`), relayed to a realtime model's own WebSocket.
//!
//! Before the upgrade, with plain HTTP errors in the row's format: the
//! caller's key (the pipeline; a browser's in the subprotocol list, never
//! sent on), the model (`type = "realtime"` of an `openai` provider, and
//! the key's allow-list), the handshake, a place among the user's open
//! sessions (`GATEWAY_REALTIME_MAX_SESSIONS`, 429), and the provider's
//! socket opened with the provider's key. Then `101` (the `realtime`
//! subprotocol when offered) and the session runs in a task of its own:
//! [`relay`] moves the events, [`turns`] holds and bills each response,
//! [`vad`] keeps the responses server VAD would start to the gateway.

mod relay;
mod turns;
mod vad;

use crate::ctx::{Ctx, Later, Outcome, Settlement};
use crate::modes::common;
use crate::sessions;
use gateway_adapters::upstream::encode_segment;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_models::providers::ModelType;

/// The subprotocol OpenAI's clients offer, answered.
const PROTOCOL: &str = "realtime";

/// Opens a realtime session (see the module).
pub async fn open(ctx: &mut Ctx, mut req: Request) -> Result<Outcome, ApiError> {
    if common::query_str(ctx, "model").is_none() {
        return Err(ApiError::BadRequest("model: required (`?model=…`)".into()));
    }
    let path = req.uri().path().to_owned();
    let payer = common::LivePayer::of(ctx, &path, ModelType::Realtime)?;
    let handshake = sessions::handshake_key(&req)?;
    let slot = ctx.gw.sessions.take(payer.user.id)?;
    let limits = ctx.gw.config.sessions;
    let (p, m) = (&payer.provider, &payer.model);
    let live = p
        .adapter
        .live_path(ModelType::Realtime)
        .ok_or_else(|| ApiError::bug("a realtime model without its provider's socket"))?;
    let up = payer
        .socket(
            &format!("{live}?model={}", encode_segment(&m.id)),
            limits.max_frame,
        )
        .await?;
    payer
        .trace
        .model("realtime", Some(&format!("{}/{}", p.id, m.id)), None);
    let clock = sessions::Clock::start(limits, ctx.gw.sessions.going_away());
    let resp = sessions::accept(
        &mut req,
        handshake,
        Some(PROTOCOL),
        limits.max_frame,
        move |caller| {
            relay::run(relay::Session {
                caller,
                up,
                turns: turns::Turns::new(payer),
                clock,
                slot,
                counts: Default::default(),
                caller_open: true,
                vad: Default::default(),
            })
        },
    );
    Ok(Outcome::new(resp, Some(101)).settled(Settlement::Later(Later::Session)))
}
