//! The request's edges (#23): the access log, slow and oversized bodies,
//! HTTP/2 stream limits, spool files of a crashed instance, a provider
//! reusing a job id (N15), what `/models/trending` may show (N16), and
//! which connections are closed first at the connection cap (N1).

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use runtime::store::{Accounts, Jobs, Ledger};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::*;

/// A `gateway serve` child logging JSON to a pipe.
struct Logging {
    child: Child,
    lines: mpsc::Receiver<Value>,
    addr: String,
}

impl Drop for Logging {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Logging {
    fn start(dir: &TempDir, sim: &sim::Sim, extra: &[(&str, &str)]) -> Logging {
        let providers = dir.0.join("providers.toml");
        std::fs::write(&providers, providers_toml(&sim.llm_url())).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_gateway"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(dir.gateway_env())
            .envs(extra.iter().copied())
            .env("GATEWAY_LOG_FORMAT", "json")
            .env("GATEWAY_ADDR", "127.0.0.1:0")
            .env("GATEWAY_PROVIDERS", &providers)
            .env(LLM_KEY_VAR, PROVIDER_KEY)
            .env("PROVIDER_API_KEY", PROVIDER_KEY)
            .env("PROVIDER_BASE_URL", sim.base_url())
            .env("PROVIDER_SYNTH_URL", sim.synth_url())
            .arg("serve")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = BufReader::new(child.stderr.take().unwrap());
        let (tx, lines) = mpsc::channel::<Value>();
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                let v = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        let addr = loop {
            let v = lines
                .recv_timeout(Duration::from_secs(20))
                .expect("a log line");
            if let Some(m) = v["message"].as_str().filter(|m| m.contains("listening on")) {
                break m.rsplit("listening on ").next().unwrap().trim().to_owned();
            }
        };
        Logging { child, lines, addr }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Every line logged within `wait` (all of them, access or not).
    fn drain(&self, wait: Duration) -> Vec<Value> {
        let end = Instant::now() + wait;
        let mut out = Vec::new();
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(v) => out.push(v),
                Err(_) => break,
            }
        }
        out
    }

    /// The access line of request `id` (waiting for it).
    fn access_line(&self, id: &str, seen: &mut Vec<Value>) -> Value {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(v) = seen
                .iter()
                .find(|v| v["target"] == "access" && v["request_id"] == id)
            {
                return v.clone();
            }
            let left = end
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| panic!("no access line for {id}: {seen:#?}"));
            if let Ok(v) = self.lines.recv_timeout(left) {
                seen.push(v);
            }
        }
    }
}

/// A user with a key and credit in `dir`'s database, before the gateway starts.
fn user_with_key(dir: &TempDir) -> (i64, String) {
    let store = runtime::store::Store::open_at(&dir.database()).unwrap();
    let id = store.create_user("log@example.com", false).unwrap();
    let key = runtime::auth::create_key(&store, id).unwrap();
    store.grant_credit(id, d("5"), Some("test")).unwrap();
    (id, key)
}

#[tokio::test]
async fn every_request_gets_one_access_line_without_query_values_or_credentials() {
    let dir = TempDir::new("access-log");
    let sim = start_sim().await;
    let (user_id, key) = user_with_key(&dir);
    let gw = Logging::start(&dir, &sim, &[]);
    let client = reqwest::Client::new();
    let mut seen = Vec::new();

    // A routed request (refused by validation), with a query value that
    // must not be logged.
    let r = client
        .get(gw.url("/api/v1/models/trending?limit=3&days=hunter2secret"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let a = Answer::from(r).await;
    a.expect(400);
    let id = a.header("x-request-id").unwrap().to_owned();
    let line = gw.access_line(&id, &mut seen);
    assert_eq!(line["level"], "INFO", "{line}");
    assert_eq!(line["method"], "GET", "{line}");
    assert_eq!(line["route"], "models.trending", "{line}");
    assert_eq!(line["status"], 400, "{line}");
    assert_eq!(line["user_id"], user_id, "{line}");
    assert_eq!(line["bytes_out"], a.text.len() as u64, "{line}");
    assert_eq!(line["complete"], true, "{line}");
    assert!(line["duration_ms"].is_u64(), "{line}");

    // No route: `unmatched`, no user.
    let a = Answer::from(
        client
            .get(gw.url("/nowhere?token=hunter2secret"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.expect(404);
    let line = gw.access_line(a.header("x-request-id").unwrap(), &mut seen);
    assert_eq!(line["route"], "unmatched", "{line}");
    assert_eq!(line["status"], 404, "{line}");
    assert!(line["user_id"].is_null(), "{line}");

    // A stream is logged when it ends, with every byte it sent.
    let r = client
        .post(gw.url("/api/v1/chat/completions"))
        .bearer_auth(&key)
        .json(
            &json!({"model": "sim/sim-gpt", "stream": true, "max_tokens": 20,
                      "messages": [{"role": "user", "content": "hunter2secret"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let id = r
        .headers()
        .get("x-request-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let streamed = r.bytes().await.unwrap();
    let line = gw.access_line(&id, &mut seen);
    assert_eq!(line["route"], "chat.completions", "{line}");
    assert_eq!(line["method"], "POST", "{line}");
    assert_eq!(line["bytes_out"], streamed.len() as u64, "{line}");
    assert_eq!(line["complete"], true, "{line}");

    // Nothing logged carries a query value, a body's text or the key.
    seen.extend(gw.drain(Duration::from_millis(300)));
    let all = serde_json::to_string(&seen).unwrap();
    assert!(!all.contains("hunter2secret"), "{all}");
    assert!(!all.contains(&key), "{all}");
    assert!(!all.contains(PROVIDER_KEY), "{all}");
}

#[tokio::test]
async fn the_access_log_can_be_turned_off() {
    let dir = TempDir::new("access-off");
    let sim = start_sim().await;
    let gw = Logging::start(&dir, &sim, &[("GATEWAY_ACCESS_LOG", "off")]);
    let a = Answer::from(
        reqwest::Client::new()
            .get(gw.url("/api/v1/models"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.expect(200);
    let lines = gw.drain(Duration::from_millis(800));
    assert!(!lines.iter().any(|v| v["target"] == "access"), "{lines:#?}");
}

/// Sends `head` then `first` bytes of a body and waits for the answer.
async fn trickle(addr: &str, head: &str, first: &[u8], wait: Duration) -> Option<String> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(first).await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(wait, async {
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = find_body_end(&buf) {
                        buf.truncate(end);
                        break;
                    }
                }
            }
        }
    })
    .await;
    read.ok()?;
    (!buf.is_empty()).then(|| String::from_utf8_lossy(&buf).into_owned())
}

/// The end of a response with `Content-Length` in `buf`, once complete.
fn find_body_end(buf: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(buf).ok()?;
    let head_end = text.find("\r\n\r\n")? + 4;
    let len: usize = text[..head_end]
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    (buf.len() >= head_end + len).then_some(head_end + len)
}

#[tokio::test]
async fn a_body_that_arrives_too_slowly_is_cut_with_408_in_the_routes_format() {
    let env = Env::with(|c| c.body_timeout = Duration::from_secs(1)).await;
    let addr = env.gw.url().trim_start_matches("http://").to_owned();
    let head = format!(
        "POST /api/v1/auth/login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 60\r\n\r\n"
    );
    let started = Instant::now();
    let answer = trickle(&addr, &head, b"{\"email\":", Duration::from_secs(8))
        .await
        .expect("the gateway cut the slow body (no answer within 8 s)");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The login row's format ("error").
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"], "request_timeout", "{body}");
    assert_eq!(body["status_code"], 408, "{body}");
    // A voice row (format "detail") says so in its own format.
    let head = format!(
        "POST /api/v1/voice/tts/synthesize HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 80\r\n\r\n",
        env.key
    );
    let answer = trickle(&addr, &head, b"{\"text\":", Duration::from_secs(8))
        .await
        .expect("an answer");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert!(body["detail"].as_str().is_some(), "{body}");
    // Nothing was forwarded or recorded.
    env.assert_no_upstream_call().await;
    assert!(env.audit().is_empty(), "{:?}", env.audit());
}

/// An upload whose file stalls while it is streamed into the object store
/// is cut with 408 too (the store's body error keeps its cause), and
/// nothing is stored or recorded.
#[tokio::test]
async fn an_upload_that_stalls_mid_file_is_cut_with_408() {
    let env = Env::with(|c| c.body_timeout = Duration::from_secs(1)).await;
    let addr = env.gw.url().trim_start_matches("http://").to_owned();
    let head = format!(
        "POST /api/v1/voice/uploads HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: multipart/form-data; boundary=XyZ\r\nContent-Length: 100000\r\n\r\n",
        env.key
    );
    let mut first = b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\n".to_vec();
    first.extend_from_slice(&[7u8; 4096]);
    let answer = trickle(&addr, &head, &first, Duration::from_secs(8))
        .await
        .expect("the gateway cut the stalled upload (no answer within 8 s)");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert!(body["detail"].as_str().is_some(), "{body}");
    assert!(env.object_keys().is_empty(), "{:?}", env.object_keys());
    assert!(env.audit().is_empty(), "{:?}", env.audit());
}

#[tokio::test]
async fn a_body_over_its_limit_is_refused_before_it_counts_against_the_rate_limit() {
    let env = Env::with(|c| {
        c.max_json_bytes = 1000;
        c.rate_limits = runtime::ratelimit::Limits::parse(Some("tts=1/h")).unwrap();
    })
    .await;
    let big =
        json!({"voice_uuid": "stock-voice-1", "text": "x".repeat(2000), "output_format": "wav"});
    for _ in 0..3 {
        let a = env.post("/tts/synthesize", big.clone()).await;
        a.expect(413);
    }
    // The one request of the hour is still there.
    let a = env.post("/tts/synthesize", synth_body("hello")).await;
    a.expect(200);
    let a = env.post("/tts/synthesize", synth_body("hello")).await;
    a.expect(429);
}

#[tokio::test]
async fn an_http2_connection_may_open_only_so_many_streams() {
    let env = Env::with(|c| c.max_streams_per_connection = 8).await;
    let addr = env.gw.url().trim_start_matches("http://").to_owned();
    let tcp = TcpStream::connect(&addr).await.unwrap();
    let (mut client, mut conn) = h2::client::handshake(tcp).await.unwrap();
    let req = http::Request::get(format!("http://{addr}/healthz"))
        .body(())
        .unwrap();
    let (resp, _) = client.send_request(req, true).unwrap();
    tokio::pin!(resp);
    // Drive the connection until the answer (the server's settings came first).
    let status = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::select! {
            r = &mut resp => r.unwrap().status(),
            r = futures_util::future::poll_fn(|cx| std::pin::Pin::new(&mut conn).poll(cx)) => {
                panic!("the connection ended: {r:?}")
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(status, 200);
    let limit = conn.max_concurrent_send_streams();
    assert_eq!(limit, 8);
}

#[tokio::test]
async fn spool_files_of_a_crashed_instance_are_swept_at_start() {
    let mut left = Vec::new();
    let env = Env::with(|c| {
        let spool = c.data_dir.join("spool");
        // A dead instance's directory (its lock file held by nobody) and a
        // file of the earlier layout.
        let dead = spool.join("4242-00000000deadbeef");
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::write(spool.join("4242-00000000deadbeef.lock"), b"").unwrap();
        std::fs::write(dead.join("stt-res_crashed"), vec![0u8; 4096]).unwrap();
        std::fs::write(spool.join("stt-res_older"), vec![0u8; 4096]).unwrap();
        left = vec![dead, spool.join("stt-res_older")];
    })
    .await;
    for p in &left {
        assert!(!p.exists(), "{} was not swept", p.display());
    }
    // This instance's own directory is there and held.
    let own: Vec<_> = std::fs::read_dir(env.dir.0.join("spool"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(own.len(), 2, "{own:?}"); // `<name>` and `<name>.lock`
}

#[tokio::test]
async fn a_provider_reusing_a_job_id_gets_a_502_and_nothing_is_recorded() {
    let env = Env::start().await;
    let up = env.upload("in.wav", wav(1.0), Some("stt_input")).await;
    up.expect(200);
    let answer = json!({"success": true, "item": {"uuid": "job-reused-1", "status": "processing"}});
    env.fault(json!({"path": "/api/v2/speech-to-text", "method": "POST",
                     "fault": {"status": 200, "body": answer}, "count": 2}))
        .await;
    let body = json!({"audio_url": up.json["url"]});
    let first = env.post("/stt", body.clone()).await;
    assert!(first.status == 200 || first.status == 202, "{}", first.text);
    let audit_before = env.audit().len();
    let usage_before = env.usage().len();
    let second = env.post("/stt", body).await;
    second.expect(502);
    assert!(second.detail().contains("existing job"), "{}", second.text);
    // The first job is untouched and still its caller's; nothing of the second.
    let (jobs, _) = env.store().jobs_of(env.user_id, "stt", 1, 100).unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(env.audit().len(), audit_before);
    assert_eq!(env.usage().len(), usage_before);
    assert_eq!(jobs[0].job_id, "job-reused-1");
}

#[tokio::test]
async fn trending_shows_ranks_but_not_other_tenants_counts_by_default() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let (other, other_key) = env.new_user("bob@example.com");
    env.store()
        .grant_credit(other, d("1"), Some("test"))
        .unwrap();
    for key in [&env.key, &other_key, &other_key] {
        env.call_as(
            key,
            "POST",
            &env.url("/api/v1/chat/completions"),
            Some(json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": "hi"}]})),
        )
        .await
        .expect(200);
    }
    let a = env
        .call_as(&env.key, "GET", &env.url("/api/v1/models/trending"), None)
        .await;
    a.expect(200);
    let data = a.json["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{}", a.text);
    assert_eq!(data[0]["id"], "sim/sim-gpt");
    assert_eq!(data[0]["rank"], 1);
    assert!(data[0].get("requests").is_none(), "{}", a.text);
}

#[tokio::test]
async fn at_the_connection_cap_slow_unauthenticated_clients_are_closed_first() {
    let env = Env::with(|c| c.max_connections = 4).await;
    let addr = env.gw.url().trim_start_matches("http://").to_owned();
    // Four clients that never finish their headers (no credentials sent yet).
    let mut slow = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        slow.push(s);
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // A normal request is served well before the header time-out (10 s)
    // would have freed a slot.
    let started = Instant::now();
    let r = reqwest::Client::new()
        .get(env.url("/healthz"))
        .timeout(Duration::from_secs(4))
        .send()
        .await
        .expect("served while slow clients held every connection");
    assert_eq!(r.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(3));
    // At least one slow client was closed.
    let mut closed = 0;
    for s in &mut slow {
        let mut b = [0u8; 64];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_millis(200), s.read(&mut b)).await {
            closed += 1;
        }
    }
    assert!(closed >= 1);
}

/// Reads an HTTP/1.1 answer's head from `s` (within 10 s).
async fn answer_head(s: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .expect("an answer within 10 s");
    String::from_utf8_lossy(&buf).into_owned()
}

/// Probe finding N1: at the connection cap, connections that never
/// authenticated and send their request body slowly are closed to make
/// room; an authenticated client is answered, and an authenticated
/// connection with a slow body is kept (its request completes).
#[tokio::test]
async fn at_the_cap_slow_anonymous_bodies_are_closed_before_authenticated_ones() {
    let env = Env::with(|c| {
        c.max_connections = 4;
        // Far beyond the test: only the shedding can free a slot.
        c.body_timeout = Duration::from_secs(300);
    })
    .await;
    let addr = env.gw.url().trim_start_matches("http://").to_owned();
    // One slot: an authenticated synthesis whose body arrives slowly.
    let body = synth_body("Hello there").to_string();
    let mut known = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /api/v1/voice/tts/synthesize HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        env.key,
        body.len()
    );
    known.write_all(head.as_bytes()).await.unwrap();
    known.write_all(&body.as_bytes()[..5]).await.unwrap();
    // Three slots: anonymous login bodies, a byte sent of each.
    let mut anonymous = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(
            format!("POST /api/v1/auth/login HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 60\r\n\r\n{{")
                .as_bytes(),
        )
        .await
        .unwrap();
        anonymous.push(s);
    }
    // Past the grace of a slow body (1 s), an authenticated client is
    // answered although every connection was taken.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let a = env
        .client
        .get(env.voice("/tts/voices/stock-voice-1"))
        .bearer_auth(&env.key)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("an authenticated client answered at the connection cap");
    assert_eq!(a.status(), 200);
    // Every anonymous slow body was closed, none answered. The cap rings
    // only while a client waits for a slot, and a connection is sheddable
    // once its body has been arriving for the grace: one whose request the
    // gateway began reading late (a loaded machine) was not yet sheddable
    // when the first client's ring was answered by another's closing, so a
    // new client, needing a slot of its own, rings again.
    for s in &mut anonymous {
        let mut b = [0u8; 256];
        let mut rings = 0;
        loop {
            match tokio::time::timeout(Duration::from_secs(2), s.read(&mut b)).await {
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(n)) => panic!(
                    "an anonymous slow body was answered: {}",
                    String::from_utf8_lossy(&b[..n])
                ),
                Err(_) if rings < 3 => {
                    rings += 1;
                    let fresh = reqwest::Client::new();
                    let a = fresh
                        .get(env.voice("/tts/voices/stock-voice-1"))
                        .bearer_auth(&env.key)
                        .timeout(Duration::from_secs(10))
                        .send()
                        .await
                        .expect("a new authenticated client answered at the cap");
                    assert_eq!(a.status(), 200);
                }
                Err(_) => panic!("an anonymous slow body was kept open at the cap"),
            }
        }
    }
    // The authenticated slow body was kept: it completes and is served,
    // and recorded; the anonymous ones left no record.
    known.write_all(&body.as_bytes()[5..]).await.unwrap();
    let head = answer_head(&mut known).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let audit = env.audit();
    assert!(
        audit
            .iter()
            .any(|r| r.path == "/api/v1/voice/tts/synthesize" && r.status == 200),
        "{audit:?}"
    );
    assert!(
        !audit.iter().any(|r| r.path.contains("/auth/")),
        "{audit:?}"
    );
}
