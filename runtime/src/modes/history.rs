//! `generation`, `usage_totals`, `credit_balance`, `credit_ledger`: what a
//! user spent, read back over HTTP — one request's generation, usage
//! totals per day, model, route or API key, the balance with its holds, and the
//! ledger newest first by cursor. On a row with `auth = "admin"` they read
//! the user of the path's `{user_id}` (404 when there is none), else the
//! caller's own (another user's request id answers 404). Every read is an
//! indexed range of the store (`store::history`).

use chrono::{Duration, NaiveDate, Utc};
use http::{header, HeaderValue, StatusCode};
use serde_json::{json, Value};

use super::common::{account_for, addressed_user, query_str, query_u32, OrgRight};
use crate::ctx::{Ctx, Outcome};
use gateway_base::body;
use gateway_base::errors::ApiError;
use gateway_base::spec::{Auth, PathParams};
use gateway_models::cost::text;
use gateway_store::{Assets, Generation, GroupBy, History, Keys, Ledger, UsageTotals};

/// Days of usage read when `from` is not given.
const DEFAULT_DAYS: i64 = 31;
/// The widest range of days one usage read may cover.
const MAX_DAYS: i64 = 366;
/// Ledger lines per page when `limit` is not given.
const DEFAULT_LEDGER_PAGE: u32 = 50;

fn ok(v: Value) -> Outcome {
    Outcome::new(body::json(StatusCode::OK, &v), None)
}

/// Whose history the row reads: the addressed user on an admin row, the
/// organization of `{org_id}` for its owners, admins and billing members,
/// else the caller.
async fn whose(ctx: &Ctx, params: &PathParams) -> Result<i64, ApiError> {
    if ctx.spec.auth == Auth::Admin {
        return Ok(addressed_user(ctx, params).await?.id);
    }
    Ok(account_for(ctx, params, OrgRight::Billing).await?.id)
}

/// Totals by key regrouped by the member each key belongs to (an
/// organization's keys; `""`: keys of no member, and requests made with
/// no key).
fn by_member(
    groups: std::collections::BTreeMap<String, UsageTotals>,
    keys: &[gateway_store::KeyRow],
) -> std::collections::BTreeMap<String, UsageTotals> {
    let mut out = std::collections::BTreeMap::<String, UsageTotals>::new();
    for (k, t) in groups {
        let member = keys
            .iter()
            .find(|r| r.id.to_string() == k)
            .and_then(|r| r.member_id)
            .map_or_else(String::new, |m| m.to_string());
        let e = out.entry(member).or_default();
        e.requests += t.requests;
        e.tokens += t.tokens;
        e.seconds += t.seconds;
        e.images += t.images;
        e.cost += t.cost;
    }
    out
}

/// `GET /generations/{request_id}`.
pub async fn generation(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let user = whose(ctx, params).await?;
    let id: String = params
        .get("request_id")
        .map(|v| v.into_owned())
        .unwrap_or_default();
    let g = ctx
        .gw
        .store
        .blocking(move |s| s.generation(user, &id))
        .await?
        .ok_or_else(|| ApiError::NotFound("no such generation".into()))?;
    let mut v = generation_json(&g);
    if g.route_id == "audio.tts" {
        v["audio_url"] = speech_url(ctx, user, g.request_id).await?;
    }
    Ok(ok(v))
}

/// A fresh presigned URL of the speech request `request_id` stored, while
/// it is kept (`null` after, or when it stored none).
async fn speech_url(ctx: &Ctx, user: i64, request_id: String) -> Result<Value, ApiError> {
    let now = gateway_store::now_rfc3339();
    let asset = ctx
        .gw
        .store
        .blocking(move |s| s.speech_of(user, &request_id, &now))
        .await?;
    let Some(asset) = asset else {
        return Ok(Value::Null);
    };
    let url = ctx
        .gw
        .objects
        .presign_get(&asset.object_key, crate::generated::URL_VALIDITY)
        .map_err(|e| ApiError::internal("presigning speech", e))?;
    Ok(Value::String(url))
}

fn generation_json(g: &Generation) -> Value {
    let m = g.model.as_ref();
    let (provider, model) = match m.map(|m| m.model.as_str()) {
        Some(name) => match name.split_once('/') {
            Some((p, m)) => (Some(p), Some(m)),
            None => (None, Some(name)),
        },
        None => (None, None),
    };
    let quantity = |unit: &str| (g.unit == unit).then(|| g.quantity.normalize().to_string());
    json!({
        "request_id": g.request_id,
        "route": g.route_id,
        "product": g.product,
        "model": model,
        "deployment": provider,
        "tokens": {
            "input": m.map_or(0, |m| m.input_tokens),
            "output": m.map_or(0, |m| m.output_tokens),
            "cache_read": 0,
            "cache_write": 0,
        },
        "seconds": (g.unit.ends_with("seconds")).then(|| g.quantity.normalize().to_string()),
        "images": quantity("images"),
        "unit": g.unit,
        "quantity": g.quantity.normalize().to_string(),
        "cost": text(g.charged),
        "byok": m.is_some_and(|m| m.byok),
        "streamed": m.is_some_and(|m| m.streamed),
        "ended": m.map(|m| ended(&m.ended)),
        "latency_ms": m.and_then(|m| m.latency_ms),
        "created_at": g.created_at,
        "price_version": g.price_version,
    })
}

/// How a model request ended, as the generation shows it.
fn ended(stored: &str) -> &str {
    match stored {
        "timeout" => "timed_out",
        "disconnected" => "client_gone",
        other => other,
    }
}

/// A `YYYY-MM-DD` query date.
fn date(ctx: &Ctx, name: &str) -> Result<Option<NaiveDate>, ApiError> {
    query_str(ctx, name)
        .map(|v| {
            NaiveDate::parse_from_str(v.trim(), "%Y-%m-%d").map_err(|_| {
                ApiError::BadRequest(format!("{name}: a date (YYYY-MM-DD) is required"))
            })
        })
        .transpose()
}

/// `from` and `to` (both included): `to` today by default, `from` 31 days
/// back; at most 366 days.
fn range(ctx: &Ctx) -> Result<(NaiveDate, NaiveDate), ApiError> {
    let to = date(ctx, "to")?.unwrap_or_else(|| Utc::now().date_naive());
    let from = date(ctx, "from")?.unwrap_or(to - Duration::days(DEFAULT_DAYS - 1));
    if from > to {
        return Err(ApiError::BadRequest("from: must not be after to".into()));
    }
    if (to - from).num_days() >= MAX_DAYS {
        return Err(ApiError::BadRequest(format!(
            "from..to: at most {MAX_DAYS} days"
        )));
    }
    Ok((from, to))
}

/// `GET /usage?from=&to=&group_by=day|model|route|key|member|batch|tool&format=json|csv`
/// (`/organizations/{org_id}/usage` too). By member, a group is an
/// organization's member: the requests made with their keys.
/// By key, a group is the API key's id (`null`: requests made with an
/// access token, and charges a job's observer made after the request),
/// with the key's `key_name` and `key_prefix` in JSON. By batch, a group
/// is a batch's lines (`null`: the requests that were no batch's lines).
/// By tool, a group is an MCP tool (`server/tool`): its calls sent, free
/// ones too, and what they were charged.
pub async fn usage(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let user = whose(ctx, params).await?;
    let (from, to) = range(ctx)?;
    let (by, by_name) = match query_str(ctx, "group_by").unwrap_or("day") {
        "model" => (GroupBy::Model, "model"),
        "route" => (GroupBy::Route, "route"),
        "key" => (GroupBy::Key, "key"),
        "member" => (GroupBy::Key, "member"),
        "batch" => (GroupBy::Batch, "batch"),
        "tool" => (GroupBy::Tool, "tool"),
        _ => (GroupBy::Day, "day"),
    };
    let (start, end) = (
        format!("{from}T00:00:00.000Z"),
        format!("{}T00:00:00.000Z", to + Duration::days(1)),
    );
    let (groups, keys) = ctx
        .gw
        .store
        .blocking(move |s| {
            let groups = s.usage_totals_of(user, &start, &end, by)?;
            let keys = match by {
                GroupBy::Key => s.keys_of(user)?,
                _ => Vec::new(),
            };
            Ok((groups, keys))
        })
        .await?;
    let groups = match by_name {
        "member" => by_member(groups, &keys),
        _ => groups,
    };
    if query_str(ctx, "format") == Some("csv") {
        return csv(by_name, &groups);
    }
    let data: Vec<Value> = groups
        .iter()
        .map(|(k, t)| {
            let mut row = json!({
                by_name: k,
                "requests": t.requests,
                "tokens": t.tokens.normalize().to_string(),
                "seconds": t.seconds.normalize().to_string(),
                "images": t.images.normalize().to_string(),
                "cost": text(t.cost),
            });
            if by == GroupBy::Batch && k.is_empty() {
                row[by_name] = Value::Null;
            }
            if by_name == "member" {
                row[by_name] = k.parse::<i64>().map_or(Value::Null, |m| json!(m));
            } else if by == GroupBy::Key {
                let key = keys.iter().find(|r| r.id.to_string() == *k);
                row[by_name] = key.map_or(Value::Null, |r| json!(r.id));
                row["key_name"] = json!(key.and_then(|r| r.name.clone()));
                row["key_prefix"] = json!(key.and_then(|r| r.prefix.clone()));
            }
            row
        })
        .collect();
    let total = groups.values().fold(UsageTotals::default(), |mut a, t| {
        a.requests += t.requests;
        a.cost += t.cost;
        a
    });
    Ok(ok(json!({
        "user_id": user,
        "from": from.to_string(),
        "to": to.to_string(),
        "group_by": by_name,
        "data": data,
        "total": {"requests": total.requests, "cost": text(total.cost)},
    })))
}

/// The totals as CSV, one line per group.
fn csv(
    by: &str,
    groups: &std::collections::BTreeMap<String, UsageTotals>,
) -> Result<Outcome, ApiError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let write = |w: &mut csv::Writer<Vec<u8>>, rec: &[&str]| {
        w.write_record(rec)
            .map_err(|e| ApiError::internal("writing usage as CSV", e))
    };
    write(
        &mut w,
        &[by, "requests", "tokens", "seconds", "images", "cost"],
    )?;
    for (k, t) in groups {
        let cells = [
            k.clone(),
            t.requests.to_string(),
            t.tokens.normalize().to_string(),
            t.seconds.normalize().to_string(),
            t.images.normalize().to_string(),
            text(t.cost),
        ];
        let cells: Vec<&str> = cells.iter().map(String::as_str).collect();
        write(&mut w, &cells)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ApiError::internal("writing usage as CSV", e.into_error()))?;
    let mut r = http::Response::new(body::full(bytes));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    Ok(Outcome::new(r, None))
}

/// `GET /credits`: the balance, what live holds keep, and what is left.
pub async fn credits(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let user = whose(ctx, params).await?;
    let (balance, held) = ctx
        .gw
        .store
        .blocking(move |s| Ok((s.balance(user)?, s.held(user)?)))
        .await?;
    Ok(ok(json!({
        "user_id": user,
        "balance": text(balance),
        "held": text(held),
        "available": text(balance - held),
    })))
}

/// `GET /credits/ledger?limit=&cursor=`: newest first; `next_cursor`
/// reads the page after this one (`null` on the last).
pub async fn ledger(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let user = whose(ctx, params).await?;
    let limit = query_u32(ctx, "limit", DEFAULT_LEDGER_PAGE).clamp(1, 100);
    let before = match query_str(ctx, "cursor") {
        Some(c) => Some(
            c.parse::<i64>()
                .map_err(|_| ApiError::BadRequest("cursor: not a cursor of this list".into()))?,
        ),
        None => None,
    };
    let mut lines = ctx
        .gw
        .store
        .blocking(move |s| s.ledger_page(user, before, limit + 1))
        .await?;
    let next = (lines.len() > limit as usize).then(|| {
        lines.truncate(limit as usize);
        lines.last().map(|l| l.id.to_string())
    });
    let data: Vec<Value> = lines
        .iter()
        .map(|l| {
            json!({
                "id": l.id,
                "kind": l.kind,
                "amount": text(l.amount),
                "balance_after": text(l.balance_after),
                "usage_id": l.usage_id,
                "request_id": l.request_id,
                "note": l.note,
                "created_at": l.created_at,
            })
        })
        .collect();
    Ok(ok(json!({
        "user_id": user,
        "data": data,
        "next_cursor": next.flatten(),
    })))
}
