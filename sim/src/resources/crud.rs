//! The generic CRUD handlers over store collections (list, counted list,
//! create, get, update, delete), parent checks, pagination and new records,
//! shared by the handler groups and the routes.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::fields::{bool_of, new_id, obj};
use super::handler::R;
use crate::jobs;
use crate::request::Req;
use crate::response::{bad_field, not_found, ok, ok_item, Resp};
use crate::shared::Shared;

/// 404 (`what` not found) unless record `id` exists in `coll`.
pub(super) fn parent(sh: &Arc<Shared>, coll: &str, id: &str, what: &str) -> Result<(), Resp> {
    if sh.store.lock().unwrap().exists(coll, id) {
        Ok(())
    } else {
        Err(not_found(what))
    }
}

/// `(page, page_size)` from the query; `size_key` names the size parameter.
pub(super) fn page_params(req: &Req, size_key: &str) -> Result<(usize, usize), Resp> {
    let parse = |key: &str, default: usize| -> Result<usize, Resp> {
        match req.query_param(key) {
            None => Ok(default),
            Some(s) if s.is_empty() => Ok(default),
            Some(s) => match s.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(bad_field(key, "must be a positive integer")),
            },
        }
    };
    let size = match req.query_param(size_key) {
        Some(_) => parse(size_key, 10)?,
        None => parse("page_size", 10)?,
    };
    Ok((parse("page", 1)?, size.min(1000)))
}

/// Page `page` (1-based) of `size` items.
pub(super) fn page_slice(items: Vec<Value>, page: usize, size: usize) -> Vec<Value> {
    items
        .into_iter()
        .skip((page - 1).saturating_mul(size))
        .take(size)
        .collect()
}

/// `{"success", "page", "num_pages", "page_size", "items"}`.
pub(super) fn paginate(req: &Req, items: Vec<Value>, size_key: &str) -> R {
    let (page, size) = page_params(req, size_key)?;
    let num_pages = items.len().div_ceil(size).max(1);
    let items = page_slice(items, page, size);
    Ok(ok(
        json!({"success": true, "page": page, "num_pages": num_pages, "page_size": size, "items": items}),
    ))
}

/// A collection as a paginated list.
pub(super) fn crud_list(sh: &Arc<Shared>, req: &Req, coll: &str) -> R {
    let items: Vec<Value> = sh
        .store
        .lock()
        .unwrap()
        .list(coll)
        .into_iter()
        .map(|m| Value::Object(m.clone()))
        .collect();
    paginate(req, items, "page_size")
}

/// `{"success", "items", "count"}` (paged only when `page`/`page_size` are given).
pub(super) fn counted_list(sh: &Arc<Shared>, req: &Req, coll: &str) -> R {
    let items: Vec<Value> = sh
        .store
        .lock()
        .unwrap()
        .list(coll)
        .into_iter()
        .map(|m| Value::Object(m.clone()))
        .collect();
    let count = items.len();
    let items = if req.query_param("page").is_some() || req.query_param("page_size").is_some() {
        let (page, size) = page_params(req, "page_size")?;
        page_slice(items, page, size)
    } else {
        items
    };
    Ok(ok(json!({"success": true, "items": items, "count": count})))
}

/// New record: `defaults`, then the request fields, then uuid and timestamps.
pub(super) fn new_record(defaults: Value, fields: Map<String, Value>) -> Map<String, Value> {
    let mut item = obj(defaults);
    for (k, v) in fields {
        let v = if k.starts_with("is_") { bool_of(&v) } else { v };
        item.insert(k, v);
    }
    let now = jobs::now();
    item.insert("uuid".into(), json!(new_id()));
    item.insert("created_at".into(), json!(now));
    item.insert("updated_at".into(), json!(now));
    item
}

/// Creates a record in `coll` from the request fields over `defaults`.
pub(super) fn crud_create(sh: &Arc<Shared>, req: &Req, coll: &str, defaults: Value) -> R {
    let fields = req.fields()?;
    let item = new_record(defaults, fields);
    Ok(ok_item(sh.store.lock().unwrap().insert(coll, item)))
}

/// One record (404 names `what`).
pub(super) fn crud_get(sh: &Arc<Shared>, coll: &str, id: &str, what: &str) -> R {
    let store = sh.store.lock().unwrap();
    store
        .get(coll, id)
        .map(|m| ok_item(Value::Object(m.clone())))
        .ok_or_else(|| not_found(what))
}

/// Merges the request fields into a record (voices render as GET does).
pub(super) fn crud_update(sh: &Arc<Shared>, req: &Req, coll: &str, id: &str, what: &str) -> R {
    let fields = req.fields()?;
    let mut guard = sh.store.lock().unwrap();
    let store = &mut *guard;
    let rec = store
        .colls
        .get_mut(coll)
        .and_then(|c| c.get_mut(id))
        .ok_or_else(|| not_found(what))?;
    for (k, v) in fields {
        if k != "uuid" && k != "created_at" {
            let v = if k.starts_with("is_") { bool_of(&v) } else { v };
            rec.item.insert(k, v);
        }
    }
    rec.item.insert("updated_at".into(), json!(jobs::now()));
    let item = Value::Object(rec.item.clone());
    if coll == "voices" {
        return Ok(ok_item(store.voice_item(id).unwrap_or(item)));
    }
    Ok(ok_item(item))
}

/// Deletes a record and its nested collections.
pub(super) fn crud_delete(sh: &Arc<Shared>, coll: &str, id: &str, what: &str) -> R {
    if sh.store.lock().unwrap().remove(coll, id) {
        Ok(ok(json!({"success": true})))
    } else {
        Err(not_found(what))
    }
}
