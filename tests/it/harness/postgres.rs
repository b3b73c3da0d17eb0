//! A PostgreSQL server of a test's own, to stop and restart under a running
//! gateway: `initdb` into a temporary directory, `pg_ctl` on a free
//! loopback port (its socket in that directory too). Reusable by any test
//! that injects database faults.
//!
//! [`PgServer::start_tls`] starts one with `ssl=on` and a certificate the
//! test made (`tls.rs`); [`PgServer::psql`] asks it what it sees (which
//! sessions are encrypted).
//!
//! Skipped, with a printed reason, when no PostgreSQL binaries are found,
//! unless `GATEWAY_TEST_REQUIRE_POSTGRES=1` (then a missing `initdb`
//! fails the test). `initdb` refuses to run as root: as root, every
//! PostgreSQL command runs as the `postgres` OS user (`runuser`), who owns
//! the directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Set to 1: a test that needs its own PostgreSQL fails instead of skipping.
pub const REQUIRE_POSTGRES: &str = "GATEWAY_TEST_REQUIRE_POSTGRES";

/// A PostgreSQL server owned by one test; stopped and removed on drop.
pub struct PgServer {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
    /// Server options beyond the port, socket and durability ones.
    extra: String,
}

/// The directory of `initdb` and `pg_ctl`: the newest of
/// `/usr/lib/postgresql/*/bin`, or `PATH`'s.
fn pg_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").is_file())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop().or_else(|| {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
        })
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl PgServer {
    /// Initialises and starts a server for `test`; `None` (the test skips,
    /// saying why) when PostgreSQL is not installed, unless required.
    pub fn start(test: &str) -> Option<PgServer> {
        PgServer::start_with(test, &[], "")
    }

    /// [`start`](Self::start) with `ssl=on`, serving `cert_pem` (its chain)
    /// and `key_pem`; plain connections are still accepted.
    pub fn start_tls(test: &str, cert_pem: &str, key_pem: &str) -> Option<PgServer> {
        PgServer::start_with(
            test,
            &[("server.crt", cert_pem), ("server.key", key_pem)],
            "-c ssl=on -c ssl_cert_file=../server.crt -c ssl_key_file=../server.key",
        )
    }

    /// Starts a server with `files` written into its directory (private to
    /// the server's user) and `extra` server options.
    fn start_with(test: &str, files: &[(&str, &str)], extra: &str) -> Option<PgServer> {
        let required = std::env::var(REQUIRE_POSTGRES).is_ok_and(|v| v == "1");
        let Some(bin) = pg_bin() else {
            assert!(
                !required,
                "{test}: {REQUIRE_POSTGRES}=1 but no initdb (/usr/lib/postgresql/*/bin or PATH)"
            );
            eprintln!("SKIPPED {test}: no PostgreSQL binaries (initdb) on this machine");
            return None;
        };
        let dir = std::env::temp_dir().join(format!(
            "gw-pg-{}-{:016x}",
            std::process::id(),
            super::rand_u64()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            use std::os::unix::fs::PermissionsExt;
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let as_postgres = is_root();
        let server = PgServer {
            bin,
            dir,
            port: free_port(),
            as_postgres,
            extra: extra.to_owned(),
        };
        if as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres:", &server.dir.to_string_lossy()])
                .status()
                .unwrap()
                .success();
            assert!(ok, "chown of {} to postgres", server.dir.display());
        }
        server.run(
            "initdb",
            &[
                "-D",
                &server.data().to_string_lossy(),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        server.start_again();
        Some(server)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Runs one of the server's commands (as `postgres` when we are root);
    /// panics, with its output, if it fails.
    fn run(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        let out = cmd.args(args).current_dir(&self.dir).output().unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?}: {}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.data().to_string_lossy().into_owned();
        let log = self.dir.join("server.log").to_string_lossy().into_owned();
        let mut all = vec!["-D", &data, "-l", &log, "-w", "-t", "30"];
        all.extend_from_slice(args);
        self.run("pg_ctl", &all);
    }

    /// The URL of the server's `postgres` database (trust authentication).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's port on 127.0.0.1.
    #[allow(dead_code)] // kept for the tests of faults under load
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the data, the socket and `server.log`.
    #[allow(dead_code)] // kept for the tests of faults under load
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts the (stopped) server and waits until it accepts connections.
    pub fn start_again(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100 {}",
            self.port,
            self.dir.display(),
            self.extra
        );
        self.pg_ctl(&["-o", &opts, "start"]);
    }

    /// Stops the server (`-m fast`: sessions are ended, as a restart does)
    /// and waits until it is down.
    pub fn stop(&self) {
        self.pg_ctl(&["-m", "fast", "stop"]);
    }

    /// The answer of `psql` to `sql` (one statement; unaligned, tuples
    /// only), over the server's own socket.
    #[allow(dead_code)] // used by the TLS tests
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                &self.dir.to_string_lossy(),
                "-p",
                &self.port.to_string(),
            ])
            .args(["-U", "postgres", "-d", "postgres", "-At", "-c", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `pg_ctl restart`: stopped, then started with the same options.
    #[allow(dead_code)] // kept for the tests of faults under load
    pub fn restart(&self) {
        self.stop();
        self.start_again();
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.data().to_string_lossy().into_owned();
        let path = self.bin.join("pg_ctl");
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        let _ = cmd
            .args(["-D", &data, "-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
