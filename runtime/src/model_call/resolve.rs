//! Phases 1 and 4 of a model call, resolve and hold: the deployments a
//! body names (a route, `models: [...]` or one `model`), the API key's
//! model list, and the hold of the most the call can cost with the key
//! it is sent with.

use serde_json::{Map, Value};

use crate::ctx::Caller;
use crate::money::{self, Settle};
use crate::services::Gateway;
use gateway_adapters::upstream::llm::ProviderKey;
use gateway_base::errors::ApiError;
use gateway_models::providers::{Model, ModelType, Op, Provider, Route};

/// What a body resolved to: the route it named, if any, the candidate
/// deployments in the order to try them, and the caller's own provider
/// key (`byok_api_key`), if it sent one.
pub(crate) struct Resolved<'a> {
    pub route: Option<&'a Route>,
    pub list: Vec<(&'a Provider, &'a Model)>,
    pub byok: Option<String>,
}

/// Phase 1: resolves the body's `model` (of type `want`; a route or
/// `models: [...]` give several candidates; with the caller's
/// `byok_api_key`, only those of the provider it was given with,
/// [`gateway_models::routing::byok_candidates`]), tells the span, and
/// checks the API key's model list (403) against the route's name or
/// every model the request may go to.
pub(crate) fn resolve<'a>(
    c: &Caller<'a>,
    body: &Map<String, Value>,
    want: ModelType,
    op: Op,
) -> Result<Resolved<'a>, ApiError> {
    gateway_models::bounds::check_additional_params(body)?;
    let (route, list) = deployments(c.gw, c.catalogue, body, want)?;
    if c.trace.is_on() {
        c.trace.model(
            operation_name(op),
            body.get("model").and_then(Value::as_str),
            route.map(|r| r.name.as_str()),
        );
    }
    let byok = body
        .get("byok_api_key")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned);
    let list = match byok {
        Some(_) => gateway_models::routing::byok_candidates(c.catalogue, route, list)?,
        None => list,
    };
    for (p, m) in &list {
        allowed(c, p, m, route.map(|r| r.name.as_str()))?;
    }
    Ok(Resolved { route, list, byok })
}

/// The deployments a body names, in the order to try them: its route's
/// (by the route's strategy, then its fallbacks), its `models: [...]`
/// (OpenRouter's field: each a model or a route's first target), or its
/// one `model`. The route's name, and the names to check against the API
/// key's model list (the caller's: a route's name, or each model).
fn deployments<'a>(
    gw: &Gateway,
    providers: &'a gateway_models::providers::Providers,
    body: &Map<String, Value>,
    want: ModelType,
) -> Result<(Option<&'a Route>, Vec<(&'a Provider, &'a Model)>), ApiError> {
    let name = body.get("model").and_then(Value::as_str);
    if let Some(r) = name.and_then(|n| providers.route(n)) {
        if r.kind != want {
            return Err(ApiError::BadRequest(format!(
                "model {} is a route of {} models, not {}",
                r.name,
                r.kind.as_str(),
                want.as_str()
            )));
        }
        let order = gw.routing.order(providers, r);
        return Ok((
            Some(r),
            order.into_iter().map(|d| providers.deployment(d)).collect(),
        ));
    }
    let mut list = vec![providers.resolve(name, want)?];
    if let Some(models) = body.get("models") {
        let names = models
            .as_array()
            .filter(|a| a.len() <= MAX_MODELS && a.iter().all(Value::is_string))
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "models: must be a list of at most {MAX_MODELS} model names"
                ))
            })?;
        if name.is_none() {
            list.clear();
        }
        for n in names {
            let found = providers.resolve(n.as_str(), want)?;
            if !list
                .iter()
                .any(|(p, m)| p.id == found.0.id && m.id == found.1.id)
            {
                list.push(found);
            }
        }
        if list.is_empty() {
            list.push(providers.resolve(None, want)?);
        }
    }
    Ok((None, list))
}

/// The GenAI conventions' `gen_ai.operation.name` of an operation.
pub(super) fn operation_name(op: Op) -> &'static str {
    match op {
        Op::Chat => "chat",
        Op::Completion => "text_completion",
        Op::Embedding => "embeddings",
        Op::Image => "image_generation",
        Op::Speech => "speech",
        Op::Transcription => "transcription",
        Op::Translation => "translation",
        Op::Video => "video_generation",
    }
}

/// Most models a request's `models: [...]` may name.
const MAX_MODELS: usize = 8;

/// Resolves the model `name` (of type `want`), checks the API key's model
/// allow-list, chooses the key (`byok`, the caller's own, for this call
/// only, else the provider's) and holds `max_cost` (nothing with BYOK; 402
/// when it does not fit). The settle (with the provider and the model) and
/// the key to call with.
pub(crate) async fn pick_model(
    c: &Caller<'_>,
    name: Option<&str>,
    byok: Option<&str>,
    want: ModelType,
    max_cost: impl FnOnce(&Provider, &Model) -> Result<rust_decimal::Decimal, ApiError>,
) -> Result<(Settle, ProviderKey), ApiError> {
    let (p, m) = c.catalogue.resolve(name, want)?;
    hold_for(c, p, m, None, byok, max_cost(p, m)?).await
}

/// The API key's model allow-list (403): the route's name the caller sent
/// (`route`), else the model `p/m` (or `p/*`).
pub(crate) fn allowed(
    c: &Caller<'_>,
    p: &Provider,
    m: &Model,
    route: Option<&str>,
) -> Result<(), ApiError> {
    if let Some(allowed) = c.user.and_then(|u| u.models.as_ref()) {
        let wildcard = format!("{}/*", p.id);
        let name = match route {
            Some(r) => r.to_owned(),
            None => format!("{}/{}", p.id, m.id),
        };
        if !allowed
            .iter()
            .any(|a| *a == name || (route.is_none() && *a == wildcard))
        {
            return Err(ApiError::Forbidden(format!(
                "this API key has no access to model {name}"
            )));
        }
    }
    Ok(())
}

/// For the resolved model `m` of provider `p` (named by the route
/// `route`, if any): checks the API key's model allow-list (403), chooses
/// the key (`byok`, else the provider's) and holds `max_cost` (nothing
/// with BYOK; 402 when it does not fit).
pub(crate) async fn hold_for(
    c: &Caller<'_>,
    p: &Provider,
    m: &Model,
    route: Option<&str>,
    byok: Option<&str>,
    max_cost: rust_decimal::Decimal,
) -> Result<(Settle, ProviderKey), ApiError> {
    allowed(c, p, m, route)?;
    let byok = byok.map(str::trim).filter(|k| !k.is_empty());
    // A key no header can carry (control characters) is the caller's
    // mistake: 400, never a failed upstream call (found by schemathesis).
    if byok.is_some_and(|k| http::HeaderValue::from_str(k).is_err()) {
        return Err(ApiError::BadRequest(
            "byok_api_key: not a usable API key (it holds characters an HTTP header cannot carry)"
                .into(),
        ));
    }
    let byok = byok.map(ProviderKey::byok);
    let key = match &byok {
        Some(k) => k.clone(),
        None => p
            .key
            .clone()
            .ok_or_else(|| gateway_models::providers::config_missing(p))?,
    };
    let hold = money::reserve(c, max_cost, byok.is_some()).await?;
    Ok((Settle::new(c, p, m, byok.is_some(), hold), key))
}
