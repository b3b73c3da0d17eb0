//! Phases 5 and 6 of a streamed model call: the attempt up to the first
//! byte, then the answer relayed chunk by chunk by [`crate::relay`], which
//! settles the bill (phase 7) and annotates the last event (phase 8) when
//! the stream ends, however it ends.

use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue};

use super::answer::{deployment, event_stream_headers, served_headers};
use super::attempt;
use super::operation::Operation;
use crate::ctx::{Caller, Later, Outcome, Settlement};
use crate::money::Settle;
use crate::relay::Relay;
use gateway_base::errors::ApiError;
use gateway_base::traces::Span;
use gateway_models::cache::Miss;
use gateway_models::providers::stream::Tap;
use gateway_models::providers::StreamTranslator;
use gateway_models::routing::Plan;
use gateway_models::usage_tail::UsageTail;

/// A stream that answered its first byte: its relay, ready to answer
/// once it is handed the request's span ([`Started::answer`]).
pub(super) struct Started {
    relay: Relay,
    status: u16,
    stream_id: String,
    served: HeaderMap,
    cache: Miss,
    /// In the caller's own API (relayed as the provider sent it), served
    /// by this deployment; `None`: in OpenAI's, translated for the door.
    own: Option<String>,
}

/// The stream of `op`: one attempt reads the answer's headers and its
/// first chunk, each within the idle time-out (a failure before the first
/// byte may go elsewhere); then `bill` goes to the relay, under an
/// `X-Stream-Id` the caller can stop.
pub(super) async fn start<O: Operation>(
    c: &Caller<'_>,
    op: &O,
    plan: Plan,
    bill: &mut Option<Settle>,
    cache: Miss,
) -> Result<Started, ApiError> {
    let idle = c.gw.config.stream_timeout;
    let settle = bill
        .as_mut()
        .ok_or_else(|| ApiError::bug("a model call without its bill"))?;
    let ((status, upstream, first), own) =
        attempt::run(c, plan, settle, |call| attempt::first_byte(call, idle)).await?;
    c.trace.upstream_status(status);
    let served = served_headers(settle);
    // An own stream is not kept (see `answer::read`).
    let capture = (!own).then(|| cache.capture(&deployment(settle))).flatten();
    let own_name = own.then(|| deployment(settle));
    let registration = c.gw.streams.register(c.user_id()).await;
    let stream_id = registration.id.clone();
    let mut settle = bill
        .take()
        .ok_or_else(|| ApiError::bug("a model call without its bill"))?;
    settle.streamed = true;
    // An own stream goes as the provider sent it, read on the side; the
    // caller asked the provider, not the gateway, for its usage events.
    let usage_wanted = op.usage_wanted() && !own;
    let translator = settle
        .provider
        .adapter
        .stream(op.op(), &settle.model.id, usage_wanted);
    let translator = match own {
        true => op
            .own()
            .and_then(|o| o.reader.map(|read| read()))
            .or(translator)
            .map(|t| Box::new(Tap::new(t)) as Box<dyn StreamTranslator>),
        false => translator,
    };
    let mut relay = Relay::new(
        c.gw.clone(),
        upstream,
        first,
        idle,
        registration,
        settle,
        op.counted_prompt(),
    );
    relay.translate(translator);
    relay.tail = match op.own().filter(|_| own) {
        Some(o) => UsageTail::own(o.shape),
        None => UsageTail::wanting(usage_wanted),
    };
    relay.capture = capture;
    Ok(Started {
        relay,
        status,
        stream_id,
        served,
        cache,
        own: own_name,
    })
}

impl Started {
    /// The caller's answer: the relay (which ends `span` with the stream)
    /// as a server-sent event stream, in the door's API.
    pub(super) fn answer<O: Operation>(self, op: &O, span: Span) -> Outcome {
        let Started {
            mut relay,
            status,
            stream_id,
            served,
            cache,
            own,
        } = self;
        relay.trace(span);
        let body = http_body_util::BodyExt::boxed(http_body_util::StreamBody::new(
            relay.into_stream().map(|r| r.map(hyper::body::Frame::data)),
        ));
        let body = match &own {
            Some(name) => op.own_stream(body, name),
            None => op.restream(body),
        };
        let mut resp = http::Response::new(body);
        let h = resp.headers_mut();
        event_stream_headers(h);
        if let Ok(v) = HeaderValue::from_str(&stream_id) {
            h.insert("x-stream-id", v);
        }
        h.extend(served);
        cache.mark(&mut resp);
        Outcome::new(resp, Some(status)).settled(Settlement::Later(Later::Stream))
    }
}
