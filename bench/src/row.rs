//! One run's result: a [`Row`] (scenario, [`Target`], concurrency,
//! latency and time-to-first-byte percentiles, CPU time and RSS of the
//! process under test, upload throughput), built from a load run's outcome.

use std::time::Duration;

use hdrhistogram::Histogram;

use crate::load::Outcome;
use crate::measure::ProbeResult;

/// Where a run's requests went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Straight at the simulator.
    Direct,
    /// Through the bare forwarder.
    Forwarder,
    /// Through the gateway.
    Gateway,
}

impl Target {
    /// Every target, in running order.
    pub const ALL: [Target; 3] = [Target::Direct, Target::Forwarder, Target::Gateway];

    /// Its name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Target::Direct => "direct",
            Target::Forwarder => "forwarder",
            Target::Gateway => "gateway",
        }
    }
}

/// The result of one run.
#[derive(Clone, Debug)]
pub struct Row {
    /// Scenario name.
    pub scenario: &'static str,
    /// Target.
    pub target: Target,
    /// Workers (connections).
    pub concurrency: usize,
    /// Successful measured requests.
    pub requests: u64,
    /// Failed requests (must be 0).
    pub errors: u64,
    /// The first few error messages.
    pub error_samples: Vec<String>,
    /// Measured seconds.
    pub seconds: f64,
    /// Successful requests per second.
    pub rps: f64,
    /// Latency percentiles and mean (ms): p50, p99, p99.9, max, mean.
    pub latency_ms: Option<[f64; 5]>,
    /// Time to the answer's first body byte, same percentiles (ms).
    pub ttfb_ms: Option<[f64; 5]>,
    /// CPU time of the process under test per request (µs); `None` for direct.
    pub cpu_us_per_req: Option<f64>,
    /// CPU time of the simulator per request (µs).
    pub sim_cpu_us_per_req: Option<f64>,
    /// Peak RSS of the process under test in the run (KiB).
    pub peak_rss_kib: Option<u64>,
    /// RSS of the process under test when the run started (KiB).
    pub start_rss_kib: Option<u64>,
    /// Upload throughput (MB/s) and file size (bytes), for uploads.
    pub upload: Option<(f64, u64)>,
    /// A remark on how the run went that is not an error (the `batch`
    /// scenario's: a background batch that ended before the load did).
    pub note: Option<String>,
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e6
}

fn latency(h: &Histogram<u64>) -> Option<[f64; 5]> {
    (!h.is_empty()).then(|| {
        [
            ms(h, 0.50),
            ms(h, 0.99),
            ms(h, 0.999),
            h.max() as f64 / 1e6,
            h.mean() / 1e6,
        ]
    })
}

fn per_req_us(cpu_seconds: f64, requests: u64) -> Option<f64> {
    (requests > 0).then(|| cpu_seconds * 1e6 / requests as f64)
}

impl Row {
    /// A row of a load run.
    pub fn from_outcome(
        scenario: &'static str,
        target: Target,
        concurrency: usize,
        o: &Outcome,
        proc_m: Option<ProbeResult>,
        sim_m: ProbeResult,
    ) -> Row {
        Row {
            scenario,
            target,
            concurrency,
            requests: o.ok,
            errors: o.errors,
            error_samples: o.error_samples.clone(),
            seconds: o.elapsed.as_secs_f64(),
            rps: o.rps(),
            latency_ms: latency(&o.hist),
            ttfb_ms: latency(&o.ttfb),
            cpu_us_per_req: proc_m.and_then(|m| per_req_us(m.cpu_seconds, o.ok)),
            sim_cpu_us_per_req: per_req_us(sim_m.cpu_seconds, o.ok),
            peak_rss_kib: proc_m.map(|m| m.peak_rss_kib),
            start_rss_kib: proc_m.map(|m| m.start_rss_kib),
            upload: None,
            note: None,
        }
    }

    /// A row of a batch (the `batch` scenario): `done` lines completed and
    /// `failed` failed over `elapsed`, `concurrency` lines at a time; no
    /// latency (a line's own time is the gateway's to know).
    pub fn from_batch(
        scenario: &'static str,
        concurrency: usize,
        (done, failed): (u64, u64),
        error_samples: Vec<String>,
        elapsed: Duration,
        m: Option<ProbeResult>,
    ) -> Row {
        let secs = elapsed.as_secs_f64();
        Row {
            scenario,
            target: Target::Gateway,
            concurrency,
            requests: done,
            errors: failed,
            error_samples,
            seconds: secs,
            rps: if secs > 0.0 { done as f64 / secs } else { 0.0 },
            latency_ms: None,
            ttfb_ms: None,
            cpu_us_per_req: m.and_then(|m| per_req_us(m.cpu_seconds, done)),
            sim_cpu_us_per_req: None,
            peak_rss_kib: m.map(|m| m.peak_rss_kib),
            start_rss_kib: m.map(|m| m.start_rss_kib),
            upload: None,
            note: None,
        }
    }

    /// A row of the upload scenario: `ok` uploads of `file_bytes` each.
    #[allow(clippy::too_many_arguments)]
    pub fn from_upload(
        target: Target,
        ok: u64,
        errors: u64,
        error_samples: Vec<String>,
        hist: Histogram<u64>,
        elapsed: Duration,
        file_bytes: u64,
        m: ProbeResult,
    ) -> Row {
        let secs = elapsed.as_secs_f64();
        let mbps = if secs > 0.0 {
            (ok * file_bytes) as f64 / 1e6 / secs
        } else {
            0.0
        };
        Row {
            scenario: "upload",
            target,
            concurrency: 1,
            requests: ok,
            errors,
            error_samples,
            seconds: secs,
            rps: if secs > 0.0 { ok as f64 / secs } else { 0.0 },
            latency_ms: latency(&hist),
            ttfb_ms: None,
            cpu_us_per_req: per_req_us(m.cpu_seconds, ok),
            sim_cpu_us_per_req: None,
            peak_rss_kib: Some(m.peak_rss_kib),
            start_rss_kib: Some(m.start_rss_kib),
            upload: Some((mbps, file_bytes)),
            note: None,
        }
    }

    /// A run that could not happen (counted as one error).
    pub fn failed(scenario: &'static str, target: Target, concurrency: usize, why: String) -> Row {
        eprintln!("  {scenario} {} c={concurrency}: {why}", target.name());
        Row {
            scenario,
            target,
            concurrency,
            requests: 0,
            errors: 1,
            error_samples: vec![why],
            seconds: 0.0,
            rps: 0.0,
            latency_ms: None,
            ttfb_ms: None,
            cpu_us_per_req: None,
            sim_cpu_us_per_req: None,
            peak_rss_kib: None,
            start_rss_kib: None,
            upload: None,
            note: None,
        }
    }

    /// One line for the progress log.
    pub fn progress_line(&self) -> String {
        let lat = self
            .latency_ms
            .map(|l| {
                format!(
                    "p50 {} p99 {} p99.9 {} ms",
                    f_ms(l[0]),
                    f_ms(l[1]),
                    f_ms(l[2])
                )
            })
            .unwrap_or_default();
        let up = self
            .upload
            .map(|(mbps, _)| format!(" {mbps:.1} MB/s"))
            .unwrap_or_default();
        let first = match self.ttfb_ms {
            Some(t) if matches!(self.scenario, "chat_stream" | "tts_stream") => {
                format!(" first byte p50 {} p99 {} ms", f_ms(t[0]), f_ms(t[1]))
            }
            _ => String::new(),
        };
        let errs = if self.errors > 0 {
            format!(
                " ERRORS {} (first: {})",
                self.errors,
                self.error_samples.first().map(String::as_str).unwrap_or("")
            )
        } else {
            String::new()
        };
        let note = self
            .note
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        format!(
            "{:<11} c={:<3} {:<9} {:>9.1} req/s {lat}{first}{up}{errs}{note}",
            self.scenario,
            self.concurrency,
            self.target.name(),
            self.rps
        )
    }
}

/// A formatted millisecond value (3 decimals below 10 ms).
pub fn f_ms(v: f64) -> String {
    if v.abs() < 10.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.1}")
    }
}
