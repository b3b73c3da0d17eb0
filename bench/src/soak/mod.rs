//! `--soak MINUTES`: the gateway under a steady mixed load for a long time,
//! to show what a ten-second run cannot — memory that keeps growing,
//! latency that drifts, errors that come late. The issue's goal: "30 min of
//! `chat` + `free` + `billed` at half the c=64 rate, open loop | 0 errors;
//! RSS at the end ≤ 1.05× at minute 5; p99 of the last 5 min ≤ 1.2× the
//! first 5 min's".
//!
//! 1. One simulator and one gateway start as in a normal run (fresh data
//!    directory, the inherited `GATEWAY_DB_SYNC`, a fresh schema with
//!    `GATEWAY_DATABASE_URL`, the usual pinning); no forwarder, no direct
//!    runs.
//! 2. Calibration: `chat`, `free` and `billed` together, closed loops
//!    sharing c=64 ([`settings::CALIBRATION_CONCURRENCY`], 22 + 21 + 21
//!    connections), for `--duration` seconds (5) after `--warmup` (1); a
//!    scenario's soak rate is half its req/s in that mix, so the soak runs
//!    the mix at half its c=64 rate (each at half its rate *alone* would
//!    add up to more than the machine serves). With `--rate`, that rate
//!    for each and no calibration. What the calibration wrote (the data
//!    directory's growth) forecasts what the soak will write; a soak that
//!    would not fit on that disk is refused before it starts, with the
//!    minutes that would ([`disk`]).
//! 3. The soak: the three at once, each an open loop at its rate
//!    ([`load::run_windows`]) with enough connections that the loop is not
//!    held back by them (as many as the rate fills with [`settings::LATENCY_ROOM`] of
//!    latency each, at least 64, at most 1024), for MINUTES minutes after the warm-up,
//!    measured in windows of a minute ([`settings::WINDOW`]): per scenario its
//!    requests, errors and the window's own latency histogram; the gateway's
//!    `VmRSS` at the end of each window and once every request has ended,
//!    its CPU time per window, and that of the load generator and the
//!    simulator. A line per minute goes to stderr as the soak runs (a
//!    minute is printed when the next one ends: its last requests have
//!    ended by then).
//! 4. The report ([`report`]: the figures and the verdict; [`markdown`],
//!    [`json`]): the calibration, a table per minute, the verdict against
//!    the goals, and the rate each open loop kept — with a warning when one
//!    fell behind, since the soak then measured an overload's queue rather
//!    than a drift of the gateway. Markdown on stdout, JSON in `--out`.
//!
//! The exit code is non-zero only when a request failed or something could
//! not run; a missed goal is reported, never asserted.

mod disk;
mod json;
mod markdown;
mod report;
mod settings;

use std::time::Instant;

use crate::load::{self, Event, Load, Outcome, Spec, Windows};
use crate::measure;
use crate::plan::{Env, Scenario};
use crate::procs::{self, Pinning};
use crate::row::{f_ms, Target};
use crate::scenarios;
use report::{p99_ms, Calibration, SoakReport, Window};
pub use settings::Settings;
use settings::{connections_for, CALIBRATION_CONCURRENCY, RATE_SHARE, SCENARIOS};

/// Starts the simulator and the gateway, calibrates, soaks, reports.
/// `Ok(true)` when no request failed.
pub async fn run(
    cli: &crate::Cli,
    settings: Settings,
    pinning: Option<Pinning>,
) -> Result<bool, String> {
    let bin_dir = procs::bin_dir(cli.bin_dir.as_deref())?;
    let (sync, _) = crate::sync_modes();
    let mut sim = procs::start_sim(&bin_dir)?;
    let cpu = pinning.map(|p| p.proxy_cpu);
    let gw = crate::GatewayRun::start(cli, &bin_dir, sim.addr, cpu, 0, None).await?;
    eprintln!(
        "gateway-bench: simulator {} (pid {}); a soak of {} min",
        sim.addr,
        sim.pid(),
        settings.minutes
    );
    let env = Env {
        sim: (sim.addr, sim.pid()),
        // A soak has no forwarder: no run is sent to one.
        forwarder: (sim.addr, sim.pid()),
        gateway: (gw.gateway.proc.addr, gw.gateway.proc.pid()),
        key: gw.gateway.key.clone(),
    };
    let data_fs = measure::filesystem_of(&gw.data.path);
    let noise = measure::Noise::start(vec![std::process::id(), env.sim.1, env.gateway.1]);
    let measured = calibrate_and_soak(&env, &settings, &gw.data.path).await;
    let others_cpus = noise.others_cpus();
    let gateway = gw.stop().await;
    sim.stop();
    let (calibration, soaked) = measured?;
    let report = SoakReport {
        ctx: crate::report::Context::now(pinning, &bin_dir, data_fs, sync, others_cpus),
        settings,
        calibration,
        windows: soaked.windows,
        rss_start_kib: soaked.start.rss_kib,
        rss_end_kib: soaked.end.rss_kib,
    };
    let errors = report.errors();
    if errors > 0 {
        for p in [&gateway, &sim] {
            eprintln!("last output of {}:\n{}", p.name, p.tail.render());
        }
    }
    crate::publish(&cli.out, &report.markdown(), &report.json())?;
    Ok(errors == 0)
}

/// The calibration, then the soak, if what it would write fits on the
/// disk of `data` (the gateway's data directory; [`disk`]).
async fn calibrate_and_soak(
    env: &Env,
    settings: &Settings,
    data: &std::path::Path,
) -> Result<(Vec<Calibration>, Soaked), String> {
    let (before, started) = (disk::used_bytes(data), Instant::now());
    let calibration = calibrate(env, settings).await?;
    if settings.rate.is_none() {
        let grown = disk::used_bytes(data).saturating_sub(before);
        let soak = settings.schedule();
        disk::check(
            data,
            grown,
            started.elapsed(),
            RATE_SHARE,
            soak.warmup + soak.duration,
        )?;
    }
    scenarios::clear_sim_log(env).await;
    let soaked = soak(env, settings, &calibration).await;
    Ok((calibration, soaked))
}

/// Each scenario's soak rate: half its req/s when the three run together,
/// closed loops sharing c=64 ([`CALIBRATION_CONCURRENCY`], split evenly),
/// that is half the mix's c=64 rate (or `--rate` for each).
async fn calibrate(env: &Env, s: &Settings) -> Result<Vec<Calibration>, String> {
    let measured: Vec<Option<Outcome>> = match s.rate {
        Some(_) => SCENARIOS.iter().map(|_| None).collect(),
        None => {
            let loads: Vec<(Load, Spec)> = SCENARIOS
                .iter()
                .enumerate()
                .map(|(i, scenario)| {
                    let share = CALIBRATION_CONCURRENCY / SCENARIOS.len()
                        + usize::from(i < CALIBRATION_CONCURRENCY % SCENARIOS.len());
                    let load = Load {
                        addr: env.gateway.0,
                        concurrency: share,
                        warmup: s.warmup,
                        duration: s.calibration,
                        rate: None,
                        timeout: s.timeout,
                    };
                    (load, gateway_spec(env, *scenario))
                })
                .collect();
            let schedule = load::Schedule {
                warmup: s.warmup,
                duration: s.calibration,
                window: s.calibration,
            };
            let outcomes = load::run_windows(&loads, schedule, |_, _| {}).await;
            outcomes.into_iter().map(|mut w| w.pop()).collect()
        }
    };
    let mut out = Vec::new();
    for (scenario, measured) in SCENARIOS.into_iter().zip(measured) {
        let rate = s
            .rate
            .unwrap_or_else(|| measured.as_ref().map_or(0.0, |o| o.rps() * RATE_SHARE));
        if rate.is_nan() || rate <= 0.0 {
            return Err(format!(
                "soak: the calibration of {} measured no successful request",
                scenario.name()
            ));
        }
        let c = Calibration {
            scenario,
            measured,
            rate,
            connections: connections_for(rate),
        };
        eprintln!("  {}", c.progress_line());
        out.push(c);
    }
    Ok(out)
}

/// The repeated request of `scenario` at the gateway.
fn gateway_spec(env: &Env, scenario: Scenario) -> Spec {
    scenarios::request_spec(env, scenario, Target::Gateway, None)
}

/// The gateway's resident set and CPU time at one moment, and the CPU time
/// of the load generator (this process) and the simulator.
#[derive(Clone, Copy, Debug)]
struct Sample {
    at: Instant,
    rss_kib: Option<u64>,
    cpu_seconds: Option<f64>,
    load_cpu_seconds: Option<f64>,
}

impl Sample {
    /// Samples now; `pids`: the gateway's and the simulator's.
    fn now((gateway, sim): (u32, u32)) -> Sample {
        let load = measure::cpu_seconds(std::process::id());
        Sample {
            at: Instant::now(),
            rss_kib: measure::status_kib(gateway, "VmRSS"),
            cpu_seconds: measure::cpu_seconds(gateway),
            load_cpu_seconds: load.zip(measure::cpu_seconds(sim)).map(|(l, s)| l + s),
        }
    }

    /// The gateway's CPU seconds from `from` to this sample.
    fn cpu_since(&self, from: &Sample) -> Option<f64> {
        Some((self.cpu_seconds? - from.cpu_seconds?).max(0.0))
    }

    /// The gateway's CPU and the load generator's and simulator's from
    /// `from` to this sample, as percentages of one CPU.
    fn cpu_pct_since(&self, from: &Sample) -> (Option<f64>, Option<f64>) {
        let secs = self.at.duration_since(from.at).as_secs_f64();
        let pct = |c: Option<f64>| c.filter(|_| secs > 0.0).map(|c| 100.0 * c / secs);
        let load = self.load_cpu_seconds.zip(from.load_cpu_seconds);
        (
            pct(self.cpu_since(from)),
            pct(load.map(|(b, a)| (b - a).max(0.0))),
        )
    }
}

/// What the soak measured.
struct Soaked {
    windows: Vec<Window>,
    /// When the measurement opened.
    start: Sample,
    /// Once every request had ended.
    end: Sample,
}

/// The three scenarios at once, each an open loop at its rate, window by
/// window.
async fn soak(env: &Env, s: &Settings, calibration: &[Calibration]) -> Soaked {
    let schedule = s.schedule();
    let loads: Vec<(Load, Spec)> = calibration
        .iter()
        .map(|c| {
            let load = Load {
                addr: env.gateway.0,
                concurrency: c.connections,
                warmup: schedule.warmup,
                duration: schedule.duration,
                rate: Some(c.rate),
                timeout: s.timeout,
            };
            (load, gateway_spec(env, c.scenario))
        })
        .collect();
    let pid = (env.gateway.1, env.sim.1);
    let n = schedule.windows();
    let mut start = Sample::now(pid);
    let mut ends: Vec<Sample> = Vec::with_capacity(n);
    let mut end = start;
    let outcomes = load::run_windows(&loads, schedule, |ev, windows| match ev {
        Event::MeasureStart => start = Sample::now(pid),
        Event::WindowEnd(k) => {
            ends.push(Sample::now(pid));
            if k > 0 {
                progress(k - 1, n, windows, &ends, &start);
            }
        }
        Event::MeasureEnd => {
            end = Sample::now(pid);
            progress(n - 1, n, windows, &ends, &start);
        }
    })
    .await;
    Soaked {
        windows: windows(outcomes, &start, &ends),
        start,
        end,
    }
}

/// The soak's windows: each scenario's outcome (`outcomes`: per scenario,
/// per window), the gateway's RSS at its end and CPU time in it (between
/// the samples taken when its time began and was up).
fn windows(outcomes: Vec<Vec<Outcome>>, start: &Sample, ends: &[Sample]) -> Vec<Window> {
    let n = outcomes.iter().map(Vec::len).max().unwrap_or(0);
    let mut per_scenario: Vec<_> = outcomes.into_iter().map(Vec::into_iter).collect();
    (0..n)
        .map(|k| {
            let scenarios: Vec<Outcome> = per_scenario
                .iter_mut()
                .map(|o| o.next().unwrap_or_else(Outcome::empty))
                .collect();
            let before = if k == 0 { start } else { &ends[k - 1] };
            let end = ends.get(k);
            let (cpu_pct, load_cpu_pct) = end.map_or((None, None), |e| e.cpu_pct_since(before));
            Window {
                seconds: scenarios.first().map_or(0.0, |o| o.elapsed.as_secs_f64()),
                scenarios,
                rss_kib: end.and_then(|e| e.rss_kib),
                cpu_seconds: end.and_then(|e| e.cpu_since(before)),
                cpu_pct,
                load_cpu_pct,
            }
        })
        .collect()
}

/// The stderr line of window `k` (its requests have ended by now).
fn progress(k: usize, n: usize, windows: &Windows, ends: &[Sample], start: &Sample) {
    let Some(end) = ends.get(k) else { return };
    let before = if k == 0 { start } else { &ends[k - 1] };
    let secs = end.at.duration_since(before.at).as_secs_f64().max(1e-9);
    let mut parts = Vec::new();
    let mut errors = 0;
    for (i, scenario) in SCENARIOS.iter().enumerate() {
        let (ok, e, p99) = windows.peek(i, k, |o| (o.ok, o.errors, p99_ms(o)));
        errors += e;
        parts.push(format!(
            "{} {:.0} req/s p99 {} ms",
            scenario.name(),
            ok as f64 / secs,
            p99.map_or("—".into(), f_ms)
        ));
    }
    let rss = end
        .rss_kib
        .map_or("—".into(), |k| format!("{:.1}", k as f64 / 1024.0));
    let pct = |c: Option<f64>| c.map_or("—".into(), |c| format!("{c:.0}"));
    let (cpu, load_cpu) = end.cpu_pct_since(before);
    eprintln!(
        "  minute {}/{n}: {}; errors {errors}; gateway RSS {rss} MiB, CPU {} %; load + sim CPU {} %",
        k + 1,
        parts.join(", "),
        pct(cpu),
        pct(load_cpu)
    );
}
