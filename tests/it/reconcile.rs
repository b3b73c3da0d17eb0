//! Reconciliation (spec §1, §8): the day's usage against the upstream's
//! billing usage; each run stored; drift above 1 % logged at error level
//! with both figures, and not at or below it.
//!
//! The CLI runs as a child process while the simulator and gateway run in
//! this test's runtime: the runtime is multi-threaded so that blocking on
//! the child does not stall them.

use std::process::Command;

use runtime::store::Reconciliations;
use serde_json::json;

use crate::harness::*;

fn reconcile_cli(env: &Env, day: &str) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args(["reconcile", "--date", day])
        .envs(env.dir.gateway_env())
        .env("PROVIDER_API_KEY", PROVIDER_KEY)
        .env("PROVIDER_BASE_URL", env.sim.base_url())
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

async fn set_upstream(env: &Env, day: &str, synth: &str) {
    let r = env
        .client
        .post(format!("{}/__sim/billing_usage", env.sim.url()))
        .json(&json!({"date": day, "items": {"synth": synth}}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_above_one_percent_is_logged_as_an_error() {
    let env = Env::start().await;
    let day = chrono::Utc::now().format("%Y-%m-%d").to_string();
    env.post("/tts/synthesize", synth_body(&"Reconcile me. ".repeat(10)))
        .await
        .expect(200);
    env.post("/tts/synthesize", synth_body("Again"))
        .await
        .expect(200);
    let total: rust_decimal::Decimal = env.usage().iter().map(|u| u.quantity).sum();
    assert!(total > rust_decimal::Decimal::ZERO);

    // The simulator's own count agrees: no error.
    let (out, err) = reconcile_cli(&env, &day);
    assert!(out.contains("synth") && out.contains(" ok"), "{out}");
    assert!(!err.contains("ERROR"), "{err}");

    // Exactly 1 % off: not logged as an error.
    set_upstream(
        &env,
        &day,
        &(total * rust_decimal::Decimal::new(101, 2)).to_string(),
    )
    .await;
    let (out, err) = reconcile_cli(&env, &day);
    assert!(out.contains(" ok"), "{out}");
    assert!(!err.contains("ERROR"), "{err}");

    // 2 % off: error with both figures.
    let upstream = (total * rust_decimal::Decimal::new(102, 2)).normalize();
    set_upstream(&env, &day, &upstream.to_string()).await;
    let (out, err) = reconcile_cli(&env, &day);
    assert!(out.contains("drift"), "{out}");
    let line = err
        .lines()
        .find(|l| l.contains("ERROR"))
        .unwrap_or_else(|| panic!("no error line in {err}"));
    assert!(
        line.contains(&total.normalize().to_string()) && line.contains(&upstream.to_string()),
        "{line}"
    );

    let runs = env.store().reconciliations(&day).unwrap();
    assert_eq!(
        runs.iter().map(|r| r.status.as_str()).collect::<Vec<_>>(),
        ["ok", "ok", "drift"],
        "each run is stored"
    );
    assert_eq!(runs[2].gateway_total, total);
}
