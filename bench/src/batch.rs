//! The `batch` scenario (#43): OpenAI's Batch API run by the gateway
//! itself, against the same lines sent as interactive requests, and the
//! interactive `chat`'s latency while a batch runs. Gateway only: the
//! simulator has no batches (a batch's lines are the gateway's own
//! requests to it), and the forwarder has nothing to run them.
//!
//! | row | c | what |
//! |---|---|---|
//! | `batch_loop` | the batch concurrency | `chat`'s request in a closed loop straight at `POST /api/v1/chat/completions` (the interactive path): its rate is the lines/s to beat |
//! | `batch` | the batch concurrency | N of those requests as the lines of one batch: the JSONL file uploaded (`POST /api/v1/files`, `purpose=batch`; not timed), then timed from `POST /api/v1/batches` to its end (its result files published; looked for every [`client::POLL`]; see [`client`]): lines/s, and the gateway's CPU per line over that time. N: a pilot batch of [`PILOT_LINES`] (not reported) gives the rate at which N runs for about the duration ([`MIN_LINES`] to [`MAX_LINES`]) |
//! | `batch_chat_idle` | each of `--concurrency` | `chat`'s load at the gateway, no batch running |
//! | `batch_chat_busy` | same | the same load while a batch runs (made just before, sized to outlast it, cancelled after it) |
//! | `batch_bg` | same | that batch's lines done while the load ran (its warm-up included), per second |
//!
//! The batch concurrency is the gateway's `GATEWAY_BATCH_CONCURRENCY`
//! (inherited from the bench's environment; 8 when unset); the gateway
//! yields a batch's places to interactive requests in flight, which is
//! what `batch_bg` shows. A failed line is an error (the first lines of the
//! batch's error file are the samples), and so is a batch not ended within
//! max(`--timeout`, 20 × the duration). A background batch that ended
//! before its load did is noted in its row: the load then ran partly
//! without it. The closed loop is closed whatever `--rate` says; the chat
//! loads follow it.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::load::{self, Event, Load, Spec};
use crate::measure::{Probe, ProbeResult};
use crate::plan::{Env, Plan};
use crate::row::{Row, Target};

mod client;

use client::{Client, Made, Progress};

/// Fewest lines of a batch.
pub const MIN_LINES: usize = 50;
/// Lines of the pilot batch, whose rate sizes the measured one.
pub const PILOT_LINES: usize = 200;
/// Most lines of a batch (the gateway's `GATEWAY_BATCH_MAX_LINES` default).
pub const MAX_LINES: usize = 50_000;
/// Lines of one batch in flight when `GATEWAY_BATCH_CONCURRENCY` is unset.
const DEFAULT_CONCURRENCY: usize = 8;
/// A background batch's lines: this many times what the batch alone would
/// run while its load lasts.
const BG_MARGIN: f64 = 3.0;

/// The gateway's batch concurrency (it inherits the bench's environment).
fn batch_concurrency() -> usize {
    std::env::var("GATEWAY_BATCH_CONCURRENCY")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|c| *c > 0)
        .unwrap_or(DEFAULT_CONCURRENCY)
}

/// Lines for a batch to run about `secs` at `rate` lines/s.
fn lines_for(rate: f64, secs: f64) -> usize {
    let n = (rate * secs).round();
    if n.is_finite() && n > 0.0 {
        (n as usize).clamp(MIN_LINES, MAX_LINES)
    } else {
        MIN_LINES
    }
}

/// The scenario's rows: the closed loop, the batch, then `chat` alone and
/// under a batch at each concurrency of `plan`. `chat` is the `chat`
/// scenario's gateway request: its body is every line's.
pub async fn rows(env: &Env, plan: &Plan, chat: &Spec) -> Vec<Row> {
    let bc = batch_concurrency();
    let api = Client {
        env,
        body: serde_json::from_slice(&chat.body).unwrap_or(Value::Null),
        timeout: plan.timeout,
        limit: plan.timeout.max(plan.duration * 20),
    };
    let mut rows = Vec::new();
    let looped = load_row(env, plan, ("batch_loop", bc, None), chat).await;
    let fallback = looped.rps;
    rows.push(looped);
    let alone = batch_row(&api, bc, plan.duration.as_secs_f64()).await;
    let rate = if alone.rps > 0.0 { alone.rps } else { fallback };
    rows.push(alone);
    let window = (plan.warmup + plan.duration).as_secs_f64() * BG_MARGIN;
    let bg = (lines_for(rate, window) + MIN_LINES).min(MAX_LINES);
    for &c in &plan.concurrency {
        rows.push(load_row(env, plan, ("batch_chat_idle", c, plan.rate), chat).await);
        rows.extend(busy_rows(&api, plan, c, bg, chat).await);
    }
    rows
}

/// One load of `spec` at the gateway, named, at a concurrency and rate
/// (`None`: closed loop), with the gateway's and the simulator's CPU.
async fn load_row(
    env: &Env,
    plan: &Plan,
    (name, c, rate): (&'static str, usize, Option<f64>),
    spec: &Spec,
) -> Row {
    let (addr, pid) = env.gateway;
    let sim_pid = env.sim.1;
    let load = Load {
        addr,
        concurrency: c,
        warmup: plan.warmup,
        duration: plan.duration,
        rate,
        timeout: plan.timeout,
    };
    let mut probes: Option<(Probe, Probe)> = None;
    let mut measured = None;
    let outcome = load::run(&load, spec, |ev| match ev {
        Event::MeasureStart => probes = Some((Probe::start(pid), Probe::start(sim_pid))),
        Event::MeasureEnd => measured = probes.take().map(|(p, s)| (p.finish(), s.finish())),
        Event::WindowEnd(_) => {}
    })
    .await;
    let (m, sim_m) = measured.unwrap_or_default();
    let row = Row::from_outcome(name, Target::Gateway, c, &outcome, Some(m), sim_m);
    eprintln!("  {}", row.progress_line());
    row
}

/// The `batch` row: a pilot batch of [`PILOT_LINES`] gives the rate that
/// sizes the measured one to run about `secs`.
async fn batch_row(api: &Client<'_>, bc: usize, secs: f64) -> Row {
    let pilot = match timed(api, bc, PILOT_LINES).await {
        Ok(t) => t,
        Err(row) => return *row,
    };
    if pilot.progress.failed > 0 || pilot.unended.is_some() {
        return pilot.row(api, bc, "pilot batch: ").await;
    }
    let rate = pilot.progress.done as f64 / pilot.elapsed.as_secs_f64();
    eprintln!(
        "  batch pilot: {} lines in {:.2} s ({rate:.0} lines/s)",
        pilot.progress.done,
        pilot.elapsed.as_secs_f64()
    );
    let row = match timed(api, bc, lines_for(rate, secs)).await {
        Ok(t) => t.row(api, bc, "").await,
        Err(row) => *row,
    };
    eprintln!("  {}", row.progress_line());
    row
}

/// A batch timed from its create to its end, and then read.
struct Timed {
    made: Made,
    progress: Progress,
    elapsed: Duration,
    m: ProbeResult,
    /// Not ended within the limit: why.
    unended: Option<String>,
    /// `GET /api/v1/batches/{id}` after its end: the object and its time.
    read: Result<(Value, Duration), String>,
}

/// Uploads `n` lines and runs them as a batch, timed from its create to
/// its end (or the limit: then it is cancelled), with the gateway's CPU.
async fn timed(api: &Client<'_>, bc: usize, n: usize) -> Result<Timed, Box<Row>> {
    let fail = |e: String| Box::new(Row::failed("batch", Target::Gateway, bc, e));
    let file = api.upload(n).await;
    let file = file.map_err(|e| fail(format!("input file: {e}")))?;
    let probe = Probe::start(api.env.gateway.1);
    let made = match api.create(&file, n).await {
        Ok(b) => b,
        Err(e) => {
            probe.finish();
            return Err(fail(e));
        }
    };
    let end = api.wait(&made, |p| p.ended).await;
    let (elapsed, m) = (made.at.elapsed(), probe.finish());
    let (progress, unended) = match end {
        Ok(p) => (p, None),
        Err((why, p)) => {
            let stopped = api.stop(&made).await.err().unwrap_or_default();
            (p, Some(format!("{why} {stopped}")))
        }
    };
    let read = api.read(&made.id).await;
    Ok(Timed {
        made,
        progress,
        elapsed,
        m,
        unended,
        read,
    })
}

impl Timed {
    /// Its row (`what`: which batch, when not the measured one): lines
    /// done over the time taken, failed lines as errors, and one more
    /// when it ended otherwise than `completed` or did not end.
    async fn row(self, api: &Client<'_>, bc: usize, what: &str) -> Row {
        let (p, id) = (self.progress, &self.made.id);
        let mut samples = api.error_samples(id, p.failed).await;
        let mut failed = p.failed;
        let status = self.read.as_ref().ok().map(|(v, _)| &v["status"]);
        if let Some(why) = &self.unended {
            failed += 1;
            samples.insert(0, why.clone());
        } else if let Some(s) = status.filter(|s| *s != "completed") {
            failed += 1;
            samples.insert(0, format!("{what}batch {id} ended {s}"));
        }
        let elapsed = self.elapsed;
        let mut row = Row::from_batch(
            "batch",
            bc,
            (p.done, failed),
            samples,
            elapsed,
            Some(self.m),
        );
        let read = match &self.read {
            Ok((_, took)) => format!("{:.0} ms", took.as_secs_f64() * 1e3),
            Err(e) => format!("failed: {e}"),
        };
        row.note = Some(format!(
            "{what}{} lines; GET /api/v1/batches/{{id}} after its end: {read}",
            self.made.lines
        ));
        row
    }
}

/// `chat` at `c` while a batch of `n` lines runs: the load's row, and the
/// batch's progress meanwhile (`batch_bg`). The batch is cancelled after.
async fn busy_rows(api: &Client<'_>, plan: &Plan, c: usize, n: usize, chat: &Spec) -> Vec<Row> {
    let fail = |e: String| vec![Row::failed("batch_chat_busy", Target::Gateway, c, e)];
    let made = match api.upload(n).await {
        Ok(file) => match api.create(&file, n).await {
            Ok(b) => b,
            Err(e) => return fail(format!("background batch: {e}")),
        },
        Err(e) => return fail(format!("background batch's file: {e}")),
    };
    // Running: its first line ended.
    if let Err((e, _)) = api.wait(&made, |p| p.ended || p.done + p.failed > 0).await {
        let _ = api.stop(&made).await;
        return fail(format!("background batch: {e}"));
    }
    let before = api.progress(&made).await;
    let t0 = Instant::now();
    let load = load_row(api.env, plan, ("batch_chat_busy", c, plan.rate), chat).await;
    let after = api.progress(&made).await;
    let elapsed = t0.elapsed();
    let mut bg = match (before, after) {
        (Ok(a), Ok(z)) => {
            let counts = (
                z.done - a.done.min(z.done),
                z.failed - a.failed.min(z.failed),
            );
            let samples = (counts.1 > 0)
                .then(|| format!("{} of the background batch's lines failed", counts.1))
                .into_iter()
                .collect();
            let mut r = Row::from_batch("batch_bg", c, counts, samples, elapsed, None);
            r.note = Some(if z.ended {
                "the batch ended before the load did".into()
            } else {
                format!("{} of {} lines done at the end", z.done, made.lines)
            });
            r
        }
        (Err(e), _) | (_, Err(e)) => Row::failed("batch_bg", Target::Gateway, c, e),
    };
    if let Err(e) = api.stop(&made).await {
        bg.errors += 1;
        bg.error_samples.push(e);
    }
    eprintln!("  {}", bg.progress_line());
    vec![load, bg]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_follow_the_rate_within_bounds() {
        assert_eq!(lines_for(1234.4, 2.0), 2469);
        assert_eq!(lines_for(0.0, 10.0), MIN_LINES);
        assert_eq!(lines_for(f64::NAN, 10.0), MIN_LINES);
        assert_eq!(lines_for(1e6, 10.0), MAX_LINES);
    }
}
