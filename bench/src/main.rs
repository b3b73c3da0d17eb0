//! # gateway-bench
//!
//! Measures what the gateway costs. One run starts the provider simulator,
//! the gateway (`gateway serve`, fresh data directory, one user and key) and
//! a bare forwarder (a minimal hyper proxy: the floor any proxy pays), then
//! drives the same request mix three times — straight at the simulator,
//! through the forwarder, through the gateway — and prints markdown tables
//! (throughput, p50 / p99 / p99.9 latency from an HDR histogram, overhead
//! over direct, CPU time per request and peak RSS of the process under test,
//! errors) and writes the same as JSON. With `chat` and a door translated
//! to it (`chat_anthropic`, `responses`) in the plan, those run again on the
//! same gateway as open loops at one rate (half the slowest one's closed
//! loop), where their CPU per request is compared. Then a second gateway (fresh data)
//! runs `free`, `billed` and `chat` at the highest concurrency under the
//! other `GATEWAY_DB_SYNC` mode (`normal`, or `full` when `normal` is
//! inherited), reported in a table of its own (`--one-sync`: not). With
//! `GATEWAY_DATABASE_URL` set, each gateway gets a fresh schema of that
//! PostgreSQL database ([`pg`]) and the report names the store.
//!
//! `--soak MINUTES` runs a soak instead ([`soak`]): `chat`, `free` and
//! `billed` at once through one gateway, each an open loop at half its
//! rate when the three run together at c=64, for that many minutes, reported minute by minute
//! and against the soak's goals (no errors, flat RSS, flat p99). It is not
//! part of CI.
//!
//! ```text
//! cargo build --release --bins && target/release/gateway-bench          # full run, ~3.5 min
//! target/debug/gateway-bench --quick --out /tmp/bench.json              # 1-second smoke run (CI)
//! target/release/gateway-bench --soak 30 --out /tmp/soak.json           # the 30-minute soak
//! ```
//!
//! The gateway and simulator binaries are taken from the directory of this
//! executable (`--bin-dir` to override). By default the gateway and the
//! forwarder run pinned to one CPU and the load generator and the simulator
//! to another (`--no-pin` to disable), so that the figures compare on a
//! two-core machine. It never asserts timing: the exit code is non-zero only
//! when a request failed or a scenario could not run (a soak's missed goal
//! neither).
//!
//! # Layout
//!
//! * [`load`]: the load generator (hyper client connections, closed or open
//!   loop, warm-up, HDR histograms; several loads on one clock, measured in
//!   windows, for the soak);
//! * [`outcome`]: what a load run measured (histograms, requests, errors), per window;
//! * [`upload`]: the streamed multipart upload body, and sending one;
//! * [`forwarder`]: the bare forwarder, run as the hidden `forwarder`
//!   subcommand of this binary;
//! * [`procs`]: finding binaries, CPU pinning, starting and stopping the
//!   simulator, the gateway and the forwarder;
//! * [`measure`]: CPU time and peak RSS from `/proc`, machine description;
//! * [`scenarios`]: the scenarios (free, billed, upload, mirror, chat, chat_stream, chat_anthropic, chat_failover, chat_cached, responses, tts_stream, realtime, batch) and their three targets ([`realtime`]: the WebSocket sessions; [`batch`]: batches run by the gateway);
//! * [`row`]: one run's result and where its requests went;
//! * [`report`]: overheads, the issue's targets, markdown and JSON of the rows;
//! * [`pg`]: a fresh PostgreSQL schema per gateway;
//! * [`seed`]: `--seed-usage-rows`, history written into the gateway's
//!   database, through its store, before it starts;
//! * [`soak`]: `--soak MINUTES`, its calibration, its minutes and its
//!   report (goals checked, never asserted).

mod batch;
mod forwarder;
mod load;
mod measure;
mod mirror;
mod outcome;
mod pg;
mod plan;
mod procs;
mod realtime;
mod report;
mod row;
mod scenarios;
mod seed;
mod soak;
mod upload;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::plan::{Plan, Scenario};

/// Command line.
#[derive(Parser, Debug)]
#[command(
    name = "gateway-bench",
    about = "Benchmark: the same request mix direct at the simulator, through a bare forwarder, and through the gateway"
)]
struct Cli {
    /// Hidden subcommands (the forwarder process).
    #[command(subcommand)]
    command: Option<Command>,
    /// Smoke run: 1 s per scenario, 0.3 s warm-up, 64 MiB upload.
    #[arg(long)]
    quick: bool,
    /// Measured seconds per run [default: 10, quick: 1].
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Warm-up seconds per run [default: 2, quick: 0.3].
    #[arg(long, value_name = "SECS")]
    warmup: Option<f64>,
    /// Concurrencies (connections) of the free and billed scenarios.
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    concurrency: Vec<usize>,
    /// Scenarios to run (comma-separated) [default: all].
    #[arg(long, value_delimiter = ',', value_enum)]
    scenario: Vec<Scenario>,
    /// Open loop at this many requests/s per run (default: closed loop).
    #[arg(long, value_name = "REQ_PER_S")]
    rate: Option<f64>,
    /// Size of the uploaded file in MiB [default: 500, quick: 64].
    #[arg(long, value_name = "MIB")]
    upload_mib: Option<u64>,
    /// Pin the gateway and forwarder to one CPU, load and simulator to another (default).
    #[arg(long, overrides_with = "no_pin")]
    pin: bool,
    /// Do not pin.
    #[arg(long, overrides_with = "pin")]
    no_pin: bool,
    /// Directory of the `gateway` and `provider-sim` binaries [default: this executable's].
    #[arg(long, value_name = "DIR")]
    bin_dir: Option<PathBuf>,
    /// Where to write the JSON results.
    #[arg(long, value_name = "FILE", default_value = "bench-results.json")]
    out: PathBuf,
    /// Where the gateway's fresh data directory is created [default: the system temp dir].
    /// Its file system matters: every billed request creates and fsyncs files.
    #[arg(long, value_name = "DIR")]
    data_root: Option<PathBuf>,
    /// Keep the gateway's data directory after the run.
    #[arg(long)]
    keep_data: bool,
    /// Run only the inherited GATEWAY_DB_SYNC. By default a second gateway
    /// follows under the other mode (`normal`, or `full` when `normal` is
    /// inherited) for free, billed and chat at the highest concurrency.
    #[arg(long)]
    one_sync: bool,
    /// Before the runs, write this many billed requests of history (usage,
    /// token detail and ledger rows, over the last 365 days) for the bench
    /// user into the gateway's database, through its store.
    #[arg(long, value_name = "N", default_value_t = 0)]
    seed_usage_rows: u64,
    /// Longest time one request may take before it counts as an error (seconds).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    timeout: f64,
    /// Soak instead of the runs: chat, free and billed at once through one
    /// gateway, each an open loop at half its req/s when the three run
    /// together in closed loops at c=64 in all (measured first, for
    /// --duration s after --warmup s,
    /// default 5 and 1; --rate: that rate each, no calibration), for MINUTES
    /// minutes (fractions allowed), reported per minute. Not for CI.
    #[arg(
        long,
        value_name = "MINUTES",
        conflicts_with_all = ["quick", "scenario", "concurrency", "one_sync", "upload_mib"]
    )]
    soak: Option<f64>,
}

/// Hidden subcommands.
#[derive(Subcommand, Debug)]
enum Command {
    /// Run the bare forwarder in front of UPSTREAM (used by the bench itself).
    #[command(hide = true)]
    Forwarder {
        /// The simulator's address.
        #[arg(long)]
        upstream: SocketAddr,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Forwarder { upstream, addr }) = cli.command {
        return match forwarder::run(upstream, addr) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("forwarder: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let (plan, soak) = match plan(&cli).and_then(|p| Ok((p, soak::Settings::of(&cli)?))) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("gateway-bench: {e}");
            return ExitCode::from(2);
        }
    };
    // Pin before any thread exists: the runtime's threads and the simulator inherit it.
    let mut pinning = None;
    if !cli.no_pin {
        match procs::choose_pinning() {
            Some(p) => match procs::pin_current_thread(p.load_cpu) {
                Ok(()) => pinning = Some(p),
                Err(e) => eprintln!(
                    "note: cannot pin to CPU {}: {e}; running unpinned",
                    p.load_cpu
                ),
            },
            None => eprintln!("note: fewer than two CPUs available; running unpinned"),
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gateway-bench: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match soak {
        Some(soak) => rt.block_on(soak::run(&cli, soak, pinning)),
        None => rt.block_on(run(&cli, plan, pinning)),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("gateway-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The plan of the command line.
fn plan(cli: &Cli) -> Result<Plan, String> {
    let secs = |v: f64, name: &str| {
        if v.is_finite() && v >= 0.0 {
            Ok(Duration::from_secs_f64(v))
        } else {
            Err(format!("--{name} must be a non-negative number of seconds"))
        }
    };
    let concurrency: Vec<usize> = cli.concurrency.clone();
    if concurrency.is_empty() || concurrency.contains(&0) {
        return Err("--concurrency must list positive numbers".into());
    }
    let upload_mib = cli.upload_mib.unwrap_or(if cli.quick { 64 } else { 500 });
    if upload_mib == 0 || upload_mib > 500 {
        return Err("--upload-mib must be between 1 and 500 (the gateway's limit)".into());
    }
    Ok(Plan {
        scenarios: if cli.scenario.is_empty() {
            Scenario::ALL.to_vec()
        } else {
            Scenario::ALL
                .into_iter()
                .filter(|s| cli.scenario.contains(s))
                .collect()
        },
        concurrency,
        duration: secs(
            cli.duration.unwrap_or(if cli.quick { 1.0 } else { 10.0 }),
            "duration",
        )?,
        warmup: secs(
            cli.warmup.unwrap_or(if cli.quick { 0.3 } else { 2.0 }),
            "warmup",
        )?,
        rate: cli.rate.filter(|r| *r > 0.0),
        upload_bytes: upload_mib << 20,
        timeout: secs(cli.timeout, "timeout")?,
        targets: report::Target::ALL.to_vec(),
    })
}

/// One gateway of the run: its data directory, its schema (PostgreSQL),
/// the process and its key.
struct GatewayRun {
    gateway: procs::Gateway,
    schema: Option<pg::Schema>,
    data: procs::DataDir,
}

impl GatewayRun {
    /// A fresh data directory (and schema, with `GATEWAY_DATABASE_URL`),
    /// then `gateway serve` with `sync` as its `GATEWAY_DB_SYNC` when given.
    async fn start(
        cli: &Cli,
        bin_dir: &std::path::Path,
        sim: SocketAddr,
        cpu: Option<usize>,
        n: usize,
        sync: Option<&str>,
    ) -> Result<GatewayRun, String> {
        let data = procs::DataDir::create(cli.data_root.as_deref(), cli.keep_data)?;
        let mut vars: Vec<(&'static str, String)> = Vec::new();
        let schema = match database_url() {
            Some(base) => Some(pg::Schema::create(&base, n).await?),
            None => None,
        };
        if let Some(s) = &schema {
            vars.push((pg::URL_VAR, s.url.clone()));
        }
        if let Some(sync) = sync {
            vars.push(("GATEWAY_DB_SYNC", sync.to_owned()));
        }
        let gateway =
            procs::start_gateway(bin_dir, &data.path, sim, cpu, &vars, cli.seed_usage_rows).await?;
        eprintln!(
            "gateway-bench: gateway {} (pid {}), data {}{}",
            gateway.proc.addr,
            gateway.proc.pid(),
            data.path.display(),
            schema
                .as_ref()
                .map(|s| format!(", PostgreSQL schema {}", s.name))
                .unwrap_or_default()
        );
        Ok(GatewayRun {
            gateway,
            schema,
            data,
        })
    }

    /// Stops the gateway and drops its schema (the data directory goes
    /// with `self`).
    async fn stop(mut self) -> procs::Proc {
        self.gateway.proc.stop();
        if let Some(s) = self.schema.take() {
            s.drop_now().await;
        }
        self.gateway.proc
    }
}

/// `GATEWAY_DATABASE_URL` when set: every gateway gets a schema of it.
fn database_url() -> Option<String> {
    std::env::var(pg::URL_VAR)
        .ok()
        .filter(|u| !u.trim().is_empty())
}

/// The store the gateways use, for the report.
fn store_label() -> String {
    match database_url() {
        Some(_) => "PostgreSQL (GATEWAY_DATABASE_URL, a fresh schema per gateway)".into(),
        None => "SQLite (the gateway's fresh data directory)".into(),
    }
}

/// The inherited `GATEWAY_DB_SYNC` (the gateway's default: `full`), and
/// the other mode, whose runs follow.
fn sync_modes() -> (String, &'static str) {
    let sync = std::env::var("GATEWAY_DB_SYNC")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "full".into());
    let other = if sync.trim().eq_ignore_ascii_case("normal") {
        "full"
    } else {
        "normal"
    };
    (sync, other)
}

/// The second sync mode's plan: `free`, `billed` and `chat` (those of the
/// plan) at its highest concurrency, at the gateway only; `None` when
/// there is nothing to run or `--one-sync` was given.
fn other_sync_plan(cli: &Cli, plan: &Plan) -> Option<Plan> {
    let hi = plan.concurrency.iter().copied().max()?;
    let scenarios: Vec<Scenario> = plan
        .scenarios
        .iter()
        .copied()
        .filter(|s| matches!(s, Scenario::Free | Scenario::Billed | Scenario::Chat))
        .collect();
    (!cli.one_sync && !scenarios.is_empty()).then(|| Plan {
        scenarios,
        concurrency: vec![hi],
        targets: vec![report::Target::Gateway],
        ..plan.clone()
    })
}

/// The share of the slowest closed loop's throughput (of `chat` and the
/// doors translated to it, through the gateway, at the highest
/// concurrency) at which they are run again: one open-loop rate for all,
/// half what the slowest sustains.
const EQUAL_LOAD_SHARE: f64 = 0.5;

/// `chat` and the doors translated to it (`chat_anthropic`, `responses`)
/// again, at the gateway only, as open loops at one rate
/// ([`EQUAL_LOAD_SHARE`] of the slowest one's closed loop at the highest
/// concurrency): CPU per request compared at equal load. A closed loop runs
/// each at its own rate, and the gateway's cost per request falls as its
/// rate rises (a group commit and a wake-up are shared by more requests),
/// so there a slower door pays twice. `None` without `chat` and a door,
/// with one concurrency of 1, or when the plan's runs are open loops at one
/// rate already (`--rate`).
fn equal_load_plan(plan: &Plan, rows: &[row::Row]) -> Option<Plan> {
    let hi = plan.concurrency.iter().copied().max().filter(|&c| c > 1)?;
    let doors = plan
        .scenarios
        .iter()
        .copied()
        .filter(|s| matches!(s, Scenario::ChatAnthropic | Scenario::Responses));
    let scenarios: Vec<Scenario> = std::iter::once(Scenario::Chat).chain(doors).collect();
    if plan.rate.is_some() || scenarios.len() < 2 || !plan.scenarios.contains(&Scenario::Chat) {
        return None;
    }
    let closed = scenarios.iter().map(|s| {
        rows.iter()
            .find(|r| {
                r.scenario == s.name() && r.target == report::Target::Gateway && r.concurrency == hi
            })
            .map(|r| r.rps)
    });
    let slowest = closed
        .collect::<Option<Vec<f64>>>()?
        .into_iter()
        .fold(f64::INFINITY, f64::min);
    let rate = (slowest * EQUAL_LOAD_SHARE).round();
    (rate >= 1.0).then(|| Plan {
        scenarios,
        concurrency: vec![hi],
        targets: vec![report::Target::Gateway],
        rate: Some(rate),
        ..plan.clone()
    })
}

/// Starts everything, runs the plan, then the other sync mode's plan on a
/// second gateway, reports. `Ok(true)` when no request failed.
async fn run(cli: &Cli, plan: Plan, pinning: Option<procs::Pinning>) -> Result<bool, String> {
    let bin_dir = procs::bin_dir(cli.bin_dir.as_deref())?;
    let proxy_cpu = pinning.map(|p| p.proxy_cpu);
    let (sync, other_sync) = sync_modes();
    let mut sim = procs::start_sim(&bin_dir)?;
    let main = GatewayRun::start(cli, &bin_dir, sim.addr, proxy_cpu, 0, None).await?;
    let mut fwd = procs::start_forwarder(sim.addr, proxy_cpu)?;
    eprintln!(
        "gateway-bench: simulator {} (pid {}), forwarder {} (pid {})",
        sim.addr,
        sim.pid(),
        fwd.addr,
        fwd.pid(),
    );
    let data_fs = measure::filesystem_of(&main.data.path);
    let env = plan::Env {
        sim: (sim.addr, sim.pid()),
        forwarder: (fwd.addr, fwd.pid()),
        gateway: (main.gateway.proc.addr, main.gateway.proc.pid()),
        key: main.gateway.key.clone(),
    };
    let noise = measure::Noise::start(vec![
        std::process::id(),
        sim.pid(),
        fwd.pid(),
        main.gateway.proc.pid(),
    ]);
    let rows = scenarios::run_all(&env, &plan).await;
    let mut equal = None;
    if let Some(plan) = equal_load_plan(&plan, &rows) {
        let rate = plan.rate.unwrap_or_default();
        eprintln!(
            "gateway-bench: chat and the doors translated to it at one rate, {rate:.0} req/s"
        );
        let rows = scenarios::run_all(&env, &plan).await;
        equal = Some(report::EqualLoad { rate, rows });
    }
    let others_cpus = noise.others_cpus();
    let mut stopped = vec![main.stop().await];
    let mut second = None;
    if let Some(plan2) = other_sync_plan(cli, &plan) {
        eprintln!("gateway-bench: a second gateway under GATEWAY_DB_SYNC={other_sync}");
        let g = GatewayRun::start(cli, &bin_dir, sim.addr, proxy_cpu, 1, Some(other_sync)).await?;
        let env2 = plan::Env {
            gateway: (g.gateway.proc.addr, g.gateway.proc.pid()),
            key: g.gateway.key.clone(),
            ..env
        };
        let rows = scenarios::run_all(&env2, &plan2).await;
        stopped.push(g.stop().await);
        second = Some(report::SyncRun {
            sync: other_sync.to_owned(),
            rows,
        });
    }

    let report = report::Report {
        ctx: report::Context::now(pinning, &bin_dir, data_fs, sync, others_cpus),
        plan,
        rows,
        equal,
        second,
    };
    let errors = report.errors();
    fwd.stop();
    sim.stop();
    if errors > 0 {
        for p in stopped.iter().chain([&fwd, &sim]) {
            eprintln!("last output of {}:\n{}", p.name, p.tail.render());
        }
    }
    publish(&cli.out, &report.markdown(), &report.json())?;
    Ok(errors == 0)
}

/// Prints a report's markdown on stdout and writes its JSON to `out`.
pub(crate) fn publish(
    out: &std::path::Path,
    markdown: &str,
    json: &serde_json::Value,
) -> Result<(), String> {
    println!("{markdown}");
    let json = serde_json::to_string_pretty(json).map_err(|e| e.to_string())?;
    std::fs::write(out, json + "\n").map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    eprintln!("gateway-bench: results written to {}", out.display());
    Ok(())
}
