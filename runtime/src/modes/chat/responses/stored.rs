//! Stored responses of the Responses API: what a response keeps
//! ([`Keeper`]: its turn's input items and the response object, per
//! tenant, `GATEWAY_RESPONSES_RETENTION_DAYS`), the conversation a request
//! continues ([`Turn`]), and the routes that read them: `response_get`,
//! `response_delete`, `response_input_items`, `response_cancel`.
//!
//! A tenant is the user, or with `GATEWAY_RESPONSES_SCOPE=key` the
//! presented key (an access token falls back to its user): another
//! tenant's id, a deleted one or an expired one is a 404, never a leak.
//! The input items a response lists are the ones its own request sent
//! (each given an id when it had none, by
//! [`gateway_models::responses_api::request::input_items`]), not the turns
//! it continues.

use std::future::Future;
use std::pin::Pin;

use http::StatusCode;
use serde_json::{json, Map, Value};

use crate::ctx::{Caller, Ctx, Outcome};
use crate::modes::common;
use gateway_base::body;
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;
use gateway_store::{OutsideRecordPhase, Record, ResponseRow, Responses, Store, Tenant};

/// The most responses a conversation rebuilds (a longer chain is cut at
/// its oldest turns).
const MAX_CHAIN: usize = 1000;

/// The caller's tenant of stored responses.
fn tenant(c: &Caller<'_>) -> Result<Tenant, ApiError> {
    let user_id = c.require_user("a stored response")?;
    let key_id = match c.gw.config.responses_by_key {
        true => c.user.and_then(|u| u.key_id),
        false => None,
    };
    Ok(Tenant { user_id, key_id })
}

/// The 404 of a response id the tenant does not have.
fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("Response with id '{id}' not found."))
}

/// What keeps a response once it is answered (nothing with `store:
/// false`): the record of the stored response, committed with the
/// request's bill (a whole answer) or before a stream's last event.
#[derive(Clone)]
pub(super) struct Keeper {
    /// The store; `None` when the caller asked not to store.
    store: Option<Store>,
    user_id: i64,
    /// The key it is made with (kept whatever the scope, so that a later
    /// `GATEWAY_RESPONSES_SCOPE=key` finds it).
    key_id: Option<i64>,
    request_id: String,
    /// A background run's (`background: true`).
    background: bool,
    /// The gateway's id of the response (a translated answer's).
    id: String,
    model: String,
    previous: Option<String>,
    /// JSON text of the turn's input items.
    input: String,
    created_at: String,
    expires_at: String,
}

/// A future that keeps a streamed response.
type Keeping = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Keeper {
    /// The keeper of a request's response (`id` is the response's, as
    /// the answer's echo says) with its new input `items`.
    pub(super) fn new(
        c: &Caller<'_>,
        body: &Map<String, Value>,
        items: &[Value],
        id: &str,
        previous: Option<String>,
    ) -> Result<Keeper, ApiError> {
        let store = body.get("store") != Some(&Value::Bool(false));
        let now = chrono::Utc::now();
        let expires = now
            + chrono::Duration::from_std(c.gw.config.responses_retention)
                .unwrap_or(chrono::Duration::days(30));
        Ok(Keeper {
            store: store.then(|| c.gw.store.clone()),
            user_id: c.require_user("a stored response")?,
            key_id: c.user.and_then(|u| u.key_id),
            request_id: c.request_id.to_owned(),
            background: body.get("background") == Some(&Value::Bool(true)),
            id: id.to_owned(),
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            previous,
            input: serde_json::to_string(items)
                .map_err(|e| ApiError::bug(format!("input items: {e}")))?,
            created_at: gateway_store::rfc3339(now),
            expires_at: gateway_store::rfc3339(expires),
        })
    }

    /// The stored response of `answer` (a response object; `text`, its
    /// JSON text when written already), served by `served`: a native
    /// answer (its id the provider's) is stored under the provider's id,
    /// which the provider knows the turn by.
    pub(super) fn record(
        &self,
        answer: &Value,
        text: Option<&str>,
        served: Option<&str>,
    ) -> Option<Record> {
        let status = answer.get("status").and_then(Value::as_str)?;
        if !matches!(status, "completed" | "incomplete") {
            return None;
        }
        self.save(answer, text, served)
    }

    /// The stored response of a translated whole answer: `text`, the
    /// response object of `status` written under the gateway's id, served
    /// by `served`.
    pub(super) fn record_text(&self, status: &str, text: &str, served: &str) -> Option<Record> {
        self.store.as_ref()?;
        let body = text.to_owned();
        Some(self.row(self.id.clone(), None, status, body, Some(served)))
    }

    /// The record of a background response's first state (`queued`).
    pub(super) fn queued(&self, answer: &Value) -> Option<Record> {
        self.save(answer, None, None)
    }

    /// The record saving `answer` as it is (`text`: its JSON text, when
    /// written already). A background response is kept under the
    /// gateway's id, which its client polls, whoever served it.
    fn save(&self, answer: &Value, text: Option<&str>, served: Option<&str>) -> Option<Record> {
        self.store.as_ref()?;
        let status = answer.get("status").and_then(Value::as_str)?;
        let answered = answer.get("id").and_then(Value::as_str)?.to_owned();
        let native = answered != self.id;
        let (id, body) = match (self.background, text) {
            (true, _) => {
                let mut v = answer.clone();
                v["id"] = Value::String(self.id.clone());
                (self.id.clone(), v.to_string())
            }
            (false, Some(text)) => (answered.clone(), text.to_owned()),
            (false, None) => (answered.clone(), answer.to_string()),
        };
        Some(self.row(id, native.then_some(answered), status, body, served))
    }

    /// The record saving response `id` (its provider's own id
    /// `upstream_id`, when a native provider stored it) of `status`, its
    /// object's JSON text `body`.
    fn row(
        &self,
        id: String,
        upstream_id: Option<String>,
        status: &str,
        body: String,
        served: Option<&str>,
    ) -> Record {
        let now = gateway_store::now_rfc3339();
        Record::ResponseSave(Box::new(ResponseRow {
            upstream_id,
            id,
            user_id: self.user_id,
            key_id: self.key_id,
            previous_id: self.previous.clone(),
            model: self.model.clone(),
            served: served.map(str::to_owned),
            status: status.to_owned(),
            background: self.background,
            request_id: self.request_id.clone(),
            input: self.input.clone(),
            body,
            created_at: self.created_at.clone(),
            updated_at: now,
            expires_at: self.expires_at.clone(),
            stream_id: None,
        }))
    }

    /// What keeps a streamed response (its final object) before the
    /// stream's last event leaves; `None` with `store: false`.
    pub(super) fn stream_keeper(
        &self,
        served: Option<String>,
    ) -> Option<impl FnOnce(Value) -> Keeping + Send + 'static> {
        let store = self.store.clone()?;
        let keeper = self.clone();
        Some(move |answer: Value| -> Keeping {
            Box::pin(async move {
                let Some(record) = keeper.record(&answer, None, served.as_deref()) else {
                    return;
                };
                let why = OutsideRecordPhase::StoredResponse;
                if let Err(e) = store.commit_outside_record_phase(why, vec![record]).await {
                    tracing::error!(error = %e, "a streamed response could not be stored");
                }
            })
        })
    }
}

/// The conversation a request continues: the stored chain's items, oldest
/// first (each turn's input, then its output), and the turn it follows.
pub(super) struct Turn {
    pub history: Vec<Value>,
    /// The previous response: its id, the deployment that served it and
    /// whether that provider stored it itself.
    last: Option<ResponseRow>,
}

impl Turn {
    /// The conversation ending with `previous` (404 naming it when a
    /// response of the chain is not the tenant's, deleted or expired).
    pub(super) async fn load(c: &Caller<'_>, previous: Option<&str>) -> Result<Turn, ApiError> {
        let Some(id) = previous else {
            return Ok(Turn {
                history: Vec::new(),
                last: None,
            });
        };
        let who = tenant(c)?;
        let (id, now) = (id.to_owned(), gateway_store::now_rfc3339());
        let chain =
            c.gw.store
                .blocking(move |s| s.response_chain(who, &id, &now, MAX_CHAIN))
                .await?
                .map_err(|missing| {
                    ApiError::NotFound(format!(
                        "previous_response_id: Previous response with id '{missing}' not found."
                    ))
                })?;
        let mut history = Vec::new();
        for r in &chain {
            let input: Value = serde_json::from_str(&r.input).unwrap_or_default();
            let body: Value = serde_json::from_str(&r.body).unwrap_or_default();
            history.extend(input.as_array().into_iter().flatten().cloned());
            history.extend(
                body.get("output")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
        }
        Ok(Turn {
            history,
            last: chain.into_iter().last(),
        })
    }

    /// A native body that continues a turn its provider stored
    /// (`previous_response_id` kept) with the chain's items before its
    /// input, as the provider reads it: what its bound counts. `None`: the
    /// body holds its whole conversation already.
    pub(super) fn whole_body(&self, body: &Map<String, Value>) -> Option<Map<String, Value>> {
        body.contains_key("previous_response_id")
            .then(|| self.expanded(body.clone()))
    }

    /// `body` with the chain's items before its input, and no
    /// `previous_response_id`.
    fn expanded(&self, mut body: Map<String, Value>) -> Map<String, Value> {
        body.remove("previous_response_id");
        let mut input = self.resendable();
        match body.remove("input") {
            Some(Value::Array(items)) => input.extend(items),
            Some(Value::String(text)) => input.push(json!({"role": "user", "content": text})),
            _ => {}
        }
        body.insert("input".into(), Value::Array(input));
        body
    }

    /// The chain's items as another request's input: without their ids
    /// and status, nor reasoning items, which belong to the provider that
    /// made them.
    fn resendable(&self) -> Vec<Value> {
        self.history
            .iter()
            .filter(|i| i.get("type").and_then(Value::as_str) != Some("reasoning"))
            .map(|i| {
                let mut i = i.clone();
                if let Some(o) = i.as_object_mut() {
                    o.remove("id");
                    o.remove("status");
                }
                i
            })
            .collect()
    }

    /// The body a native provider (`provider`) is sent: the caller's when
    /// that provider stored the previous turn itself; else the chain's
    /// items (without their ids and reasoning, which belong to the
    /// provider that made them) before the new input, and no
    /// `previous_response_id`.
    pub(super) fn native_body(
        &self,
        body: Map<String, Value>,
        provider: &str,
    ) -> Map<String, Value> {
        let Some(last) = &self.last else {
            return body;
        };
        let stored_there = last.upstream_id.is_some()
            && last
                .served
                .as_deref()
                .and_then(|s| s.split_once('/'))
                .is_some_and(|(p, _)| p == provider);
        match stored_there {
            true => body,
            false => self.expanded(body),
        }
    }
}

/// The stored response a route's `{response_id}` names, the tenant's.
async fn addressed(ctx: &Ctx, params: &PathParams) -> Result<ResponseRow, ApiError> {
    let id = params
        .get("response_id")
        .ok_or_else(|| ApiError::bug("a response row without {response_id}"))?;
    let who = tenant(&ctx.caller())?;
    let (key, now) = (id.to_string(), gateway_store::now_rfc3339());
    ctx.gw
        .store
        .blocking(move |s| s.response(who, &key, &now))
        .await?
        .ok_or_else(|| not_found(&id))
}

/// The response object of `row` as stored, with the row's status (a
/// background run's: `queued`, `in_progress`, or `cancelled` / `failed`
/// whatever its stream's end said).
fn answered(row: &ResponseRow) -> Result<Value, ApiError> {
    let mut v: Value = serde_json::from_str(&row.body)
        .map_err(|e| ApiError::bug(format!("a stored response is not JSON: {e}")))?;
    v["status"] = Value::String(row.status.clone());
    if row.status == "failed" && v.get("error").is_none_or(Value::is_null) {
        v["error"] = json!({"code": "server_error",
            "message": "the gateway instance running the response restarted"});
    }
    Ok(v)
}

/// `response_get`: `GET /responses/{response_id}`, the response object as
/// answered; with `stream=true` (a background response) its events from
/// `starting_after` on, as they are kept ([`super::background::resume`]).
pub async fn get(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let row = addressed(ctx, params).await?;
    if common::query_str(ctx, "stream") == Some("true") {
        if !row.background {
            return Err(ApiError::BadRequest(
                "stream: only a background response's events can be streamed again".into(),
            ));
        }
        let after = common::query_str(ctx, "starting_after")
            .map(|s| s.parse::<i64>())
            .transpose()
            .map_err(|_| ApiError::BadRequest("starting_after: must be a whole number".into()))?
            .unwrap_or(-1);
        return Ok(super::background::resume(
            ctx.gw.store.clone(),
            row.id,
            after,
        ));
    }
    Ok(Outcome::new(
        body::json(StatusCode::OK, &answered(&row)?),
        None,
    ))
}

/// `response_delete`: `DELETE /responses/{response_id}`.
pub async fn delete(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let row = addressed(ctx, params).await?;
    let who = tenant(&ctx.caller())?;
    let id = row.id.clone();
    if !ctx
        .gw
        .store
        .blocking(move |s| s.delete_response(who, &id))
        .await?
    {
        return Err(not_found(&row.id));
    }
    let v = json!({"id": row.id, "object": "response.deleted", "deleted": true});
    Ok(Outcome::new(body::json(StatusCode::OK, &v), None))
}

/// `response_input_items`: `GET /responses/{response_id}/input_items`, the
/// items its request sent, paged as OpenAI pages them (`after` an item
/// id, `limit` 1 to 100, default 20, `order` `asc` or `desc`, the default).
pub async fn input_items(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let row = addressed(ctx, params).await?;
    let mut items: Vec<Value> = serde_json::from_str(&row.input).unwrap_or_default();
    match common::query_str(ctx, "order") {
        None | Some("desc") => items.reverse(),
        Some("asc") => {}
        Some(_) => {
            return Err(ApiError::BadRequest(
                "order: must be `asc` or `desc`".into(),
            ))
        }
    }
    let limit = common::query_u32(ctx, "limit", 20) as usize;
    let start = match common::query_str(ctx, "after") {
        None => 0,
        Some(after) => items
            .iter()
            .position(|i| i.get("id").and_then(Value::as_str) == Some(after))
            .map(|n| n + 1)
            .ok_or_else(|| {
                ApiError::BadRequest(format!("after: no input item '{after}' in this response"))
            })?,
    };
    let page: Vec<Value> = items.iter().skip(start).take(limit).cloned().collect();
    let id_of = |i: Option<&Value>| i.and_then(|i| i.get("id")).cloned().unwrap_or(Value::Null);
    let v = json!({
        "object": "list",
        "data": page,
        "first_id": id_of(page.first()),
        "last_id": id_of(page.last()),
        "has_more": start + page.len() < items.len(),
    });
    Ok(Outcome::new(body::json(StatusCode::OK, &v), None))
}

/// `response_cancel`: `POST /responses/{response_id}/cancel`: a background
/// response still queued or running is marked `cancelled` and its stream
/// stopped (through any instance), which bills what was produced; a
/// finished one is answered as it is; only a background response can be
/// cancelled (400).
pub async fn cancel(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let row = addressed(ctx, params).await?;
    if !row.background {
        return Err(ApiError::BadRequest(
            "response_id: Only responses created with background=true can be cancelled.".into(),
        ));
    }
    let (key, now) = (row.id.clone(), gateway_store::now_rfc3339());
    let cancelled = ctx
        .gw
        .store
        .blocking(move |s| s.cancel_response(&key, &now))
        .await?;
    if cancelled {
        if let Some(sid) = &row.stream_id {
            ctx.gw.streams.stop(sid, ctx.user_id()).await;
        }
    }
    let row = addressed(ctx, params).await?;
    Ok(Outcome::new(
        body::json(StatusCode::OK, &answered(&row)?),
        None,
    ))
}
