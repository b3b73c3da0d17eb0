//! `embedding`: embeddings through the model named `provider/model`.
//! The spec's request (`text`: a string or a list) gets the spec's answer
//! `{"data": [[float]], "dimensions": N}`; OpenAI's (`input`) gets OpenAI's
//! answer as the provider gave it, so the official SDKs work unchanged.
//! The model call (hold, routing, response cache, settlement) is
//! [`crate::model_call`]'s; this file is the translation ([`Embeddings`]).

use rust_decimal::prelude::ToPrimitive;
use serde_json::{json, Map, Value};

use crate::ctx::{Ctx, Outcome};
use crate::model_call::{self, Operation, Used};
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_models::bounds::{Bound, Shape};
use gateway_models::providers::{Model, ModelType, Op, Tokens};

/// Bytes of the texts and how many there are; 400 unless a non-empty
/// string or list of strings.
fn texts_size(v: &Value, field: &str) -> Result<(usize, usize), ApiError> {
    let bad = || {
        ApiError::BadRequest(format!(
            "{field}: must be a string or a non-empty list of strings"
        ))
    };
    match v {
        Value::String(s) => Ok((s.len(), 1)),
        Value::Array(items) if !items.is_empty() => {
            let mut bytes = 0;
            for i in items {
                bytes += match i {
                    Value::String(s) => s.len(),
                    // OpenAI also takes token arrays: each number is a token.
                    Value::Array(tokens) if field == "input" => tokens.len(),
                    Value::Number(_) if field == "input" => 1,
                    _ => return Err(bad()),
                };
            }
            Ok((bytes, items.len()))
        }
        _ => Err(bad()),
    }
}

/// `embedding`.
pub async fn embed(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let ask = gateway_models::cache::Ask::from_headers(req.headers())?;
    let body = super::common::read_body(ctx, req).await?;
    let (field, value) = match (body.get("text"), body.get("input")) {
        (Some(t), _) => ("text", t),
        (None, Some(i)) => ("input", i),
        (None, None) => return Err(ApiError::BadRequest("text: required".into())),
    };
    let (bytes, _items) = texts_size(value, field)?;
    let op = Embeddings {
        spec_shape: body.contains_key("text"),
        text_bytes: bytes,
    };
    model_call::run(ctx, &op, body, Some(&ask)).await
}

/// An embeddings request, as the model call asks it.
struct Embeddings {
    /// The spec's request (`text`), answered in the spec's shape.
    spec_shape: bool,
    /// Bytes of the texts (their tokens counted when the provider reports none).
    text_bytes: usize,
}

impl Embeddings {
    /// The input's tokens and whether the gateway counted them: the
    /// provider's `usage.prompt_tokens`, else the texts' bytes counted.
    fn prompt_tokens(&self, v: &Value) -> (u64, bool) {
        let reported = v
            .get("usage")
            .and_then(|u| {
                gateway_base::billing::quantity_from_upstream(
                    "prompt_tokens",
                    u.get("prompt_tokens"),
                )
                .valid()
            })
            .and_then(|d| d.ceil().to_u64());
        match reported {
            Some(t) => (t, false),
            None => (self.text_bytes.div_ceil(4) as u64, true),
        }
    }

    /// OpenAI's `usage` as its clients read it: `prompt_tokens` and
    /// `total_tokens` are always there, the tokens billed (the gateway's
    /// count when the provider reported none, as Gemini does).
    fn complete_usage(&self, v: &mut Value) {
        let (input, counted) = self.prompt_tokens(v);
        let Some(obj) = v.as_object_mut() else {
            return;
        };
        let usage = obj.entry("usage").or_insert_with(|| json!({}));
        if !usage.is_object() {
            *usage = json!({});
        }
        if let Some(u) = usage.as_object_mut() {
            if counted {
                u.insert("prompt_tokens".into(), json!(input));
            }
            if counted || u.get("total_tokens").and_then(Value::as_u64).is_none() {
                u.insert("total_tokens".into(), json!(input));
            }
        }
    }
}

/// 502: an answer without its vectors.
fn without_data() -> ApiError {
    ApiError::BadGateway("the model provider answered embeddings without data".into())
}

impl Operation for Embeddings {
    fn model_type(&self) -> ModelType {
        ModelType::Embedding
    }

    fn op(&self) -> Op {
        Op::Embedding
    }

    fn what(&self) -> &'static str {
        "embeddings"
    }

    fn bound(&self, _: &Model, up: &Map<String, Value>, _: Shape) -> Result<Bound, ApiError> {
        gateway_models::bounds::embedding(up)
    }

    /// The input's tokens: the provider's `usage.prompt_tokens`, else the
    /// texts' bytes counted.
    fn used(&self, v: &Value) -> Result<Used, ApiError> {
        if v.get("data").and_then(Value::as_array).is_none() {
            return Err(without_data());
        }
        let (input, counted) = self.prompt_tokens(v);
        Ok(Used::Tokens {
            tokens: Tokens::new(input, 0),
            counted,
        })
    }

    /// The spec's shape (`data`: the vectors, `dimensions`, `model`: the
    /// deployment that `served`), or OpenAI's as the provider gave it with
    /// its `usage` complete ([`Embeddings::complete_usage`]).
    fn answer(&self, mut v: Value, served: &str) -> Result<Value, ApiError> {
        let data = v
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(without_data)?;
        if !self.spec_shape {
            self.complete_usage(&mut v);
            return Ok(v);
        }
        let vectors: Vec<Value> = data
            .iter()
            .map(|d| d.get("embedding").cloned().unwrap_or(Value::Null))
            .collect();
        let dimensions = vectors
            .first()
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        Ok(json!({"data": vectors, "dimensions": dimensions, "model": served}))
    }
}
