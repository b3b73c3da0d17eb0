//! Results: one [`Row`] per run (in [`crate::row`]), the markdown tables printed to stdout, the
//! targets of the issue checked against the rows, and the JSON file.
//!
//! Overhead is the target's latency minus the direct run's at the same
//! scenario, concurrency and percentile. Times are in milliseconds, CPU time
//! in microseconds of the process under test (gateway or forwarder; the
//! simulator's own is reported beside it), RSS in MiB, upload throughput in
//! MB/s (10^6 bytes).

use serde_json::{json, Value};

use crate::measure::Machine;
use crate::procs::Pinning;
use crate::row::f_ms;
pub use crate::row::{Row, Target};
use crate::scenarios::Plan;

fn f_signed_ms(v: f64) -> String {
    if v >= 0.0 {
        format!("+{}", f_ms(v))
    } else {
        f_ms(v)
    }
}

fn f_opt(v: Option<f64>, decimals: usize) -> String {
    v.map(|v| format!("{v:.decimals$}"))
        .unwrap_or_else(|| "—".into())
}

fn mib(kib: Option<u64>) -> String {
    kib.map(|k| format!("{:.1}", k as f64 / 1024.0))
        .unwrap_or_else(|| "—".into())
}

/// One target of the issue, checked.
#[derive(Clone, Debug)]
pub struct Check {
    /// What is measured.
    pub name: String,
    /// The measured value, as text.
    pub measured: String,
    /// The limit, as text.
    pub limit: String,
    /// Met (`None`: only reported, or not measured in this run).
    pub met: Option<bool>,
}

/// Everything a run produced.
pub struct Report {
    /// The command line.
    pub command: String,
    /// The machine.
    pub machine: Machine,
    /// CPU pinning, when on.
    pub pinning: Option<Pinning>,
    /// Where the gateway and simulator binaries came from.
    pub bin_dir: String,
    /// File system of the gateway's data directory.
    pub data_fs: String,
    /// The gateway's database (SQLite, or PostgreSQL with a fresh schema).
    pub store: String,
    /// The main runs' `GATEWAY_DB_SYNC` (inherited; `full` when unset).
    pub sync: String,
    /// CPUs kept busy by other processes during the run, on average.
    pub others_cpus: Option<f64>,
    /// What was run.
    pub plan: Plan,
    /// The runs.
    pub rows: Vec<Row>,
    /// The runs of a second gateway under the other sync mode.
    pub second: Option<SyncRun>,
}

/// The gateway's runs under the other `GATEWAY_DB_SYNC` mode (free, billed
/// and chat at the highest concurrency): a regression of one mode against
/// the other shows in every full run.
pub struct SyncRun {
    /// Its `GATEWAY_DB_SYNC`.
    pub sync: String,
    /// The gateway's rows.
    pub rows: Vec<Row>,
}

impl Report {
    fn find(&self, scenario: &str, target: Target, c: usize) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.scenario == scenario && r.target == target && r.concurrency == c)
    }

    /// Latency minus the direct run's (p50, p99, p99.9).
    pub fn overhead(&self, row: &Row) -> Option<[f64; 3]> {
        if row.target == Target::Direct {
            return None;
        }
        let d = self
            .find(row.scenario, Target::Direct, row.concurrency)?
            .latency_ms?;
        let l = row.latency_ms?;
        Some([l[0] - d[0], l[1] - d[1], l[2] - d[2]])
    }

    /// All errors of all runs.
    pub fn errors(&self) -> u64 {
        let second = self.second.iter().flat_map(|s| &s.rows);
        self.rows.iter().chain(second).map(|r| r.errors).sum()
    }

    /// The other sync mode's checks: each row's throughput against the
    /// forwarder's of the main runs, and against the main gateway's.
    fn second_checks(&self, out: &mut Vec<Check>) {
        let Some(second) = &self.second else {
            return;
        };
        let (a, b) = (&self.sync, &second.sync);
        for r in &second.rows {
            let (s, c) = (r.scenario, r.concurrency);
            let share = if s == "billed" { 25 } else { 60 };
            if let Some(f) = self.find(s, Target::Forwarder, c) {
                out.push(Check {
                    name: format!(
                        "{s} c={c} (GATEWAY_DB_SYNC={b}): gateway throughput ≥ {share} % of forwarder's"
                    ),
                    measured: format!("{:.0} vs {:.0} req/s ({:.0} %)", r.rps, f.rps, pct(r.rps, f.rps)),
                    limit: format!("≥ {share} %"),
                    met: Some(r.rps * 100.0 >= share as f64 * f.rps),
                });
            }
            if let Some(g) = self.find(s, Target::Gateway, c) {
                let (normal, full) = if b == "normal" { (r, g) } else { (g, r) };
                out.push(Check {
                    name: format!(
                        "{s} c={c}: gateway under normal ≥ under full ({a} first, {b} second)"
                    ),
                    measured: format!(
                        "{:.0} vs {:.0} req/s; CPU {} vs {} µs/req",
                        normal.rps,
                        full.rps,
                        f_opt(normal.cpu_us_per_req, 0),
                        f_opt(full.cpu_us_per_req, 0)
                    ),
                    limit: "normal ≥ full".into(),
                    met: Some(normal.rps >= full.rps),
                });
            }
        }
    }

    /// The other sync mode's table.
    fn second_markdown(&self, s: &mut String) {
        let Some(second) = &self.second else {
            return;
        };
        s.push_str(&format!(
            "\nThe gateway under GATEWAY_DB_SYNC={} (a second gateway, fresh data; the table above ran under {}):\n\n",
            second.sync, self.sync
        ));
        s.push_str("| scenario | c | GATEWAY_DB_SYNC | req/s | p50 ms | p99 ms | CPU µs/req | % of forwarder | req/s under the first mode | peak RSS MiB | errors |\n");
        s.push_str("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &second.rows {
            let (p50, p99) = match r.latency_ms {
                Some(l) => (f_ms(l[0]), f_ms(l[1])),
                None => ("—".into(), "—".into()),
            };
            let fwd = self.find(r.scenario, Target::Forwarder, r.concurrency);
            let first = self.find(r.scenario, Target::Gateway, r.concurrency);
            s.push_str(&format!(
                "| {} | {} | {} | {:.0} | {p50} | {p99} | {} | {} | {} | {} | {} |\n",
                r.scenario,
                r.concurrency,
                second.sync,
                r.rps,
                f_opt(r.cpu_us_per_req, 0),
                fwd.map(|f| format!("{:.0} %", pct(r.rps, f.rps)))
                    .unwrap_or_else(|| "—".into()),
                first
                    .map(|g| format!("{:.0}", g.rps))
                    .unwrap_or_else(|| "—".into()),
                mib(r.peak_rss_kib),
                r.errors
            ));
        }
    }

    /// Gateway throughput of `billed` over `free`, per concurrency.
    pub fn billed_to_free(&self) -> Vec<(usize, Target, f64)> {
        let mut out = Vec::new();
        for &c in &self.plan.concurrency {
            for t in [Target::Forwarder, Target::Gateway] {
                if let (Some(b), Some(f)) = (self.find("billed", t, c), self.find("free", t, c)) {
                    if f.rps > 0.0 {
                        out.push((c, t, b.rps / f.rps));
                    }
                }
            }
        }
        out
    }

    /// The targets, checked against this run.
    pub fn checks(&self) -> Vec<Check> {
        let mut out = Vec::new();
        let lo = self.plan.concurrency.iter().copied().min().unwrap_or(1);
        let hi = self.plan.concurrency.iter().copied().max().unwrap_or(1);
        let pair = |s: &str, c: usize| {
            (
                self.find(s, Target::Forwarder, c),
                self.find(s, Target::Gateway, c),
            )
        };

        let sync = &self.sync;
        if let (Some(f), Some(g)) = pair("free", lo) {
            for (i, p) in [(0usize, "p50"), (1, "p99")] {
                if let (Some(fo), Some(go)) = (self.overhead(f), self.overhead(g)) {
                    out.push(Check {
                        name: format!(
                            "free c={lo}: gateway overhead {p} ≤ 1.3 × forwarder's \
                             (GATEWAY_DB_SYNC={sync}; the goal is under normal)"
                        ),
                        measured: format!(
                            "{} ms vs {} ms ({})",
                            f_signed_ms(go[i]),
                            f_signed_ms(fo[i]),
                            ratio_text(go[i], fo[i])
                        ),
                        limit: "≤ 1.3×".into(),
                        met: Some(go[i] <= 1.3 * fo[i].max(0.0)),
                    });
                }
            }
        }
        for (s, share) in [("free", 60), ("billed", 25), ("chat", 60)] {
            if let (Some(f), Some(g)) = pair(s, hi) {
                out.push(Check {
                    name: format!("{s} c={hi}: gateway throughput ≥ {share} % of forwarder's"),
                    measured: format!(
                        "{:.0} vs {:.0} req/s ({:.0} %)",
                        g.rps,
                        f.rps,
                        pct(g.rps, f.rps)
                    ),
                    limit: format!("≥ {share} %"),
                    met: Some(g.rps * 100.0 >= share as f64 * f.rps),
                });
            }
        }
        if let (Some(f), Some(g)) = pair("free", hi) {
            if let (Some(fl), Some(gl)) = (f.latency_ms, g.latency_ms) {
                out.push(Check {
                    name: format!("free c={hi}: gateway p99 ≤ 1.5 × forwarder's"),
                    measured: format!(
                        "{} vs {} ms ({})",
                        f_ms(gl[1]),
                        f_ms(fl[1]),
                        ratio_text(gl[1], fl[1])
                    ),
                    limit: "≤ 1.5×".into(),
                    met: Some(gl[1] <= 1.5 * fl[1]),
                });
            }
        }
        // Time to first byte of a streamed chat, against the simulator direct.
        for &c in &self.plan.concurrency {
            let (Some(d), Some(g)) = (
                self.find("chat_stream", Target::Direct, c)
                    .and_then(|r| r.ttfb_ms),
                self.find("chat_stream", Target::Gateway, c)
                    .and_then(|r| r.ttfb_ms),
            ) else {
                continue;
            };
            out.push(Check {
                name: format!("chat_stream c={c}: first byte p99 ≤ direct's + 1 ms"),
                measured: format!(
                    "{} vs {} ms ({} ms)",
                    f_ms(g[1]),
                    f_ms(d[1]),
                    f_signed_ms(g[1] - d[1])
                ),
                limit: "≤ +1 ms".into(),
                met: Some(g[1] - d[1] <= 1.0),
            });
        }
        // The anthropic adapter's translation is not the cost: its CPU per
        // request within 15 % of the same chat's through `openai`.
        for &c in &self.plan.concurrency {
            let (Some(plain), Some(native)) = (
                self.find("chat", Target::Gateway, c)
                    .and_then(|r| r.cpu_us_per_req),
                self.find("chat_anthropic", Target::Gateway, c)
                    .and_then(|r| r.cpu_us_per_req),
            ) else {
                continue;
            };
            out.push(Check {
                name: format!("chat_anthropic c={c}: gateway CPU per request ≤ 1.15 × chat's"),
                measured: format!(
                    "{native:.0} vs {plain:.0} µs ({})",
                    ratio_text(native, plain)
                ),
                limit: "≤ 1.15×".into(),
                met: Some(native <= 1.15 * plain),
            });
        }
        for s in ["free", "billed", "chat", "chat_anthropic"] {
            let per_c: Vec<String> = self
                .plan
                .concurrency
                .iter()
                .filter_map(|&c| {
                    let g = self.find(s, Target::Gateway, c)?.cpu_us_per_req?;
                    let f = self
                        .find(s, Target::Forwarder, c)
                        .and_then(|r| r.cpu_us_per_req);
                    Some(format!("c={c}: {g:.0} µs (forwarder {})", f_opt(f, 0)))
                })
                .collect();
            if !per_c.is_empty() {
                out.push(Check {
                    name: format!("gateway CPU time per {s} request"),
                    measured: per_c.join("; "),
                    limit: "reported".into(),
                    met: None,
                });
            }
        }
        if let Some(g) = self.find("upload", Target::Gateway, 1) {
            let (mbps, bytes) = g.upload.unwrap_or((0.0, 0));
            out.push(Check {
                name: format!("upload of {} MiB: gateway peak RSS ≤ 32 MiB", bytes >> 20),
                measured: format!(
                    "{} MiB ({} MiB before it: the first scenario, on a fresh gateway) at {mbps:.0} MB/s",
                    mib(g.peak_rss_kib),
                    mib(g.start_rss_kib)
                ),
                limit: "≤ 32 MiB".into(),
                met: g.peak_rss_kib.map(|k| k <= 32 * 1024),
            });
        }
        self.second_checks(&mut out);
        let errors = self.errors();
        out.push(Check {
            name: "zero errors in every scenario".into(),
            measured: format!("{errors} errors"),
            limit: "0".into(),
            met: Some(errors == 0),
        });
        out
    }

    /// The machine line.
    pub fn machine_line(&self) -> String {
        let m = &self.machine;
        let pin = match self.pinning {
            Some(p) => format!(
                "gateway / forwarder pinned to CPU {}, load generator + simulator to CPU {}",
                p.proxy_cpu, p.load_cpu
            ),
            None => "no CPU pinning".into(),
        };
        format!(
            "{} × {}, {} MiB RAM, Linux {}; {pin}; gateway data on {}; database: {}; GATEWAY_DB_SYNC={}; binaries from `{}`",
            m.cpus, m.cpu_model, m.mem_mib, m.kernel, self.data_fs, self.store, self.sync, self.bin_dir
        )
    }

    fn plan_line(&self) -> String {
        let p = &self.plan;
        let mode = match p.rate {
            Some(r) => format!("open loop at {r} req/s"),
            None => "closed loop".into(),
        };
        let noise = match self.others_cpus {
            Some(n) => format!("; other processes kept {n:.2} CPUs busy on average"),
            None => String::new(),
        };
        format!(
            "{mode}, {:.1} s measured per run after {:.1} s warm-up; upload file {} MiB{noise}",
            p.duration.as_secs_f64(),
            p.warmup.as_secs_f64(),
            p.upload_bytes >> 20
        )
    }

    /// The markdown report.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "Machine: {}  \nRun: {}  \nCommand: `{}`\n\n",
            self.machine_line(),
            self.plan_line(),
            self.command
        ));
        s.push_str("| scenario | c | target | req/s | p50 ms | p99 ms | p99.9 ms | overhead p50 / p99 / p99.9 ms | CPU µs/req | sim CPU µs/req | peak RSS MiB | errors |\n");
        s.push_str("|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n");
        for r in self.rows.iter().filter(|r| r.upload.is_none()) {
            let (p50, p99, p999) = match r.latency_ms {
                Some(l) => (f_ms(l[0]), f_ms(l[1]), f_ms(l[2])),
                None => ("—".into(), "—".into(), "—".into()),
            };
            let over = match self.overhead(r) {
                Some(o) => format!(
                    "{} / {} / {}",
                    f_signed_ms(o[0]),
                    f_signed_ms(o[1]),
                    f_signed_ms(o[2])
                ),
                None => "—".into(),
            };
            s.push_str(&format!(
                "| {} | {} | {} | {:.0} | {p50} | {p99} | {p999} | {over} | {} | {} | {} | {} |\n",
                r.scenario,
                r.concurrency,
                r.target.name(),
                r.rps,
                f_opt(r.cpu_us_per_req, 0),
                f_opt(r.sim_cpu_us_per_req, 0),
                mib(r.peak_rss_kib),
                r.errors
            ));
        }
        let streams: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.scenario == "chat_stream")
            .collect();
        if !streams.is_empty() {
            s.push_str("\n| chat_stream | c | first byte p50 ms | first byte p99 ms | last byte p50 ms | last byte p99 ms |\n");
            s.push_str("|---|---:|---:|---:|---:|---:|\n");
            for r in streams {
                let t = r.ttfb_ms.map(|t| (f_ms(t[0]), f_ms(t[1])));
                let l = r.latency_ms.map(|l| (f_ms(l[0]), f_ms(l[1])));
                let (t50, t99) = t.unwrap_or(("—".into(), "—".into()));
                let (l50, l99) = l.unwrap_or(("—".into(), "—".into()));
                s.push_str(&format!(
                    "| {} | {} | {t50} | {t99} | {l50} | {l99} |\n",
                    r.target.name(),
                    r.concurrency
                ));
            }
        }
        let uploads: Vec<&Row> = self.rows.iter().filter(|r| r.upload.is_some()).collect();
        if !uploads.is_empty() {
            s.push_str("\n| upload | file MiB | uploads | MB/s | s per upload (p50) | CPU s per upload | RSS before MiB | peak RSS MiB | errors |\n");
            s.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
            for r in uploads {
                let (mbps, bytes) = r.upload.unwrap_or_default();
                let target = if r.target == Target::Forwarder {
                    "forwarder (sink)"
                } else {
                    r.target.name()
                };
                s.push_str(&format!(
                    "| {target} | {} | {} | {mbps:.0} | {} | {} | {} | {} | {} |\n",
                    bytes >> 20,
                    r.requests,
                    f_opt(r.latency_ms.map(|l| l[0] / 1e3), 2),
                    f_opt(r.cpu_us_per_req.map(|us| us / 1e6), 2),
                    mib(r.start_rss_kib),
                    mib(r.peak_rss_kib),
                    r.errors
                ));
            }
        }
        self.second_markdown(&mut s);
        let ratios = self.billed_to_free();
        if !ratios.is_empty() {
            let text: Vec<String> = ratios
                .iter()
                .map(|(c, t, r)| format!("{} c={c}: {:.2}", t.name(), r))
                .collect();
            s.push_str(&format!(
                "\nBilled / free throughput: {}\n",
                text.join("; ")
            ));
        }
        s.push_str("\n| target | measured | limit | met |\n|---|---|---|---|\n");
        for c in self.checks() {
            let met = match c.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "—",
            };
            s.push_str(&format!(
                "| {} | {} | {} | {met} |\n",
                c.name, c.measured, c.limit
            ));
        }
        let second = self.second.iter().flat_map(|s| &s.rows);
        let failing: Vec<&Row> = self
            .rows
            .iter()
            .chain(second)
            .filter(|r| r.errors > 0)
            .collect();
        if !failing.is_empty() {
            s.push_str("\nErrors:\n");
            for r in failing {
                for e in &r.error_samples {
                    s.push_str(&format!(
                        "- {} c={} {}: {e}\n",
                        r.scenario,
                        r.concurrency,
                        r.target.name()
                    ));
                }
            }
        }
        s
    }

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
        let m = &self.machine;
        json!({
            "command": self.command,
            "machine": {"cpus": m.cpus, "cpu_model": m.cpu_model, "kernel": m.kernel, "mem_mib": m.mem_mib},
            "pinning": self.pinning.map(|p| json!({"proxy_cpu": p.proxy_cpu, "load_cpu": p.load_cpu})),
            "bin_dir": self.bin_dir,
            "data_fs": self.data_fs,
            "store": self.store,
            "db_sync": self.sync,
            "other_processes_cpus": self.others_cpus,
            "plan": {
                "scenarios": self.plan.scenarios.iter().map(|s| s.name()).collect::<Vec<_>>(),
                "concurrency": self.plan.concurrency,
                "duration_s": self.plan.duration.as_secs_f64(),
                "warmup_s": self.plan.warmup.as_secs_f64(),
                "open_loop_rate": self.plan.rate,
                "upload_bytes": self.plan.upload_bytes,
            },
            "rows": rows,
            "other_sync": self.second.as_ref().map(|s| json!({"db_sync": s.sync, "rows": self.json_rows(&s.rows)})),
            "billed_over_free": ratios,
            "targets": checks,
            "errors": self.errors(),
        })
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
                })
            })
            .collect()
    }
}

fn pct(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        100.0 * a / b
    } else {
        0.0
    }
}

fn ratio_text(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}×", a / b)
    } else {
        "forwarder overhead ≤ 0: noise".into()
    }
}
