//! Tenant isolation: many users share one upstream account, so the gateway
//! records who created what, and nobody sees, changes or is billed for
//! another user's things.
//!
//! The table says which parameters name user-owned resources (`[resources]`
//! and each row's `resource`); the generated row carries them as
//! `owner_checks`. Rules:
//!
//! * **Before forwarding** ([`check`]): every checked parameter must name a
//!   resource the caller owns. Another user's resource, or one no gateway
//!   user created, answers 404 — the same answer as an unknown id, with no
//!   upstream call. The exception is the upstream account's *stock voices*
//!   (voices no gateway user owns): everyone may read them (GET), nobody may
//!   change them.
//! * **Body fields** named in `[resources]` (the `voice_uuid` of a synthesis
//!   or an edit, [`check_body`]): another user's resource answers 404; stock
//!   voices may be used by everyone.
//! * **After a create** (POST of a row with `resource`): the new id from the
//!   upstream's answer is recorded as the caller's ([`created`]).
//! * **After a delete**: the record is removed.
//! * **Lists** (GET of a collection row with `resource`): the upstream's list
//!   is read whole (page by page) and filtered to the caller's own resources
//!   (plus stock voices), then paginated by the gateway ([`list`]).

use std::collections::HashMap;

use http::StatusCode;
use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::forward::json_response;
use crate::pipeline::{Ctx, Outcome};
use crate::spec::{EndpointSpec, Method, PathParams};
use crate::store::Record;
use crate::{shape, Gateway};

/// The kind whose unowned resources (the account's stock) everyone may read.
pub const SHARED_STOCK_KIND: &str = "voice";
/// Page size asked of the upstream while reading a whole list.
const UPSTREAM_PAGE: u32 = 1000;
/// Most upstream pages read for one list.
const MAX_PAGES: u32 = 50;

/// Whether the row addresses its resource through its last path parameter.
fn addresses_item(spec: &EndpointSpec) -> bool {
    spec.path.ends_with('}')
}

/// Whether a successful request of this row creates a resource.
pub fn creates(spec: &EndpointSpec) -> bool {
    spec.resource.is_some() && spec.method == Method::Post && !addresses_item(spec)
}

/// Whether this row lists its resource.
pub fn lists(spec: &EndpointSpec) -> bool {
    spec.resource.is_some() && spec.method == Method::Get && !addresses_item(spec)
}

/// Whether a successful request of this row deletes its resource.
pub fn deletes(spec: &EndpointSpec) -> bool {
    spec.resource.is_some() && spec.method == Method::Delete && addresses_item(spec)
}

/// How long a looked-up owner is remembered. Ownership never changes hands
/// (ids are the upstream's fresh UUIDs); a create or delete made through this
/// instance updates the cache at once, one made through another instance is
/// seen within the TTL (a deleted resource then answers the upstream's 404).
pub const CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(30);
/// Entries kept before the cache is emptied and refilled.
const CACHE_MAX: usize = 100_000;

/// kind → upstream id → (owner, when looked up). Nested so that a lookup
/// borrows the id instead of allocating a key.
type OwnerMap = HashMap<&'static str, HashMap<String, (Option<i64>, std::time::Instant)>>;

/// Owner lookups, cached: the hot path of every owned route reads no database.
#[derive(Default)]
pub struct OwnerCache {
    map: std::sync::RwLock<OwnerMap>,
}

impl OwnerCache {
    fn get(&self, kind: &'static str, id: &str) -> Option<Option<i64>> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        match map.get(kind).and_then(|ids| ids.get(id)) {
            Some((owner, at)) if at.elapsed() < CACHE_TTL => Some(*owner),
            _ => None,
        }
    }

    /// Remembers (or, after a create or delete here, corrects) an owner.
    pub fn put(&self, kind: &'static str, id: String, owner: Option<i64>) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let ids = map.entry(kind).or_default();
        if ids.len() >= CACHE_MAX {
            ids.clear();
        }
        ids.insert(id, (owner, std::time::Instant::now()));
    }
}

async fn owner_of(gw: &Gateway, kind: &'static str, id: String) -> Result<Option<i64>, ApiError> {
    if let Some(owner) = gw.owner_cache.get(kind, &id) {
        return Ok(owner);
    }
    let key = id.clone();
    let owner = gw
        .store
        .blocking(move |store| store.resource_owner(kind, &key))
        .await?;
    gw.owner_cache.put(kind, id, owner);
    Ok(owner)
}

/// Checks every owned parameter of the row (see the module docs).
pub async fn check(ctx: &Ctx, params: &PathParams) -> Result<(), ApiError> {
    let Some(user) = ctx.user_id() else {
        return Ok(());
    };
    for c in ctx.spec.owner_checks {
        let value = match params.get(c.param) {
            Some(v) => v.into_owned(),
            None => match ctx.query.iter().find(|(k, _)| k == c.param) {
                Some((_, v)) => v.clone(),
                None => continue, // a required query parameter is reported by validation
            },
        };
        let allowed = match owner_of(&ctx.gw, c.kind, value.clone()).await? {
            Some(owner) => owner == user,
            None => c.kind == SHARED_STOCK_KIND && ctx.spec.method == Method::Get,
        };
        if !allowed {
            return Err(not_found(c.kind, &value));
        }
    }
    Ok(())
}

/// Checks the owned fields of a JSON body (e.g. the `voice_uuid` a synthesis
/// or an edit uses): another user's resource answers 404 like an unknown one;
/// resources no gateway user owns (the account's stock voices) may be used.
pub async fn check_body(ctx: &Ctx, body: &serde_json::Map<String, Value>) -> Result<(), ApiError> {
    let Some(user) = ctx.user_id() else {
        return Ok(());
    };
    for c in ctx.spec.owner_checks {
        if ctx.spec.params.contains(&c.param) || ctx.query.iter().any(|(k, _)| k == c.param) {
            continue; // a path or query parameter, checked by `check`
        }
        let Some(Value::String(value)) = body.get(c.param) else {
            continue;
        };
        if let Some(owner) = owner_of(&ctx.gw, c.kind, value.clone()).await? {
            if owner != user {
                return Err(not_found(c.kind, value));
            }
        }
    }
    Ok(())
}

/// The 404 of an owned resource: the same words whether it is another
/// user's, never existed, or the upstream does not know it.
pub fn not_found(kind: &str, id: &str) -> ApiError {
    ApiError::NotFound(format!("no {} {id}", kind.replace('_', " ")))
}

/// Rewrites the upstream's 404 of a row addressing an owned resource into
/// [`not_found`], so that an unknown id and another user's id read the same.
pub fn upstream_not_found(ctx: &Ctx, params: &PathParams, e: ApiError) -> ApiError {
    if !matches!(e, ApiError::UpstreamNotFound(_)) {
        return e;
    }
    let last = ctx
        .spec
        .owner_checks
        .iter()
        .rev()
        .find_map(|c| params.get(c.param).map(|v| (c.kind, v.into_owned())));
    match last {
        Some((kind, id)) => not_found(kind, &id),
        None => e,
    }
}

/// The record of a resource created by this request, from the upstream's answer.
pub fn created(ctx: &Ctx, answer: &Value) -> Result<Record, ApiError> {
    let kind = ctx.spec.resource.unwrap_or_default();
    let id = answer
        .get("voice_uuid")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .filter(|_| kind == "voice")
        .or_else(|| shape::upstream_id(answer))
        .ok_or_else(|| {
            ApiError::BadGateway(format!(
                "the voice provider created a {kind} but its answer names no id"
            ))
        })?;
    let owner_id = ctx
        .user_id()
        .ok_or_else(|| ApiError::Internal("create without a user".into()))?;
    ctx.gw.owner_cache.put(kind, id.clone(), Some(owner_id));
    Ok(Record::OwnerAdd {
        kind: kind.to_owned(),
        upstream_id: id,
        owner_id,
        at: crate::store::now_rfc3339(),
    })
}

/// The record removing the resource this request deleted.
pub fn deleted(ctx: &Ctx, params: &PathParams) -> Option<Record> {
    let last = ctx.spec.params.last()?;
    let (kind, id) = (ctx.spec.resource?, params.get(last)?.into_owned());
    ctx.gw.owner_cache.put(kind, id.clone(), None);
    Some(Record::OwnerRemove {
        kind: kind.to_owned(),
        upstream_id: id,
    })
}

/// The id of a list item.
fn item_id(item: &Value) -> Option<String> {
    ["uuid", "id"].iter().find_map(|k| match item.get(*k) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    })
}

/// `GET` of a collection: the caller's own resources (plus stock voices),
/// paginated by the gateway: `{"success", "page", "num_pages", "page_size",
/// "total_items", "items"}`.
pub async fn list(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let spec = ctx.spec;
    let kind = spec.resource.unwrap_or_default();
    let user = ctx.user_id();
    let up = spec
        .upstream
        .ok_or_else(|| ApiError::Internal(format!("row {} has no upstream", spec.id)))?;
    let page: u32 = query_num(&ctx.query, "page").unwrap_or(1).max(1);
    let page_size: u32 = query_num(&ctx.query, "page_size")
        .unwrap_or(10)
        .clamp(1, 1000);

    let owners: HashMap<String, i64> = ctx
        .gw
        .store
        .blocking(move |store| store.resource_owners(kind))
        .await?;

    let mut mine = Vec::new();
    let mut upstream_status = 200;
    for upstream_page in 1..=MAX_PAGES {
        let mut query: Vec<(String, String)> = ctx
            .query
            .iter()
            .filter(|(k, _)| k != "page" && k != "page_size")
            .cloned()
            .collect();
        let path = shape::upstream_path(spec, up.path, params, &mut query, None)?;
        query.push(("page".into(), upstream_page.to_string()));
        query.push(("page_size".into(), UPSTREAM_PAGE.to_string()));
        shape::shape_query(spec, &mut query);
        let rb = ctx.gw.upstream.request(&up, &path, &query)?;
        let resp = ctx.gw.upstream.send(up.base, rb).await?;
        upstream_status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| ctx.gw.upstream.network_error(up.base, &e))?;
        let v: Value = serde_json::from_slice(&bytes).map_err(|_| {
            ApiError::BadGateway("the voice provider answered a list that is not JSON".into())
        })?;
        let items = v
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let n = items.len();
        for item in items {
            let visible = match item_id(&item).and_then(|id| owners.get(&id).copied()) {
                Some(owner) => Some(owner) == user,
                None => kind == SHARED_STOCK_KIND,
            };
            if visible {
                mine.push(item);
            }
        }
        let num_pages = v.get("num_pages").and_then(Value::as_u64).unwrap_or(0);
        if n < UPSTREAM_PAGE as usize || (num_pages > 0 && upstream_page as u64 >= num_pages) {
            break;
        }
    }
    let total = mine.len();
    let num_pages = total.div_ceil(page_size as usize).max(1);
    let start = ((page - 1) as usize * page_size as usize).min(total);
    let end = (start + page_size as usize).min(total);
    let answer = json!({
        "success": true,
        "page": page,
        "num_pages": num_pages,
        "page_size": page_size,
        "total_items": total,
        "items": &mine[start..end],
    });
    Ok(Outcome::new(
        json_response(StatusCode::OK, &answer),
        Some(upstream_status),
    ))
}

fn query_num(query: &[(String, String)], name: &str) -> Option<u32> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.trim().parse().ok())
}
