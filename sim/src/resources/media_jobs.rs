//! The asynchronous job endpoints: speech-to-text, enhance, edit, detect
//! (with audio source tracing), intelligence and watermark apply / detect,
//! plus reading any job back.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::crud::{page_params, page_slice};
use super::fields::{bool_of, new_id, required, str_field};
use super::handler::{job_duration, R};
use crate::audio;
use crate::jobs::{self, Job, Kind};
use crate::request::Req;
use crate::response::{bad_field, json_response, not_found, ok, ok_item};
use crate::shared::Shared;

/// `GET` of a job of `kind` (404 names the kind).
pub(super) fn job_get(sh: &Arc<Shared>, kind: Kind, id: &str) -> R {
    let store = sh.store.lock().unwrap();
    let what = match kind {
        Kind::Stt => "transcript",
        Kind::Enhance => "audio enhancement",
        Kind::Edit => "edit",
        Kind::Detect => "detect",
        Kind::Intelligence => "intelligence",
        Kind::Tracing => "audio source tracing",
        Kind::WatermarkApply | Kind::WatermarkDetect => "watermark job",
        Kind::Voice => "voice",
    };
    store
        .job_item(kind, id, &sh.root)
        .map(ok_item)
        .ok_or_else(|| not_found(what))
}

/// Text fields of a multipart / JSON request, minus `skip`.
fn job_data(fields: Map<String, Value>, skip: &[&str]) -> Map<String, Value> {
    fields
        .into_iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .collect()
}

/// The uploaded file among `names`, as `(duration_seconds, file_name)`.
fn upload(req: &Req, names: &[&str]) -> Option<(f64, Option<String>)> {
    names
        .iter()
        .find_map(|n| req.part(n))
        .map(|p| (audio::probe_duration(&p.data), p.filename.clone()))
}

/// `POST /speech-to-text`: an uploaded `file` or a `url`.
pub(super) fn stt_create(sh: &Arc<Shared>, req: &Req) -> R {
    let fields = req.fields()?;
    let callback = str_field(&fields, "callback_url").map(str::to_owned);
    let url = str_field(&fields, "url").map(str::to_owned);
    let mut data = job_data(fields, &["file"]);
    let probe = match upload(req, &["file"]) {
        Some((secs, name)) => {
            data.insert("duration_seconds".into(), json!(secs));
            data.insert("file_name".into(), json!(name));
            None
        }
        None => match url {
            Some(u) => {
                data.insert(
                    "duration_seconds".into(),
                    json!(jobs::DEFAULT_MEDIA_SECONDS),
                );
                Some(u)
            }
            None => return Err(bad_field("file", "is required")),
        },
    };
    let mut job = Job::new(Kind::Stt, new_id(), job_duration(sh), data);
    job.callback = callback;
    let id = job.uuid.clone();
    let item = jobs::submit(sh, job);
    if let Some(u) = probe {
        jobs::probe_url(sh, vec![Kind::Stt], id, u);
    }
    Ok(ok_item(item))
}

/// `GET /speech-to-text`: transcripts with `meta` paging (`per_page`).
pub(super) fn stt_list(sh: &Arc<Shared>, req: &Req) -> R {
    let (page, per_page) = page_params(req, "per_page")?;
    let store = sh.store.lock().unwrap();
    let mut list: Vec<&Job> = store
        .jobs
        .values()
        .filter(|j| j.kind == Kind::Stt)
        .collect();
    list.sort_by_key(|j| j.seq);
    let total = list.len();
    let items: Vec<Value> = list.into_iter().map(|j| j.item(&sh.root)).collect();
    Ok(ok(json!({
        "success": true,
        "items": page_slice(items, page, per_page),
        "meta": {"page": page, "per_page": per_page, "total_pages": total.div_ceil(per_page).max(1), "total_items": total},
    })))
}

/// `POST /audio_enhancements` (202).
pub(super) fn enhance_create(sh: &Arc<Shared>, req: &Req) -> R {
    let fields = req.fields()?;
    let (secs, name) = upload(req, &["audio_file", "file"])
        .ok_or_else(|| bad_field("audio_file", "is required"))?;
    let mut data = job_data(fields, &["audio_file", "file"]);
    data.insert("duration_seconds".into(), json!(secs));
    data.insert("file_name".into(), json!(name));
    let job = Job::new(Kind::Enhance, new_id(), job_duration(sh), data);
    let item = jobs::submit(sh, job);
    Ok(json_response(
        StatusCode::ACCEPTED,
        &json!({"success": true, "uuid": item["uuid"], "status": item["status"]}),
    ))
}

/// `POST /edit`.
pub(super) fn edit_create(sh: &Arc<Shared>, req: &Req) -> R {
    let fields = req.fields()?;
    let (secs, _) = upload(req, &["input_audio", "file"])
        .ok_or_else(|| bad_field("input_audio", "is required"))?;
    let mut data = job_data(fields, &["input_audio", "file"]);
    data.insert("duration_seconds".into(), json!(secs));
    let job = Job::new(Kind::Edit, new_id(), job_duration(sh), data);
    Ok(ok_item(jobs::submit(sh, job)))
}

/// `media_type` from the URL's extension: video, image, else audio.
pub fn guess_media_type(url: &str) -> &'static str {
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_ascii_lowercase();
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "mp4" | "mov" | "mkv" | "webm" | "avi" => "video",
        "png" | "jpg" | "jpeg" | "webp" | "gif" => "image",
        _ => "audio",
    }
}

/// Detect, intelligence and watermark jobs: JSON with a required `url`.
pub(super) fn url_job(sh: &Arc<Shared>, req: &Req, kind: Kind) -> R {
    let fields = req.fields()?;
    let url = required(&fields, "url")?.to_owned();
    let callback = str_field(&fields, "callback_url").map(str::to_owned);
    let media_type = match str_field(&fields, "media_type").map(str::to_ascii_lowercase) {
        Some(m) if matches!(m.as_str(), "audio" | "video" | "image") => m,
        Some(_) => return Err(bad_field("media_type", "must be audio, video or image")),
        None => guess_media_type(&url).to_owned(),
    };
    let tracing = kind == Kind::Detect
        && fields
            .get("audio_source_tracing")
            .is_some_and(|v| matches!(bool_of(v), Value::Bool(true)));
    let mut data = job_data(fields, &[]);
    let image = media_type == "image";
    if matches!(kind, Kind::Detect | Kind::Intelligence) {
        data.insert("media_type".into(), json!(media_type));
        if image {
            data.insert("image_count".into(), json!(1));
        }
    }
    if !image || !matches!(kind, Kind::Detect | Kind::Intelligence) {
        data.insert(
            "duration_seconds".into(),
            json!(jobs::DEFAULT_MEDIA_SECONDS),
        );
    }
    let id = new_id();
    let mut job = Job::new(kind, id.clone(), job_duration(sh), data.clone());
    job.callback = callback;
    let item = jobs::submit(sh, job);
    let mut kinds = vec![kind];
    if tracing {
        let mut tdata = Map::new();
        for k in ["url", "media_type", "duration_seconds"] {
            if let Some(v) = data.get(k) {
                tdata.insert(k.into(), v.clone());
            }
        }
        jobs::submit(
            sh,
            Job::new(Kind::Tracing, id.clone(), job_duration(sh), tdata),
        );
        kinds.push(Kind::Tracing);
    }
    if data.contains_key("duration_seconds") {
        jobs::probe_url(sh, kinds, id, url);
    }
    Ok(ok_item(item))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_type_guess() {
        assert_eq!(guess_media_type("https://x/a.MP4?sig=1"), "video");
        assert_eq!(guess_media_type("https://x/a.jpeg"), "image");
        assert_eq!(guess_media_type("https://x/a.wav"), "audio");
        assert_eq!(guess_media_type("https://x/noext"), "audio");
    }
}
