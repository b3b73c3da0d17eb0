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
//!   upstream call. The exception is the upstream account's *stock voices*:
//!   everyone may read them (GET), nobody may change them.
//! * **Stock voices** ([`is_stock`]) are the voices the provider lists with
//!   `source: "stock"` (read from its voice list, remembered for
//!   [`STOCK_TTL`]) and those named in `GATEWAY_STOCK_VOICES`. Any other voice
//!   no gateway user created (made on the upstream account outside the
//!   gateway) is nobody's to read, list or use: 404 like an unknown id.
//! * **Body fields** named in `[resources]` (the `voice_uuid` of a synthesis
//!   or an edit, [`check_body`]): another user's resource, or one nobody
//!   owns, answers 404; stock voices may be used by everyone.
//! * **After a create** (POST of a row with `resource`): the new id from the
//!   upstream's answer is recorded as the caller's ([`created`]).
//! * **After a delete**: the record is removed.
//! * **Lists** (GET of a collection row with `resource`): the upstream's list
//!   is read whole (page by page) and filtered to the caller's own resources
//!   (plus stock voices), then paginated by the gateway
//!   ([`crate::modes::lists`]).
//!
//! The owner cache is updated from the ownership records once they are
//! committed ([`cache_change`], applied by the pipeline's record phase
//! through `Gateway::owners_changed` ([`crate::services`]), which also tells the other
//! instances), never by a mode: a create or delete whose records did not
//! commit leaves no trace.

use serde_json::Value;

pub use gateway_base::owner_cache::{OwnerCache, StockVoices, CACHE_TTL, STOCK_TTL};

use crate::ctx::Ctx;
use crate::services::Gateway;
use crate::shape;
use gateway_base::errors::ApiError;
use gateway_base::spec::{EndpointSpec, Method, PathParams};
use gateway_store::{Owners, Record};

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

/// What committing `record` changes in the owner cache, if anything: the
/// pipeline takes these before the commit and applies them after it.
pub fn cache_change(record: &Record) -> Option<(String, String, Option<i64>)> {
    match record {
        Record::OwnerAdd {
            kind,
            upstream_id,
            owner_id,
            ..
        } => Some((kind.clone(), upstream_id.clone(), Some(*owner_id))),
        Record::OwnerRemove { kind, upstream_id } => {
            Some((kind.clone(), upstream_id.clone(), None))
        }
        _ => None,
    }
}

/// Whether `id` is one of the account's stock voices, which every user may
/// read and use: named in `GATEWAY_STOCK_VOICES`, or listed by the provider
/// with `source: "stock"`.
pub async fn is_stock(gw: &Gateway, id: &str) -> Result<bool, ApiError> {
    if gw.config.stock_voices.iter().any(|v| v == id) {
        return Ok(true);
    }
    if let Some(hit) = gw.stock_voices.lookup(id) {
        return Ok(hit);
    }
    let _one = gw.stock_voices.refreshing.lock().await;
    if let Some(hit) = gw.stock_voices.lookup(id) {
        return Ok(hit);
    }
    let ids = read_stock_voices(gw).await?;
    let hit = ids.contains(id);
    *gw.stock_voices
        .known
        .write()
        .unwrap_or_else(|e| e.into_inner()) = Some((ids, std::time::Instant::now()));
    Ok(hit)
}

/// Whether a voice of the provider's list is a stock voice.
pub fn is_stock_item(gw: &Gateway, item: &Value) -> bool {
    item.get("source").and_then(Value::as_str) == Some("stock")
        || item
            .get("uuid")
            .and_then(Value::as_str)
            .is_some_and(|id| gw.config.stock_voices.iter().any(|v| v == id))
}

/// The ids of the voices the provider lists with `source: "stock"` (its
/// `GET /voices`, page by page; not a gateway route, so not a table row).
async fn read_stock_voices(gw: &Gateway) -> Result<std::collections::HashSet<String>, ApiError> {
    const PAGE: u32 = 1000;
    const MAX_PAGES: u32 = 50;
    let up = gateway_base::spec::Upstream {
        base: gateway_base::spec::Base::Main,
        method: Method::Get,
        path: "/voices",
        from_query: &[],
        from_body: &[],
        from_parent: &[],
        auth: gw.table.base_auth(gateway_base::spec::Base::Main),
    };
    let mut ids = std::collections::HashSet::new();
    for page in 1..=MAX_PAGES {
        let query = [
            ("page".to_owned(), page.to_string()),
            ("page_size".to_owned(), PAGE.to_string()),
        ];
        let v = gw
            .upstream
            .call(&up, up.path, &query)?
            .send()
            .await?
            .json("its voice list")
            .await?;
        let items = v.get("items").and_then(Value::as_array);
        let n = items.map_or(0, Vec::len);
        for item in items.into_iter().flatten() {
            if item.get("source").and_then(Value::as_str) == Some("stock") {
                if let Some(id) = item.get("uuid").and_then(Value::as_str) {
                    ids.insert(id.to_owned());
                }
            }
        }
        let num_pages = v.get("num_pages").and_then(Value::as_u64).unwrap_or(0);
        if n < PAGE as usize || (num_pages > 0 && page as u64 >= num_pages) {
            break;
        }
    }
    Ok(ids)
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

/// What the tenant checks read of a request: the gateway, the row, the
/// caller's id and the request's query (the pipeline and the modes hand
/// them over; the context stays with its driver).
#[derive(Clone, Copy)]
pub struct Asked<'a> {
    pub gw: &'a Gateway,
    pub spec: &'static EndpointSpec,
    pub user: Option<i64>,
    pub query: &'a [(String, String)],
}

/// Checks every owned parameter of the row (see the module docs).
pub async fn check(a: Asked<'_>, params: &PathParams) -> Result<(), ApiError> {
    let Some(user) = a.user else {
        return Ok(());
    };
    for c in a.spec.owner_checks {
        let value = match params.get(c.param) {
            Some(v) => v.into_owned(),
            None => match a.query.iter().find(|(k, _)| k == c.param) {
                Some((_, v)) => v.clone(),
                None => continue, // a required query parameter is reported by validation
            },
        };
        let allowed = match owner_of(a.gw, c.kind, value.clone()).await? {
            Some(owner) => owner == user,
            None => {
                a.gw.table.shared_stock(c.kind)
                    && a.spec.method == Method::Get
                    && is_stock(a.gw, &value).await?
            }
        };
        if !allowed {
            return Err(not_found(c.kind, &value));
        }
    }
    Ok(())
}

/// Checks the owned fields of a JSON body (e.g. the `voice_uuid` a synthesis
/// or an edit uses): another user's resource, or one nobody owns, answers
/// 404 like an unknown one; the account's stock voices may be used.
pub async fn check_body(
    a: Asked<'_>,
    body: &serde_json::Map<String, Value>,
) -> Result<(), ApiError> {
    let Some(user) = a.user else {
        return Ok(());
    };
    for c in a.spec.owner_checks {
        if a.spec.params.contains(&c.param) || a.query.iter().any(|(k, _)| k == c.param) {
            continue; // a path or query parameter, checked by `check`
        }
        let Some(Value::String(value)) = body.get(c.param) else {
            continue;
        };
        let allowed = match owner_of(a.gw, c.kind, value.clone()).await? {
            Some(owner) => owner == user,
            None => a.gw.table.shared_stock(c.kind) && is_stock(a.gw, value).await?,
        };
        if !allowed {
            return Err(not_found(c.kind, value));
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
pub fn upstream_not_found(spec: &EndpointSpec, params: &PathParams, e: ApiError) -> ApiError {
    if !matches!(e, ApiError::UpstreamNotFound(_)) {
        return e;
    }
    let last = spec
        .owner_checks
        .iter()
        .rev()
        .find_map(|c| params.get(c.param).map(|v| (c.kind, v.into_owned())));
    match last {
        Some((kind, id)) => not_found(kind, &id),
        None => e,
    }
}

/// The record of a resource created by this request, from the upstream's
/// answer; `parent` is the resource it belongs to upstream, when the row
/// names one ([`parent_of_create`]).
pub fn created(ctx: &Ctx, answer: &Value, parent: Option<String>) -> Result<Record, ApiError> {
    let kind = ctx.spec.resource.unwrap_or_default();
    // The kind's own id field (`[kinds]`), else `id`/`uuid`.
    let id = ctx
        .gw
        .table
        .kind(kind)
        .and_then(|k| k.id_field)
        .and_then(|field| answer.get(field))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| shape::upstream_id(answer))
        .ok_or_else(|| {
            ApiError::BadGateway(format!(
                "the voice provider created a {kind} but its answer names no id"
            ))
        })?;
    let owner_id = ctx.require_user("create")?;
    Ok(Record::OwnerAdd {
        kind: kind.to_owned(),
        upstream_id: id,
        owner_id,
        parent,
        at: gateway_store::now_rfc3339(),
    })
}

/// The parent a create names: the value of the row's owned `from_body`
/// variable (`fields.agent_uuid` of an agent tool), read before the body is
/// shaped (shaping removes it).
pub fn parent_of_create(ctx: &Ctx, body: &serde_json::Map<String, Value>) -> Option<String> {
    let up = ctx.spec.upstream.as_ref()?;
    up.from_body
        .iter()
        .find(|v| ctx.spec.owner_checks.iter().any(|c| c.param == **v))
        .and_then(|v| body.get(*v))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Fills the row's `from_parent` template variables from the parent
/// recorded with the addressed resource (its last path parameter; already
/// checked to be the caller's). A resource recorded without one answers 404.
pub async fn fill_parents(
    gw: &Gateway,
    spec: &EndpointSpec,
    params: &mut PathParams,
) -> Result<(), ApiError> {
    let Some(up) = spec.upstream.as_ref().filter(|u| !u.from_parent.is_empty()) else {
        return Ok(());
    };
    let (Some(kind), Some(last)) = (spec.resource, spec.params.last()) else {
        return Err(ApiError::bug(format!(
            "row {} has from_parent but no resource",
            spec.id
        )));
    };
    let id = params.get(last).map(|v| v.into_owned()).unwrap_or_default();
    let key = id.clone();
    let parent = gw
        .store
        .blocking(move |store| store.resource_parent(kind, &key))
        .await?
        .ok_or_else(|| not_found(kind, &id))?;
    for var in up.from_parent {
        params.push(var, &gateway_adapters::upstream::encode_segment(&parent));
    }
    Ok(())
}

/// The record removing the resource this request deleted.
pub fn deleted(ctx: &Ctx, params: &PathParams) -> Option<Record> {
    let last = ctx.spec.params.last()?;
    let (kind, id) = (ctx.spec.resource?, params.get(last)?.into_owned());
    Some(Record::OwnerRemove {
        kind: kind.to_owned(),
        upstream_id: id,
    })
}
