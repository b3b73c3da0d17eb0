//! A batch's input file read once, line by line, before anything runs:
//! every line a JSON object with a unique `custom_id`, `method` `POST`,
//! the batch's `url`, and a `body` valid for the line's route (its field
//! rules, no `stream` or `background`, a model of the route's type that
//! the caller's key may use). Line numbers count from 1.

use futures_util::StreamExt;
use serde_json::{json, Map, Value};

use crate::ctx::Ctx;
use gateway_base::errors::ApiError;
use gateway_base::spec::{EndpointSpec, Mode};
use gateway_models::providers::{ModelType, Op};
use gateway_store::NewLine;

/// Most errors a failed batch lists (the count of the others is said).
const MAX_ERRORS: usize = 1000;

/// What the input file held: its lines, or why the batch fails.
pub(super) struct Input {
    pub lines: Vec<NewLine>,
    /// OpenAI's `errors.data`: `{code, message, param, line}`.
    pub errors: Vec<Value>,
}

/// The model type and operation of a batchable row's mode.
pub(super) fn model_of(mode: Mode) -> Option<(ModelType, Op)> {
    match mode {
        Mode::Chat | Mode::Responses => Some((ModelType::Chat, Op::Chat)),
        Mode::Completion => Some((ModelType::Completion, Op::Completion)),
        Mode::Embedding => Some((ModelType::Embedding, Op::Embedding)),
        _ => None,
    }
}

/// Reads the object `key` line by line (blank lines skipped), checking
/// each for `url` on `row`.
pub(super) async fn read(
    ctx: &Ctx,
    key: &str,
    url: &str,
    row: &'static EndpointSpec,
) -> Result<Input, ApiError> {
    let max_lines = ctx.gw.config.batches.max_lines;
    let max_line = ctx.gw.config.max_json_bytes;
    let object =
        ctx.gw.objects.get(key, None).await.map_err(|e| {
            crate::generated::stored_failed("reading a batch's input file".into(), e)
        })?;
    let mut stream = object.stream;
    let mut check = Check {
        ctx,
        url,
        row,
        seen: std::collections::HashSet::new(),
        input: Input {
            lines: Vec::new(),
            errors: Vec::new(),
        },
        more_errors: 0,
    };
    let mut pending: Vec<u8> = Vec::new();
    let mut number = 0i64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::internal("reading a batch's input file", e))?;
        pending.extend_from_slice(&chunk);
        // The whole lines of what arrived, then what is left of the last
        // kept for the next chunk (one shift per chunk, not per line).
        let mut start = 0;
        while let Some(end) = pending[start..].iter().position(|b| *b == b'\n') {
            number += 1;
            check.line(number, &pending[start..start + end]);
            start += end + 1;
        }
        pending.drain(..start);
        if pending.len() > max_line {
            number += 1;
            check.error(
                number,
                "line_too_long",
                format!("a line is longer than {max_line} bytes"),
                None,
            );
            return Ok(check.finish());
        }
        if check.input.lines.len() > max_lines {
            break;
        }
    }
    if !pending.is_empty() {
        number += 1;
        check.line(number, &pending);
    }
    let n = check.input.lines.len();
    if n == 0 && check.input.errors.is_empty() {
        check.error(
            0,
            "empty_file",
            "the input file has no requests".into(),
            None,
        );
    } else if n > max_lines {
        check.error(
            0,
            "too_many_requests",
            format!("the input file has more than {max_lines} requests (GATEWAY_BATCH_MAX_LINES)"),
            None,
        );
    }
    Ok(check.finish())
}

/// The lines read so far and the checks of the next.
struct Check<'a> {
    ctx: &'a Ctx,
    url: &'a str,
    row: &'static EndpointSpec,
    seen: std::collections::HashSet<String>,
    input: Input,
    more_errors: usize,
}

impl Check<'_> {
    fn error(&mut self, line: i64, code: &str, message: String, param: Option<&str>) {
        if self.input.errors.len() >= MAX_ERRORS {
            self.more_errors += 1;
            return;
        }
        let line = (line > 0).then_some(line);
        self.input
            .errors
            .push(json!({"code": code, "message": message, "param": param, "line": line}));
    }

    fn finish(mut self) -> Input {
        if self.more_errors > 0 {
            let n = self.more_errors;
            self.input.errors.push(json!({
                "code": "too_many_errors",
                "message": format!("{n} more lines are invalid"),
                "param": null,
                "line": null,
            }));
        }
        if !self.input.errors.is_empty() {
            self.input.lines.clear();
        }
        self.input
    }

    /// Checks line `n` (its bytes without the newline).
    fn line(&mut self, n: i64, text: &[u8]) {
        if text.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match self.parse(text) {
            Ok((custom_id, body)) => self.input.lines.push(NewLine {
                line: n,
                custom_id,
                body,
            }),
            Err((code, param, message)) => self.error(n, code, message, param),
        }
    }

    /// The line's `custom_id` and body (JSON text), or its error.
    fn parse(
        &mut self,
        text: &[u8],
    ) -> Result<(String, String), (&'static str, Option<&'static str>, String)> {
        let bad = |code, param, m: &str| Err((code, param, m.to_owned()));
        let mut v: Map<String, Value> = match serde_json::from_slice(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return bad("invalid_json_line", None, "a line must be a JSON object"),
            Err(e) => return Err(("invalid_json_line", None, format!("not valid JSON: {e}"))),
        };
        let custom_id = match v.get("custom_id").and_then(Value::as_str) {
            Some(c) if !c.is_empty() && c.len() <= 512 => c.to_owned(),
            _ => {
                return bad(
                    "missing_required_parameter",
                    Some("custom_id"),
                    "custom_id: a string of 1 to 512 characters is required",
                )
            }
        };
        if v.get("method").and_then(Value::as_str) != Some("POST") {
            return bad("invalid_method", Some("method"), "method: must be POST");
        }
        if v.get("url").and_then(Value::as_str) != Some(self.url) {
            let m = format!("url: must be the batch's endpoint, {}", self.url);
            return Err(("mismatched_url", Some("url"), m));
        }
        let Some(Value::Object(body)) = v.remove("body") else {
            return bad(
                "missing_required_parameter",
                Some("body"),
                "body: a JSON object is required",
            );
        };
        self.body(&body)
            .map_err(|m| ("invalid_request", Some("body"), m))?;
        if !self.seen.insert(custom_id.clone()) {
            let m = format!("custom_id: {custom_id:?} is used by an earlier line");
            return Err(("duplicate_custom_id", Some("custom_id"), m));
        }
        Ok((custom_id, Value::Object(body).to_string()))
    }

    /// The body as the route reads it: its field rules, no stream, a
    /// model the caller's key may use.
    fn body(&self, body: &Map<String, Value>) -> Result<(), String> {
        gateway_base::validate::body(self.row.body, body)
            .map_err(|e| format!("body: {}", e.message()))?;
        for flag in ["stream", "background"] {
            if body.get(flag).and_then(Value::as_bool) == Some(true) {
                return Err(format!("body.{flag}: a batch's requests cannot use it"));
            }
        }
        if !body.get("model").is_some_and(Value::is_string) {
            return Err("body.model: required".into());
        }
        let (want, op) = model_of(self.row.mode).ok_or_else(|| "not a batch route".to_owned())?;
        crate::model_call::resolve(&self.ctx.caller(), body, want, op)
            .map(drop)
            .map_err(|e| format!("body.model: {}", e.message()))
    }
}
