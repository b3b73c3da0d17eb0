//! The JSON document written to `--out` ([`Report::json`]): the same
//! figures as the markdown, unrounded, with the checks.

use serde_json::{json, Value};

use super::run::{object, Report};
use crate::row::Row;

impl Report {
    /// The JSON document.
    pub fn json(&self) -> Value {
        let rows = self.json_rows(&self.rows);
        let checks: Vec<Value> = self
            .checks()
            .into_iter()
            .map(|c| json!({"target": c.name, "measured": c.measured, "limit": c.limit, "met": c.met}))
            .collect();
        let ratios: Vec<Value> = self
            .billed_to_free()
            .into_iter()
            .map(|(c, t, r)| json!({"concurrency": c, "target": t.name(), "billed_over_free_throughput": r}))
            .collect();
        let mut doc = self.ctx.json();
        doc.extend(object(json!({
            "plan": {
                "scenarios": self.plan.scenarios.iter().map(|s| s.name()).collect::<Vec<_>>(),
                "concurrency": self.plan.concurrency,
                "duration_s": self.plan.duration.as_secs_f64(),
                "warmup_s": self.plan.warmup.as_secs_f64(),
                "open_loop_rate": self.plan.rate,
                "upload_bytes": self.plan.upload_bytes,
            },
            "rows": rows,
            "equal_load": self.equal.as_ref().map(|e| json!({"rate": e.rate, "rows": self.json_rows(&e.rows)})),
            "other_sync": self.second.as_ref().map(|s| json!({"db_sync": s.sync, "rows": self.json_rows(&s.rows)})),
            "billed_over_free": ratios,
            "batch": self.batch_json(),
            "targets": checks,
            "errors": self.errors(),
        })));
        Value::Object(doc)
    }

    /// Rows as JSON (overheads against the main runs' direct rows).
    fn json_rows(&self, rows: &[Row]) -> Vec<Value> {
        rows.iter()
            .map(|r| {
                let l = r.latency_ms;
                let o = self.overhead(r);
                json!({
                    "scenario": r.scenario,
                    "target": r.target.name(),
                    "concurrency": r.concurrency,
                    "requests": r.requests,
                    "errors": r.errors,
                    "error_samples": r.error_samples,
                    "seconds": r.seconds,
                    "requests_per_s": r.rps,
                    "latency_ms": l.map(|l| json!({"p50": l[0], "p99": l[1], "p99_9": l[2], "max": l[3], "mean": l[4]})),
                    "first_byte_ms": r.ttfb_ms.map(|l| json!({"p50": l[0], "p99": l[1], "p99_9": l[2], "max": l[3], "mean": l[4]})),
                    "overhead_ms": o.map(|o| json!({"p50": o[0], "p99": o[1], "p99_9": o[2]})),
                    "cpu_us_per_request": r.cpu_us_per_req,
                    "sim_cpu_us_per_request": r.sim_cpu_us_per_req,
                    "peak_rss_kib": r.peak_rss_kib,
                    "start_rss_kib": r.start_rss_kib,
                    "upload_mb_per_s": r.upload.map(|u| u.0),
                    "upload_file_bytes": r.upload.map(|u| u.1),
                    "note": r.note,
                })
            })
            .collect()
    }
}
