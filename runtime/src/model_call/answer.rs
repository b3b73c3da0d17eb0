//! Phases 6 to 8 of a model call answered whole: the answer read, what it
//! used settled, and annotated (its cost, the trace's usage, the response
//! cache's entry, the serving deployment's headers); and the answer of a
//! cache hit.

use http::{header, HeaderMap, HeaderValue, StatusCode};
use serde_json::Value;

use super::attempt;
use super::operation::{Operation, Used};
use super::prepare::Hit;
use crate::ctx::{Caller, Outcome, Settlement};
use crate::money::Settle;
use gateway_base::body::{self, Response};
use gateway_base::errors::ApiError;
use gateway_models::cache::Miss;
use gateway_models::cost::Cost;
use gateway_models::routing::Plan;
use gateway_store::Record;

/// Phases 5 to 8 of a whole answer: attempted, read (in OpenAI's shape;
/// an answer in the caller's own API read so on the side, and answered as
/// the provider sent it) and kept ([`Operation::keep`]), the trace and the
/// response cache told what it used, `bill` settled, its cost added to
/// the caller's answer (OpenAI's `usage.cost`; an own answer is not
/// reshaped: the cost header says it, and the response cache does not
/// keep it).
pub(super) async fn read<O: Operation>(
    c: &Caller<'_>,
    op: &O,
    plan: Plan,
    bill: &mut Option<Settle>,
    cache: Miss,
) -> Result<Outcome, ApiError> {
    let settle = bill
        .as_mut()
        .ok_or_else(|| ApiError::bug("a model call without its bill"))?;
    let (status, v, own) = attempt::json(c, plan, settle, op.what()).await?;
    let adapter = &settle.provider.adapter;
    let (mut v, native) = match own {
        true => (
            adapter.answer(op.op(), &settle.model.id, v.clone())?,
            Some(v),
        ),
        false => (adapter.answer(op.op(), &settle.model.id, v)?, None),
    };
    let used = op.used(&v)?;
    let mut records = op.keep(c, &mut v, &settle.provider).await?;
    let served = served_headers(settle);
    let name = deployment(settle);
    if let Used::Tokens { tokens, counted } = &used {
        c.trace.usage(|| gateway_base::traces::Usage {
            response_model: v.get("model").and_then(Value::as_str),
            input_tokens: tokens.prompt(),
            output_tokens: tokens.output,
            finish_reasons: op.finish_reasons(&v),
        });
        // An answer in the caller's own API is not kept: the cache keeps
        // OpenAI's answers, which it can replay as JSON or as a stream.
        if native.is_none() {
            cache.store_json(&name, &v, *tokens, *counted);
        }
    }
    // 7. settle
    let bill = bill
        .take()
        .ok_or_else(|| ApiError::bug("a model call without its bill"))?;
    records.extend(used.settle(bill));
    // 8. annotate
    let cost = Cost::of(&records);
    let (text, kept) = match native {
        Some(mut native) => {
            if let Some(cost) = cost.filter(|_| op.costed_own()) {
                cost.annotate(&mut native);
            }
            let text = native.to_string();
            let kept = op.record(c, &native, &text, &name);
            (text, kept)
        }
        None => {
            let mut v = v;
            if let Some(cost) = cost {
                cost.annotate(&mut v);
            }
            op.respond(c, v, &name)?
        }
    };
    records.extend(kept);
    let mut resp = body::json_text(StatusCode::OK, text);
    resp.headers_mut().extend(served);
    cache.mark(&mut resp);
    Ok(settled(resp, Some(status), records))
}

/// The answer of a cache hit: JSON, or the stream replayed (its events as
/// they came, then the usage event when the caller asked for it, then
/// `[DONE]`), with its records (committed before the answer, as a JSON
/// answer's).
pub(super) async fn hit<O: Operation>(
    c: &Caller<'_>,
    op: &O,
    hit: Hit,
) -> Result<Outcome, ApiError> {
    let mut served = HeaderMap::with_capacity(1);
    model_header(&mut served, &hit.settle);
    let name = deployment(&hit.settle);
    let (entry, mut records) = hit.settle(c).await?;
    let cost = Cost::of(&records);
    let mut resp = if op.streamed() {
        let events = entry.to_events().unwrap_or_default();
        let usage = op.usage_wanted().then(|| {
            let mut u = entry.usage_event(events.first());
            if let Some(c) = &cost {
                c.annotate(&mut u);
            }
            u
        });
        let replay = gateway_models::cache::replay(events, usage);
        let mut r = http::Response::new(op.restream(replay));
        event_stream_headers(r.headers_mut());
        r
    } else {
        let mut v = entry.to_json().unwrap_or_default();
        if let Some(c) = &cost {
            c.annotate(&mut v);
        }
        let (text, kept) = op.respond(c, v, &name)?;
        records.extend(kept);
        body::json_text(StatusCode::OK, text)
    };
    resp.headers_mut().extend(served);
    Miss::hit().mark(&mut resp);
    Ok(settled(resp, None, records))
}

/// An answer settled by its records (the pipeline's record phase commits
/// them with it).
fn settled(resp: Response, status: Option<u16>, records: Vec<Record>) -> Outcome {
    let mut out = Outcome::new(resp, status).settled(Settlement::ByModeRecords);
    out.records = records;
    out
}

/// The headers of a server-sent event stream.
pub(crate) fn event_stream_headers(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
}

/// The deployment a settle is at: `provider/model`.
pub(super) fn deployment(settle: &Settle) -> String {
    format!("{}/{}", settle.provider.id, settle.model.id)
}

/// `X-Gateway-Model`: the deployment that served (an answer from the
/// cache: its original's).
fn model_header(h: &mut HeaderMap, settle: &Settle) {
    if let Ok(v) = HeaderValue::from_str(&deployment(settle)) {
        h.insert("x-gateway-model", v);
    }
}

/// [`model_header`] and `X-Gateway-Attempts` (upstream attempts, the
/// served one included).
pub(crate) fn served_headers(settle: &Settle) -> HeaderMap {
    let mut h = HeaderMap::with_capacity(2);
    model_header(&mut h, settle);
    h.insert(
        "x-gateway-attempts",
        HeaderValue::from(settle.served.attempts),
    );
    h
}
