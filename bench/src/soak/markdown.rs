//! The soak's markdown ([`SoakReport::markdown`]): the machine and run
//! lines, the calibration, a row per minute, the verdict, whether the open
//! loops kept their rates, the errors seen.

use super::report::{mib, opt, p99_ms, percentiles, ratio, SoakReport};
use super::settings::{CALIBRATION_CONCURRENCY, WINDOW};
use crate::load::Outcome;
use crate::row::f_ms;

impl SoakReport {
    /// The markdown report: the machine and run lines, the calibration, a
    /// row per minute, the verdict, the rates sent, the errors seen.
    pub fn markdown(&self) -> String {
        let mut s = format!(
            "Machine: {}  \nRun: {}  \nCommand: `{}`\n\n",
            self.ctx.machine_line(),
            self.run_line(),
            self.ctx.command
        );
        self.calibration_table(&mut s);
        self.minutes_table(&mut s);
        s.push_str("\nVerdict:\n\n");
        for v in self.verdicts() {
            let met = match v.met {
                Some(true) => "met",
                Some(false) => "**missed**",
                None => "not measured",
            };
            s.push_str(&format!("- {} (goal {}): {met}\n", v.text, v.goal));
        }
        self.rates_line(&mut s);
        self.errors_list(&mut s);
        s
    }

    /// What each open loop sent against its rate, and a warning when one
    /// fell behind.
    fn rates_line(&self, s: &mut String) {
        let rates: Vec<String> = self
            .sent_rates()
            .into_iter()
            .map(|(scenario, rate, sent)| {
                let pct = sent.map_or("—".into(), |x| format!("{:.0} %", 100.0 * x / rate));
                format!(
                    "{} {} of {rate:.0} req/s ({pct})",
                    scenario.name(),
                    opt(sent, 0)
                )
            })
            .collect();
        s.push_str(&format!("\nSent: {}\n", rates.join(", ")));
        if self.fell_behind() {
            s.push_str(
                "\n**The open loops fell behind their rates**: the load was more than the gateway, \
                 the simulator and the load generator could serve together (see the CPU columns), \
                 so the latencies above are mostly their queue, not the gateway's drift.\n",
            );
        }
    }

    /// What ran, and the machine's other load.
    fn run_line(&self) -> String {
        let st = &self.settings;
        let rates = match st.rate {
            Some(r) => format!("at {r} req/s each (--rate)"),
            None => format!(
                "each at half its req/s in the three closed loops run together at c={} in all (measured for {:.1} s after {:.1} s warm-up)",
                CALIBRATION_CONCURRENCY,
                st.calibration.as_secs_f64(),
                st.warmup.as_secs_f64()
            ),
        };
        let noise = self.ctx.noise();
        format!(
            "soak of {} min: chat + free + billed through the gateway at once, open loop, {rates}; \
             windows of {} s after {:.1} s warm-up{noise}",
            st.minutes,
            WINDOW.as_secs(),
            st.warmup.as_secs_f64()
        )
    }

    /// The calibration: each closed loop's figures, the soak's rate.
    fn calibration_table(&self, s: &mut String) {
        s.push_str(&format!(
            "| calibration (closed loops together, c={} in all) | req/s | p50 ms | p99 ms | errors | soak rate req/s | connections |\n",
            CALIBRATION_CONCURRENCY
        ));
        s.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
        for c in &self.calibration {
            let m = c.measured.as_ref();
            let lat = m.and_then(percentiles);
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {:.1} | {} |\n",
                c.scenario.name(),
                opt(m.map(Outcome::rps), 0),
                lat.map_or("—".into(), |l| f_ms(l.0)),
                lat.map_or("—".into(), |l| f_ms(l.1)),
                m.map_or("—".into(), |o| o.errors.to_string()),
                c.rate,
                c.connections
            ));
        }
    }

    /// A row per minute: each scenario's req/s and p99, the errors, the
    /// gateway's RSS at the minute's end, its CPU in it and the load
    /// generator's and simulator's (100 % = one CPU).
    fn minutes_table(&self, s: &mut String) {
        s.push_str("\n| minute |");
        for c in &self.calibration {
            let n = c.scenario.name();
            s.push_str(&format!(" {n} req/s | {n} p99 ms |"));
        }
        s.push_str(" errors | RSS MiB | gateway CPU % | load + sim CPU % |\n|---:|");
        s.push_str(&"---:|---:|".repeat(self.calibration.len()));
        s.push_str("---:|---:|---:|---:|\n");
        for (k, w) in self.windows.iter().enumerate() {
            s.push_str(&format!("| {} |", self.minute_label(k)));
            for o in &w.scenarios {
                let rps = ratio(o.ok as f64, w.seconds);
                let p99 = p99_ms(o).map_or("—".into(), f_ms);
                s.push_str(&format!(" {} | {p99} |", opt(rps, 0)));
            }
            s.push_str(&format!(
                " {} | {} | {} | {} |\n",
                w.errors(),
                mib(w.rss_kib),
                opt(w.cpu_pct, 0),
                opt(w.load_cpu_pct, 0)
            ));
        }
    }

    /// Window `k`'s minute, with its length when the soak ends within it.
    fn minute_label(&self, k: usize) -> String {
        let whole = (k + 1) as f64 <= self.settings.minutes + 1e-9;
        if whole {
            (k + 1).to_string()
        } else {
            let secs = (self.settings.minutes - k as f64) * 60.0;
            format!("{} ({secs:.0} s)", k + 1)
        }
    }

    /// The sampled errors, when there were any.
    fn errors_list(&self, s: &mut String) {
        let mut lines = Vec::new();
        for c in &self.calibration {
            for e in c.measured.iter().flat_map(|o| &o.error_samples) {
                lines.push(format!("- calibration {}: {e}", c.scenario.name()));
            }
        }
        for (k, w) in self.windows.iter().enumerate() {
            for (c, o) in self.calibration.iter().zip(&w.scenarios) {
                for e in &o.error_samples {
                    lines.push(format!("- minute {} {}: {e}", k + 1, c.scenario.name()));
                }
            }
        }
        if !lines.is_empty() {
            s.push_str(&format!("\nErrors:\n{}\n", lines.join("\n")));
        }
    }
}
