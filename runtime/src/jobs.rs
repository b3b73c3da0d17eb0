//! Asynchronous jobs: the `job_submit` and `job_get` modes, and completion.
//!
//! * **Submit** forwards the job (JSON, or multipart with the caller's
//!   `audio_url` fetched and streamed as the row's `file_field`), then writes
//!   a job record (owner, kind, the `job_id` given to the caller, the
//!   upstream's id) in the same group commit as the audit record. The caller's
//!   `job_id` is the upstream's id.
//! * **Get** reads the job record first: a job that does not exist, belongs
//!   to another user or to another kind answers 404 without any upstream
//!   call. It then asks the upstream, records the status, bills the job when
//!   it is complete (once, see [`complete`]), and mirrors its result audio
//!   ([`crate::mirror`]) when the row has `mirror`.
//! * **Completion** ([`complete`]) is shared with the inbound webhook: the
//!   job's quantity (audio/video seconds or images, from what the upstream
//!   reports) is billed under the once-key `job:<kind>:<job_id>`, so however
//!   many GETs and webhooks see the job complete, it is charged exactly once.

use http::StatusCode;
use rust_decimal::Decimal;
use serde_json::Value;

use crate::billing::decimal_from_json;
use crate::errors::ApiError;
use crate::forward::json_response;
use crate::pipeline::{Ctx, Deferred, Metered, Outcome};
use crate::router::Request;
use crate::spec::{Billing, EndpointSpec, PathParams};
use crate::store::{JobRecord, JobRow, JobUpdate, Record};
use crate::{fetch, shape};

/// Job status values as the gateway records them.
pub mod status {
    pub const PENDING: &str = "pending";
    pub const PROCESSING: &str = "processing";
    pub const COMPLETED: &str = "completed";
    pub const FAILED: &str = "failed";
}

/// The status of an upstream job item, normalised. An item without a status
/// field is complete once its result (`mirror` field) is present (the edit
/// API answers that way).
pub fn item_status(item: &Value, mirror: Option<&str>) -> &'static str {
    let raw = item
        .get("status")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    match raw.as_deref() {
        Some("completed" | "complete" | "succeeded" | "success" | "done" | "finished") => {
            status::COMPLETED
        }
        Some("failed" | "error" | "errored" | "cancelled" | "canceled") => status::FAILED,
        Some("processing" | "running" | "in_progress" | "started") => status::PROCESSING,
        Some(_) => status::PENDING,
        None => {
            let wrapped = wrap(item);
            match mirror.and_then(|m| shape::dotted(&wrapped, m)) {
                Some(Value::String(s)) if !s.is_empty() => status::COMPLETED,
                _ => status::PENDING,
            }
        }
    }
}

/// `{"item": item}`, so that dotted `item.x` paths work on a bare item.
fn wrap(item: &Value) -> Value {
    serde_json::json!({ "item": item })
}

/// The job item of an upstream answer: `item` when present, else the body.
pub fn item_of(answer: &Value) -> &Value {
    answer
        .get("item")
        .filter(|v| v.is_object())
        .unwrap_or(answer)
}

/// What a completed job bills: unit and quantity, from the submit row's
/// billing unit and what the upstream reports (`media_type`, seconds, images).
pub fn job_quantity(
    billing: Billing,
    item: &Value,
    media_type: Option<&str>,
) -> (&'static str, Decimal) {
    let seconds = [
        "duration_seconds",
        "duration",
        "audio_duration",
        "media_duration",
    ]
    .iter()
    .find_map(|k| item.get(*k).and_then(decimal_from_json))
    .unwrap_or(Decimal::ZERO);
    let images = ["image_count", "images"]
        .iter()
        .find_map(|k| item.get(*k).and_then(decimal_from_json))
        .unwrap_or(Decimal::ONE);
    let media = item
        .get("media_type")
        .and_then(Value::as_str)
        .or(media_type)
        .unwrap_or("audio");
    match billing {
        Billing::MediaSeconds => match media {
            "video" => ("video_seconds", seconds),
            "image" => ("images", images),
            _ => ("audio_seconds", seconds),
        },
        Billing::VideoSeconds => ("video_seconds", seconds),
        Billing::Images => ("images", images),
        Billing::Free => ("free", Decimal::ZERO),
        other => (other.as_str(), seconds),
    }
}

/// The once-key of a job's charge.
pub fn once_key(kind: &str, job_id: &str) -> String {
    format!("job:{kind}:{job_id}")
}

/// Records a job's new state; when it is complete and not yet billed,
/// returns the metering of its charge (billed once by its once-key).
pub fn complete(
    job: &JobRow,
    submit: Option<&'static EndpointSpec>,
    item: &Value,
    mirror: Option<&str>,
) -> (JobUpdate, Option<Metered>) {
    let st = item_status(item, mirror);
    let media_type = item
        .get("media_type")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut update = JobUpdate {
        kind: job.kind.clone(),
        job_id: job.job_id.clone(),
        status: st.to_owned(),
        media_type: media_type.clone(),
        result: (st == status::COMPLETED || st == status::FAILED).then(|| item.to_string()),
        billed: false,
        updated_at: crate::store::now_rfc3339(),
    };
    let mut metered = None;
    if st == status::COMPLETED && !job.billed {
        if let Some(submit) = submit.filter(|s| s.billing != Billing::Free) {
            let (unit, quantity) = job_quantity(
                submit.billing,
                item,
                media_type.as_deref().or(job.media_type.as_deref()),
            );
            update.billed = true;
            metered = Some(Metered {
                product: job.kind.clone(),
                unit,
                quantity,
                once_key: Some(once_key(&job.kind, &job.job_id)),
                user_id: Some(job.user_id),
                route_id: Some(submit.id),
                capability: Some(submit.capability),
            });
        }
    }
    (update, metered)
}

/// `job_submit`.
pub async fn submit(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let spec = ctx.spec;
    let up = spec
        .upstream
        .ok_or_else(|| ApiError::Internal(format!("row {} has no upstream", spec.id)))?;
    let mut body = crate::forward::read_body(ctx, req).await?;
    let callback_uri = body
        .get("callback_uri")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let media_type = body
        .get("media_type")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let rb = crate::forward::upstream_request(ctx, params, Some(&mut body))?;
    let rb = match spec.file_field {
        Some(field) => {
            let url = body
                .remove("audio_url")
                .and_then(|v| v.as_str().map(str::to_owned))
                .ok_or_else(|| ApiError::BadRequest("audio_url is required".into()))?;
            shape::shape_body(spec, &mut body)?;
            let part = fetch::open_as_part(&ctx.gw, ctx.user_id(), &url).await?;
            rb.multipart(shape::text_parts(body).part(field, part))
        }
        None => {
            fetch::check_own(
                &ctx.gw,
                ctx.user_id(),
                body.get("audio_url").and_then(Value::as_str),
            )
            .await?;
            shape::shape_body(spec, &mut body)?;
            rb.json(&body)
        }
    };
    let resp = ctx.gw.upstream.send(up.base, rb).await?;
    let status = resp.status();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| ctx.gw.upstream.network_error(up.base, &e))?;
    let mut answer: Value = serde_json::from_slice(&bytes).map_err(|_| {
        ApiError::BadGateway("the voice provider answered a job submission that is not JSON".into())
    })?;
    let upstream_id = shape::upstream_id(&answer).ok_or_else(|| {
        ApiError::BadGateway("the voice provider answered a job submission without an id".into())
    })?;
    let kind = spec
        .job
        .ok_or_else(|| ApiError::Internal(format!("row {} has no job kind", spec.id)))?;
    let user_id = ctx
        .user_id()
        .ok_or_else(|| ApiError::Internal("job submitted without a user".into()))?;
    let item = item_of(&answer);
    let record = JobRecord {
        job_id: upstream_id.clone(),
        kind: kind.to_owned(),
        upstream_id: upstream_id.clone(),
        user_id,
        submit_route: spec.id.to_owned(),
        status: item_status(item, None).to_owned(),
        media_type: item
            .get("media_type")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(media_type),
        callback_uri,
        created_at: crate::store::now_rfc3339(),
    };
    if let Value::Object(m) = &mut answer {
        m.insert("job_id".into(), Value::String(upstream_id));
    }
    let status = StatusCode::from_u16(status.as_u16()).unwrap_or(StatusCode::OK);
    let mut outcome = Outcome::new(json_response(status, &answer), Some(status.as_u16()));
    outcome.records.push(Record::JobCreate(record));
    Ok(outcome)
}

/// `job_get`.
pub async fn get(ctx: &mut Ctx, _req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let spec = ctx.spec;
    let kind = spec
        .job
        .ok_or_else(|| ApiError::Internal(format!("row {} has no job kind", spec.id)))?;
    let job_id = params
        .get("job_id")
        .map(|c| c.into_owned())
        .unwrap_or_default();
    let user_id = ctx.user_id();
    let (k, j) = (kind.to_owned(), job_id.clone());
    let job = ctx
        .gw
        .store
        .blocking(move |store| store.job(&k, &j))
        .await?
        .filter(|j| Some(j.user_id) == user_id)
        .ok_or_else(|| ApiError::NotFound(format!("no {kind} job {job_id}")))?;
    let up = spec
        .upstream
        .ok_or_else(|| ApiError::Internal(format!("row {} has no upstream", spec.id)))?;
    let mut query = Vec::new();
    let mut upstream_params = PathParams::new();
    upstream_params.push("job_id", &crate::upstream::encode_segment(&job.upstream_id));
    let path = shape::upstream_path(spec, up.path, &upstream_params, &mut query, None)?;
    let rb = ctx.gw.upstream.request(&up, &path, &query)?;
    let resp = ctx.gw.upstream.send(up.base, rb).await?;
    let upstream_status = resp.status().as_u16();
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| ctx.gw.upstream.network_error(up.base, &e))?;
    let mut answer: Value = serde_json::from_slice(&bytes).map_err(|_| {
        ApiError::BadGateway("the voice provider answered a job status that is not JSON".into())
    })?;
    let item = item_of(&answer).clone();
    let (update, metered) = complete(
        &job,
        ctx.gw.route_by_id(&job.submit_route),
        &item,
        spec.mirror,
    );
    let completed = update.status == status::COMPLETED;
    let finished = completed || update.status == status::FAILED;
    if let Some(m) = metered {
        ctx.meter(m);
    }
    let callback = match (&job.callback_uri, finished) {
        (Some(uri), true) => Some(Deferred::Callback {
            kind: job.kind.clone(),
            job_id: job.job_id.clone(),
            user_id: job.user_id,
            uri: uri.clone(),
            body: answer_for(&job, &item, &update.status),
        }),
        _ => None,
    };
    if let Value::Object(m) = &mut answer {
        m.insert("job_id".into(), Value::String(job.job_id.clone()));
        m.insert("status".into(), Value::String(update.status.clone()));
    }
    if let (Some(field), true) = (spec.mirror, completed) {
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
    let mut outcome = Outcome::new(
        json_response(StatusCode::OK, &answer),
        Some(upstream_status),
    );
    // A finished job read again changes nothing: write its record only on a change.
    let changed =
        update.status != job.status || update.billed || (finished && job.result.is_none());
    if changed {
        outcome.records.push(Record::JobUpdate(update));
    }
    outcome.deferred.extend(callback);
    Ok(outcome)
}

/// The JSON of a job as `GET /<kind>/{job_id}` shows it (without mirroring):
/// what callbacks deliver.
pub fn answer_for(job: &JobRow, item: &Value, status: &str) -> Value {
    serde_json::json!({
        "success": true,
        "job_id": job.job_id,
        "status": status,
        "item": item,
    })
}

/// `job_list`: the caller's own jobs of the row's kind, from the gateway's
/// records (never the upstream account's list), newest first:
/// `{"success", "items": [{job_id, status, created_at, updated_at, result}],
/// "meta": {page, per_page, total_pages, total_items}}`.
pub async fn list(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let kind = ctx
        .spec
        .job
        .ok_or_else(|| ApiError::Internal(format!("row {} has no job kind", ctx.spec.id)))?;
    let user = ctx
        .user_id()
        .ok_or_else(|| ApiError::Internal("job list without a user".into()))?;
    let num = |name: &str, default: u32| {
        ctx.query
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.trim().parse::<u32>().ok())
            .unwrap_or(default)
    };
    let page = num("page", 1).max(1);
    let per_page = num("page_size", 10).clamp(1, 1000);
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
    Ok(Outcome::new(json_response(StatusCode::OK, &answer), None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::str::FromStr;

    #[test]
    fn statuses() {
        assert_eq!(
            item_status(&json!({"status": "completed"}), None),
            status::COMPLETED
        );
        assert_eq!(
            item_status(&json!({"status": "pending"}), None),
            status::PENDING
        );
        assert_eq!(
            item_status(&json!({"status": "failed"}), None),
            status::FAILED
        );
        assert_eq!(
            item_status(&json!({"uuid": "e"}), Some("item.result_audio_url")),
            status::PENDING
        );
        assert_eq!(
            item_status(
                &json!({"result_audio_url": "http://x"}),
                Some("item.result_audio_url")
            ),
            status::COMPLETED
        );
    }

    #[test]
    fn quantities_follow_the_media_type() {
        let d = |s: &str| Decimal::from_str(s).unwrap();
        let item = json!({"duration_seconds": 12.5, "media_type": "video"});
        assert_eq!(
            job_quantity(Billing::MediaSeconds, &item, None),
            ("video_seconds", d("12.5"))
        );
        let item = json!({"media_type": "image", "image_count": 3});
        assert_eq!(
            job_quantity(Billing::MediaSeconds, &item, None),
            ("images", d("3"))
        );
        let item = json!({"duration_seconds": 4.25});
        assert_eq!(
            job_quantity(Billing::MediaSeconds, &item, None),
            ("audio_seconds", d("4.25"))
        );
        assert_eq!(
            job_quantity(Billing::AudioSeconds, &item, None),
            ("audio_seconds", d("4.25"))
        );
    }
}
