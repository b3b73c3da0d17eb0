//! A `redis-server` of the test's own (the faults tests, the response
//! cache's): started on a free port, stopped and started again at will,
//! never the machine's shared Redis.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` of the test's own on a free port (no persistence):
/// stopped and started again on the same port.
pub struct RedisServer {
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl RedisServer {
    pub fn start(test: &str) -> Option<RedisServer> {
        let bin = std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("redis-server"))
                .find(|b| b.is_file())
        });
        let Some(bin) = bin else {
            let required = std::env::var(runtime::cluster::testing::GATEWAY_TEST_REQUIRE_REDIS)
                .is_ok_and(|v| v.trim() == "1");
            assert!(
                !required,
                "{test}: GATEWAY_TEST_REQUIRE_REDIS=1 but no redis-server on PATH"
            );
            eprintln!("SKIPPED {test}: no redis-server on PATH");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut r = RedisServer {
            bin,
            port,
            child: None,
        };
        r.start_again();
        Some(r)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts the server and waits until it answers PING.
    pub fn start_again(&mut self) {
        let child = Command::new(&self.bin)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(std::env::temp_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let start = Instant::now();
        while !self.pings() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "redis-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pings(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    /// Stops the server (SIGKILL: as a crash or a failover does).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
