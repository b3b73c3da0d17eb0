//! Credit holds of a crashed instance (`kill -9` of `gateway serve` during
//! concurrent chats and streams): the restarted instance releases its own
//! previous holds at start, and another instance stops counting a dead
//! instance's holds once its lease lapses (`GATEWAY_INSTANCE_LEASE_SECS`).

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use runtime::store::{Accounts, History, Ledger};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::harness::{config_for, start_sim, Answer, TempDir, PROVIDER_KEY};
use crate::harness::{providers_toml, LLM_KEY_VAR};

const BIN: &str = env!("CARGO_BIN_EXE_gateway");

/// A user with a key, on the directory's database.
fn user(dir: &TempDir) -> (runtime::store::Store, i64, String) {
    let store = runtime::store::Store::open_at(&dir.database()).unwrap();
    let user = store.create_user("crash@example.com", false).unwrap();
    let key = runtime::auth::create_key(&store, user).unwrap();
    (store, user, key)
}

/// Starts `gateway serve` on `dir` with the test providers file and
/// `extra` variables; returns the child and its address.
fn serve(dir: &TempDir, sim: &sim::Sim, extra: &[(&str, &str)]) -> (Child, String) {
    serve_providers(dir, sim, &providers_toml(&sim.llm_url()), extra)
}

/// [`serve`] with the providers file `toml`.
pub(crate) fn serve_providers(
    dir: &TempDir,
    sim: &sim::Sim,
    toml: &str,
    extra: &[(&str, &str)],
) -> (Child, String) {
    let providers = dir.0.join("providers.toml");
    std::fs::write(&providers, toml).unwrap();
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "info")
        .envs(dir.gateway_env())
        .env("GATEWAY_ADDR", "127.0.0.1:0")
        .env("GATEWAY_PROVIDERS", &providers)
        .env(LLM_KEY_VAR, PROVIDER_KEY)
        .env("PROVIDER_API_KEY", PROVIDER_KEY)
        .env("PROVIDER_BASE_URL", sim.base_url())
        .env("PROVIDER_SYNTH_URL", sim.synth_url())
        .envs(extra.iter().copied())
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "serve ended early");
        if line.contains("listening on ") {
            break line
                .trim_end()
                .rsplit("listening on ")
                .next()
                .unwrap()
                .trim()
                .to_owned();
        }
    };
    std::thread::spawn(move || for _ in err.lines() {});
    (child, addr)
}

fn chat(i: usize, stream: bool) -> Value {
    json!({"model": "sim/sim-gpt", "stream": stream, "max_tokens": 20,
           "messages": [{"role": "user", "content": format!("Hello {i}")}]})
}

async fn post(client: &reqwest::Client, url: &str, key: &str, body: &Value) -> reqwest::Response {
    client
        .post(url)
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn sim_post(sim: &sim::Sim, path: &str, v: Value) {
    let r = reqwest::Client::new()
        .post(format!("{}{path}", sim.url()))
        .json(&v)
        .send()
        .await
        .unwrap();
    assert!(
        r.status().is_success(),
        "{path}: {}",
        r.text().await.unwrap()
    );
}

/// Waits until the user's live holds number `n` (read in the database).
async fn wait_holds(store: &runtime::store::Store, user: i64, n: usize) {
    let start = Instant::now();
    loop {
        let held = store.held(user).unwrap();
        let count = store.holds_of(user).unwrap().len();
        if count == n && held > Decimal::ZERO {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{count} holds, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the provider has received `n` chat calls in all (so that
/// fault rules are used up by the calls meant for them).
async fn wait_sim_chats(sim: &sim::Sim, n: usize) {
    let start = Instant::now();
    loop {
        let v: Value = reqwest::get(format!("{}/__sim/requests", sim.url()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let count = v["requests"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["path"] == "/v1/chat/completions")
            .count();
        if count >= n {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{count} chat calls, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn kill_9(mut child: Child) {
    child.kill().unwrap(); // SIGKILL: no shutdown, nothing settled
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_a_kill_9_during_chats_and_streams_the_restarted_instance_holds_nothing() {
    let dir = TempDir::new("crash");
    let sim = start_sim().await;
    let (store, user, key) = user(&dir);
    store
        .grant_credit(user, Decimal::from(10), Some("test"))
        .unwrap();
    let (child, addr) = serve(&dir, &sim, &[]);
    let url = format!("http://{addr}/api/v1/chat/completions");
    let client = reqwest::Client::new();

    // Answered before the kill: chats and streams read to their end.
    let mut answered = Vec::new();
    let done = futures_util::future::join_all((0..6).map(|i| {
        let (client, url, key) = (client.clone(), url.clone(), key.clone());
        async move {
            let r = post(&client, &url, &key, &chat(i, i % 2 == 1)).await;
            let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
            let a = Answer::from(r).await;
            a.expect(200);
            id
        }
    }))
    .await;
    answered.extend(done);

    // In flight at the kill: chats waiting for the provider, streams
    // half-way through their answer.
    sim_post(
        &sim,
        "/__sim/faults",
        json!({"path": "/v1/chat/completions", "fault": {"delay_ms": 30000}, "count": 3}),
    )
    .await;
    let mut pending = Vec::new();
    for i in 0..3 {
        let (client, url, key) = (client.clone(), url.clone(), key.clone());
        pending.push(tokio::spawn(async move {
            client
                .post(&url)
                .bearer_auth(&key)
                .json(&chat(100 + i, false))
                .send()
                .await
        }));
    }
    wait_holds(&store, user, 3).await;
    wait_sim_chats(&sim, 9).await;
    sim_post(&sim, "/__sim/config", json!({"stream_delay_ms": 500})).await;
    let mut streams = Vec::new();
    let mut cut = Vec::new();
    for i in 0..3 {
        let r = post(&client, &url, &key, &chat(200 + i, true)).await;
        assert_eq!(r.status().as_u16(), 200);
        cut.push(r.headers()["x-request-id"].to_str().unwrap().to_owned());
        let mut body = r.bytes_stream();
        body.next().await.unwrap().unwrap(); // the first chunk arrived
        streams.push(body);
    }
    wait_holds(&store, user, 6).await;
    kill_9(child);
    for p in pending {
        assert!(p.await.unwrap().is_err(), "a chat in flight was cut");
    }
    drop(streams);
    assert_eq!(
        store.holds_of(user).unwrap().len(),
        6,
        "the dead run's holds"
    );
    assert!(store.held(user).unwrap() > Decimal::ZERO);

    // Restarted (same data directory: same instance): nothing held.
    sim_post(&sim, "/__sim/config", json!({"stream_delay_ms": 0})).await;
    let (child, addr) = serve(&dir, &sim, &[]);
    assert_eq!(store.holds_of(user).unwrap().len(), 0, "released at start");
    assert_eq!(store.held(user).unwrap(), Decimal::ZERO);
    // Every answered 2xx has its records: the finished ones their audit
    // and usage, the streams cut by the kill their audit (committed
    // before their first byte).
    let audit: HashSet<String> = store
        .audit_rows()
        .unwrap()
        .into_iter()
        .map(|r| r.request_id)
        .collect();
    let usage = store.usage_rows().unwrap();
    let usage_ids: HashSet<&str> = usage.iter().map(|u| u.request_id.as_str()).collect();
    for id in &answered {
        assert!(
            audit.contains(id) && usage_ids.contains(id.as_str()),
            "{id}"
        );
    }
    for id in &cut {
        assert!(audit.contains(id), "cut stream {id} has its audit record");
    }
    // The balance's available amount is the balance: the grant less what
    // was charged, and a chat holding credit goes through.
    let charged: Decimal = usage.iter().map(|u| u.charged).sum();
    assert_eq!(store.balance(user).unwrap(), Decimal::from(10) - charged);
    let url = format!("http://{addr}/api/v1/chat/completions");
    let a = Answer::from(post(&client, &url, &key, &chat(300, false)).await).await;
    a.expect(200);
    kill_9(child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_instance_stops_counting_a_dead_instances_holds_after_its_lease() {
    const LEASE: u64 = 6;
    let dir = TempDir::new("lease");
    let sim = start_sim().await;
    let (store, user, key) = user(&dir);
    let lease = LEASE.to_string();
    let (dead, addr) = serve(
        &dir,
        &sim,
        &[
            ("GATEWAY_INSTANCE_ID", "the-dead-one"),
            ("GATEWAY_INSTANCE_LEASE_SECS", &lease),
        ],
    );
    let client = reqwest::Client::new();
    let url_dead = format!("http://{addr}/api/v1/chat/completions");
    // What one chat holds: asked with no credit at all.
    let a = Answer::from(post(&client, &url_dead, &key, &chat(0, false)).await).await;
    a.expect(402);
    let required: Decimal = a.header("x-credits-required").unwrap().parse().unwrap();
    // Credit for one such chat, not two.
    let grant = required * Decimal::new(15, 1);
    store.grant_credit(user, grant, Some("test")).unwrap();
    sim_post(
        &sim,
        "/__sim/faults",
        json!({"path": "/v1/chat/completions", "fault": {"delay_ms": 30000}, "count": 1}),
    )
    .await;
    let pending = {
        let (client, url, key) = (client.clone(), url_dead.clone(), key.clone());
        tokio::spawn(async move {
            client
                .post(&url)
                .bearer_auth(&key)
                .json(&chat(1, false))
                .send()
                .await
        })
    };
    wait_holds(&store, user, 1).await;
    wait_sim_chats(&sim, 1).await;
    assert_eq!(
        store.holds_of(user).unwrap()[0].1.as_deref(),
        Some("the-dead-one"),
        "a hold names its instance"
    );
    kill_9(dead);
    let killed = Instant::now();
    assert!(pending.await.unwrap().is_err());

    // A second instance on the same database.
    std::env::set_var(LLM_KEY_VAR, PROVIDER_KEY);
    let mut config = config_for(&sim, &dir);
    config.providers_file = Some(dir.0.join("providers.toml"));
    config.instance_id = Some("the-live-one".into());
    config.instance_lease = Duration::from_secs(LEASE);
    let live = server::start(config, TcpListener::bind("127.0.0.1:0").await.unwrap()).unwrap();
    let url_live = format!("{}/api/v1/chat/completions", live.url());
    // While the dead instance's lease runs, its hold counts: 402.
    let a = Answer::from(post(&client, &url_live, &key, &chat(2, false)).await).await;
    assert!(
        killed.elapsed() < Duration::from_secs(LEASE - 2),
        "too slow to see the lease running"
    );
    a.expect(402);
    // After it lapses, the hold counts no more: the same chat goes through.
    let a = loop {
        let a = Answer::from(post(&client, &url_live, &key, &chat(3, false)).await).await;
        if a.status != 402 {
            break a;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(LEASE + 3),
            "the dead instance's hold still counts {:?} after the kill",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    a.expect(200);
    eprintln!(
        "the dead instance's hold stopped counting {:?} after the kill",
        killed.elapsed()
    );
    // Swept by the live instance's hold; the balance is the grant less the chat.
    assert_eq!(store.held(user).unwrap(), Decimal::ZERO);
    let charged: Decimal = store.usage_rows().unwrap().iter().map(|u| u.charged).sum();
    assert_eq!(store.balance(user).unwrap(), grant - charged);
    assert_eq!(
        store.holds_of(user).unwrap().len(),
        0,
        "the dead hold was swept"
    );
}
