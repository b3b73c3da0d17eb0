//! The model call: one request to a model, from its body to its bill, as
//! one pipeline of named phases (pingora's `ProxyHttp` and its phase chart
//! are the model). The driver ([`run`]) owns what every model operation
//! shares; an operation ([`Operation`]: chat, completion, embeddings,
//! images) says only what is its own, so that a mode is its translation
//! and the money, the routing and the cache are written once.
//!
//! ```text
//!  body ─▶ resolve ─▶ bound ─▶ cache lookup ─┬─ hit ─▶ answer the entry (its own hold) ─┐
//!                                            └ miss ─▶ hold ─▶ attempt ─┬─▶ read ─▶ settle ─▶ annotate ─┤
//!                                                                       └─▶ relay (settles at its end) ─┤
//!                                                                                                 done ◀┘
//! ```
//!
//! 1. **resolve** — the deployments the body names (a route, `models:
//!    [...]` or one `model`; with the caller's `byok_api_key` only its
//!    provider's), the API key's model list (403) ([`resolve`]).
//! 2. **bound** — each candidate's upstream body in its provider's shape
//!    and what it can make the provider do ([`Operation::bound`]); the most
//!    expensive candidate's cost is what is held ([`prepare`]).
//! 3. **cache lookup** — the response cache, when the request asks for it:
//!    a hit is answered from its entry, at the serving deployment's prices
//!    ([`answer::hit`]).
//! 4. **hold** — the request counted against its key's and its model's
//!    `rpm`/`tpm` limits (429; [`limits`]), then the caller's credit for
//!    that cost (402 when it does not fit; nothing with BYOK) and the key
//!    the call is sent with.
//! 5. **attempt** — the routing loop: each candidate in turn until one
//!    answers, retried where the failure allows ([`attempt`]).
//! 6. **read or relay** — a whole answer read and what it used
//!    ([`Operation::used`], [`Operation::keep`]), or a stream relayed chunk
//!    by chunk ([`stream`], [`crate::relay`], which settles at its end).
//! 7. **settle** — the usage record, its debit and the end of the hold
//!    ([`crate::money::Settle`]), committed by the request pipeline's
//!    record phase with the answer.
//! 8. **annotate** — the cost in `usage.cost`, the trace's usage, the
//!    response cache's entry, `X-Gateway-Model`, `X-Gateway-Attempts` and
//!    the limits' `x-ratelimit-*`.
//! 9. **done** — always runs, with the error when there is one (pingora's
//!    `logging`): a bill that no answer took is handed to the money code,
//!    which ends its hold ([`crate::money::Settle::abandon`]); the hold's
//!    `Drop` stays only as the safety net of a cancelled request.
//!
//! Transcription and video jobs call their provider once, without the
//! routing loop: they use phases 1 and 4 alone ([`pick_model`]). Speech
//! (`crate::modes::speech`) answers audio, not JSON: it uses phases 1, 4
//! and 5 ([`resolve`], [`hold_for`], [`plan`], [`first_byte`]) and bills
//! its own way.

mod answer;
mod attempt;
mod limits;
mod operation;
mod prepare;
mod resolve;
mod stream;

use serde_json::{Map, Value};

use crate::ctx::{Ctx, Outcome};
use crate::money::Settle;
use gateway_base::errors::ApiError;
use gateway_models::cache::Ask;

pub(crate) use answer::{event_stream_headers, served_headers};
pub(crate) use operation::{Operation, Own, Used};
pub(crate) use prepare::{plan, Built};
pub(crate) use resolve::{allowed, hold_for, pick_model, resolve};

/// Phase 5 for an answer that is not JSON (speech's audio): `plan` sent
/// through the routing loop up to the answer's first byte (a failure
/// before it may go elsewhere); `bill` becomes the serving deployment's.
/// The upstream's status, its stream and the first chunk.
pub(crate) async fn first_byte(
    c: &crate::ctx::Caller<'_>,
    plan: gateway_models::routing::Plan,
    bill: &mut Settle,
) -> Result<
    (
        u16,
        gateway_adapters::upstream::ByteStream,
        Option<bytes::Bytes>,
    ),
    ApiError,
> {
    let idle = c.gw.config.stream_timeout;
    let (v, _own) = attempt::run(c, plan, bill, |call| attempt::first_byte(call, idle)).await?;
    c.trace.upstream_status(v.0);
    Ok(v)
}

/// A model call of `op` for the (read and validated) `body`, with the
/// request's response-cache headers `ask` when the operation's answers
/// may be cached: the phases in order.
pub(crate) async fn run<O: Operation>(
    ctx: &mut Ctx,
    op: &O,
    body: Map<String, Value>,
    ask: Option<&Ask>,
) -> Result<Outcome, ApiError> {
    let c = ctx.caller();
    // 1–4: resolve, bound, cache lookup, hold.
    let cache = ask.map(|a| (a, op.streamed()));
    let ready = match prepare::prepare(&c, op, body, cache).await {
        Ok(Ok(ready)) => ready,
        Ok(Err(hit)) => return done(None, answer::hit(&c, op, hit).await),
        Err(e) => return done(None, Err(e)),
    };
    let limits = ready.settle.admission.as_ref().map(|a| a.report);
    let mut bill = Some(ready.settle);
    // 5–8: attempt, read or relay, settle, annotate.
    let result = if op.streamed() {
        match stream::start(&c, op, ready.plan, &mut bill, ready.cache).await {
            // The span goes with the stream, which ends it.
            Ok(started) => Ok(started.answer(op, ctx.trace.take())),
            Err(e) => Err(e),
        }
    } else {
        answer::read(&c, op, ready.plan, &mut bill, ready.cache).await
    };
    let result = result.map(|mut o| {
        if let Some(r) = &limits {
            limits::annotate(&mut o.response, r);
        }
        o
    });
    // 9: done.
    done(bill, result)
}

/// Phase 9, which always runs, with the error when there is one: a bill
/// that no answer took (the call failed after its hold) is handed to the
/// money code, which ends the hold now rather than leaving it to `Drop`.
fn done(bill: Option<Settle>, result: Result<Outcome, ApiError>) -> Result<Outcome, ApiError> {
    if let Some(bill) = bill {
        if let Err(e) = &result {
            tracing::debug!(error = %e, "a model call failed after its hold; the hold ends");
        }
        bill.abandon();
    }
    result
}
