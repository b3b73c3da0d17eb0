//! What a run produced ([`Report`]) and the figures read across its rows:
//! a row's overhead over the direct run, the errors, billed over free. The
//! checks, the markdown and the JSON are written from it by the sibling
//! modules.

use crate::measure::Machine;
use crate::plan::Plan;
use crate::procs::Pinning;
use crate::row::{Row, Target};

/// Where and how a run or a soak ran: what every report opens with.
pub struct Context {
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
    /// The (main) gateway's `GATEWAY_DB_SYNC` (inherited; `full` when unset).
    pub sync: String,
    /// CPUs kept busy by other processes during the run, on average.
    pub others_cpus: Option<f64>,
}

impl Context {
    /// The context of a run or soak of this process that just ended: its
    /// command line, this machine, the database the gateways used
    /// (`GATEWAY_DATABASE_URL` or SQLite), and what the caller measured.
    pub fn now(
        pinning: Option<Pinning>,
        bin_dir: &std::path::Path,
        data_fs: String,
        sync: String,
        others_cpus: Option<f64>,
    ) -> Context {
        Context {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            machine: crate::measure::machine(),
            pinning,
            bin_dir: bin_dir.display().to_string(),
            data_fs,
            store: crate::store_label(),
            sync,
            others_cpus,
        }
    }

    /// The machine line.
    pub fn machine_line(&self) -> String {
        machine_text(
            &self.machine,
            self.pinning,
            &self.data_fs,
            &self.store,
            &self.sync,
            &self.bin_dir,
        )
    }

    /// The run line's last clause: how busy other processes kept the machine.
    pub fn noise(&self) -> String {
        match self.others_cpus {
            Some(n) => format!("; other processes kept {n:.2} CPUs busy on average"),
            None => String::new(),
        }
    }

    /// The JSON fields every report starts with.
    pub fn json(&self) -> serde_json::Map<String, serde_json::Value> {
        let m = &self.machine;
        let v = serde_json::json!({
            "command": self.command,
            "machine": {"cpus": m.cpus, "cpu_model": m.cpu_model, "kernel": m.kernel, "mem_mib": m.mem_mib},
            "pinning": self.pinning.map(|p| serde_json::json!({"proxy_cpu": p.proxy_cpu, "load_cpu": p.load_cpu})),
            "bin_dir": self.bin_dir,
            "data_fs": self.data_fs,
            "store": self.store,
            "db_sync": self.sync,
            "other_processes_cpus": self.others_cpus,
        });
        object(v)
    }
}

/// The fields of a JSON object (`json!({...})` is one).
pub fn object(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match v {
        serde_json::Value::Object(map) => map,
        _ => unreachable!("a JSON object"),
    }
}

/// Everything a run produced.
pub struct Report {
    /// Where and how it ran.
    pub ctx: Context,
    /// What was run.
    pub plan: Plan,
    /// The runs.
    pub rows: Vec<Row>,
    /// `chat` and the doors translated to it again, at one rate.
    pub equal: Option<EqualLoad>,
    /// The runs of a second gateway under the other sync mode.
    pub second: Option<SyncRun>,
}

/// `chat` and the doors translated to it (`chat_anthropic`, `responses`)
/// through the gateway as open loops at one rate, at the highest
/// concurrency: their CPU per request at equal load.
pub struct EqualLoad {
    /// Requests per second offered to each.
    pub rate: f64,
    /// The gateway's rows.
    pub rows: Vec<Row>,
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
    /// The row of this scenario, target and concurrency, if it ran.
    pub fn find(&self, scenario: &str, target: Target, c: usize) -> Option<&Row> {
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

    /// Every run's row: the plan's, at equal load, under the other sync
    /// mode.
    pub fn all_rows(&self) -> impl Iterator<Item = &Row> {
        let equal = self.equal.iter().flat_map(|e| &e.rows);
        let second = self.second.iter().flat_map(|s| &s.rows);
        self.rows.iter().chain(equal).chain(second)
    }

    /// All errors of all runs.
    pub fn errors(&self) -> u64 {
        self.all_rows().map(|r| r.errors).sum()
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
}

/// The machine line of a report (a normal run's, a soak's): the machine,
/// the pinning, the gateway's data file system and database, its
/// `GATEWAY_DB_SYNC`, where the binaries came from.
fn machine_text(
    m: &Machine,
    pinning: Option<Pinning>,
    data_fs: &str,
    store: &str,
    sync: &str,
    bin_dir: &str,
) -> String {
    let pin = match pinning {
        Some(p) => format!(
            "gateway / forwarder pinned to CPU {}, load generator + simulator to CPU {}",
            p.proxy_cpu, p.load_cpu
        ),
        None => "no CPU pinning".into(),
    };
    format!(
        "{} × {}, {} MiB RAM, Linux {}; {pin}; gateway data on {data_fs}; database: {store}; GATEWAY_DB_SYNC={sync}; binaries from `{bin_dir}`",
        m.cpus, m.cpu_model, m.mem_mib, m.kernel
    )
}
