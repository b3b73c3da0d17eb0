//! The admin modes (admin role, or `X-Admin-Key`): the users, disable and
//! enable, delete (soft), credit grants (a user's usage and ledger:
//! `history`'s modes on the admin rows).

use gateway_store::{Accounts, Ledger};
use http::StatusCode;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use super::common::read_body;
use super::common::{addressed_user as target, user_json};
use crate::ctx::{Ctx, Outcome};
use gateway_base::body;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;

fn ok(v: Value) -> Outcome {
    Outcome::new(body::json(StatusCode::OK, &v), None)
}

/// `GET /admin/users`.
pub async fn users(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let rows = ctx.gw.store.blocking(|s| s.user_rows()).await?;
    let data: Vec<Value> = rows.iter().map(user_json).collect();
    Ok(ok(json!({ "data": data })))
}

/// `POST /admin/users/{user_id}/disable` and `/enable`.
pub async fn set_disabled(
    ctx: &mut Ctx,
    params: &PathParams,
    disabled: bool,
) -> Result<Outcome, ApiError> {
    let u = target(ctx, params).await?;
    let id = u.id;
    ctx.gw
        .store
        .blocking(move |s| s.set_user_disabled(id, disabled))
        .await?;
    ctx.gw.credentials_changed().await;
    let row = target(ctx, params).await?;
    Ok(ok(user_json(&row)))
}

/// `DELETE /admin/users/{user_id}`: soft deletion; the user's credentials
/// answer 401 "user deleted" from then on.
pub async fn delete(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let u = target(ctx, params).await?;
    let id = u.id;
    ctx.gw.store.blocking(move |s| s.delete_user(id)).await?;
    ctx.gw.credentials_changed().await;
    Ok(ok(json!({ "id": id, "deleted": true })))
}

/// `POST /admin/users/{user_id}/credits` `{amount}` (a positive decimal).
pub async fn credits(
    ctx: &mut Ctx,
    req: Request,
    params: &PathParams,
) -> Result<Outcome, ApiError> {
    let obj = read_body(ctx, req).await?;
    let amount: Decimal = match obj.get("amount") {
        Some(Value::String(s)) => s.trim().parse().ok(),
        Some(Value::Number(n)) => n.to_string().parse().ok(),
        _ => None,
    }
    .filter(|a: &Decimal| *a > Decimal::ZERO)
    .ok_or_else(|| ApiError::BadRequest("amount: a positive decimal is required".into()))?;
    let u = target(ctx, params).await?;
    let id = u.id;
    // Checked before the transaction (400); the store checks again inside
    // it, so a concurrent grant fails cleanly, never overflows.
    let before = ctx.gw.store.blocking(move |s| s.balance(id)).await?;
    gateway_base::billing::check_grant(before, amount).map_err(ApiError::BadRequest)?;
    let balance = ctx
        .gw
        .store
        .blocking(move |s| s.grant_credit(id, amount, Some("admin grant")))
        .await?;
    Ok(ok(json!({
        "user_id": id,
        "amount": amount.to_string(),
        "balance": format!("{balance:.8}"),
    })))
}

/// `POST /admin/reload`: the configuration files read again on every
/// instance (`crate::reload`): each instance's outcome; 422 when this
/// instance's file has mistakes (nothing changed anywhere it failed).
pub async fn reload(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let all = crate::reload::everywhere(&ctx.gw).await;
    let status = match all.first().and_then(|o| o["reloaded"].as_bool()) {
        Some(true) => http::StatusCode::OK,
        _ => http::StatusCode::UNPROCESSABLE_ENTITY,
    };
    Ok(Outcome::new(
        gateway_base::body::json(status, &json!({ "instances": all })),
        None,
    ))
}

/// `GET /admin/prices/{version}`: that price version's prices per model.
pub async fn prices(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let version = params
        .get("version")
        .map(|v| v.into_owned())
        .unwrap_or_default();
    let v = version.clone();
    let found = ctx
        .gw
        .store
        .blocking(move |s| gateway_store::PriceVersions::price_version(s, &v))
        .await?
        .ok_or_else(|| ApiError::NotFound("no such price version".into()))?;
    let models: Value = serde_json::from_str(&found.0).unwrap_or_default();
    Ok(ok(
        json!({ "version": version, "recorded_at": found.1, "models": models }),
    ))
}
