//! OpenAPI `links` of the document: from each operation that creates
//! something to every operation that takes its id, derived from the table
//! (no list of operations is written anywhere).
//!
//! What a row creates, and where the answer names it ([`made`]):
//!
//! * a `proxy`/`fields` `POST` row with a `resource` kind it does not
//!   address through a path parameter (`POST /voices`, `POST
//!   /voices/{voice_uuid}/recordings`): a resource of that kind; the
//!   gateway passes the upstream's answer through, whose one-object
//!   convention is `{"success": true, "item": {"uuid": ...}}` (upstream.md,
//!   "Conventions"), so the id is at `/item/uuid`;
//! * a `job_submit` row: a job of its `job` kind, at `/job_id` (the
//!   gateway's field);
//! * `video_submit`: a video job, at `/job_id`; `key_create`: a key, at
//!   `/id`; `upload`: an object whose presigned URL (`/url`) is an
//!   `audio_url` the rows with a `file_field` fetch;
//! * `register`: an account, at `/id` (the admin rows' `{user_id}`), whose
//!   username and password (from the request) a `login` takes; `login`: a
//!   refresh token (`/refresh_token`) that `token_refresh` takes;
//! * `file_upload`: a file, at `/id`, that the file rows take as
//!   `{file_id}` and `batch_create` as `input_file_id` (its other required
//!   fields with fixed values take the first); `batch_create`: a batch, at
//!   `/id`, that `batch_get` and `batch_cancel` take.
//!
//! Who takes it ([`takers`]): for an owned kind, every row with an owner
//! check of that kind (`owner_checks`: path parameters named in
//! `[resources]` or addressed as the row's own `resource`, query
//! parameters, body fields); for a job kind, its `job_get` row; video jobs
//! the `video_get` and `video_cancel` rows; keys `key_revoke`. A target's
//! other path parameters that the creating row also has (the project of a
//! clip) come from the creating request (`$request.path.<name>`).

use serde_json::{json, Map, Value};

use crate::table::*;

/// What a creating row makes.
enum Made<'a> {
    /// A user-owned resource of this kind.
    Owned(&'a str),
    /// A job of this job kind.
    Job(&'a str),
    VideoJob,
    Key,
    Upload,
    /// A registered account: its id, and the credentials it was made with.
    Account,
    /// A login's token pair.
    Tokens,
    /// A file of the Files API.
    File,
    /// A batch of the Batch API.
    Batch,
}

/// What `row` creates and the JSON pointer of its id in the answer.
fn made(row: &Row) -> Option<(Made<'_>, &'static str)> {
    match row.mode {
        Mode::Proxy | Mode::Fields if row.method == Method::Post => {
            let kind = row.resource.as_deref()?;
            let addresses_own = row
                .owner_checks
                .iter()
                .any(|(p, k)| k == kind && row.params.contains(p));
            (!addresses_own).then_some((Made::Owned(kind), "/item/uuid"))
        }
        Mode::JobSubmit => Some((Made::Job(row.job.as_deref()?), "/job_id")),
        Mode::VideoSubmit => Some((Made::VideoJob, "/job_id")),
        Mode::KeyCreate => Some((Made::Key, "/id")),
        Mode::Upload => Some((Made::Upload, "/url")),
        Mode::Register => Some((Made::Account, "/id")),
        Mode::Login => Some((Made::Tokens, "/refresh_token")),
        Mode::FileUpload => Some((Made::File, "/id")),
        Mode::BatchCreate => Some((Made::Batch, "/id")),
        _ => None,
    }
}

/// Where a target row takes the made id: a path or query parameter, or a
/// body field (inside `fields` on a `fields` row).
enum Slot<'a> {
    Path(&'a str),
    Query(&'a str),
    Body(&'a str),
    /// A login takes the username and password its registration was sent.
    Credentials,
}

/// The rows that take what `made` makes, each with where it takes it.
fn takers<'t>(table: &'t Table, source: &Row, made: &Made<'_>) -> Vec<(&'t Row, Slot<'t>)> {
    let mut out = Vec::new();
    for t in table.rows.iter().filter(|t| t.id != source.id) {
        let slot = match made {
            Made::Owned(kind) => t
                .owner_checks
                .iter()
                .find(|(_, k)| k == kind)
                .and_then(|(p, _)| slot_of(t, p)),
            Made::Job(job) => (t.mode == Mode::JobGet && t.job.as_deref() == Some(job))
                .then(|| path_slot(t, "job_id"))
                .flatten(),
            Made::VideoJob => matches!(t.mode, Mode::VideoGet | Mode::VideoCancel)
                .then(|| path_slot(t, "job_id"))
                .flatten(),
            Made::Key => matches!(t.mode, Mode::KeyRevoke | Mode::KeyUpdate)
                .then(|| path_slot(t, "key_id"))
                .flatten(),
            Made::Upload => t.file_field.as_ref().and_then(|_| slot_of(t, "audio_url")),
            Made::Account if t.mode == Mode::Login => Some(Slot::Credentials),
            Made::Account => t
                .mode
                .is_account()
                .then(|| path_slot(t, "user_id"))
                .flatten(),
            Made::Tokens => (t.mode == Mode::TokenRefresh)
                .then(|| slot_of(t, "refresh_token"))
                .flatten(),
            Made::File if t.mode == Mode::BatchCreate => slot_of(t, "input_file_id"),
            Made::File => matches!(t.mode, Mode::FileGet | Mode::FileContent | Mode::FileDelete)
                .then(|| path_slot(t, "file_id"))
                .flatten(),
            Made::Batch => matches!(t.mode, Mode::BatchGet | Mode::BatchCancel)
                .then(|| path_slot(t, "batch_id"))
                .flatten(),
        };
        if let Some(slot) = slot {
            out.push((t, slot));
        }
    }
    out
}

fn path_slot<'t>(t: &'t Row, name: &str) -> Option<Slot<'t>> {
    t.params
        .iter()
        .find(|p| *p == name)
        .map(|p| Slot::Path(p.as_str()))
}

fn slot_of<'t>(t: &'t Row, name: &str) -> Option<Slot<'t>> {
    if let Some(p) = t.params.iter().find(|p| *p == name) {
        return Some(Slot::Path(p));
    }
    if let Some(q) = t.query.iter().find(|q| q.name == name) {
        return Some(Slot::Query(&q.name));
    }
    if let Some(b) = t.body.iter().find(|b| b.name == name) {
        return Some(Slot::Body(&b.name));
    }
    // A `fields` row's upstream variables, and the `audio_url` it fetches,
    // live inside its `fields` envelope.
    if t.mode != Mode::Fields {
        return None;
    }
    if let Some(f) = t
        .upstream
        .as_ref()
        .and_then(|u| u.from_body.iter().find(|f| *f == name))
    {
        return Some(Slot::Body(f));
    }
    (t.file_field.is_some() && name == "audio_url").then_some(Slot::Body("audio_url"))
}

/// The `links` of `row`'s success answer (`None`: it creates nothing, or
/// nothing takes what it creates).
pub fn links(table: &Table, row: &Row) -> Option<Value> {
    let (made, pointer) = made(row)?;
    let mut links = Map::new();
    for (t, slot) in takers(table, row, &made) {
        links.insert(t.id.clone(), link(row, t, &slot, pointer));
    }
    (!links.is_empty()).then_some(Value::Object(links))
}

fn link(source: &Row, target: &Row, slot: &Slot<'_>, pointer: &str) -> Value {
    let value = format!("$response.body#{pointer}");
    let mut parameters = Map::new();
    // The target's other path parameters that the creating request had.
    for p in target.params.iter().filter(|p| source.params.contains(p)) {
        parameters.insert(format!("path.{p}"), json!(format!("$request.path.{p}")));
    }
    let mut body = None;
    match slot {
        Slot::Path(p) => {
            parameters.insert(format!("path.{p}"), json!(value));
        }
        Slot::Query(q) => {
            parameters.insert(format!("query.{q}"), json!(value));
        }
        Slot::Body(b)
            if target.mode == Mode::Fields && !target.body.iter().any(|r| r.name == *b) =>
        {
            body = Some(json!({ "fields": { *b: value } }));
        }
        Slot::Body(b) => {
            // The target's other required fields with fixed values take
            // the first (a batch's `endpoint` and `completion_window`).
            let mut fields = Map::new();
            for r in target.body.iter().filter(|r| r.required && r.name != *b) {
                if let Some(first) = r.one_of.first() {
                    fields.insert(r.name.clone(), json!(first));
                }
            }
            fields.insert((*b).to_owned(), json!(value));
            body = Some(Value::Object(fields));
        }
        Slot::Credentials => {
            body = Some(json!({
                "username": "$request.body#/username",
                "password": "$request.body#/password",
            }))
        }
    }
    let mut l = Map::new();
    l.insert("operationId".into(), json!(target.id));
    if !parameters.is_empty() {
        l.insert("parameters".into(), Value::Object(parameters));
    }
    if let Some(body) = body {
        l.insert("requestBody".into(), body);
    }
    Value::Object(l)
}
