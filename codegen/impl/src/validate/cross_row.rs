//! Checks across rows: unique ids, unique generated names, unique routes,
//! one `job_submit` row per job kind, every declared capability used.

use std::collections::HashMap;

use super::problems::{Spans, TableError};
use crate::table::*;

/// What the checks between rows know of one row.
pub(super) struct RowKey {
    /// Position in the table.
    pub index: usize,
    /// Line of the `[[endpoint]]` header.
    pub line: usize,
    /// Id, or `#n`.
    pub label: String,
    pub id: Option<String>,
    pub method: Option<Method>,
    /// Full path, when the area and path are readable.
    pub path: Option<String>,
    /// The capability, when it is spelled well.
    pub capability: Option<String>,
    pub mode: Option<Mode>,
    pub job: Option<String>,
}

/// Checks between rows: ids, generated names, routes, job kinds and the
/// use of `[capabilities]`. `complete` says every row was read (none was
/// left out of `rows` for not being a table).
pub(super) fn check_across_rows(
    rows: &[RowKey],
    complete: bool,
    capabilities: &[CapabilityDef],
    spans: &Spans<'_>,
    errors: &mut Vec<TableError>,
) {
    let mut report = Report { spans, errors };
    check_ids(rows, &mut report);
    check_routes(rows, &mut report);
    check_job_kinds(rows, &mut report);
    if complete {
        check_capabilities_used(rows, capabilities, &mut report);
    }
}

/// Where the problems go.
struct Report<'s, 'e> {
    spans: &'s Spans<'s>,
    errors: &'e mut Vec<TableError>,
}

impl Report<'_, '_> {
    /// A problem of `row`, at its key `key` (or its header).
    fn row(&mut self, row: &RowKey, key: &str, message: String) {
        self.errors.push(TableError {
            row: Some(row.label.clone()),
            line: self
                .spans
                .row_key_line(row.index, &[key])
                .or(Some(row.line)),
            message,
        });
    }
}

/// Ids are unique, and so are the names they generate.
fn check_ids(rows: &[RowKey], report: &mut Report<'_, '_>) {
    let mut ids: HashMap<&str, &RowKey> = HashMap::new();
    let mut names: HashMap<String, &RowKey> = HashMap::new();
    for row in rows {
        let Some(id) = &row.id else {
            continue;
        };
        if let Some(first) = ids.get(id.as_str()) {
            report.row(
                row,
                "id",
                format!(
                    "duplicate id `{id}` (first used by the row at line {})",
                    first.line
                ),
            );
            continue;
        }
        ids.insert(id, row);
        let name = static_name(id);
        if let Some(first) = names.get(&name) {
            report.row(
                row,
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

/// No two rows serve the same method on the same path shape (parameter
/// names and one trailing `/` ignored).
fn check_routes(rows: &[RowKey], report: &mut Report<'_, '_>) {
    let mut routes: HashMap<(Method, Vec<Result<&str, bool>>), &RowKey> = HashMap::new();
    for row in rows {
        let (Some(method), Some(path)) = (row.method, &row.path) else {
            continue;
        };
        let shape: Vec<Result<&str, bool>> = segments(path)
            .into_iter()
            .map(|s| match s {
                Segment::Static(s) => Ok(s),
                Segment::Param(_) => Err(false),
                Segment::Tail(_) => Err(true),
            })
            .collect();
        match routes.get(&(method, shape.clone())) {
            Some(first) => report.row(
                row,
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

/// `` `id` (line n) ``, for messages naming other rows.
fn named(row: &RowKey) -> String {
    format!("`{}` (line {})", row.label, row.line)
}

/// Every job kind has exactly one `job_submit` row and at most one
/// `job_get` row. Only rows of a job mode count (a `job` elsewhere is
/// reported on its row); a kind whose rows do not all have a readable mode
/// is left alone (the mode's problem is reported already).
fn check_job_kinds(rows: &[RowKey], report: &mut Report<'_, '_>) {
    let rows: Vec<&RowKey> = rows
        .iter()
        .filter(|r| r.mode.is_none_or(Mode::is_job))
        .collect();
    let mut kinds: Vec<&str> = Vec::new();
    for job in rows.iter().filter_map(|r| r.job.as_deref()) {
        if !kinds.contains(&job) {
            kinds.push(job);
        }
    }
    for kind in kinds {
        let of_kind: Vec<&RowKey> = rows
            .iter()
            .copied()
            .filter(|r| r.job.as_deref() == Some(kind))
            .collect();
        if of_kind.iter().any(|r| r.mode.is_none()) {
            continue;
        }
        let with = |mode: Mode| -> Vec<&RowKey> {
            of_kind
                .iter()
                .copied()
                .filter(|r| r.mode == Some(mode))
                .collect()
        };
        let submits = with(Mode::JobSubmit);
        if submits.is_empty() {
            let names: Vec<String> = of_kind.iter().map(|r| named(r)).collect();
            report.row(
                of_kind[0],
                "job",
                format!(
                    "job kind `{kind}` has no `job_submit` row (it is named by {}); each job kind needs exactly one",
                    names.join(", ")
                ),
            );
        }
        for (mode, most, extra) in [
            (Mode::JobSubmit, "exactly one", submits.get(1..)),
            (Mode::JobGet, "at most one", with(Mode::JobGet).get(1..)),
        ] {
            for row in extra.unwrap_or_default() {
                let first = with(mode)[0];
                report.row(
                    row,
                    "job",
                    format!(
                        "job kind `{kind}` already has a `{mode}` row, {}; a job kind has {most}",
                        named(first)
                    ),
                );
            }
        }
    }
}

/// Every capability `[capabilities]` declares is named by a row.
fn check_capabilities_used(
    rows: &[RowKey],
    capabilities: &[CapabilityDef],
    report: &mut Report<'_, '_>,
) {
    // A row with no readable capability might be the one that uses it.
    if rows.is_empty() || rows.iter().any(|r| r.capability.is_none()) {
        return;
    }
    for cap in capabilities {
        if !rows
            .iter()
            .any(|r| r.capability.as_deref() == Some(cap.name.as_str()))
        {
            report.errors.push(TableError {
                row: None,
                line: report.spans.top_key_line(&["capabilities", &cap.name]),
                message: format!(
                    "capability `{}` is declared in `[capabilities]` but no row uses it (remove it, or name it in a row's `capability`)",
                    cap.name
                ),
            });
        }
    }
}
