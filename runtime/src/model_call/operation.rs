//! What a model operation says of itself ([`Operation`]) and what its
//! answer used ([`Used`]): the one file the driver's phases and the modes
//! share, so that neither imports the other.

use std::future::Future;

use serde_json::{Map, Value};

use crate::ctx::Caller;
use crate::money::Settle;
use gateway_base::body::Body;
use gateway_base::errors::ApiError;
use gateway_models::bounds::{Bound, Shape};
use gateway_models::providers::{Model, ModelType, Op, Provider, StreamTranslator, Tokens};
use gateway_store::Record;

/// One model operation as the driver asks it: what is its own in a model
/// call. Its methods are handed values (a body, an answer), not the
/// request's context, so that a call's path stays in the driver.
pub(crate) trait Operation: Sync {
    /// The type of model the body's `model` must name.
    fn model_type(&self) -> ModelType;
    /// The operation (its upstream path, the span's and the cache's name).
    fn op(&self) -> Op;
    /// The answer's name in errors (`"a completion"`).
    fn what(&self) -> &'static str;
    /// What the upstream body `up` of a candidate model `m` can make the
    /// provider do: what is held (400 naming a field past it).
    fn bound(&self, m: &Model, up: &Map<String, Value>, shape: Shape) -> Result<Bound, ApiError>;
    /// Whether the answer is relayed as a stream.
    fn streamed(&self) -> bool {
        false
    }
    /// Whether the caller asked for a stream's usage event.
    fn usage_wanted(&self) -> bool {
        false
    }
    /// The prompt's tokens as the gateway counts them: billed when the
    /// provider reports none.
    fn counted_prompt(&self) -> u64 {
        0
    }
    /// What a whole answer (OpenAI's shape) used; 502 when it is not this
    /// operation's answer.
    fn used(&self, v: &Value) -> Result<Used, ApiError>;
    /// The answer's finish reasons, for the trace.
    fn finish_reasons(&self, v: &Value) -> Vec<String> {
        let _ = v;
        Vec::new()
    }
    /// Keeps what of the answer must outlive the provider (generated
    /// images, copied into the object store): the records of what was kept.
    /// The one method handed the caller, for the object store and the
    /// caller's name.
    fn keep(
        &self,
        c: &Caller<'_>,
        v: &mut Value,
        p: &Provider,
    ) -> impl Future<Output = Result<Vec<Record>, ApiError>> + Send {
        let _ = (c, v, p);
        async { Ok(Vec::new()) }
    }
    /// The caller's answer from the provider's (or a cached entry's), in
    /// OpenAI's shape, before its cost is added; `served` is the
    /// deployment that answered. A door of another API translates it.
    fn answer(&self, v: Value, served: &str) -> Result<Value, ApiError> {
        let _ = served;
        Ok(v)
    }
    /// The caller's body in a provider's own API, when the door speaks one
    /// (Anthropic's Messages, Gemini's): a candidate whose provider speaks
    /// it is sent that body as it came ([`Own`]), and its answer goes back
    /// as the provider sent it, read on the side for what it used.
    fn own(&self) -> Option<&Own> {
        None
    }
    /// Whether an answer in the door's own API carries the gateway's
    /// `usage.cost` (and `byok`) too: an API whose `usage` is an open
    /// object its clients read past (OpenAI's Responses API) gets it; the
    /// others are passed on exactly as sent, the cost in `X-Gateway-Cost`.
    fn costed_own(&self) -> bool {
        false
    }
    /// The caller's body of the door's own API for the deployment `model`
    /// (the provider's model id) of provider `p`, before its provider's adapter takes it
    /// ([`Own`]): a door whose API names the model inside the body too
    /// (Gemini's `batchEmbedContents`: each request's `model`) names it.
    fn own_body(&self, body: Map<String, Value>, p: &Provider, model: &str) -> Map<String, Value> {
        let _ = (p, model);
        body
    }
    /// The OpenAI body of the caller's (the body the model call was given)
    /// for a candidate not of the door's own API: a door of another API
    /// translates it, or refuses with a 400 naming the field it cannot.
    fn translate(&self, body: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
        Ok(body)
    }
    /// The caller's stream from OpenAI's chunks (a candidate not of the
    /// door's own API): a door of another API translates it.
    fn restream(&self, chunks: Body) -> Body {
        chunks
    }
    /// The caller's stream from the provider's own events ([`Own`]),
    /// passed on unchanged, `served` by that deployment: a door that keeps
    /// what was answered (a stored response) reads it on the way.
    fn own_stream(&self, events: Body, served: &str) -> Body {
        let _ = served;
        events
    }
    /// The records of what a whole answer gave the caller (`answer`, as
    /// answered, its cost added, and `text`, the JSON text the caller is
    /// sent; `served`: the deployment), committed with its bill: a door
    /// that keeps its answers (the Responses API's stored responses) says
    /// what it keeps.
    fn record(&self, c: &Caller<'_>, answer: &Value, text: &str, served: &str) -> Vec<Record> {
        let _ = (c, answer, text, served);
        Vec::new()
    }
    /// The caller's whole answer, as the JSON text it is sent, from the
    /// provider's (or a cached entry's) in OpenAI's shape, its cost added,
    /// and the records of what it gave ([`Operation::record`]): by default
    /// [`Operation::answer`] serialised. A door that writes its answer
    /// straight as text (the Responses API's response object, no `Value`
    /// built) says so.
    fn respond(
        &self,
        c: &Caller<'_>,
        v: Value,
        served: &str,
    ) -> Result<(String, Vec<Record>), ApiError> {
        let v = self.answer(v, served)?;
        let text = v.to_string();
        let records = self.record(c, &v, &text, served);
        Ok((text, records))
    }
}

/// A door's own API: a candidate of a provider that speaks it gets the
/// caller's body as sent (the gateway's fields removed, its own model id),
/// at the API's path for `method`, with the caller's `headers` of that API
/// (`anthropic-beta`, `anthropic-version`).
pub(crate) struct Own {
    pub shape: Shape,
    /// The door's operation in the API's words ([`Adapter::own_path`]).
    ///
    /// [`Adapter::own_path`]: gateway_models::providers::Adapter::own_path
    pub method: String,
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// What reads the usage of a stream in this API, when the provider's
    /// adapter does not ([`Adapter::stream`]: the Responses API's events
    /// on an `openai` provider, whose adapter reads chat chunks).
    ///
    /// [`Adapter::stream`]: gateway_models::providers::Adapter::stream
    pub reader: Option<fn() -> Box<dyn StreamTranslator>>,
}

impl Own {
    /// Whether `p` speaks this API: its adapter's shape, or for OpenAI's
    /// Responses API an `openai` provider that serves it (`responses =
    /// true`).
    pub fn spoken_by(&self, p: &Provider) -> bool {
        match self.shape {
            Shape::Responses => p.responses,
            shape => p.adapter.shape() == shape,
        }
    }
}

/// What a model answer used, as its operation reads it.
pub(crate) enum Used {
    /// Tokens; `counted`: the gateway's count, the provider reported none.
    Tokens { tokens: Tokens, counted: bool },
    /// Generated images.
    Images(u64),
}

impl Used {
    /// Phase 7: the records that settle `bill` for this use.
    pub(super) fn settle(self, bill: Settle) -> Vec<Record> {
        match self {
            Used::Tokens { tokens, counted } => bill.token_records(tokens, counted, "complete"),
            Used::Images(n) => bill.image_records(n),
        }
    }
}
