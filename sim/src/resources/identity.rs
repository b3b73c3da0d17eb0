//! Identities: enrolment, attachments with uploaded files, and search
//! (deterministic distances per URL and identity).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::crud::{new_record, parent};
use super::fields::{int_field, required};
use super::handler::R;
use crate::audio;
use crate::jobs;
use crate::request::Req;
use crate::response::{bad_field, ok_item};
use crate::shared::Shared;

/// `POST /identity`: enrols an identity (`name` required).
pub(super) fn identity_create(sh: &Arc<Shared>, req: &Req) -> R {
    let fields = req.fields()?;
    required(&fields, "name")?;
    let item = new_record(json!({}), fields);
    let mut store = sh.store.lock().unwrap();
    store.billing.add("identity_enroll", 1.0);
    Ok(ok_item(store.insert("identity", item)))
}

/// `POST /identity/{id}/attachments`.
pub(super) fn attachment_create(sh: &Arc<Shared>, req: &Req, identity: &str) -> R {
    parent(sh, "identity", identity, "identity")?;
    let fields = req.fields()?;
    let mut item = new_record(json!({"identity_uuid": identity}), fields);
    if let Some(p) = req
        .parts
        .as_ref()
        .and_then(|ps| ps.iter().find(|p| p.filename.is_some()))
    {
        item.insert("file_name".into(), json!(p.filename));
        item.insert("size".into(), json!(p.data.len()));
        item.insert(
            "duration_seconds".into(),
            json!(audio::probe_duration(&p.data)),
        );
    }
    Ok(ok_item(
        sh.store
            .lock()
            .unwrap()
            .insert(&format!("identity/{identity}/attachments"), item),
    ))
}

/// `POST /identity/search`: the `top_k` nearest identities to `url`.
pub(super) fn identity_search(sh: &Arc<Shared>, req: &Req) -> R {
    let fields = req.fields()?;
    let url = required(&fields, "url")?.to_owned();
    let top_k = match int_field(&fields, "top_k")? {
        None => 10,
        Some(k) if (1..=100).contains(&k) => k as usize,
        Some(_) => return Err(bad_field("top_k", "must be between 1 and 100")),
    };
    let mut store = sh.store.lock().unwrap();
    let mut hits: Vec<(f64, String, Value)> = store
        .list("identity")
        .into_iter()
        .map(|i| {
            let id = i
                .get("uuid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let distance = (jobs::fnv(&format!("{url}|{id}")) * 1000.0).round() / 1000.0;
            (distance, id, i.get("name").cloned().unwrap_or(Value::Null))
        })
        .collect();
    hits.sort_by(|a, b| a.0.total_cmp(&b.0));
    let item: Map<String, Value> = hits
        .into_iter()
        .take(top_k)
        .map(|(d, id, name)| {
            (
                id,
                json!({"name": name, "distance": d, "score_type": "cosine_distance"}),
            )
        })
        .collect();
    store.billing.add("identity_search", 1.0);
    Ok(ok_item(Value::Object(item)))
}
