//! Project clips: creating a clip renders its audio as media and, with a
//! `callback_uri`, posts the clip's webhook after the job duration (the rest
//! of projects and clips is generic CRUD).

use std::sync::Arc;

use serde_json::json;

use super::crud::{new_record, parent};
use super::fields::str_field;
use super::handler::{job_duration, R};
use crate::audio;
use crate::request::Req;
use crate::response::ok_item;
use crate::shared::Shared;

/// `POST /projects/{p}/clips`.
pub(super) fn clip_create(sh: &Arc<Shared>, req: &Req, project: &str) -> R {
    parent(sh, "projects", project, "project")?;
    let fields = req.fields()?;
    let callback = str_field(&fields, "callback_uri").map(str::to_owned);
    let body_text = str_field(&fields, "body").unwrap_or("").to_owned();
    let mut item = new_record(
        json!({"title": "", "body": "", "is_archived": false, "project_uuid": project}),
        fields,
    );
    let id = item["uuid"].as_str().unwrap_or_default().to_owned();
    let spc = sh.config.read().unwrap().seconds_per_char;
    let secs = audio::synth_duration_ms(body_text.chars().count(), spc) as f64 / 1000.0;
    let url = format!("{}/__sim/media/{id}.wav", sh.root);
    item.insert("audio_src".into(), json!(url));
    item.insert("duration_seconds".into(), json!(secs));
    let out = {
        let mut store = sh.store.lock().unwrap();
        store.media.insert(id.clone(), secs);
        store.insert(&format!("projects/{project}/clips"), item)
    };
    if let Some(cb) = callback {
        let (shared, duration) = (sh.clone(), job_duration(sh));
        let payload = json!({
            "id": id,
            "project_id": project,
            "url": url,
            "audio_timestamps": {"graph_chars": [], "graph_times": [], "phon_chars": [], "phon_times": []},
            "issues": [],
        });
        sh.spawn(async move {
            tokio::time::sleep(duration).await;
            let secret = shared.config.read().unwrap().webhook_secret.clone();
            crate::webhook::send(
                &shared,
                cb,
                secret,
                serde_json::to_vec(&payload).unwrap_or_default(),
            );
        });
    }
    Ok(ok_item(out))
}
