//! The job modes: `job_submit`, `job_get`, `job_list`.
//!
//! * **Submit** forwards the job (JSON, or multipart with the caller's
//!   `audio_url` fetched and streamed as the row's `file_field`), then writes
//!   a job record (owner, kind, the `job_id` given to the caller, the
//!   upstream's id) in the same group commit as the audit record. The caller's
//!   `job_id` is the upstream's id. The record schedules the job's first
//!   poll by the background follower ([`crate::follower`]), which follows it
//!   to the end when nobody GETs it. Made with a key that has a budget, a
//!   billed submit first holds the job's bound against it
//!   ([`crate::job_bound`]: the input's measured seconds when it is the
//!   caller's own upload, else the kind's ceiling): 402 and no upstream
//!   call when that does not fit. The job keeps the hold (it goes with the
//!   job record, `JobRecord::hold`) until its end releases it
//!   ([`crate::progress`]); a submit that fails releases it at once.
//! * **Get** reads the job record first: a job that does not exist, belongs
//!   to another user or to another kind answers 404 without any upstream
//!   call. It then asks the upstream and hands what it saw to
//!   [`crate::progress::observe`] (record, once-only charge, callback), and
//!   mirrors the result audio ([`crate::mirror`]) when the row has `mirror`.
//! * **List** answers the caller's own jobs from the gateway's records.

use http::StatusCode;
use serde_json::{Map, Value};

use super::common::query_u32;
use crate::ctx::{Ctx, Outcome};
use crate::progress::{item_of, item_status, observe};
use crate::{fetch, shape};
use gateway_base::body::json;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;
use gateway_store::{JobRecord, Jobs, Record};

/// `job_submit`: the caller's callback checked, the job's bound held, the
/// job forwarded, its upstream id checked to be new, and the job recorded.
pub async fn submit(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let kind = ctx.job_kind()?.kind;
    let user_id = ctx.require_user("job submission")?;
    let mut body = super::common::read_body(ctx, req).await?;
    let asked = Asked::read(ctx, &body).await?;
    let hold = hold(ctx, &body).await?;
    let (status, mut answer) = forward(ctx, params, &mut body).await?;
    let upstream_id = new_upstream_id(ctx, kind, &answer).await?;
    // The hold is kept by the job from here: its release, should the
    // record not be written, is owed by the record writer.
    let hold = hold.map(crate::money::Hold::keep);
    let record = job_record(ctx, kind, user_id, &upstream_id, &answer, asked, hold);
    if let Value::Object(m) = &mut answer {
        m.insert("job_id".into(), Value::String(upstream_id));
    }
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let mut outcome = Outcome::new(json(status, &answer), Some(status.as_u16()));
    outcome.records.push(Record::JobCreate(record));
    Ok(outcome)
}

/// What the caller asks of the job beside its input.
struct Asked {
    callback_uri: Option<String>,
    media_type: Option<String>,
}

impl Asked {
    /// Reads the body's `callback_uri` and `media_type`. A callback that
    /// could never be delivered (not http(s), or a private address the
    /// gateway will not reach) is refused now, not dropped later.
    async fn read(ctx: &Ctx, body: &Map<String, Value>) -> Result<Asked, ApiError> {
        let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
        let asked = Asked {
            callback_uri: text("callback_uri"),
            media_type: text("media_type"),
        };
        if let Some(uri) = &asked.callback_uri {
            fetch::check_url(uri, ctx.gw.config.allow_private_fetch)
                .await
                .map_err(|r| ApiError::BadRequest(format!("callback_uri {}", r.describe())))?;
        }
        Ok(asked)
    }
}

/// A billed job's bound, held against the key's budget ([`crate::job_bound`]);
/// `None` for a free row or a key without a budget.
async fn hold(
    ctx: &Ctx,
    body: &Map<String, Value>,
) -> Result<Option<crate::money::Hold>, ApiError> {
    if ctx.spec.billing == gateway_base::spec::Billing::Free {
        return Ok(None);
    }
    let url = body.get("audio_url").and_then(Value::as_str);
    let job_kind = ctx.job_kind()?;
    crate::money::hold_voice(&ctx.caller(), crate::job_bound::amount(ctx, job_kind, url)).await
}

/// Sends the job upstream: as JSON, or as multipart with the caller's
/// `audio_url` fetched into the row's `file_field`. The upstream's status
/// and answer.
async fn forward(
    ctx: &Ctx,
    params: &PathParams,
    body: &mut Map<String, Value>,
) -> Result<(u16, Value), ApiError> {
    let spec = ctx.spec;
    let call = super::common::call(ctx, params, Some(&mut *body))?;
    let mut guard = fetch::SizeGuard::default();
    let call = match spec.file_field {
        Some(field) => {
            let url = body
                .remove("audio_url")
                .and_then(|v| v.as_str().map(str::to_owned))
                .ok_or_else(|| ApiError::BadRequest("audio_url is required".into()))?;
            shape::shape_body(spec, body)?;
            let (part, g) = fetch::open_as_part(&ctx.gw, ctx.user_id(), &url).await?;
            guard = g;
            call.multipart(shape::text_parts(std::mem::take(body)).part(field, part))
        }
        // The upstream fetches `audio_url` itself: `read_body` checked it.
        None => {
            shape::shape_body(spec, body)?;
            call.json(&*body)
        }
    };
    let answer = call.send().await.map_err(|e| guard.explain(e))?;
    let status = answer.status();
    Ok((status, answer.json("a job submission").await?))
}

/// The upstream's id of the new job. An id the gateway already recorded
/// (the provider reused one): the answer cannot be trusted, nothing is
/// recorded, and the caller gets a clear 502 rather than the database's
/// refusal of a duplicate.
async fn new_upstream_id(
    ctx: &Ctx,
    kind: &'static str,
    answer: &Value,
) -> Result<String, ApiError> {
    let upstream_id = shape::upstream_id(answer).ok_or_else(|| {
        ApiError::BadGateway("the voice provider answered a job submission without an id".into())
    })?;
    let (k, id) = (kind.to_owned(), upstream_id.clone());
    let existing = ctx
        .gw
        .store
        .blocking(move |s| s.job_by_upstream(&k, &id))
        .await?;
    if existing.is_some() {
        tracing::warn!(
            kind,
            upstream_id = %upstream_id,
            "the voice provider answered a job submission with the id of an existing job; nothing recorded"
        );
        return Err(ApiError::BadGateway(
            "the voice provider answered a job submission with the id of an existing job".into(),
        ));
    }
    Ok(upstream_id)
}

/// The new job's record as its first answer leaves it (status, media
/// type), scheduled for its first poll; the caller's `job_id` is the
/// upstream's id; `hold` is the request id of the hold the job keeps.
fn job_record(
    ctx: &Ctx,
    kind: &str,
    user_id: i64,
    upstream_id: &str,
    answer: &Value,
    asked: Asked,
    hold: Option<String>,
) -> JobRecord {
    let item = item_of(answer);
    let now = chrono::Utc::now();
    let first_poll =
        now + chrono::Duration::from_std(ctx.gw.config.job_follow_first_delay).unwrap_or_default();
    JobRecord {
        job_id: upstream_id.to_owned(),
        kind: kind.to_owned(),
        upstream_id: upstream_id.to_owned(),
        user_id,
        submit_route: ctx.spec.id.to_owned(),
        status: item_status(item, None).to_owned(),
        media_type: item
            .get("media_type")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(asked.media_type),
        callback_uri: asked.callback_uri,
        created_at: gateway_store::rfc3339(now),
        // Every job is scheduled, so that a follower enabled later (or on
        // another instance) finds it.
        follow_at: Some(gateway_store::rfc3339(first_poll)),
        key_id: ctx.user.as_ref().and_then(|u| u.budget_key),
        hold,
    }
}

/// `job_get`.
pub async fn get(ctx: &mut Ctx, _req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let spec = ctx.spec;
    let kind = ctx.job_kind()?;
    let job_id = params
        .get("job_id")
        .map(|c| c.into_owned())
        .unwrap_or_default();
    let user_id = ctx.user_id();
    let (k, j) = (kind.kind, job_id.clone());
    let job = ctx
        .gw
        .store
        .blocking(move |store| store.job(k, &j))
        .await?
        .filter(|j| Some(j.user_id) == user_id)
        .ok_or_else(|| ApiError::NotFound(format!("no {} job {job_id}", kind.kind)))?;
    let mut upstream_params = PathParams::new();
    upstream_params.push(
        "job_id",
        &gateway_adapters::upstream::encode_segment(&job.upstream_id),
    );
    // The job is named by its upstream id; the caller's query is not forwarded.
    let up = ctx.upstream()?;
    let path = shape::upstream_path(spec, up.path, &upstream_params, &mut Vec::new(), None)?;
    let answer = ctx.gw.upstream.call(up, &path, &[])?.send().await?;
    let upstream_status = answer.status();
    let mut answer = answer.json("a job status").await?;
    let item = item_of(&answer).clone();
    let progress = observe(kind, &job, &item);
    if let Value::Object(m) = &mut answer {
        m.insert("job_id".into(), Value::String(job.job_id.clone()));
        m.insert("status".into(), Value::String(progress.status.to_owned()));
    }
    if let (Some(field), true) = (spec.mirror, progress.completed()) {
        if let Some(Value::String(url)) = shape::dotted(&answer, field).cloned() {
            let mirrored = crate::mirror::mirror(&ctx.gw, &job, spec, &url).await;
            if let Value::Object(m) = &mut answer {
                m.insert("resemble_url".into(), Value::String(url));
                if let Some(mirrored) = mirrored {
                    m.insert("audio_url".into(), Value::String(mirrored.url));
                    m.insert("expires_at".into(), Value::String(mirrored.expires_at));
                }
            }
        }
    }
    let mut outcome = Outcome::new(json(StatusCode::OK, &answer), Some(upstream_status));
    progress.apply(ctx, &mut outcome);
    Ok(outcome)
}

/// `job_list`: the caller's own jobs of the row's kind, from the gateway's
/// records (never the upstream account's list), newest first:
/// `{"success", "items": [{job_id, status, created_at, updated_at, result}],
/// "meta": {page, per_page, total_pages, total_items}}`.
pub async fn list(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let kind = ctx.job_kind()?.kind;
    let user = ctx.require_user("job list")?;
    let page = query_u32(ctx, "page", 1).max(1);
    let per_page = query_u32(ctx, "page_size", 10).clamp(1, 1000);
    let (jobs, total) = ctx
        .gw
        .store
        .blocking(move |store| store.jobs_of(user, kind, page, per_page))
        .await?;
    let items: Vec<Value> = jobs
        .iter()
        .map(|j| {
            serde_json::json!({
                "job_id": j.job_id,
                "status": j.status,
                "media_type": j.media_type,
                "created_at": j.created_at,
                "updated_at": j.updated_at,
                "result": j.result.as_deref().and_then(|r| serde_json::from_str::<Value>(r).ok()),
            })
        })
        .collect();
    let answer = serde_json::json!({
        "success": true,
        "items": items,
        "meta": {
            "page": page,
            "per_page": per_page,
            "total_pages": (total as u32).div_ceil(per_page).max(1),
            "total_items": total,
        },
    });
    Ok(Outcome::new(json(StatusCode::OK, &answer), None))
}
