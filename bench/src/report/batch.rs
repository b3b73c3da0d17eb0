//! The `batch` scenario's figures read across its rows
//! ([`crate::batch`]): the batch's lines/s against the closed loop's, and
//! `chat` alone against `chat` while a batch runs, as markdown tables, a
//! JSON object and reported checks (never a limit: the bench asserts no
//! timing).

use serde_json::{json, Value};

use super::checks::Check;
use super::format::f_opt;
use super::run::Report;
use crate::row::{f_ms, Row, Target};

/// `chat` at one concurrency, alone and while a batch ran, and the batch's
/// progress meanwhile.
struct Busy<'a> {
    c: usize,
    idle: Option<&'a Row>,
    busy: Option<&'a Row>,
    bg: Option<&'a Row>,
}

impl Report {
    /// The gateway's row of `scenario` (the first, whatever its concurrency).
    fn batch_rows(&self, scenario: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.scenario == scenario && r.target == Target::Gateway)
    }

    /// The batch's and the closed loop's rows, and the batch's lines/s
    /// over the loop's.
    fn batch_pair(&self) -> Option<(&Row, &Row, Option<f64>)> {
        let (b, l) = (self.batch_rows("batch")?, self.batch_rows("batch_loop")?);
        let ratio = (l.rps > 0.0 && b.requests > 0).then(|| b.rps / l.rps);
        Some((b, l, ratio))
    }

    /// `chat` alone and under a batch, per concurrency that ran.
    fn busy(&self) -> Vec<Busy<'_>> {
        self.plan
            .concurrency
            .iter()
            .map(|&c| Busy {
                c,
                idle: self.find("batch_chat_idle", Target::Gateway, c),
                busy: self.find("batch_chat_busy", Target::Gateway, c),
                bg: self.find("batch_bg", Target::Gateway, c),
            })
            .filter(|b| b.idle.is_some() || b.busy.is_some())
            .collect()
    }

    /// The batch tables, when the scenario ran.
    pub(super) fn batch_table(&self, s: &mut String) {
        let Some((b, l, ratio)) = self.batch_pair() else {
            return;
        };
        s.push_str("\n| batch | c | lines | s | lines/s | gateway CPU µs/line | errors |\n");
        s.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
        for (what, r) in [
            ("one batch, create → completed", b),
            ("closed loop at /api/v1/chat/completions", l),
        ] {
            s.push_str(&format!(
                "| {what} | {} | {} | {:.2} | {:.0} | {} | {} |\n",
                r.concurrency,
                r.requests,
                r.seconds,
                r.rps,
                f_opt(r.cpu_us_per_req, 0),
                r.errors
            ));
        }
        s.push_str(&format!(
            "\nBatch / closed loop lines/s: {}\n",
            ratio.map_or("—".into(), |r| format!("{r:.2}×"))
        ));
        let busy = self.busy();
        if busy.is_empty() {
            return;
        }
        s.push_str("\n| chat while a batch runs | c | req/s alone | p99 ms alone | req/s with a batch | p99 ms with a batch | p99 added ms | batch lines/s meanwhile | batch |\n");
        s.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
        for x in busy {
            let p99 = |r: Option<&Row>| r.and_then(|r| r.latency_ms).map(|l| l[1]);
            let rps = |r: Option<&Row>| f_opt(r.map(|r| r.rps), 0);
            let added = match (p99(x.busy), p99(x.idle)) {
                (Some(b), Some(i)) => f_ms(b - i),
                _ => "—".into(),
            };
            s.push_str(&format!(
                "| gateway | {} | {} | {} | {} | {} | {added} | {} | {} |\n",
                x.c,
                rps(x.idle),
                p99(x.idle).map_or("—".into(), f_ms),
                rps(x.busy),
                p99(x.busy).map_or("—".into(), f_ms),
                f_opt(x.bg.map(|r| r.rps), 1),
                x.bg.and_then(|r| r.note.as_deref()).unwrap_or("—"),
            ));
        }
    }

    /// The batch's figures as JSON (`null` when it did not run).
    pub(super) fn batch_json(&self) -> Value {
        let Some((b, l, ratio)) = self.batch_pair() else {
            return Value::Null;
        };
        let lat = |r: Option<&Row>| {
            r.map(|r| {
                json!({"requests_per_s": r.rps, "p50_ms": r.latency_ms.map(|l| l[0]),
                "p99_ms": r.latency_ms.map(|l| l[1]), "errors": r.errors})
            })
        };
        let busy: Vec<Value> = self
            .busy()
            .into_iter()
            .map(|x| {
                json!({
                    "concurrency": x.c,
                    "chat_alone": lat(x.idle),
                    "chat_with_batch": lat(x.busy),
                    "batch_lines_per_s_meanwhile": x.bg.map(|r| r.rps),
                    "batch_note": x.bg.and_then(|r| r.note.clone()),
                })
            })
            .collect();
        json!({
            "batch_concurrency": b.concurrency,
            "lines": b.requests,
            "batch_seconds": b.seconds,
            "batch_lines_per_s": b.rps,
            "batch_cpu_us_per_line": b.cpu_us_per_req,
            "closed_loop_lines_per_s": l.rps,
            "closed_loop_cpu_us_per_request": l.cpu_us_per_req,
            "batch_over_closed_loop": ratio,
            "chat_during_batch": busy,
        })
    }

    /// The batch's figures, reported (no limit).
    pub(super) fn batch_checks(&self, out: &mut Vec<Check>) {
        let Some((b, l, ratio)) = self.batch_pair() else {
            return;
        };
        out.push(Check {
            name: format!(
                "batch c={}: lines/s of one batch against the same lines in a closed loop",
                b.concurrency
            ),
            measured: format!(
                "{:.0} vs {:.0} lines/s ({})",
                b.rps,
                l.rps,
                ratio.map_or("—".into(), |r| format!("{r:.2}×"))
            ),
            limit: "reported".into(),
            met: None,
        });
        for x in self.busy() {
            let (Some(i), Some(w)) = (
                x.idle.and_then(|r| r.latency_ms),
                x.busy.and_then(|r| r.latency_ms),
            ) else {
                continue;
            };
            out.push(Check {
                name: format!("chat c={}: p99 while a batch runs against alone", x.c),
                measured: format!(
                    "{} vs {} ms (batch {} lines/s meanwhile)",
                    f_ms(w[1]),
                    f_ms(i[1]),
                    f_opt(x.bg.map(|r| r.rps), 1)
                ),
                limit: "reported".into(),
                met: None,
            });
        }
    }
}
