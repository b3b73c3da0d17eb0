//! `proxy` on the collection of an owned resource (`GET /voices`,
//! `GET /projects`, ...): the caller's own items, paginated by the gateway.
//!
//! The upstream's list is read whole, page by page ([`UPSTREAM_PAGE`] items,
//! at most [`MAX_PAGES`] pages), and filtered to the caller's own resources
//! (plus the account's stock voices, which everyone may read); see
//! [`crate::owners`] for the rules. A collection that lives under a parent
//! upstream (`/agents/{agent_uuid}/tools`) is read for the parent the caller
//! names in the query, or for each of the caller's parents when none is named.

use std::collections::HashMap;

use gateway_store::Owners;
use http::StatusCode;
use serde_json::Value;

use crate::ctx::{Ctx, Outcome};
use crate::owners::is_stock_item;
use crate::shape;
use gateway_base::body::json;
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;

/// Page size asked of the upstream while reading a whole list.
const UPSTREAM_PAGE: u32 = 1000;
/// Most upstream pages read for one list.
const MAX_PAGES: u32 = 50;

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
    let up = ctx.upstream()?;
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
    for base_query in upstream_queries(ctx).await? {
        for upstream_page in 1..=MAX_PAGES {
            let mut query = base_query.clone();
            let path = shape::upstream_path(spec, up.path, params, &mut query, None)?;
            query.push(("page".into(), upstream_page.to_string()));
            query.push(("page_size".into(), UPSTREAM_PAGE.to_string()));
            shape::shape_query(spec, &mut query);
            let answer = ctx.gw.upstream.call(up, &path, &query)?.send().await?;
            upstream_status = answer.status();
            let v = answer.json("a list").await?;
            let items = v
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let n = items.len();
            for item in items {
                let visible = match item_id(&item).and_then(|id| owners.get(&id).copied()) {
                    Some(owner) => Some(owner) == user,
                    None => ctx.gw.table.shared_stock(kind) && is_stock_item(&ctx.gw, &item),
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
    }
    let total = mine.len();
    let num_pages = total.div_ceil(page_size as usize).max(1);
    let start = ((page - 1) as usize * page_size as usize).min(total);
    let end = (start + page_size as usize).min(total);
    let answer = serde_json::json!({
        "success": true,
        "page": page,
        "num_pages": num_pages,
        "page_size": page_size,
        "total_items": total,
        "items": &mine[start..end],
    });
    Ok(Outcome::new(
        json(StatusCode::OK, &answer),
        Some(upstream_status),
    ))
}

/// The queries of the upstream lists to read: the caller's query (without
/// the gateway's own pagination), or, when the row's path takes an owned
/// parent from the query and the caller names none (`GET /agent-tools`),
/// one query per parent of the caller's (each of their agents).
async fn upstream_queries(ctx: &Ctx) -> Result<Vec<Vec<(String, String)>>, ApiError> {
    let base: Vec<(String, String)> = ctx
        .query
        .iter()
        .filter(|(k, _)| k != "page" && k != "page_size")
        .cloned()
        .collect();
    let from_query = ctx.spec.upstream.map(|u| u.from_query).unwrap_or(&[]);
    let missing = ctx
        .spec
        .owner_checks
        .iter()
        .find(|c| from_query.contains(&c.param) && !base.iter().any(|(k, _)| k == c.param));
    let Some(check) = missing else {
        return Ok(vec![base]);
    };
    let user = ctx.require_user("list")?;
    let kind = check.kind;
    let mut parents: Vec<String> = ctx
        .gw
        .store
        .blocking(move |store| store.resource_owners(kind))
        .await?
        .into_iter()
        .filter(|(_, owner)| *owner == user)
        .map(|(id, _)| id)
        .collect();
    parents.sort();
    Ok(parents
        .into_iter()
        .map(|parent| {
            let mut q = base.clone();
            q.push((check.param.to_owned(), parent));
            q
        })
        .collect())
}

fn query_num(query: &[(String, String)], name: &str) -> Option<u32> {
    query
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.trim().parse().ok())
}
