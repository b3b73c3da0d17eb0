//! The soak's JSON document written to `--out` ([`SoakReport::json`]): the
//! same figures as the markdown, unrounded.

use serde_json::{json, Value};

use crate::report::object;

use super::report::{percentiles, ratio, SoakReport};
use super::settings::{CALIBRATION_CONCURRENCY, WINDOW};
use crate::load::Outcome;

impl SoakReport {
    /// The JSON document: the same figures, unrounded.
    pub fn json(&self) -> Value {
        let st = &self.settings;
        let calibration: Vec<Value> = self
            .calibration
            .iter()
            .map(|c| {
                let o = c.measured.as_ref();
                json!({"scenario": c.scenario.name(),
                    "concurrency": CALIBRATION_CONCURRENCY,
                    "measured": o.map(|o| outcome_json(o, o.elapsed.as_secs_f64())),
                    "soak_rate": c.rate, "soak_connections": c.connections})
            })
            .collect();
        let verdict: Vec<Value> = self.verdicts().into_iter().map(|v| v.json).collect();
        let sent: Vec<Value> = self
            .sent_rates()
            .into_iter()
            .map(|(s, rate, sent)| json!({"scenario": s.name(), "rate": rate, "sent_per_s": sent}))
            .collect();
        let mut doc = self.ctx.json();
        doc.extend(object(json!({
            "mode": "soak",
            "soak": {
                "minutes": st.minutes,
                "window_s": WINDOW.as_secs_f64(),
                "warmup_s": st.warmup.as_secs_f64(),
                "calibration_s": st.rate.is_none().then_some(st.calibration.as_secs_f64()),
                "rate": st.rate,
                "scenarios": self.calibration.iter().map(|c| c.scenario.name()).collect::<Vec<_>>(),
            },
            "calibration": calibration,
            "windows": self.windows_json(),
            "rss_start_kib": self.rss_start_kib,
            "rss_end_kib": self.rss_end_kib,
            "verdict": verdict,
            "sent": sent,
            "fell_behind": self.fell_behind(),
            "errors": self.errors(),
        })));
        Value::Object(doc)
    }

    /// The minutes as JSON.
    fn windows_json(&self) -> Vec<Value> {
        self.windows
            .iter()
            .enumerate()
            .map(|(k, w)| {
                let scenarios: Vec<Value> = self
                    .calibration
                    .iter()
                    .zip(&w.scenarios)
                    .map(|(c, o)| {
                        let mut v = outcome_json(o, w.seconds);
                        v["scenario"] = json!(c.scenario.name());
                        v
                    })
                    .collect();
                json!({"minute": k + 1, "seconds": w.seconds, "rss_kib": w.rss_kib,
                    "gateway_cpu_s": w.cpu_seconds, "gateway_cpu_pct": w.cpu_pct,
                    "load_and_sim_cpu_pct": w.load_cpu_pct,
                    "errors": w.errors(), "scenarios": scenarios})
            })
            .collect()
    }
}

/// An outcome's figures over `seconds`.
fn outcome_json(o: &Outcome, seconds: f64) -> Value {
    let lat = percentiles(o);
    json!({"requests": o.ok, "errors": o.errors, "error_samples": o.error_samples,
        "seconds": seconds, "requests_per_s": ratio(o.ok as f64, seconds),
        "p50_ms": lat.map(|l| l.0), "p99_ms": lat.map(|l| l.1)})
}
