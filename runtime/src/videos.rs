//! Video generation jobs of the general gateway: what one observation of a
//! job changes, shared by a caller's GET (the `video_get` mode) and the
//! background job follower ([`follow_due`], called on its every tick).
//!
//! * **Reserved, then settled once.** The submit holds the requested
//!   seconds at the model's `per_second` price; the hold outlives the
//!   request ([`crate::money::Hold::keep`]) under the submit's request id.
//!   A completed job is billed its seconds (the provider's `seconds`, never
//!   more than requested) under the once-key `video:<job_id>`, with the
//!   release of the hold, in one transaction: however many observers see it
//!   complete, it is charged once. A failed or cancelled job releases its
//!   hold and is charged nothing.
//! * **Copied once.** The finished video (`GET /videos/{id}/content`) is
//!   streamed into the object store (asset class `video`, 7-day retention)
//!   by the one observer that claims the copy in the database
//!   ([`gateway_store::Store::claim_video_copy`]; a claim older than
//!   [`COPY_STALE`] is taken over); the job is marked completed after its
//!   billing is committed. Callers get a presigned URL of our copy.
//! * **Followed.** Unfinished jobs are polled again the follower's first
//!   delay (2 s) after each poll, at its interval, for at most [`MAX_AGE`]; each poll is claimed by a
//!   conditional update, so one instance polls a job at a time.

use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt;
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::money::Settle;
use crate::services::Gateway;
use gateway_adapters::upstream::llm::ProviderKey;
use gateway_base::errors::ApiError;
use gateway_base::spec::Method;
use gateway_models::providers::{Model, Provider};
use gateway_store::{rfc3339, AssetRecord, OutsideRecordPhase, Record, VideoJobRow, Videos};

/// Retention of stored videos.
pub const VIDEO_RETENTION_DAYS: i64 = 7;
/// Validity of the answered presigned URLs.
pub const URL_VALIDITY: Duration = Duration::from_secs(3600);
/// Largest video copied from a provider.
pub const MAX_VIDEO_BYTES: u64 = 1 << 30;
/// A copy claim older than this is taken over.
pub const COPY_STALE: Duration = Duration::from_secs(300);
/// A job older than this is no longer followed (a GET still observes it).
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// The submit row (its route and capability are the billing's).
pub const SUBMIT_ROUTE: &str = "videos.generations";
pub const CAPABILITY: &str = "videos";

/// Whether `status` is final.
pub fn finished(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// The gateway's status of a provider's video status.
pub fn our_status(upstream: Option<&str>) -> &'static str {
    match upstream.map(str::to_ascii_lowercase).as_deref() {
        Some("completed" | "succeeded") => "completed",
        Some("failed" | "error") => "failed",
        Some("cancelled" | "canceled") => "cancelled",
        Some("in_progress" | "processing" | "running") => "processing",
        _ => "pending",
    }
}

fn provider_of(
    gw: &Gateway,
    job: &VideoJobRow,
) -> Result<(Provider, Model, ProviderKey), ApiError> {
    let catalogue = gw.catalogue();
    let (p, m) = catalogue.get(&job.provider, &job.model).ok_or_else(|| {
        ApiError::Unavailable(format!(
            "the model {}/{} of this job is no longer configured",
            job.provider, job.model
        ))
    })?;
    let key = p
        .key
        .clone()
        .ok_or_else(|| gateway_models::providers::config_missing(p))?;
    Ok((p.clone(), m.clone(), key))
}

/// The job as answered to its owner (`progress` when just observed).
pub fn job_json(gw: &Gateway, j: &VideoJobRow, progress: Option<u64>) -> Value {
    let mut v = json!({
        "job_id": j.job_id,
        "object": "video",
        "status": j.status,
        "model": format!("{}/{}", j.provider, j.model),
        "prompt": j.prompt,
        "seconds": j.seconds,
        "size": j.size,
        "created_at": j.created_at,
        "updated_at": j.updated_at,
    });
    if let Some(p) = progress {
        v["progress"] = json!(if j.status == "completed" { 100 } else { p });
    }
    if let (Some(key), "completed") = (&j.object_key, j.status.as_str()) {
        if let Ok(url) = gw.objects.presign_get(key, URL_VALIDITY) {
            v["video_url"] = json!(url);
        }
        v["expires_at"] = json!(j.expires_at);
    }
    v
}

async fn reload(gw: &Gateway, job_id: &str) -> Result<VideoJobRow, ApiError> {
    let id = job_id.to_owned();
    gw.store
        .blocking(move |s| s.video_job(&id))
        .await?
        .ok_or_else(|| ApiError::bug("a video job vanished"))
}

/// Records `status` (failed or cancelled) and releases the job's hold.
pub async fn end_unbilled(gw: &Gateway, job: &VideoJobRow, status: &str) -> Result<(), ApiError> {
    let (id, st, now) = (
        job.job_id.clone(),
        status.to_owned(),
        gateway_store::now_rfc3339(),
    );
    let changed = gw
        .store
        .blocking(move |s| s.set_video_status(&id, &st, &now))
        .await?;
    if changed {
        gw.store
            .commit_outside_record_phase(
                OutsideRecordPhase::VideoJobEnd,
                vec![crate::money::hold_release(job.hold_id.clone())],
            )
            .await?;
    }
    Ok(())
}

/// Observes an unfinished job upstream and applies what changed; a finished
/// job is answered from its record. The job as it now stands and the
/// provider's progress.
pub async fn observe(
    gw: &Gateway,
    job: VideoJobRow,
) -> Result<(VideoJobRow, Option<u64>), ApiError> {
    if finished(&job.status) {
        return Ok((job, None));
    }
    let (p, m, key) = provider_of(gw, &job)?;
    let path = format!(
        "/videos/{}",
        gateway_adapters::upstream::encode_segment(&job.job_id)
    );
    let item = gw
        .upstream
        .llm_call(Method::Get, &p.base_url, &path, &key)
        .send()
        .await?
        .json("a video job")
        .await?;
    let progress = item.get("progress").and_then(Value::as_u64);
    match our_status(item.get("status").and_then(Value::as_str)) {
        "completed" => finish(gw, &job, &p, &m, &key, &item).await?,
        s @ ("failed" | "cancelled") => end_unbilled(gw, &job, s).await?,
        s => {
            if s != job.status {
                let (id, st, now) = (
                    job.job_id.clone(),
                    s.to_owned(),
                    gateway_store::now_rfc3339(),
                );
                gw.store
                    .blocking(move |s| s.set_video_status(&id, &st, &now))
                    .await?;
            }
        }
    }
    Ok((reload(gw, &job.job_id).await?, progress))
}

/// The seconds a completed job is billed: the provider's `seconds`, at most
/// the requested seconds (the hold's basis).
pub fn billed_seconds(item: &Value, requested: Decimal) -> Decimal {
    // The one rule for upstream figures (negative or non-finite: logged, not billed).
    match gateway_base::billing::quantity_from_upstream("seconds", item.get("seconds")) {
        gateway_base::billing::UpstreamQuantity::Valid(r) if r > Decimal::ZERO => r.min(requested),
        _ => requested,
    }
}

async fn finish(
    gw: &Gateway,
    job: &VideoJobRow,
    p: &Provider,
    m: &Model,
    key: &ProviderKey,
    item: &Value,
) -> Result<(), ApiError> {
    let now = chrono::Utc::now();
    let stale = now - chrono::Duration::from_std(COPY_STALE).unwrap_or_default();
    let (id, n, st) = (job.job_id.clone(), rfc3339(now), rfc3339(stale));
    if !gw
        .store
        .blocking(move |s| s.claim_video_copy(&id, &n, &st))
        .await?
    {
        return Ok(()); // another observer is copying it
    }
    let copied = copy(gw, job, p, key, now).await;
    let (object_key, size) = match copied {
        Ok(c) => c,
        Err(e) => {
            let id = job.job_id.clone();
            let _ = gw.store.blocking(move |s| s.release_video_copy(&id)).await;
            return Err(e);
        }
    };
    let expires_at = rfc3339(now + chrono::Duration::days(VIDEO_RETENTION_DAYS));
    let requested: Decimal = job.seconds.parse().unwrap_or_default();
    let seconds = billed_seconds(item, requested);
    let settle = Settle {
        request_id: job.hold_id.clone(),
        user_id: Some(job.user_id),
        route_id: SUBMIT_ROUTE,
        capability: CAPABILITY,
        provider: p.clone(),
        model: m.clone(),
        byok: false,
        hold: None,
        bound: None,
        started: None,
        streamed: false,
        // A job's charge is made by its observer, after the request.
        api_key_id: None,
        served: Default::default(),
        line: None,
        admission: None,
        price_version: gw.catalogue().price_version(),
    };
    let mut records = vec![Record::Asset(AssetRecord {
        owner_id: Some(job.user_id),
        object_key: object_key.clone(),
        class: "video".into(),
        purpose: Some("video_generation".into()),
        size_bytes: size,
        content_type: "video/mp4".into(),
        file_name: None,
        source: Some(job.job_id.clone()),
        created_at: rfc3339(now),
        expires_at: Some(expires_at.clone()),
        pack: None,
        pack_offset: None,
    })];
    for mut r in settle.seconds_records("video_seconds", seconds) {
        if let Record::Usage(u) = &mut r {
            u.once_key = Some(format!("video:{}", job.job_id));
        }
        records.push(r);
    }
    records.push(crate::money::hold_release(job.hold_id.clone()));
    gw.store
        .commit_outside_record_phase(OutsideRecordPhase::VideoJobEnd, records)
        .await?;
    let (id, n) = (job.job_id.clone(), rfc3339(now));
    gw.store
        .blocking(move |s| s.complete_video(&id, &object_key, &expires_at, &n))
        .await?;
    Ok(())
}

/// Streams the finished video into the object store: its key and size.
async fn copy(
    gw: &Gateway,
    job: &VideoJobRow,
    p: &Provider,
    key: &ProviderKey,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(String, u64), ApiError> {
    let path = format!(
        "/videos/{}/content",
        gateway_adapters::upstream::encode_segment(&job.job_id)
    );
    let answer = gw
        .upstream
        .llm_call(Method::Get, &p.base_url, &path, key)
        .send()
        .await?;
    let object_key = format!(
        "videos/{}/{}-{}.mp4",
        job.user_id,
        now.format("%Y/%m/%d/%H%M%S"),
        gateway_adapters::upstream::encode_segment(&job.job_id)
    );
    let stream: gateway_adapters::objects::ByteStream =
        Box::pin(answer.byte_stream().map_err(std::io::Error::other));
    let size = gw
        .objects
        .put(&object_key, "video/mp4", stream, Some(MAX_VIDEO_BYTES))
        .await
        .map_err(|e| ApiError::BadGateway(format!("copying a generated video failed: {e}")))?;
    Ok((object_key, size))
}

/// The follower's share: claims due video jobs (at most as many as
/// `permits` has free: the follower's concurrency, shared with the voice
/// jobs) and polls them, each holding a permit; a job still unfinished is
/// polled again after the follower's first delay, until it is [`MAX_AGE`] old.
pub async fn follow_due(gw: &Gateway, permits: &Arc<Semaphore>) -> usize {
    let free = permits.available_permits();
    if free == 0 {
        return 0;
    }
    let now = chrono::Utc::now();
    let lease = chrono::Duration::from_std(gw.config.upstream_timeout * 2 + COPY_STALE)
        .unwrap_or_else(|_| chrono::Duration::minutes(10));
    let (n, until) = (rfc3339(now), rfc3339(now + lease));
    let due = match gw
        .store
        .blocking(move |s| s.claim_due_video_jobs(&n, &until, free))
        .await
    {
        Ok(d) => d,
        Err(e) => {
            tracing::error!(error = %e, "video follower: listing due jobs failed");
            return 0;
        }
    };
    let count = due.len();
    for job in due {
        let gw = gw.clone();
        // Claimed: polled even when the permits ran out meanwhile (the
        // voice jobs' polls took them), then within the bound again.
        let permit = permits.clone().try_acquire_owned().ok();
        tokio::spawn(async move {
            let _permit = permit;
            let id = job.job_id.clone();
            let created = chrono::DateTime::parse_from_rfc3339(&job.created_at)
                .map(|t| t.with_timezone(&chrono::Utc))
                .unwrap_or_else(|_| chrono::Utc::now());
            let result = observe(&gw, job).await;
            if let Err(e) = &result {
                tracing::warn!(job = %id, error = %e, "video follower: poll failed");
            }
            let now = chrono::Utc::now();
            let too_old = now - created > chrono::Duration::from_std(MAX_AGE).unwrap_or_default();
            let delay = chrono::Duration::from_std(gw.config.job_follow_first_delay)
                .unwrap_or_else(|_| chrono::Duration::seconds(2));
            let next = (!too_old).then(|| rfc3339(now + delay));
            let _ = gw
                .store
                .blocking(move |s| s.reschedule_video(&id, next.as_deref()))
                .await;
        });
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_seconds() {
        assert_eq!(our_status(Some("queued")), "pending");
        assert_eq!(our_status(Some("in_progress")), "processing");
        assert_eq!(our_status(Some("completed")), "completed");
        assert_eq!(our_status(Some("cancelled")), "cancelled");
        assert_eq!(our_status(None), "pending");
        let four = Decimal::from(4);
        assert_eq!(billed_seconds(&json!({"seconds": "4"}), four), four);
        assert_eq!(
            billed_seconds(&json!({"seconds": 2}), four),
            Decimal::from(2)
        );
        assert_eq!(billed_seconds(&json!({"seconds": "99"}), four), four);
        assert_eq!(billed_seconds(&json!({"seconds": "-1"}), four), four);
        assert_eq!(billed_seconds(&json!({}), four), four);
    }
}
