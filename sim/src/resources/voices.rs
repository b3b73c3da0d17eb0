//! Voices (list, get, create, delete, build) and their recordings (create
//! with an uploaded file; the rest of recordings CRUD is generic).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::crud::{new_record, paginate, parent};
use super::fields::{required, str_field};
use super::handler::R;
use crate::audio;
use crate::jobs::{self, Job, Kind};
use crate::request::Req;
use crate::response::{not_found, ok, ok_item};
use crate::shared::Shared;

/// `GET /voices`: the paginated voices (status following their build jobs).
pub(super) fn voice_list(sh: &Arc<Shared>, req: &Req) -> R {
    let store = sh.store.lock().unwrap();
    let ids: Vec<String> = store
        .list("voices")
        .iter()
        .filter_map(|i| i.get("uuid")?.as_str().map(str::to_owned))
        .collect();
    let items: Vec<Value> = ids.iter().filter_map(|id| store.voice_item(id)).collect();
    paginate(req, items, "page_size")
}

/// `GET /voices/{v}`.
pub(super) fn voice_get(sh: &Arc<Shared>, v: &str) -> R {
    let store = sh.store.lock().unwrap();
    store
        .voice_item(v)
        .map(ok_item)
        .ok_or_else(|| not_found("voice"))
}

/// `DELETE /voices/{v}`: the voice, its recordings and its build job.
pub(super) fn voice_delete(sh: &Arc<Shared>, v: &str) -> R {
    let mut store = sh.store.lock().unwrap();
    if !store.remove("voices", v) {
        return Err(not_found("voice"));
    }
    store.jobs.remove(&(Kind::Voice, v.to_owned()));
    Ok(ok(json!({"success": true})))
}

/// `POST /voices`: a draft voice (`name` required).
pub(super) fn voice_create(sh: &Arc<Shared>, req: &Req) -> R {
    let fields = req.fields()?;
    let name = required(&fields, "name")?.to_owned();
    let lang = str_field(&fields, "language").unwrap_or("en-US").to_owned();
    let mut item = new_record(
        json!({"status": "draft", "default_language": lang, "voice_type": "professional"}),
        fields,
    );
    item.insert("name".into(), json!(name));
    item.insert("status".into(), json!("draft"));
    Ok(ok_item(sh.store.lock().unwrap().insert("voices", item)))
}

/// `POST /voices/{v}/build`: starts the build job.
pub(super) fn voice_build(sh: &Arc<Shared>, req: &Req, uuid: &str) -> R {
    let fields = req.fields()?;
    let duration = sh.config.read().unwrap().job_duration;
    let item = {
        let mut store = sh.store.lock().unwrap();
        let voice = store
            .get("voices", uuid)
            .ok_or_else(|| not_found("voice"))?;
        let mut job = Job::new(Kind::Voice, uuid.to_owned(), duration, Map::new());
        job.callback = str_field(voice, "callback_uri").map(str::to_owned);
        if let Some(fill) = fields.get("fill") {
            job.data.insert("_fill".into(), fill.clone());
        }
        store.seq += 1;
        job.seq = store.seq;
        store.jobs.insert((Kind::Voice, uuid.to_owned()), job);
        store.voice_item(uuid)
    };
    jobs::schedule(sh, Kind::Voice, uuid.to_owned());
    Ok(ok_item(item.unwrap_or(Value::Null)))
}

/// `POST /voices/{v}/recordings`.
pub(super) fn recording_create(sh: &Arc<Shared>, req: &Req, voice: &str) -> R {
    parent(sh, "voices", voice, "voice")?;
    let fields = req.fields()?;
    let mut item = new_record(
        json!({"name": "recording", "text": "", "emotion": "neutral", "is_active": true, "voice_uuid": voice}),
        fields,
    );
    let mut store = sh.store.lock().unwrap();
    if let Some(file) = req
        .part("file")
        .filter(|p| p.filename.is_some() || !p.data.is_empty())
    {
        let id = item["uuid"].as_str().unwrap_or_default().to_owned();
        let secs = audio::probe_duration(&file.data);
        store.media.insert(id.clone(), secs);
        item.insert(
            "audio_src".into(),
            json!(format!("{}/__sim/media/{id}.wav", sh.root)),
        );
        item.insert("duration_seconds".into(), json!(secs));
        item.insert("file_name".into(), json!(file.filename));
    }
    Ok(ok_item(
        store.insert(&format!("voices/{voice}/recordings"), item),
    ))
}
