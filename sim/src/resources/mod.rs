//! The provider API: routing of `/api/v2/...` and `/synthesize` to the
//! handlers of the files below.
//!
//! Most resources are plain records in one generic store keyed by collection
//! path (`voices`, `voices/{v}/recordings`, `projects/{p}/clips`,
//! `agents/{a}/tools`, `knowledge_items`, ...); create/update accept any JSON
//! object (or multipart / form fields), store it with `uuid`, `created_at` and
//! `updated_at`; PUT/PATCH merge fields. Deleting a record deletes its nested
//! collections. The asynchronous endpoints create [`jobs`](crate::jobs).
//!
//! Response conventions (upstream.md): `{"success": true, "item": {...}}`;
//! paginated lists `{"success", "page", "num_pages", "page_size", "items"}`
//! (`?page=` 1-based, `?page_size=` default 10, at most 1000);
//! speech-to-text lists `{"success", "items", "meta": {"page", "per_page",
//! "total_pages", "total_items"}}`; agent tool/webhook lists
//! `{"success", "items", "count"}`. Bad input is 400, unknown ids 404.
//!
//! # Layout
//!
//! * this file: routing (which method and path go to which handler);
//! * [`store`]: the in-memory store (records, jobs, media, billing, videos);
//! * `handler`: the handlers' result type and the job duration; `fields`:
//!   body-field helpers and new ids; `crud`: the generic CRUD handlers and
//!   pagination (all shared by the handler groups);
//! * handler groups: `synthesis`, `voices` (and recordings), `design`,
//!   `media_jobs` (speech-to-text, enhance, edit, detect, intelligence,
//!   tracing, watermark), `identity`, `projects` (clips), `agents` (tools,
//!   webhooks, catalogs), `account` (billing usage).

mod account;
mod agents;
mod crud;
mod design;
mod fields;
mod handler;
mod identity;
mod media_jobs;
mod projects;
pub mod store;
mod synthesis;
mod voices;

use std::sync::Arc;

use http::StatusCode;
use serde_json::json;

use crate::jobs::Kind;
use crate::request::Req;
use crate::response::{error, not_found, Resp};
use crate::shared::Shared;

use handler::R;

use crud::{counted_list, crud_create, crud_delete, crud_get, crud_list, crud_update, parent};

pub use media_jobs::guess_media_type;
pub use store::{Record, Store, STOCK_VOICES};
pub use synthesis::render_audio;

/// Routes one provider request.
pub fn route(sh: &Arc<Shared>, req: &Req) -> Resp {
    route_inner(sh, req).unwrap_or_else(|e| e)
}

/// Dispatches on the first path segment to the group's routes.
fn route_inner(sh: &Arc<Shared>, req: &Req) -> R {
    let path = req.path.trim_end_matches('/');
    let method = req.method.as_str();
    if path == "/synthesize" || path == "/api/v2/synthesize" {
        return match method {
            "POST" => synthesis::synthesize(sh, req),
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
    match segs[0] {
        "voices" | "voice-design" => route_voices(sh, req, method, &segs),
        "speech-to-text"
        | "audio_enhancements"
        | "edit"
        | "detect"
        | "intelligence"
        | "intelligences"
        | "audio_source_tracings"
        | "watermark" => route_jobs(sh, req, method, &segs),
        "identity" => route_identity(sh, req, method, &segs),
        "projects" => route_projects(sh, req, method, &segs),
        "agents" | "knowledge_items" => route_agents(sh, req, method, &segs),
        "account" => match (method, segs.as_slice()) {
            ("GET", ["account", "billing_usage"]) => account::billing_usage(sh, req),
            _ => Err(not_found("route")),
        },
        _ => Err(not_found("route")),
    }
}

/// Voices, their recordings, and voice design.
fn route_voices(sh: &Arc<Shared>, req: &Req, method: &str, segs: &[&str]) -> R {
    match (method, segs) {
        ("GET", ["voices"]) => voices::voice_list(sh, req),
        ("POST", ["voices"]) => voices::voice_create(sh, req),
        ("GET", ["voices", v]) => voices::voice_get(sh, v),
        ("PUT" | "PATCH", ["voices", v]) => crud_update(sh, req, "voices", v, "voice"),
        ("DELETE", ["voices", v]) => voices::voice_delete(sh, v),
        ("POST", ["voices", v, "build"]) => voices::voice_build(sh, req, v),
        ("GET", ["voices", v, "recordings"]) => {
            parent(sh, "voices", v, "voice")?;
            crud_list(sh, req, &format!("voices/{v}/recordings"))
        }
        ("POST", ["voices", v, "recordings"]) => voices::recording_create(sh, req, v),
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
        ("POST", ["voice-design"]) => design::voice_design(sh, req),
        ("POST", ["voice-design", d, i, "create_rapid_voice"]) => {
            design::create_rapid_voice(sh, req, d, i)
        }
        _ => Err(not_found("route")),
    }
}

/// The asynchronous job endpoints.
fn route_jobs(sh: &Arc<Shared>, req: &Req, method: &str, segs: &[&str]) -> R {
    use media_jobs::{edit_create, enhance_create, job_get, stt_create, stt_list, url_job};
    match (method, segs) {
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
        _ => Err(not_found("route")),
    }
}

/// Identities and their attachments.
fn route_identity(sh: &Arc<Shared>, req: &Req, method: &str, segs: &[&str]) -> R {
    match (method, segs) {
        ("POST", ["identity", "search"]) => identity::identity_search(sh, req),
        ("POST", ["identity"]) => identity::identity_create(sh, req),
        ("GET", ["identity"]) => crud_list(sh, req, "identity"),
        ("GET", ["identity", id]) => crud_get(sh, "identity", id, "identity"),
        ("DELETE", ["identity", id]) => crud_delete(sh, "identity", id, "identity"),
        ("GET", ["identity", id, "attachments"]) => {
            parent(sh, "identity", id, "identity")?;
            crud_list(sh, req, &format!("identity/{id}/attachments"))
        }
        ("POST", ["identity", id, "attachments"]) => identity::attachment_create(sh, req, id),
        _ => Err(not_found("route")),
    }
}

/// Projects and their clips.
fn route_projects(sh: &Arc<Shared>, req: &Req, method: &str, segs: &[&str]) -> R {
    match (method, segs) {
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
        ("POST", ["projects", p, "clips"]) => projects::clip_create(sh, req, p),
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
        _ => Err(not_found("route")),
    }
}

/// Agents (catalogs, tools, webhooks) and knowledge items.
fn route_agents(sh: &Arc<Shared>, req: &Req, method: &str, segs: &[&str]) -> R {
    use agents::singular;
    match (method, segs) {
        ("GET", ["agents", "capabilities"]) => Ok(agents::capabilities()),
        ("GET", ["agents", "system-tools"]) => Ok(agents::system_tools()),
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
        _ => Err(not_found("route")),
    }
}
