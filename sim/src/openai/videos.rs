//! The `/v1/videos` routes: create a job, list, read, download and cancel
//! it. The job record and its clock are in [`super::video`] (the store
//! holds it); these are its handlers.

use std::sync::Arc;
use std::time::Instant;

use http::header::CONTENT_TYPE;
use http::{HeaderValue, StatusCode};
use serde_json::{json, Map, Value};

use super::errors::{fields, missing, oai_error};
use super::video::{self, unix_now, Video};
use super::wire::short_id;
use crate::request::Req;
use crate::response::{full, json_response, Resp};
use crate::shared::Shared;

/// Forces a video to `completed` or `failed`; false when unknown.
pub fn force_video(sh: &Shared, id: &str, status: &'static str) -> Option<Value> {
    let mut store = sh.store.lock().unwrap();
    let v = store.videos.get_mut(id)?;
    if !matches!(v.status(), "completed" | "failed" | "cancelled") {
        v.forced = Some(status);
    }
    Some(v.render())
}

/// `GET /v1/videos`: every job, oldest first.
pub(super) fn list(sh: &Shared) -> Resp {
    let store = sh.store.lock().unwrap();
    let mut list: Vec<&Video> = store.videos.values().collect();
    list.sort_by_key(|v| v.seq);
    let data: Vec<Value> = list.iter().map(|v| v.render()).collect();
    json_response(
        StatusCode::OK,
        &json!({"object": "list", "data": data, "has_more": false}),
    )
}

/// `GET /v1/videos/{id}`.
pub(super) fn get(sh: &Shared, id: &str) -> Result<Resp, Resp> {
    let store = sh.store.lock().unwrap();
    store
        .videos
        .get(id)
        .map(|v| json_response(StatusCode::OK, &v.render()))
        .ok_or_else(|| video_404(id))
}

/// `GET /v1/videos/{id}/content`: the video once its job has completed.
pub(super) fn content(sh: &Shared, id: &str) -> Result<Resp, Resp> {
    let store = sh.store.lock().unwrap();
    let v = store.videos.get(id).ok_or_else(|| video_404(id))?;
    if v.status() != "completed" {
        return Err(oai_error(
            StatusCode::BAD_REQUEST,
            "Video is not ready: its job has not completed.",
            None,
            Some("video_not_ready"),
        ));
    }
    let mut r = full(video::mp4_bytes());
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("video/mp4"));
    Ok(r)
}

/// `POST /v1/videos/{id}/cancel` (and `DELETE`): `cancelled` unless the
/// job has already finished.
pub(super) fn cancel(sh: &Shared, id: &str) -> Result<Resp, Resp> {
    let mut store = sh.store.lock().unwrap();
    let v = store.videos.get_mut(id).ok_or_else(|| video_404(id))?;
    if matches!(v.status(), "completed" | "failed" | "cancelled") {
        return Err(oai_error(
            StatusCode::BAD_REQUEST,
            "Video job is already finished.",
            None,
            Some("invalid_state"),
        ));
    }
    v.forced = Some("cancelled");
    Ok(json_response(StatusCode::OK, &v.render()))
}

fn video_404(id: &str) -> Resp {
    oai_error(
        StatusCode::NOT_FOUND,
        &format!("Video '{id}' not found"),
        None,
        Some("not_found"),
    )
}

/// `POST /v1/videos`: a job on the simulator's job clock.
pub(super) fn create(sh: &Arc<Shared>, req: &Req) -> Result<Resp, Resp> {
    let f = fields(req)?;
    let prompt = f
        .get("prompt")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| missing("prompt"))?;
    let seconds = match f.get("seconds") {
        None => "4".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    let id = short_id("video_");
    let mut item = Map::new();
    for (k, v) in [
        ("id", json!(id)),
        ("object", json!("video")),
        (
            "model",
            json!(f
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("sim-video")),
        ),
        ("prompt", json!(prompt)),
        ("created_at", json!(unix_now())),
        (
            "size",
            json!(f.get("size").and_then(Value::as_str).unwrap_or("720x1280")),
        ),
        ("seconds", json!(seconds)),
        ("quality", json!("standard")),
    ] {
        item.insert(k.into(), v);
    }
    let duration = sh.config.read().unwrap().job_duration;
    let mut store = sh.store.lock().unwrap();
    store.seq += 1;
    let video = Video {
        started: Instant::now(),
        duration,
        forced: None,
        seq: store.seq,
        item,
    };
    let out = video.render();
    store.videos.insert(id, video);
    Ok(json_response(StatusCode::OK, &out))
}
