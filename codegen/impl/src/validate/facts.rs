//! The sections that hold the runtime's facts about the whole table:
//! `[unmatched]` (the error format outside every area), `[kinds.*]` (what a
//! resource kind does beyond ownership), `[limits]` (largest media body per
//! mode), `[purposes.*]` (upload purposes and their retention), `[prices]`
//! (known upstream prices), `[products]` (a billing unit's own price-key
//! product), `[reconcile.*]` (gateway product and unit →
//! upstream billing product) and `[job_ceilings]` (what a billed job's
//! submit holds when its input cannot be measured). Each problem names its
//! key and line; the checks that need the rows (a kind no row names, a mode
//! without its limit, an unknown product, a billed job kind without its
//! ceiling) run once the rows are read.

use serde::Deserialize;

use super::problems::{describe, did_you_mean, doc_err, split_toml_error, Spans, TableError};
use crate::table::*;
use crate::validate::paths::is_ident;

/// What these sections declare.
#[derive(Default)]
pub(super) struct Facts {
    pub unmatched_errors: Option<ErrorFormat>,
    pub kinds: Vec<KindDef>,
    pub limits: Vec<(Mode, u64)>,
    pub purposes: Vec<PurposeDef>,
    pub prices: Vec<(String, String)>,
    pub upstream_products: Vec<(String, Billing, String)>,
    pub unit_products: Vec<(Billing, String)>,
    /// `[purposes]` is there (its entries may all be broken, and reported).
    pub purposes_declared: bool,
    /// `[limits]` keys that did not read (already reported).
    pub broken_limits: Vec<String>,
    pub job_ceilings: Vec<(String, u32)>,
    /// `[job_ceilings]` keys that did not read (already reported).
    pub broken_ceilings: Vec<String>,
}

/// The largest `[job_ceilings]` entry (units of a billing unit: 1,000,000
/// seconds is over eleven days of media).
pub const MAX_JOB_CEILING: u32 = 1_000_000;

/// The modes whose runtime function needs a `[limits]` entry.
pub const LIMITED_MODES: &[Mode] = &[
    Mode::Upload,
    Mode::Transcription,
    Mode::Image,
    Mode::Speech,
    Mode::MediaUpload,
];

/// The table's sections as `(name, value)`, or a problem when it is not a table.
fn section<'v>(
    value: &'v toml::Table,
    name: &str,
    what: &str,
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) -> Option<&'v toml::Table> {
    let v = value.get(name)?;
    let t = v.as_table();
    if t.is_none() {
        doc_err(
            errors,
            spans,
            &[name],
            format!("`{name}` must be a table of {what}"),
        );
    }
    t
}

/// Reads the sections (the rows are checked against them later).
pub(super) fn read_facts(
    value: &toml::Table,
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) -> Facts {
    let mut facts = Facts::default();
    if let Some(t) = section(value, "unmatched", "`errors = \"...\"`", spans, errors) {
        for (key, v) in t {
            if key != "errors" {
                doc_err(
                    errors,
                    spans,
                    &["unmatched", key],
                    format!("[unmatched]: unknown key `{key}`, expected `errors`"),
                );
                continue;
            }
            match v.as_str().map(str::parse::<ErrorFormat>) {
                Some(Ok(f)) => facts.unmatched_errors = Some(f),
                Some(Err(msg)) => doc_err(
                    errors,
                    spans,
                    &["unmatched", key],
                    format!("[unmatched] `errors`: {msg}"),
                ),
                None => doc_err(
                    errors,
                    spans,
                    &["unmatched", key],
                    "[unmatched] `errors` must be a string".into(),
                ),
            }
        }
    }
    if let Some(t) = section(value, "kinds", "`[kinds.<kind>]` tables", spans, errors) {
        for (kind, v) in t {
            match RawKind::deserialize(v.clone()) {
                Ok(raw) => {
                    if let Some(f) = raw.id_field.as_deref().filter(|f| !is_ident(f)) {
                        doc_err(errors, spans, &["kinds", kind, "id_field"], format!("[kinds.{kind}]: `id_field` `{f}` must be a field name (letters, digits and `_`)"));
                    }
                    facts.kinds.push(KindDef {
                        kind: kind.clone(),
                        shared_stock: raw.shared_stock,
                        id_field: raw.id_field,
                    });
                }
                Err(e) => entry_error(errors, spans, "kinds", kind, &e),
            }
        }
    }
    if let Some(t) = section(
        value,
        "limits",
        "`<mode> = \"<size>\"` entries",
        spans,
        errors,
    ) {
        for (mode, v) in t {
            let parsed = mode.parse::<Mode>().and_then(|m| {
                if LIMITED_MODES.contains(&m) {
                    Ok(m)
                } else {
                    Err(format!(
                        "mode `{m}` has no limit; the limited modes are: {}",
                        names(LIMITED_MODES)
                    ))
                }
            });
            let size = v
                .as_str()
                .ok_or_else(|| "the size must be a string, e.g. `\"25 MiB\"`".to_string())
                .and_then(parse_size);
            let broken = &mut facts.broken_limits;
            if let Some(e) = entry(("limits", mode), (parsed, size), broken, spans, errors) {
                facts.limits.push(e);
            }
        }
    }
    if let Some(t) = section(
        value,
        "purposes",
        "`[purposes.<name>]` tables",
        spans,
        errors,
    ) {
        facts.purposes_declared = true;
        for (name, v) in t {
            match RawPurpose::deserialize(v.clone()) {
                Ok(raw) => {
                    let mut ok = true;
                    if !is_ident(name) {
                        doc_err(errors, spans, &["purposes", name], format!("[purposes.{name}]: a purpose must be an identifier (letters, digits and `_`)"));
                        ok = false;
                    }
                    if raw.prefix.len() < 2
                        || !raw.prefix.ends_with('/')
                        || raw.prefix.starts_with('/')
                        || raw.prefix.contains("..")
                    {
                        doc_err(errors, spans, &["purposes", name, "prefix"], format!("[purposes.{name}]: `prefix` `{}` must be a relative key prefix ending in `/`, e.g. `uploads/`", raw.prefix));
                        ok = false;
                    }
                    if !is_ident(&raw.class) {
                        doc_err(
                            errors,
                            spans,
                            &["purposes", name, "class"],
                            format!(
                                "[purposes.{name}]: `class` `{}` must be an identifier",
                                raw.class
                            ),
                        );
                        ok = false;
                    }
                    if raw.retention_days == Some(0) {
                        doc_err(errors, spans, &["purposes", name, "retention_days"], format!("[purposes.{name}]: `retention_days` must be at least 1 (leave it out for permanent)"));
                        ok = false;
                    }
                    if ok {
                        facts.purposes.push(PurposeDef {
                            name: name.clone(),
                            prefix: raw.prefix,
                            class: raw.class,
                            retention_days: raw.retention_days,
                            default: raw.default,
                        });
                    }
                }
                Err(e) => entry_error(errors, spans, "purposes", name, &e),
            }
        }
        let defaults = facts.purposes.iter().filter(|p| p.default).count();
        // A purpose that did not read was reported; its `default` is unknown.
        if !t.is_empty() && facts.purposes.len() == t.len() && defaults != 1 {
            doc_err(errors, spans, &["purposes"], format!("[purposes]: exactly one purpose must have `default = true` (the purpose of a form without one), found {defaults}"));
        }
    }
    if let Some(t) = section(
        value,
        "prices",
        "`\"<product>.<unit>\" = \"<USD per unit>\"` entries",
        spans,
        errors,
    ) {
        for (key, v) in t {
            let unit = key
                .split_once('.')
                .ok_or_else(|| {
                    "the key must be `<product>.<unit>`, e.g. `tts.audio_seconds`".to_string()
                })
                .and_then(|(_, unit)| unit.parse::<Billing>());
            let price = v
                .as_str()
                .filter(|p| is_decimal(p))
                .ok_or_else(|| "the price must be a decimal string, e.g. `\"0.0005\"`".to_string());
            match (unit, price) {
                (Ok(_), Ok(p)) => facts.prices.push((key.clone(), p.to_string())),
                (Err(msg), _) | (_, Err(msg)) => doc_err(
                    errors,
                    spans,
                    &["prices", key],
                    format!("[prices] `{key}`: {msg}"),
                ),
            }
        }
    }
    if let Some(t) = section(
        value,
        "products",
        "`<unit> = \"<product>\"` entries",
        spans,
        errors,
    ) {
        for (unit, v) in t {
            let parsed = unit.parse::<Billing>();
            let product = v
                .as_str()
                .filter(|p| is_ident(p))
                .ok_or_else(|| "the product must be an identifier string".to_string());
            match (parsed, product) {
                (Ok(u), Ok(p)) => facts.unit_products.push((u, p.to_string())),
                (Err(msg), _) | (_, Err(msg)) => doc_err(
                    errors,
                    spans,
                    &["products", unit],
                    format!("[products] `{unit}`: {msg}"),
                ),
            }
        }
    }
    if let Some(t) = section(
        value,
        "reconcile",
        "`[reconcile.<product>]` tables of `<unit> = \"<upstream product>\"`",
        spans,
        errors,
    ) {
        for (product, v) in t {
            let Some(units) = v.as_table() else {
                doc_err(errors, spans, &["reconcile", product], format!("[reconcile.{product}] must be a table of `<unit> = \"<upstream product>\"`"));
                continue;
            };
            for (unit, upstream) in units {
                let unit_parsed = unit.parse::<Billing>();
                let upstream = upstream
                    .as_str()
                    .filter(|u| is_ident(u))
                    .ok_or_else(|| "the upstream product must be an identifier string".to_string());
                match (unit_parsed, upstream) {
                    (Ok(u), Ok(up)) => {
                        facts
                            .upstream_products
                            .push((product.clone(), u, up.to_string()))
                    }
                    (Err(msg), _) | (_, Err(msg)) => doc_err(
                        errors,
                        spans,
                        &["reconcile", product, unit],
                        format!("[reconcile.{product}] `{unit}`: {msg}"),
                    ),
                }
            }
        }
    }
    if let Some(t) = section(
        value,
        "job_ceilings",
        "`<job kind> = <units>` entries",
        spans,
        errors,
    ) {
        for (kind, v) in t {
            let units = v
                .as_integer()
                .filter(|n| (1..=i64::from(MAX_JOB_CEILING)).contains(n))
                .map(|n| n as u32)
                .ok_or_else(|| {
                    format!("the ceiling must be a whole number of units from 1 to {MAX_JOB_CEILING}, e.g. `3600`")
                });
            let named = Some(kind.clone())
                .filter(|k| is_ident(k))
                .ok_or_else(|| "a job kind is an identifier (letters, digits and `_`)".to_string());
            let broken = &mut facts.broken_ceilings;
            if let Some(e) = entry(
                ("job_ceilings", kind),
                (named, units),
                broken,
                spans,
                errors,
            ) {
                facts.job_ceilings.push(e);
            }
        }
    }
    facts
}

/// Checks that need the rows: every kind of `[kinds]` is named by
/// `[resources]` or a row; every limited mode a row uses has its limit; an
/// upload row has purposes; every product of `[prices]` and `[reconcile]`
/// is a capability or a job kind.
pub(super) fn check_against_rows(
    facts: &Facts,
    rows: &[Row],
    resources: &[(String, String)],
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) {
    let mut kinds: Vec<&str> = resources.iter().map(|(_, k)| k.as_str()).collect();
    kinds.extend(rows.iter().filter_map(|r| r.resource.as_deref()));
    for k in &facts.kinds {
        if !kinds.contains(&k.kind.as_str()) {
            let hint = did_you_mean(&k.kind, &kinds)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            doc_err(
                errors,
                spans,
                &["kinds", &k.kind],
                format!(
                    "[kinds.{}]: no `[resources]` entry or row names the kind `{}`{hint}",
                    k.kind, k.kind
                ),
            );
        }
    }
    for mode in LIMITED_MODES {
        if let Some(row) = rows.iter().find(|r| r.mode == *mode) {
            let declared = facts.limits.iter().any(|(m, _)| m == mode)
                || facts.broken_limits.iter().any(|k| k == mode.as_str());
            if !declared {
                errors.push(TableError {
                    row: Some(row.id.clone()),
                    line: Some(row.line),
                    message: format!("mode `{mode}` needs its largest body in `[limits]` (`{mode} = \"25 MiB\"`)"),
                });
            }
        }
    }
    if let Some(row) = rows.iter().find(|r| r.mode == Mode::Upload) {
        if !facts.purposes_declared {
            errors.push(TableError {
                row: Some(row.id.clone()),
                line: Some(row.line),
                message: "mode `upload` needs `[purposes.*]` (where each purpose stores its files)"
                    .into(),
            });
        }
    }
    let mut products: Vec<&str> = rows.iter().map(|r| r.capability.as_str()).collect();
    products.extend(rows.iter().filter_map(|r| r.job.as_deref()));
    let unknown = |product: &str| !products.contains(&product);
    for (key, _) in &facts.prices {
        let product = key.split_once('.').map_or(key.as_str(), |(p, _)| p);
        if unknown(product) {
            let hint = did_you_mean(product, &products)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            doc_err(
                errors,
                spans,
                &["prices", key],
                format!("[prices] `{key}`: `{product}` is no row's capability or job kind{hint}"),
            );
        }
    }
    for (unit, product) in &facts.unit_products {
        if unknown(product) {
            let hint = did_you_mean(product, &products)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            doc_err(
                errors,
                spans,
                &["products", unit.as_str()],
                format!(
                    "[products] `{unit}`: `{product}` is no row's capability or job kind{hint}"
                ),
            );
        }
    }
    check_job_ceilings(facts, rows, spans, errors);
    let mut seen: Vec<&str> = Vec::new();
    for (product, _, _) in &facts.upstream_products {
        if unknown(product) && !seen.contains(&product.as_str()) {
            seen.push(product);
            let hint = did_you_mean(product, &products)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            doc_err(
                errors,
                spans,
                &["reconcile", product],
                format!(
                    "[reconcile.{product}]: `{product}` is no row's capability or job kind{hint}"
                ),
            );
        }
    }
}

/// Every job kind whose `job_submit` row is billed has its
/// `[job_ceilings]` entry, and every entry is such a kind.
fn check_job_ceilings(
    facts: &Facts,
    rows: &[Row],
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) {
    let billed: Vec<(&str, &Row)> = rows
        .iter()
        .filter(|r| r.mode == Mode::JobSubmit && r.billing != Billing::Free)
        .filter_map(|r| r.job.as_deref().map(|k| (k, r)))
        .collect();
    let kinds: Vec<&str> = rows.iter().filter_map(|r| r.job.as_deref()).collect();
    for (kind, _) in &facts.job_ceilings {
        if billed.iter().any(|(k, _)| k == kind) {
            continue;
        }
        let why = if kinds.contains(&kind.as_str()) {
            "the job kind is not billed (its `job_submit` row is `free`), so its submit holds nothing"
                .to_string()
        } else {
            let hint = did_you_mean(kind, &kinds)
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            format!("`{kind}` is no row's job kind{hint}")
        };
        doc_err(
            errors,
            spans,
            &["job_ceilings", kind],
            format!("[job_ceilings] `{kind}`: {why}"),
        );
    }
    for (kind, row) in billed {
        let declared = facts.job_ceilings.iter().any(|(k, _)| k == kind)
            || facts.broken_ceilings.iter().any(|k| k == kind);
        if !declared {
            errors.push(TableError {
                row: Some(row.id.clone()),
                line: Some(row.line),
                message: format!("job kind `{kind}` is billed: its submit needs a ceiling in `[job_ceilings]` (`{kind} = 3600`: the units it holds when the gateway cannot measure the job's input)"),
            });
        }
    }
}

/// The key and value of the entry `key` of `[section]`, or the first of
/// their problems reported at it (the key then kept in `broken`, so that
/// the checks against the rows do not report it again).
fn entry<K, V>(
    (section, key): (&str, &str),
    parsed: (Result<K, String>, Result<V, String>),
    broken: &mut Vec<String>,
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) -> Option<(K, V)> {
    match parsed {
        (Ok(k), Ok(v)) => Some((k, v)),
        (Err(msg), _) | (_, Err(msg)) => {
            broken.push(key.to_owned());
            let at = format!("[{section}] `{key}`: {msg}");
            doc_err(errors, spans, &[section, key], at);
            None
        }
    }
}

/// A `[section.<name>]` table that did not deserialize.
fn entry_error(
    errors: &mut Vec<TableError>,
    spans: &Spans<'_>,
    section: &str,
    name: &str,
    e: &toml::de::Error,
) {
    let (msg, path) = split_toml_error(e);
    let mut at = vec![section, name];
    at.extend(path.iter().map(String::as_str));
    doc_err(
        errors,
        spans,
        &at,
        format!("[{section}.{name}]: {}", describe(&path, &msg)),
    );
}

fn names(modes: &[Mode]) -> String {
    modes
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `"<n> KiB|MiB|GiB"` or a plain `"<n>"` (bytes) → bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => (&text[..i], text[i..].trim()),
        None => (text, ""),
    };
    let shift = match unit {
        "" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        _ => {
            return Err(format!(
                "size `{text}`: unknown unit `{unit}` (expected KiB, MiB or GiB)"
            ))
        }
    };
    number
        .parse::<u64>()
        .ok()
        .filter(|n| *n >= 1)
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| {
            format!("size `{text}` must be a whole number ≥ 1 with an optional unit, e.g. `25 MiB`")
        })
}

/// Digits with at most one `.` between digits (a price; never a float).
fn is_decimal(text: &str) -> bool {
    let mut parts = text.splitn(2, '.');
    let whole = parts.next().unwrap_or("");
    let frac = parts.next();
    !whole.is_empty()
        && whole.bytes().all(|b| b.is_ascii_digit())
        && frac.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
}
