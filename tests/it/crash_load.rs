//! `kill -9` under billed load (issue 47): 32 callers send chats (every
//! fourth streamed, read to its end) as fast as the gateway answers; once
//! 5,000 have been answered 2xx the process is killed with requests in
//! flight. Every answered request has its audit record, usage record and
//! token detail; the balance is the grant less the charges, each once.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use runtime::store::{History, Ledger};
use rust_decimal::Decimal;
use serde_json::json;

use crate::crash_holds::serve_providers;
use crate::harness::{providers_toml, start_sim, TempDir};

/// Answered 2xx requests before the kill.
const ANSWERED: usize = 5_000;
const CALLERS: usize = 32;

/// One caller: chats until a request fails (the kill), noting the id of
/// each answered in full.
async fn caller(n: usize, url: String, key: String, answered: Arc<Mutex<Vec<String>>>) {
    let client = reqwest::Client::new();
    for i in 0.. {
        let stream = (n + i) % 4 == 0;
        let body = json!({"model": "sim/sim-gpt", "stream": stream, "max_tokens": 12,
                          "messages": [{"role": "user", "content": format!("Hello {n} {i}")}]});
        let Ok(r) = client.post(&url).bearer_auth(&key).json(&body).send().await else {
            return;
        };
        assert_eq!(r.status().as_u16(), 200);
        let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
        let Ok(text) = r.text().await else {
            return; // cut by the kill: not answered in full
        };
        if stream && !text.contains("[DONE]") {
            return;
        }
        answered.lock().unwrap().push(id);
    }
}

/// The gateway process, killed if the test fails before it does.
struct KillOnDrop(Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kill_9_under_billed_load_loses_no_record_of_an_answered_request() {
    let dir = TempDir::new("crash-load");
    let sim = start_sim().await;
    let store = runtime::store::Store::open_at(&dir.database()).unwrap();
    let user = runtime::store::Accounts::create_user(&store, "load@example.com", false).unwrap();
    let key = runtime::auth::create_key(&store, user).unwrap();
    store
        .grant_credit(user, Decimal::from(1_000), Some("test"))
        .unwrap();
    let (child, addr) = serve_providers(
        &dir,
        &sim,
        &providers_toml(&sim.llm_url()),
        &[
            ("GATEWAY_DB_SYNC", "normal"),
            ("GATEWAY_RATE_LIMITS", "chat=1000000/m"),
        ],
    );
    let mut killed_on_drop = KillOnDrop(Some(child));
    let url = format!("http://{addr}/api/v1/chat/completions");
    let answered = Arc::new(Mutex::new(Vec::new()));
    let callers: Vec<_> = (0..CALLERS)
        .map(|n| tokio::spawn(caller(n, url.clone(), key.clone(), answered.clone())))
        .collect();
    let start = Instant::now();
    while answered.lock().unwrap().len() < ANSWERED {
        assert!(start.elapsed() < Duration::from_secs(300), "too slow");
        assert!(
            callers.iter().any(|c| !c.is_finished()),
            "every caller stopped"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut child = killed_on_drop.0.take().unwrap();
    child.kill().unwrap(); // SIGKILL, requests in flight
    child.wait().unwrap();
    for c in callers {
        c.await.unwrap();
    }
    let answered = answered.lock().unwrap().clone();
    assert!(answered.len() >= ANSWERED);

    let audit: HashSet<String> = store
        .audit_rows()
        .unwrap()
        .into_iter()
        .map(|a| a.request_id)
        .collect();
    let usage = store.usage_rows_of(user).unwrap();
    let billed: HashSet<&str> = usage.iter().map(|u| u.request_id.as_str()).collect();
    let detail: HashSet<String> = store
        .model_usage_rows()
        .unwrap()
        .into_iter()
        .map(|m| m.request_id)
        .collect();
    let lost: Vec<&String> = answered
        .iter()
        .filter(|id| !(audit.contains(*id) && billed.contains(id.as_str()) && detail.contains(*id)))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} answered without records: {:?}",
        lost.len(),
        answered.len(),
        &lost[..lost.len().min(5)]
    );
    assert_eq!(billed.len(), usage.len(), "one usage record per request");
    let charged: Decimal = usage.iter().map(|u| u.charged).sum();
    assert!(charged > Decimal::ZERO);
    assert_eq!(
        store.balance(user).unwrap(),
        Decimal::from(1_000) - charged,
        "each charge debited once"
    );
}
