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
//! # Layout
//!
//! * this file: the entry [`parse_table`], [`TableError`], where problems go
//!   (line numbers, `did you mean`);
//! * `document`: the sections outside the rows (`[areas.*]`, `[bases.*]`,
//!   `[capabilities]`, `[resources]`, unknown top-level keys);
//! * `row`: one `[[endpoint]]` row, one function per part of it;
//! * `fields`: a row's body and query rules and its mapping toward the
//!   upstream (`rename`, `drop`, `set`, `file_field`);
//! * `upstream`: a row's upstream call and its path template's sources;
//! * `paths`: route paths, prefixes and upstream path templates;
//! * `facts`: the whole-table facts the runtime reads (`[unmatched]`,
//!   `[kinds.*]`, `[limits]`, `[purposes.*]`, `[prices]`, `[products]`,
//!   `[reconcile.*]`, `[job_ceilings]`);
//! * `cross_row`: checks between rows (duplicate ids, names and routes, job
//!   kinds, unused capabilities).
//!
//! Line numbers come from a second, span-keeping parse with `toml_edit`:
//! a row's line is the line of its `[[endpoint]]` header, and a problem
//! about one key points at that key's line where it can.

use std::fmt;

use toml_edit::{ImDocument, TableLike};

use crate::table::*;

mod cross_row;
mod document;
mod facts;
mod fields;
mod paths;
mod row;
mod upstream;

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

/// Runs every check; returns what could be resolved (only meaningful when
/// `errors` stays empty).
fn check(value: &toml::Table, spans: &Spans<'_>, errors: &mut Vec<TableError>) -> Table {
    let doc = document::read_document(value, spans, errors);
    let facts = facts::read_facts(value, spans, errors);
    let mut complete = true;
    let (rows, keys) = match value.get("endpoint") {
        None => {
            doc_err(
                errors,
                spans,
                &[],
                "the table has no `[[endpoint]]` rows".to_string(),
            );
            Default::default()
        }
        Some(toml::Value::Array(items)) => {
            if items.is_empty() {
                doc_err(
                    errors,
                    spans,
                    &["endpoint"],
                    "the table has no `[[endpoint]]` rows".to_string(),
                );
            }
            complete = items.iter().all(toml::Value::is_table);
            row::read_rows(items, &doc, spans, errors)
        }
        Some(_) => {
            doc_err(
                errors,
                spans,
                &["endpoint"],
                "`endpoint` must be an array of tables (`[[endpoint]]` rows)".to_string(),
            );
            Default::default()
        }
    };

    cross_row::check_across_rows(&keys, complete, &doc.capabilities, spans, errors);
    if complete {
        facts::check_against_rows(&facts, &rows, &doc.resources, spans, errors);
    }

    Table {
        areas: doc.areas,
        bases: doc.bases,
        rows,
        resources: doc.resources,
        capabilities: doc.capabilities,
        unmatched_errors: facts.unmatched_errors,
        kinds: facts.kinds,
        limits: facts.limits,
        purposes: facts.purposes,
        prices: facts.prices,
        upstream_products: facts.upstream_products,
        unit_products: facts.unit_products,
        job_ceilings: facts.job_ceilings,
    }
}
