//! `batch_create`, `batch_list`, `batch_get`, `batch_cancel`: OpenAI's
//! Batch API (`/batches`, issue #43), so that the `openai` SDK's `batches`
//! work unchanged.
//!
//! A batch is made from one of the caller's files of purpose `batch`,
//! read and checked whole while the create request waits ([`input`]): a
//! bad line fails the batch at once (`failed`, its lines and reasons in
//! `errors`), and nothing is held, charged or run. A good file's lines are
//! committed with the batch, `in_progress`, and run by the gateway itself
//! ([`crate::batches`]): each a request of its own, as the caller that
//! made the batch, priced at its model's `batch_price_pct`. Another
//! user's batch is a 404 ("No such Batch object"), as OpenAI answers it.

mod input;

use http::StatusCode;
use serde_json::{json, Map, Value};

use crate::ctx::{Ctx, Deferred, Outcome};
use crate::modes::common::{self, query_str, query_u32};
use gateway_base::body::{json, Request};
use gateway_base::errors::ApiError;
use gateway_base::spec::{Area, EndpointSpec, Method, PathParams};
use gateway_store::{AssetRow, Assets, BatchRow, Batches, NewBatch, Record};

/// A batch's window when the operator sets none (`completion_window` `24h`).
const WINDOW: std::time::Duration = std::time::Duration::from_secs(86_400);
/// Most batches a list answers at once (OpenAI's limit).
const MAX_LIST: u32 = 100;

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("No such Batch object: {id}"))
}

/// `batch_create`: the input file read and checked, the batch (and its
/// lines) committed with the request's records, the executor woken.
pub async fn create(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let user = ctx
        .user
        .clone()
        .ok_or_else(|| ApiError::bug("a batch without a user"))?;
    let body = common::read_body(ctx, req).await?;
    let text = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (file_id, endpoint, window) = (
        text("input_file_id"),
        text("endpoint"),
        text("completion_window"),
    );
    let metadata = metadata(body.get("metadata"))?;
    let row = line_row(ctx, &endpoint)?;
    let file = input_file(ctx, user.id, &file_id).await?;
    let read = input::read(ctx, &file.object_key, &endpoint, row).await?;
    let now = chrono::Utc::now();
    let at = gateway_store::rfc3339(now);
    let life = ctx.gw.config.batches.window.unwrap_or(WINDOW);
    let failed = !read.errors.is_empty();
    let batch = BatchRow {
        id: format!("batch_{}", &crate::ctx::new_request_id()[4..]),
        user_id: user.id,
        key_id: user.key_id,
        budget_key: user.budget_key,
        models: user.models.as_ref().map(|m| json!(m).to_string()),
        endpoint,
        route_id: row.id.to_owned(),
        input_file_id: file_id,
        completion_window: window,
        metadata: metadata.map(|m| Value::Object(m).to_string()),
        status: if failed { "failed" } else { "in_progress" }.to_owned(),
        ending: None,
        errors: failed.then(|| json!({"object": "list", "data": read.errors}).to_string()),
        total: read.lines.len() as i64,
        output_file_id: None,
        error_file_id: None,
        created_at: at.clone(),
        expires_at: gateway_store::rfc3339(
            now + chrono::Duration::from_std(life).unwrap_or_default(),
        ),
        in_progress_at: (!failed).then(|| at.clone()),
        finalizing_at: None,
        ended_at: failed.then(|| at.clone()),
        cancelling_at: None,
    };
    let answer = batch_json(&batch, Default::default(), rust_decimal::Decimal::ZERO);
    let mut outcome = Outcome::new(json(StatusCode::OK, &answer), None);
    outcome.records.push(Record::BatchCreate(Box::new(NewBatch {
        row: batch,
        lines: read.lines,
    })));
    if !failed {
        outcome.deferred.push(Deferred::BatchStarted);
    }
    Ok(outcome)
}

/// The row a batch's lines are requests of: the general area's `POST` row
/// at `endpoint` (`/v1/…`, under the area's prefix), of a batchable mode.
fn line_row(ctx: &Ctx, endpoint: &str) -> Result<&'static EndpointSpec, ApiError> {
    let table = ctx.gw.table;
    let prefix = table
        .areas
        .iter()
        .find(|a| a.area == Area::Gateway)
        .map_or("/api/v1", |a| a.prefix);
    let path = endpoint
        .strip_prefix("/v1")
        .map(|rest| format!("{prefix}{rest}"));
    table
        .routes
        .iter()
        .copied()
        .find(|r| {
            r.area == Area::Gateway
                && r.method == Method::Post
                && Some(r.path) == path.as_deref()
                && input::model_of(r.mode).is_some()
        })
        .ok_or_else(|| ApiError::BadRequest(format!("endpoint: {endpoint:?} cannot be batched")))
}

/// `metadata`: at most 16 pairs of strings (keys up to 64 characters,
/// values up to 512), as OpenAI takes it.
fn metadata(v: Option<&Value>) -> Result<Option<Map<String, Value>>, ApiError> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let bad = || {
        ApiError::BadRequest(
            "metadata: at most 16 string values, keys up to 64 characters, values up to 512".into(),
        )
    };
    let m = v.as_object().ok_or_else(bad)?;
    let fits = m.len() <= 16
        && m.iter().all(|(k, v)| {
            k.chars().count() <= 64 && v.as_str().is_some_and(|s| s.chars().count() <= 512)
        });
    fits.then(|| m.clone()).map(Some).ok_or_else(bad)
}

/// The caller's live file `id` of purpose `batch` (404, or 400 naming its
/// purpose).
async fn input_file(ctx: &Ctx, user: i64, id: &str) -> Result<AssetRow, ApiError> {
    let missing = || ApiError::NotFound(format!("No such File object: {id}"));
    let n = id
        .strip_prefix("file-")
        .and_then(|n| n.parse::<i64>().ok())
        .ok_or_else(missing)?;
    let now = gateway_store::now_rfc3339();
    let row = ctx
        .gw
        .store
        .blocking(move |s| s.live_owned_asset(user, common::FILE_CLASS, n, &now))
        .await?
        .ok_or_else(missing)?;
    if row.purpose.as_deref() != Some("batch") {
        return Err(ApiError::BadRequest(format!(
            "input_file_id: {id} has purpose {}, not batch",
            row.purpose.as_deref().unwrap_or("none")
        )));
    }
    Ok(row)
}

/// A batch as answered (OpenAI's `Batch`, with our `cost`).
fn batch_json(
    b: &BatchRow,
    counts: gateway_store::LineCounts,
    cost: rust_decimal::Decimal,
) -> Value {
    let unix = |t: Option<&str>| {
        t.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp())
    };
    let ended = |status: &str| unix(b.ended_at.as_deref().filter(|_| b.status == status));
    let total = if b.status == "failed" { 0 } else { b.total };
    let text = |s: &Option<String>| {
        s.as_deref()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
    };
    json!({
        "id": b.id,
        "object": "batch",
        "endpoint": b.endpoint,
        "errors": text(&b.errors),
        "input_file_id": b.input_file_id,
        "completion_window": b.completion_window,
        "status": b.status,
        "output_file_id": b.output_file_id,
        "error_file_id": b.error_file_id,
        "created_at": unix(Some(&b.created_at)),
        "in_progress_at": unix(b.in_progress_at.as_deref()),
        "expires_at": unix(Some(&b.expires_at)),
        "finalizing_at": unix(b.finalizing_at.as_deref()),
        "completed_at": ended("completed"),
        "failed_at": ended("failed"),
        "expired_at": ended("expired"),
        "cancelling_at": unix(b.cancelling_at.as_deref()),
        "cancelled_at": ended("cancelled"),
        "request_counts": {"total": total, "completed": counts.done, "failed": counts.failed},
        "metadata": text(&b.metadata),
        "cost": gateway_base::billing::format_money(cost),
    })
}

/// A stored batch as answered now: its line counts and cost read.
async fn answered(ctx: &Ctx, b: BatchRow) -> Result<Value, ApiError> {
    let id = b.id.clone();
    let (counts, cost) = ctx
        .gw
        .store
        .blocking(move |s| Ok((s.line_counts(&id)?, s.batch_cost(&id)?)))
        .await?;
    Ok(batch_json(&b, counts, cost))
}

/// The caller's batch named by `{batch_id}` (404 otherwise).
async fn own_batch(ctx: &Ctx, params: &PathParams) -> Result<(i64, String, BatchRow), ApiError> {
    let user = ctx.require_user("batch")?;
    let id = params
        .get("batch_id")
        .map(|v| v.into_owned())
        .unwrap_or_default();
    let key = id.clone();
    let row = ctx
        .gw
        .store
        .blocking(move |s| s.batch(user, &key))
        .await?
        .ok_or_else(|| not_found(&id))?;
    Ok((user, id, row))
}

/// `batch_get`: the batch, its progress and cost.
pub async fn get(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let (_, _, row) = own_batch(ctx, params).await?;
    let v = answered(ctx, row).await?;
    Ok(Outcome::new(json(StatusCode::OK, &v), None))
}

/// `batch_list`: the caller's batches, newest first (`after` a batch id,
/// `limit` 1..=100, default 20), in OpenAI's list shape.
pub async fn list(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let user = ctx.require_user("batch list")?;
    let limit = query_u32(ctx, "limit", 20).clamp(1, MAX_LIST) as usize;
    let after = query_str(ctx, "after").map(str::to_owned);
    let mut rows = ctx
        .gw
        .store
        .blocking(move |s| s.batches(user, after.as_deref(), limit + 1))
        .await?;
    let has_more = rows.len() > limit;
    rows.truncate(limit);
    let mut data = Vec::with_capacity(rows.len());
    for r in rows {
        data.push(answered(ctx, r).await?);
    }
    let v = json!({
        "object": "list",
        "first_id": data.first().map(|b| b["id"].clone()),
        "last_id": data.last().map(|b| b["id"].clone()),
        "has_more": has_more,
        "data": data,
    });
    Ok(Outcome::new(json(StatusCode::OK, &v), None))
}

/// `batch_cancel`: an in-progress batch becomes `cancelling` (no line
/// starts from now; the executor ends it `cancelled` once the lines in
/// flight finished); a batch already cancelling or ended is answered as it
/// is (a cancel is idempotent: its answer says the batch's status).
pub async fn cancel(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let (user, id, _) = own_batch(ctx, params).await?;
    let now = gateway_store::now_rfc3339();
    let key = id.clone();
    let row = ctx
        .gw
        .store
        .blocking(move |s| s.cancel_batch(user, &key, &now))
        .await?
        .ok_or_else(|| not_found(&id))?;
    let v = answered(ctx, row).await?;
    let mut outcome = Outcome::new(json(StatusCode::OK, &v), None);
    outcome.deferred.push(Deferred::BatchStarted);
    Ok(outcome)
}
