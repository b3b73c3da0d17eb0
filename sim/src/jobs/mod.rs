//! Asynchronous jobs: speech-to-text, enhance, edit, detect, intelligence,
//! tracing, watermark apply/detect, and voice builds.
//!
//! Status follows a clock started at submission: `pending` for the first third
//! of the job duration, then `processing`, then `completed`. The control plane
//! can force `completed` or `failed` at once. A timer task per job notices
//! completion, books billing usage, and sends the [webhook](crate::webhook)
//! (once), plus the request's own `callback_url` / `callback_uri` when given.
//!
//! Media-based jobs get `duration_seconds` from the uploaded file (exact for
//! WAV/MP3, otherwise estimated from the size); URL-based jobs fetch the URL in
//! the background (falling back to [`DEFAULT_MEDIA_SECONDS`] when it cannot be
//! read before the job completes). Values are frozen at completion.
//!
//! The model (kinds, statuses, the clock, items) is in [`model`]; this file
//! holds the runtime: submission, completion timers, forcing and URL probes.

pub mod model;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde_json::{json, Value};

pub use model::{fnv, now, timestamp, Job, Kind, Status, DEFAULT_MEDIA_SECONDS};

use crate::shared::Shared;

/// Registers `job` and starts its completion timer. Returns the item.
pub fn submit(sh: &Arc<Shared>, mut job: Job) -> Value {
    let (kind, uuid) = (job.kind, job.uuid.clone());
    let item = {
        let mut store = sh.store.lock().unwrap();
        store.seq += 1;
        job.seq = store.seq;
        let item = job.item(&sh.root);
        store.jobs.insert((kind, uuid.clone()), job);
        item
    };
    schedule(sh, kind, uuid);
    item
}

/// Starts the timer that handles the completion of job `(kind, uuid)`.
pub fn schedule(sh: &Arc<Shared>, kind: Kind, uuid: String) {
    let shared = sh.clone();
    sh.spawn(async move {
        loop {
            let remaining = {
                let store = shared.store.lock().unwrap();
                match store.jobs.get(&(kind, uuid.clone())) {
                    None => return,
                    Some(j) if j.notified => return,
                    Some(j) => j.duration.saturating_sub(j.started.elapsed()),
                }
            };
            if remaining.is_zero() {
                finish(&shared, kind, &uuid);
                return;
            }
            tokio::time::sleep(remaining + Duration::from_millis(1)).await;
        }
    });
}

/// Handles a finished job once: books usage, sends the webhook and callback.
pub fn finish(sh: &Arc<Shared>, kind: Kind, uuid: &str) {
    let cfg = sh.config();
    let (status, item, callback) = {
        let mut guard = sh.store.lock().unwrap();
        let store = &mut *guard;
        let Some(job) = store.jobs.get_mut(&(kind, uuid.to_owned())) else {
            return;
        };
        let status = job.status();
        if job.notified || !status.is_terminal() {
            return;
        }
        job.notified = true;
        let job = job.clone();
        if status == Status::Completed && kind != Kind::Voice {
            let media_type = job.text("media_type");
            if media_type == "image" {
                store.billing.add(&format!("{}_images", kind.as_str()), 1.0);
            } else {
                store
                    .billing
                    .add(kind.as_str(), job.num("duration_seconds"));
            }
        }
        let item = if kind == Kind::Voice {
            store.voice_item(uuid)
        } else {
            Some(job.item(&sh.root))
        };
        let Some(item) = item else { return };
        (status, item, job.callback.clone())
    };
    let event = match (kind, status) {
        (Kind::Voice, Status::Completed) => "voice.build.completed",
        (Kind::Voice, _) => "voice.build.failed",
        (_, Status::Completed) => "job.completed",
        _ => "job.failed",
    };
    let body = crate::webhook::payload(event, kind.as_str(), uuid, status.as_str(), &item);
    if let Some(url) = cfg.webhook_url.clone() {
        crate::webhook::send(sh, url, cfg.webhook_secret.clone(), body.clone());
    }
    if let Some(url) = callback {
        crate::webhook::send(sh, url, cfg.webhook_secret, body);
    }
}

/// Forces every unfinished job with this uuid to `status` now and handles its
/// completion. Returns the items of the jobs found (None when there is none).
pub fn force(sh: &Arc<Shared>, uuid: &str, status: Status) -> Option<Vec<Value>> {
    let kinds: Vec<Kind> = {
        let mut store = sh.store.lock().unwrap();
        let at = Utc::now();
        Kind::ALL
            .into_iter()
            .filter(|k| match store.jobs.get_mut(&(*k, uuid.to_owned())) {
                Some(job) => {
                    if !job.notified {
                        job.forced = Some((status, at));
                    }
                    true
                }
                None => false,
            })
            .collect()
    };
    if kinds.is_empty() {
        return None;
    }
    for k in &kinds {
        finish(sh, *k, uuid);
    }
    let store = sh.store.lock().unwrap();
    Some(
        kinds
            .iter()
            .filter_map(|k| store.job_item(*k, uuid, &sh.root))
            .collect(),
    )
}

/// For URL-based jobs: fetches `url` in the background and stores its
/// `duration_seconds` in the jobs `(kind, uuid)` that are still running.
pub fn probe_url(sh: &Arc<Shared>, kinds: Vec<Kind>, uuid: String, url: String) {
    let shared = sh.clone();
    sh.spawn(async move {
        let Some(secs) = fetch_duration(&shared, &url).await else {
            return;
        };
        let mut store = shared.store.lock().unwrap();
        for k in kinds {
            if let Some(job) = store.jobs.get_mut(&(k, uuid.clone())) {
                if !job.status().is_terminal() {
                    job.data.insert("duration_seconds".into(), json!(secs));
                }
            }
        }
    });
}

async fn fetch_duration(sh: &Arc<Shared>, url: &str) -> Option<f64> {
    // Our own media: answer from the store instead of logging a request to ourselves.
    if let Some(rest) = url.strip_prefix(&format!("{}/__sim/media/", sh.root)) {
        let id = rest.rsplit_once('.').map_or(rest, |(id, _)| id);
        return sh.store.lock().unwrap().media.get(id).copied();
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return None;
    }
    let resp = sh
        .client
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    match resp.content_length() {
        Some(len) if len > 64 * 1024 * 1024 => Some(crate::audio::size_estimate(len)),
        _ => Some(crate::audio::probe_duration(&resp.bytes().await.ok()?)),
    }
}
