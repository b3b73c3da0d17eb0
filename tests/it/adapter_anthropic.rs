//! The `anthropic` provider kind over HTTP: OpenAI-shaped chat through the
//! simulator's Anthropic Messages API (`/v1/messages`, `x-api-key`,
//! `anthropic-version`), answers and streams translated back, tools,
//! images, finish reasons, provider errors, and billing of the four token
//! counts (input, output, cache read, cache write) at their four prices.

use futures_util::StreamExt;
use runtime::store::History;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::{
    assert_charge_is_four_counts, assert_stream_started, d, envelope, hang_up_after, native_env,
    nothing_charged, Env, PROVIDER_KEY,
};

const MODEL: &str = "claude/claude-sim";

fn chat(text: &str) -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": text}]})
}

fn weather_tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
}

/// The `data:` events of an OpenAI stream, `[DONE]` left out; whether it
/// ended with `[DONE]`.
pub fn chunks(text: &str) -> (Vec<Value>, bool) {
    let datas: Vec<&str> = text
        .split("\n\n")
        .filter_map(|e| e.trim().strip_prefix("data: "))
        .collect();
    let done = datas.last() == Some(&"[DONE]");
    let v = datas
        .iter()
        .filter(|d| **d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    (v, done)
}

/// The streamed content of chunks.
pub fn content(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect()
}

pub async fn read_stream(env: &Env, body: Value) -> String {
    let r = env.stream_chat(&env.key, body).await;
    assert_stream_started(&r);
    String::from_utf8(r.bytes().await.unwrap().to_vec()).unwrap()
}

#[tokio::test]
async fn plain_chat_is_translated_both_ways_and_billed_at_the_four_prices() {
    let env = native_env().await;
    env.grant("1");
    let mut body = chat("Hello there");
    body["messages"] = json!([{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello there"}]);
    body["max_tokens"] = json!(5);
    body["temperature"] = json!(0.5);
    body["top_p"] = json!(0.9);
    let a = env.api("/chat/completions", body).await;
    a.expect(200);
    assert_eq!(a.json["object"], "chat.completion");
    let choice = &a.json["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    let text = choice["message"]["content"].as_str().unwrap();
    assert_eq!(text.split(' ').count(), 5, "{text}");
    assert_eq!(choice["finish_reason"], "length");
    // What the provider was sent: its own path, headers and shape.
    let reqs = env.sim_requests().await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["path"], "/v1/messages");
    assert_eq!(reqs[0]["headers"]["x-api-key"], PROVIDER_KEY);
    assert_eq!(reqs[0]["headers"]["anthropic-version"], "2023-06-01");
    assert!(reqs[0]["headers"].get("authorization").is_none());
    let sent = &reqs[0]["json"];
    assert_eq!(sent["system"], "Be brief.");
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Hello there"}]}])
    );
    assert_eq!(
        (
            &sent["model"],
            &sent["max_tokens"],
            &sent["temperature"],
            &sent["top_p"]
        ),
        (&json!("claude-sim"), &json!(5), &json!(0.5), &json!(0.9))
    );
    let m = assert_charge_is_four_counts(&env, 0).await;
    assert_eq!(
        a.json["usage"]["prompt_tokens"].as_i64(),
        Some(m.input_tokens)
    );
    assert_eq!((m.output_tokens, m.counted), (5, false));
    assert!(m.input_tokens > 0);
    assert_eq!(
        a.json["usage"]["cost"].to_string(),
        format!("{:.8}", env.usage()[0].charged)
    );
    // No max_tokens: the model's default (max_output_tokens = 64) is sent.
    env.clear_sim_log().await;
    env.api("/chat/completions", chat("Hi")).await.expect(200);
    assert_eq!(env.sim_requests().await[0]["json"]["max_tokens"], 64);
}

#[tokio::test]
async fn every_finish_reason_maps_to_openais() {
    let env = native_env().await;
    env.grant("1");
    let finish = |a: &crate::harness::Answer| a.json["choices"][0]["finish_reason"].clone();
    // end_turn → stop (12 words, under the 64 of max_tokens).
    let a = env.api("/chat/completions", chat("Hello there")).await;
    assert_eq!(finish(a.expect(200)), "stop");
    // max_tokens → length.
    let mut b = chat("Hello there");
    b["max_tokens"] = json!(3);
    assert_eq!(
        finish(env.api("/chat/completions", b).await.expect(200)),
        "length"
    );
    // stop_sequence → stop, the text cut before it; `stop` sent as stop_sequences.
    let mut b = chat("Hello there");
    b["stop"] = json!("reply");
    let a = env.api("/chat/completions", b).await;
    assert_eq!(finish(a.expect(200)), "stop");
    assert_eq!(
        a.json["choices"][0]["message"]["content"],
        "This is a simulated "
    );
    let reqs = env.sim_requests().await;
    assert_eq!(reqs[2]["json"]["stop_sequences"], json!(["reply"]));
    // tool_use → tool_calls.
    let mut b = chat("What does get_weather say?");
    b["tools"] = weather_tools();
    assert_eq!(
        finish(env.api("/chat/completions", b).await.expect(200)),
        "tool_calls"
    );
    for i in 0..4 {
        assert_charge_is_four_counts(&env, i).await;
    }
}

#[tokio::test]
async fn tools_round_trip_call_result_answer() {
    let env = native_env().await;
    env.grant("1");
    let mut b = chat("What does get_weather say for Paris?");
    b["tools"] = weather_tools();
    b["tool_choice"] = json!({"type": "function", "function": {"name": "get_weather"}});
    let a = env.api("/chat/completions", b.clone()).await;
    a.expect(200);
    let call = a.json["choices"][0]["message"]["tool_calls"][0].clone();
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "sim"}));
    let id = call["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("toolu_"), "{id}");
    let sent = &env.sim_requests().await[0]["json"];
    assert_eq!(sent["tools"][0]["name"], "get_weather");
    assert_eq!(
        sent["tools"][0]["input_schema"]["required"],
        json!(["city"])
    );
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "tool", "name": "get_weather"})
    );
    // The result goes back; the answer uses it.
    let mut follow = b.clone();
    follow.as_object_mut().unwrap().remove("tool_choice");
    follow["messages"] = json!([
        {"role": "user", "content": "What does get_weather say for Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": id, "content": "sunny and warm"}]);
    let a = env.api("/chat/completions", follow).await;
    a.expect(200);
    let text = a.json["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        text.starts_with("Using the tool result: sunny and warm"),
        "{text}"
    );
    assert_eq!(a.json["choices"][0]["finish_reason"], "stop");
    let sent = &env.sim_requests().await[1]["json"];
    assert_eq!(sent["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(
        sent["messages"][1]["content"][0]["input"],
        json!({"city": "sim"})
    );
    assert_eq!(
        sent["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": id, "content": "sunny and warm"})
    );
    // Streamed: the call arrives as argument deltas.
    let mut s = b.clone();
    s["stream"] = json!(true);
    let (cs, done) = chunks(&read_stream(&env, s).await);
    assert!(done);
    let calls: Vec<&Value> = cs
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    assert!(calls.len() > 2, "{calls:?}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let args: String = calls
        .iter()
        .filter_map(|c| c["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({"city": "sim"})
    );
    let last = cs
        .iter()
        .rev()
        .find(|c| !c["choices"][0]["finish_reason"].is_null())
        .unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    for i in 0..3 {
        assert_charge_is_four_counts(&env, i).await;
    }
}

#[tokio::test]
async fn images_in_content_go_as_base64_and_url_sources() {
    let env = native_env().await;
    env.grant("1");
    let mut b = chat("x");
    b["messages"] = json!([{"role": "user", "content": [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]}]);
    env.api("/chat/completions", b).await.expect(200);
    let sent = &env.sim_requests().await[0]["json"]["messages"][0]["content"];
    assert_eq!(
        sent[1]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="})
    );
    assert_eq!(
        sent[2]["source"],
        json!({"type": "url", "url": "https://example.com/cat.jpg"})
    );
    assert_charge_is_four_counts(&env, 0).await;
    // A data URL that is not base64: 400, nothing sent or charged.
    env.clear_sim_log().await;
    let mut b = chat("x");
    b["messages"] = json!([{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png,raw"}}]}]);
    envelope(&env.api("/chat/completions", b).await, 400);
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn streamed_chat_becomes_openai_chunks_billed_at_the_reported_usage() {
    let env = native_env().await;
    env.grant("1");
    let mut b = chat("Hello there");
    b["stream"] = json!(true);
    b["stream_options"] = json!({"include_usage": true});
    let text = read_stream(&env, b.clone()).await;
    let (cs, done) = chunks(&text);
    assert!(done, "{text}");
    assert!(cs.iter().all(|c| c.get("error").is_none()), "{text}");
    assert_eq!(cs[0]["object"], "chat.completion.chunk");
    assert_eq!(cs[0]["choices"][0]["delta"]["role"], "assistant");
    let streamed = content(&cs);
    assert_eq!(streamed.split(' ').count(), 12, "{streamed}");
    let usage = cs.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    let m = assert_charge_is_four_counts(&env, 0).await;
    assert_eq!((m.output_tokens, m.counted), (12, false));
    assert_eq!(usage["usage"]["completion_tokens"], 12);
    assert_eq!(
        usage["usage"]["prompt_tokens"].as_i64(),
        Some(m.input_tokens)
    );
    assert_eq!(
        usage["usage"]["cost"].to_string(),
        format!("{:.8}", env.usage()[0].charged)
    );
    // Without include_usage: no usage chunk, still billed as reported.
    b.as_object_mut().unwrap().remove("stream_options");
    let (cs, done) = chunks(&read_stream(&env, b).await);
    assert!(done && cs.iter().all(|c| c.get("usage").is_none()));
    let m = assert_charge_is_four_counts(&env, 1).await;
    assert_eq!((m.output_tokens, m.counted), (12, false));
}

#[tokio::test]
async fn cache_reads_and_writes_are_billed_at_their_prices_not_as_input() {
    let env = native_env().await;
    env.grant("1");
    let long = "You are a careful assistant. ".repeat(20);
    let mut b = chat("Hello there");
    b["messages"] = json!([
        {"role": "system", "content": [{"type": "text", "text": long, "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "Hello there"}]);
    // First: written to the cache.
    let a = env.api("/chat/completions", b.clone()).await;
    a.expect(200);
    let first = assert_charge_is_four_counts(&env, 0).await;
    assert!(first.cache_write_tokens > 0, "{first:?}");
    assert_eq!(first.cache_read_tokens, 0);
    assert_eq!(
        a.json["usage"]["prompt_tokens"].as_i64(),
        Some(first.input_tokens + first.cache_write_tokens)
    );
    assert_eq!(
        a.json["usage"]["prompt_tokens_details"]["cache_creation_tokens"].as_i64(),
        Some(first.cache_write_tokens)
    );
    // Then read from it, streamed.
    let mut s = b.clone();
    s["stream"] = json!(true);
    let (_, done) = chunks(&read_stream(&env, s).await);
    assert!(done);
    let second = assert_charge_is_four_counts(&env, 1).await;
    assert_eq!(
        second.cache_read_tokens, first.cache_write_tokens,
        "{second:?}"
    );
    assert_eq!(second.cache_write_tokens, 0);
    assert_eq!(second.input_tokens, first.input_tokens);
    assert!(env.usage()[1].charged < env.usage()[0].charged);
}

/// (The general gateway's envelope answers a provider's failure and its
/// refusal of the gateway's key as 500, spec §7.)
#[tokio::test]
async fn provider_errors_map_to_the_gateways_statuses_and_charge_nothing() {
    let env = native_env().await;
    env.grant("1");
    for (status, want) in [(529, 503), (429, 429), (400, 400), (401, 500), (500, 500)] {
        env.fault(json!({"path": "/v1/messages", "fault": {"status": status}}))
            .await;
        let a = env.api("/chat/completions", chat("Hello there")).await;
        let message = envelope(&a, want);
        assert!(!message.contains(PROVIDER_KEY), "{message}");
    }
    nothing_charged(&env, d("1")).await;
    assert!(env.store().model_usage_rows().unwrap().is_empty());
}

#[tokio::test]
async fn an_error_event_mid_stream_ends_the_stream_and_bills_what_was_streamed() {
    let env = native_env().await;
    env.grant("1");
    env.fault(json!({"path": "/v1/messages", "fault": {"stream_error": 529, "after": 3}}))
        .await;
    let mut b = chat("Hello there");
    b["stream"] = json!(true);
    let text = read_stream(&env, b).await;
    let (cs, done) = chunks(&text);
    assert!(done, "{text}");
    let err = cs.iter().find(|c| c.get("error").is_some()).unwrap();
    assert_eq!(err["error"]["code"], 503);
    assert_eq!(content(&cs).split(' ').count(), 3);
    let m = assert_charge_is_four_counts(&env, 0).await;
    // The input as reported at the start; the output counted.
    assert_eq!((m.output_tokens, m.counted), (3, true));
    assert!(m.input_tokens > 0);
}

#[tokio::test]
async fn a_stopped_stream_and_a_hang_up_bill_what_was_streamed_at_the_four_prices() {
    a_stop_and_a_hang_up_bill_what_was_streamed(&native_env().await, chat("Hello there")).await;
}

/// A stream of `chat` (a native model's, 12 words streamed 100 ms apart)
/// stopped after its second content chunk, then one hung up after its
/// third: each billed what was streamed at the four prices (ended
/// `stopped` / `disconnected`), the holds released. Shared by the native
/// adapters' tests.
pub async fn a_stop_and_a_hang_up_bill_what_was_streamed(env: &Env, chat: Value) {
    env.grant("1");
    env.sim_config(json!({"stream_delay_ms": 100})).await;
    let mut b = chat;
    b["stream"] = json!(true);
    let r = env.stream_chat(&env.key, b.clone()).await;
    let id = r.headers()["x-stream-id"].to_str().unwrap().to_owned();
    let mut s = r.bytes_stream();
    let mut text = String::new();
    while text.matches("\"content\"").count() < 2 {
        text.push_str(&String::from_utf8_lossy(&s.next().await.unwrap().unwrap()));
    }
    env.api(&format!("/completions/stop-stream/{id}"), json!({}))
        .await
        .expect(200);
    while let Some(c) = s.next().await {
        text.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    let (cs, done) = chunks(&text);
    assert!(done, "{text}");
    let streamed = cs
        .iter()
        .filter(|c| c["choices"][0]["delta"]["content"].is_string())
        .count() as i64;
    let m = assert_charge_is_four_counts(env, 0).await;
    assert_eq!(m.ended, "stopped");
    assert_eq!(m.output_tokens, streamed);
    assert!(m.input_tokens > 0 && streamed < 12, "{m:?}");
    // A hang-up.
    let r = env.stream_chat(&env.key, b).await;
    hang_up_after(r, "\"content\"", 3).await;
    let m = assert_charge_is_four_counts(env, 1).await;
    assert_eq!(m.ended, "disconnected");
    assert!(m.output_tokens >= 3 && m.output_tokens < 12, "{m:?}");
    assert!(m.input_tokens > 0);
    env.wait_no_holds().await;
    let charged: Decimal = env.usage().iter().map(|u| u.charged).sum();
    assert_eq!(env.balance(), d("1") - charged);
}

#[tokio::test]
async fn the_messages_front_door_works_over_an_anthropic_model() {
    let env = native_env().await;
    env.grant("1");
    let body = json!({"model": MODEL, "max_tokens": 5,
        "messages": [{"role": "user", "content": "Hello there"}]});
    let r = env
        .client
        .post(env.url("/api/v1/messages"))
        .header("x-api-key", &env.key)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    let a = crate::harness::Answer::from(r).await;
    a.expect(200);
    assert_eq!(a.json["type"], "message");
    assert_eq!(a.json["stop_reason"], "max_tokens");
    assert_eq!(
        a.json["content"][0]["text"]
            .as_str()
            .unwrap()
            .split(' ')
            .count(),
        5
    );
    let m = assert_charge_is_four_counts(&env, 0).await;
    assert_eq!(
        a.json["usage"]["input_tokens"].as_i64(),
        Some(m.input_tokens)
    );
    assert_eq!(a.json["usage"]["output_tokens"], 5);
    let mut s = body.clone();
    s["stream"] = json!(true);
    let r = env
        .client
        .post(env.url("/api/v1/messages"))
        .header("x-api-key", &env.key)
        .json(&s)
        .send()
        .await
        .unwrap();
    let text = String::from_utf8(r.bytes().await.unwrap().to_vec()).unwrap();
    assert!(text.contains("event: message_start"), "{text}");
    assert!(text.contains("event: message_stop"), "{text}");
    let m = assert_charge_is_four_counts(&env, 1).await;
    assert_eq!((m.output_tokens, m.counted), (5, false));
}

#[tokio::test]
async fn text_completions_go_through_the_messages_api_too() {
    let env = native_env().await;
    env.grant("1");
    let body = json!({"model": "claude/claude-instruct", "prompt": "Hello there", "max_tokens": 4});
    let a = env.api("/completions", body.clone()).await;
    a.expect(200);
    assert_eq!(a.json["object"], "text_completion");
    assert_eq!(
        a.json["choices"][0]["text"]
            .as_str()
            .unwrap()
            .split(' ')
            .count(),
        4
    );
    assert_eq!(a.json["choices"][0]["finish_reason"], "length");
    let sent = &env.sim_requests().await[0];
    assert_eq!(sent["path"], "/v1/messages");
    assert_eq!(
        sent["json"]["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Hello there"}]}])
    );
    assert_charge_is_four_counts(&env, 0).await;
    let mut s = body;
    s["stream"] = json!(true);
    let r = env
        .client
        .post(env.url("/api/v1/completions"))
        .bearer_auth(&env.key)
        .json(&s)
        .send()
        .await
        .unwrap();
    let text = String::from_utf8(r.bytes().await.unwrap().to_vec()).unwrap();
    let (cs, done) = chunks(&text);
    assert!(done, "{text}");
    let streamed: String = cs
        .iter()
        .filter_map(|c| c["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(streamed.split(' ').count(), 4, "{text}");
    let m = assert_charge_is_four_counts(&env, 1).await;
    assert_eq!((m.output_tokens, m.counted), (4, false));
}

/// The official Python SDK (tests/anthropic_sdk/check.py) drives
/// `/api/v1/messages` over an `anthropic` model: both translations in a row
/// (Anthropic's shape → chat → Anthropic's shape upstream, and back).
#[tokio::test]
async fn the_official_anthropic_sdk_drives_messages_over_an_anthropic_model() {
    let env = native_env().await;
    env.grant("1");
    let script = crate::harness::workspace_root().join("tests/anthropic_sdk/check.py");
    let base = env.url("/api");
    let key = env.key.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(script)
            .env("GATEWAY_BASE_URL", base)
            .env("GATEWAY_KEY", key)
            .env("GATEWAY_MODEL", MODEL)
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
    let rows = env.wait_model_usage(4).await;
    assert!(
        rows.iter().all(|r| r.model == MODEL && !r.counted),
        "{rows:?}"
    );
    for i in 0..4 {
        assert_charge_is_four_counts(&env, i).await;
    }
}
