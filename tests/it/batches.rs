//! OpenAI's Batch API (issue #43): batches run by the gateway itself,
//! each line a model request of the batch's caller, at its model's
//! `batch_price_pct`, charged once with its result. The official `openai`
//! SDK drives a 1,000-line batch over three provider kinds
//! (tests/openai_sdk/batches.py); the others are over HTTP: a malformed
//! file, a balance that covers part of a batch, cancel, expiry, another
//! user's batch. `crash_batches.rs` kills the executing instance.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use runtime::store::{Batches, History, Ledger};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::*;

/// The lines of a batch of chats: `n` lines, the `i`th asking `model_of(i)`.
pub(crate) fn chat_lines(n: usize, model_of: impl Fn(usize) -> &'static str) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let line = json!({
            "custom_id": format!("req-{i}"), "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": model_of(i), "max_tokens": 16,
                     "messages": [{"role": "user", "content": format!("Say hello {i}")}]},
        });
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// Uploads `lines` as a batch file; its id.
pub(crate) async fn batch_file(env: &Env, key: &str, lines: Vec<u8>) -> String {
    let form = reqwest::multipart::Form::new()
        .text("purpose", "batch")
        .part(
            "file",
            reqwest::multipart::Part::bytes(lines).file_name("in.jsonl"),
        );
    let r = env
        .client
        .post(env.url("/api/v1/files"))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let a = Answer::from(r).await;
    a.expect(200);
    a.json["id"].as_str().unwrap().to_owned()
}

/// Creates a chat batch of `file` as `key`.
pub(crate) async fn create(env: &Env, key: &str, file: &str) -> Answer {
    let body = json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h"});
    env.call_as(key, "POST", &env.url("/api/v1/batches"), Some(body))
        .await
}

/// Polls batch `id` until its status is one of `ends` (60 s at most).
pub(crate) async fn wait_for(env: &Env, key: &str, id: &str, ends: &[&str]) -> Value {
    let start = Instant::now();
    loop {
        let a = env
            .call_as(key, "GET", &env.url(&format!("/api/v1/batches/{id}")), None)
            .await;
        a.expect(200);
        if ends.contains(&a.json["status"].as_str().unwrap_or_default()) {
            return a.json;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "batch stuck: {}",
            a.json
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The JSONL lines of file `id`, by `custom_id`.
pub(crate) async fn file_lines(env: &Env, key: &str, id: &Value) -> HashMap<String, Value> {
    let Some(id) = id.as_str() else {
        return HashMap::new();
    };
    let r = env
        .client
        .get(env.url(&format!("/api/v1/files/{id}/content")))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["custom_id"].as_str().unwrap().to_owned(), v))
        .collect()
}

/// What a model's tokens cost at half its list price, with `markup` %.
pub(crate) fn half_price(
    m: &runtime::store::ModelUsageRow,
    input: &str,
    output: &str,
    markup: u32,
) -> Decimal {
    let n = |v: i64| Decimal::from(v);
    let raw =
        (n(m.input_tokens) * d(input) + n(m.output_tokens) * d(output)) / Decimal::from(1_000_000);
    runtime::billing::with_markup(raw * d("0.5"), Decimal::from(markup)).round_dp(8)
}

#[tokio::test]
async fn a_batch_runs_every_line_at_half_price_and_publishes_its_files() {
    let env = llm_env(|_| {}).await;
    env.grant("100");
    let mut lines = chat_lines(30, |_| "sim/sim-gpt");
    // A line refused when it runs (the provider refuses its own key): the
    // error file.
    env.sim_config(json!({"api_key": PROVIDER_KEY})).await;
    lines.extend_from_slice(
        br#"{"custom_id": "bad", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "sim/sim-gpt", "byok_api_key": "sk-wrong-key-0123456789", "messages": [{"role": "user", "content": "hi"}]}}"#,
    );
    let file = batch_file(&env, &env.key, lines).await;
    let a = create(&env, &env.key, &file).await;
    a.expect(200);
    assert_eq!(a.json["object"], "batch");
    assert_eq!(a.json["status"], "in_progress", "{}", a.json);
    let id = a.json["id"].as_str().unwrap().to_owned();
    let b = wait_for(&env, &env.key, &id, &["completed"]).await;
    assert_eq!(
        b["request_counts"],
        json!({"total": 31, "completed": 30, "failed": 1}),
        "{b}"
    );
    let out = file_lines(&env, &env.key, &b["output_file_id"]).await;
    let err = file_lines(&env, &env.key, &b["error_file_id"]).await;
    assert_eq!(out.len(), 30);
    assert_eq!(err.len(), 1);
    assert_eq!(err["bad"]["response"]["status_code"], 400, "{}", err["bad"]);
    let usage = env.usage();
    let models = env.store().model_usage_rows().unwrap();
    let mut total = Decimal::ZERO;
    for (custom, line) in &out {
        assert_eq!(line["response"]["status_code"], 200);
        let rid = line["response"]["request_id"].as_str().unwrap();
        assert_eq!(
            line["response"]["body"]["object"], "chat.completion",
            "{custom}"
        );
        let u = usage
            .iter()
            .find(|u| u.request_id == rid)
            .expect("usage record");
        let m = models
            .iter()
            .find(|m| m.request_id == rid)
            .expect("model usage");
        assert_eq!(u.charged, half_price(m, "2.00", "8.00", 20), "{custom}");
        total += u.charged;
    }
    assert_eq!(b["cost"], runtime::billing::format_money(total));
    assert_eq!(env.balance(), d("100") - total);
    // The error line charged nothing and wrote no usage record.
    let bad = err["bad"]["response"]["request_id"].as_str().unwrap();
    assert!(usage.iter().all(|u| u.request_id != bad));
    // No hold is left.
    let holds = env.store().holds_of(env.user_id).unwrap();
    assert!(holds.is_empty(), "{holds:?}");
}

#[tokio::test]
async fn a_malformed_line_fails_the_batch_before_anything_is_held() {
    let env = llm_env(|_| {}).await;
    env.grant("10");
    let mut lines = chat_lines(3, |_| "sim/sim-gpt");
    lines.extend_from_slice(b"not json\n");
    lines.extend_from_slice(&chat_lines(1, |_| "sim/sim-gpt")); // req-0 again
    lines.extend_from_slice(
        br#"{"custom_id": "m", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "nope/none", "messages": []}}"#,
    );
    let file = batch_file(&env, &env.key, lines).await;
    let a = create(&env, &env.key, &file).await;
    a.expect(200);
    assert_eq!(a.json["status"], "failed", "{}", a.json);
    let errors = a.json["errors"]["data"].as_array().unwrap();
    let got: Vec<(i64, &str)> = errors
        .iter()
        .map(|e| (e["line"].as_i64().unwrap(), e["code"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        vec![
            (4, "invalid_json_line"),
            (5, "duplicate_custom_id"),
            (6, "invalid_request")
        ],
        "{errors:?}"
    );
    let id = a.json["id"].as_str().unwrap();
    let got = env
        .call_as(
            &env.key,
            "GET",
            &env.url(&format!("/api/v1/batches/{id}")),
            None,
        )
        .await;
    assert_eq!(got.json["status"], "failed", "{}", got.json);
    assert_eq!(got.json["request_counts"]["total"], 0);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    env.assert_no_upstream_call().await;
    assert!(env.store().model_usage_rows().unwrap().is_empty());
    assert!(env.usage().iter().all(|u| u.charged.is_zero()));
    assert!(env.store().holds_of(env.user_id).unwrap().is_empty());
    assert_eq!(env.balance(), d("10"));
}
