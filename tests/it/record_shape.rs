//! One record per request (issue 47): a request whose usage charges
//! nothing writes one row, its audit row carrying the usage facts, read as
//! a usage record through the `usage_records` view; a charge keeps its usage
//! row (its ledger line names it). A database of the previous shape
//! (migrations 1–29, rows as the previous writer wrote them) migrates in
//! place: its rows read as before, beside the new ones.

use std::collections::HashSet;

use runtime::store::{Accounts, History, Ledger, Store};
use serde_json::{json, Value};

use crate::harness::{d, own_query, own_sql_in, providers_toml, start_sim, Env, TempDir};
use crate::harness::{LLM_KEY_VAR, PROVIDER_KEY};

/// The migrations of the previous shape.
const PREVIOUS_SHAPE: usize = 29;

/// The rows the previous writer wrote for a user with 10 of credit: a free
/// voice request (audit and a `free` usage row), a billed chat (audit,
/// usage, token detail, the ledger line of its charge), at `at`.
fn previous_rows(at: &str) -> String {
    format!(
        "INSERT INTO users (email, created_at) VALUES ('old@example.com', '{at}');
         INSERT INTO credit_balances (user_id, balance, updated_at) VALUES (1, '9.99000000', '{at}');
         INSERT INTO credit_ledger (user_id, amount, balance_after, kind, usage_id, note, created_at)
             VALUES (1, '10.00000000', '10.00000000', 'grant', NULL, 'test', '{at}');
         INSERT INTO audit (request_id, user_id, route_id, method, path, status, upstream_status, latency_ms, created_at)
             VALUES ('req_old_free', 1, 'tts.voices.list', 'GET', '/api/v1/voice/tts/voices', 200, 200, 3, '{at}'),
                    ('req_old_chat', 1, 'chat.completions', 'POST', '/api/v1/chat/completions', 200, 200, 5, '{at}');
         INSERT INTO usage (request_id, user_id, route_id, capability, product, unit, quantity, unit_price,
                            markup_pct, charged, unpriced, once_key, created_at, api_key_id, price_version)
             VALUES ('req_old_free', 1, 'tts.voices.list', 'tts', 'tts', 'free', '0', NULL, '0', '0.00000000', 1, NULL, '{at}', NULL, NULL),
                    ('req_old_chat', 1, 'chat.completions', 'chat', 'sim/sim-gpt', 'tokens', '30', '0.000333333333',
                     '0', '0.01000000', 0, NULL, '{at}', NULL, 'v0');
         INSERT INTO model_usage (request_id, user_id, route_id, model, input_tokens, output_tokens, counted, byok,
                                  ended, created_at, streamed, latency_ms, cache_read_tokens, cache_write_tokens, attempts, route)
             VALUES ('req_old_chat', 1, 'chat.completions', 'sim/sim-gpt', 20, 10, 1, 0, 'completed', '{at}', 0, 5, 0, 0, 1, NULL);
         INSERT INTO credit_ledger (user_id, amount, balance_after, kind, usage_id, note, created_at)
             VALUES (1, '-0.01000000', '9.99000000', 'charge', 2, NULL, '{at}');"
    )
}

async fn get(env: &Env, key: &str, path: &str) -> Value {
    let a = env.call_as(key, "GET", &env.url(path), None).await;
    a.expect(200);
    a.json.clone()
}

#[tokio::test]
async fn a_database_of_the_previous_shape_migrates_in_place_and_reads_as_before() {
    let dir = TempDir::new("shape");
    Store::migrate_to(&dir.database(), PREVIOUS_SHAPE).unwrap();
    let at = runtime::store::now_rfc3339();
    let rows = previous_rows(&at);
    own_sql_in(&dir, &rows, &rows).await;

    // The gateway opens it: migrated, nothing rewritten.
    std::env::set_var(LLM_KEY_VAR, PROVIDER_KEY);
    let sim = start_sim().await;
    let toml = providers_toml(&sim.llm_url());
    let env = Env::on_dir(sim, dir, move |c| {
        let path = c.data_dir.join("providers.toml");
        std::fs::write(&path, toml).unwrap();
        c.providers_file = Some(path);
    })
    .await;
    let store = env.store();
    let old = store.user_by_email("old@example.com").unwrap().unwrap();
    let before = store.usage_rows_of(old.id).unwrap();
    assert_eq!(
        before
            .iter()
            .map(|u| (u.request_id.as_str(), u.unit.as_str(), u.charged))
            .collect::<Vec<_>>(),
        vec![
            ("req_old_free", "free", d("0")),
            ("req_old_chat", "tokens", d("0.01"))
        ]
    );
    let key = runtime::auth::create_key(store, old.id).unwrap();
    let g = get(&env, &key, "/api/v1/generations/req_old_chat").await;
    assert_eq!(
        (g["cost"].as_str(), g["model"].as_str()),
        (Some("0.01000000"), Some("sim-gpt")),
        "{g}"
    );
    let ledger = get(&env, &key, "/api/v1/credits/ledger").await;
    assert_eq!(ledger["data"][0]["request_id"], "req_old_chat", "{ledger}");

    // New requests beside the old rows: the free one is one row.
    let free = env
        .call_as(&key, "GET", &env.voice("/tts/voices"), None)
        .await;
    free.expect(200);
    let free_id = free.header("x-request-id").unwrap().to_owned();
    let chat = env
        .call_as(
            &key,
            "POST",
            &env.url("/api/v1/chat/completions"),
            Some(json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8})),
        )
        .await;
    chat.expect(200);
    let chat_id = chat.header("x-request-id").unwrap().to_owned();
    let rows_in =
        |table: &str, id: &str| format!("SELECT request_id FROM {table} WHERE request_id = '{id}'");
    assert!(
        own_query(&env, &rows_in("usage", &free_id))
            .await
            .is_empty(),
        "no usage row of its own"
    );
    let folded = own_query(
        &env,
        &format!("SELECT unit, product FROM audit WHERE request_id = '{free_id}'"),
    )
    .await;
    assert_eq!(folded, vec![vec!["free".to_owned(), "tts".to_owned()]]);
    assert_eq!(
        own_query(&env, &rows_in("usage", &chat_id)).await.len(),
        1,
        "a charge keeps its row"
    );

    let after = store.usage_rows_of(old.id).unwrap();
    let ids: HashSet<&str> = after.iter().map(|u| u.request_id.as_str()).collect();
    let expected: HashSet<&str> = [
        "req_old_free",
        "req_old_chat",
        free_id.as_str(),
        chat_id.as_str(),
    ]
    .into();
    assert!(expected.is_subset(&ids), "{ids:?}"); // and the history reads', free too
    assert_eq!(ids.len(), after.len(), "one usage record per request");
    let charged: rust_decimal::Decimal = after.iter().map(|u| u.charged).sum();
    assert_eq!(
        store.balance(old.id).unwrap(),
        d("10") - charged,
        "every charge debited once"
    );
    let usage = get(&env, &key, "/api/v1/usage").await;
    assert_eq!(
        usage["total"]["requests"], 2,
        "the billed requests, old and new: {usage}"
    );
    assert_eq!(
        usage["total"]["cost"]
            .as_str()
            .map(rust_decimal::Decimal::from_str_exact)
            .unwrap()
            .unwrap(),
        charged
    );
    let ledger = get(&env, &key, "/api/v1/credits/ledger").await;
    let charges: Vec<&str> = ledger["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "charge")
        .map(|l| l["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(charges, vec![chat_id.as_str(), "req_old_chat"], "{ledger}");
    // Audit rows are read as before, old and new.
    let audit: Vec<String> = store
        .audit_rows()
        .unwrap()
        .into_iter()
        .map(|a| a.request_id)
        .collect();
    for id in [
        "req_old_free",
        "req_old_chat",
        free_id.as_str(),
        chat_id.as_str(),
    ] {
        assert!(audit.iter().any(|a| a == id), "{id}");
    }
}

#[tokio::test]
async fn a_free_request_writes_one_row_and_reads_as_its_audit_and_usage_records() {
    let env = Env::start().await;
    let a = env.get("/tts/voices").await;
    a.expect(200);
    let id = a.header("x-request-id").unwrap().to_owned();
    let usage = env.usage();
    let u = usage
        .iter()
        .find(|u| u.request_id == id)
        .expect("its usage record");
    assert_eq!(
        (u.unit.as_str(), u.charged, u.route_id.as_str()),
        ("free", d("0"), "tts.voices.list")
    );
    assert!(env
        .audit()
        .iter()
        .any(|r| r.request_id == id && r.status == 200));
    let rows = own_query(
        &env,
        &format!("SELECT request_id FROM usage WHERE request_id = '{id}'"),
    )
    .await;
    assert!(rows.is_empty(), "{rows:?}");
    assert!(
        env.store().ledger(env.user_id).unwrap().is_empty(),
        "no ledger line: no money moved"
    );
}
