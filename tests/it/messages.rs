//! `POST /api/v1/messages` (Anthropic's Messages API as a second front
//! door to any chat model) and `/api/v1/messages/count_tokens`: answers,
//! event streams and errors in Anthropic's shapes; the same holds,
//! billing, BYOK, stop-stream and hang-up billing as chat completions.

use std::time::Duration;

use futures_util::StreamExt;
use runtime::store::{History, Ledger};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::{
    assert_byok_billed_nothing, assert_called_with_byok, assert_stream_started, d, hang_up_after,
    hung_up_row, llm_env, nothing_charged, Answer, Env,
};

fn message_body(text: &str, max_tokens: u64) -> Value {
    json!({"model": "sim/sim-gpt", "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": text}]})
}

/// `POST /api/v1{path}` with the key in `x-api-key`, as Anthropic's clients send it.
pub async fn post(env: &Env, path: &str, key: &str, body: &Value) -> Answer {
    let r = env
        .client
        .post(env.url(&format!("/api/v1{path}")))
        .header("x-api-key", key)
        .header("anthropic-version", "2023-06-01")
        .json(body)
        .send()
        .await
        .unwrap();
    Answer::from(r).await
}

/// Asserts Anthropic's error shape with `status` and `kind`, and the
/// request id in Anthropic's `request-id` as in `X-Request-Id`; the message.
#[track_caller]
fn anthropic_error(a: &Answer, status: u16, kind: &str) -> String {
    a.expect(status);
    assert_eq!(
        a.headers.get("request-id"),
        a.headers.get("x-request-id"),
        "{}",
        a.text
    );
    assert!(a.headers.contains_key("request-id"), "{}", a.text);
    assert_eq!(a.json["type"], "error", "{}", a.text);
    assert_eq!(a.json["error"]["type"], kind, "{}", a.text);
    a.json["error"]["message"].as_str().unwrap().to_owned()
}

/// The events of an Anthropic stream: (name, data).
fn events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let name = e.lines().find_map(|l| l.strip_prefix("event: ")).unwrap();
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            (name.to_owned(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

async fn stream(env: &Env, body: &Value) -> reqwest::Response {
    let mut body = body.clone();
    body["stream"] = json!(true);
    env.client
        .post(env.url("/api/v1/messages"))
        .header("x-api-key", &env.key)
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn read_all(r: reqwest::Response) -> String {
    String::from_utf8(r.bytes().await.unwrap().to_vec()).unwrap()
}

#[tokio::test]
async fn a_message_is_answered_in_anthropics_shape_and_billed_as_chat_completions_are() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let a = post(&env, "/messages", &env.key, &message_body("Hello there", 5)).await;
    a.expect(200);
    let m = &a.json;
    assert_eq!(
        (m["type"].as_str(), m["role"].as_str()),
        (Some("message"), Some("assistant"))
    );
    assert_eq!(m["model"], "sim/sim-gpt");
    assert!(m["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(m["content"].as_array().unwrap().len(), 1);
    assert_eq!(m["content"][0]["type"], "text");
    assert_eq!(
        m["content"][0]["text"].as_str().unwrap().split(' ').count(),
        5
    );
    assert_eq!(m["stop_reason"], "max_tokens");
    let rows = env.wait_model_usage(1).await;
    assert_eq!(
        m["usage"],
        json!({"input_tokens": rows[0].input_tokens, "output_tokens": 5,
            "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0})
    );
    assert_eq!(
        (rows[0].route_id.as_str(), rows[0].counted),
        ("messages", false)
    );
    // The provider was sent the chat body.
    let sent = &env.sim_requests().await[0]["json"];
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": "Hello there"}])
    );
    assert_eq!(
        (sent["model"].as_str(), sent["max_tokens"].as_u64()),
        (Some("sim-gpt"), Some(5))
    );
    // The same request through /chat/completions: the same usage, the same charge.
    let chat = env
        .api("/chat/completions", message_body("Hello there", 5))
        .await;
    chat.expect(200);
    let rows = env.wait_model_usage(2).await;
    assert_eq!(
        (rows[0].input_tokens, rows[0].output_tokens),
        (rows[1].input_tokens, rows[1].output_tokens)
    );
    let usage = env.usage();
    assert_eq!(usage.len(), 2);
    assert!(usage[0].charged > Decimal::ZERO);
    assert_eq!(usage[0].charged, usage[1].charged);
    let ledger = env.store().ledger(env.user_id).unwrap();
    let debits: Vec<Decimal> = ledger
        .iter()
        .map(|l| l.amount)
        .filter(|a| *a < Decimal::ZERO)
        .collect();
    assert_eq!(debits, vec![-usage[0].charged, -usage[0].charged]);
    assert_eq!(env.balance(), d("1") - usage[0].charged * Decimal::from(2));
    // Bearer works as well as x-api-key; the system prompt leads.
    let mut body = message_body("Hi", 3);
    body["system"] = json!("Be brief.");
    body["stop_sequences"] = json!(["END"]);
    body["metadata"] = json!({"user_id": "u-42"});
    let a = env.api("/messages", body).await;
    a.expect(200);
    let sent = &env.sim_requests().await[2]["json"];
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    assert_eq!(
        (sent["stop"].clone(), sent["user"].clone()),
        (json!(["END"]), json!("u-42"))
    );
}

#[tokio::test]
async fn a_stream_is_anthropics_event_sequence_and_billed_as_the_chat_path_bills() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let r = stream(&env, &message_body("Hello there", 4)).await;
    assert_stream_started(&r);
    let ev = events(&read_all(r).await);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(ev[0].1["message"]["role"], "assistant");
    assert_eq!(
        ev[1].1["content_block"],
        json!({"type": "text", "text": ""})
    );
    let text: String = ev[2..6]
        .iter()
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text.split(' ').count(), 4);
    let rows = env.wait_model_usage(1).await;
    let delta = &ev[7].1;
    assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
    assert_eq!(delta["usage"]["output_tokens"], 4);
    assert_eq!(delta["usage"]["input_tokens"], rows[0].input_tokens);
    // The provider's usage is billed (not a count of events).
    assert_eq!(
        (rows[0].counted, rows[0].ended.as_str()),
        (false, "complete")
    );
    assert_eq!(rows[0].output_tokens, 4);
    // The same charge as the same request unstreamed.
    post(&env, "/messages", &env.key, &message_body("Hello there", 4))
        .await
        .expect(200);
    let usage = env.usage();
    assert_eq!(usage.len(), 2);
    assert!(usage[0].charged > Decimal::ZERO);
    assert_eq!(usage[0].charged, usage[1].charged);
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
}

fn weather_tool() -> Value {
    json!([{"name": "get_weather", "description": "The weather of a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])
}

#[tokio::test]
async fn tools_round_trip_through_tool_use_and_tool_result() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let mut body = message_body("Please get_weather for Oslo", 50);
    body["tools"] = weather_tool();
    let a = post(&env, "/messages", &env.key, &body).await;
    a.expect(200);
    assert_eq!(a.json["stop_reason"], "tool_use");
    let call = a.json["content"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (call["type"].as_str(), call["name"].as_str()),
        (Some("tool_use"), Some("get_weather"))
    );
    assert_eq!(call["input"], json!({"city": "sim"}));
    let sent = &env.sim_requests().await[0]["json"];
    assert_eq!(sent["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        sent["tools"][0]["function"]["parameters"]["required"],
        json!(["city"])
    );
    // The result goes back; the model answers in text.
    body["messages"] = json!([
        body["messages"][0],
        {"role": "assistant", "content": a.json["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "Rain, 12 degrees"}]}
    ]);
    let b = post(&env, "/messages", &env.key, &body).await;
    b.expect(200);
    assert_eq!(b.json["content"][0]["type"], "text");
    assert_eq!(b.json["stop_reason"], "max_tokens");
    let sent = &env.sim_requests().await[1]["json"];
    let msgs = sent["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["tool_calls"][0]["id"], call["id"]);
    assert_eq!(
        msgs[1]["tool_calls"][0]["function"]["arguments"],
        "{\"city\":\"sim\"}"
    );
    assert_eq!(
        msgs[2],
        json!({"role": "tool", "tool_call_id": call["id"], "content": "Rain, 12 degrees"})
    );
    // Streamed: a tool_use block whose input arrives as input_json_delta pieces.
    body["messages"] = json!([{"role": "user", "content": "Please get_weather for Oslo"}]);
    body["tool_choice"] = json!({"type": "tool", "name": "get_weather"});
    let ev = events(&read_all(stream(&env, &body).await).await);
    let start = ev.iter().find(|(n, _)| n == "content_block_start").unwrap();
    assert_eq!(start.1["content_block"]["type"], "tool_use");
    assert_eq!(start.1["content_block"]["name"], "get_weather");
    let json_text: String = ev
        .iter()
        .filter(|(n, d)| n == "content_block_delta" && d["delta"]["type"] == "input_json_delta")
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&json_text).unwrap(),
        json!({"city": "sim"})
    );
    let delta = ev.iter().find(|(n, _)| n == "message_delta").unwrap();
    assert_eq!(delta.1["delta"]["stop_reason"], "tool_use");
    let sent = &env.sim_requests().await[2]["json"];
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    let rows = env.wait_model_usage(3).await;
    assert!(rows.iter().all(|r| !r.counted && r.output_tokens > 0));
}

#[tokio::test]
async fn images_reach_the_provider_as_image_parts() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let body = json!({"model": "sim/sim-gpt", "max_tokens": 3, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        {"type": "text", "text": "What is this?"}]}]});
    let a = post(&env, "/messages", &env.key, &body).await;
    a.expect(200);
    let sent = &env.sim_requests().await[0]["json"];
    assert_eq!(
        sent["messages"][0]["content"],
        json!([{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            {"type": "text", "text": "What is this?"}])
    );
    // A malformed image source: 400 in Anthropic's shape, nothing sent or billed.
    let bad = json!({"model": "sim/sim-gpt", "max_tokens": 3, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "data": "x"}}]}]});
    let b = post(&env, "/messages", &env.key, &bad).await;
    assert!(
        anthropic_error(&b, 400, "invalid_request_error").contains("messages.0.content.0.source")
    );
    assert_eq!(env.sim_requests().await.len(), 1);
    assert_eq!(env.usage().len(), 1, "a refused request records no usage");
}

#[tokio::test]
async fn errors_come_in_anthropics_shape_and_nothing_is_billed() {
    let env = llm_env(|_| {}).await;
    env.grant("0.000001");
    let balance = env.balance();
    // No key, a wrong key.
    let r = env
        .client
        .post(env.url("/api/v1/messages"))
        .json(&message_body("Hi", 3))
        .send()
        .await
        .unwrap();
    anthropic_error(&Answer::from(r).await, 401, "authentication_error");
    let a = post(&env, "/messages", "gw_live_nope", &message_body("Hi", 3)).await;
    anthropic_error(&a, 401, "authentication_error");
    // A field rule: max_tokens is required, as Anthropic requires it.
    let mut body = message_body("Hi", 3);
    body.as_object_mut().unwrap().remove("max_tokens");
    let a = post(&env, "/messages", &env.key, &body).await;
    assert!(anthropic_error(&a, 400, "invalid_request_error").contains("max_tokens"));
    // An unknown model: 404.
    let mut body = message_body("Hi", 3);
    body["model"] = json!("sim/nope");
    let a = post(&env, "/messages", &env.key, &body).await;
    anthropic_error(&a, 404, "not_found_error");
    // Not enough credit for the hold: 402.
    let a = post(&env, "/messages", &env.key, &message_body("Hi", 4000)).await;
    anthropic_error(&a, 402, "billing_error");
    // A server tool is not available.
    let mut body = message_body("Hi", 3);
    body["tools"] = json!([{"type": "web_search_20250305", "name": "web_search"}]);
    let a = post(&env, "/messages", &env.key, &body).await;
    assert!(anthropic_error(&a, 400, "invalid_request_error").contains("tools.0"));
    env.assert_no_upstream_call().await;
    // The provider overloaded (529): overloaded_error (503, issue #25's
    // mapping), nothing billed.
    env.grant("1");
    let balance = balance + d("1");
    env.fault(json!({"path": "/v1/chat/completions", "fault": {"status": 529}}))
        .await;
    let a = post(&env, "/messages", &env.key, &message_body("Hi", 3)).await;
    anthropic_error(&a, 503, "overloaded_error");
    nothing_charged(&env, balance).await;
    assert!(env
        .store()
        .ledger(env.user_id)
        .unwrap()
        .iter()
        .all(|l| l.amount > Decimal::ZERO));
}

#[tokio::test]
async fn stop_stream_and_a_hang_up_bill_what_was_streamed() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    env.sim_config(json!({"stream_delay_ms": 100})).await;
    let r = stream(&env, &message_body("Hello there", 50)).await;
    let id = r.headers()["x-stream-id"].to_str().unwrap().to_owned();
    let mut s = r.bytes_stream();
    let mut text = String::new();
    while text.matches("event: content_block_delta").count() < 2 {
        text.push_str(&String::from_utf8_lossy(&s.next().await.unwrap().unwrap()));
    }
    env.api(&format!("/completions/stop-stream/{id}"), json!({}))
        .await
        .expect(200);
    while let Some(c) = s.next().await {
        text.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    let ev = events(&text);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        &names[names.len() - 3..],
        ["content_block_stop", "message_delta", "message_stop"]
    );
    let delta = &ev[ev.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], Value::Null);
    let rows = env.wait_model_usage(1).await;
    assert_eq!(rows[0].ended, "stopped");
    let streamed = names
        .iter()
        .filter(|n| **n == "content_block_delta")
        .count() as i64;
    assert!(
        rows[0].output_tokens >= 2 && rows[0].output_tokens < 50,
        "{:?}",
        rows[0]
    );
    assert_eq!(delta["usage"]["output_tokens"], json!(streamed));
    assert_eq!(
        rows[0].output_tokens, streamed,
        "billed for what was streamed"
    );
    // A hang-up: billed for what was streamed.
    let r = stream(&env, &message_body("Hello there", 50)).await;
    hang_up_after(r, "event: content_block_delta", 3).await;
    hung_up_row(&env, 1, 3, 50).await;
    let usage = env.usage();
    let charged: Decimal = usage
        .iter()
        .filter(|u| u.route_id == "messages")
        .map(|u| u.charged)
        .sum();
    assert!(usage
        .iter()
        .filter(|u| u.route_id == "messages")
        .all(|u| u.charged > Decimal::ZERO));
    let start = std::time::Instant::now();
    while env.store().held(env.user_id).unwrap() != Decimal::ZERO {
        assert!(start.elapsed() < Duration::from_secs(5), "a hold stayed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(env.balance(), d("1") - charged);
}

#[tokio::test]
async fn count_tokens_answers_the_holds_estimate_and_bills_nothing() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let body = json!({"model": "sim/sim-gpt", "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hello there"}], "tools": weather_tool()});
    let a = post(&env, "/messages/count_tokens", &env.key, &body).await;
    a.expect(200);
    assert_eq!(a.json["estimate"], true);
    let n = a.json["input_tokens"].as_u64().unwrap();
    env.assert_no_upstream_call().await;
    assert!(env.usage().iter().all(|u| u.charged.is_zero()));
    assert!(env.store().model_usage_rows().unwrap().is_empty());
    assert_eq!(env.balance(), d("1"));
    // An upper bound of what the provider counts for the same request.
    let mut run = body.clone();
    run["max_tokens"] = json!(3);
    post(&env, "/messages", &env.key, &run).await.expect(200);
    let rows = env.wait_model_usage(1).await;
    assert!(
        n >= rows[0].input_tokens as u64,
        "{n} < {}",
        rows[0].input_tokens
    );
    // Errors in Anthropic's shape.
    let a = post(
        &env,
        "/messages/count_tokens",
        &env.key,
        &json!({"model": "sim/sim-gpt"}),
    )
    .await;
    assert!(anthropic_error(&a, 400, "invalid_request_error").contains("messages"));
}

#[tokio::test]
async fn byok_calls_with_the_callers_key_and_charges_nothing() {
    const BYOK: &str = "sk-caller-own-key-abcdef0123456789";
    let env = llm_env(|_| {}).await;
    env.sim_config(json!({"api_key": BYOK})).await;
    let mut body = message_body("Hello there", 3);
    body["byok_api_key"] = json!(BYOK);
    let a = post(&env, "/messages", &env.key, &body).await;
    a.expect(200);
    assert!(!a.text.contains(BYOK));
    assert_called_with_byok(&env, BYOK).await;
    let text = read_all(stream(&env, &body).await).await;
    assert!(
        text.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
        "{text}"
    );
    assert_byok_billed_nothing(&env, 2).await;
}

/// The official Python SDK (`anthropic`, pinned in scripts/setup-tools.sh)
/// drives the gateway unchanged but for its base URL and key:
/// tests/anthropic_sdk/check.py (plain, streamed, tools, count_tokens).
#[tokio::test]
async fn the_official_anthropic_sdk_drives_messages() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let script = crate::harness::workspace_root().join("tests/anthropic_sdk/check.py");
    let base = env.url("/api");
    let key = env.key.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(script)
            .env("GATEWAY_BASE_URL", base)
            .env("GATEWAY_KEY", key)
            .output()
    })
    .await
    .unwrap()
    .expect("python3 runs tests/anthropic_sdk/check.py (scripts/setup-tools.sh installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "check.py failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("ok plain") && stdout.contains("ok stream") && stdout.contains("ok tools"),
        "{stdout}"
    );
    // What the SDK did was billed: three model calls, a charge each.
    let rows = env.wait_model_usage(4).await;
    assert_eq!(rows.len(), 4);
    assert!(env
        .usage()
        .iter()
        .filter(|u| u.route_id == "messages")
        .all(|u| u.charged > Decimal::ZERO));
}
