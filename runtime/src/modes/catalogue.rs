//! `catalogue`, `catalogue_model`, `catalogue_trending`: the model
//! catalogue of the providers file, in OpenAI's list shape, and models
//! ranked by their requests in the usage records.

use gateway_store::History;
use http::StatusCode;
use serde_json::{json, Value};

use crate::ctx::{Ctx, Outcome};
use gateway_base::body;
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;
use gateway_models::providers::{model_json, route_json};

/// Days of usage `trending` looks back by default.
pub const TRENDING_DAYS: i64 = 7;
/// Models `trending` lists by default.
pub const TRENDING_LIMIT: usize = 10;

fn ok(v: Value) -> Result<Outcome, ApiError> {
    Ok(Outcome::new(body::json(StatusCode::OK, &v), None))
}

/// `GET /models/` and `GET /models`: every provider's models, then the
/// routes of the providers file.
pub async fn list(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let providers = &ctx.catalogue;
    let data: Vec<Value> = providers
        .models()
        .map(|(p, m)| model_json(p, m))
        .chain(providers.routes.iter().map(|r| route_json(providers, r)))
        .collect();
    ok(json!({"object": "list", "data": data}))
}

/// `GET /models/{provider_id}/{model_id}`.
pub async fn model(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let (p, m) = (
        params.get("provider_id").unwrap_or_default(),
        params.get("model_id").unwrap_or_default(),
    );
    if !ctx.catalogue.providers.iter().any(|x| x.id == *p) {
        return Err(ApiError::NotFound(format!("provider {p:?} not found")));
    }
    let (p, m) = ctx
        .catalogue
        .get(&p, &m)
        .ok_or_else(|| ApiError::NotFound(format!("model {p}/{m} not found")))?;
    ok(model_json(p, m))
}

fn query_num(ctx: &Ctx, name: &str) -> Option<i64> {
    ctx.query
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.trim().parse().ok())
}

/// `GET /models/trending?days=&limit=`: models by requests over the last
/// `days` days, most first, with their catalogue entry when still configured.
/// The ranking is of all traffic, but the counts are not the caller's to
/// read: each entry has its `rank` only, unless the operator shows them
/// (`GATEWAY_TRENDING_GLOBAL_COUNTS=true`: `requests` too).
pub async fn trending(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let days = query_num(ctx, "days").unwrap_or(TRENDING_DAYS).max(1);
    let limit = query_num(ctx, "limit").map_or(TRENDING_LIMIT, |l| l.max(1) as usize);
    let since = gateway_store::rfc3339(chrono::Utc::now() - chrono::Duration::days(days));
    let ranked = ctx
        .gw
        .store
        .blocking(move |s| s.trending_models(&since, limit))
        .await?;
    let counts = ctx.gw.config.trending_global_counts;
    let data: Vec<Value> = ranked
        .into_iter()
        .enumerate()
        .map(|(i, (name, requests))| {
            let mut v = name
                .split_once('/')
                .and_then(|(p, m)| ctx.catalogue.get(p, m))
                .map_or_else(
                    || json!({"id": name, "object": "model"}),
                    |(p, m)| model_json(p, m),
                );
            v["rank"] = json!(i + 1);
            if counts {
                v["requests"] = json!(requests);
            }
            v
        })
        .collect();
    ok(json!({"object": "list", "days": days, "data": data}))
}
