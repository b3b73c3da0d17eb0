//! `chat`, `completion` and `stop_stream`: OpenAI-compatible chat and text
//! completions through the model named `provider/model`, with credits held
//! before the upstream call and settled to the actual usage
//! ([`crate::credits`]), and streams relayed chunk by chunk
//! ([`crate::relay`]) under an `X-Stream-Id` the caller can stop.
//! [`messages`]: Anthropic's Messages API through the same path.

pub mod messages;

use std::time::Duration;

use futures_util::StreamExt;
use http::{header, HeaderValue, StatusCode};
use serde_json::{json, Map, Value};

use crate::ctx::{Ctx, Later, Outcome, Settlement};
use crate::model_call::{prepare_cached, Hit};
use crate::modes::common::read_body;
use crate::relay::Relay;
use gateway_adapters::upstream::Failed;
use gateway_base::body::{self, Request};
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;
use gateway_models::cache::Ask;
use gateway_models::cost::Cost;
use gateway_models::providers::{ModelType, Op, Tokens};

/// Time allowed to a whole streamed answer (idleness is bounded apart).
const STREAM_LIFETIME: Duration = Duration::from_secs(6 * 3600);

/// The text of a chat message's `content` (a string or a list of parts).
fn content_len(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Array(parts) => parts.iter().map(|p| p.to_string().len()).sum(),
        Value::Null => 0,
        other => other.to_string().len(),
    }
}

/// Bytes of prompt text and number of messages of a request.
fn prompt_size(body: &Map<String, Value>, chat: bool) -> Result<(usize, usize), ApiError> {
    if chat {
        let msgs = body
            .get("messages")
            .and_then(Value::as_array)
            .ok_or_else(|| ApiError::BadRequest("messages: must be a list".into()))?;
        if msgs.is_empty() {
            return Err(ApiError::BadRequest(
                "messages: must hold at least one message".into(),
            ));
        }
        let mut bytes = 0;
        for m in msgs {
            let m = m.as_object().ok_or_else(|| {
                ApiError::BadRequest("messages: each message must be an object".into())
            })?;
            bytes += m.get("content").map_or(0, content_len);
        }
        Ok((bytes, msgs.len()))
    } else {
        Ok((body.get("prompt").map_or(0, content_len), 1))
    }
}

/// Tokens of the answer's text when the upstream gives no `usage`.
fn counted_output(v: &Value) -> u64 {
    let chars: usize = v
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            c.get("message")
                .and_then(|m| m.get("content"))
                .or_else(|| c.get("text"))
                .and_then(Value::as_str)
        })
        .map(str::len)
        .sum();
    chars.div_ceil(4) as u64
}

/// `chat` (`chat = true`) and `completion`.
pub async fn complete(ctx: &mut Ctx, req: Request, chat: bool) -> Result<Outcome, ApiError> {
    let ask = Ask::from_headers(req.headers())?;
    let body = read_body(ctx, req).await?;
    complete_body(ctx, body, chat, &ask).await
}

/// [`complete`] of a body already read (and validated), with the
/// request's response-cache headers `ask` ([`gateway_models::cache`]).
pub async fn complete_body(
    ctx: &mut Ctx,
    body: Map<String, Value>,
    chat: bool,
    ask: &Ask,
) -> Result<Outcome, ApiError> {
    let (bytes, _messages) = prompt_size(&body, chat)?;
    let (want, op) = if chat {
        (ModelType::Chat, Op::Chat)
    } else {
        (ModelType::Completion, Op::Completion)
    };
    let stream = body.get("stream") == Some(&Value::Bool(true));
    let tail = gateway_models::usage_tail::UsageTail::of(&body);
    // The hold: everything the upstream body asks for ([`gateway_models::bounds`]),
    // on the most expensive candidate deployment.
    let ready = prepare_cached(ctx, body, want, op, Some((ask, stream)), |m, up, shape| {
        if chat {
            gateway_models::bounds::chat(up, shape, m.context_window)
        } else {
            gateway_models::bounds::completion(up, m.context_window)
        }
    })
    .await?;
    let mut prepared = match ready {
        Ok(p) => p,
        Err(hit) => return answer_hit(ctx, hit, stream, tail.usage_wanted()).await,
    };
    let cache = std::mem::take(&mut prepared.cache);
    if !stream {
        let ((status, v), settle) = prepared.send(ctx, "a completion").await?;
        let mut v = settle.provider.adapter.answer(op, &settle.model.id, v)?;
        let (tokens, counted) = match v.get("usage").and_then(Tokens::from_openai) {
            Some(t) => (t, false),
            None => (
                Tokens::new(bytes.div_ceil(4) as u64, counted_output(&v)),
                true,
            ),
        };
        ctx.trace.usage(|| gateway_base::traces::Usage {
            response_model: v.get("model").and_then(Value::as_str),
            input_tokens: tokens.prompt(),
            output_tokens: tokens.output,
            finish_reasons: finish_reasons(&v),
        });
        let served = served_headers(&settle);
        cache.store_json(&deployment(&settle), &v, tokens, counted);
        let records = settle.token_records(tokens, counted, "complete");
        if let Some(c) = Cost::of(&records) {
            c.annotate(&mut v);
        }
        let mut resp = body::json(StatusCode::OK, &v);
        resp.headers_mut().extend(served);
        cache.mark(&mut resp);
        let mut out = Outcome::new(resp, Some(status)).settled(Settlement::ByModeRecords);
        out.records = records;
        return Ok(out);
    }
    let idle = ctx.gw.config.stream_timeout;
    // One attempt: the answer's headers and its first chunk, each within
    // the idle time-out; a failure before the first byte may go elsewhere.
    let ((status, upstream, first), settle) =
        prepared.run(ctx, |call| first_byte(call, idle)).await?;
    ctx.trace.upstream_status(status);
    let served = served_headers(&settle);
    let registration = ctx.gw.streams.register(ctx.user_id()).await;
    let stream_id = registration.id.clone();
    let capture = cache.capture(&deployment(&settle));
    let mut settle = settle;
    settle.streamed = true;
    let translator = settle
        .provider
        .adapter
        .stream(op, &settle.model.id, tail.usage_wanted());
    let mut relay = Relay::new(
        ctx.gw.clone(),
        upstream,
        first,
        idle,
        registration,
        settle,
        bytes.div_ceil(4) as u64,
    );
    relay.translate(translator);
    relay.tail = tail;
    relay.capture = capture;
    relay.trace(ctx.trace.take());
    let body = http_body_util::BodyExt::boxed(http_body_util::StreamBody::new(
        relay.into_stream().map(|r| r.map(hyper::body::Frame::data)),
    ));
    let mut resp = http::Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(&stream_id) {
        h.insert("x-stream-id", v);
    }
    h.extend(served);
    cache.mark(&mut resp);
    Ok(Outcome::new(resp, Some(status)).settled(Settlement::Later(Later::Stream)))
}

/// The `finish_reason` of each choice of a completion (for its span).
fn finish_reasons(v: &Value) -> Vec<String> {
    v.get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("finish_reason").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// One streamed attempt: the answer's headers and its first chunk, each
/// within the idle time-out `idle`; a failure before the first byte may be
/// retried elsewhere ([`gateway_models::routing`]).
async fn first_byte(
    call: gateway_adapters::upstream::Call,
    idle: Duration,
) -> Result<
    (
        u16,
        gateway_adapters::upstream::ByteStream,
        Option<bytes::Bytes>,
    ),
    Failed,
> {
    let timed_out = || {
        Failed::new(
            gateway_adapters::upstream::FailureKind::Timeout,
            ApiError::GatewayTimeout(format!(
                "the model provider sent nothing for {} s",
                idle.as_secs()
            )),
        )
    };
    let answer = tokio::time::timeout(idle, call.timeout(STREAM_LIFETIME).try_send())
        .await
        .map_err(|_| timed_out())??;
    let status = answer.status();
    let mut upstream = answer.byte_stream();
    let first = match tokio::time::timeout(idle, upstream.next())
        .await
        .map_err(|_| timed_out())?
    {
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => {
            tracing::warn!(error = %e, "model stream failed before its first byte");
            return Err(Failed::new(gateway_adapters::upstream::FailureKind::BodyBroken, ApiError::Network(
                    "network error contacting the model provider: connection closed while reading the answer".into(),
                )));
        }
        None => None,
    };
    Ok((status, upstream, first))
}

/// The deployment a settle is at: `provider/model`.
fn deployment(settle: &crate::credits::Settle) -> String {
    format!("{}/{}", settle.provider.id, settle.model.id)
}

/// `X-Gateway-Model`: the deployment that served (an answer from the
/// cache: its original's).
fn model_header(h: &mut http::HeaderMap, settle: &crate::credits::Settle) {
    if let Ok(v) = HeaderValue::from_str(&deployment(settle)) {
        h.insert("x-gateway-model", v);
    }
}

/// [`model_header`] and `X-Gateway-Attempts` (upstream attempts, the
/// served one included).
fn served_headers(settle: &crate::credits::Settle) -> http::HeaderMap {
    let mut h = http::HeaderMap::with_capacity(2);
    model_header(&mut h, settle);
    h.insert(
        "x-gateway-attempts",
        HeaderValue::from(settle.served.attempts),
    );
    h
}

/// The answer of a cache hit: JSON, or the stream replayed (its events as
/// they came, then the usage event when `usage_wanted`, then `[DONE]`),
/// with its records (committed before the answer, as a JSON answer's).
async fn answer_hit(
    ctx: &Ctx,
    hit: Hit,
    stream: bool,
    usage_wanted: bool,
) -> Result<Outcome, ApiError> {
    let mut served = http::HeaderMap::with_capacity(1);
    model_header(&mut served, &hit.settle);
    let (entry, records) = hit.settle(ctx).await?;
    let cost = Cost::of(&records);
    let mut resp = if stream {
        let events = entry.to_events().unwrap_or_default();
        let usage = usage_wanted.then(|| {
            let mut u = entry.usage_event(events.first());
            if let Some(c) = &cost {
                c.annotate(&mut u);
            }
            u
        });
        let mut r = http::Response::new(gateway_models::cache::replay(events, usage));
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        r
    } else {
        let mut v = entry.to_json().unwrap_or_default();
        if let Some(c) = &cost {
            c.annotate(&mut v);
        }
        body::json(StatusCode::OK, &v)
    };
    resp.headers_mut().extend(served);
    gateway_models::cache::Miss::hit().mark(&mut resp);
    let mut out = Outcome::new(resp, None).settled(Settlement::ByModeRecords);
    out.records = records;
    Ok(out)
}

/// `stop_stream`: ends the caller's open stream.
pub async fn stop(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let id = params
        .get("stream_id")
        .ok_or_else(|| ApiError::bug("stop_stream row without {stream_id}"))?;
    if !ctx.gw.streams.stop(&id, ctx.user_id()).await {
        return Err(ApiError::NotFound(
            "stream not found (finished, stopped or never created)".into(),
        ));
    }
    Ok(Outcome::new(
        body::json(StatusCode::OK, &json!({"success": true})),
        None,
    ))
}
