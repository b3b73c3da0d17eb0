//! Reading and checking `endpoints.toml`: text → [`Table`] or every problem.
//!
//! The pipeline is `text → toml::Table → raw rows (serde) → checks → Table`.
//!
//! * Syntax errors stop at once (there is nothing to check without a tree).
//! * Each row is read on its own from its `toml::Value`, so one bad row does
//!   not hide the others. When a row does not deserialize as a whole, each of
//!   its keys is read alone: every bad key is reported (with its own line)
//!   and the good keys still take part in the checks.
//! * Every check runs on every row and pushes onto one list; nothing stops at
//!   the first problem.
//!
//! Line numbers come from a second, span-keeping parse with `toml_edit`:
//! a row's line is the line of its `[[endpoint]]` header, and a problem
//! about one key points at that key's line where it can.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use serde::Deserialize;
use toml_edit::{ImDocument, TableLike};

use crate::table::*;

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
    "upstream",
    "rename",
    "drop",
    "set",
    "body",
    "query",
];

/// Names the generated module defines besides the row statics.
const RESERVED_NAMES: &[&str] = &["ROUTES", "ROUTE_COUNT"];

/// One problem in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableError {
    /// The row's id (or `#n`, its position, when it has no readable id);
    /// `None` for problems outside the rows.
    pub row: Option<String>,
    /// 1-based line in the table, where known.
    pub line: Option<usize>,
    /// What is wrong, and where it helps, what to write instead.
    pub message: String,
}

impl TableError {
    /// `file:line: row `id`: message` (parts that are unknown are left out).
    pub fn render(&self, file: Option<&str>) -> String {
        let mut out = String::new();
        match (file, self.line) {
            (Some(file), Some(line)) => out.push_str(&format!("{file}:{line}: ")),
            (Some(file), None) => out.push_str(&format!("{file}: ")),
            (None, Some(line)) => out.push_str(&format!("line {line}: ")),
            (None, None) => {}
        }
        if let Some(row) = &self.row {
            out.push_str(&format!("row `{row}`: "));
        }
        out.push_str(&self.message);
        out
    }
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(None))
    }
}

impl std::error::Error for TableError {}

/// Parses and checks a table. See the module documentation.
pub fn parse_table(text: &str) -> Result<Table, Vec<TableError>> {
    let value: toml::Table = match toml::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Err(vec![TableError {
                row: None,
                line: e.span().map(|s| line_of(text, s.start)),
                message: format!("TOML syntax error: {}", e.message().trim_end()),
            }])
        }
    };
    let spans = Spans {
        text,
        doc: ImDocument::parse(text).ok(),
    };
    let mut errors = Vec::new();
    let table = check(&value, &spans, &mut errors);
    if errors.is_empty() {
        Ok(table)
    } else {
        // Stable: problems on the same line keep the order they were found in.
        errors.sort_by_key(|e| e.line.unwrap_or(usize::MAX));
        Err(errors)
    }
}

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Positions of keys and rows, from `toml_edit`'s span-keeping parse.
struct Spans<'a> {
    text: &'a str,
    doc: Option<ImDocument<&'a str>>,
}

impl Spans<'_> {
    fn line(&self, span: Option<std::ops::Range<usize>>) -> Option<usize> {
        span.map(|s| line_of(self.text, s.start))
    }

    /// Line of the deepest key of `path` found under `table`.
    fn key_line_in(&self, mut table: &dyn TableLike, path: &[&str]) -> Option<usize> {
        let mut best = None;
        for part in path {
            let Some((key, item)) = table.get_key_value(part) else {
                break;
            };
            best = self.line(key.span()).or(best);
            match item.as_table_like() {
                Some(inner) => table = inner,
                None => break,
            }
        }
        best
    }

    fn top_key_line(&self, path: &[&str]) -> Option<usize> {
        let doc = self.doc.as_ref()?;
        self.key_line_in(doc.as_table(), path)
    }

    fn row(&self, index: usize) -> Option<&toml_edit::Table> {
        self.doc
            .as_ref()?
            .get("endpoint")?
            .as_array_of_tables()?
            .get(index)
    }

    /// Line of row `index`'s `[[endpoint]]` header.
    fn row_line(&self, index: usize) -> Option<usize> {
        self.line(self.row(index)?.span())
    }

    fn row_key_line(&self, index: usize, path: &[&str]) -> Option<usize> {
        self.key_line_in(self.row(index)?, path)
    }
}

/// Splits toml's `message\nin `a.b`` error text into the message and the key path.
fn split_toml_error(e: &toml::de::Error) -> (String, Vec<String>) {
    let text = e.to_string();
    let text = text.trim_end();
    if let Some((msg, path)) = text.rsplit_once("\nin `") {
        if let Some(path) = path.strip_suffix('`') {
            return (
                msg.trim_end().to_string(),
                path.split('.').map(str::to_string).collect(),
            );
        }
    }
    (text.to_string(), Vec::new())
}

/// `` `a.b`: message `` for a deserialization error.
fn describe(path: &[String], msg: &str) -> String {
    if path.is_empty() {
        msg.to_string()
    } else {
        format!("`{}`: {}", path.join("."), msg)
    }
}

/// The candidate closest to `word` by edit distance, if it is close.
fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    fn distance(a: &str, b: &str) -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut prev: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut cur = vec![i + 1];
            for (j, cb) in b.iter().enumerate() {
                let sub = prev[j] + usize::from(ca != *cb);
                cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
            }
            prev = cur;
        }
        prev[b.len()]
    }
    candidates
        .iter()
        .map(|c| (distance(word, c), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Pushes a problem outside the rows, at the line of the key `path`.
fn doc_err(errors: &mut Vec<TableError>, spans: &Spans<'_>, path: &[&str], message: String) {
    errors.push(TableError {
        row: None,
        line: spans.top_key_line(path),
        message,
    });
}

/// Runs every check; returns what could be resolved (only meaningful when
/// `errors` stays empty).
fn check(value: &toml::Table, spans: &Spans<'_>, errors: &mut Vec<TableError>) -> Table {
    for key in value.keys() {
        if !matches!(key.as_str(), "areas" | "bases" | "resources" | "endpoint") {
            let hint = did_you_mean(key, &["areas", "bases", "resources", "endpoint"])
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            doc_err(
                errors,
                spans,
                &[key],
                format!("unknown top-level key `{key}`{hint}; the table has `[areas.*]`, `[bases.*]` and `[[endpoint]]` rows"),
            );
        }
    }

    let areas = read_areas(value.get("areas"), spans, errors);
    let bases = read_bases(value.get("bases"), spans, errors);
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

    let mut rows: Vec<Row> = Vec::new();
    // What the checks between rows need, for every row, resolved or not.
    let mut keys: Vec<RowKey> = Vec::new();
    match value.get("endpoint") {
        None => doc_err(
            errors,
            spans,
            &[],
            "the table has no `[[endpoint]]` rows".to_string(),
        ),
        Some(toml::Value::Array(items)) => {
            if items.is_empty() {
                doc_err(
                    errors,
                    spans,
                    &["endpoint"],
                    "the table has no `[[endpoint]]` rows".to_string(),
                );
            }
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
                let known = Known {
                    areas: &areas,
                    bases: &bases,
                    resources: &resources,
                    broken_areas: &broken_areas,
                    broken_bases: &broken_bases,
                };
                let prefix = raw
                    .area
                    .and_then(|a| areas.iter().find(|d| d.name == a))
                    .map(|a| a.prefix.as_str());
                let path = match (prefix, raw.path.as_deref()) {
                    (Some(prefix), Some(path)) if check_route_path(path).is_ok() => {
                        Some(format!("{prefix}{path}"))
                    }
                    _ => None,
                };
                keys.push(RowKey {
                    index,
                    line: line.unwrap_or(0),
                    label: cx.label.clone(),
                    id: raw.id.clone().filter(|id| !id.is_empty()),
                    method: raw.method,
                    path,
                });
                if let Some(resolved) = resolve_row(&mut cx, row, &raw, &known) {
                    rows.push(resolved);
                }
            }
        }
        Some(_) => doc_err(
            errors,
            spans,
            &["endpoint"],
            "`endpoint` must be an array of tables (`[[endpoint]]` rows)".to_string(),
        ),
    }

    check_across_rows(&keys, spans, errors);

    Table {
        areas,
        bases,
        rows,
        resources,
    }
}

/// A resource kind: lower-case letters and `_`.
fn valid_kind(kind: &str) -> bool {
    !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

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
        if !raw.prefix.is_empty() {
            let mut problems = Vec::new();
            if !raw.prefix.starts_with('/') {
                problems.push(format!("prefix `{}` must start with `/`", raw.prefix));
            } else if raw.prefix.ends_with('/') {
                problems.push(format!(
                    "prefix `{}` must not end with `/` (rows' paths start with one)",
                    raw.prefix
                ));
            } else {
                for seg in raw.prefix[1..].split('/') {
                    if let Some(p) = static_segment_problem(seg) {
                        problems.push(format!("prefix `{}`: {p}", raw.prefix));
                    }
                }
            }
            for p in problems {
                doc_err(
                    errors,
                    spans,
                    &["areas", name, "prefix"],
                    format!("[areas.{name}]: {p}"),
                );
            }
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

/// Where a row's problems go.
struct RowCx<'s, 'e> {
    /// The row's id, or `#n` until it is known.
    label: String,
    index: usize,
    /// Line of the `[[endpoint]]` header.
    line: Option<usize>,
    spans: &'s Spans<'s>,
    errors: &'e mut Vec<TableError>,
}

impl RowCx<'_, '_> {
    /// Reports a problem at the line of `key` (a key path inside the row),
    /// or at the row's header when the key is not found.
    fn err(&mut self, key: &[&str], message: impl Into<String>) {
        let line = self.spans.row_key_line(self.index, key).or(self.line);
        self.errors.push(TableError {
            row: Some(self.label.clone()),
            line,
            message: message.into(),
        });
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

fn is_ident(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    name != "_" && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Characters allowed in a static path segment: RFC 3986 `pchar` without
/// percent-encoding (the matcher compares raw request segments).
fn static_segment_problem(seg: &str) -> Option<String> {
    if seg.is_empty() {
        return Some("empty segment (`//`)".to_string());
    }
    if let Some(bad) = seg
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@".contains(*c)))
    {
        return Some(format!(
            "segment `{seg}` contains `{bad}`, which is not allowed in a route path"
        ));
    }
    None
}

/// Checks a row's path; returns its parameter names, or the problems.
fn check_route_path(path: &str) -> Result<Vec<String>, Vec<String>> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(vec![format!("path `{path}` must start with `/`")]);
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let mut params: Vec<String> = Vec::new();
    let mut problems = Vec::new();
    if rest.is_empty() {
        return Ok(params);
    }
    for seg in rest.split('/') {
        if seg.contains(['{', '}']) {
            let inner = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}'));
            match inner {
                Some(name) if !name.contains(['{', '}']) => {
                    if !is_ident(name) {
                        problems.push(format!(
                            "path parameter `{{{name}}}` is not an identifier (letters, digits, `_`)"
                        ));
                    } else if params.iter().any(|p| p == name) {
                        problems.push(format!("duplicate path parameter `{{{name}}}` in `{path}`"));
                    } else {
                        params.push(name.to_string());
                    }
                }
                _ => problems.push(format!(
                    "segment `{seg}` of `{path}` is malformed: a parameter must be a whole segment `{{name}}`"
                )),
            }
        } else if let Some(p) = static_segment_problem(seg) {
            problems.push(format!("path `{path}`: {p}"));
        }
    }
    if problems.is_empty() {
        Ok(params)
    } else {
        Err(problems)
    }
}

/// The `{name}` placeholders of an upstream path template, or its problems.
fn template_vars(path: &str) -> Result<Vec<String>, Vec<String>> {
    let mut problems = Vec::new();
    if !path.starts_with('/') {
        problems.push(format!("upstream path `{path}` must start with `/`"));
    }
    let mut vars: Vec<String> = Vec::new();
    let mut rest = path;
    while let Some(pos) = rest.find(['{', '}']) {
        if rest[pos..].starts_with('}') {
            problems.push(format!("upstream path `{path}` has a `}}` without `{{`"));
            break;
        }
        let after = &rest[pos + 1..];
        let Some(end) = after.find('}') else {
            problems.push(format!("upstream path `{path}` has a `{{` without `}}`"));
            break;
        };
        let name = &after[..end];
        if !is_ident(name) {
            problems.push(format!(
                "upstream path `{path}`: placeholder `{{{name}}}` is not an identifier"
            ));
        } else if !vars.iter().any(|v| v == name) {
            vars.push(name.to_string());
        }
        rest = &after[end + 1..];
    }
    if problems.is_empty() {
        Ok(vars)
    } else {
        Err(problems)
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
fn check_rules(
    cx: &mut RowCx<'_, '_>,
    section: &str,
    rules: &OrderedMap<RawField>,
) -> Vec<FieldRule> {
    let mut out = Vec::new();
    for (name, rule) in &rules.0 {
        let at = [section, name.as_str()];
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
            if one_of.is_empty() {
                cx.err(
                    &at,
                    format!("{what}: `one_of` is empty (leave it out to allow any value)"),
                );
            }
            let mut seen = BTreeSet::new();
            for v in one_of {
                if !seen.insert(v) {
                    cx.err(&at, format!("{what}: `one_of` lists `{v}` twice"));
                }
                if let Some(max_len) = rule.max_len {
                    if v.chars().count() > max_len as usize {
                        cx.err(
                            &at,
                            format!(
                                "{what}: `one_of` value `{v}` is longer than `max_len` ({max_len})"
                            ),
                        );
                    }
                }
            }
        }
        out.push(FieldRule {
            name: name.clone(),
            ty: rule.ty,
            required: rule.required,
            max_len: rule.max_len,
            min: rule.min,
            max: rule.max,
            one_of: rule.one_of.clone().unwrap_or_default(),
        });
    }
    out
}

/// What the rows can refer to.
struct Known<'a> {
    areas: &'a [AreaDef],
    bases: &'a [BaseDef],
    resources: &'a [(String, String)],
    /// Declared, but unreadable (already reported).
    broken_areas: &'a [AreaName],
    broken_bases: &'a [BaseName],
}

/// Every per-row check; `None` when a required key is missing or unreadable.
fn resolve_row(
    cx: &mut RowCx<'_, '_>,
    row: &toml::Table,
    raw: &RawEndpoint,
    known: &Known<'_>,
) -> Option<Row> {
    // Required keys. A key that is present but unreadable was reported already.
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

    if let Some(id) = &raw.id {
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

    if let Some(cap) = &raw.capability {
        if cap.trim().is_empty() {
            cx.err(&["capability"], "`capability` is empty");
        } else if cap.chars().any(char::is_whitespace) {
            cx.err(
                &["capability"],
                format!("capability `{cap}` contains white space"),
            );
        }
    }

    let area = raw.area.and_then(|name| {
        let found = known.areas.iter().find(|a| a.name == name);
        if found.is_none() && !known.broken_areas.contains(&name) {
            cx.err(
                &["area"],
                format!("area `{name}` is not declared in `[areas]`"),
            );
        }
        found
    });

    // Path and parameters.
    let mut params = None;
    if let Some(path) = &raw.path {
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
                params = Some(p);
            }
            Err(problems) => {
                for p in problems {
                    cx.err(&["path"], p);
                }
            }
        }
    }

    // Defaults from the area.
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

    // Billing, metering, gate and authentication.
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
    if let (Some(gate), Some(Billing::Free)) = (raw.gate, raw.billing) {
        cx.err(
            &["gate"],
            format!("gate `{gate}` on a `free` route: gates switch billed provider features on and off, a free route takes none"),
        );
    }
    if let (Some(billing), Some(a @ (Auth::None | Auth::Signature))) = (raw.billing, auth) {
        if billing != Billing::Free {
            cx.err(
                &["billing"],
                format!("billing `{billing}` needs a caller to charge, but auth is `{a}`"),
            );
        }
    }

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
    let rule = |rules: &[FieldRule], name: &str| rules.iter().find(|r| r.name == name).cloned();

    // Mode-specific requirements.
    if let Some(mode) = raw.mode {
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
            cx.err(&["job"], format!("`job` only applies to the job modes (job_submit, job_get, job_list), not `{mode}`"));
        }
        if mode == Mode::Fields {
            let ok = rule(&body_rules, "fields")
                .is_some_and(|r| r.ty == FieldType::Object && r.required);
            if !ok {
                cx.err(
                    &["body", "fields"],
                    "mode `fields` needs a required object field `fields` in `[endpoint.body]` (`fields = { type = \"object\", required = true }`)",
                );
            }
        }
        if mode != Mode::JobGet && row.contains_key("mirror") {
            cx.err(
                &["mirror"],
                format!("`mirror` only applies to mode `job_get`, not `{mode}`"),
            );
        }
    }

    if let Some(job) = &raw.job {
        if job.is_empty()
            || !job
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
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

    // The upstream call.
    let mut upstream = None;
    if let Some(up) = &raw.upstream {
        let base = known.bases.iter().find(|b| b.name == up.base);
        if base.is_none() && !known.broken_bases.contains(&up.base) {
            cx.err(
                &["upstream", "base"],
                format!("base `{}` is not declared in `[bases]`", up.base),
            );
        }
        match template_vars(&up.path) {
            Err(problems) => {
                for p in problems {
                    cx.err(&["upstream", "path"], p);
                }
            }
            Ok(vars) => {
                let route_params = params.clone().unwrap_or_default();
                for var in &vars {
                    let known = route_params.contains(var)
                        || up.from_query.contains(var)
                        || up.from_body.contains(var);
                    if !known && params.is_some() {
                        cx.err(
                            &["upstream", "path"],
                            format!(
                                "upstream path `{}` uses `{{{var}}}`, which is neither a path parameter of the route nor listed in `from_query`/`from_body`",
                                up.path
                            ),
                        );
                    }
                }
                for (list, names, section, rules) in [
                    ("from_query", &up.from_query, "query", &query_rules),
                    ("from_body", &up.from_body, "body", &body_rules),
                ] {
                    let at = ["upstream", list];
                    let mut seen = BTreeSet::new();
                    for name in names {
                        if !seen.insert(name) {
                            cx.err(&at, format!("`{list}` lists `{name}` twice"));
                            continue;
                        }
                        if !vars.contains(name) {
                            cx.err(
                                &at,
                                format!("`{list}` lists `{name}`, which the upstream path `{}` does not use", up.path),
                            );
                            continue;
                        }
                        if route_params.contains(name) {
                            cx.err(&at, format!("`{list}` lists `{name}`, which is already a path parameter of the route"));
                        }
                        if list == "from_query" && up.from_body.contains(name) {
                            cx.err(
                                &at,
                                format!("`{name}` is listed in both `from_query` and `from_body`"),
                            );
                        }
                        if !rule(rules, name).is_some_and(|r| r.required) {
                            cx.err(
                                &at,
                                format!(
                                    "`{list}` lists `{name}`, so `[endpoint.{section}]` must declare it as required (`{name} = {{ type = \"string\", required = true }}`)"
                                ),
                            );
                        }
                    }
                }
                if raw.mode.is_some_and(Mode::forwards_path) {
                    for p in &route_params {
                        if !vars.contains(p) {
                            cx.err(
                                &["upstream", "path"],
                                format!(
                                    "path parameter `{{{p}}}` is not used by the upstream path `{}` (mode `{}` forwards the route as it is)",
                                    up.path,
                                    raw.mode.map(Mode::as_str).unwrap_or_default()
                                ),
                            );
                        }
                    }
                }
            }
        }
        if let Some(base) = base {
            upstream = Some(Upstream {
                base: up.base,
                method: up.method,
                path: up.path.clone(),
                from_query: up.from_query.clone(),
                from_body: up.from_body.clone(),
                auth: base.auth,
            });
        }
    }

    // Mapping toward the upstream.
    let drop = raw.drop.clone().unwrap_or_default();
    {
        let mut seen = BTreeSet::new();
        for name in &drop {
            if name.is_empty() {
                cx.err(&["drop"], "`drop` lists an empty name");
            } else if !seen.insert(name) {
                cx.err(&["drop"], format!("`drop` lists `{name}` twice"));
            }
        }
    }
    let rename: Vec<(String, String)> = raw.rename.clone().map(|r| r.0).unwrap_or_default();
    {
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
    if let Some(field) = &raw.file_field {
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
        if rule(&body_rules, "audio_url").is_none() && raw.mode != Some(Mode::Fields) {
            cx.err(
                &["file_field"],
                "`file_field` sends the body's `audio_url` as a file, so `[endpoint.body]` must declare `audio_url`",
            );
        }
    }

    if let Some(kind) = &raw.resource {
        if !valid_kind(kind) {
            cx.err(
                &["resource"],
                format!("`resource` `{kind}` must be lower-case letters and `_`"),
            );
        }
    }
    // Owner checks: every path parameter named in `[resources]`, the last
    // path parameter as the row's own `resource`, `from_query` variables and
    // body fields named in `[resources]` (e.g. the `voice_uuid` a synthesis uses).
    let mut owner_checks: Vec<(String, String)> = Vec::new();
    if let Some(ps) = &params {
        for (i, p) in ps.iter().enumerate() {
            let mapped = known
                .resources
                .iter()
                .find(|(name, _)| name == p)
                .map(|(_, k)| k.clone());
            let own = (i + 1 == ps.len()).then(|| raw.resource.clone()).flatten();
            if let Some(kind) = mapped.or(own) {
                owner_checks.push((p.clone(), kind));
            }
        }
    }
    if let Some(up) = &raw.upstream {
        for q in &up.from_query {
            if let Some((_, k)) = known.resources.iter().find(|(name, _)| name == q) {
                owner_checks.push((q.clone(), k.clone()));
            }
        }
    }
    for rule in &body_rules {
        let named = owner_checks.iter().any(|(p, _)| *p == rule.name);
        if let (false, Some((_, k))) = (
            named,
            known.resources.iter().find(|(name, _)| *name == rule.name),
        ) {
            owner_checks.push((rule.name.clone(), k.clone()));
        }
    }

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
        rename,
        drop,
        set: if row.contains_key("set") {
            Some(set?)
        } else {
            None
        },
        file_field: raw.file_field.clone(),
        job: raw.job.clone(),
        mirror: raw.mirror.clone(),
        retention_days: raw.retention_days,
        summary: raw.summary.clone().unwrap_or_default(),
    })
}

/// What the checks between rows know of one row.
struct RowKey {
    /// Position in the table.
    index: usize,
    /// Line of the `[[endpoint]]` header.
    line: usize,
    /// Id, or `#n`.
    label: String,
    id: Option<String>,
    method: Option<Method>,
    /// Full path, when the area and path are readable.
    path: Option<String>,
}

/// Checks between rows: ids, generated names, routes.
fn check_across_rows(rows: &[RowKey], spans: &Spans<'_>, errors: &mut Vec<TableError>) {
    let mut ids: HashMap<&str, &RowKey> = HashMap::new();
    let mut names: HashMap<String, &RowKey> = HashMap::new();
    let mut routes: HashMap<(Method, Vec<Option<&str>>), &RowKey> = HashMap::new();
    for row in rows {
        let mut push = |key: &str, message: String| {
            errors.push(TableError {
                row: Some(row.label.clone()),
                line: spans.row_key_line(row.index, &[key]).or(Some(row.line)),
                message,
            });
        };
        if let Some(id) = &row.id {
            if let Some(first) = ids.get(id.as_str()) {
                push(
                    "id",
                    format!(
                        "duplicate id `{id}` (first used by the row at line {})",
                        first.line
                    ),
                );
            } else {
                ids.insert(id, row);
                let name = static_name(id);
                if let Some(first) = names.get(&name) {
                    push(
                        "id",
                        format!(
                            "id `{id}` and id `{}` (line {}) both generate the name `{name}`",
                            first.label, first.line
                        ),
                    );
                } else {
                    names.insert(name, row);
                }
            }
        }
        let (Some(method), Some(path)) = (row.method, &row.path) else {
            continue;
        };
        // Same method and same shape (parameter names and one trailing `/` ignored).
        let shape: Vec<Option<&str>> = segments(path)
            .into_iter()
            .map(|s| match s {
                Segment::Static(s) => Some(s),
                Segment::Param(_) => None,
            })
            .collect();
        match routes.get(&(method, shape.clone())) {
            Some(first) => push(
                "path",
                format!(
                    "duplicate method and path: {method} {path} is already served by row `{}` (line {}, {})",
                    first.label,
                    first.line,
                    first.path.as_deref().unwrap_or_default()
                ),
            ),
            None => {
                routes.insert((method, shape), row);
            }
        }
    }
}
