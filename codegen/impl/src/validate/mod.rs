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
//! * this file: the entry [`parse_table`] and the run of every check;
//! * `problems`: [`TableError`] and where problems go (line numbers,
//!   `did you mean`);
//! * `document`: the sections outside the rows (`[areas.*]`, `[bases.*]`,
//!   `[capabilities]`, `[resources]`, unknown top-level keys);
//! * `row`: one `[[endpoint]]` row, one function per part of it (and the
//!   keys it may have, [`ROW_KEYS`]);
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

use toml_edit::ImDocument;

use crate::table::*;

mod cross_row;
mod document;
mod facts;
mod fields;
mod paths;
mod problems;
mod row;
mod upstream;

pub use problems::TableError;
use problems::{doc_err, line_of, Spans};
pub use row::{MAX_PARAMS, ROW_KEYS};

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
