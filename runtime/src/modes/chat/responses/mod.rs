//! `responses`: OpenAI's Responses API as a door to any chat model
//! (`POST /api/v1/responses`). An `openai` provider that serves
//! `/responses` itself (`responses = true`) is sent the caller's body as
//! it came ([`Own`]) and answers as it does; every other deployment gets
//! the chat completion it translates into
//! ([`gateway_models::responses_api::request::to_chat`]) and its answer,
//! or its stream event by event, translated back. The model call is the
//! chat path's: the same hold, routing, cache, relay, usage record and
//! debit.
//!
//! The conversation is the gateway's: with `store` (the default) a
//! response is kept ([`stored`]) with its bill, and `previous_response_id`
//! rebuilds the chain it continues, sent whole to a translated deployment
//! (so that a conversation moves between providers on a fallback), and
//! only the new input to a native one that stored the previous turn
//! itself ([`Respond::own_body`]). The other routes of the API (retrieve,
//! delete, input items, cancel) are [`stored`]'s.

mod background;
pub mod stored;

use serde_json::{Map, Value};

use super::read_body;
use crate::ctx::{Caller, Ctx, Outcome};
use crate::model_call::{Operation, Own, Used};
use gateway_base::body::{Body, Request};
use gateway_base::errors::ApiError;
use gateway_models::bounds::{Bound, Shape};
use gateway_models::providers::{Model, ModelType, Op, Provider, Tokens};
use gateway_models::responses_api::{answer, events, request};
use gateway_store::Record;
use stored::{Keeper, Turn};

/// `responses`: `POST /responses`.
pub async fn create(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let ask = gateway_models::cache::Ask::from_headers(req.headers())?;
    let mut body = read_body(ctx, req).await?;
    let background = body.get("background") == Some(&Value::Bool(true));
    if background && body.get("store") == Some(&Value::Bool(false)) {
        return Err(ApiError::BadRequest(
            "background: a background response is stored to be polled: it cannot have store false"
                .into(),
        ));
    }
    let items = request::input_items(&body)?;
    let previous = match body.get("previous_response_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(_) => {
            return Err(ApiError::BadRequest(
                "previous_response_id: must be a string".into(),
            ))
        }
    };
    let turn = Turn::load(&ctx.caller(), previous.as_deref()).await?;
    let id = answer::response_id();
    let echo = answer::Echo::of(&body, id.clone(), unix_now());
    let keeper = Keeper::new(&ctx.caller(), &body, &items, &id, previous)?;
    // A background run is a stream of the gateway's own, its events kept.
    if background {
        body.remove("background");
        body.insert("stream".into(), Value::Bool(true));
    }
    let stream = body.get("stream") == Some(&Value::Bool(true));
    let op = Respond {
        chat: super::Completion {
            chat: true,
            stream,
            usage_wanted: stream,
            prompt_bytes: prompt_bytes(&body, &items, &turn.history),
        },
        echo,
        turn,
        keeper,
        own: Own {
            shape: Shape::Responses,
            method: "responses".into(),
            headers: Vec::new(),
            reader: Some(gateway_models::responses_api::usage_reader),
        },
    };
    if background {
        let queued = op.echo.response("queued", Vec::new(), None);
        let record = op
            .keeper
            .queued(&queued)
            .ok_or_else(|| ApiError::bug("a background response without its record"))?;
        return background::start(ctx, op, body, queued, record).await;
    }
    crate::model_call::run(ctx, &op, body, Some(&ask)).await
}

/// Seconds since the epoch (a response's `created_at`).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Bytes of the text a request sends: its instructions, the conversation
/// it continues and its new input (the prompt's tokens when the provider
/// reports none).
fn prompt_bytes(body: &Map<String, Value>, items: &[Value], history: &[Value]) -> usize {
    let instructions = body
        .get("instructions")
        .and_then(Value::as_str)
        .map_or(0, str::len);
    let items: usize = history
        .iter()
        .chain(items)
        .map(|i| match i.get("content").or_else(|| i.get("output")) {
            Some(c) => super::content_len(c),
            None => i.get("arguments").map_or(0, super::content_len),
        })
        .sum();
    instructions + items
}

/// A response of OpenAI's Responses API, as the model call asks it: to a
/// native deployment the caller's body (the conversation as that provider
/// knows it) and its answer as sent; to the others the chat completion it
/// translates into and the answer translated back.
struct Respond {
    chat: super::Completion,
    /// What the response object repeats of its request, and its id.
    echo: answer::Echo,
    /// The conversation the request continues.
    turn: Turn,
    /// Where the response is kept (with `store`).
    keeper: Keeper,
    own: Own,
}

impl Operation for Respond {
    fn model_type(&self) -> ModelType {
        ModelType::Chat
    }

    fn op(&self) -> Op {
        Op::Chat
    }

    fn what(&self) -> &'static str {
        "a response"
    }

    /// A native body's bound is the Responses API's
    /// ([`gateway_models::bounds::responses`]) over the whole conversation
    /// the provider reads (a body continuing a turn the provider stored
    /// is bounded with that turn's chain as its input); a translated
    /// one's chat's.
    fn bound(&self, m: &Model, up: &Map<String, Value>, shape: Shape) -> Result<Bound, ApiError> {
        match shape {
            Shape::Responses => {
                let whole = self.turn.whole_body(up);
                gateway_models::bounds::responses(whole.as_ref().unwrap_or(up), m.context_window)
            }
            _ => self.chat.bound(m, up, shape),
        }
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

    /// A native answer's usage is the Responses API's; a translated one's
    /// chat's.
    fn used(&self, v: &Value) -> Result<Used, ApiError> {
        if v.get("object").and_then(Value::as_str) != Some("response") {
            return self.chat.used(v);
        }
        match v.get("usage").and_then(Tokens::from_responses) {
            Some(tokens) => Ok(Used::Tokens {
                tokens,
                counted: false,
            }),
            None => self.chat.used(v),
        }
    }

    fn finish_reasons(&self, v: &Value) -> Vec<String> {
        self.chat.finish_reasons(v)
    }

    /// A translated answer: the response object written straight from the
    /// chat answer ([`answer::from_chat_text`]), kept under the gateway's
    /// id.
    fn respond(
        &self,
        _c: &Caller<'_>,
        v: Value,
        served: &str,
    ) -> Result<(String, Vec<Record>), ApiError> {
        let (text, status) = answer::from_chat_text(&v, &self.echo);
        let kept = self.keeper.record_text(status, &text, served);
        Ok((text, kept.into_iter().collect()))
    }

    fn own(&self) -> Option<&Own> {
        Some(&self.own)
    }

    fn costed_own(&self) -> bool {
        true
    }

    /// The conversation as the native provider `p` knows it: when it
    /// stored the previous turn itself, the caller's body as sent (its
    /// `previous_response_id` that provider's own id); else the whole
    /// chain as input, and no `previous_response_id`.
    fn own_body(&self, body: Map<String, Value>, p: &Provider, _model: &str) -> Map<String, Value> {
        self.turn.native_body(body, &p.id)
    }

    fn translate(&self, body: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
        request::to_chat(&body, &self.turn.history)
    }

    fn restream(&self, chunks: Body) -> Body {
        let t = events::Translator::new(self.echo.clone());
        match self.keeper.stream_keeper(None) {
            Some(keep) => gateway_models::restream::restream_kept(chunks, t, keep),
            None => gateway_models::restream::restream(chunks, t),
        }
    }

    fn own_stream(&self, events: Body, served: &str) -> Body {
        match self.keeper.stream_keeper(Some(served.to_owned())) {
            Some(keep) => gateway_models::restream::restream_kept(
                events,
                gateway_models::responses_api::Kept::new(),
                keep,
            ),
            None => events,
        }
    }

    /// A native answer (the provider's response object, its cost added).
    fn record(&self, _c: &Caller<'_>, answer: &Value, text: &str, served: &str) -> Vec<Record> {
        self.keeper
            .record(answer, Some(text), Some(served))
            .into_iter()
            .collect()
    }
}
