//! Result mirroring (spec §3): the first GET of a complete enhance, edit or
//! watermark-apply job copies the result audio into the object store.
//!
//! * **Exactly one copy.** The right to copy is a conditional update of the
//!   job row ([`gateway_store::Store::claim_mirror`]), so concurrent first GETs
//!   — in one process or in several gateway instances sharing the database —
//!   elect one copier. The others wait (bounded) for its result.
//! * **Streamed.** The upstream's body goes straight into the object store.
//! * **Retried.** A failed copy marks the job `failed`; the GET still answers
//!   with `resemble_url`, and the next GET tries again. A claim whose holder
//!   died is taken over after [`STALE_CLAIM`].
//! * **Only upstream hosts.** A result URL is fetched only when its host is
//!   one of the configured upstream hosts (`PROVIDER_BASE_URL`,
//!   `PROVIDER_SYNTH_URL`, `GATEWAY_MIRROR_HOSTS`); never with credentials.

use std::time::Duration;

use futures_util::TryStreamExt;

use crate::services::Gateway;
use gateway_adapters::objects::ByteStream;
use gateway_base::spec::EndpointSpec;
use gateway_store::{AssetRecord, Assets, JobRow, Jobs, OutsideRecordPhase, Record};

/// A claim older than this is considered abandoned.
pub const STALE_CLAIM: Duration = Duration::from_secs(120);
/// How long a GET waits for another request's copy before answering without it.
pub const WAIT_FOR_COPY: Duration = Duration::from_secs(15);
/// Presigned URL validity (spec §8).
pub const URL_VALIDITY: Duration = Duration::from_secs(3600);
/// Retention of mirrored results when the row gives none (spec §8).
pub const DEFAULT_RETENTION_DAYS: u32 = 7;

/// A mirrored result, as the answer shows it.
pub struct Mirrored {
    /// Fresh presigned URL of the stored copy.
    pub url: String,
    /// When the stored copy is deleted.
    pub expires_at: String,
}

/// Whether `url`'s host is an upstream host the gateway may fetch from.
pub fn allowed_host(gw: &Gateway, url: &str) -> bool {
    let Ok(u) = reqwest::Url::parse(url) else {
        return false;
    };
    if !matches!(u.scheme(), "http" | "https") {
        return false;
    }
    let Some(host) = u.host_str() else {
        return false;
    };
    let port = u.port_or_known_default();
    let same = |base: &str| {
        reqwest::Url::parse(base)
            .ok()
            .is_some_and(|b| b.host_str() == Some(host) && b.port_or_known_default() == port)
    };
    same(&gw.config.provider_base_url)
        || same(&gw.config.provider_synth_url)
        || gw
            .config
            .mirror_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
}

/// Returns the job's stored copy, copying it first if this is the first GET.
/// `None` when the copy is not (yet) available: the caller answers with
/// `resemble_url` only.
pub async fn mirror(
    gw: &Gateway,
    job: &JobRow,
    spec: &EndpointSpec,
    url: &str,
) -> Option<Mirrored> {
    if let Some(m) = existing(gw, job.mirror_asset_id).await {
        return Some(m);
    }
    if !allowed_host(gw, url) {
        tracing::warn!(job = %job.job_id, "result URL is not on an upstream host; not mirrored");
        return None;
    }
    let now = chrono::Utc::now();
    let stale_before = now - chrono::Duration::from_std(STALE_CLAIM).unwrap_or_default();
    let (kind, job_id) = (job.kind.clone(), job.job_id.clone());
    let claimed = blocking(gw, move |store| {
        store.claim_mirror(&kind, &job_id, &fmt(now), &fmt(stale_before))
    })
    .await
    .unwrap_or(false);
    if !claimed {
        return wait_for_copy(gw, job).await;
    }
    match copy(gw, job, spec, url).await {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!(job = %job.job_id, error = %e, "mirroring failed; will retry on the next GET");
            let (kind, job_id) = (job.kind.clone(), job.job_id.clone());
            let _ = blocking(gw, move |store| store.fail_mirror(&kind, &job_id)).await;
            None
        }
    }
}

fn fmt(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A store call in the blocking pool; `None` on failure (mirroring is best effort).
async fn blocking<T: Send + 'static>(
    gw: &Gateway,
    f: impl FnOnce(&gateway_store::Store) -> gateway_store::Result<T> + Send + 'static,
) -> Option<T> {
    gw.store.blocking(f).await.ok()
}

/// The stored copy of an asset id, with a fresh presigned URL.
async fn existing(gw: &Gateway, asset_id: Option<i64>) -> Option<Mirrored> {
    let id = asset_id?;
    let asset = blocking(gw, move |store| store.asset(id)).await??;
    if asset.deleted_at.is_some() {
        return None;
    }
    let url = gw
        .objects
        .presign_get(&asset.object_key, URL_VALIDITY)
        .ok()?;
    Some(Mirrored {
        url,
        expires_at: asset.expires_at.unwrap_or_default(),
    })
}

async fn wait_for_copy(gw: &Gateway, job: &JobRow) -> Option<Mirrored> {
    let deadline = tokio::time::Instant::now() + WAIT_FOR_COPY;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (kind, job_id) = (job.kind.clone(), job.job_id.clone());
        let row = blocking(gw, move |store| store.job(&kind, &job_id)).await??;
        if row.mirror_asset_id.is_some() {
            return existing(gw, row.mirror_asset_id).await;
        }
        if row.mirror_state.as_deref() != Some("copying") {
            return None;
        }
    }
    None
}

async fn copy(
    gw: &Gateway,
    job: &JobRow,
    spec: &EndpointSpec,
    url: &str,
) -> Result<Mirrored, String> {
    let resp = gw
        .upstream
        .client()
        .get(url)
        .send()
        .await
        .map_err(|e| format!("fetching the result: {}", e.without_url()))?;
    if !resp.status().is_success() {
        return Err(format!(
            "fetching the result: status {}",
            resp.status().as_u16()
        ));
    }
    let ext = extension_of(url);
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .filter(|ct| ct.starts_with("audio/") || ct.starts_with("video/"))
        .map(str::to_owned)
        .unwrap_or_else(|| gateway_base::media::content_type_for(&format!("x.{ext}")).to_owned());
    let key = format!(
        "mirror/{}/{}/{}.{ext}",
        job.user_id,
        job.kind,
        sanitize(&job.job_id)
    );
    let stream: ByteStream = Box::pin(resp.bytes_stream().map_err(std::io::Error::other));
    let size = gw
        .objects
        .put(&key, &content_type, stream, None)
        .await
        .map_err(|e| e.to_string())?;
    let now = chrono::Utc::now();
    let days = spec.retention_days.unwrap_or(DEFAULT_RETENTION_DAYS);
    let expires_at = fmt(now + chrono::Duration::days(days as i64));
    let record = AssetRecord {
        owner_id: Some(job.user_id),
        object_key: key.clone(),
        class: "mirror".into(),
        purpose: Some(job.kind.clone()),
        size_bytes: size,
        content_type,
        file_name: None,
        source: Some(url.to_owned()),
        created_at: fmt(now),
        expires_at: Some(expires_at.clone()),
        pack: None,
        pack_offset: None,
    };
    let committed = gw
        .store
        .commit_outside_record_phase(
            OutsideRecordPhase::MirroredCopy,
            vec![Record::Asset(record)],
        )
        .await
        .map_err(|e| e.to_string())?;
    let asset_id = *committed.asset_ids.first().ok_or("asset id missing")?;
    gateway_base::telemetry::mirror_copy();
    let (kind, job_id) = (job.kind.clone(), job.job_id.clone());
    gw.store
        .blocking(move |store| store.finish_mirror(&kind, &job_id, asset_id))
        .await
        .map_err(|e| e.to_string())?;
    let url = gw
        .objects
        .presign_get(&key, URL_VALIDITY)
        .map_err(|e| e.to_string())?;
    Ok(Mirrored { url, expires_at })
}

/// The audio extension of a URL's path (`wav` when unknown).
fn extension_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.path_segments()?.next_back().map(str::to_owned))
        .and_then(|name| name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()))
        .filter(|e| {
            matches!(
                e.as_str(),
                "wav" | "mp3" | "m4a" | "flac" | "ogg" | "webm" | "mp4" | "mov" | "mkv"
            )
        })
        .unwrap_or_else(|| "wav".to_owned())
}

/// An id usable as one key segment.
fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_and_ids() {
        assert_eq!(extension_of("http://h/__sim/media/abc.wav"), "wav");
        assert_eq!(extension_of("http://h/x.MP3?sig=1"), "mp3");
        assert_eq!(extension_of("http://h/x"), "wav");
        assert_eq!(sanitize("a/b..c"), "a_b__c");
    }
}
