//! Where the table's problems go: [`TableError`], the lines of keys and
//! rows ([`Spans`]), a row's problems ([`RowCx`]), and `did you mean`.

use std::fmt;

use toml_edit::{ImDocument, TableLike};

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

/// 1-based line of a byte offset.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Positions of keys and rows, from `toml_edit`'s span-keeping parse.
pub(super) struct Spans<'a> {
    pub(super) text: &'a str,
    pub(super) doc: Option<ImDocument<&'a str>>,
}

impl Spans<'_> {
    pub(super) fn line(&self, span: Option<std::ops::Range<usize>>) -> Option<usize> {
        span.map(|s| line_of(self.text, s.start))
    }

    /// Line of the deepest key of `path` found under `table`.
    pub(super) fn key_line_in(&self, mut table: &dyn TableLike, path: &[&str]) -> Option<usize> {
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

    pub(super) fn top_key_line(&self, path: &[&str]) -> Option<usize> {
        let doc = self.doc.as_ref()?;
        self.key_line_in(doc.as_table(), path)
    }

    pub(super) fn row(&self, index: usize) -> Option<&toml_edit::Table> {
        self.doc
            .as_ref()?
            .get("endpoint")?
            .as_array_of_tables()?
            .get(index)
    }

    /// Line of row `index`'s `[[endpoint]]` header.
    pub(super) fn row_line(&self, index: usize) -> Option<usize> {
        self.line(self.row(index)?.span())
    }

    pub(super) fn row_key_line(&self, index: usize, path: &[&str]) -> Option<usize> {
        self.key_line_in(self.row(index)?, path)
    }
}

/// Splits toml's `message\nin `a.b`` error text into the message and the key path.
pub(super) fn split_toml_error(e: &toml::de::Error) -> (String, Vec<String>) {
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
pub(super) fn describe(path: &[String], msg: &str) -> String {
    if path.is_empty() {
        msg.to_string()
    } else {
        format!("`{}`: {}", path.join("."), msg)
    }
}

/// The candidate closest to `word` by edit distance, if it is close.
pub(super) fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
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
pub(super) fn doc_err(
    errors: &mut Vec<TableError>,
    spans: &Spans<'_>,
    path: &[&str],
    message: String,
) {
    errors.push(TableError {
        row: None,
        line: spans.top_key_line(path),
        message,
    });
}

/// Where a row's problems go.
pub(super) struct RowCx<'s, 'e> {
    /// The row's id, or `#n` until it is known.
    pub(super) label: String,
    pub(super) index: usize,
    /// Line of the `[[endpoint]]` header.
    pub(super) line: Option<usize>,
    pub(super) spans: &'s Spans<'s>,
    pub(super) errors: &'e mut Vec<TableError>,
}

impl RowCx<'_, '_> {
    /// Reports a problem at the line of `key` (a key path inside the row),
    /// or at the row's header when the key is not found.
    pub(super) fn err(&mut self, key: &[&str], message: impl Into<String>) {
        let line = self.spans.row_key_line(self.index, key).or(self.line);
        self.errors.push(TableError {
            row: Some(self.label.clone()),
            line,
            message: message.into(),
        });
    }
}
