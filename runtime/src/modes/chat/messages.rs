//! `messages` and `count_tokens`: Anthropic's Messages API as a second
//! front door to any chat model. The request is translated into the chat
//! path's body ([`gateway_models::messages_api::request`]) and run by
//! the model call as a chat completion (the same hold, BYOK, stream relay, stop,
//! usage record and debit as `/chat/completions`); its answer is
//! translated back ([`gateway_models::messages_api::answer`]), or its stream, chunk
//! by chunk ([`gateway_models::messages_api::events`]).

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::read_body;
use crate::ctx::{Ctx, Outcome};
use crate::model_call::{Operation, Own, Used};
use gateway_base::body::{self, Body, Request};
use gateway_base::errors::ApiError;
use gateway_models::bounds::{Bound, Shape};
use gateway_models::messages_api::{answer, events, request};
use gateway_models::providers::{Model, ModelType, Op, Provider};

/// The model name the caller gave (answered back as the message's `model`).
fn model_of(body: &Map<String, Value>) -> String {
    body.get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The caller's headers of Anthropic's API passed on to an `anthropic`
/// provider with its body.
const OWN_HEADERS: [&str; 2] = ["anthropic-beta", "anthropic-version"];

/// `messages`: `POST /messages`.
pub async fn messages(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let ask = gateway_models::cache::Ask::from_headers(req.headers())?;
    let headers = OWN_HEADERS
        .iter()
        .filter_map(|&n| {
            let v = req.headers().get(n)?.clone();
            Some((http::HeaderName::from_static(n), v))
        })
        .collect();
    let body = read_body(ctx, req).await?;
    let stream = body.get("stream") == Some(&Value::Bool(true));
    let (bytes, _) = super::prompt_size(&body, true)?;
    let op = Messages {
        chat: super::Completion {
            chat: true,
            stream,
            usage_wanted: stream,
            prompt_bytes: bytes,
        },
        model: model_of(&body),
        own: Own {
            shape: Shape::Anthropic,
            method: "messages".into(),
            headers,
            reader: None,
        },
    };
    crate::model_call::run(ctx, &op, body, Some(&ask)).await
}

/// A message of Anthropic's Messages API, as the model call asks it: to an
/// `anthropic` provider the caller's body as sent and the answer as the
/// provider's; to the others, the chat completion it translates into
/// ([`request::to_chat`]) and the answer translated back
/// ([`answer::from_chat`], [`events::Translator`]).
struct Messages {
    chat: super::Completion,
    /// The model name the caller gave.
    model: String,
    own: Own,
}

impl Operation for Messages {
    fn model_type(&self) -> ModelType {
        ModelType::Chat
    }

    fn op(&self) -> Op {
        Op::Chat
    }

    fn what(&self) -> &'static str {
        "a message"
    }

    fn bound(&self, m: &Model, up: &Map<String, Value>, shape: Shape) -> Result<Bound, ApiError> {
        self.chat.bound(m, up, shape)
    }

    fn streamed(&self) -> bool {
        self.chat.stream
    }

    fn usage_wanted(&self) -> bool {
        self.chat.usage_wanted
    }

    fn counted_prompt(&self) -> u64 {
        self.chat.counted_prompt()
    }

    fn used(&self, v: &Value) -> Result<Used, ApiError> {
        self.chat.used(v)
    }

    fn finish_reasons(&self, v: &Value) -> Vec<String> {
        self.chat.finish_reasons(v)
    }

    fn answer(&self, v: Value, _served: &str) -> Result<Value, ApiError> {
        Ok(answer::from_chat(&v, &self.model))
    }

    fn own(&self) -> Option<&Own> {
        Some(&self.own)
    }

    fn translate(&self, body: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
        request::to_chat(&body)
    }

    fn restream(&self, chunks: Body) -> Body {
        gateway_models::restream::restream(chunks, events::Translator::new(&self.model))
    }
}

/// `count_tokens`: `POST /messages/count_tokens`, free. To a model of an
/// `anthropic` provider, the provider's own count ([`own_count`]): its
/// `/v1/messages/count_tokens` asked with the caller's body (the gateway's
/// fields removed, the provider's model id) and the caller's
/// `anthropic-beta` / `anthropic-version`, answered as the provider
/// answered. To any other model, `{"input_tokens": N, "estimate": true}`,
/// N the input a hold counts for the same request
/// ([`gateway_models::bounds::chat`] of the body the provider would be
/// sent): an upper bound of the provider's count, not its tokenizer's
/// figure. The API key's model list applies (403) as to a message.
pub async fn count_tokens(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let headers = own_headers(&req);
    let body = read_body(ctx, req).await?;
    let (p, m) = ctx
        .catalogue
        .resolve(body.get("model").and_then(Value::as_str), ModelType::Chat)?;
    crate::model_call::allowed(&ctx.caller(), p, m, None)?;
    if p.adapter.shape() == Shape::Anthropic {
        return own_count(ctx, p, m, headers, body).await;
    }
    let chat = request::to_chat(&body)?;
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

/// The caller's headers of Anthropic's API ([`OWN_HEADERS`]).
fn own_headers(req: &Request) -> Vec<(http::HeaderName, http::HeaderValue)> {
    OWN_HEADERS
        .iter()
        .filter_map(|&n| {
            let v = req.headers().get(n)?.clone();
            Some((http::HeaderName::from_static(n), v))
        })
        .collect()
}

/// The provider's own count of `body` for model `m` of the `anthropic`
/// provider `p`: called through the upstream client with the provider's
/// key, answered with the provider's JSON (with `request-id`, the
/// gateway's request id, as every answer of the door).
async fn own_count(
    ctx: &Ctx,
    p: &Provider,
    m: &Model,
    headers: Vec<(http::HeaderName, http::HeaderValue)>,
    body: Map<String, Value>,
) -> Result<Outcome, ApiError> {
    let key = p
        .key
        .as_ref()
        .ok_or_else(|| gateway_models::providers::config_missing(p))?;
    let sent = p
        .adapter
        .own_body(gateway_models::providers::openai::request(
            Op::Chat,
            &m.id,
            body,
        ));
    let path = p.adapter.own_path(&m.id, "messages/count_tokens");
    let mut call = ctx.gw.upstream.llm_call_as(
        gateway_base::spec::Method::Post,
        &p.base_url,
        &path,
        key,
        p.adapter.key_form(),
    );
    for (name, value) in headers {
        call = call.with_header(name, value);
    }
    let answer = call.json(&sent).send().await?;
    let status = StatusCode::from_u16(answer.status()).unwrap_or(StatusCode::OK);
    let counted = answer.json("a token count").await?;
    Ok(Outcome::new(body::json(status, &counted), None))
}
