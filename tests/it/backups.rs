//! Backups of the embedded default (#46): `gateway backup --to DIR` while
//! c=8 billed requests run, `gateway restore --from DIR` into a new data
//! directory: every request answered 2xx before the backup began has its
//! records there, balances equal their ledger's sums, every object a live
//! record names is readable through a gateway serving the restored data.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use rust_decimal::Decimal;
use serde_json::json;

use crate::budgets::succeeded;
use crate::harness::*;
use runtime::store::{Assets, History, Ledger};

/// One billed request of worker `w`: a synthesis (its audio stored) or a chat.
async fn billed(env: &Env, w: usize, i: usize) -> Answer {
    if (w + i) % 2 == 0 {
        env.post(
            "/tts/synthesize",
            synth_body(&format!("Hello there {w} {i}")),
        )
        .await
    } else {
        let body = json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": format!("Hi {w} {i}")}]});
        env.api("/chat/completions", body).await
    }
}

/// `gateway ARGS` on `dir`'s data, on SQLite whatever the suite runs on
/// (a backup is of the embedded default).
fn sqlite_cli(dir: &TempDir, args: &[&str]) -> std::process::Command {
    let mut c = dir.cli(true);
    c.args(args);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_under_billed_load_restores_every_answered_request_its_balances_and_objects() {
    let env = llm_env(|c| c.database_url = None).await;
    env.grant("100");
    let to = TempDir::new("backup");
    let target = to.0.join("copy");
    let stop = AtomicBool::new(false);
    let served = AtomicUsize::new(0);
    let load = join_all((0..8).map(|w| {
        let (stop, served) = (&stop, &served);
        let env = &env;
        async move {
            let mut answered = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let a = billed(env, w, i).await;
                if (200..300).contains(&a.status) {
                    answered.push((Instant::now(), a.header("x-request-id").unwrap().to_owned()));
                    served.fetch_add(1, Ordering::Relaxed);
                }
                i += 1;
            }
            answered
        }
    }));
    let backup = async {
        // Under way: at least 16 answered (however slow the machine).
        let start = Instant::now();
        while served.load(Ordering::Relaxed) < 16 && start.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let began = Instant::now();
        let mut cmd = sqlite_cli(&env.dir, &["backup", "--to", target.to_str().unwrap()]);
        let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        stop.store(true, Ordering::Relaxed);
        (began, out)
    };
    let (answered, (began, out)) = tokio::join!(load, backup);
    let out = succeeded(out);
    assert!(out.contains("backed up"), "{out}");
    let before: Vec<String> = answered
        .into_iter()
        .flatten()
        .filter(|(at, _)| *at < began)
        .map(|(_, id)| id)
        .collect();
    assert!(
        before.len() >= 8,
        "{} answered before the backup",
        before.len()
    );

    // Restored into a new data directory.
    let fresh = TempDir::new("restored");
    let restore = || {
        sqlite_cli(&fresh, &["restore", "--from", target.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let out = succeeded(restore());
    assert!(out.contains("restored"), "{out}");
    // Over an existing database only with --force.
    assert!(!restore().status.success());
    let restored = runtime::store::Store::open(&fresh.0.join("gateway.db")).unwrap();
    let audit: std::collections::HashSet<String> = restored
        .audit_rows()
        .unwrap()
        .into_iter()
        .map(|a| a.request_id)
        .collect();
    let missing: Vec<&String> = before.iter().filter(|id| !audit.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "answered before the backup, not in it: {missing:?}"
    );
    // Balances are their ledgers' sums.
    let ledger: Decimal = restored
        .ledger(env.user_id)
        .unwrap()
        .iter()
        .map(|l| l.amount)
        .sum();
    assert_eq!(restored.balance(env.user_id).unwrap(), ledger);
    assert!(ledger < d("100"));
    // Every live object the restored records name: readable by a gateway
    // serving the restored directory.
    let keys: Vec<String> = own_keys(&restored);
    assert!(!keys.is_empty());
    drop(restored);
    let mut config = config_for(&env.sim, &fresh);
    config.database_url = None;
    let gw = server::start(
        config,
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
    )
    .unwrap();
    for k in &keys {
        assert!(
            gw.gateway.objects.exists(k).await.unwrap(),
            "object {k} of a restored record"
        );
    }
    gw.stop().await;
}

/// The object keys of the live asset records of `store`.
fn own_keys(store: &runtime::store::Store) -> Vec<String> {
    store
        .assets()
        .unwrap()
        .into_iter()
        .filter(|a| a.deleted_at.is_none())
        .map(|a| a.object_key)
        .collect()
}
