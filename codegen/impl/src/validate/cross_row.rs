//! Checks across rows: unique ids, unique generated names, unique routes.

use std::collections::HashMap;

use super::{Spans, TableError};
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
}

/// Checks between rows: ids, generated names, routes.
pub(super) fn check_across_rows(rows: &[RowKey], spans: &Spans<'_>, errors: &mut Vec<TableError>) {
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
