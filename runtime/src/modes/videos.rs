//! `video_submit`, `video_get`, `video_list`, `video_cancel`: video
//! generation jobs through a `video` model, recorded as the caller's
//! (another user's or an unknown job is 404). What observing a job changes
//! (billing once, copying the video once, releasing the hold of a failed or
//! cancelled job) is [`crate::videos`], shared with the job follower.

use http::StatusCode;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use super::common::query_u32;
use super::common::read_body;
use crate::ctx::{Ctx, Later, Outcome, Settlement};
use crate::model_call::pick_model;
use crate::money;
use crate::videos;
use gateway_base::body;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::{Method, PathParams};
use gateway_models::providers::{ModelType, Op};
use gateway_store::{VideoJobRow, Videos};

/// Seconds of video when the request gives none (OpenAI's default).
pub const DEFAULT_SECONDS: u32 = 4;
/// Longest video requested.
pub const MAX_SECONDS: u32 = 60;

/// `seconds`: 1..=[`MAX_SECONDS`], as a number or a numeric string.
fn seconds_of(v: Option<&Value>) -> Result<u32, ApiError> {
    let n = match v {
        None | Some(Value::Null) => return Ok(DEFAULT_SECONDS),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    match n {
        Some(n) if (1..=MAX_SECONDS as u64).contains(&n) => Ok(n as u32),
        _ => Err(ApiError::BadRequest(format!(
            "seconds: must be a whole number from 1 to {MAX_SECONDS}"
        ))),
    }
}

/// The caller's job `job_id` (404 otherwise).
async fn own_job(ctx: &Ctx, params: &PathParams) -> Result<VideoJobRow, ApiError> {
    let job_id = params
        .get("job_id")
        .map(|c| c.into_owned())
        .unwrap_or_default();
    let user = ctx.user_id();
    let id = job_id.clone();
    ctx.gw
        .store
        .blocking(move |s| s.video_job(&id))
        .await?
        .filter(|j| Some(j.user_id) == user)
        .ok_or_else(|| ApiError::NotFound(format!("no video job {job_id}")))
}

/// `video_submit`.
pub async fn submit(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let user_id = ctx.require_user("video generation")?;
    let mut body = read_body(ctx, req).await?;
    if body.contains_key("byok_api_key") {
        return Err(ApiError::BadRequest(
            "byok_api_key is not supported for video jobs (the key would have to be kept until the job ends)".into(),
        ));
    }
    let prompt = body
        .get("prompt")
        .and_then(Value::as_str)
        .filter(|p| !p.trim().is_empty())
        .ok_or_else(|| ApiError::BadRequest("prompt: must not be empty".into()))?
        .to_owned();
    let seconds = seconds_of(body.get("seconds"))?;
    body.insert("seconds".into(), json!(seconds.to_string()));
    let (settle, key) = pick_model(
        &ctx.caller(),
        body.get("model").and_then(Value::as_str),
        None,
        ModelType::Video,
        |p, m| money::seconds_cost(p, m, Decimal::from(seconds)),
    )
    .await?;
    let p = &settle.provider;
    let size = body.get("size").and_then(Value::as_str).map(str::to_owned);
    let (status, item, job_id) = send(ctx, &settle, &key, body).await?;
    let now = gateway_store::now_rfc3339();
    let first = chrono::Utc::now()
        + chrono::Duration::from_std(ctx.gw.config.job_follow_first_delay).unwrap_or_default();
    let job = VideoJobRow {
        job_id,
        user_id,
        provider: p.id.clone(),
        model: settle.model.id.clone(),
        hold_id: ctx.request_id.clone(),
        seconds: seconds.to_string(),
        size: item
            .get("size")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(size),
        prompt,
        status: videos::our_status(item.get("status").and_then(Value::as_str)).to_owned(),
        object_key: None,
        expires_at: None,
        created_at: now.clone(),
        updated_at: now,
    };
    // The job is recorded before the answer; only then does its hold
    // outlive the request (a failed insert releases it).
    let row = job.clone();
    let follow_at = gateway_store::rfc3339(first);
    ctx.gw
        .store
        .blocking(move |s| s.insert_video_job(&row, &follow_at))
        .await?;
    if let Some(hold) = settle.hold {
        hold.keep();
    }
    let v = videos::job_json(&ctx.gw, &job, item.get("progress").and_then(Value::as_u64));
    Ok(Outcome::new(body::json(StatusCode::OK, &v), Some(status))
        .settled(Settlement::Later(Later::Job)))
}

/// Submits the job of `body` on the picked model: the provider's status,
/// its job (JSON) and the job's id (502 without one).
async fn send(
    ctx: &Ctx,
    settle: &money::Settle,
    key: &gateway_adapters::upstream::llm::ProviderKey,
    body: serde_json::Map<String, Value>,
) -> Result<(u16, Value, String), ApiError> {
    let p = &settle.provider;
    let upstream_body =
        gateway_models::providers::openai::request(Op::Video, &settle.model.id, body);
    let answer = ctx
        .gw
        .upstream
        .llm_call(Method::Post, &p.base_url, p.adapter.path(Op::Video), key)
        .json(&upstream_body)
        .send()
        .await?;
    let status = answer.status();
    let item = answer.json("a video job").await?;
    let job_id = item
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            ApiError::BadGateway("the model provider answered a video job without an id".into())
        })?
        .to_owned();
    Ok((status, item, job_id))
}

/// `video_get`.
pub async fn get(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let job = own_job(ctx, params).await?;
    let (job, progress) = videos::observe(&ctx.gw, job).await?;
    let v = videos::job_json(&ctx.gw, &job, progress);
    Ok(Outcome::new(body::json(StatusCode::OK, &v), None).settled(Settlement::Later(Later::Job)))
}

/// `video_list`: the caller's jobs from their records, newest first.
pub async fn list(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let user = ctx.require_user("video job list")?;
    let (limit, skip) = (
        query_u32(ctx, "limit", 20).clamp(1, 100),
        query_u32(ctx, "skip", 0),
    );
    let (jobs, total) = ctx
        .gw
        .store
        .blocking(move |s| s.video_jobs_of(user, limit, skip))
        .await?;
    let data: Vec<Value> = jobs
        .iter()
        .map(|j| videos::job_json(&ctx.gw, j, None))
        .collect();
    let v = json!({
        "object": "list",
        "data": data,
        "total": total,
        "limit": limit,
        "skip": skip,
        "has_more": (skip as u64 + jobs.len() as u64) < total,
    });
    Ok(Outcome::new(body::json(StatusCode::OK, &v), None).settled(Settlement::Later(Later::Job)))
}

/// `video_cancel`: only while pending or running (else 400); the hold is
/// released and nothing is charged.
pub async fn cancel(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let job = own_job(ctx, params).await?;
    let not_cancellable = |j: &VideoJobRow| {
        ApiError::BadRequest(format!(
            "video job {} is {}; only a pending or running job can be cancelled",
            j.job_id, j.status
        ))
    };
    if videos::finished(&job.status) {
        return Err(not_cancellable(&job));
    }
    let (p, _) = ctx
        .catalogue
        .get(&job.provider, &job.model)
        .ok_or_else(|| ApiError::Unavailable("the job's model is no longer configured".into()))?;
    let key = p
        .key
        .clone()
        .ok_or_else(|| gateway_models::providers::config_missing(p))?;
    let path = format!(
        "/videos/{}/cancel",
        gateway_adapters::upstream::encode_segment(&job.job_id)
    );
    let sent = ctx
        .gw
        .upstream
        .llm_call(Method::Post, &p.base_url, &path, &key)
        .json(&json!({}))
        .send()
        .await;
    match sent {
        Ok(_) => videos::end_unbilled(&ctx.gw, &job, "cancelled").await?,
        Err(ApiError::UpstreamRejected(_)) => {
            // Finished meanwhile: observe it (billed if completed) and refuse.
            let (job, _) = videos::observe(&ctx.gw, job).await?;
            return Err(not_cancellable(&job));
        }
        Err(e) => return Err(e),
    }
    let id = job.job_id.clone();
    let job = ctx
        .gw
        .store
        .blocking(move |s| s.video_job(&id))
        .await?
        .unwrap_or(job);
    let v = videos::job_json(&ctx.gw, &job, None);
    Ok(Outcome::new(body::json(StatusCode::OK, &v), None).settled(Settlement::Later(Later::Job)))
}
