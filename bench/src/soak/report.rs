//! A soak's report ([`SoakReport`]): the calibration, a row per minute
//! (each scenario's req/s and p99, the errors, the gateway's RSS and CPU),
//! and the verdict against the goals — no error; the RSS at the end
//! at most 1.05 × the RSS at minute 5; each scenario's p99 over the last 5
//! minutes at most 1.2 × its p99 over the first 5 (the windows' histograms
//! merged). A soak shorter than 10 minutes compares its halves instead, in
//! whole minutes (the RSS at the end of its first half), and says so. As
//! markdown for stdout and as JSON for `--out`.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use super::settings::{Settings, CALIBRATION_CONCURRENCY};
use crate::load::{self, Outcome};
use crate::plan::Scenario;
use crate::row::f_ms;

/// The goal of the RSS at the end over the RSS at minute 5.
const RSS_GOAL: f64 = 1.05;
/// The goal of the last 5 minutes' p99 over the first 5 minutes'.
const P99_GOAL: f64 = 1.2;
/// Minutes compared at each end of a soak of at least twice as many.
const COMPARED_MINUTES: usize = 5;

/// A scenario's calibration: its closed loop beside the two others, c=64 in all (`None` with
/// `--rate`), and the rate and connections it is soaked at.
pub struct Calibration {
    /// The scenario.
    pub scenario: Scenario,
    /// The closed loop's outcome.
    pub measured: Option<Outcome>,
    /// Its soak rate (requests/s).
    pub rate: f64,
    /// Its soak connections.
    pub connections: usize,
}

impl Calibration {
    /// One line for the progress log.
    pub fn progress_line(&self) -> String {
        let measured = match &self.measured {
            Some(o) => format!(
                "closed loop in the mix (c={} in all) {:.1} req/s p99 {} ms{} → ",
                CALIBRATION_CONCURRENCY,
                o.rps(),
                p99_ms(o).map_or("—".into(), f_ms),
                if o.errors > 0 {
                    format!(" ERRORS {}", o.errors)
                } else {
                    String::new()
                }
            ),
            None => "--rate: ".into(),
        };
        format!(
            "calibration {:<6} {measured}soak at {:.1} req/s on {} connections",
            self.scenario.name(),
            self.rate,
            self.connections
        )
    }
}

/// One window (a minute) of the soak.
pub struct Window {
    /// Each scenario's requests, in [`super::settings::SCENARIOS`]' order.
    pub scenarios: Vec<Outcome>,
    /// Its length (the last one's: until its last request ended).
    pub seconds: f64,
    /// The gateway's `VmRSS` when the window's time was up (KiB).
    pub rss_kib: Option<u64>,
    /// The gateway's CPU time in the window (seconds).
    pub cpu_seconds: Option<f64>,
    /// The same as a percentage of one CPU.
    pub cpu_pct: Option<f64>,
    /// The CPU time of the load generator and the simulator in the window,
    /// as a percentage of one CPU (they share one when pinned).
    pub load_cpu_pct: Option<f64>,
}

impl Window {
    /// Its failed requests.
    pub fn errors(&self) -> u64 {
        self.scenarios.iter().map(|o| o.errors).sum()
    }
}

/// Everything a soak produced.
pub struct SoakReport {
    /// Where and how it ran.
    pub ctx: crate::report::Context,
    /// What was asked.
    pub settings: Settings,
    /// The calibration, per scenario.
    pub calibration: Vec<Calibration>,
    /// The minutes.
    pub windows: Vec<Window>,
    /// The gateway's `VmRSS` when the soak's measurement opened (KiB).
    pub rss_start_kib: Option<u64>,
    /// The gateway's `VmRSS` once every request had ended (KiB).
    pub rss_end_kib: Option<u64>,
}

/// One goal, checked.
pub struct Verdict {
    /// What is compared, and the figures.
    pub text: String,
    /// The goal.
    pub goal: String,
    /// Met (`None`: the soak was too short to tell).
    pub met: Option<bool>,
    /// The figures, for the JSON.
    pub json: Value,
}

/// The share of its rate an open loop kept, below which the report says
/// that the soak measured an overload.
const KEPT_RATE: f64 = 0.95;

/// `a / b`, when `b` is positive.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

/// KiB as MiB with one place, or "—".
pub fn mib(kib: Option<u64>) -> String {
    kib.map_or("—".into(), |k| format!("{:.1}", k as f64 / 1024.0))
}

/// `v` with `decimals` places, or "—".
pub fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or("—".into(), |v| format!("{v:.decimals$}"))
}

/// Latency percentiles of an outcome (ms): p50, p99.
pub fn percentiles(o: &Outcome) -> Option<(f64, f64)> {
    let ms = |q| o.hist.value_at_quantile(q) as f64 / 1e6;
    (!o.hist.is_empty()).then(|| (ms(0.5), ms(0.99)))
}

impl SoakReport {
    /// Failed requests, calibration included.
    pub fn errors(&self) -> u64 {
        let cal = self.calibration.iter().filter_map(|c| c.measured.as_ref());
        cal.map(|o| o.errors).sum::<u64>() + self.windows.iter().map(Window::errors).sum::<u64>()
    }

    /// Each scenario's rate and what its open loop sent, successfully, per
    /// second over the whole soak.
    pub fn sent_rates(&self) -> Vec<(Scenario, f64, Option<f64>)> {
        let secs: f64 = self.windows.iter().map(|w| w.seconds).sum();
        let sent = |i: usize| self.windows.iter().map(|w| w.scenarios[i].ok).sum::<u64>();
        let rates = self.calibration.iter().enumerate();
        rates
            .map(|(i, c)| (c.scenario, c.rate, ratio(sent(i) as f64, secs)))
            .collect()
    }

    /// True when an open loop sent less than [`KEPT_RATE`] of its rate:
    /// the load was more than the gateway, the simulator and the load
    /// generator together could serve, and the latencies are mostly queue.
    pub fn fell_behind(&self) -> bool {
        let rates = self.sent_rates();
        rates
            .iter()
            .any(|(_, r, s)| s.is_some_and(|s| s < KEPT_RATE * r))
    }

    /// Minutes compared at each end, and whether they are halves (a soak
    /// shorter than twice [`COMPARED_MINUTES`]).
    fn compared(&self) -> (usize, bool) {
        if self.settings.minutes >= (2 * COMPARED_MINUTES) as f64 {
            (COMPARED_MINUTES, false)
        } else {
            (self.windows.len() / 2, true)
        }
    }

    /// Scenario `i`'s histogram over windows `from..to`.
    fn merged(&self, i: usize, from: usize, to: usize) -> Histogram<u64> {
        let mut h = load::new_histogram();
        for w in &self.windows[from..to] {
            let _ = h.add(&w.scenarios[i].hist);
        }
        h
    }

    /// The goals, checked.
    pub fn verdicts(&self) -> Vec<Verdict> {
        let errors = self.errors();
        let mut out = vec![Verdict {
            text: format!("errors: {errors}"),
            goal: "0".into(),
            met: Some(errors == 0),
            json: json!({"goal": "errors", "errors": errors, "limit": 0, "met": errors == 0}),
        }];
        out.push(self.rss_verdict());
        let (h, halves) = self.compared();
        for (i, c) in self.calibration.iter().enumerate() {
            out.push(self.p99_verdict(i, c.scenario, h, halves));
        }
        out
    }

    /// The RSS at the end against the RSS at minute 5 (the end of the
    /// first half; the start for a soak of a minute or less).
    fn rss_verdict(&self) -> Verdict {
        let (h, halves) = self.compared();
        let (reference, at) = match (h, halves) {
            (0, _) => (
                self.rss_start_kib,
                "the start (the soak is a minute or shorter: no first half to end)".into(),
            ),
            (h, true) => (
                self.windows[h - 1].rss_kib,
                format!(
                    "minute {h} (the end of the first half: the soak is shorter than {} minutes)",
                    2 * COMPARED_MINUTES
                ),
            ),
            (h, false) => (self.windows[h - 1].rss_kib, format!("minute {h}")),
        };
        let r = match (self.rss_end_kib, reference) {
            (Some(e), Some(r)) => ratio(e as f64, r as f64),
            _ => None,
        };
        let met = r.map(|r| r <= RSS_GOAL);
        Verdict {
            text: format!(
                "RSS: {} MiB at the end vs {} MiB at {at}: {}",
                mib(self.rss_end_kib),
                mib(reference),
                r.map_or("—".into(), |r| format!("{r:.3}×"))
            ),
            goal: format!("≤ {RSS_GOAL}×"),
            met,
            json: json!({"goal": "rss", "reference": at, "reference_kib": reference,
                "end_kib": self.rss_end_kib, "ratio": r, "limit": RSS_GOAL, "met": met}),
        }
    }

    /// Scenario `i`'s p99 over the last `h` minutes against the first `h`.
    fn p99_verdict(&self, i: usize, scenario: Scenario, h: usize, halves: bool) -> Verdict {
        let n = self.windows.len();
        let (first, last) = if h == 0 {
            (None, None)
        } else {
            (
                p99_of(&self.merged(i, 0, h)),
                p99_of(&self.merged(i, n - h, n)),
            )
        };
        let r = first.zip(last).and_then(|(f, l)| ratio(l, f));
        let span = if h == 0 {
            "the soak is too short to compare: at least two minutes are needed".to_owned()
        } else if halves {
            format!(
                "{h} min each (halves: the soak is shorter than {} minutes)",
                2 * COMPARED_MINUTES
            )
        } else {
            format!("{h} min each")
        };
        let met = r.map(|r| r <= P99_GOAL);
        Verdict {
            text: format!(
                "{} p99: {} ms in the last minutes vs {} ms in the first, {span}: {}",
                scenario.name(),
                last.map_or("—".into(), f_ms),
                first.map_or("—".into(), f_ms),
                r.map_or("—".into(), |r| format!("{r:.2}×"))
            ),
            goal: format!("≤ {P99_GOAL}×"),
            met,
            json: json!({"goal": "p99", "scenario": scenario.name(), "minutes_compared": h,
                "halves": halves, "first_ms": first, "last_ms": last, "ratio": r,
                "limit": P99_GOAL, "met": met}),
        }
    }
}

/// The p99 of an outcome's latencies (ms), `None` when it has none.
pub fn p99_ms(o: &Outcome) -> Option<f64> {
    p99_of(&o.hist)
}

/// The p99 of a latency histogram (ms), `None` when it is empty.
fn p99_of(h: &Histogram<u64>) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(0.99) as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::soak::settings::SCENARIOS;

    /// A minute whose three scenarios each answered 100 requests a second in `ms` ms.
    fn window(ms: u64, rss_mib: u64) -> Window {
        let scenario = || {
            let mut o = Outcome::empty();
            o.hist.record_n(ms * 1_000_000, 6000).unwrap();
            o.ok = 6000;
            o
        };
        Window {
            scenarios: (0..3).map(|_| scenario()).collect(),
            seconds: 60.0,
            rss_kib: Some(rss_mib << 10),
            cpu_seconds: Some(30.0),
            cpu_pct: Some(50.0),
            load_cpu_pct: Some(70.0),
        }
    }

    fn report(minutes: f64, windows: Vec<Window>, end_mib: u64) -> SoakReport {
        let calibration = SCENARIOS.map(|scenario| Calibration {
            scenario,
            measured: None,
            rate: 100.0,
            connections: 64,
        });
        SoakReport {
            ctx: crate::report::Context {
                command: "gateway-bench --soak".into(),
                machine: crate::measure::machine(),
                pinning: None,
                bin_dir: "bin".into(),
                data_fs: "fs".into(),
                store: "SQLite".into(),
                sync: "full".into(),
                others_cpus: Some(0.1),
            },
            settings: Settings {
                minutes,
                warmup: Duration::from_secs(1),
                calibration: Duration::from_secs(5),
                rate: Some(100.0),
                timeout: Duration::from_secs(60),
            },
            calibration: calibration.into(),
            windows,
            rss_start_kib: Some(50 << 10),
            rss_end_kib: Some(end_mib << 10),
        }
    }

    fn met(r: &SoakReport) -> Vec<Option<bool>> {
        r.verdicts().iter().map(|v| v.met).collect()
    }

    #[test]
    fn verdict_compares_minute_5_and_the_first_and_last_5_minutes() {
        let ws = (0..12).map(|k| window(if k < 7 { 10 } else { 13 }, 100 + k));
        let r = report(12.0, ws.collect(), 104);
        // RSS 104 vs 104 at minute 5; p99 13 vs 10 ms.
        assert_eq!(
            met(&r),
            [
                Some(true),
                Some(true),
                Some(false),
                Some(false),
                Some(false)
            ]
        );
        let text = r.markdown();
        assert!(
            text.contains("at minute 5:") && !text.contains("halves"),
            "{text}"
        );
        assert_eq!(
            text.matches("| 50 |").count(),
            12,
            "a row per minute: {text}"
        );
        assert_eq!(r.json()["windows"].as_array().unwrap().len(), 12);
    }

    #[test]
    fn a_short_soak_compares_halves_and_says_so() {
        let r = report(
            2.5,
            vec![window(10, 100), window(11, 100), window(11, 106)],
            106,
        );
        assert_eq!(
            met(&r),
            [Some(true), Some(false), Some(true), Some(true), Some(true)]
        );
        let text = r.markdown();
        assert!(
            text.contains("at minute 1 (the end of the first half"),
            "{text}"
        );
        assert!(
            text.contains("halves") && text.contains("| 3 (30 s) |"),
            "{text}"
        );
        assert!(text.contains("free 100 of 100 req/s (100 %)") && !r.fell_behind());
        let mut slow = r;
        slow.windows[0].scenarios[1].ok = 1000;
        assert!(slow.fell_behind() && slow.markdown().contains("fell behind their rates"));
        let one = report(1.0, vec![window(10, 100)], 100);
        assert_eq!(met(&one), [Some(true), Some(false), None, None, None]);
    }
}
