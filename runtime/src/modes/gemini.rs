//! `gemini`: Gemini's API as a front door to any model, `POST
//! /gemini/{version}/models/{target*}` (`v1beta`, `v1` or `v1alpha`), the
//! target `<provider/model>:<method>` (the model may hold a `/`: Google's
//! clients send it as it is).
//!
//! * `generateContent`, `streamGenerateContent` (`alt=sse`): a chat model
//!   call ([`Generate`]); `embedContent`, `batchEmbedContents`: an
//!   embeddings call ([`Embed`]). To a `gemini` provider the caller's body
//!   goes as sent (the model call's [`Own`]: the path's model, and each
//!   batch request's `model`, the deployment's id) and its answer or
//!   stream comes back as the provider sent it; to the other kinds it is
//!   translated ([`gateway_models::gemini_api`]) and the answer translated
//!   back. Held, routed, cached, billed and budgeted as any model request.
//! * `countTokens`: free. A `gemini` provider's own count (its
//!   `countTokens`, exact); another kind's the gateway's estimate, the
//!   input a hold counts for the same request (an upper bound).

use http::StatusCode;
use rust_decimal::prelude::ToPrimitive;
use serde_json::{json, Map, Value};

use super::common::{query_str, read_body};
use crate::ctx::{Ctx, Outcome};
use crate::model_call::{self, Operation, Own, Used};
use gateway_base::body::{self, Body, Request};
use gateway_base::errors::ApiError;
use gateway_base::spec::{Method, PathParams};
use gateway_models::bounds::{Bound, Shape};
use gateway_models::gemini_api::{answer, embed, events, request};
use gateway_models::providers::{self, Model, ModelType, Op, Provider, Tokens};

/// The methods of Gemini's API the door answers.
const METHODS: [&str; 5] = [
    "generateContent",
    "streamGenerateContent",
    "countTokens",
    "embedContent",
    "batchEmbedContents",
];

/// The API versions of the path (Google's SDK sends `v1beta`, or `v1`
/// from its 3rd major version on): one API for the door.
const VERSIONS: [&str; 3] = ["v1beta", "v1", "v1alpha"];

/// `gemini`: one of [`METHODS`] on the target's model.
pub async fn gemini(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let target = params
        .get("target")
        .ok_or_else(|| ApiError::bug("a gemini row without {target*}"))?
        .into_owned();
    let version = params.get("version").unwrap_or_default();
    if !VERSIONS.contains(&version.as_ref()) {
        return Err(ApiError::NotFound(format!(
            "API version {version} not found (this gateway answers {})",
            VERSIONS.join(", ")
        )));
    }
    let (model, method) = split(&target)?;
    let sse = query_str(ctx, "alt") == Some("sse");
    if method == "streamGenerateContent" && !sse {
        return Err(ApiError::BadRequest(
            "alt: streamGenerateContent is answered as server-sent events only (alt=sse)".into(),
        ));
    }
    let ask = gateway_models::cache::Ask::from_headers(req.headers())?;
    let mut body = read_body(ctx, req).await?;
    body.insert("model".into(), Value::String(model.to_owned()));
    match method {
        "generateContent" | "streamGenerateContent" => {
            let op = Generate::new(&body, model, method == "streamGenerateContent");
            model_call::run(ctx, &op, body, Some(&ask)).await
        }
        "embedContent" | "batchEmbedContents" => {
            let op = Embed::new(&body, method == "batchEmbedContents")?;
            model_call::run(ctx, &op, body, Some(&ask)).await
        }
        _ => count_tokens(ctx, body).await,
    }
}

/// `<model>:<method>` (the last `:`), the model without Google's
/// `models/` prefix; 404 for a method the door does not answer.
fn split(target: &str) -> Result<(&str, &str), ApiError> {
    let (model, method) = target.rsplit_once(':').ok_or_else(|| {
        ApiError::NotFound(format!(
            "models/{target}: no method (expected models/<model>:<method>)"
        ))
    })?;
    let model = model.strip_prefix("models/").unwrap_or(model);
    if !METHODS.contains(&method) {
        return Err(ApiError::NotFound(format!(
            "Method {method} not found for models/{model} (this gateway answers {})",
            METHODS.join(", ")
        )));
    }
    if model.is_empty() {
        return Err(ApiError::BadRequest("model: required in the path".into()));
    }
    Ok((model, method))
}

/// Bytes of the request's content (its tokens counted when the provider
/// reports none).
fn content_bytes(body: &Map<String, Value>, fields: &[&str]) -> usize {
    fields
        .iter()
        .filter_map(|f| body.get(*f))
        .map(|v| v.to_string().len())
        .sum()
}

/// A `generateContent` (or streamed) call, as the model call asks it: to
/// a `gemini` provider the caller's body as sent, to the others the chat
/// completion it translates into ([`request::to_chat`]) and the answer
/// translated back ([`answer::from_chat`], [`events::Translator`]).
struct Generate {
    stream: bool,
    /// Bytes of the contents (their tokens counted when the provider reports none).
    prompt_bytes: usize,
    /// The model name the caller gave.
    model: String,
    own: Own,
}

impl Generate {
    fn new(body: &Map<String, Value>, model: &str, stream: bool) -> Generate {
        let method = match stream {
            true => "streamGenerateContent?alt=sse",
            false => "generateContent",
        };
        Generate {
            stream,
            prompt_bytes: content_bytes(body, &["contents", "systemInstruction"]),
            model: model.to_owned(),
            own: Own {
                shape: Shape::Gemini,
                method: method.into(),
                headers: Vec::new(),
                reader: None,
            },
        }
    }
}

/// Tokens of the answer's text when the provider gives no `usage`.
fn counted_output(v: &Value) -> u64 {
    let chars: usize = v
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("message")?.get("content")?.as_str())
        .map(str::len)
        .sum();
    chars.div_ceil(4) as u64
}

impl Operation for Generate {
    fn model_type(&self) -> ModelType {
        ModelType::Chat
    }

    fn op(&self) -> Op {
        Op::Chat
    }

    fn what(&self) -> &'static str {
        "a generated content"
    }

    fn bound(&self, m: &Model, up: &Map<String, Value>, shape: Shape) -> Result<Bound, ApiError> {
        gateway_models::bounds::chat(up, shape, m.context_window)
    }

    fn streamed(&self) -> bool {
        self.stream
    }

    fn usage_wanted(&self) -> bool {
        self.stream
    }

    fn counted_prompt(&self) -> u64 {
        self.prompt_bytes.div_ceil(4) as u64
    }

    fn used(&self, v: &Value) -> Result<Used, ApiError> {
        Ok(match v.get("usage").and_then(Tokens::from_openai) {
            Some(tokens) => Used::Tokens {
                tokens,
                counted: false,
            },
            None => Used::Tokens {
                tokens: Tokens::new(self.counted_prompt(), counted_output(v)),
                counted: true,
            },
        })
    }

    fn finish_reasons(&self, v: &Value) -> Vec<String> {
        v.get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("finish_reason").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }

    fn answer(&self, v: Value, _served: &str) -> Result<Value, ApiError> {
        Ok(answer::from_chat(&v, &self.model))
    }

    fn own(&self) -> Option<&Own> {
        Some(&self.own)
    }

    fn translate(&self, body: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
        request::to_chat(&body, self.stream)
    }

    fn restream(&self, chunks: Body) -> Body {
        gateway_models::restream::restream(chunks, events::Translator::new(&self.model))
    }
}

/// An `embedContent` or `batchEmbedContents` call, as the model call asks
/// it: to a `gemini` provider the caller's body as sent (each batch
/// request's `model` the deployment's), to the others OpenAI's
/// embeddings ([`embed::to_openai`]) and the vectors back
/// ([`embed::from_openai`]).
struct Embed {
    batch: bool,
    /// Bytes of the texts (their tokens counted when the provider reports none).
    text_bytes: usize,
    own: Own,
}

impl Embed {
    /// 400 unless the body has what its method needs.
    fn new(body: &Map<String, Value>, batch: bool) -> Result<Embed, ApiError> {
        let (field, method) = match batch {
            true => ("requests", "batchEmbedContents"),
            false => ("content", "embedContent"),
        };
        let given = body.get(field).filter(|v| match batch {
            true => v.as_array().is_some_and(|a| !a.is_empty()),
            false => v.is_object(),
        });
        if given.is_none() {
            return Err(ApiError::BadRequest(format!(
                "{field}: required ({method})"
            )));
        }
        Ok(Embed {
            batch,
            text_bytes: content_bytes(body, &[field]),
            own: Own {
                shape: Shape::Gemini,
                method: method.into(),
                headers: Vec::new(),
                reader: None,
            },
        })
    }
}

impl Operation for Embed {
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
            return Err(ApiError::BadGateway(
                "the model provider answered embeddings without data".into(),
            ));
        }
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
        Ok(match reported {
            Some(t) => Used::Tokens {
                tokens: Tokens::new(t, 0),
                counted: false,
            },
            None => Used::Tokens {
                tokens: Tokens::new(self.text_bytes.div_ceil(4) as u64, 0),
                counted: true,
            },
        })
    }

    fn answer(&self, v: Value, _served: &str) -> Result<Value, ApiError> {
        Ok(embed::from_openai(&v, self.batch))
    }

    fn own(&self) -> Option<&Own> {
        Some(&self.own)
    }

    /// Each batch request names the deployment (`models/<id>`), as the
    /// path does.
    fn own_body(
        &self,
        mut body: Map<String, Value>,
        _p: &Provider,
        model: &str,
    ) -> Map<String, Value> {
        if let Some(Value::Array(reqs)) = body.get_mut("requests") {
            for r in reqs.iter_mut().filter_map(Value::as_object_mut) {
                r.insert("model".into(), Value::String(format!("models/{model}")));
            }
        }
        body
    }

    fn translate(&self, body: Map<String, Value>) -> Result<Map<String, Value>, ApiError> {
        embed::to_openai(&body, self.batch)
    }
}

/// `countTokens`: a `gemini` provider's own count (its answer as sent);
/// another kind's `{"totalTokens": N}`, N the input a hold counts for the
/// same request ([`gateway_models::bounds::chat`] of the body its provider
/// would be sent). Free: no hold, nothing charged.
async fn count_tokens(ctx: &mut Ctx, body: Map<String, Value>) -> Result<Outcome, ApiError> {
    let name = body.get("model").and_then(Value::as_str);
    let (p, m) = ctx.catalogue.resolve(name, ModelType::Chat)?;
    // The API key's model list, as a generation of the model would meet it.
    model_call::allowed(&ctx.caller(), p, m, None)?;
    let v = if p.adapter.shape() == Shape::Gemini {
        let key = p.key.clone().ok_or_else(|| providers::config_missing(p))?;
        let sent = p
            .adapter
            .own_body(providers::openai::request(Op::Chat, &m.id, body));
        ctx.gw
            .upstream
            .llm_call_as(
                Method::Post,
                &p.base_url,
                &p.adapter.own_path(&m.id, "countTokens"),
                &key,
                p.adapter.key_form(),
            )
            .json(&sent)
            .send()
            .await?
            .json("a token count")
            .await?
    } else {
        let chat = request::to_chat(&body, false)?;
        let up = p.adapter.native(
            Op::Chat,
            m,
            providers::openai::request(Op::Chat, &m.id, chat),
        )?;
        let bound = gateway_models::bounds::chat(&up.body, p.adapter.shape(), m.context_window)?;
        json!({"totalTokens": bound.input})
    };
    Ok(Outcome::new(body::json(StatusCode::OK, &v), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_splits_at_its_last_colon() {
        assert_eq!(
            split("gem/gemini-x:generateContent").unwrap(),
            ("gem/gemini-x", "generateContent")
        );
        assert_eq!(
            split("models/a:b/c:countTokens").unwrap(),
            ("a:b/c", "countTokens")
        );
        assert!(matches!(split("gem/x:predict"), Err(ApiError::NotFound(_))));
        assert!(matches!(split("gem/x"), Err(ApiError::NotFound(_))));
        assert!(matches!(
            split(":countTokens"),
            Err(ApiError::BadRequest(_))
        ));
    }
}
