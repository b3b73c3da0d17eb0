//! Process management: finding the binaries, CPU pinning, starting the
//! simulator, the gateway (fresh data dir, one user and key) and the bare
//! forwarder, and stopping them.
//!
//! Every child's output is drained by a thread into a bounded tail (so a
//! chatty child never blocks on a full pipe, and the tail can be shown when
//! something fails). A child is ready when it prints `listening on ADDR`
//! (the simulator and the forwarder on stdout, the gateway through its
//! `tracing` log on stderr).
//!
//! Pinning uses `sched_setaffinity` (what `taskset` does): the bench process
//! pins itself to the load CPU before it starts any thread, so the simulator
//! inherits that CPU; the gateway and the forwarder are pinned to the proxy
//! CPU between `fork` and `exec`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use runtime::store::Location;

/// Lines of a child's output kept for error reports.
const TAIL_LINES: usize = 40;
/// How long a child may take to print `listening on`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The upstream key the simulator requires and the gateway is given.
pub const SIM_KEY: &str = "sk-bench-provider-key";

/// `GATEWAY_RATE_LIMITS` of the benchmarked gateway: the capabilities the
/// scenarios use, limited far above anything a run can send (`batch`: a
/// batch's lines, 60,000 a minute by default; `batches`: reading one, which
/// the `batch` scenario polls; `files`: its input file).
pub const RATE_LIMITS: &str =
    "tts=1000000/s,enhance=1000000/s,uploads=1000000/s,chat=1000000/s,completions=1000000/s,audio=1000000/s,realtime=1000000/s,\
     files=1000000/s,batches=1000000/s,batch=1000000/s";

/// Variable holding the provider key named by the benchmark's providers file.
pub const LLM_KEY_VAR: &str = "BENCH_LLM_KEY";

/// The route of `chat_failover`: the simulator's chat model as two
/// deployments (`sim`, and `b` under `/p/b`, which the scenario fails).
pub const FAILOVER_ROUTE: &str = "failover";

/// The benchmarked gateway's providers file: the simulator's chat model,
/// as an `openai` provider (`chat`) and as an `anthropic` one
/// (`chat_anthropic`), and [`FAILOVER_ROUTE`] over it and its twin `b`;
/// the simulator's ElevenLabs speech (`tts_stream`); its realtime model
/// (`realtime`).
fn providers_file(data_dir: &Path, sim: SocketAddr) -> std::path::PathBuf {
    let path = data_dir.join("providers.toml");
    let text = format!(
        "[[provider]]\nid = \"sim\"\nkind = \"openai\"\nbase_url = \"http://{sim}/v1\"\napi_key_env = \"{LLM_KEY_VAR}\"\n\n\
         [[provider.model]]\nid = \"sim-gpt\"\ntype = \"chat\"\ncontext_window = 8192\n\
         input_per_mtok = \"2.00\"\noutput_per_mtok = \"8.00\"\n\n\
         [[provider.model]]\nid = \"gpt-realtime\"\ntype = \"realtime\"\n\
         input_per_mtok = \"4.00\"\noutput_per_mtok = \"16.00\"\n\
         input_audio_per_mtok = \"32.00\"\noutput_audio_per_mtok = \"64.00\"\n\n\
         [[provider]]\nid = \"claude\"\nkind = \"anthropic\"\nbase_url = \"http://{sim}\"\napi_key_env = \"{LLM_KEY_VAR}\"\n\n\
         [[provider.model]]\nid = \"claude-sim\"\ntype = \"chat\"\ncontext_window = 8192\n\
         input_per_mtok = \"2.00\"\noutput_per_mtok = \"8.00\"\n\n\
         [[provider]]\nid = \"b\"\nkind = \"openai\"\nbase_url = \"http://{sim}/p/b/v1\"\napi_key_env = \"{LLM_KEY_VAR}\"\n\n\
         [[provider.model]]\nid = \"sim-gpt\"\ntype = \"chat\"\ncontext_window = 8192\n\
         input_per_mtok = \"2.00\"\noutput_per_mtok = \"8.00\"\n\n\
         [[route]]\nmodel = \"{FAILOVER_ROUTE}\"\nstrategy = \"weighted\"\n\
         targets = [ {{ model = \"sim/sim-gpt\" }}, {{ model = \"b/sim-gpt\" }} ]\n\n\
         [[provider]]\nid = \"eleven\"\nkind = \"elevenlabs\"\nbase_url = \"http://{sim}\"\napi_key_env = \"{LLM_KEY_VAR}\"\n\n\
         [[provider.model]]\nid = \"eleven_flash_v2_5\"\ntype = \"tts\"\nper_1k_chars = \"0.30\"\n"
    );
    if let Err(e) = std::fs::write(&path, text) {
        eprintln!("note: writing {}: {e}", path.display());
    }
    path
}

/// Which CPUs the pieces run on.
#[derive(Clone, Copy, Debug)]
pub struct Pinning {
    /// CPU of the process under test (gateway or forwarder).
    pub proxy_cpu: usize,
    /// CPU of the load generator and the simulator.
    pub load_cpu: usize,
}

/// CPUs this process may run on (`sched_getaffinity`).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Restricts the calling thread (and the threads and children it creates
/// afterwards) to `cpu`.
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    // SAFETY: as above; sched_setaffinity only reads the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Chooses the two CPUs, or `None` when fewer than two are available.
pub fn choose_pinning() -> Option<Pinning> {
    let cpus = allowed_cpus();
    (cpus.len() >= 2).then(|| Pinning {
        proxy_cpu: cpus[0],
        load_cpu: cpus[1],
    })
}

/// The directory holding `gateway` and `provider-sim`: `--bin-dir`, or the
/// directory of this executable (`target/{debug,release}`).
pub fn bin_dir(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let dir = match explicit {
        Some(d) => d.to_path_buf(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot locate this executable: {e}"))?
            .parent()
            .ok_or("this executable has no directory")?
            .to_path_buf(),
    };
    for bin in ["gateway", "provider-sim"] {
        if !dir.join(bin).is_file() {
            return Err(format!(
                "{} not found in {} (build it first: cargo build --release --bins, or pass --bin-dir)",
                bin,
                dir.display()
            ));
        }
    }
    Ok(dir)
}

/// The last lines a child wrote (stdout and stderr interleaved).
#[derive(Clone, Default)]
pub struct Tail(Arc<Mutex<VecDeque<String>>>);

impl Tail {
    fn push(&self, line: String) {
        let mut t = self.0.lock().unwrap();
        if t.len() == TAIL_LINES {
            t.pop_front();
        }
        t.push_back(line);
    }

    /// The kept lines, oldest first.
    pub fn render(&self) -> String {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|l| format!("    {l}\n"))
            .collect()
    }
}

/// A running child process, stopped (SIGTERM, then SIGKILL) on drop.
pub struct Proc {
    /// What it is, for messages.
    pub name: &'static str,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its output tail.
    pub tail: Tail,
    child: Child,
}

impl Proc {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while it has not exited.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, up to 10 s for it to exit, then SIGKILL.
    pub fn stop(&mut self) {
        if !self.alive() {
            return;
        }
        // SAFETY: kill with a pid we own and a valid signal.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !self.alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Drains `r` line by line into `tail`; the first `listening on ADDR` is sent on `tx`.
fn drain(r: impl Read + Send + 'static, tail: Tail, tx: mpsc::Sender<SocketAddr>) {
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            let line = strip_ansi(&line);
            if !sent {
                if let Some(addr) = listening_addr(&line) {
                    sent = tx.send(addr).is_ok();
                }
            }
            tail.push(line);
        }
    });
}

/// The address of a `... listening on ADDR ...` line.
pub fn listening_addr(line: &str) -> Option<SocketAddr> {
    let rest = &line[line.find("listening on ")? + "listening on ".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// `s` without ANSI escape sequences (colours of `tracing`'s output).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte(@..~)
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Spawns `cmd` (output piped), pinned to `cpu` if given, and waits for its
/// `listening on` line.
fn spawn_listening(
    name: &'static str,
    mut cmd: Command,
    cpu: Option<usize>,
) -> Result<Proc, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(cpu) = cpu {
        // SAFETY: the closure only calls async-signal-safe sched_setaffinity.
        unsafe {
            cmd.pre_exec(move || pin_current_thread(cpu));
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let tail = Tail::default();
    let (tx, rx) = mpsc::channel();
    drain(
        child.stdout.take().expect("piped"),
        tail.clone(),
        tx.clone(),
    );
    drain(child.stderr.take().expect("piped"), tail.clone(), tx);
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(addr) => {
                return Ok(Proc {
                    name,
                    addr,
                    tail,
                    child,
                })
            }
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                if let Ok(Some(status)) = child.try_wait() {
                    std::thread::sleep(Duration::from_millis(100));
                    return Err(format!(
                        "{name} exited at start-up ({status}):\n{}",
                        tail.render()
                    ));
                }
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{name} did not print `listening on` in time:\n{}",
                    tail.render()
                ));
            }
        }
    }
}

/// Starts the simulator on a free port (inherits this process's CPU).
pub fn start_sim(bin_dir: &Path) -> Result<Proc, String> {
    let mut cmd = Command::new(bin_dir.join("provider-sim"));
    // Jobs never complete by themselves: the mirror scenario completes its
    // job through the control plane.
    cmd.args([
        "--addr",
        "127.0.0.1:0",
        "--api-key",
        SIM_KEY,
        "--job-ms",
        "86400000",
    ])
    .env("RUST_LOG", "warn")
    .env("NO_COLOR", "1");
    spawn_listening("provider-sim", cmd, None)
}

/// Variables set for one gateway over the inherited environment (its
/// `GATEWAY_DB_SYNC`, its PostgreSQL schema's `GATEWAY_DATABASE_URL`).
pub type Vars = [(&'static str, String)];

/// The gateway's environment, pointing at the simulator, then `vars`.
fn gateway_env(cmd: &mut Command, data_dir: &Path, sim: SocketAddr, vars: &Vars) {
    cmd.env("GATEWAY_PROVIDERS", providers_file(data_dir, sim))
        // `chat_failover` fails `b` on purpose: no cool-down ends it.
        .env("GATEWAY_COOLDOWN_FAILS", "1000000000")
        .env(LLM_KEY_VAR, SIM_KEY)
        .env("GATEWAY_DATA_DIR", data_dir)
        .env("GATEWAY_ADDR", "127.0.0.1:0")
        .env("PROVIDER_API_KEY", SIM_KEY)
        .env("PROVIDER_BASE_URL", format!("http://{sim}/api/v2"))
        .env("PROVIDER_SYNTH_URL", format!("http://{sim}"))
        .env("GATEWAY_ALLOW_PRIVATE_FETCH", "true")
        .env("GATEWAY_SWEEP_INTERVAL_SECS", "0")
        .env("GATEWAY_RECONCILE_AT", "off")
        // The limiter stays on the hot path (its cost is measured) but with
        // quotas no run reaches.
        .env("GATEWAY_RATE_LIMITS", RATE_LIMITS)
        // The `realtime` scenario's sessions are one user's, up to c=64.
        .env("GATEWAY_REALTIME_MAX_SESSIONS", "1000000")
        // Warnings only, plus the one `listening on` line of `serve`.
        .env("RUST_LOG", "warn,app::cli=info")
        .env("NO_COLOR", "1")
        .env_remove("GATEWAY_DB")
        .env_remove("GATEWAY_PUBLIC_URL");
    cmd.envs(vars.iter().map(|(k, v)| (k, v)));
}

/// Runs a one-shot `gateway` subcommand and returns its trimmed stdout.
fn gateway_cli(
    bin_dir: &Path,
    data_dir: &Path,
    sim: SocketAddr,
    vars: &Vars,
    args: &[&str],
) -> Result<String, String> {
    let mut cmd = Command::new(bin_dir.join("gateway"));
    cmd.args(args);
    gateway_env(&mut cmd, data_dir, sim, vars);
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run gateway {}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "gateway {} failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A running gateway and the API key of its one user.
pub struct Gateway {
    /// The process.
    pub proc: Proc,
    /// `gk_...` key of the bench user.
    pub key: String,
}

/// Creates a user and a key in `data_dir` (a fresh directory), then starts
/// `gateway serve` on a free port, pinned to `cpu` if given.
pub async fn start_gateway(
    bin_dir: &Path,
    data_dir: &Path,
    sim: SocketAddr,
    cpu: Option<usize>,
    vars: &Vars,
    seed_usage_rows: u64,
) -> Result<Gateway, String> {
    let user = gateway_cli(
        bin_dir,
        data_dir,
        sim,
        vars,
        &["users", "create", "--email", "bench@example.com"],
    )?;
    let user = user.lines().last().unwrap_or("").trim().to_owned();
    let key = gateway_cli(
        bin_dir,
        data_dir,
        sim,
        vars,
        &["keys", "create", "--user", &user],
    )?;
    let key = key.lines().last().unwrap_or("").trim().to_owned();
    // Billed routes may require credit: grant plenty (a gateway without the
    // `credits` command is fine too).
    if let Err(e) = gateway_cli(
        bin_dir,
        data_dir,
        sim,
        vars,
        &["credits", "grant", "--user", &user, "--amount", "1000000"],
    ) {
        eprintln!("note: {e}");
    }
    if seed_usage_rows > 0 {
        let id: i64 = user
            .parse()
            .map_err(|_| format!("the bench user's id: {user:?}"))?;
        // The database the gateway will open: the run's PostgreSQL schema
        // when there is one, else the SQLite file of its data directory.
        let at = match vars.iter().find(|(k, _)| *k == crate::pg::URL_VAR) {
            Some((_, url)) => Location::Postgres(url.clone()),
            None => Location::Sqlite(data_dir.join("gateway.db")),
        };
        let s = crate::seed::seed(&at, id, seed_usage_rows).await?;
        eprintln!(
            "gateway-bench: seeded {} requests of history (usage, model_usage, ledger) in {:.1} s",
            s.rows,
            s.took.as_secs_f64()
        );
    }
    let mut cmd = Command::new(bin_dir.join("gateway"));
    cmd.arg("serve");
    gateway_env(&mut cmd, data_dir, sim, vars);
    let proc = spawn_listening("gateway", cmd, cpu)?;
    Ok(Gateway { proc, key })
}

/// Starts this executable's hidden `forwarder` subcommand in front of
/// `upstream`, pinned to `cpu` if given.
pub fn start_forwarder(upstream: SocketAddr, cpu: Option<usize>) -> Result<Proc, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate this executable: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.args([
        "forwarder",
        "--upstream",
        &upstream.to_string(),
        "--addr",
        "127.0.0.1:0",
    ]);
    spawn_listening("forwarder", cmd, cpu)
}

/// A fresh, empty directory (the gateway's `GATEWAY_DATA_DIR`), removed on
/// drop unless kept.
pub struct DataDir {
    /// Its path.
    pub path: PathBuf,
    /// Keep it after the run (`--keep-data`).
    pub keep: bool,
}

impl DataDir {
    /// Creates `gateway-bench-PID-NANOS` under `root` (default: the system temp dir).
    pub fn create(root: Option<&Path>, keep: bool) -> Result<DataDir, String> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let root = root
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let path = root.join(format!("gateway-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(DataDir { path, keep })
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_listening_lines() {
        assert_eq!(
            listening_addr("listening on 127.0.0.1:9100"),
            Some("127.0.0.1:9100".parse().unwrap())
        );
        let traced = "\u{1b}[2m2024-01-01T00:00:00Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m \u{1b}[2mapp::cli\u{1b}[0m\u{1b}[2m:\u{1b}[0m listening on 127.0.0.1:41234";
        assert_eq!(
            listening_addr(&strip_ansi(traced)),
            Some("127.0.0.1:41234".parse().unwrap())
        );
        assert_eq!(listening_addr("nothing here"), None);
    }
}
