//! Process measurements from `/proc`: CPU time, resident memory, and the
//! machine description that goes with every report.
//!
//! * CPU time is `utime + stime` of `/proc/PID/stat` (all threads), in clock
//!   ticks converted with `sysconf(_SC_CLK_TCK)`; a [`Probe`] samples it at
//!   the start and the end of a measurement window.
//! * Peak RSS is taken two ways and the larger is reported: `VmHWM` of
//!   `/proc/PID/status` after resetting it (writing `5` to
//!   `/proc/PID/clear_refs`, Linux ≥ 4.0), and the largest `VmRSS` seen by a
//!   thread that polls every 50 ms. The poll alone would miss short peaks; the
//!   reset alone would fail silently on a kernel without it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the RSS sampler polls `VmRSS`.
const RSS_POLL: Duration = Duration::from_millis(50);

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 if it fails).
pub fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// CPU time (user + system, all threads) consumed so far by `pid`, in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces: fields are counted from
    // the last ')'. After it come field 3 (state), ... field 14 (utime), 15 (stime).
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks_per_sec())
}

/// A `kB` line of `/proc/PID/status` (`VmRSS`, `VmHWM`), in KiB.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        let v = l.strip_prefix(field)?.strip_prefix(':')?;
        v.split_whitespace().next()?.parse().ok()
    })
}

/// Resets `VmHWM` of `pid` to its current RSS. False when the kernel refused.
pub fn reset_peak_rss(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// Measures one process over one window: CPU time and peak RSS.
pub struct Probe {
    pid: u32,
    cpu_start: Option<f64>,
    start_rss: u64,
    hwm_reset: bool,
    max_rss: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    sampler: Option<JoinHandle<()>>,
}

/// What a [`Probe`] measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProbeResult {
    /// CPU seconds used in the window.
    pub cpu_seconds: f64,
    /// Peak resident set in the window (KiB).
    pub peak_rss_kib: u64,
    /// Resident set when the window opened (KiB).
    pub start_rss_kib: u64,
}

impl Probe {
    /// Starts measuring `pid` now.
    pub fn start(pid: u32) -> Probe {
        let hwm_reset = reset_peak_rss(pid);
        let start_rss = status_kib(pid, "VmRSS").unwrap_or(0);
        let max_rss = Arc::new(AtomicU64::new(start_rss));
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (max_rss, stop) = (max_rss.clone(), stop.clone());
            std::thread::Builder::new()
                .name("rss-sampler".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        if let Some(rss) = status_kib(pid, "VmRSS") {
                            max_rss.fetch_max(rss, Ordering::Relaxed);
                        }
                        std::thread::sleep(RSS_POLL);
                    }
                })
                .ok()
        };
        Probe {
            pid,
            cpu_start: cpu_seconds(pid),
            start_rss,
            hwm_reset,
            max_rss,
            stop,
            sampler,
        }
    }

    /// Ends the window.
    pub fn finish(mut self) -> ProbeResult {
        let cpu_end = cpu_seconds(self.pid);
        self.stop.store(true, Ordering::Relaxed);
        if let Some(s) = self.sampler.take() {
            let _ = s.join();
        }
        let mut peak = self.max_rss.load(Ordering::Relaxed);
        if self.hwm_reset {
            peak = peak.max(status_kib(self.pid, "VmHWM").unwrap_or(0));
        }
        ProbeResult {
            cpu_seconds: match (self.cpu_start, cpu_end) {
                (Some(a), Some(b)) => (b - a).max(0.0),
                _ => 0.0,
            },
            peak_rss_kib: peak,
            start_rss_kib: self.start_rss,
        }
    }
}

/// CPU seconds all CPUs spent busy since boot (`/proc/stat`: everything but
/// idle and iowait).
pub fn machine_busy_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest is inside user).
    let busy = v
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, x)| x)
        .sum::<f64>();
    Some(busy / clock_ticks_per_sec())
}

/// Measures how busy the machine was with work other than the bench's own
/// processes: a shared machine's noise, reported beside the results.
pub struct Noise {
    pids: Vec<u32>,
    busy_start: Option<f64>,
    ours_start: f64,
    started: std::time::Instant,
}

impl Noise {
    /// Starts counting; `pids` are the bench's processes (itself included).
    pub fn start(pids: Vec<u32>) -> Noise {
        let ours_start = pids.iter().filter_map(|&p| cpu_seconds(p)).sum();
        Noise {
            pids,
            busy_start: machine_busy_seconds(),
            ours_start,
            started: std::time::Instant::now(),
        }
    }

    /// Average number of CPUs kept busy by other processes since the start.
    pub fn others_cpus(&self) -> Option<f64> {
        let busy = machine_busy_seconds()? - self.busy_start?;
        let ours: f64 = self
            .pids
            .iter()
            .filter_map(|&p| cpu_seconds(p))
            .sum::<f64>()
            - self.ours_start;
        let secs = self.started.elapsed().as_secs_f64();
        (secs > 0.0).then(|| ((busy - ours) / secs).max(0.0))
    }
}

/// The machine a run happened on.
#[derive(Clone, Debug)]
pub struct Machine {
    /// Online CPUs.
    pub cpus: usize,
    /// `model name` of `/proc/cpuinfo`.
    pub cpu_model: String,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
    /// Total memory (MiB).
    pub mem_mib: u64,
}

/// Reads the machine description.
pub fn machine() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let cpus = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count()
        .max(1);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: u64 = meminfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemTotal:")
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0);
    Machine {
        cpus,
        cpu_model,
        kernel,
        mem_mib: mem_kib / 1024,
    }
}

/// The file system holding `path`: type, device and mount point (the
/// longest mount point of `/proc/self/mounts` containing it); ext4 without a
/// journal is marked, since its inode allocator then avoids recently
/// deleted inodes, which slows file creation right after a large delete.
pub fn filesystem_of(path: &std::path::Path) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let best = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3 && path.starts_with(f[1]))
                .then(|| (f[0].to_owned(), f[1].to_owned(), f[2].to_owned()))
        })
        .max_by_key(|(_, mount, _)| mount.len());
    let Some((dev, mount, fstype)) = best else {
        return "unknown".into();
    };
    let mut text = format!("{fstype} ({dev} on {mount})");
    if fstype == "ext4" {
        let name = dev.rsplit('/').next().unwrap_or("").to_owned();
        let journaled = std::fs::read_dir("/proc/fs/jbd2")
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(&name))
            })
            .unwrap_or(false);
        if !journaled {
            text.push_str(", no journal");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_process() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).is_some());
        assert!(status_kib(pid, "VmRSS").unwrap() > 0);
        let p = Probe::start(pid);
        let r = p.finish();
        assert!(r.peak_rss_kib > 0);
    }
}
