//! Phases 5 and 6 of a streamed model call: the attempt up to the first
//! byte, then the answer relayed chunk by chunk by [`crate::relay`], which
//! settles the bill (phase 7) and annotates the last event (phase 8) when
//! the stream ends, however it ends.

use futures_util::StreamExt;
use http::HeaderValue;

use super::answer::{deployment, event_stream_headers, served_headers};
use super::attempt;
use super::operation::Operation;
use crate::ctx::{Ctx, Later, Outcome, Settlement};
use crate::money::Settle;
use crate::relay::Relay;
use gateway_base::errors::ApiError;
use gateway_models::cache::Miss;
use gateway_models::routing::Plan;
use gateway_models::usage_tail::UsageTail;

/// The stream of `op`: one attempt reads the answer's headers and its
/// first chunk, each within the idle time-out (a failure before the first
/// byte may go elsewhere); then `bill` goes to the relay, under an
/// `X-Stream-Id` the caller can stop.
pub(super) async fn relay<O: Operation>(
    ctx: &mut Ctx,
    op: &O,
    plan: Plan,
    bill: &mut Option<Settle>,
    cache: Miss,
) -> Result<Outcome, ApiError> {
    let idle = ctx.gw.config.stream_timeout;
    let settle = bill
        .as_mut()
        .ok_or_else(|| ApiError::bug("a model call without its bill"))?;
    let (status, upstream, first) =
        attempt::run(ctx, plan, settle, |call| attempt::first_byte(call, idle)).await?;
    ctx.trace.upstream_status(status);
    let served = served_headers(settle);
    let capture = cache.capture(&deployment(settle));
    let registration = ctx.gw.streams.register(ctx.user_id()).await;
    let stream_id = registration.id.clone();
    let mut settle = bill
        .take()
        .ok_or_else(|| ApiError::bug("a model call without its bill"))?;
    settle.streamed = true;
    let translator = settle
        .provider
        .adapter
        .stream(op.op(), &settle.model.id, op.usage_wanted());
    let mut relay = Relay::new(
        ctx.gw.clone(),
        upstream,
        first,
        idle,
        registration,
        settle,
        op.counted_prompt(),
    );
    relay.translate(translator);
    relay.tail = UsageTail::wanting(op.usage_wanted());
    relay.capture = capture;
    relay.trace(ctx.trace.take());
    let body = http_body_util::BodyExt::boxed(http_body_util::StreamBody::new(
        relay.into_stream().map(|r| r.map(hyper::body::Frame::data)),
    ));
    let mut resp = http::Response::new(body);
    let h = resp.headers_mut();
    event_stream_headers(h);
    if let Ok(v) = HeaderValue::from_str(&stream_id) {
        h.insert("x-stream-id", v);
    }
    h.extend(served);
    cache.mark(&mut resp);
    Ok(Outcome::new(resp, Some(status)).settled(Settlement::Later(Later::Stream)))
}
