//! Batches across instances (issue #43): `kill -9` of the instance running
//! a batch, restarted, finishes it with no line billed twice and none
//! missing; two instances on one database share a batch's lines.

use std::time::{Duration, Instant};

use runtime::store::{Accounts, History, Ledger};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::batches::{batch_file, create, file_lines, get, wait_for};
use crate::crash_holds::serve_providers;
use crate::harness::*;

/// `n` chat lines, each its own prompt.
fn lines(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let line = json!({
            "custom_id": format!("k-{i}"), "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "sim/sim-gpt", "max_tokens": 16, "messages": [{"role": "user", "content": format!("Hi {i}")}]},
        });
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// Every line of a finished batch `b` of `n` lines is in its output file
/// once, and its request's usage record (and only its) is charged; the
/// balance lost their sum. Returns the sum.
async fn each_line_billed_once(
    base: &str,
    key: &str,
    store: &runtime::store::Store,
    user: i64,
    b: &Value,
    n: usize,
) -> Decimal {
    assert_eq!(b["request_counts"]["completed"], n, "{b}");
    let out = file_lines(base, key, &b["output_file_id"]).await;
    assert_eq!(out.len(), n);
    let usage = store.usage_rows().unwrap();
    let models = store.model_usage_rows().unwrap();
    let mut total = Decimal::ZERO;
    for i in 0..n {
        let line = &out[&format!("k-{i}")];
        let rid = line["response"]["request_id"].as_str().unwrap();
        let u: Vec<_> = usage.iter().filter(|u| u.request_id == rid).collect();
        assert_eq!(u.len(), 1, "line {i}");
        assert!(u[0].charged > Decimal::ZERO);
        total += u[0].charged;
    }
    // Each line charged once: one token record per line, and no other
    // charge than the output's.
    assert_eq!(models.len(), n, "a line ran twice or is missing");
    let charged: Decimal = usage.iter().map(|u| u.charged).sum();
    assert_eq!(charged, total);
    assert!(store.holds_of(user).unwrap().is_empty());
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_survives_a_kill_9_of_its_instance() {
    let dir = TempDir::new("crash-batch");
    let sim = start_sim().await;
    let store = runtime::store::Store::open_at(&dir.database()).unwrap();
    let user = store.create_user("batch@example.com", false).unwrap();
    let key = runtime::auth::create_key(&store, user).unwrap();
    store.grant_credit(user, d("10"), Some("test")).unwrap();
    let toml = providers_toml(&sim.llm_url());
    let extra = [("GATEWAY_INSTANCE_ID", "the-batch-one")];
    let (child, addr) = serve_providers(&dir, &sim, &toml, &extra);
    let base = format!("http://{addr}");
    // Slow lines, so that the kill finds some done and some in flight.
    let fault = json!({"path": "/v1/chat/completions", "fault": {"delay_ms": 150}, "count": 0});
    let r = reqwest::Client::new()
        .post(format!("{}/__sim/faults", sim.url()))
        .json(&fault)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    const N: usize = 200;
    let file = batch_file(&base, &key, lines(N)).await;
    let id = create(&base, &key, &file).await.json["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let start = Instant::now();
    loop {
        let b = get(&base, &key, &id).await.json;
        if b["request_counts"]["completed"].as_i64().unwrap() >= 40 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{b}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut child = child;
    child.kill().unwrap(); // SIGKILL: lines in flight die uncommitted
    child.wait().unwrap();
    let claimed = own_lines(&store, &id);
    assert!(claimed > 0, "the kill found lines in flight");
    // Restarted under its id: its claimed lines go back to the pool.
    let (child, addr) = serve_providers(&dir, &sim, &toml, &extra);
    let base = format!("http://{addr}");
    let b = wait_for(&base, &key, &id, &["completed"]).await;
    let total = each_line_billed_once(&base, &key, &store, user, &b, N).await;
    assert_eq!(store.balance(user).unwrap(), d("10") - total);
    let mut child = child;
    child.kill().unwrap();
    child.wait().unwrap();
}

/// How many of batch `id`'s lines are claimed.
fn own_lines(store: &runtime::store::Store, id: &str) -> i64 {
    use runtime::store::Batches;
    store.line_counts(id).unwrap().claimed
}

#[tokio::test]
async fn two_instances_share_one_batch() {
    std::env::set_var(LLM_KEY_VAR, PROVIDER_KEY);
    let sim = start_sim().await;
    let toml = providers_toml(&sim.llm_url());
    let Some(p) = Pair::on_sim(
        "crash_batches::two_instances_share_one_batch",
        sim,
        move |c| {
            let path = c.data_dir.join("providers.toml");
            std::fs::write(&path, &toml).unwrap();
            c.providers_file = Some(path);
        },
    )
    .await
    else {
        return;
    };
    let env = &p.a;
    env.grant("10");
    env.fault(json!({"path": "/v1/chat/completions", "fault": {"delay_ms": 100}, "count": 0}))
        .await;
    const N: usize = 240;
    let file = batch_file(&env.gw.url(), &env.key, lines(N)).await;
    let id = create(&env.gw.url(), &env.key, &file).await.json["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Both instances claim lines: each names itself on the lines it runs.
    let mut owners = std::collections::HashSet::new();
    let start = Instant::now();
    loop {
        let rows = own_query(env, &format!("SELECT DISTINCT owner FROM batch_lines WHERE batch_id = '{id}' AND state = 'claimed'")).await;
        owners.extend(rows.into_iter().flatten());
        let b = get(&env.gw.url(), &env.key, &id).await.json;
        if b["status"] == "completed" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{b}");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert_eq!(owners.len(), 2, "{owners:?}");
    // B answers the same batch.
    let b = wait_for(&p.b.url(), &env.key, &id, &["completed"]).await;
    let total =
        each_line_billed_once(&env.gw.url(), &env.key, env.store(), env.user_id, &b, N).await;
    assert_eq!(env.balance(), d("10") - total);
    assert_eq!(b["cost"], runtime::billing::format_money(total));
}
