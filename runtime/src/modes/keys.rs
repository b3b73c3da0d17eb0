//! The key modes (access token only): `key_list` (never the keys; each
//! key's budget, what it spent and holds in the current period, and when
//! the period ends), `key_create` (the key answered once, with its budget
//! if asked: `store::budgets`), `key_revoke` (refused at once on
//! this instance: the key cache is dropped; on the others as soon as the
//! cluster bus tells them, with Redis), `key_update` (a live key's budget
//! set or removed, its `rpm`/`tpm` limits and MCP tools set, the key caches dropped the same way so that the next
//! request sees it).

use http::StatusCode;
use serde_json::{json, Value};

use super::common::{account_for, read_body, secret_answer, Account, OrgRight};
use crate::ctx::{Ctx, Outcome};
use gateway_adapters::auth;
use gateway_base::billing::format_money;
use gateway_base::body;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;
use gateway_store::{Budget, KeyLimit, KeyRow, Keys};

fn key_json(k: &KeyRow) -> Value {
    let b = k.budget.as_ref();
    json!({
        "id": k.id,
        "name": k.name,
        "prefix": k.prefix,
        "created_at": k.created_at,
        "revoked_at": k.revoked_at,
        "active": k.revoked_at.is_none(),
        "budget_usd": b.map(|b| b.budget.usd.to_string()),
        "budget_period": b.map(|b| b.budget.period.as_str()),
        "spent_usd": b.map(|b| format_money(b.spent)),
        "held_usd": b.map(|b| format_money(b.held)),
        "period_end": b.and_then(|b| b.period_end).map(gateway_store::rfc3339),
        "mcp_tools": k.mcp_tools,
        "rpm": k.rpm,
        "tpm": k.tpm,
        "member_id": k.member_id,
    })
}

/// The keys of `acc` its caller sees: every one when they manage it, else
/// their own (an organization's member).
fn visible(acc: &Account, keys: Vec<KeyRow>) -> Vec<KeyRow> {
    match acc.manages() {
        true => keys,
        false => keys
            .into_iter()
            .filter(|k| k.member_id == Some(acc.caller))
            .collect(),
    }
}

/// `rpm` and `tpm` as asked: each `None` not given, `Some(None)` null
/// (no limit), `Some(Some(n))` requests or tokens per minute (a whole
/// number from 1; 400 naming the field otherwise).
fn limits_of(
    obj: &serde_json::Map<String, Value>,
) -> Result<Vec<(KeyLimit, Option<u64>)>, ApiError> {
    let mut out = Vec::new();
    for (name, which) in [("rpm", KeyLimit::Rpm), ("tpm", KeyLimit::Tpm)] {
        match obj.get(name) {
            None => {}
            Some(Value::Null) => out.push((which, None)),
            Some(v) => match v.as_u64().filter(|n| *n >= 1 && *n <= i64::MAX as u64) {
                Some(n) => out.push((which, Some(n))),
                None => {
                    return Err(ApiError::BadRequest(format!(
                        "{name}: a whole number from 1, or null (no limit)"
                    )))
                }
            },
        }
    }
    Ok(out)
}

/// `mcp_tools` as asked: `None` not given, `Some(None)` null (every
/// tool), `Some(Some(list))` the allow-list (comma-separated as stored),
/// each entry `server/tool` or `server/*` (400 naming the entry).
fn mcp_tools_of(obj: &serde_json::Map<String, Value>) -> Result<Option<Option<String>>, ApiError> {
    let bad = |why: String| ApiError::BadRequest(format!("mcp_tools: {why}"));
    match obj.get("mcp_tools") {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(Value::Array(items)) => {
            let mut list = Vec::with_capacity(items.len());
            for i in items {
                let e = i
                    .as_str()
                    .ok_or_else(|| bad("a list of strings".into()))?
                    .trim();
                gateway_models::mcp::check_allow_entry(e).map_err(bad)?;
                list.push(e.to_owned());
            }
            Ok(Some(Some(list.join(","))))
        }
        Some(_) => Err(bad(
            "a list of server/tool or server/* entries, or null".into()
        )),
    }
}

/// The budget asked for on create: `budget_usd` (a decimal string or a
/// number, at most 8 places) with `budget_period` (`day`, `month`,
/// `total`), both or neither; 400 naming the field otherwise.
fn budget_of(obj: &serde_json::Map<String, Value>) -> Result<Option<Budget>, ApiError> {
    let usd = match obj.get("budget_usd") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(_) => {
            return Err(ApiError::BadRequest(
                "budget_usd: a decimal string or a number is required".into(),
            ))
        }
    };
    let period = obj.get("budget_period").and_then(Value::as_str);
    match (usd, period) {
        (None, None) => Ok(None),
        (Some(usd), Some(period)) => Budget::parse(&usd, period)
            .map(Some)
            .map_err(ApiError::BadRequest),
        (Some(_), None) => Err(ApiError::BadRequest(
            "budget_period: required with budget_usd (day, month or total)".into(),
        )),
        (None, Some(_)) => Err(ApiError::BadRequest(
            "budget_usd: required with budget_period".into(),
        )),
    }
}

/// `GET /keys`, `GET /organizations/{org_id}/keys` (a member's own).
pub async fn list(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let acc = account_for(ctx, params, OrgRight::OwnKeys).await?;
    let id = acc.id;
    let keys = ctx.gw.store.blocking(move |s| s.keys_of(id)).await?;
    let data: Vec<Value> = visible(&acc, keys).iter().map(key_json).collect();
    Ok(Outcome::new(
        body::json(StatusCode::OK, &json!({ "data": data })),
        None,
    ))
}

/// `POST /keys` `{name?, budget_usd?, budget_period?, rpm?, tpm?,
/// mcp_tools?}`; `POST /organizations/{org_id}/keys`: a key of the
/// organization, the caller's (its budget and limits set by those who
/// manage it).
pub async fn create(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let acc = account_for(ctx, params, OrgRight::OwnKeys).await?;
    let (uid, member) = (acc.id, acc.role.as_ref().map(|_| acc.caller));
    let obj = read_body(ctx, req).await?;
    let name = obj
        .get("name")
        .and_then(Value::as_str)
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    let budget = budget_of(&obj)?;
    let tools = mcp_tools_of(&obj)?.flatten();
    let limits = limits_of(&obj)?;
    if !acc.manages() && (budget.is_some() || !limits.is_empty()) {
        return Err(ApiError::Forbidden(
            "a key's budget and limits are set by the organization's owners and admins".into(),
        ));
    }
    let (id, key) = ctx
        .gw
        .store
        .blocking(move |s| {
            let (id, key) = auth::create_named_key(s, uid, name.as_deref(), budget)
                .map_err(gateway_store::StoreError::driver)?;
            if let Some(t) = &tools {
                s.set_key_mcp_tools(Some(uid), id, Some(t))?;
            }
            for (which, v) in limits {
                s.set_key_limit(Some(uid), id, which, v)?;
            }
            if let Some(m) = member {
                gateway_store::Organizations::set_key_member(s, id, m)?;
            }
            Ok((id, key))
        })
        .await?;
    let row = ctx
        .gw
        .store
        .blocking(move |s| Ok(s.keys_of(uid)?.into_iter().find(|k| k.id == id)))
        .await?
        .ok_or_else(|| ApiError::bug("created key not found"))?;
    let mut v = key_json(&row);
    v["key"] = json!(key);
    Ok(secret_answer(StatusCode::CREATED, &v))
}

/// `DELETE /keys/{key_id}`, `DELETE /organizations/{org_id}/keys/{key_id}`
/// (a member's own, or any for those who manage the organization).
pub async fn revoke(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let acc = account_for(ctx, params, OrgRight::OwnKeys).await?;
    let uid = acc.id;
    let key_id: i64 = params
        .get("key_id")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| ApiError::NotFound("no such key".into()))?;
    let own = (!acc.manages()).then_some(acc.caller);
    let done = ctx
        .gw
        .store
        .blocking(move |s| {
            // A member revokes only their own key of the organization.
            if let Some(caller) = own {
                let keys = s.keys_of(uid)?;
                if !keys
                    .iter()
                    .any(|k| k.id == key_id && k.member_id == Some(caller))
                {
                    return Ok(false);
                }
            }
            s.revoke_key(uid, key_id)
        })
        .await?;
    if !done {
        return Err(ApiError::NotFound("no such key".into()));
    }
    ctx.gw.credentials_changed().await;
    Ok(Outcome::new(
        body::json(StatusCode::OK, &json!({ "id": key_id, "revoked": true })),
        None,
    ))
}

/// `PATCH /keys/{key_id}` `{budget_usd, budget_period?}`: `budget_usd`
/// null removes the key's budget; a value sets it with `budget_period`
/// (as on create). 400 naming the field and nothing changed; another
/// user's, a revoked or an unknown key: 404.
pub async fn update(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let uid = account_for(ctx, params, OrgRight::Manage).await?.id;
    let key_id: Option<i64> = params.get("key_id").and_then(|v| v.parse().ok());
    let obj = read_body(ctx, req).await?;
    let tools = mcp_tools_of(&obj)?;
    let limits = limits_of(&obj)?;
    let budget =
        match obj.get("budget_usd") {
            None if tools.is_some() || !limits.is_empty() => None,
            None => return Err(ApiError::BadRequest(
                "budget_usd: required (null removes the key's budget), unless mcp_tools, rpm or tpm is given"
                    .into(),
            )),
            Some(Value::Null) if obj.get("budget_period").is_some_and(|p| !p.is_null()) => {
                return Err(ApiError::BadRequest(
                    "budget_period: not with budget_usd null (the budget is removed)".into(),
                ))
            }
            Some(_) => Some(budget_of(&obj)?),
        };
    let key_id = key_id.ok_or_else(|| ApiError::NotFound("no such key".into()))?;
    // Set, then read back as listed: `None` when no live key of the
    // caller's has this id (nothing changed).
    let row = ctx
        .gw
        .store
        .blocking(move |s| {
            if let Some(budget) = budget {
                if !s.set_key_budget(Some(uid), key_id, budget)? {
                    return Ok(None);
                }
            }
            if let Some(t) = &tools {
                if !s.set_key_mcp_tools(Some(uid), key_id, t.as_deref())? {
                    return Ok(None);
                }
            }
            for (which, v) in limits {
                if !s.set_key_limit(Some(uid), key_id, which, v)? {
                    return Ok(None);
                }
            }
            Ok(s.keys_of(uid)?.into_iter().find(|k| k.id == key_id))
        })
        .await?
        .ok_or_else(|| ApiError::NotFound("no such key".into()))?;
    // The key's cached caller carries its budget: dropped here and on the
    // other instances.
    ctx.gw.credentials_changed().await;
    Ok(Outcome::new(
        body::json(StatusCode::OK, &key_json(&row)),
        None,
    ))
}
