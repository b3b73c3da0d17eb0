//! The markdown report ([`Report::markdown`]) printed to stdout: the
//! machine and run lines, the table of runs, the stream, realtime, batch
//! ([`super::batch`]) and upload tables,
//! the other sync mode's table, the checks and the errors seen.

use super::format::{f_opt, f_signed_ms, mib, pct};
use super::run::Report;
use crate::row::{f_ms, Row, Target};

impl Report {
    /// The machine line.
    pub fn machine_line(&self) -> String {
        self.ctx.machine_line()
    }

    fn plan_line(&self) -> String {
        let p = &self.plan;
        let mode = match p.rate {
            Some(r) => format!("open loop at {r} req/s"),
            None => "closed loop".into(),
        };
        let noise = self.ctx.noise();
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
            self.ctx.command
        ));
        self.runs_table(&mut s);
        self.streams_table(&mut s);
        self.realtime_table(&mut s);
        self.batch_table(&mut s);
        self.uploads_table(&mut s);
        self.equal_markdown(&mut s);
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
        self.checks_table(&mut s);
        self.errors_list(&mut s);
        s
    }

    /// Every run but the uploads: throughput, latency, overhead, CPU, memory.
    fn runs_table(&self, s: &mut String) {
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
    }

    /// The realtime turns (`response.create` to `response.done`) at each
    /// target, and what the gateway adds to the direct run at the same
    /// concurrency, when they ran.
    fn realtime_table(&self, s: &mut String) {
        let rows: Vec<&Row> = self
            .rows
            .iter()
            .filter(|r| r.scenario == "realtime")
            .collect();
        if rows.is_empty() {
            return;
        }
        s.push_str("\n| realtime | c | turns/s | turn p50 ms | turn p99 ms | added p50 ms | added p99 ms |\n");
        s.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
        for r in &rows {
            let direct = rows
                .iter()
                .find(|d| d.target == Target::Direct && d.concurrency == r.concurrency)
                .and_then(|d| d.latency_ms);
            let (p50, p99) = r
                .latency_ms
                .map_or(("—".into(), "—".into()), |l| (f_ms(l[0]), f_ms(l[1])));
            let added = match (r.latency_ms, direct) {
                (Some(l), Some(d)) if r.target != Target::Direct => {
                    (f_ms(l[0] - d[0]), f_ms(l[1] - d[1]))
                }
                _ => ("—".into(), "—".into()),
            };
            s.push_str(&format!(
                "| {} | {} | {:.0} | {p50} | {p99} | {} | {} |\n",
                r.target.name(),
                r.concurrency,
                r.rps,
                added.0,
                added.1
            ));
        }
    }

    /// The streamed chat's and speech's first and last byte, when they ran.
    fn streams_table(&self, s: &mut String) {
        for scenario in ["chat_stream", "tts_stream"] {
            let streams: Vec<&Row> = self
                .rows
                .iter()
                .filter(|r| r.scenario == scenario)
                .collect();
            if streams.is_empty() {
                continue;
            }
            s.push_str(&format!("\n| {scenario} | c | first byte p50 ms | first byte p99 ms | last byte p50 ms | last byte p99 ms |\n"));
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
    }

    /// The uploads: throughput, time and CPU per upload, memory.
    fn uploads_table(&self, s: &mut String) {
        let uploads: Vec<&Row> = self.rows.iter().filter(|r| r.upload.is_some()).collect();
        if uploads.is_empty() {
            return;
        }
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

    /// The targets, met or not.
    fn checks_table(&self, s: &mut String) {
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
    }

    /// The sampled errors of every run that had any.
    fn errors_list(&self, s: &mut String) {
        let failing: Vec<&Row> = self.all_rows().filter(|r| r.errors > 0).collect();
        if failing.is_empty() {
            return;
        }
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

    /// `chat` and the doors translated to it at one rate.
    fn equal_markdown(&self, s: &mut String) {
        let Some(equal) = &self.equal else {
            return;
        };
        s.push_str(&format!(
            "\n`chat` and the doors translated to it through the gateway at one rate, {:.0} req/s (open loops, the same gateway; CPU per request at equal load):\n\n",
            equal.rate
        ));
        s.push_str("| scenario | c | req/s | p50 ms | p99 ms | CPU µs/req | CPU µs/req in its closed loop | errors |\n");
        s.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &equal.rows {
            let (p50, p99) = p50_p99(r);
            let closed = self
                .find(r.scenario, Target::Gateway, r.concurrency)
                .and_then(|g| g.cpu_us_per_req);
            s.push_str(&format!(
                "| {} | {} | {:.0} | {p50} | {p99} | {} | {} | {} |\n",
                r.scenario,
                r.concurrency,
                r.rps,
                f_opt(r.cpu_us_per_req, 0),
                f_opt(closed, 0),
                r.errors
            ));
        }
    }

    /// The other sync mode's table.
    fn second_markdown(&self, s: &mut String) {
        let Some(second) = &self.second else {
            return;
        };
        s.push_str(&format!(
            "\nThe gateway under GATEWAY_DB_SYNC={} (a second gateway, fresh data; the table above ran under {}):\n\n",
            second.sync, self.ctx.sync
        ));
        s.push_str("| scenario | c | GATEWAY_DB_SYNC | req/s | p50 ms | p99 ms | CPU µs/req | % of forwarder | req/s under the first mode | peak RSS MiB | errors |\n");
        s.push_str("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &second.rows {
            let (p50, p99) = p50_p99(r);
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
}

/// A row's p50 and p99 latency as written in a table (`—` without one).
fn p50_p99(r: &Row) -> (String, String) {
    match r.latency_ms {
        Some(l) => (f_ms(l[0]), f_ms(l[1])),
        None => ("—".into(), "—".into()),
    }
}
