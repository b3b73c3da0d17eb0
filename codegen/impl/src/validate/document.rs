//! The sections of the table outside the rows: the top-level keys,
//! `[areas.*]`, `[bases.*]`, `[capabilities]` and `[resources]`, read into a
//! [`Document`] that the rows are checked against.

use serde::Deserialize;

use super::problems::{describe, did_you_mean, doc_err, split_toml_error, Spans, TableError};
use crate::table::*;
use crate::validate::paths::{is_ident, static_segment_problem};

/// The top-level keys a table may have.
const TOP_LEVEL_KEYS: &[&str] = &[
    "areas",
    "bases",
    "capabilities",
    "resources",
    "unmatched",
    "kinds",
    "limits",
    "purposes",
    "prices",
    "products",
    "reconcile",
    "job_ceilings",
    "endpoint",
];

/// What the rows can refer to.
pub(super) struct Document {
    pub areas: Vec<AreaDef>,
    pub bases: Vec<BaseDef>,
    pub resources: Vec<(String, String)>,
    /// Declared, but unreadable (already reported).
    pub broken_areas: Vec<AreaName>,
    pub broken_bases: Vec<BaseName>,
    pub capabilities: Vec<CapabilityDef>,
    /// Names declared in `[capabilities]` whose entry is unreadable
    /// (already reported): rows naming them say nothing more.
    pub broken_capabilities: Vec<String>,
    /// `capabilities` is there but is not a table (already reported): rows
    /// say nothing about their capability.
    pub capabilities_unreadable: bool,
}

impl Document {
    /// Whether a row naming capability `name` should be told it is not
    /// declared.
    pub fn capability_undeclared(&self, name: &str) -> bool {
        !self.capabilities_unreadable
            && !self.capabilities.iter().any(|c| c.name == name)
            && !self.broken_capabilities.iter().any(|c| c == name)
    }
}

/// Reads every section but the rows; problems go to `errors`.
pub(super) fn read_document(
    value: &toml::Table,
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) -> Document {
    check_top_level_keys(value, spans, errors);
    let areas = read_areas(value.get("areas"), spans, errors);
    let bases = read_bases(value.get("bases"), spans, errors);
    let capabilities = read_capabilities(value.get("capabilities"), spans, errors);
    let resources = read_resources(value.get("resources"), spans, errors);
    // Declared but unreadable: already reported, rows naming them say nothing more.
    let declared = |section: &str, name: &str| {
        value
            .get(section)
            .and_then(toml::Value::as_table)
            .is_some_and(|t| t.contains_key(name))
    };
    let broken_areas: Vec<AreaName> = AreaName::ALL
        .iter()
        .copied()
        .filter(|a| declared("areas", a.as_str()) && !areas.iter().any(|d| d.name == *a))
        .collect();
    let broken_bases: Vec<BaseName> = BaseName::ALL
        .iter()
        .copied()
        .filter(|b| declared("bases", b.as_str()) && !bases.iter().any(|d| d.name == *b))
        .collect();
    Document {
        areas,
        bases,
        resources,
        broken_areas,
        broken_bases,
        capabilities: capabilities.defs,
        broken_capabilities: capabilities.broken,
        capabilities_unreadable: capabilities.unreadable,
    }
}

fn check_top_level_keys(value: &toml::Table, spans: &Spans<'_>, errors: &mut Vec<TableError>) {
    for key in value.keys() {
        if !TOP_LEVEL_KEYS.contains(&key.as_str()) {
            let hint = did_you_mean(key, TOP_LEVEL_KEYS)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            doc_err(
                errors,
                spans,
                &[key],
                format!("unknown top-level key `{key}`{hint}; the table has `[areas.*]`, `[bases.*]`, `[capabilities]`, `[resources]`, `[unmatched]`, `[kinds.*]`, `[limits]`, `[purposes.*]`, `[prices]`, `[products]`, `[reconcile.*]`, `[job_ceilings]` and `[[endpoint]]` rows"),
            );
        }
    }
}

/// What is wrong with an area's prefix (an empty prefix is fine).
fn prefix_problems(prefix: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if prefix.is_empty() {
        return problems;
    }
    if !prefix.starts_with('/') {
        problems.push(format!("prefix `{prefix}` must start with `/`"));
    } else if prefix.ends_with('/') {
        problems.push(format!(
            "prefix `{prefix}` must not end with `/` (rows' paths start with one)"
        ));
    } else {
        for seg in prefix[1..].split('/') {
            if let Some(p) = static_segment_problem(seg) {
                problems.push(format!("prefix `{prefix}`: {p}"));
            }
        }
    }
    problems
}

/// A resource kind: lower-case letters and `_`.
pub(super) fn valid_kind(kind: &str) -> bool {
    !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// `[resources]`: parameter name → kind of resource.
fn read_resources(
    value: Option<&toml::Value>,
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(value) = value else {
        return out;
    };
    let Some(table) = value.as_table() else {
        doc_err(
            errors,
            spans,
            &["resources"],
            "`resources` must be a table of `param = \"kind\"`".to_string(),
        );
        return out;
    };
    for (param, kind) in table {
        match kind.as_str() {
            Some(k) if valid_kind(k) => out.push((param.clone(), k.to_string())),
            _ => doc_err(
                errors,
                spans,
                &["resources", param],
                format!("[resources] `{param}`: the kind must be a string of lower-case letters and `_`"),
            ),
        }
    }
    out
}

/// `[areas.*]`: each area's prefix and defaults.
fn read_areas(
    value: Option<&toml::Value>,
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) -> Vec<AreaDef> {
    let mut out = Vec::new();
    let Some(value) = value else {
        doc_err(
            errors,
            spans,
            &[],
            "the table has no `[areas.*]` (each row's area needs a prefix)".to_string(),
        );
        return out;
    };
    let Some(table) = value.as_table() else {
        doc_err(
            errors,
            spans,
            &["areas"],
            "`areas` must be a table of `[areas.<name>]` tables".to_string(),
        );
        return out;
    };
    for (name, v) in table {
        let area = match name.parse::<AreaName>() {
            Ok(a) => a,
            Err(msg) => {
                doc_err(
                    errors,
                    spans,
                    &["areas", name],
                    format!("[areas.{name}]: {msg}"),
                );
                continue;
            }
        };
        let raw = match RawArea::deserialize(v.clone()) {
            Ok(raw) => raw,
            Err(e) => {
                let (msg, path) = split_toml_error(&e);
                let mut at = vec!["areas", name.as_str()];
                at.extend(path.iter().map(String::as_str));
                doc_err(
                    errors,
                    spans,
                    &at,
                    format!("[areas.{name}]: {}", describe(&path, &msg)),
                );
                continue;
            }
        };
        for p in prefix_problems(&raw.prefix) {
            doc_err(
                errors,
                spans,
                &["areas", name, "prefix"],
                format!("[areas.{name}]: {p}"),
            );
        }
        out.push(AreaDef {
            name: area,
            prefix: raw.prefix,
            auth: raw.auth,
            errors: raw.errors,
        });
    }
    out
}

/// `[bases.*]`: each base's credential form.
fn read_bases(
    value: Option<&toml::Value>,
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) -> Vec<BaseDef> {
    let mut out = Vec::new();
    let Some(value) = value else {
        return out;
    };
    let Some(table) = value.as_table() else {
        doc_err(
            errors,
            spans,
            &["bases"],
            "`bases` must be a table of `[bases.<name>]` tables".to_string(),
        );
        return out;
    };
    for (name, v) in table {
        let base = match name.parse::<BaseName>() {
            Ok(b) => b,
            Err(msg) => {
                doc_err(
                    errors,
                    spans,
                    &["bases", name],
                    format!("[bases.{name}]: {msg}"),
                );
                continue;
            }
        };
        match RawBase::deserialize(v.clone()) {
            Ok(raw) => out.push(BaseDef {
                name: base,
                auth: raw.auth,
            }),
            Err(e) => {
                let (msg, path) = split_toml_error(&e);
                let mut at = vec!["bases", name.as_str()];
                at.extend(path.iter().map(String::as_str));
                doc_err(
                    errors,
                    spans,
                    &at,
                    format!("[bases.{name}]: {}", describe(&path, &msg)),
                );
            }
        }
    }
    out
}

/// What `[capabilities]` declares.
struct Capabilities {
    defs: Vec<CapabilityDef>,
    /// Declared, but unreadable (already reported).
    broken: Vec<String>,
    /// `capabilities` is not a table (already reported).
    unreadable: bool,
}

/// `[capabilities]`: `name = "<count>/<unit>"` or `name = "off"`. A table
/// without the section declares none (every row then says so).
fn read_capabilities(
    value: Option<&toml::Value>,
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) -> Capabilities {
    let mut out = Capabilities {
        defs: Vec::new(),
        broken: Vec::new(),
        unreadable: false,
    };
    let Some(value) = value else {
        return out;
    };
    let Some(table) = value.as_table() else {
        doc_err(
            errors,
            spans,
            &["capabilities"],
            "`capabilities` must be a table of `name = \"<count>/<unit>\"` quotas (or `\"off\"`)"
                .to_string(),
        );
        out.unreadable = true;
        return out;
    };
    for (name, v) in table {
        let quota = match v.as_str() {
            Some(text) => Quota::parse(text),
            None => Err(
                "the quota must be a string: `\"<count>/<unit>\"` (e.g. `\"60/m\"`) or `\"off\"`"
                    .to_string(),
            ),
        };
        let mut problems = Vec::new();
        if !is_ident(name) {
            problems.push(
                "a capability name must be an identifier (letters, digits and `_`)".to_string(),
            );
        }
        if let Err(msg) = &quota {
            problems.push(msg.clone());
        }
        match quota {
            Ok(quota) if problems.is_empty() => out.defs.push(CapabilityDef {
                name: name.clone(),
                quota,
            }),
            _ => out.broken.push(name.clone()),
        }
        for p in problems {
            doc_err(
                errors,
                spans,
                &["capabilities", name],
                format!("[capabilities] `{name}`: {p}"),
            );
        }
    }
    out
}
