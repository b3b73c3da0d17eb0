//! OpenAI's Batch API (issue #43): batches run by the gateway itself,
//! each line a model request of the batch's caller, at its model's
//! `batch_price_pct`, charged once with its result. The official `openai`
//! SDK drives a 1,000-line batch over three provider kinds
//! (tests/openai_sdk/batches.py); the others are over HTTP: a malformed
//! file, a balance that covers part of a batch, cancel, expiry, another
//! user's batch. `crash_batches.rs` kills the executing instance.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use runtime::store::{History, Ledger};
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
pub(crate) async fn batch_file(base: &str, key: &str, lines: Vec<u8>) -> String {
    let form = reqwest::multipart::Form::new()
        .text("purpose", "batch")
        .part(
            "file",
            reqwest::multipart::Part::bytes(lines).file_name("in.jsonl"),
        );
    let r = reqwest::Client::new()
        .post(format!("{base}/api/v1/files"))
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
pub(crate) async fn create(base: &str, key: &str, file: &str) -> Answer {
    let body = json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h"});
    let r = reqwest::Client::new()
        .post(format!("{base}/api/v1/batches"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    Answer::from(r).await
}

/// Batch `id` as `key` reads it.
pub(crate) async fn get(base: &str, key: &str, id: &str) -> Answer {
    let r = reqwest::Client::new()
        .get(format!("{base}/api/v1/batches/{id}"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    Answer::from(r).await
}

/// Polls batch `id` until its status is one of `ends` (60 s at most).
pub(crate) async fn wait_for(base: &str, key: &str, id: &str, ends: &[&str]) -> Value {
    let start = Instant::now();
    loop {
        let a = get(base, key, id).await;
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
pub(crate) async fn file_lines(base: &str, key: &str, id: &Value) -> HashMap<String, Value> {
    let Some(id) = id.as_str() else {
        return HashMap::new();
    };
    let r = reqwest::Client::new()
        .get(format!("{base}/api/v1/files/{id}/content"))
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
    let file = batch_file(&env.gw.url(), &env.key, lines).await;
    let a = create(&env.gw.url(), &env.key, &file).await;
    a.expect(200);
    assert_eq!(a.json["object"], "batch");
    assert_eq!(a.json["status"], "in_progress", "{}", a.json);
    let id = a.json["id"].as_str().unwrap().to_owned();
    let b = wait_for(&env.gw.url(), &env.key, &id, &["completed"]).await;
    assert_eq!(
        b["request_counts"],
        json!({"total": 31, "completed": 30, "failed": 1}),
        "{b}"
    );
    let out = file_lines(&env.gw.url(), &env.key, &b["output_file_id"]).await;
    let err = file_lines(&env.gw.url(), &env.key, &b["error_file_id"]).await;
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
    // `/usage` groups the batch's lines by its id, apart from the others.
    let chat = json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": "hi"}]});
    env.api("/chat/completions", chat).await.expect(200);
    let u = env
        .call_as(
            &env.key,
            "GET",
            &env.url("/api/v1/usage?group_by=batch"),
            None,
        )
        .await;
    u.expect(200);
    let groups = u.json["data"].as_array().unwrap();
    let ours = groups
        .iter()
        .find(|g| g["batch"] == id.as_str())
        .expect("the batch's group");
    assert_eq!(ours["requests"], 30, "{}", u.json);
    assert_eq!(ours["cost"], runtime::billing::format_money(total));
    assert!(
        groups.iter().any(|g| g["batch"].is_null()),
        "the other requests: {}",
        u.json
    );
    // Lines done and failed, and those waiting, are metrics.
    let metrics = env.client.get(env.url("/metrics")).send().await.unwrap();
    let text = metrics.text().await.unwrap();
    for m in [
        "gateway_batch_lines_total{state=\"done\"}",
        "gateway_batch_lines_total{state=\"failed\"}",
        "gateway_batch_lines_waiting",
    ] {
        assert!(text.contains(m), "{m} missing from /metrics");
    }
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
    let file = batch_file(&env.gw.url(), &env.key, lines).await;
    let a = create(&env.gw.url(), &env.key, &file).await;
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

/// The four prices and the markup of a model of [`native_toml`].
fn list_prices(model: &str) -> ([Decimal; 4], u32) {
    match model {
        "sim/sim-gpt" => ([d("2.00"), d("8.00"), d("2.00"), d("2.00")], 20),
        other => (native_prices(other), 10),
    }
}

/// What a line's tokens cost at half its model's list price, to the 8th decimal.
fn half_of_list(m: &runtime::store::ModelUsageRow) -> Decimal {
    let ([pi, po, pr, pw], markup) = list_prices(&m.model);
    let n = |v: i64| Decimal::from(v);
    let raw = (n(m.input_tokens) * pi
        + n(m.output_tokens) * po
        + n(m.cache_read_tokens) * pr
        + n(m.cache_write_tokens) * pw)
        / Decimal::from(1_000_000);
    runtime::billing::with_markup(raw * d("0.5"), Decimal::from(markup)).round_dp(8)
}

#[tokio::test]
async fn the_openai_sdk_runs_a_thousand_line_batch_over_three_provider_kinds() {
    let env = native_env().await;
    env.sim_config(json!({"api_key": PROVIDER_KEY})).await;
    env.grant("100");
    let vars = vec![
        ("GATEWAY_BASE_URL", env.url("/api/v1")),
        ("GATEWAY_KEY", env.key.clone()),
        ("BATCH_LINES", "1000".to_owned()),
    ];
    let out = run_script("python3", "tests/openai_sdk/batches.py", vars).await;
    let ok = checks(&out);
    for name in ["create", "completed", "list", "output", "errors"] {
        assert!(ok.contains_key(name), "{name}: {out}");
    }
    assert_eq!(ok["completed"]["completed"], 990, "{out}");
    assert_eq!(ok["completed"]["failed"], 10, "{out}");
    let output = ok["output"].as_object().unwrap();
    let errors = ok["errors"].as_object().unwrap();
    // One result line per input line, matched by custom_id.
    assert_eq!(output.len() + errors.len(), 1000);
    for i in 0..1000 {
        let id = format!("req-{i}");
        assert_eq!(output.contains_key(&id), i % 100 != 99, "{id}");
        assert_eq!(
            errors.get(&id).map(|s| s == 400),
            (i % 100 == 99).then_some(true),
            "{id}"
        );
    }
    // Every line's usage record: half its model's list price, to the 8th
    // decimal; the batch's cost is their sum, and what the balance lost.
    let usage = env.usage();
    let models = env.store().model_usage_rows().unwrap();
    let mut total = Decimal::ZERO;
    let mut kinds = std::collections::HashSet::new();
    for (custom, rid) in output {
        let rid = rid.as_str().unwrap();
        let u = usage
            .iter()
            .find(|u| u.request_id == rid)
            .expect("usage record");
        let m = models
            .iter()
            .find(|m| m.request_id == rid)
            .expect("token record");
        assert_eq!(u.charged, half_of_list(m), "{custom}: {m:?}");
        assert!(u.charged > Decimal::ZERO);
        kinds.insert(m.model.split('/').next().unwrap().to_owned());
        total += u.charged;
    }
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    assert_eq!(models.len(), 990, "no line ran twice, none is missing");
    assert_eq!(
        ok["completed"]["cost"],
        runtime::billing::format_money(total).as_str()
    );
    assert_eq!(env.balance(), d("100") - total);
    assert!(env.store().holds_of(env.user_id).unwrap().is_empty());
}

/// One identical line, `n` times (each the same charge and hold).
fn same_lines(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let line = json!({
            "custom_id": format!("c-{i}"), "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "sim/sim-gpt", "max_tokens": 16, "messages": [{"role": "user", "content": "Say hello"}]},
        });
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

#[tokio::test]
async fn a_balance_that_covers_300_lines_bills_exactly_300() {
    let env = llm_env(|_| {}).await;
    env.grant("0.001");
    // One line, slowed down, shows its hold while it runs and its charge.
    env.fault(json!({"path": "/v1/chat/completions", "fault": {"delay_ms": 1500}}))
        .await;
    let file = batch_file(&env.gw.url(), &env.key, same_lines(1)).await;
    let probe = create(&env.gw.url(), &env.key, &file).await;
    let probe_id = probe.json["id"].as_str().unwrap().to_owned();
    let start = Instant::now();
    let hold = loop {
        let held = env.store().held(env.user_id).unwrap();
        if held > Decimal::ZERO {
            break held;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no hold seen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    wait_for(&env.gw.url(), &env.key, &probe_id, &["completed"]).await;
    let charge = d("0.001") - env.balance();
    assert!(charge > Decimal::ZERO && hold >= charge, "{hold} {charge}");
    // The balance covers 300 lines: 299 charges and the last one's hold.
    let covers = Decimal::from(299) * charge + hold;
    let now = env.balance();
    env.store()
        .grant_credit(env.user_id, covers - now, Some("test"))
        .unwrap();
    assert_eq!(env.balance(), covers);
    let file = batch_file(&env.gw.url(), &env.key, same_lines(400)).await;
    let a = create(&env.gw.url(), &env.key, &file).await;
    let id = a.json["id"].as_str().unwrap().to_owned();
    let b = wait_for(&env.gw.url(), &env.key, &id, &["completed"]).await;
    assert_eq!(
        b["request_counts"],
        json!({"total": 400, "completed": 300, "failed": 100}),
        "{b}"
    );
    let err = file_lines(&env.gw.url(), &env.key, &b["error_file_id"]).await;
    assert_eq!(err.len(), 100);
    assert!(
        err.values()
            .all(|l| l["error"]["code"] == "insufficient_credits"),
        "{err:?}"
    );
    let out = file_lines(&env.gw.url(), &env.key, &b["output_file_id"]).await;
    assert_eq!(out.len(), 300);
    assert_eq!(env.balance(), covers - Decimal::from(300) * charge);
    assert!(env.balance() >= Decimal::ZERO);
    assert_eq!(
        b["cost"],
        runtime::billing::format_money(Decimal::from(300) * charge)
    );
    let lines = env.store().ledger(env.user_id).unwrap();
    assert!(
        lines.iter().all(|l| l.balance_after >= Decimal::ZERO),
        "never overdrawn"
    );
    assert!(env.store().holds_of(env.user_id).unwrap().is_empty());
}

#[tokio::test]
async fn cancel_stops_new_lines_and_bills_those_that_ran() {
    let env = llm_env(|_| {}).await;
    env.grant("10");
    env.fault(json!({"path": "/v1/chat/completions", "fault": {"delay_ms": 200}, "count": 0}))
        .await;
    let file = batch_file(&env.gw.url(), &env.key, same_lines(200)).await;
    let id = create(&env.gw.url(), &env.key, &file).await.json["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let start = Instant::now();
    loop {
        let a = env
            .call_as(
                &env.key,
                "GET",
                &env.url(&format!("/api/v1/batches/{id}")),
                None,
            )
            .await;
        if a.json["request_counts"]["completed"].as_i64().unwrap() >= 8 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = env.url(&format!("/api/v1/batches/{id}/cancel"));
    let c = env.call_as(&env.key, "POST", &url, None).await;
    c.expect(200);
    assert_eq!(c.json["status"], "cancelling", "{}", c.json);
    assert!(c.json["cancelling_at"].is_i64());
    let b = wait_for(&env.gw.url(), &env.key, &id, &["cancelled"]).await;
    assert!(b["cancelled_at"].is_i64(), "{b}");
    let done = b["request_counts"]["completed"].as_i64().unwrap();
    let failed = b["request_counts"]["failed"].as_i64().unwrap();
    assert_eq!(done + failed, 200);
    assert!((8..200).contains(&done), "{b}");
    let err = file_lines(&env.gw.url(), &env.key, &b["error_file_id"]).await;
    assert!(err
        .values()
        .all(|l| l["error"]["code"] == "batch_cancelled"));
    // Each line that ran (those in flight at the cancel too) is billed once.
    let billed = env.store().model_usage_rows().unwrap().len() as i64;
    assert_eq!(billed, done);
    let cost: Decimal = env.usage().iter().map(|u| u.charged).sum();
    assert_eq!(b["cost"], runtime::billing::format_money(cost));
    assert_eq!(env.balance(), d("10") - cost);
    // An ended batch cannot be cancelled again.
    let again = env.call_as(&env.key, "POST", &url, None).await;
    again.expect(200);
    assert_eq!(again.json["status"], "cancelled");
}

#[tokio::test]
async fn a_batch_past_its_window_expires_with_its_done_lines_billed() {
    let env = llm_env(|c| c.batches.window = Some(Duration::from_secs(3))).await;
    env.grant("10");
    env.fault(json!({"path": "/v1/chat/completions", "fault": {"delay_ms": 200}, "count": 0}))
        .await;
    let file = batch_file(&env.gw.url(), &env.key, same_lines(300)).await;
    let a = create(&env.gw.url(), &env.key, &file).await;
    let id = a.json["id"].as_str().unwrap().to_owned();
    assert_eq!(
        a.json["expires_at"].as_i64().unwrap() - a.json["created_at"].as_i64().unwrap(),
        3
    );
    let b = wait_for(&env.gw.url(), &env.key, &id, &["expired"]).await;
    assert!(b["expired_at"].is_i64(), "{b}");
    let done = b["request_counts"]["completed"].as_i64().unwrap();
    assert!(done > 0 && done < 300, "{b}");
    let out = file_lines(&env.gw.url(), &env.key, &b["output_file_id"]).await;
    let err = file_lines(&env.gw.url(), &env.key, &b["error_file_id"]).await;
    assert_eq!(out.len() as i64, done);
    assert_eq!(out.len() + err.len(), 300);
    assert!(
        err.values().all(|l| l["error"]["code"] == "batch_expired"),
        "{err:?}"
    );
    assert_eq!(env.store().model_usage_rows().unwrap().len() as i64, done);
}

#[tokio::test]
async fn another_users_batch_and_file_are_404s_and_bad_requests_keep_nothing() {
    let env = llm_env(|_| {}).await;
    env.grant("10");
    let file = batch_file(&env.gw.url(), &env.key, same_lines(2)).await;
    let id = create(&env.gw.url(), &env.key, &file).await.json["id"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_for(&env.gw.url(), &env.key, &id, &["completed"]).await;
    let (_, other) = env.new_user("bob@example.com");
    let get = env
        .call_as(
            &other,
            "GET",
            &env.url(&format!("/api/v1/batches/{id}")),
            None,
        )
        .await;
    get.expect(404);
    assert_eq!(
        get.json["error"]["message"],
        format!("No such Batch object: {id}")
    );
    let url = env.url(&format!("/api/v1/batches/{id}/cancel"));
    env.call_as(&other, "POST", &url, None).await.expect(404);
    let list = env
        .call_as(&other, "GET", &env.url("/api/v1/batches"), None)
        .await;
    assert_eq!(list.json["data"], json!([]));
    // Another user's file cannot be a batch's input.
    let theirs = create(&env.gw.url(), &other, &file).await;
    theirs.expect(404);
    assert_eq!(
        theirs.json["error"]["message"],
        format!("No such File object: {file}")
    );
    // Nor a file of another purpose, nor an endpoint that is not batched.
    let form = reqwest::multipart::Form::new()
        .text("purpose", "user_data")
        .part(
            "file",
            reqwest::multipart::Part::bytes(same_lines(1)).file_name("u.jsonl"),
        );
    let r = env
        .client
        .post(env.url("/api/v1/files"))
        .bearer_auth(&env.key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let user_data = Answer::from(r).await.json["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let a = create(&env.gw.url(), &env.key, &user_data).await;
    a.expect(400);
    assert!(
        a.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("purpose user_data"),
        "{}",
        a.json
    );
    let body = json!({"input_file_id": file, "endpoint": "/v1/images/generations", "completion_window": "24h"});
    let a = env
        .call_as(&env.key, "POST", &env.url("/api/v1/batches"), Some(body))
        .await;
    a.expect(400);
    let list = env
        .call_as(&env.key, "GET", &env.url("/api/v1/batches"), None)
        .await;
    assert_eq!(
        list.json["data"].as_array().unwrap().len(),
        1,
        "{}",
        list.json
    );
    assert_eq!(list.json["data"][0]["id"], id.as_str());
}

#[tokio::test]
async fn embeddings_completions_and_responses_batch_too() {
    let env = llm_env(|_| {}).await;
    env.grant("10");
    let cases = [
        (
            "/v1/embeddings",
            json!({"model": "sim/sim-embed", "input": "The quick brown fox"}),
            "list",
        ),
        (
            "/v1/completions",
            json!({"model": "sim/sim-instruct", "prompt": "Once upon", "max_tokens": 8}),
            "text_completion",
        ),
        (
            "/v1/responses",
            json!({"model": "sim/sim-gpt", "input": "Hello", "max_output_tokens": 16}),
            "response",
        ),
    ];
    for (url, body, object) in cases {
        let mut lines = Vec::new();
        for i in 0..3 {
            let line =
                json!({"custom_id": format!("x-{i}"), "method": "POST", "url": url, "body": body});
            lines.extend_from_slice(format!("{line}\n").as_bytes());
        }
        let base = env.gw.url();
        let file = batch_file(&base, &env.key, lines).await;
        let req = json!({"input_file_id": file, "endpoint": url, "completion_window": "24h"});
        let a = env
            .call_as(&env.key, "POST", &env.url("/api/v1/batches"), Some(req))
            .await;
        a.expect(200);
        assert_eq!(a.json["endpoint"], url);
        let id = a.json["id"].as_str().unwrap().to_owned();
        let b = wait_for(&base, &env.key, &id, &["completed"]).await;
        assert_eq!(b["request_counts"]["completed"], 3, "{url}: {b}");
        let out = file_lines(&base, &env.key, &b["output_file_id"]).await;
        for line in out.values() {
            assert_eq!(line["response"]["body"]["object"], object, "{url}: {line}");
            let rid = line["response"]["request_id"].as_str().unwrap();
            let u = env
                .usage()
                .into_iter()
                .find(|u| u.request_id == rid)
                .expect("usage");
            assert!(u.charged > Decimal::ZERO, "{url}");
        }
    }
    // A line's url must be the batch's endpoint.
    let line = json!({"custom_id": "a", "method": "POST", "url": "/v1/embeddings",
                      "body": {"model": "sim/sim-gpt", "messages": []}});
    let file = batch_file(&env.gw.url(), &env.key, format!("{line}\n").into_bytes()).await;
    let a = create(&env.gw.url(), &env.key, &file).await;
    assert_eq!(a.json["status"], "failed");
    assert_eq!(
        a.json["errors"]["data"][0]["code"], "mismatched_url",
        "{}",
        a.json
    );
}

#[tokio::test]
async fn a_file_over_the_line_limit_fails_the_batch() {
    let env = llm_env(|c| c.batches.max_lines = 5).await;
    env.grant("1");
    let base = env.gw.url();
    let file = batch_file(&base, &env.key, chat_lines(6, |_| "sim/sim-gpt")).await;
    let a = create(&base, &env.key, &file).await;
    assert_eq!(a.json["status"], "failed", "{}", a.json);
    assert_eq!(a.json["errors"]["data"][0]["code"], "too_many_requests");
    let file = batch_file(&base, &env.key, chat_lines(5, |_| "sim/sim-gpt")).await;
    let a = create(&base, &env.key, &file).await;
    assert_eq!(a.json["status"], "in_progress", "{}", a.json);
    let id = a.json["id"].as_str().unwrap();
    wait_for(&base, &env.key, id, &["completed"]).await;
}
