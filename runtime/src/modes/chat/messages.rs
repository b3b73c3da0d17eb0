//! `messages` and `count_tokens`: Anthropic's Messages API as a second
//! front door to any chat model. The request is translated into the chat
//! path's body ([`gateway_models::messages_api::request`]) and run by
//! the model call as a chat completion (the same hold, BYOK, stream relay, stop,
//! usage record and debit as `/chat/completions`); its answer is
//! translated back ([`gateway_models::messages_api::answer`]), or its stream, chunk
//! by chunk ([`gateway_models::messages_api::events`]).

use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::{json, Map, Value};

use super::read_body;
use crate::ctx::{Ctx, Outcome};
use gateway_base::body::{self, Request};
use gateway_base::errors::ApiError;
use gateway_models::messages_api::{answer, events, request};
use gateway_models::providers::{ModelType, Op};

/// The model name the caller gave (answered back as the message's `model`).
fn model_of(body: &Map<String, Value>) -> String {
    body.get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `messages`: `POST /messages`.
pub async fn messages(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let ask = gateway_models::cache::Ask::from_headers(req.headers())?;
    let body = read_body(ctx, req).await?;
    let model = model_of(&body);
    let chat = request::to_chat(&body)?;
    let stream = chat.get("stream") == Some(&Value::Bool(true));
    let op = super::completion(&chat, true)?;
    let mut out = crate::model_call::run(ctx, &op, chat, Some(&ask)).await?;
    let (parts, inner) =
        std::mem::replace(&mut out.response, body::json(StatusCode::OK, &json!({}))).into_parts();
    out.response = if stream {
        let translated = events::translate(inner.into_data_stream(), &model);
        let frames = futures_util::StreamExt::map(translated, |r| r.map(hyper::body::Frame::data));
        http::Response::from_parts(
            parts,
            BodyExt::boxed(http_body_util::StreamBody::new(frames)),
        )
    } else {
        // The chat answer is whole in memory already (never a stream).
        let bytes = inner
            .collect()
            .await
            .map_err(|e| ApiError::internal("reading the chat answer", e))?
            .to_bytes();
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::internal("reading the chat answer", e))?;
        let mut resp = body::json(StatusCode::OK, &answer::from_chat(&v, &model));
        if let Some(h) = parts.headers.get(gateway_models::cache::HEADER) {
            resp.headers_mut()
                .insert(gateway_models::cache::HEADER, h.clone());
        }
        resp
    };
    Ok(out)
}

/// `count_tokens`: `POST /messages/count_tokens`: `{"input_tokens": N,
/// "estimate": true}`, N the input a hold counts for the same request
/// ([`gateway_models::bounds::chat`] of the body the provider would be sent): an
/// upper bound of the provider's count, not its tokenizer's figure. Free.
pub async fn count_tokens(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let body = read_body(ctx, req).await?;
    let chat = request::to_chat(&body)?;
    let (p, m) = ctx
        .gw
        .providers
        .resolve(chat.get("model").and_then(Value::as_str), ModelType::Chat)?;
    let upstream = p.adapter.native(
        Op::Chat,
        m,
        gateway_models::providers::openai::request(Op::Chat, &m.id, chat),
    )?;
    let bound = gateway_models::bounds::chat(&upstream.body, p.adapter.shape(), m.context_window)?;
    Ok(Outcome::new(
        body::json(
            StatusCode::OK,
            &json!({"input_tokens": bound.input, "estimate": true}),
        ),
        None,
    ))
}
