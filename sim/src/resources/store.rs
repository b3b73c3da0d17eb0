//! The in-memory store behind one lock: generic record collections keyed by
//! path, jobs, standalone media, billing counters, generated images and
//! OpenAI-style videos, with the stock voices seeded.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use super::fields::obj;
use crate::billing::Billing;
use crate::jobs::model::{self as jobs, Job, Kind};
use crate::openai::responses_store::Responses;
use crate::openai::video::Video;

/// One stored record.
#[derive(Clone, Debug)]
pub struct Record {
    /// Creation order.
    pub seq: u64,
    /// The item as returned.
    pub item: Map<String, Value>,
}

/// All simulator state behind one lock.
#[derive(Debug)]
pub struct Store {
    /// Sequence for creation order.
    pub seq: u64,
    /// Collections: path → id → record.
    pub colls: HashMap<String, HashMap<String, Record>>,
    /// Jobs by kind and id.
    pub jobs: HashMap<(Kind, String), Job>,
    /// Standalone media (voice-design samples, recordings, clips): id → seconds.
    pub media: HashMap<String, f64>,
    /// Usage counters.
    pub billing: Billing,
    /// Generated image ids (served as PNG media).
    pub images: HashSet<String>,
    /// OpenAI-style video jobs.
    pub videos: HashMap<String, Video>,
    /// Anthropic prompt-cache prefixes seen (see [`crate::anthropic::cache`]).
    pub prompt_cache: HashSet<u64>,
    /// Gemini cached contents: name → token count (see [`crate::gemini`]).
    pub cached_contents: HashMap<String, u64>,
    /// Stored responses of OpenAI's Responses API (see [`crate::openai::responses`]).
    pub responses: Responses,
}

/// Ids of the seeded stock voices.
pub const STOCK_VOICES: [&str; 3] = ["stock-voice-1", "stock-voice-2", "stock-voice-3"];

impl Default for Store {
    fn default() -> Self {
        Store::new()
    }
}

impl Store {
    /// A store with the stock voices.
    pub fn new() -> Store {
        let mut s = Store {
            seq: 0,
            colls: HashMap::new(),
            jobs: HashMap::new(),
            media: HashMap::new(),
            billing: Billing::default(),
            images: HashSet::new(),
            videos: HashMap::new(),
            responses: Responses::default(),
            prompt_cache: HashSet::new(),
            cached_contents: HashMap::new(),
        };
        let stock = [("Aria", "en-US"), ("Brooke", "en-GB"), ("Carlos", "es-ES")];
        for (id, (name, lang)) in STOCK_VOICES.iter().zip(stock) {
            let item = json!({
                "uuid": id,
                "name": name,
                "status": "ready",
                "default_language": lang,
                "voice_type": "professional",
                "source": "stock",
                "created_at": "2024-01-01T00:00:00.000Z",
                "updated_at": "2024-01-01T00:00:00.000Z",
            });
            s.insert("voices", obj(item));
        }
        s
    }

    /// Inserts a record (its `uuid` field is the key) and returns it.
    pub fn insert(&mut self, coll: &str, item: Map<String, Value>) -> Value {
        self.seq += 1;
        let id = item
            .get("uuid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let out = Value::Object(item.clone());
        self.colls.entry(coll.to_owned()).or_default().insert(
            id,
            Record {
                seq: self.seq,
                item,
            },
        );
        out
    }

    /// One record.
    pub fn get(&self, coll: &str, id: &str) -> Option<&Map<String, Value>> {
        self.colls.get(coll)?.get(id).map(|r| &r.item)
    }

    /// True when the record exists.
    pub fn exists(&self, coll: &str, id: &str) -> bool {
        self.colls.get(coll).is_some_and(|c| c.contains_key(id))
    }

    /// Records of a collection in creation order.
    pub fn list(&self, coll: &str) -> Vec<&Map<String, Value>> {
        let Some(c) = self.colls.get(coll) else {
            return Vec::new();
        };
        let mut v: Vec<&Record> = c.values().collect();
        v.sort_by_key(|r| r.seq);
        v.into_iter().map(|r| &r.item).collect()
    }

    /// Removes a record and its nested collections; false when unknown.
    pub fn remove(&mut self, coll: &str, id: &str) -> bool {
        let found = self
            .colls
            .get_mut(coll)
            .is_some_and(|c| c.remove(id).is_some());
        if found {
            let prefix = format!("{coll}/{id}/");
            self.colls.retain(|k, _| !k.starts_with(&prefix));
        }
        found
    }

    /// A voice as GET returns it (status follows its build job).
    pub fn voice_item(&self, uuid: &str) -> Option<Value> {
        let mut item = self.get("voices", uuid)?.clone();
        if let Some(job) = self.jobs.get(&(Kind::Voice, uuid.to_owned())) {
            let status = match job.status() {
                jobs::Status::Completed => "ready",
                jobs::Status::Failed => "failed",
                _ => "building",
            };
            item.insert("status".into(), json!(status));
            item.insert(
                "updated_at".into(),
                json!(jobs::timestamp(job.updated_at())),
            );
        }
        Some(Value::Object(item))
    }

    /// A job's item (voice builds render the voice).
    pub fn job_item(&self, kind: Kind, uuid: &str, root: &str) -> Option<Value> {
        if kind == Kind::Voice {
            return self.voice_item(uuid);
        }
        self.jobs
            .get(&(kind, uuid.to_owned()))
            .map(|j| j.item(root))
    }

    /// Seconds of the media `id`: standalone media, or an enhance / edit /
    /// watermark-apply result.
    pub fn media_duration(&self, id: &str) -> Option<f64> {
        if let Some(d) = self.media.get(id) {
            return Some(*d);
        }
        [Kind::Enhance, Kind::Edit, Kind::WatermarkApply]
            .into_iter()
            .find_map(|k| {
                let job = self.jobs.get(&(k, id.to_owned()))?;
                Some(
                    job.data
                        .get("duration_seconds")
                        .and_then(Value::as_f64)
                        .unwrap_or(jobs::DEFAULT_MEDIA_SECONDS),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_nested_delete() {
        let mut s = Store::new();
        assert_eq!(s.list("voices").len(), 3);
        s.insert(
            "voices/stock-voice-1/recordings",
            obj(json!({"uuid": "r1"})),
        );
        assert!(s.exists("voices/stock-voice-1/recordings", "r1"));
        assert!(s.remove("voices", "stock-voice-1"));
        assert!(!s.colls.contains_key("voices/stock-voice-1/recordings"));
        assert!(!s.remove("voices", "stock-voice-1"));
    }
}
