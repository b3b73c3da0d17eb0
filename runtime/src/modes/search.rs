//! The `owned_search` mode: a search over a kind of user-owned resource
//! (identity search), answered with the caller's own resources only.
//!
//! Many users share one upstream account, so the upstream's search ranks
//! every user's resources. The gateway asks it for as many results as the
//! row allows (the upper bound of the row's `top_k` rule), keeps the caller's
//! own resources (the row's `resource` kind), sorts them by `distance` when
//! the answer gives one, and answers at most the `top_k` the caller asked
//! for ([`DEFAULT_TOP_K`] when none). Results are the upstream's `item`
//! object keyed by resource id (`{"<uuid>": {"name", "distance", ...}}`) or
//! an `items` array of objects with `uuid`/`id`; both are filtered the same
//! way. The `audio_url` follows the policy of every route that passes one
//! (checked as the body is read).

use std::collections::HashMap;

use gateway_store::Owners;
use http::StatusCode;
use rust_decimal::Decimal;
use serde_json::{Map, Value};

use crate::ctx::{Ctx, Outcome};
use crate::shape;
use gateway_base::body::json;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::{Metering, PathParams};

/// Results answered when the caller names no `top_k`.
pub const DEFAULT_TOP_K: u64 = 10;
/// The field naming how many results a search answers.
const TOP_K: &str = "top_k";

pub async fn search(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let spec = ctx.spec;
    let user = ctx.require_user("search")?;
    let kind = spec
        .resource
        .ok_or_else(|| ApiError::bug(format!("row {} has no resource", spec.id)))?;
    let mut body = super::common::read_body(ctx, req).await?;
    let wanted = body
        .get(TOP_K)
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TOP_K) as usize;
    // Ask for as many as the row allows: other users' results are dropped below.
    if let Some(max) = spec
        .body
        .iter()
        .find(|r| r.name == TOP_K)
        .and_then(|r| r.max)
    {
        body.insert(TOP_K.into(), Value::from(max as u64));
    }
    let call = super::common::call(ctx, params, Some(&mut body))?;
    shape::shape_body(spec, &mut body)?;
    let answer = call.json(&body).send().await?;
    let status = answer.status();
    let mut answer = answer.json("a search").await?;
    let owners: HashMap<String, i64> = ctx
        .gw
        .store
        .blocking(move |store| store.resource_owners(kind))
        .await?;
    let mine = |id: &str| owners.get(id) == Some(&user);
    if let Some(Value::Object(items)) = answer.get_mut("item") {
        let mut kept: Vec<(String, Value)> = std::mem::take(items)
            .into_iter()
            .filter(|(id, _)| mine(id))
            .collect();
        kept.sort_by(|a, b| distance(&a.1).total_cmp(&distance(&b.1)));
        kept.truncate(wanted);
        *items = kept.into_iter().collect::<Map<String, Value>>();
    }
    if let Some(Value::Array(items)) = answer.get_mut("items") {
        items.retain(|item| shape::upstream_id(item).is_some_and(|id| mine(&id)));
        items.sort_by(|a, b| distance(a).total_cmp(&distance(b)));
        items.truncate(wanted);
    }
    if spec.metering == Metering::PerRequest {
        ctx.meter_row(Decimal::ONE, None);
    }
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    Ok(Outcome::new(json(status, &answer), Some(status.as_u16())))
}

/// A result's `distance` (nearest first); results without one keep their place last.
fn distance(v: &Value) -> f64 {
    v.get("distance")
        .and_then(Value::as_f64)
        .unwrap_or(f64::INFINITY)
}
