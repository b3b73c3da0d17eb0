//! A row's body and query rules (`[endpoint.body]`, `[endpoint.query]`) and
//! what it changes in the body on the way upstream (`rename`, `drop`, `set`,
//! `file_field`).

use std::collections::BTreeSet;

use super::problems::RowCx;
use crate::table::*;

/// The rule named `name`, if the section declares one.
pub(super) fn rule<'a>(rules: &'a [FieldRule], name: &str) -> Option<&'a FieldRule> {
    rules.iter().find(|r| r.name == name)
}

/// `rename`, `drop` and `set`, checked.
pub(super) struct Mapping {
    pub rename: Vec<(String, String)>,
    pub drop: Vec<String>,
    /// `set` as JSON; `None` when it is absent or unreadable.
    pub set: Option<String>,
}

/// Mapping toward the upstream: `drop`, `rename`, `set`.
pub(super) fn check_mapping(cx: &mut RowCx<'_, '_>, raw: &RawEndpoint) -> Mapping {
    let drop = raw.drop.clone().unwrap_or_default();
    let mut seen = BTreeSet::new();
    for name in &drop {
        if name.is_empty() {
            cx.err(&["drop"], "`drop` lists an empty name");
        } else if !seen.insert(name) {
            cx.err(&["drop"], format!("`drop` lists `{name}` twice"));
        }
    }
    let rename: Vec<(String, String)> = raw.rename.clone().map(|r| r.0).unwrap_or_default();
    let mut targets = BTreeSet::new();
    for (from, to) in &rename {
        let at = ["rename", from.as_str()];
        if from.is_empty() || to.is_empty() {
            cx.err(&at, "`rename` has an empty field name");
        } else if from == to {
            cx.err(&at, format!("`rename` maps `{from}` to itself"));
        } else if !targets.insert(to) {
            cx.err(&at, format!("`rename` maps two fields to `{to}`"));
        }
        if drop.contains(from) {
            cx.err(&at, format!("`{from}` is both renamed and dropped"));
        }
    }
    let mut set = None;
    if let Some(table) = &raw.set {
        if table.is_empty() {
            cx.err(&["set"], "`set` is empty");
        }
        let mut json = String::new();
        match to_json(&toml::Value::Table(table.clone()), &mut json) {
            Ok(()) => set = Some(json),
            Err(msg) => cx.err(&["set"], format!("`set`: {msg}")),
        }
    }
    Mapping { rename, drop, set }
}

/// `file_field`: the row sends the body's `audio_url` upstream as a file.
pub(super) fn check_file_field(
    cx: &mut RowCx<'_, '_>,
    row: &toml::Table,
    raw: &RawEndpoint,
    body_rules: &[FieldRule],
) {
    let Some(field) = &raw.file_field else {
        return;
    };
    if field.is_empty() {
        cx.err(&["file_field"], "`file_field` is empty");
    }
    if !row.contains_key("upstream") {
        cx.err(
            &["file_field"],
            "`file_field` sends a file upstream, but the row has no `upstream`",
        );
    }
    // `fields` rows carry the URL inside the envelope (`fields.audio_url`).
    if rule(body_rules, "audio_url").is_none() && raw.mode != Some(Mode::Fields) {
        cx.err(
            &["file_field"],
            "`file_field` sends the body's `audio_url` as a file, so `[endpoint.body]` must declare `audio_url`",
        );
    }
}

/// `example`, checked against the body rules: every field a declared rule,
/// of its type (and among its `one_of`), every required rule present.
/// Compact JSON text; `None` when absent or wrong.
pub(super) fn check_example(
    cx: &mut RowCx<'_, '_>,
    raw: &RawEndpoint,
    body: &[FieldRule],
) -> Option<String> {
    let example = raw.example.as_ref()?;
    if body.is_empty() {
        cx.err(
            &["example"],
            "`example` is an example of the body, but the row has no `[endpoint.body]`",
        );
        return None;
    }
    let mut ok = true;
    for (name, value) in example {
        let Some(r) = rule(body, name) else {
            cx.err(
                &["example"],
                format!("`example` has `{name}`, which `[endpoint.body]` does not declare"),
            );
            ok = false;
            continue;
        };
        let in_one_of = r.one_of.is_empty()
            || value
                .as_str()
                .is_some_and(|s| r.one_of.iter().any(|o| o == s));
        if !fits(r.ty, value) || !in_one_of {
            cx.err(
                &["example"],
                format!(
                    "`example.{name}` does not fit its rule (`type = \"{}\"`{})",
                    r.ty.as_str(),
                    if r.one_of.is_empty() {
                        ""
                    } else {
                        ", `one_of`"
                    }
                ),
            );
            ok = false;
        }
    }
    for r in body
        .iter()
        .filter(|r| r.required && !example.contains_key(&r.name))
    {
        cx.err(
            &["example"],
            format!(
                "`example` lacks `{}`, which `[endpoint.body]` requires",
                r.name
            ),
        );
        ok = false;
    }
    let mut out = String::new();
    if let Err(e) = to_json(&toml::Value::Table(example.clone()), &mut out) {
        cx.err(&["example"], format!("`example`: {e}"));
        return None;
    }
    ok.then_some(out)
}

/// Whether a TOML value has a field type.
fn fits(ty: FieldType, v: &toml::Value) -> bool {
    match ty {
        FieldType::String => v.is_str(),
        FieldType::Integer => v.is_integer(),
        FieldType::Number => v.is_integer() || v.is_float(),
        FieldType::Boolean => v.is_bool(),
        FieldType::Object => v.is_table(),
        FieldType::Array => v.is_array(),
        FieldType::Any => true,
    }
}

/// `set` as compact JSON, keys in the order written.
fn to_json(value: &toml::Value, out: &mut String) -> Result<(), String> {
    match value {
        toml::Value::String(s) => {
            out.push_str(&serde_json::to_string(s).expect("a string serializes"))
        }
        toml::Value::Integer(i) => out.push_str(&i.to_string()),
        toml::Value::Float(f) => {
            if !f.is_finite() {
                return Err(format!("`{f}` is not a JSON number"));
            }
            out.push_str(&serde_json::to_string(f).expect("a finite float serializes"));
        }
        toml::Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        // JSON has no date-time: it becomes a string, as serde reads it.
        toml::Value::Datetime(d) => {
            out.push_str(&serde_json::to_string(&d.to_string()).expect("a string serializes"))
        }
        toml::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                to_json(item, out)?;
            }
            out.push(']');
        }
        toml::Value::Table(t) => {
            out.push('{');
            for (i, (k, v)) in t.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).expect("a string serializes"));
                out.push(':');
                to_json(v, out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// Checks the field rules of `[endpoint.<section>]`.
pub(super) fn check_rules(
    cx: &mut RowCx<'_, '_>,
    section: &str,
    rules: &OrderedMap<RawField>,
) -> Vec<FieldRule> {
    rules
        .0
        .iter()
        .map(|(name, rule)| {
            check_rule(cx, section, name, rule);
            FieldRule {
                name: name.clone(),
                ty: rule.ty,
                required: rule.required,
                max_len: rule.max_len,
                min: rule.min,
                max: rule.max,
                one_of: rule.one_of.clone().unwrap_or_default(),
            }
        })
        .collect()
}

/// One field rule: its name, and which constraints its type takes.
fn check_rule(cx: &mut RowCx<'_, '_>, section: &str, name: &str, rule: &RawField) {
    let at = [section, name];
    let what = format!("[endpoint.{section}] field `{name}`");
    if name.is_empty() {
        cx.err(
            &at,
            format!("[endpoint.{section}] has a field with an empty name"),
        );
    }
    let ty = rule.ty.as_str();
    if rule.ty != FieldType::String {
        if rule.max_len.is_some() {
            cx.err(
                &at,
                format!("{what}: `max_len` only applies to strings, but the type is `{ty}`"),
            );
        }
        if rule.one_of.is_some() {
            cx.err(
                &at,
                format!("{what}: `one_of` only applies to strings, but the type is `{ty}`"),
            );
        }
    }
    if !rule.ty.is_numeric() && (rule.min.is_some() || rule.max.is_some()) {
        cx.err(
            &at,
            format!("{what}: `min`/`max` only apply to `integer` and `number` fields, but the type is `{ty}`"),
        );
    }
    for (key, bound) in [("min", rule.min), ("max", rule.max)] {
        if bound.is_some_and(|b| !b.is_finite()) {
            cx.err(&at, format!("{what}: `{key}` must be a finite number"));
        }
    }
    if let (Some(min), Some(max)) = (rule.min, rule.max) {
        if min > max {
            cx.err(
                &at,
                format!("{what}: `min` ({min}) is greater than `max` ({max})"),
            );
        }
    }
    if let Some(one_of) = &rule.one_of {
        check_one_of(cx, &at, &what, one_of, rule.max_len);
    }
}

/// A rule's `one_of`: not empty, no value twice, none longer than `max_len`.
fn check_one_of(
    cx: &mut RowCx<'_, '_>,
    at: &[&str],
    what: &str,
    one_of: &[String],
    max_len: Option<u32>,
) {
    if one_of.is_empty() {
        cx.err(
            at,
            format!("{what}: `one_of` is empty (leave it out to allow any value)"),
        );
    }
    let mut seen = BTreeSet::new();
    for v in one_of {
        if !seen.insert(v) {
            cx.err(at, format!("{what}: `one_of` lists `{v}` twice"));
        }
        if let Some(max_len) = max_len {
            if v.chars().count() > max_len as usize {
                cx.err(
                    at,
                    format!("{what}: `one_of` value `{v}` is longer than `max_len` ({max_len})"),
                );
            }
        }
    }
}
