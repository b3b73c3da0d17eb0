//! The gateway on a PostgreSQL that is stopped and started again under it
//! (a restart, a failover): while it is down, requests that must write
//! answer 503 in their route's format with `Retry-After`, never 500, and
//! write nothing; within 5 s of its return traffic succeeds again without
//! a gateway restart; every answered 2xx has its records and no hold
//! stays counted.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use runtime::store::{History, Ledger};
use rust_decimal::Decimal;
use serde_json::json;

use crate::harness::postgres::PgServer;
use crate::harness::{envelope, llm_env};
use crate::harness::{synth_body, Answer, Env};

/// One billed request: a chat (a credit hold, then its settlement) or a
/// voice synthesis (usage and debit in the record phase).
async fn billed(env: &Env, i: usize) -> (&'static str, Answer) {
    if i.is_multiple_of(2) {
        let body = json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": format!("Hello {i}")}]});
        ("chat", env.api("/chat/completions", body).await)
    } else {
        let a = env
            .post("/tts/synthesize", synth_body(&format!("Hello there {i}")))
            .await;
        ("voice", a)
    }
}

/// A 503 of an unreachable database, in the route's own format.
fn assert_unavailable(kind: &str, a: &Answer) {
    assert_eq!(
        a.status, 503,
        "{kind} while the database is down: {}",
        a.text
    );
    let retry: u64 = a
        .header("retry-after")
        .unwrap_or_else(|| panic!("{kind}: a 503 without Retry-After"))
        .parse()
        .unwrap();
    assert!(retry >= 1);
    if kind == "voice" {
        assert!(a.detail().contains("database"), "{}", a.text);
    } else {
        envelope(a, 503);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgresql_restart_answers_503_while_down_and_recovers_within_5s() {
    let Some(pg) = PgServer::start("database_restart") else {
        return;
    };
    let url = pg.url();
    let env = llm_env(move |c| c.database_url = Some(url)).await;
    env.grant("10");
    let mut answered = Vec::new(); // request ids of every 2xx
    let mut statuses: Vec<u16> = Vec::new();
    let mut keep = |kind: &str, a: &Answer, answered: &mut Vec<String>| {
        statuses.push(a.status);
        assert_ne!(a.status, 500, "{kind}: never 500: {}", a.text);
        if (200..300).contains(&a.status) {
            answered.push(a.header("x-request-id").unwrap().to_owned());
        }
    };
    for i in 0..6 {
        let (kind, a) = billed(&env, i).await;
        a.expect(200);
        keep(kind, &a, &mut answered);
    }

    // Down: every billed request is refused as unavailable.
    pg.stop();
    let audit_before = answered.len();
    for i in 6..12 {
        let (kind, a) = billed(&env, i).await;
        keep(kind, &a, &mut answered);
        assert_unavailable(kind, &a);
    }
    assert_eq!(
        answered.len(),
        audit_before,
        "nothing answered 2xx while down"
    );
    // A format-1 route (the caller's media files): the same 503, in format
    // 1, with a `Retry-After` of 30 to 60 s (spec §7).
    let a = env
        .call_as(&env.key, "GET", &env.url("/api/v1/media"), None)
        .await;
    assert_eq!(a.status, 503, "{}", a.text);
    assert_eq!(a.json["error"], "service_unavailable", "{}", a.text);
    assert_eq!(a.json["status_code"], json!(503));
    let retry: u64 = a.header("retry-after").unwrap().parse().unwrap();
    assert!((30..=60).contains(&retry), "Retry-After {retry}");

    // Back: both kinds succeed again within 5 s, without a gateway restart.
    pg.start_again();
    let back = Instant::now();
    let mut recovered = HashSet::new();
    let mut i = 12;
    while recovered.len() < 2 {
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "traffic did not recover within 5 s of the database's return: {statuses:?}"
        );
        let (kind, a) = billed(&env, i).await;
        keep(kind, &a, &mut answered);
        if a.status == 200 {
            recovered.insert(kind);
        } else {
            assert_unavailable(kind, &a);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        i += 1;
    }
    eprintln!("recovered {:?} after the database's return", back.elapsed());
    for j in i..i + 6 {
        let (kind, a) = billed(&env, j).await;
        a.expect(200);
        keep(kind, &a, &mut answered);
    }

    // Every 2xx has its audit and usage records; nothing else was written.
    let store = env.store();
    let audit: HashSet<String> = store
        .audit_rows()
        .unwrap()
        .into_iter()
        .map(|r| r.request_id)
        .collect();
    let usage = env.usage();
    let usage_ids: HashSet<String> = usage.iter().map(|u| u.request_id.clone()).collect();
    for id in &answered {
        assert!(audit.contains(id), "answered {id} has no audit record");
        assert!(usage_ids.contains(id), "answered {id} has no usage record");
    }
    let answered_set: HashSet<String> = answered.iter().cloned().collect();
    assert_eq!(usage_ids, answered_set, "usage only for answered requests");
    // No hold stays counted (a failed request's release is owed and made
    // once the database answers), and the balance is the grant less the charges.
    let deadline = Instant::now() + Duration::from_secs(5);
    while store.held(env.user_id).unwrap() != Decimal::ZERO {
        assert!(Instant::now() < deadline, "a hold stayed counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let charged: Decimal = usage.iter().map(|u| u.charged).sum();
    assert_eq!(env.balance(), Decimal::from(10) - charged);
    drop(env);
    drop(pg);
}
