//! The provider API: routing of `/api/v2/...` and `/synthesize`, the in-memory
//! store, and the handlers.
//!
//! Most resources are plain records in one generic store keyed by collection
//! path (`voices`, `voices/{v}/recordings`, `projects/{p}/clips`,
//! `agents/{a}/tools`, `knowledge_items`, ...); create/update accept any JSON
//! object (or multipart / form fields), store it with `uuid`, `created_at` and
//! `updated_at`; PUT/PATCH merge fields. Deleting a record deletes its nested
//! collections. The asynchronous endpoints create [`jobs`].
//!
//! Response conventions (upstream.md): `{"success": true, "item": {...}}`;
//! paginated lists `{"success", "page", "num_pages", "page_size", "items"}`
//! (`?page=` 1-based, `?page_size=` default 10, at most 1000);
//! speech-to-text lists `{"success", "items", "meta": {"page", "per_page",
//! "total_pages", "total_items"}}`; agent tool/webhook lists
//! `{"success", "items", "count"}`. Bad input is 400, unknown ids 404.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use chrono::NaiveDate;
use http::StatusCode;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::audio;
use crate::billing::Billing;
use crate::jobs::{self, Job, Kind};
use crate::server::{
    bad_field, error, full, json_response, not_found, ok, ok_item, AudioKey, Rendered, Req, Resp,
    Shared,
};

type R = Result<Resp, Resp>;

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
    pub videos: HashMap<String, crate::openai::Video>,
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

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn str_field<'a>(f: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    f.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn required<'a>(f: &'a Map<String, Value>, key: &str) -> Result<&'a str, Resp> {
    str_field(f, key).ok_or_else(|| bad_field(key, "is required"))
}

/// Integer from a JSON number or numeric string.
fn int_field(f: &Map<String, Value>, key: &str) -> Result<Option<i64>, Resp> {
    match f.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| bad_field(key, "must be an integer")),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| bad_field(key, "must be an integer")),
        Some(_) => Err(bad_field(key, "must be an integer")),
    }
}

fn bool_of(v: &Value) -> Value {
    match v {
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => json!(true),
            "false" | "0" | "no" => json!(false),
            _ => v.clone(),
        },
        _ => v.clone(),
    }
}

/// Routes one provider request.
pub fn route(sh: &Arc<Shared>, req: &Req) -> Resp {
    route_inner(sh, req).unwrap_or_else(|e| e)
}

fn route_inner(sh: &Arc<Shared>, req: &Req) -> R {
    let path = req.path.trim_end_matches('/');
    let method = req.method.as_str();
    if path == "/synthesize" || path == "/api/v2/synthesize" {
        return match method {
            "POST" => synthesize(sh, req),
            _ => Err(error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method not allowed",
                None,
            )),
        };
    }
    let Some(rest) = path.strip_prefix("/api/v2/") else {
        return Err(not_found("route"));
    };
    let segs: Vec<&str> = rest.split('/').collect();
    match (method, segs.as_slice()) {
        // Voices.
        ("GET", ["voices"]) => {
            let store = sh.store.lock().unwrap();
            let ids: Vec<String> = store
                .list("voices")
                .iter()
                .filter_map(|i| i.get("uuid")?.as_str().map(str::to_owned))
                .collect();
            let items: Vec<Value> = ids.iter().filter_map(|id| store.voice_item(id)).collect();
            paginate(req, items, "page_size")
        }
        ("POST", ["voices"]) => voice_create(sh, req),
        ("GET", ["voices", v]) => {
            let store = sh.store.lock().unwrap();
            store
                .voice_item(v)
                .map(ok_item)
                .ok_or_else(|| not_found("voice"))
        }
        ("PUT" | "PATCH", ["voices", v]) => crud_update(sh, req, "voices", v, "voice"),
        ("DELETE", ["voices", v]) => {
            let mut store = sh.store.lock().unwrap();
            if !store.remove("voices", v) {
                return Err(not_found("voice"));
            }
            store.jobs.remove(&(Kind::Voice, (*v).to_owned()));
            Ok(ok(json!({"success": true})))
        }
        ("POST", ["voices", v, "build"]) => voice_build(sh, req, v),
        ("GET", ["voices", v, "recordings"]) => {
            parent(sh, "voices", v, "voice")?;
            crud_list(sh, req, &format!("voices/{v}/recordings"))
        }
        ("POST", ["voices", v, "recordings"]) => recording_create(sh, req, v),
        ("GET", ["voices", v, "recordings", r]) => {
            parent(sh, "voices", v, "voice")?;
            crud_get(sh, &format!("voices/{v}/recordings"), r, "recording")
        }
        ("PUT" | "PATCH", ["voices", v, "recordings", r]) => {
            parent(sh, "voices", v, "voice")?;
            crud_update(sh, req, &format!("voices/{v}/recordings"), r, "recording")
        }
        ("DELETE", ["voices", v, "recordings", r]) => {
            parent(sh, "voices", v, "voice")?;
            crud_delete(sh, &format!("voices/{v}/recordings"), r, "recording")
        }
        // Voice design.
        ("POST", ["voice-design"]) => voice_design(sh, req),
        ("POST", ["voice-design", d, i, "create_rapid_voice"]) => create_rapid_voice(sh, req, d, i),
        // Speech-to-text.
        ("POST", ["speech-to-text"]) => stt_create(sh, req),
        ("GET", ["speech-to-text"]) => stt_list(sh, req),
        ("GET", ["speech-to-text", id]) => job_get(sh, Kind::Stt, id),
        // Enhance, edit.
        ("POST", ["audio_enhancements"]) => enhance_create(sh, req),
        ("GET", ["audio_enhancements", id]) => job_get(sh, Kind::Enhance, id),
        ("POST", ["edit"]) => edit_create(sh, req),
        ("GET", ["edit", id]) => job_get(sh, Kind::Edit, id),
        // Detect, intelligence, tracing.
        ("POST", ["detect"]) => url_job(sh, req, Kind::Detect),
        ("GET", ["detect", id]) => job_get(sh, Kind::Detect, id),
        ("POST", ["intelligence"]) => url_job(sh, req, Kind::Intelligence),
        ("GET", ["intelligences" | "intelligence", id]) => job_get(sh, Kind::Intelligence, id),
        ("GET", ["audio_source_tracings", id]) => job_get(sh, Kind::Tracing, id),
        // Watermark.
        ("POST", ["watermark", "apply"]) => url_job(sh, req, Kind::WatermarkApply),
        ("GET", ["watermark", "apply", id, "result"] | ["watermark", "apply", id]) => {
            job_get(sh, Kind::WatermarkApply, id)
        }
        ("POST", ["watermark", "detect"]) => url_job(sh, req, Kind::WatermarkDetect),
        ("GET", ["watermark", "detect", id, "result"] | ["watermark", "detect", id]) => {
            job_get(sh, Kind::WatermarkDetect, id)
        }
        // Identity.
        ("POST", ["identity", "search"]) => identity_search(sh, req),
        ("POST", ["identity"]) => identity_create(sh, req),
        ("GET", ["identity"]) => crud_list(sh, req, "identity"),
        ("GET", ["identity", id]) => crud_get(sh, "identity", id, "identity"),
        ("DELETE", ["identity", id]) => crud_delete(sh, "identity", id, "identity"),
        ("GET", ["identity", id, "attachments"]) => {
            parent(sh, "identity", id, "identity")?;
            crud_list(sh, req, &format!("identity/{id}/attachments"))
        }
        ("POST", ["identity", id, "attachments"]) => attachment_create(sh, req, id),
        // Projects and clips.
        ("GET", ["projects"]) => crud_list(sh, req, "projects"),
        ("POST", ["projects"]) => crud_create(
            sh,
            req,
            "projects",
            json!({"name": "", "description": "", "is_collaborative": false, "is_archived": false}),
        ),
        ("GET", ["projects", p]) => crud_get(sh, "projects", p, "project"),
        ("PUT" | "PATCH", ["projects", p]) => crud_update(sh, req, "projects", p, "project"),
        ("DELETE", ["projects", p]) => crud_delete(sh, "projects", p, "project"),
        ("GET", ["projects", p, "clips"]) => {
            parent(sh, "projects", p, "project")?;
            crud_list(sh, req, &format!("projects/{p}/clips"))
        }
        ("POST", ["projects", p, "clips"]) => clip_create(sh, req, p),
        ("GET", ["projects", p, "clips", c]) => {
            parent(sh, "projects", p, "project")?;
            crud_get(sh, &format!("projects/{p}/clips"), c, "clip")
        }
        ("PUT" | "PATCH", ["projects", p, "clips", c]) => {
            parent(sh, "projects", p, "project")?;
            crud_update(sh, req, &format!("projects/{p}/clips"), c, "clip")
        }
        ("DELETE", ["projects", p, "clips", c]) => {
            parent(sh, "projects", p, "project")?;
            crud_delete(sh, &format!("projects/{p}/clips"), c, "clip")
        }
        // Agents.
        ("GET", ["agents", "capabilities"]) => Ok(ok_item(json!({
            "languages": ["en-US", "en-GB", "es-ES", "fr-FR", "de-DE"],
            "llm_models": ["gpt-4o-mini", "claude-3-5-haiku"],
            "tts_voices": STOCK_VOICES,
            "stt_providers": ["resemble"],
            "max_tools": 32,
        }))),
        ("GET", ["agents", "system-tools"]) => Ok(ok(json!({
            "success": true,
            "items": [
                {"name": "end_call", "description": "End the conversation"},
                {"name": "transfer_call", "description": "Transfer to a phone number"},
                {"name": "knowledge_search", "description": "Search the knowledge base"},
            ],
            "count": 3,
        }))),
        ("GET", ["agents"]) => crud_list(sh, req, "agents"),
        ("POST", ["agents"]) => crud_create(sh, req, "agents", json!({})),
        ("GET", ["agents", a]) => crud_get(sh, "agents", a, "agent"),
        ("PUT" | "PATCH", ["agents", a]) => crud_update(sh, req, "agents", a, "agent"),
        ("DELETE", ["agents", a]) => crud_delete(sh, "agents", a, "agent"),
        ("GET", ["agents", a, sub @ ("tools" | "webhooks")]) => {
            parent(sh, "agents", a, "agent")?;
            counted_list(sh, req, &format!("agents/{a}/{sub}"))
        }
        ("POST", ["agents", a, sub @ ("tools" | "webhooks")]) => {
            parent(sh, "agents", a, "agent")?;
            crud_create(
                sh,
                req,
                &format!("agents/{a}/{sub}"),
                json!({"agent_uuid": a}),
            )
        }
        ("GET", ["agents", a, sub @ ("tools" | "webhooks"), id]) => {
            parent(sh, "agents", a, "agent")?;
            crud_get(sh, &format!("agents/{a}/{sub}"), id, singular(sub))
        }
        ("PUT" | "PATCH", ["agents", a, sub @ ("tools" | "webhooks"), id]) => {
            parent(sh, "agents", a, "agent")?;
            crud_update(sh, req, &format!("agents/{a}/{sub}"), id, singular(sub))
        }
        ("DELETE", ["agents", a, sub @ ("tools" | "webhooks"), id]) => {
            parent(sh, "agents", a, "agent")?;
            crud_delete(sh, &format!("agents/{a}/{sub}"), id, singular(sub))
        }
        ("GET", ["knowledge_items"]) => crud_list(sh, req, "knowledge_items"),
        ("POST", ["knowledge_items"]) => crud_create(sh, req, "knowledge_items", json!({})),
        ("GET", ["knowledge_items", k]) => crud_get(sh, "knowledge_items", k, "knowledge item"),
        ("PUT" | "PATCH", ["knowledge_items", k]) => {
            crud_update(sh, req, "knowledge_items", k, "knowledge item")
        }
        ("DELETE", ["knowledge_items", k]) => {
            crud_delete(sh, "knowledge_items", k, "knowledge item")
        }
        // Billing.
        ("GET", ["account", "billing_usage"]) => billing_usage(sh, req),
        _ => Err(not_found("route")),
    }
}

fn singular(sub: &str) -> &'static str {
    if sub == "tools" {
        "agent tool"
    } else {
        "agent webhook"
    }
}

// ---------------------------------------------------------------- generic CRUD

fn parent(sh: &Arc<Shared>, coll: &str, id: &str, what: &str) -> Result<(), Resp> {
    if sh.store.lock().unwrap().exists(coll, id) {
        Ok(())
    } else {
        Err(not_found(what))
    }
}

/// `(page, page_size)` from the query; `size_key` names the size parameter.
fn page_params(req: &Req, size_key: &str) -> Result<(usize, usize), Resp> {
    let parse = |key: &str, default: usize| -> Result<usize, Resp> {
        match req.query_param(key) {
            None => Ok(default),
            Some(s) if s.is_empty() => Ok(default),
            Some(s) => match s.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(bad_field(key, "must be a positive integer")),
            },
        }
    };
    let size = match req.query_param(size_key) {
        Some(_) => parse(size_key, 10)?,
        None => parse("page_size", 10)?,
    };
    Ok((parse("page", 1)?, size.min(1000)))
}

fn page_slice(items: Vec<Value>, page: usize, size: usize) -> Vec<Value> {
    items
        .into_iter()
        .skip((page - 1).saturating_mul(size))
        .take(size)
        .collect()
}

fn paginate(req: &Req, items: Vec<Value>, size_key: &str) -> R {
    let (page, size) = page_params(req, size_key)?;
    let num_pages = items.len().div_ceil(size).max(1);
    let items = page_slice(items, page, size);
    Ok(ok(
        json!({"success": true, "page": page, "num_pages": num_pages, "page_size": size, "items": items}),
    ))
}

fn crud_list(sh: &Arc<Shared>, req: &Req, coll: &str) -> R {
    let items: Vec<Value> = sh
        .store
        .lock()
        .unwrap()
        .list(coll)
        .into_iter()
        .map(|m| Value::Object(m.clone()))
        .collect();
    paginate(req, items, "page_size")
}

/// `{"success", "items", "count"}` (paged only when `page`/`page_size` are given).
fn counted_list(sh: &Arc<Shared>, req: &Req, coll: &str) -> R {
    let items: Vec<Value> = sh
        .store
        .lock()
        .unwrap()
        .list(coll)
        .into_iter()
        .map(|m| Value::Object(m.clone()))
        .collect();
    let count = items.len();
    let items = if req.query_param("page").is_some() || req.query_param("page_size").is_some() {
        let (page, size) = page_params(req, "page_size")?;
        page_slice(items, page, size)
    } else {
        items
    };
    Ok(ok(json!({"success": true, "items": items, "count": count})))
}

/// New record: `defaults`, then the request fields, then uuid and timestamps.
fn new_record(defaults: Value, fields: Map<String, Value>) -> Map<String, Value> {
    let mut item = obj(defaults);
    for (k, v) in fields {
        let v = if k.starts_with("is_") { bool_of(&v) } else { v };
        item.insert(k, v);
    }
    let now = jobs::now();
    item.insert("uuid".into(), json!(new_id()));
    item.insert("created_at".into(), json!(now));
    item.insert("updated_at".into(), json!(now));
    item
}

fn crud_create(sh: &Arc<Shared>, req: &Req, coll: &str, defaults: Value) -> R {
    let fields = req.fields()?;
    let item = new_record(defaults, fields);
    Ok(ok_item(sh.store.lock().unwrap().insert(coll, item)))
}

fn crud_get(sh: &Arc<Shared>, coll: &str, id: &str, what: &str) -> R {
    let store = sh.store.lock().unwrap();
    store
        .get(coll, id)
        .map(|m| ok_item(Value::Object(m.clone())))
        .ok_or_else(|| not_found(what))
}

fn crud_update(sh: &Arc<Shared>, req: &Req, coll: &str, id: &str, what: &str) -> R {
    let fields = req.fields()?;
    let mut guard = sh.store.lock().unwrap();
    let store = &mut *guard;
    let rec = store
        .colls
        .get_mut(coll)
        .and_then(|c| c.get_mut(id))
        .ok_or_else(|| not_found(what))?;
    for (k, v) in fields {
        if k != "uuid" && k != "created_at" {
            let v = if k.starts_with("is_") { bool_of(&v) } else { v };
            rec.item.insert(k, v);
        }
    }
    rec.item.insert("updated_at".into(), json!(jobs::now()));
    let item = Value::Object(rec.item.clone());
    if coll == "voices" {
        return Ok(ok_item(store.voice_item(id).unwrap_or(item)));
    }
    Ok(ok_item(item))
}

fn crud_delete(sh: &Arc<Shared>, coll: &str, id: &str, what: &str) -> R {
    if sh.store.lock().unwrap().remove(coll, id) {
        Ok(ok(json!({"success": true})))
    } else {
        Err(not_found(what))
    }
}

// ---------------------------------------------------------------- synthesis

#[derive(Serialize)]
struct Timestamps {
    graph_chars: Vec<String>,
    graph_times: Vec<[f64; 2]>,
    phon_chars: Vec<String>,
    phon_times: Vec<[f64; 2]>,
}

#[derive(Serialize)]
/// The synthesis answer minus `success` and `audio_content`, which are
/// spliced in front without re-scanning the (large, escape-free) base64.
struct SynthOut<'a> {
    duration: f64,
    synth_duration: f64,
    output_format: &'a str,
    sample_rate: u32,
    audio_timestamps: Timestamps,
    issues: Vec<Value>,
}

/// Renders (or reuses) audio of `duration_ms`.
pub fn render_audio(
    sh: &Shared,
    mp3: bool,
    sample_rate: u32,
    bits: u16,
    duration_ms: u64,
) -> Arc<Rendered> {
    use base64::Engine as _;
    let key: AudioKey = (mp3, sample_rate, bits, duration_ms);
    if let Some(r) = sh.audio_cache.lock().unwrap().get(&key) {
        return r.clone();
    }
    let (bytes, duration, rate) = if mp3 {
        let (b, secs, rate) = audio::mp3_silence(duration_ms, sample_rate);
        (b, audio::round_ms(secs), rate)
    } else {
        (
            audio::wav_tone(duration_ms, sample_rate, bits),
            duration_ms as f64 / 1000.0,
            sample_rate,
        )
    };
    let rendered = Arc::new(Rendered {
        base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
        bytes: bytes.into(),
        duration,
        sample_rate: rate,
    });
    let mut cache = sh.audio_cache.lock().unwrap();
    if cache.len() >= 256 {
        cache.clear();
    }
    cache.insert(key, rendered.clone());
    rendered
}

fn synthesize(sh: &Arc<Shared>, req: &Req) -> R {
    let started = Instant::now();
    let f = req.fields()?;
    let voice = required(&f, "voice_uuid")?;
    let data = match f.get("data") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.as_str(),
        _ => return Err(bad_field("data", "is required")),
    };
    let mp3 = match f.get("output_format") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("wav") => false,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("mp3") => true,
        _ => return Err(bad_field("output_format", "must be wav or mp3")),
    };
    let bits = match f
        .get("precision")
        .and_then(Value::as_str)
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("PCM_16") | Some("MULAW") => 16,
        Some("PCM_24") => 24,
        Some("PCM_32") => 32,
        Some(_) => {
            return Err(bad_field(
                "precision",
                "must be one of MULAW, PCM_16, PCM_24, PCM_32",
            ))
        }
    };
    let sample_rate = match int_field(&f, "sample_rate")? {
        None => 22050,
        Some(n) if (8000..=48000).contains(&n) => n as u32,
        Some(_) => return Err(bad_field("sample_rate", "must be between 8000 and 48000")),
    };
    if !sh.store.lock().unwrap().exists("voices", voice) {
        return Err(not_found("voice"));
    }
    let spc = sh.config.read().unwrap().seconds_per_char;
    let chars: Vec<char> = data.chars().collect();
    let rendered = render_audio(
        sh,
        mp3,
        sample_rate,
        bits,
        audio::synth_duration_ms(chars.len(), spc),
    );
    sh.store
        .lock()
        .unwrap()
        .billing
        .add("synth", rendered.duration);
    let step = rendered.duration / chars.len() as f64;
    let timestamps = Timestamps {
        graph_chars: chars.iter().map(char::to_string).collect(),
        graph_times: (0..chars.len())
            .map(|i| {
                [
                    audio::round_ms(i as f64 * step),
                    audio::round_ms((i + 1) as f64 * step),
                ]
            })
            .collect(),
        phon_chars: Vec::new(),
        phon_times: Vec::new(),
    };
    let out = SynthOut {
        duration: rendered.duration,
        synth_duration: audio::round_ms(started.elapsed().as_secs_f64()),
        output_format: if mp3 { "mp3" } else { "wav" },
        sample_rate: rendered.sample_rate,
        audio_timestamps: timestamps,
        issues: Vec::new(),
    };
    let rest = serde_json::to_vec(&out).expect("serializable");
    let mut body = Vec::with_capacity(rendered.base64.len() + rest.len() + 48);
    body.extend_from_slice(br#"{"success":true,"audio_content":""#);
    body.extend_from_slice(rendered.base64.as_bytes());
    body.extend_from_slice(b"\",");
    body.extend_from_slice(&rest[1..]);
    let mut r = full(body);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

// ---------------------------------------------------------------- voices

fn voice_create(sh: &Arc<Shared>, req: &Req) -> R {
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

fn voice_build(sh: &Arc<Shared>, req: &Req, uuid: &str) -> R {
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

fn recording_create(sh: &Arc<Shared>, req: &Req, voice: &str) -> R {
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

// ---------------------------------------------------------------- voice design

fn voice_design(sh: &Arc<Shared>, req: &Req) -> R {
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

fn create_rapid_voice(sh: &Arc<Shared>, req: &Req, design: &str, index: &str) -> R {
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

// ---------------------------------------------------------------- jobs

fn job_get(sh: &Arc<Shared>, kind: Kind, id: &str) -> R {
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

fn job_duration(sh: &Shared) -> std::time::Duration {
    sh.config.read().unwrap().job_duration
}

/// The uploaded file among `names`, as `(duration_seconds, file_name)`.
fn upload(req: &Req, names: &[&str]) -> Option<(f64, Option<String>)> {
    names
        .iter()
        .find_map(|n| req.part(n))
        .map(|p| (audio::probe_duration(&p.data), p.filename.clone()))
}

fn stt_create(sh: &Arc<Shared>, req: &Req) -> R {
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

fn stt_list(sh: &Arc<Shared>, req: &Req) -> R {
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

fn enhance_create(sh: &Arc<Shared>, req: &Req) -> R {
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

fn edit_create(sh: &Arc<Shared>, req: &Req) -> R {
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
fn url_job(sh: &Arc<Shared>, req: &Req, kind: Kind) -> R {
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

// ---------------------------------------------------------------- identity

fn identity_create(sh: &Arc<Shared>, req: &Req) -> R {
    let fields = req.fields()?;
    required(&fields, "name")?;
    let item = new_record(json!({}), fields);
    let mut store = sh.store.lock().unwrap();
    store.billing.add("identity_enroll", 1.0);
    Ok(ok_item(store.insert("identity", item)))
}

fn attachment_create(sh: &Arc<Shared>, req: &Req, identity: &str) -> R {
    parent(sh, "identity", identity, "identity")?;
    let fields = req.fields()?;
    let mut item = new_record(json!({"identity_uuid": identity}), fields);
    if let Some(p) = req
        .parts
        .as_ref()
        .and_then(|ps| ps.iter().find(|p| p.filename.is_some()))
    {
        item.insert("file_name".into(), json!(p.filename));
        item.insert("size".into(), json!(p.data.len()));
        item.insert(
            "duration_seconds".into(),
            json!(audio::probe_duration(&p.data)),
        );
    }
    Ok(ok_item(
        sh.store
            .lock()
            .unwrap()
            .insert(&format!("identity/{identity}/attachments"), item),
    ))
}

fn identity_search(sh: &Arc<Shared>, req: &Req) -> R {
    let fields = req.fields()?;
    let url = required(&fields, "url")?.to_owned();
    let top_k = match int_field(&fields, "top_k")? {
        None => 10,
        Some(k) if (1..=100).contains(&k) => k as usize,
        Some(_) => return Err(bad_field("top_k", "must be between 1 and 100")),
    };
    let mut store = sh.store.lock().unwrap();
    let mut hits: Vec<(f64, String, Value)> = store
        .list("identity")
        .into_iter()
        .map(|i| {
            let id = i
                .get("uuid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let distance = (jobs::fnv(&format!("{url}|{id}")) * 1000.0).round() / 1000.0;
            (distance, id, i.get("name").cloned().unwrap_or(Value::Null))
        })
        .collect();
    hits.sort_by(|a, b| a.0.total_cmp(&b.0));
    let item: Map<String, Value> = hits
        .into_iter()
        .take(top_k)
        .map(|(d, id, name)| {
            (
                id,
                json!({"name": name, "distance": d, "score_type": "cosine_distance"}),
            )
        })
        .collect();
    store.billing.add("identity_search", 1.0);
    Ok(ok_item(Value::Object(item)))
}

// ---------------------------------------------------------------- clips

fn clip_create(sh: &Arc<Shared>, req: &Req, project: &str) -> R {
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

// ---------------------------------------------------------------- billing

fn billing_usage(sh: &Arc<Shared>, req: &Req) -> R {
    let date = |key: &str| -> Result<NaiveDate, Resp> {
        let s = req
            .query_param(key)
            .ok_or_else(|| bad_field(key, "is required"))?;
        NaiveDate::parse_from_str(&s, "%Y-%m-%d").map_err(|_| bad_field(key, "must be YYYY-MM-DD"))
    };
    let (start, end) = (date("start_date")?, date("end_date")?);
    if start > end {
        return Err(bad_field("end_date", "must not be before start_date"));
    }
    let items = sh.store.lock().unwrap().billing.range(start, end);
    Ok(ok(
        json!({"success": true, "start_date": start.to_string(), "end_date": end.to_string(), "items": items}),
    ))
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
