//! One `[[endpoint]]` row: read it key by key, run every check on it and
//! resolve it into a [`Row`].
//!
//! [`resolve_row`] calls one function per part of a row, in a fixed order
//! (problems on the same line keep that order): identity (required keys,
//! `id`, `capability`), area and path, the area's defaults, billing, the
//! field rules, the mode's requirements, the job keys, the upstream call,
//! the mapping toward the upstream, `file_field`, and resources.

use serde::Deserialize;

use super::problems::{describe, did_you_mean, split_toml_error, RowCx, Spans, TableError};
use crate::table::*;
use crate::validate::cross_row::RowKey;
use crate::validate::document::{valid_kind, Document};
use crate::validate::fields::{check_example, check_file_field, check_mapping, check_rules, rule};
use crate::validate::paths::check_route_path;
use crate::validate::upstream::{resolve_upstream, Rules};

/// Most path parameters a route may have (`runtime::spec::MAX_PARAMS`).
pub const MAX_PARAMS: usize = 4;

/// The keys a `[[endpoint]]` row may have (the fields of [`RawEndpoint`]).
pub const ROW_KEYS: &[&str] = &[
    "id",
    "area",
    "method",
    "path",
    "mode",
    "capability",
    "billing",
    "metering",
    "resource",
    "gate",
    "auth",
    "errors",
    "job",
    "file_field",
    "mirror",
    "retention_days",
    "summary",
    "translate",
    "upstream",
    "rename",
    "drop",
    "set",
    "body",
    "query",
    "example",
];

/// Names the generated module defines besides the row statics.
const RESERVED_NAMES: &[&str] = &[
    "ROUTES",
    "ROUTE_COUNT",
    "TABLE",
    "CAPABILITIES",
    "JOB_KINDS",
    "BASES",
];

/// Reads and checks every `[[endpoint]]` row. Returns the rows that
/// resolved and, for every row resolved or not, what the checks across
/// rows need.
pub(super) fn read_rows(
    items: &[toml::Value],
    doc: &Document,
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) -> (Vec<Row>, Vec<RowKey>) {
    let mut rows: Vec<Row> = Vec::new();
    let mut keys: Vec<RowKey> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let line = spans.row_line(index);
        let Some(row) = item.as_table() else {
            errors.push(TableError {
                row: Some(format!("#{}", index + 1)),
                line,
                message: "an `[[endpoint]]` row must be a table".to_string(),
            });
            continue;
        };
        let mut cx = RowCx {
            label: format!("#{}", index + 1),
            index,
            line,
            spans,
            errors: &mut *errors,
        };
        let raw = read_row(row, &mut cx);
        if let Some(id) = raw.id.as_deref().filter(|id| !id.is_empty()) {
            cx.label = id.to_string();
        }
        keys.push(row_key(&cx, &raw, doc));
        if let Some(resolved) = resolve_row(&mut cx, row, &raw, doc) {
            rows.push(resolved);
        }
    }
    (rows, keys)
}

/// What the checks across rows need of one row, resolved or not.
fn row_key(cx: &RowCx<'_, '_>, raw: &RawEndpoint, doc: &Document) -> RowKey {
    let prefix = raw
        .area
        .and_then(|a| doc.areas.iter().find(|d| d.name == a))
        .map(|a| a.prefix.as_str());
    let path = match (prefix, raw.path.as_deref()) {
        (Some(prefix), Some(path)) if check_route_path(path).is_ok() => {
            Some(format!("{prefix}{path}"))
        }
        _ => None,
    };
    RowKey {
        index: cx.index,
        line: cx.line.unwrap_or(0),
        label: cx.label.clone(),
        id: raw.id.clone().filter(|id| !id.is_empty()),
        method: raw.method,
        path,
        capability: readable_capability(raw),
        mode: raw.mode,
        job: raw.job.clone().filter(|j| valid_job_kind(j)),
    }
}

/// Reads a row; when it does not deserialize as a whole, reads it key by
/// key so that every bad key is reported and the good ones are kept.
fn read_row(row: &toml::Table, cx: &mut RowCx<'_, '_>) -> RawEndpoint {
    if let Ok(raw) = RawEndpoint::deserialize(toml::Value::Table(row.clone())) {
        return raw;
    }
    let mut good = toml::Table::new();
    let mut problems = Vec::new();
    for (key, value) in row {
        if !ROW_KEYS.contains(&key.as_str()) {
            let hint = did_you_mean(key, ROW_KEYS)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            problems.push((vec![key.clone()], format!("unknown key `{key}`{hint}")));
            continue;
        }
        let mut one = toml::Table::new();
        one.insert(key.clone(), value.clone());
        match RawEndpoint::deserialize(toml::Value::Table(one)) {
            Ok(_) => {
                good.insert(key.clone(), value.clone());
            }
            Err(e) => {
                let (msg, mut path) = split_toml_error(&e);
                if path.is_empty() {
                    path.push(key.clone());
                }
                let text = describe(&path, &msg);
                problems.push((path, text));
            }
        }
    }
    let raw = RawEndpoint::deserialize(toml::Value::Table(good)).unwrap_or_default();
    // The id (if readable) names the row in its own problems.
    if let Some(id) = raw.id.as_deref().filter(|id| !id.is_empty()) {
        cx.label = id.to_string();
    }
    for (path, text) in problems {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        cx.err(&path, text);
    }
    raw
}

/// Every per-row check; `None` when a required key is missing or unreadable.
fn resolve_row(
    cx: &mut RowCx<'_, '_>,
    row: &toml::Table,
    raw: &RawEndpoint,
    doc: &Document,
) -> Option<Row> {
    check_required_keys(cx, row);
    check_id(cx, raw);
    check_capability(cx, raw, doc);
    let area = resolve_area(cx, raw, doc);
    let params = resolve_path(cx, raw);
    let (auth, errors) = area_defaults(cx, row, raw, area);
    check_billing(cx, raw, auth);

    let body_rules = raw
        .body
        .as_ref()
        .map(|b| check_rules(cx, "body", b))
        .unwrap_or_default();
    let query_rules = raw
        .query
        .as_ref()
        .map(|q| check_rules(cx, "query", q))
        .unwrap_or_default();
    if raw.method == Some(Method::Get) && !body_rules.is_empty() {
        cx.err(
            &["body"],
            "a GET route has no body, but `[endpoint.body]` declares fields",
        );
    }
    check_mode(cx, row, raw, &body_rules);
    check_job_keys(cx, raw);
    let rules = Rules {
        body: &body_rules,
        query: &query_rules,
    };
    let upstream = resolve_upstream(cx, raw, doc, params.as_deref(), &rules);
    let mapping = check_mapping(cx, raw);
    check_file_field(cx, row, raw, &body_rules);
    check_resource(cx, raw);
    let owner_checks = owner_checks(raw, doc, params.as_deref(), &body_rules);
    let example = check_example(cx, raw, &body_rules);

    Some(Row {
        id: raw.id.clone()?,
        line: cx.line.unwrap_or(0),
        area: area?.name,
        method: raw.method?,
        path: format!("{}{}", area?.prefix, raw.path.as_deref()?),
        params: params?,
        mode: raw.mode?,
        capability: raw.capability.clone()?,
        billing: raw.billing?,
        metering: raw
            .metering
            .unwrap_or_else(|| Metering::default_for(raw.billing.unwrap_or(Billing::Free))),
        resource: raw.resource.clone(),
        owner_checks,
        gate: raw.gate,
        auth: auth?,
        errors: errors?,
        upstream: if row.contains_key("upstream") {
            Some(upstream?)
        } else {
            None
        },
        body: body_rules,
        query: query_rules,
        rename: mapping.rename,
        drop: mapping.drop,
        set: if row.contains_key("set") {
            Some(mapping.set?)
        } else {
            None
        },
        file_field: raw.file_field.clone(),
        job: raw.job.clone(),
        mirror: raw.mirror.clone(),
        retention_days: raw.retention_days,
        translate: raw.translate.unwrap_or(false),
        summary: raw.summary.clone().unwrap_or_default(),
        example,
    })
}

/// Required keys. A key that is present but unreadable was reported already.
fn check_required_keys(cx: &mut RowCx<'_, '_>, row: &toml::Table) {
    for key in [
        "id",
        "area",
        "method",
        "path",
        "mode",
        "capability",
        "billing",
    ] {
        if !row.contains_key(key) {
            cx.err(&[], format!("missing key `{key}`"));
        }
    }
}

/// The id: its characters, and the generated name it must not take.
fn check_id(cx: &mut RowCx<'_, '_>, raw: &RawEndpoint) {
    let Some(id) = &raw.id else {
        return;
    };
    let valid = id.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if id.is_empty() {
        cx.err(&["id"], "`id` is empty");
    } else if !valid {
        cx.err(
            &["id"],
            format!("id `{id}` must start with a letter and hold only letters, digits, `.`, `_` and `-`"),
        );
    } else if RESERVED_NAMES.contains(&static_name(id).as_str()) {
        cx.err(
            &["id"],
            format!(
                "id `{id}` would generate `{}`, a name the generated module already uses",
                static_name(id)
            ),
        );
    }
}

/// The capability's spelling, and that `[capabilities]` declares it.
fn check_capability(cx: &mut RowCx<'_, '_>, raw: &RawEndpoint, doc: &Document) {
    let Some(cap) = &raw.capability else {
        return;
    };
    if cap.trim().is_empty() {
        cx.err(&["capability"], "`capability` is empty");
    } else if cap.chars().any(char::is_whitespace) {
        cx.err(
            &["capability"],
            format!("capability `{cap}` contains white space"),
        );
    } else if doc.capability_undeclared(cap) {
        let names: Vec<&str> = doc.capabilities.iter().map(|c| c.name.as_str()).collect();
        let hint = did_you_mean(cap, &names)
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        cx.err(
            &["capability"],
            format!("capability `{cap}` is not declared in `[capabilities]`{hint}"),
        );
    }
}

/// The row's capability, when it is spelled well (for the checks across rows).
fn readable_capability(raw: &RawEndpoint) -> Option<String> {
    raw.capability
        .clone()
        .filter(|c| !c.trim().is_empty() && !c.chars().any(char::is_whitespace))
}

/// The row's area, when it is declared.
fn resolve_area<'d>(
    cx: &mut RowCx<'_, '_>,
    raw: &RawEndpoint,
    doc: &'d Document,
) -> Option<&'d AreaDef> {
    let name = raw.area?;
    let found = doc.areas.iter().find(|a| a.name == name);
    if found.is_none() && !doc.broken_areas.contains(&name) {
        cx.err(
            &["area"],
            format!("area `{name}` is not declared in `[areas]`"),
        );
    }
    found
}

/// The path's parameters, when the path is valid.
fn resolve_path(cx: &mut RowCx<'_, '_>, raw: &RawEndpoint) -> Option<Vec<String>> {
    let path = raw.path.as_ref()?;
    match check_route_path(path) {
        Ok(p) => {
            if p.len() > MAX_PARAMS {
                cx.err(
                    &["path"],
                    format!(
                        "path `{path}` has {} parameters; at most {MAX_PARAMS} are allowed (runtime::spec::MAX_PARAMS)",
                        p.len()
                    ),
                );
            }
            Some(p)
        }
        Err(problems) => {
            for p in problems {
                cx.err(&["path"], p);
            }
            None
        }
    }
}

/// `auth` and `errors`, from the row or else from its area.
fn area_defaults(
    cx: &mut RowCx<'_, '_>,
    row: &toml::Table,
    raw: &RawEndpoint,
    area: Option<&AreaDef>,
) -> (Option<Auth>, Option<ErrorFormat>) {
    let auth = raw.auth.or(area.and_then(|a| a.auth));
    let errors = raw.errors.or(area.and_then(|a| a.errors));
    if let Some(area) = area {
        if auth.is_none() && !row.contains_key("auth") {
            cx.err(
                &[],
                format!(
                    "no `auth`: the row sets none and `[areas.{}]` has no default",
                    area.name
                ),
            );
        }
        if errors.is_none() && !row.contains_key("errors") {
            cx.err(
                &[],
                format!(
                    "no `errors`: the row sets none and `[areas.{}]` has no default",
                    area.name
                ),
            );
        }
    }
    (auth, errors)
}

/// Billing, metering and authentication agree (a gate goes with any billing).
fn check_billing(cx: &mut RowCx<'_, '_>, raw: &RawEndpoint, auth: Option<Auth>) {
    if let (Some(m), Some(billing)) = (raw.metering, raw.billing) {
        if billing == Billing::Free && m != Metering::None {
            cx.err(
                &["metering"],
                format!("metering `{m}` on a `free` route: a free route bills nothing"),
            );
        }
        if m == Metering::FirstBuild && billing != Billing::VoiceSubscription {
            cx.err(
                &["metering"],
                format!(
                    "metering `first_build` needs billing `voice_subscription`, not `{billing}`"
                ),
            );
        }
    }
    // A gate may sit on a free route: spec A2 gates DELETE /voices, which is free.
    if let (Some(billing), Some(a @ (Auth::None | Auth::Signature))) = (raw.billing, auth) {
        if billing != Billing::Free {
            cx.err(
                &["billing"],
                format!("billing `{billing}` needs a caller to charge, but auth is `{a}`"),
            );
        }
    }
}

/// Mode-specific requirements.
fn check_mode(
    cx: &mut RowCx<'_, '_>,
    row: &toml::Table,
    raw: &RawEndpoint,
    body_rules: &[FieldRule],
) {
    let Some(mode) = raw.mode else {
        return;
    };
    if mode.needs_upstream() && raw.upstream.is_none() && !row.contains_key("upstream") {
        cx.err(
            &["mode"],
            format!("mode `{mode}` forwards to the provider and needs an `upstream`"),
        );
    }
    if mode.forbids_upstream() && row.contains_key("upstream") {
        cx.err(
            &["upstream"],
            format!("mode `{mode}` is served by the gateway itself and takes no `upstream`"),
        );
    }
    if mode.is_job() && raw.job.is_none() && !row.contains_key("job") {
        cx.err(
            &["mode"],
            format!("mode `{mode}` needs `job` (the job kind, e.g. `job = \"stt\"`)"),
        );
    }
    if !mode.is_job() && row.contains_key("job") {
        cx.err(
            &["job"],
            format!(
                "`job` only applies to the job modes (job_submit, job_get, job_list), not `{mode}`"
            ),
        );
    }
    if mode == Mode::Fields {
        let ok =
            rule(body_rules, "fields").is_some_and(|r| r.ty == FieldType::Object && r.required);
        if !ok {
            cx.err(
                &["body", "fields"],
                "mode `fields` needs a required object field `fields` in `[endpoint.body]` (`fields = { type = \"object\", required = true }`)",
            );
        }
    }
    if mode != Mode::Transcription && row.contains_key("translate") {
        cx.err(
            &["translate"],
            format!("`translate` only applies to mode `transcription`, not `{mode}`"),
        );
    }
    if mode != Mode::JobGet && row.contains_key("mirror") {
        cx.err(
            &["mirror"],
            format!("`mirror` only applies to mode `job_get`, not `{mode}`"),
        );
    }
}

/// A job kind: lower-case letters, digits and `_`.
fn valid_job_kind(job: &str) -> bool {
    !job.is_empty()
        && job
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// `job`, `mirror`, `retention_days` and `summary` on their own.
fn check_job_keys(cx: &mut RowCx<'_, '_>, raw: &RawEndpoint) {
    if let Some(job) = &raw.job {
        if !valid_job_kind(job) {
            cx.err(
                &["job"],
                format!("job kind `{job}` must be lower-case letters, digits and `_`"),
            );
        }
    }
    if let Some(mirror) = &raw.mirror {
        if mirror.split('.').any(|p| {
            p.is_empty()
                || !p
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }) {
            cx.err(&["mirror"], format!("mirror `{mirror}` must be a dotted path of field names, e.g. `item.result_audio_url`"));
        }
    }
    if raw.retention_days == Some(0) {
        cx.err(&["retention_days"], "`retention_days` must be at least 1");
    }
    if raw
        .summary
        .as_deref()
        .is_some_and(|s| s.contains(['\n', '\r']))
    {
        cx.err(&["summary"], "`summary` must be one line");
    }
}

/// The row's own `resource` kind.
fn check_resource(cx: &mut RowCx<'_, '_>, raw: &RawEndpoint) {
    if let Some(kind) = &raw.resource {
        if !valid_kind(kind) {
            cx.err(
                &["resource"],
                format!("`resource` `{kind}` must be lower-case letters and `_`"),
            );
        }
    }
}

/// Owner checks: every path parameter named in `[resources]`, the last
/// path parameter as the row's own `resource`, `from_query` and `from_body`
/// variables and body fields named in `[resources]` (e.g. the `voice_uuid` a
/// synthesis uses, the agent an agent tool is created for).
fn owner_checks(
    raw: &RawEndpoint,
    doc: &Document,
    params: Option<&[String]>,
    body_rules: &[FieldRule],
) -> Vec<(String, String)> {
    let kind_of = |name: &str| {
        doc.resources
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, k)| k.clone())
    };
    let mut owner_checks: Vec<(String, String)> = Vec::new();
    if let Some(ps) = params {
        for (i, p) in ps.iter().enumerate() {
            let own = (i + 1 == ps.len()).then(|| raw.resource.clone()).flatten();
            if let Some(kind) = kind_of(p).or(own) {
                owner_checks.push((p.clone(), kind));
            }
        }
    }
    if let Some(up) = &raw.upstream {
        for q in up.from_query.iter().chain(&up.from_body) {
            if let Some(k) = kind_of(q) {
                owner_checks.push((q.clone(), k));
            }
        }
    }
    for rule in body_rules {
        let named = owner_checks.iter().any(|(p, _)| *p == rule.name);
        if let (false, Some(k)) = (named, kind_of(&rule.name)) {
            owner_checks.push((rule.name.clone(), k));
        }
    }
    owner_checks
}
