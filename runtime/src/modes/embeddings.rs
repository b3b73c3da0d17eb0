//! `embedding`: embeddings through the model named `provider/model`.
//! The spec's request (`text`: a string or a list) gets the spec's answer
//! `{"data": [[float]], "dimensions": N}`; OpenAI's (`input`) gets OpenAI's
//! answer as the provider gave it, so the official SDKs work unchanged.

use http::StatusCode;
use rust_decimal::prelude::ToPrimitive;
use serde_json::{json, Value};

use crate::ctx::{Ctx, Outcome, Settlement};
use crate::model_call::prepare_cached;
use gateway_base::body::{self, Request};
use gateway_base::errors::ApiError;
use gateway_models::providers::{ModelType, Op};

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
    let body = crate::modes::common::read_body(ctx, req).await?;
    let spec_shape = body.contains_key("text");
    let (field, value) = match (body.get("text"), body.get("input")) {
        (Some(t), _) => ("text", t),
        (None, Some(i)) => ("input", i),
        (None, None) => return Err(ApiError::BadRequest("text: required".into())),
    };
    let (bytes, _items) = texts_size(value, field)?;
    let ready = prepare_cached(
        ctx,
        body,
        ModelType::Embedding,
        Op::Embedding,
        Some((&ask, false)),
        |_, up, _| gateway_models::bounds::embedding(up),
    )
    .await?;
    let (v, status, records, cache, name) = match ready {
        Ok(mut prepared) => {
            let cache = std::mem::take(&mut prepared.cache);
            let ((status, v), settle) = prepared.send(ctx, "embeddings").await?;
            let v = settle
                .provider
                .adapter
                .answer(Op::Embedding, &settle.model.id, v)?;
            if v.get("data").and_then(Value::as_array).is_none() {
                return Err(ApiError::BadGateway(
                    "the model provider answered embeddings without data".into(),
                ));
            }
            let (input, counted) = match v
                .get("usage")
                .and_then(|u| {
                    gateway_base::billing::quantity_from_upstream(
                        "prompt_tokens",
                        u.get("prompt_tokens"),
                    )
                    .valid()
                })
                .and_then(|d| d.ceil().to_u64())
            {
                Some(t) => (t, false),
                None => (bytes.div_ceil(4) as u64, true),
            };
            ctx.trace.usage(|| gateway_base::traces::Usage {
                response_model: v.get("model").and_then(Value::as_str),
                input_tokens: input,
                output_tokens: 0,
                finish_reasons: Vec::new(),
            });
            let name = format!("{}/{}", settle.provider.id, settle.model.id);
            cache.store_json(
                &name,
                &v,
                gateway_models::providers::Tokens::new(input, 0),
                counted,
            );
            let records = settle.records(input, 0, counted, "complete");
            (v, Some(status), records, cache, name)
        }
        Err(hit) => {
            let name = format!("{}/{}", hit.settle.provider.id, hit.settle.model.id);
            let (entry, records) = hit.settle(ctx).await?;
            let v = entry.to_json().unwrap_or_default();
            (v, None, records, gateway_models::cache::Miss::hit(), name)
        }
    };
    let data = v.get("data").and_then(Value::as_array).ok_or_else(|| {
        ApiError::BadGateway("the model provider answered embeddings without data".into())
    })?;
    let mut answer = if spec_shape {
        let vectors: Vec<Value> = data
            .iter()
            .map(|d| d.get("embedding").cloned().unwrap_or(Value::Null))
            .collect();
        let dimensions = vectors
            .first()
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        json!({"data": vectors, "dimensions": dimensions, "model": name})
    } else {
        v
    };
    if let Some(c) = gateway_models::cost::Cost::of(&records) {
        c.annotate(&mut answer);
    }
    let mut resp = body::json(StatusCode::OK, &answer);
    cache.mark(&mut resp);
    let mut out = Outcome::new(resp, status).settled(Settlement::ByModeRecords);
    out.records = records;
    Ok(out)
}
