//! Spec §7's named failures: format 1's 500 reasons (`user_creation_failed`,
//! `activation_failed`, `update_failed`, `server_error`), each caused by the
//! real database refusing the write underneath (a trigger that raises,
//! installed by the test through its own connection, on SQLite or
//! PostgreSQL); 500 "pricing calculation failed" with no upstream call and
//! nothing charged; format 2's two deviations (a provider failure is 500,
//! a provider without its key 404 "provider config missing"). Also: a
//! write the record writer defers (pipelined on PostgreSQL) failing fails
//! its whole commit.

use std::collections::BTreeSet;

use reqwest::multipart::{Form, Part};
use runtime::store::{Accounts, Assets, Ledger};
use serde_json::{json, Value};

use crate::harness::*;

const SECRET: &[u8] = b"test-jwt-secret-0123456789";
const PASSWORD: &str = "correct horse battery";

async fn accounts_env() -> Env {
    Env::with(|c| {
        c.accounts.jwt_secret = Some(SECRET.to_vec());
        c.accounts.env = "test".into();
        c.accounts.require_email_confirmation = true;
    })
    .await
}

/// Makes every `op` (`INSERT`, `UPDATE`) on `table` of the env's database
/// fail: a trigger raising an error, created through a connection of the
/// test's own.
async fn break_table(env: &Env, table: &str, op: &str) {
    let pg = format!(
        "CREATE OR REPLACE FUNCTION gw_it_fail() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$;
         CREATE TRIGGER gw_it_fail_{table} BEFORE {op} ON {table}
         FOR EACH ROW EXECUTE FUNCTION gw_it_fail();"
    );
    let lite = format!(
        "CREATE TRIGGER gw_it_fail_{table} BEFORE {op} ON {table}
         BEGIN SELECT RAISE(ABORT, 'injected failure'); END;"
    );
    own_sql(env, &pg, &lite).await;
}

/// Removes [`break_table`]'s trigger.
async fn mend_table(env: &Env, table: &str) {
    let pg = format!("DROP TRIGGER gw_it_fail_{table} ON {table}");
    let lite = format!("DROP TRIGGER gw_it_fail_{table}");
    own_sql(env, &pg, &lite).await;
}

async fn post(env: &Env, path: &str, body: Value) -> Answer {
    let r = env
        .client
        .post(env.url(&format!("/api/v1{path}")))
        .json(&body)
        .send()
        .await
        .unwrap();
    Answer::from(r).await
}

/// Format 1's 500 with `details.reason` `reason`; its message.
#[track_caller]
fn failed(a: &Answer, reason: &str) -> String {
    a.expect(500);
    let keys: BTreeSet<&str> = a
        .json
        .as_object()
        .unwrap_or_else(|| panic!("{}", a.text))
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["error", "message", "status_code", "details"])
    );
    assert_eq!(a.json["error"], "internal_server_error", "{}", a.text);
    assert_eq!(a.json["status_code"], json!(500));
    assert_eq!(a.json["details"], json!({ "reason": reason }), "{}", a.text);
    assert!(!a.text.contains("injected"), "no database text: {}", a.text);
    a.json["message"].as_str().unwrap().to_owned()
}

/// The token of the newest mail to `to`, if any.
fn outbox_token(env: &Env, to: &str) -> Option<String> {
    let dir = env.dir.0.join("outbox");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .ok()?
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().rev().find_map(|f| {
        let text = std::fs::read_to_string(f).unwrap();
        if !text.contains(&format!("To: {to}")) {
            return None;
        }
        text.lines()
            .find_map(|l| l.strip_prefix("Token: "))
            .map(|t| t.trim().to_owned())
    })
}

fn register_body(name: &str) -> Value {
    json!({"username": name, "email": format!("{name}@example.com"), "password": PASSWORD, "accept_privacy_policy": true})
}

#[tokio::test]
async fn register_answers_user_creation_failed_when_the_database_refuses() {
    let env = accounts_env().await;
    break_table(&env, "users", "INSERT").await;
    let a = post(&env, "/auth/register", register_body("ivy")).await;
    failed(&a, "user_creation_failed");
    assert!(env
        .store()
        .user_by_email("ivy@example.com")
        .unwrap()
        .is_none());
    assert_eq!(
        outbox_token(&env, "ivy@example.com"),
        None,
        "no confirmation mail for an account not made"
    );
}

#[tokio::test]
async fn confirm_answers_activation_failed_and_reset_update_failed() {
    let env = accounts_env().await;
    post(&env, "/auth/register", register_body("jon"))
        .await
        .expect(201);
    let user = env
        .store()
        .user_by_email("jon@example.com")
        .unwrap()
        .unwrap();
    let token = outbox_token(&env, "jon@example.com").expect("confirmation mail");
    break_table(&env, "users", "UPDATE").await;
    let a = post(&env, "/auth/confirm", json!({ "token": token })).await;
    failed(&a, "activation_failed");
    let row = env.store().user_row(user.id).unwrap().unwrap();
    assert!(!row.confirmed, "not confirmed");

    // A password reset: the user's row cannot change.
    post(
        &env,
        "/auth/reset-password",
        json!({"email": "jon@example.com"}),
    )
    .await
    .expect(200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let reset = loop {
        let t = outbox_token(&env, "jon@example.com").unwrap();
        if t != token || std::time::Instant::now() > deadline {
            break t;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_ne!(reset, token, "a reset mail");
    let a = post(
        &env,
        "/auth/reset-password",
        json!({"token": reset, "new_password": "another password 1"}),
    )
    .await;
    failed(&a, "update_failed");
    let after = env.store().user_row(user.id).unwrap().unwrap();
    assert_eq!(after, row, "the user's row is unchanged");

    // Nothing was written half-way: once the database takes writes again,
    // both tokens still work.
    mend_table(&env, "users").await;
    post(&env, "/auth/confirm", json!({ "token": token }))
        .await
        .expect(200);
    post(
        &env,
        "/auth/reset-password",
        json!({"token": reset, "new_password": "another password 1"}),
    )
    .await
    .expect(200);
    let done = env.store().user_row(user.id).unwrap().unwrap();
    assert!(done.confirmed);
}

#[tokio::test]
async fn another_format1_route_answers_server_error_and_keeps_no_object() {
    let env = Env::start().await;
    break_table(&env, "assets", "INSERT").await;
    let form = Form::new()
        .text("file_type", "audio")
        .part("file", Part::bytes(wav(0.3)).file_name("a.wav".to_owned()));
    let r = env
        .client
        .post(env.url("/api/v1/media"))
        .bearer_auth(&env.key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let a = Answer::from(r).await;
    assert_eq!(failed(&a, "server_error"), "internal error");
    assert!(env.store().assets().unwrap().is_empty());
    assert!(
        env.object_keys().is_empty(),
        "the stored object was removed"
    );
}

/// The test providers file with a price so large that a request's cost
/// overflows a decimal.
fn overpriced(llm_url: &str) -> String {
    providers_toml(llm_url).replacen(
        "input_per_mtok = \"2.00\"",
        "input_per_mtok = \"79228162514264337593543950335\"",
        1,
    )
}

#[tokio::test]
async fn a_price_that_cannot_be_computed_is_500_with_no_upstream_call() {
    let env = env_with_providers(overpriced, |_| {}).await;
    env.grant("5");
    env.clear_sim_log().await;
    let a = env
        .api(
            "/chat/completions",
            json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": "hello there"}]}),
        )
        .await;
    assert_eq!(envelope(&a, 500), "pricing calculation failed");
    env.assert_no_upstream_call().await;
    assert!(env.usage().is_empty());
    assert_eq!(env.balance(), d("5"));
    assert_eq!(env.store().held(env.user_id).unwrap(), d("0"));
}

#[tokio::test]
async fn format2_provider_failures_are_500_and_a_missing_key_404() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let body = json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": "x"}]});
    // A network failure (connection reset) and a 5xx: 500, not 502.
    for fault in [json!("reset"), json!({"status": 503})] {
        env.fault(json!({"path": "/v1/chat/completions", "fault": fault}))
            .await;
        let a = env.api("/chat/completions", body.clone()).await;
        envelope(&a, 500);
        assert!(env.usage().is_empty());
    }
    env.wait_no_holds().await;
    assert_eq!(env.balance(), d("1"));

    // A provider whose key variable is unset: 404, nothing sent.
    let unset = "GW_IT_UNSET_PROVIDER_KEY";
    std::env::remove_var(unset);
    let env = env_with_providers(
        |url| providers_toml(url).replace(LLM_KEY_VAR, unset),
        |_| {},
    )
    .await;
    env.grant("1");
    env.clear_sim_log().await;
    let a = env.api("/chat/completions", body).await;
    assert_eq!(envelope(&a, 404), "provider config missing");
    env.assert_no_upstream_call().await;
    assert!(env.usage().is_empty());
    assert_eq!(env.balance(), d("1"));
}

/// A write the record writer defers (the ledger line of a charge: on
/// PostgreSQL sent with the next statement, in one round trip) that fails
/// fails its whole commit: the request is answered with an error and
/// nothing of it stays (no usage, no debit, no hold); once the table
/// takes writes again the same request is billed once.
#[tokio::test]
async fn a_deferred_write_that_fails_fails_its_whole_commit() {
    let env = llm_env(|_| {}).await;
    env.grant("5");
    let body = json!({"model": "sim/sim-gpt", "max_tokens": 8,
        "messages": [{"role": "user", "content": "hello there"}]});
    break_table(&env, "credit_ledger", "INSERT").await;
    let a = env.api("/chat/completions", body.clone()).await;
    assert!(a.status >= 500, "a failed commit is a server error: {a:?}");
    assert!(env.usage().is_empty(), "no usage record");
    assert_eq!(env.balance(), d("5"), "no debit");
    // The hold of a failed commit is owed and released once the database
    // answers (the writer's next group, or its idle retry each second).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while env.store().held(env.user_id).unwrap() != d("0") {
        assert!(
            std::time::Instant::now() < deadline,
            "the failed request's hold is released"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    mend_table(&env, "credit_ledger").await;
    env.api("/chat/completions", body).await.expect(200);
    let usage = env.usage();
    assert_eq!(usage.len(), 1, "one usage record: {usage:?}");
    assert_eq!(env.balance(), d("5") - usage[0].charged);
    assert_eq!(env.store().held(env.user_id).unwrap(), d("0"));
}
