//! The spend-alert modes (access token only): `alert_settings_set` (`PUT
//! /alerts/settings`: thresholds, floor, mail, webhook; the webhook's
//! secret answered once, when it is made), `alert_settings_get` (the
//! settings, never the secret), `alert_list` (`GET /alerts`: what was
//! sent, newest first). The checks and deliveries are `crate::alerts`.
//!
//! The settings replace the earlier ones whole (a field left out is its
//! default: no thresholds, no floor, no mail, no webhook). The webhook's
//! secret is kept while its URL stays the same; a new or changed URL gets
//! a new secret (answered once), no URL drops it.

use http::StatusCode;
use rand::RngCore;
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use super::common::{read_body, secret_answer};
use crate::ctx::{Ctx, Outcome};
use gateway_base::billing::format_money;
use gateway_base::body::{self, Request};
use gateway_base::errors::ApiError;
use gateway_store::{AlertSettings, Alerts};

/// At most this many budget thresholds.
const MAX_THRESHOLDS: usize = 10;

fn bad(field: &str, why: &str) -> ApiError {
    ApiError::BadRequest(format!("{field}: {why}"))
}

fn settings_json(s: &AlertSettings) -> Value {
    json!({
        "budget_thresholds": s.budget_thresholds,
        "balance_floor_usd": s.balance_floor.map(format_money),
        "email": s.email,
        "webhook_url": s.webhook_url,
        "webhook_secret_set": s.webhook_secret.is_some(),
        "updated_at": s.updated_at,
    })
}

/// `budget_thresholds`: whole percentages from 1 to 100, at most
/// [`MAX_THRESHOLDS`], sorted, each once.
fn thresholds_of(obj: &Map<String, Value>) -> Result<Vec<u32>, ApiError> {
    let field = "budget_thresholds";
    let list = match obj.get(field) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(l)) => l,
        Some(_) => return Err(bad(field, "a list of percentages from 1 to 100")),
    };
    let mut out = Vec::with_capacity(list.len());
    for v in list {
        match v.as_u64().filter(|n| (1..=100).contains(n)) {
            Some(n) => out.push(n as u32),
            None => {
                return Err(bad(
                    field,
                    &format!("{v} is not a whole percentage from 1 to 100"),
                ))
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    if out.len() > MAX_THRESHOLDS {
        return Err(bad(field, &format!("at most {MAX_THRESHOLDS} thresholds")));
    }
    Ok(out)
}

/// `balance_floor_usd`: a decimal (string or number) from 0, at most 8
/// places; null or absent: no floor.
fn floor_of(obj: &Map<String, Value>) -> Result<Option<Decimal>, ApiError> {
    let field = "balance_floor_usd";
    let text = match obj.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err(bad(field, "a decimal amount in USD, or null")),
    };
    let d: Decimal = text
        .parse()
        .map_err(|_| bad(field, &format!("{text:?} is not a decimal amount")))?;
    if d.is_sign_negative() || d.scale() > 8 || d > Decimal::from(1_000_000_000_000i64) {
        return Err(bad(
            field,
            "from 0 to 1000000000000 USD, with at most 8 decimal places",
        ));
    }
    Ok(Some(d))
}

/// `webhook_url`: an absolute `http` or `https` URL with a host, or null.
fn webhook_of(obj: &Map<String, Value>) -> Result<Option<String>, ApiError> {
    let field = "webhook_url";
    let url = match obj.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(_) => return Err(bad(field, "an http(s) URL, or null")),
    };
    match url.parse::<http::Uri>() {
        Ok(u)
            if matches!(u.scheme_str(), Some("http" | "https"))
                && u.host().is_some_and(|h| !h.is_empty())
                && url.len() <= 2048 =>
        {
            Ok(Some(url))
        }
        _ => Err(bad(field, "an absolute http(s) URL with a host")),
    }
}

/// `PUT /alerts/settings`.
pub async fn set(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let uid = ctx.require_user("alert settings")?;
    let obj = read_body(ctx, req).await?;
    let budget_thresholds = thresholds_of(&obj)?;
    let balance_floor = floor_of(&obj)?;
    let webhook_url = webhook_of(&obj)?;
    let email = match obj.get("email") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("email", "true or false")),
    };
    let (settings, made) = ctx
        .gw
        .store
        .blocking(move |s| {
            let before = s.alert_settings(uid)?;
            let kept = before
                .filter(|b| b.webhook_url.is_some() && b.webhook_url == webhook_url)
                .and_then(|b| b.webhook_secret);
            let made = match (&webhook_url, &kept) {
                (Some(_), None) => Some(new_secret()),
                _ => None,
            };
            let settings = AlertSettings {
                budget_thresholds,
                balance_floor,
                email,
                webhook_url,
                webhook_secret: kept.or_else(|| made.clone()),
                updated_at: gateway_store::now_rfc3339(),
                floor_alerted: false,
            };
            s.set_alert_settings(uid, &settings)?;
            Ok((settings, made))
        })
        .await?;
    // A check now: a threshold already passed fires without waiting for a charge.
    ctx.gw.charged.settings_changed(uid);
    let mut v = settings_json(&settings);
    if let Some(secret) = made {
        v["webhook_secret"] = json!(secret);
    }
    Ok(secret_answer(StatusCode::OK, &v))
}

/// `whsec_` and 32 random bytes in hex.
fn new_secret() -> String {
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    format!("whsec_{}", hex::encode(b))
}

/// `GET /alerts/settings`.
pub async fn get(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let uid = ctx.require_user("alert settings")?;
    let s = ctx
        .gw
        .store
        .blocking(move |s| s.alert_settings(uid))
        .await?;
    let v = match s {
        Some(s) => settings_json(&s),
        None => settings_json(&AlertSettings {
            budget_thresholds: Vec::new(),
            balance_floor: None,
            email: false,
            webhook_url: None,
            webhook_secret: None,
            updated_at: String::new(),
            floor_alerted: false,
        }),
    };
    Ok(Outcome::new(body::json(StatusCode::OK, &v), None))
}

/// `GET /alerts`: the caller's alerts, newest first (at most 100).
pub async fn list(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let uid = ctx.require_user("alerts")?;
    let rows = ctx
        .gw
        .store
        .blocking(move |s| s.alerts_of(uid, 100))
        .await?;
    let data: Vec<Value> = rows
        .iter()
        .map(|a| {
            let mut v: Value = serde_json::from_str(&a.body).unwrap_or_else(|_| json!({}));
            v["deliveries"] = json!({
                "email": a.email_state,
                "webhook": a.webhook_state,
                "attempts": a.attempts,
            });
            v
        })
        .collect();
    Ok(Outcome::new(
        body::json(StatusCode::OK, &json!({ "data": data })),
        None,
    ))
}
