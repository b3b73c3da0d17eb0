//! Hardening (issue #9): connections are timed out and capped, a declared
//! `Content-Length` over a row's limit is refused before the body is read,
//! two processes migrating one fresh database both succeed, and the data
//! stays the owner's (0700 / 0600).
//!
//! Time-outs are configured small (1 s) and only generous upper bounds are
//! asserted: the machines running these tests are shared.

use std::process::Command;
use std::time::Duration;

use runtime::store::Accounts;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout, Instant};

use crate::harness::*;

/// Generous bound for "closed after a 1 s time-out".
const WITHIN: Duration = Duration::from_secs(10);

async fn connect(env: &Env) -> TcpStream {
    TcpStream::connect(env.gw.addr).await.unwrap()
}

/// Reads until the peer closes (EOF or reset); `true` if that happened
/// within `bound`. Bytes the gateway sends before closing are ignored.
async fn closed_within(s: &mut TcpStream, bound: Duration) -> bool {
    let mut buf = [0u8; 1024];
    timeout(bound, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// Reads one response head (and what came with it) within `bound`.
async fn read_head(s: &mut TcpStream, bound: Duration) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    timeout(bound, async {
        while !out.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "closed before a response: {:?}",
                String::from_utf8_lossy(&out)
            );
            out.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("a response in time");
    // Give the body a moment to arrive with it (small JSON answers).
    if let Ok(Ok(n)) = timeout(Duration::from_millis(200), s.read(&mut buf)).await {
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn timeouts(header: u64, idle: u64) -> impl FnOnce(&mut runtime::config::Config) {
    move |c| {
        c.header_timeout = Duration::from_secs(header);
        c.idle_timeout = Duration::from_secs(idle);
    }
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_after_the_header_timeout() {
    let env = Env::with(timeouts(1, 60)).await;
    let mut s = connect(&env).await;
    assert!(
        closed_within(&mut s, WITHIN).await,
        "silent connection still open"
    );
    // The gateway still serves.
    env.client.get(env.url("/healthz")).send().await.unwrap();
}

#[tokio::test]
async fn headers_dribbled_byte_by_byte_are_cut_off() {
    let env = Env::with(timeouts(1, 60)).await;
    let mut s = connect(&env).await;
    let head = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
        "a".repeat(200)
    );
    let started = Instant::now();
    let mut closed = false;
    let mut buf = [0u8; 1024];
    for b in head.as_bytes() {
        if started.elapsed() > WITHIN {
            break;
        }
        if s.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        match timeout(Duration::from_millis(100), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            Ok(Ok(n)) => panic!(
                "answered incomplete headers: {}",
                String::from_utf8_lossy(&buf[..n])
            ),
            Err(_) => {}
        }
    }
    assert!(closed, "dribbling connection still open after {WITHIN:?}");
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    // The header time-out is long: what closes the connection is the idle one.
    let env = Env::with(timeouts(60, 1)).await;
    let mut s = connect(&env).await;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let head = read_head(&mut s, WITHIN).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    // A second request on the same connection is still served (keep-alive)...
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let head = read_head(&mut s, WITHIN).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // ...then, idle, the connection is closed.
    assert!(
        closed_within(&mut s, WITHIN).await,
        "idle connection still open"
    );
}

#[tokio::test]
async fn at_the_connection_cap_the_gateway_keeps_serving() {
    const CAP: usize = 20;
    let env = Env::with(|c| {
        timeouts(1, 1)(c);
        c.max_connections = CAP;
    })
    .await;
    for round in 0..2 {
        // CAP connections that send nothing hold every slot...
        let mut idle = Vec::new();
        for _ in 0..CAP {
            idle.push(connect(&env).await);
        }
        // ...a new client waits in the backlog and is served once they time out.
        let client = reqwest::Client::new();
        let r = timeout(
            Duration::from_secs(20),
            client.get(env.url("/healthz")).send(),
        )
        .await
        .unwrap_or_else(|_| panic!("round {round}: not served while at the cap"))
        .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        for mut s in idle {
            assert!(closed_within(&mut s, WITHIN).await);
        }
    }
    // And a burst beyond the cap is served in full.
    let mut tasks = Vec::new();
    for _ in 0..(2 * CAP) {
        let url = env.url("/healthz");
        tasks.push(tokio::spawn(async move {
            reqwest::Client::new()
                .get(url)
                .send()
                .await
                .unwrap()
                .status()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().as_u16(), 200);
    }
}

/// A POST with these extra header lines and no body; returns the response.
async fn post_declared(env: &Env, path: &str, extra: &str) -> (String, Duration) {
    let mut s = connect(env).await;
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n{extra}\r\n",
        env.key
    );
    let started = Instant::now();
    s.write_all(req.as_bytes()).await.unwrap();
    let head = read_head(&mut s, WITHIN).await;
    (head, started.elapsed())
}

#[tokio::test]
async fn a_declared_json_body_over_the_limit_is_refused_at_once() {
    // Header time-out long: the answer must not wait for any time-out.
    let env = Env::with(timeouts(30, 30)).await;
    let (head, took) = post_declared(
        &env,
        "/api/v1/voice/tts/synthesize",
        "Content-Type: application/json\r\nContent-Length: 5000000\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(head.contains("\"detail\""), "voice error format: {head}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(env.audit().is_empty(), "no audit record");
    assert!(env.usage().is_empty(), "no usage record");
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn expect_100_continue_over_the_limit_gets_413_and_no_continue() {
    let env = Env::with(timeouts(30, 30)).await;
    for (path, extra) in [
        (
            "/api/v1/voice/tts/synthesize",
            "Content-Type: application/json\r\n",
        ),
        (
            "/api/v1/voice/uploads",
            "Content-Type: multipart/form-data; boundary=XyZ\r\n",
        ),
        (
            "/api/v1/voice/webhooks/provider",
            "Content-Type: application/json\r\n",
        ),
    ] {
        let length = if path.ends_with("uploads") {
            600 * 1024 * 1024
        } else {
            50_000_000
        };
        let (head, took) = post_declared(
            &env,
            path,
            &format!("{extra}Content-Length: {length}\r\nExpect: 100-continue\r\n"),
        )
        .await;
        assert!(
            head.starts_with("HTTP/1.1 413"),
            "{path}: expected 413 first, got {head}"
        );
        assert!(!head.contains("100 Continue"), "{path}: {head}");
        assert!(took < Duration::from_secs(5), "{path}: took {took:?}");
    }
    assert!(env.audit().is_empty());
    assert!(env.usage().is_empty());
    env.assert_no_upstream_call().await;
    // A body within the limit is still read and answered.
    env.post("/tts/synthesize", synth_body("hi"))
        .await
        .expect(200);
}

fn cli(data_dir: &std::path::Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GATEWAY_DATA_DIR", data_dir)
        .args(args);
    c
}

#[test]
fn processes_migrating_a_fresh_database_at_once_all_succeed() {
    let root = TempDir::new("race");
    for round in 0..10 {
        let data = root.0.join(format!("data{round}"));
        let children: Vec<_> = (0..3)
            .map(|i| {
                let email = format!("u{i}@example.com");
                cli(&data, &["users", "create", "--email", &email])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[cfg(unix)]
#[test]
fn the_data_directory_and_database_are_the_owners_only() {
    use std::os::unix::fs::PermissionsExt;
    let root = TempDir::new("modes");
    let data = root.0.join("data");
    let gw = server::gateway(runtime::config::Config::with_data_dir(&data)).unwrap();
    gw.store.create_user("m@example.com", false).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700, "data directory");
    assert_eq!(mode(&data.join("gateway.db")), 0o600, "database");
    for side in ["gateway.db-wal", "gateway.db-shm"] {
        let p = data.join(side);
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{side}");
        }
    }
    let objects = data.join("objects");
    assert!(
        objects.is_dir(),
        "local object store at {}",
        objects.display()
    );
    assert_eq!(mode(&objects), 0o700, "object store");
}

/// The soft limit on open files of this process (`/proc/self/limits`).
fn open_files_limit() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(1024)
}

#[tokio::test]
async fn thousands_of_idle_connections_do_not_stop_the_gateway_serving() {
    // The gateway runs in this process: each idle connection costs two
    // descriptors here, and the default cap is half the limit.
    let n = (open_files_limit() / 5).min(3000);
    let env = Env::start().await;
    let mut idle = Vec::with_capacity(n);
    for _ in 0..n {
        idle.push(connect(&env).await);
    }
    let client = reqwest::Client::new();
    for path in ["/healthz", "/api/v1/voice/tts/voices/stock-voice-1"] {
        let r = timeout(
            WITHIN,
            client.get(env.url(path)).bearer_auth(&env.key).send(),
        )
        .await
        .unwrap_or_else(|_| panic!("{path}: not served with {n} idle connections open"))
        .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
    }
    assert!(n >= 200, "too few descriptors to mean anything: {n}");
}
