//! Voice design: candidate samples from a prompt, and rapid voices created
//! from a chosen candidate.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::crud::new_record;
use super::fields::{new_id, required, str_field};
use super::handler::R;
use crate::audio;
use crate::request::Req;
use crate::response::{bad_field, not_found, ok, ok_item};
use crate::shared::Shared;

/// `POST /voice-design`: three candidate samples for `user_prompt`.
pub(super) fn voice_design(sh: &Arc<Shared>, req: &Req) -> R {
    let fields = req.fields()?;
    let prompt = required(&fields, "user_prompt")?.to_owned();
    let spc = sh.config.read().unwrap().seconds_per_char;
    let secs = match str_field(&fields, "sample_text") {
        Some(t) => audio::synth_duration_ms(t.chars().count(), spc) as f64 / 1000.0,
        None => 3.0,
    };
    let mut store = sh.store.lock().unwrap();
    let candidates: Vec<Value> = (0..3)
        .map(|i| {
            let id = new_id();
            store.media.insert(id.clone(), secs);
            json!({"uuid": id, "voice_sample_index": i, "audio_url": format!("{}/__sim/media/{id}.wav", sh.root)})
        })
        .collect();
    let mut item = new_record(json!({}), fields);
    item.insert("user_prompt".into(), json!(prompt));
    item.insert("voice_candidates".into(), Value::Array(candidates));
    store.billing.add("voice_design", 1.0);
    Ok(ok_item(store.insert("voice_design", item)))
}

/// `POST /voice-design/{d}/{i}/create_rapid_voice`.
pub(super) fn create_rapid_voice(sh: &Arc<Shared>, req: &Req, design: &str, index: &str) -> R {
    let fields = req.fields()?;
    let mut store = sh.store.lock().unwrap();
    let d = store
        .get("voice_design", design)
        .ok_or_else(|| not_found("voice design"))?;
    let count = d
        .get("voice_candidates")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let idx: usize = index
        .parse()
        .map_err(|_| bad_field("candidate_index", "must be a non-negative integer"))?;
    if idx >= count {
        return Err(bad_field("candidate_index", "is out of range"));
    }
    let name = str_field(&fields, "voice_name")
        .or_else(|| str_field(&fields, "name"))
        .ok_or_else(|| bad_field("voice_name", "is required"))?
        .to_owned();
    let item = new_record(
        json!({
            "name": name,
            "status": "ready",
            "default_language": "en-US",
            "voice_type": "rapid",
            "voice_design_uuid": design,
            "voice_sample_index": idx,
        }),
        Map::new(),
    );
    let voice = store.insert("voices", item);
    Ok(ok(
        json!({"success": true, "voice_uuid": voice["uuid"], "item": voice}),
    ))
}
