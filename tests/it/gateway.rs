//! The general gateway (area B): the providers file and the catalogue,
//! chat and text completions with credits held and settled, streams
//! (relay, stop-stream, time-out, client hang-up) and BYOK.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use runtime::store::{Assets, History, Keys, Ledger};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::*;

fn chat_body(text: &str) -> Value {
    json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": text}]})
}

#[tokio::test]
async fn the_catalogue_lists_every_model_without_authentication() {
    let env = llm_env(|_| {}).await;
    for path in ["/api/v1/models/", "/api/v1/models"] {
        let r = env.client.get(env.url(path)).send().await.unwrap();
        let a = Answer::from(r).await;
        a.expect(200);
        assert_eq!(a.json["object"], "list");
        let data = a.json["data"].as_array().unwrap();
        assert_eq!(data.len(), 4);
        let gpt = &data[0];
        assert_eq!(gpt["id"], "sim/sim-gpt");
        assert_eq!(gpt["object"], "model");
        assert_eq!(gpt["owned_by"], "sim");
        assert_eq!(gpt["type"], "chat");
        assert_eq!(gpt["context_window"], 8192);
        assert_eq!(gpt["pricing"]["input_per_mtok"], "2");
        assert_eq!(gpt["pricing"]["output_per_mtok"], "8");
        assert_eq!(gpt["pricing"]["markup_pct"], "20");
        assert_eq!(data[3]["pricing"]["per_image"], "0.04");
    }
    let r = env
        .client
        .get(env.url("/api/v1/models/sim/sim-embed"))
        .send()
        .await
        .unwrap();
    let a = Answer::from(r).await;
    a.expect(200);
    assert_eq!(
        (a.json["id"].as_str(), a.json["type"].as_str()),
        (Some("sim/sim-embed"), Some("embedding"))
    );
    for path in ["/api/v1/models/sim/nope", "/api/v1/models/nope/sim-gpt"] {
        let a = Answer::from(env.client.get(env.url(path)).send().await.unwrap()).await;
        envelope(&a, 404);
    }
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn trending_ranks_models_by_requests() {
    // The operator shows every tenant's counts (by default: ranks only, edges.rs).
    let env = llm_env(|c| c.trending_global_counts = true).await;
    env.grant("1");
    for _ in 0..2 {
        env.api("/chat/completions", chat_body("hi"))
            .await
            .expect(200);
    }
    env.api(
        "/completions",
        json!({"model": "sim/sim-instruct", "prompt": "Once"}),
    )
    .await
    .expect(200);
    // Needs a key.
    let a = Answer::from(
        env.client
            .get(env.url("/api/v1/models/trending"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    envelope(&a, 401);
    let a = env
        .call_as(
            &env.key,
            "GET",
            &env.url("/api/v1/models/trending?days=1&limit=5"),
            None,
        )
        .await;
    a.expect(200);
    let data = a.json["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "{}", a.text);
    assert_eq!(
        (data[0]["id"].as_str(), data[0]["requests"].as_i64()),
        (Some("sim/sim-gpt"), Some(2))
    );
    assert_eq!(
        (data[1]["id"].as_str(), data[1]["requests"].as_i64()),
        (Some("sim/sim-instruct"), Some(1))
    );
    assert_eq!(data[0]["type"], "chat");
    let a = env
        .call_as(
            &env.key,
            "GET",
            &env.url("/api/v1/models/trending?limit=1"),
            None,
        )
        .await;
    assert_eq!(a.json["data"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn chat_is_forwarded_billed_to_its_usage_and_recorded_before_the_answer() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let mut body = chat_body("Hello there");
    body["temperature"] = json!(0.5);
    body["top_p"] = json!(0.9);
    body["presence_penalty"] = json!(0.1);
    body["additional_params"] = json!({"seed": 42, "model": "not-this"});
    let a = env.api("/chat/completions", body).await;
    a.expect(200);
    assert_eq!(a.json["object"], "chat.completion");
    assert!(a.json["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .contains("simulated"));
    // Upstream: our key, the provider's own model id, parameters passed
    // through, additional_params merged, gateway fields gone.
    let reqs = env.sim_requests().await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["path"], "/v1/chat/completions");
    assert_eq!(
        reqs[0]["headers"]["authorization"],
        format!("Bearer {PROVIDER_KEY}")
    );
    let sent = &reqs[0]["json"];
    assert_eq!(sent["model"], "sim-gpt");
    assert_eq!(
        (
            sent["temperature"].as_f64(),
            sent["top_p"].as_f64(),
            sent["seed"].as_i64()
        ),
        (Some(0.5), Some(0.9), Some(42))
    );
    assert!(sent.get("additional_params").is_none() && sent.get("byok_api_key").is_none());
    // 2 prompt + 12 completion tokens at 2 and 8 USD per million, +20 %.
    let usage = env.usage();
    assert_eq!(usage.len(), 1);
    let u = &usage[0];
    assert_eq!(
        (u.product.as_str(), u.unit.as_str(), u.quantity),
        ("sim/sim-gpt", "tokens", d("14"))
    );
    assert_eq!(u.charged, d("0.00012"));
    assert_eq!(u.request_id, a.header("x-request-id").unwrap());
    assert_eq!(env.balance(), d("0.99988"));
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
    let m = env.store().model_usage_rows().unwrap();
    assert_eq!(
        (
            m[0].input_tokens,
            m[0].output_tokens,
            m[0].counted,
            m[0].byok
        ),
        (2, 12, false, false)
    );
    // Text completions, an alias.
    let a = env
        .api(
            "/completions",
            json!({"model": "sim/sim-instruct", "prompt": "Once upon", "max_tokens": 3}),
        )
        .await;
    a.expect(200);
    assert_eq!(a.json["object"], "text_completion");
    let a = env
        .api(
            "/chat/completions",
            json!({"model": "gpt", "messages": [{"role": "user", "content": "x"}]}),
        )
        .await;
    a.expect(200);
}

#[tokio::test]
async fn model_errors_are_format_2() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let cases = [
        (
            json!({"model": "sim/nope", "messages": [{"role": "user", "content": "x"}]}),
            404,
        ),
        (
            json!({"model": "nope/sim-gpt", "messages": [{"role": "user", "content": "x"}]}),
            404,
        ),
        (
            json!({"model": "sim/sim-embed", "messages": [{"role": "user", "content": "x"}]}),
            400,
        ),
        (json!({"model": "sim/sim-gpt", "messages": []}), 400),
        (json!({"model": "sim/sim-gpt"}), 400),
        (
            json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": "x"}], "temperature": 3}),
            400,
        ),
    ];
    for (body, status) in cases {
        let a = env.api("/chat/completions", body).await;
        envelope(&a, status);
    }
    let a = env
        .api(
            "/completions",
            json!({"model": "sim/sim-gpt", "prompt": "x"}),
        )
        .await;
    envelope(&a, 400);
    env.assert_no_upstream_call().await;
    // An upstream failure: format 2, nothing charged, the hold released.
    env.fault(json!({"path": "/v1/chat/completions", "fault": {"status": 500}}))
        .await;
    let a = env.api("/chat/completions", chat_body("x")).await;
    envelope(&a, 500);
    assert!(env.usage().is_empty());
    assert_eq!(env.balance(), d("1"));
    env.wait_no_holds().await;
}

#[tokio::test]
async fn insufficient_credit_is_402_with_no_upstream_call() {
    let env = llm_env(|_| {}).await;
    let a = env.api("/chat/completions", chat_body("hi")).await;
    assert_eq!(envelope(&a, 402), "Insufficient credits for this request");
    assert_eq!(a.header("x-credits-available"), Some("0.00000000"));
    // 58 prompt-bound tokens (the upstream body's 46 bytes of JSON text,
    // 4 for the message, 8 for the request) and 8192 output tokens:
    // (58*2 + 8192*8) / 1e6 * 1.2
    assert_eq!(a.header("x-credits-required"), Some("0.07878240"));
    env.assert_no_upstream_call().await;
    assert!(env.usage().is_empty());
    // max_tokens bounds the hold: enough credit for it passes.
    env.grant("0.0012");
    let mut body = chat_body("hi");
    body["max_tokens"] = json!(100);
    env.api("/chat/completions", body).await.expect(200);
    // So does OpenAI's newer `max_completion_tokens`.
    env.grant("0.0012");
    let mut body = chat_body("hi");
    body["max_completion_tokens"] = json!(100);
    env.api("/chat/completions", body).await.expect(200);
}

#[tokio::test]
async fn concurrent_requests_never_overdraw_a_balance() {
    let env = llm_env(|_| {}).await;
    // Each request holds (89*2 + 100*8) / 1e6 * 1.2 = 0.0011736 (89: the
    // upstream body's JSON text, 4 for the message, 8 for the request):
    // three fit.
    env.grant("0.004");
    env.sim_config(json!({"stream_delay_ms": 20})).await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (client, url, key) = (
            env.client.clone(),
            env.url("/api/v1/chat/completions"),
            env.key.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let r = client
                .post(url)
                .bearer_auth(key)
                .json(
                    &json!({"model": "sim/sim-gpt", "stream": true, "max_tokens": 100,
                    "messages": [{"role": "user", "content": "hi"}]}),
                )
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let _ = r.bytes().await;
            status
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    let ok = statuses.iter().filter(|s| **s == 200).count();
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 402),
        "{statuses:?}"
    );
    assert_eq!(ok, 3, "{statuses:?}");
    let rows = env.wait_model_usage(3).await;
    assert_eq!(rows.len(), 3);
    assert!(env.balance() >= Decimal::ZERO, "{}", env.balance());
    // 1 prompt + 100 completion tokens counted each: 0.0009624 each.
    assert_eq!(env.balance(), d("0.004") - d("0.0009624") * d("3"));
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
}

/// Reads a streamed answer to its end: (chunks, whole text).
async fn read_all(r: reqwest::Response) -> (usize, String) {
    let mut s = r.bytes_stream();
    let (mut n, mut text) = (0, String::new());
    while let Some(c) = s.next().await {
        n += 1;
        text.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    (n, text)
}

#[tokio::test]
async fn streams_are_relayed_chunk_by_chunk_and_billed() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    env.sim_config(json!({"stream_delay_ms": 30})).await;
    let mut body = chat_body("Hello there");
    body["stream"] = json!(true);
    body["max_tokens"] = json!(10);
    let started = Instant::now();
    let r = env.stream_chat(&env.key, body).await;
    assert_stream_started(&r);
    let mut s = r.bytes_stream();
    let first = s.next().await.unwrap().unwrap();
    // The first event arrives long before the last (10 events, 30 ms apart).
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "{:?}",
        started.elapsed()
    );
    assert!(String::from_utf8_lossy(&first).starts_with("data: {"));
    let mut text = String::from_utf8_lossy(&first).into_owned();
    while let Some(c) = s.next().await {
        text.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    assert!(!text.contains(PROVIDER_KEY));
    let rows = env.wait_model_usage(1).await;
    assert_eq!(
        (
            rows[0].output_tokens,
            rows[0].counted,
            rows[0].ended.as_str()
        ),
        (10, true, "complete")
    );
    // 11 bytes / 4 → 3 prompt tokens counted, 10 output: (3*2 + 10*8) / 1e6 * 1.2
    let u = env.usage();
    assert_eq!(u.len(), 1);
    assert_eq!(u[0].charged, d("0.0001032"));
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
    // The upstream's usage wins when it sends one.
    let mut body = chat_body("Hello there");
    body["stream"] = json!(true);
    body["max_tokens"] = json!(4);
    body["stream_options"] = json!({"include_usage": true});
    let (_, text) = read_all(env.stream_chat(&env.key, body).await).await;
    assert!(text.contains("\"usage\""));
    let rows = env.wait_model_usage(2).await;
    assert_eq!(
        (rows[1].input_tokens, rows[1].output_tokens, rows[1].counted),
        (2, 4, false)
    );
    // Text completions stream too.
    let r = env
        .client
        .post(env.url("/api/v1/completions"))
        .bearer_auth(&env.key)
        .json(&json!({"model": "sim/sim-instruct", "prompt": "Once", "stream": true, "max_tokens": 3}))
        .send()
        .await
        .unwrap();
    assert!(r.headers().contains_key("x-stream-id"));
    let (_, text) = read_all(r).await;
    assert!(text.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn stop_stream_ends_the_stream_promptly_and_bills_what_was_streamed() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    env.sim_config(json!({"stream_delay_ms": 200})).await;
    let mut body = chat_body("Hello there");
    body["stream"] = json!(true);
    body["max_tokens"] = json!(50);
    let r = env.stream_chat(&env.key, body).await;
    let id = r.headers()["x-stream-id"].to_str().unwrap().to_owned();
    let mut s = r.bytes_stream();
    let mut text = String::new();
    while text.matches("data: ").count() < 3 {
        text.push_str(&String::from_utf8_lossy(&s.next().await.unwrap().unwrap()));
    }
    // Another caller cannot stop it.
    let (_, other) = env.new_user("bob@example.com");
    let a = env
        .call_as(
            &other,
            "POST",
            &env.url(&format!("/api/v1/completions/stop-stream/{id}")),
            None,
        )
        .await;
    envelope(&a, 404);
    let stopped_at = Instant::now();
    let a = env
        .api(&format!("/completions/stop-stream/{id}"), json!({}))
        .await;
    a.expect(200);
    assert_eq!(a.json, json!({"success": true}));
    while let Some(c) = s.next().await {
        text.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    assert!(
        stopped_at.elapsed() < Duration::from_millis(500),
        "{:?}",
        stopped_at.elapsed()
    );
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let rows = env.wait_model_usage(1).await;
    assert_eq!(rows[0].ended, "stopped");
    assert!(
        rows[0].output_tokens >= 2 && rows[0].output_tokens < 50,
        "{:?}",
        rows[0]
    );
    // The stop request itself is free (its usage record charges 0).
    let u: Vec<_> = env
        .usage()
        .into_iter()
        .filter(|u| u.product == "sim/sim-gpt")
        .collect();
    assert!(u[0].charged > Decimal::ZERO);
    assert_eq!(env.balance(), d("1") - u[0].charged);
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
    // Finished or unknown: 404.
    let a = env
        .api(&format!("/completions/stop-stream/{id}"), json!({}))
        .await;
    envelope(&a, 404);
    let a = env
        .api("/completions/stop-stream/strm_nope", json!({}))
        .await;
    envelope(&a, 404);
}

#[tokio::test]
async fn an_idle_stream_times_out() {
    let env = llm_env(|c| c.stream_timeout = Duration::from_secs(1)).await;
    env.grant("1");
    // Nothing before the time-out: 504, nothing charged.
    env.fault(json!({"path": "/v1/chat/completions", "fault": {"delay_ms": 2500}}))
        .await;
    let mut body = chat_body("Hello there");
    body["stream"] = json!(true);
    body["max_tokens"] = json!(5);
    let started = Instant::now();
    let a = env.api("/chat/completions", body.clone()).await;
    assert!(envelope(&a, 504).contains("1 s"));
    assert!(started.elapsed() < Duration::from_millis(2000));
    assert!(env.usage().is_empty());
    env.wait_no_holds().await;
    // Idle once streaming: an error event ends the stream; what came is billed.
    env.sim_config(json!({"stream_delay_ms": 2500})).await;
    let r = env.stream_chat(&env.key, body).await;
    assert_eq!(r.status().as_u16(), 200);
    let (_, text) = read_all(r).await;
    assert!(text.contains("\"code\":504"), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let rows = env.wait_model_usage(1).await;
    assert_eq!(rows[0].ended, "timeout");
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
}

#[tokio::test]
async fn a_client_hanging_up_mid_stream_is_billed_for_what_was_streamed() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    env.sim_config(json!({"stream_delay_ms": 100})).await;
    let mut body = chat_body("Hello there");
    body["stream"] = json!(true);
    body["max_tokens"] = json!(50);
    hang_up_after(env.stream_chat(&env.key, body).await, "data: ", 4).await;
    hung_up_row(&env, 0, 3, 50).await;
    let u = env.usage();
    assert!(u[0].charged > Decimal::ZERO);
    assert_eq!(env.balance(), d("1") - u[0].charged);
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
    assert!(env.gw.gateway.streams.is_empty());
}

#[tokio::test]
async fn byok_sends_the_callers_key_charges_nothing_and_stores_nothing() {
    const BYOK: &str = "sk-caller-own-key-abcdef0123456789";
    let env = llm_env(|_| {}).await;
    // The provider now knows only the caller's key; the caller has no credit.
    env.sim_config(json!({"api_key": BYOK})).await;
    let mut body = chat_body("Hello there");
    body["byok_api_key"] = json!(BYOK);
    let a = env.api("/chat/completions", body.clone()).await;
    a.expect(200);
    assert!(!a.text.contains(BYOK));
    assert_called_with_byok(&env, BYOK).await;
    // Streaming too.
    body["stream"] = json!(true);
    let (_, text) = read_all(env.stream_chat(&env.key, body).await).await;
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert_byok_billed_nothing(&env, 2).await;
    // Never stored: not in any file of the data directory.
    for e in std::fs::read_dir(&env.dir.0).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            let bytes = std::fs::read(&p).unwrap();
            assert!(
                !bytes.windows(BYOK.len()).any(|w| w == BYOK.as_bytes()),
                "BYOK key found in {}",
                p.display()
            );
        }
    }
    // Without BYOK the gateway's own key is refused by this provider: 500 (spec §7 format 2).
    env.grant("1");
    let a = env.api("/chat/completions", chat_body("x")).await;
    envelope(&a, 500);
    assert_eq!(env.balance(), d("1"));
}

#[tokio::test]
async fn embeddings_answer_the_spec_shape_for_text_and_openais_for_input() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let a = env
        .api(
            "/embeddings",
            json!({"model": "sim/sim-embed", "text": ["hello world", "bye"]}),
        )
        .await;
    a.expect(200);
    let data = a.json["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(a.json["dimensions"], 16);
    assert_eq!(data[0].as_array().unwrap().len(), 16);
    assert!(data[0][0].is_f64());
    let sent = &env.sim_requests().await[0]["json"];
    assert_eq!(
        (sent["model"].as_str(), sent["input"].clone()),
        (Some("sim-embed"), json!(["hello world", "bye"]))
    );
    assert!(sent.get("text").is_none());
    // OpenAI's shape for `input`; the model may be omitted (the first embedding model).
    let a = env.api("/embeddings", json!({"input": "hello"})).await;
    a.expect(200);
    assert_eq!(a.json["object"], "list");
    assert_eq!(a.json["data"][0]["object"], "embedding");
    assert_eq!(a.json["data"][0]["embedding"].as_array().unwrap().len(), 16);
    let u: Vec<_> = env.usage();
    assert_eq!(
        (u[0].product.as_str(), u[0].unit.as_str()),
        ("sim/sim-embed", "tokens")
    );
    assert!(u[0].charged > Decimal::ZERO);
    for body in [
        json!({}),
        json!({"text": 3}),
        json!({"text": []}),
        json!({"text": "x", "model": "sim/sim-gpt"}),
    ] {
        let a = env.api("/embeddings", body).await;
        envelope(&a, 400);
    }
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
}

#[tokio::test]
async fn generated_images_are_copied_and_answered_with_our_urls() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let a = env
        .api(
            "/images/generations",
            json!({"model": "sim/sim-image", "prompt": "a cat", "size": "256x256", "n": 2}),
        )
        .await;
    a.expect(200);
    let data = a.json["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    let gw = env.gw.url();
    for item in data {
        let url = item["url"].as_str().unwrap();
        assert!(url.starts_with(&gw), "{url}");
        assert!(item["expires_at"].is_string());
        let r = env.client.get(url).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200);
        assert_eq!(&r.bytes().await.unwrap()[..4], b"\x89PNG");
    }
    assert_eq!(env.object_keys().len(), 2);
    let assets = env.store().assets().unwrap();
    assert_eq!(assets.len(), 2);
    assert_eq!(assets[0].class, "image");
    // 2 images at 0.04 USD, +20 %.
    let u = env.usage();
    assert_eq!(
        (u[0].unit.as_str(), u[0].quantity, u[0].charged),
        ("images", d("2"), d("0.096"))
    );
    assert_eq!(env.balance(), d("0.904"));
    for size in ["big", "0x10", "1024x"] {
        let a = env
            .api(
                "/images/generations",
                json!({"prompt": "a cat", "size": size}),
            )
            .await;
        envelope(&a, 400);
    }
    let a = env
        .api("/images/generations", json!({"prompt": "a cat", "n": 11}))
        .await;
    envelope(&a, 400);
}

#[tokio::test]
async fn a_key_limited_to_other_models_is_403_with_no_upstream_call() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let hash = runtime::auth::hash_key(&env.key);
    assert!(env
        .store()
        .set_key_models(&hash, Some("sim/sim-instruct, sim/sim-embed"))
        .unwrap());
    let a = env.api("/chat/completions", chat_body("hi")).await;
    assert!(envelope(&a, 403).contains("sim/sim-gpt"));
    env.assert_no_upstream_call().await;
    assert!(env.usage().is_empty());
    env.api(
        "/completions",
        json!({"model": "sim/sim-instruct", "prompt": "x"}),
    )
    .await
    .expect(200);
    // `provider/*` allows the provider's every model (this user has no credit: 402, past the check).
    let (id, key) = env.new_user("carol@example.com");
    env.store()
        .set_key_models(&runtime::auth::hash_key(&key), Some("sim/*"))
        .unwrap();
    let url = env.url("/api/v1/chat/completions");
    let a = env.call_as(&key, "POST", &url, Some(chat_body("hi"))).await;
    envelope(&a, 402);
    env.store().grant_credit(id, d("1"), None).unwrap();
    env.call_as(&key, "POST", &url, Some(chat_body("hi")))
        .await
        .expect(200);
}

#[tokio::test]
async fn a_hang_up_while_the_provider_is_silent_is_billed_at_once() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    // The first event comes at once, the next after 3 s.
    env.sim_config(json!({"stream_delay_ms": 3000})).await;
    let mut body = chat_body("Hello there");
    body["stream"] = json!(true);
    body["max_tokens"] = json!(5);
    let r = env.stream_chat(&env.key, body).await;
    let mut s = r.bytes_stream();
    s.next().await.unwrap().unwrap();
    let hung_up = Instant::now();
    drop(s);
    let rows = env.wait_model_usage(1).await;
    assert_eq!(rows[0].ended, "disconnected");
    assert!(
        hung_up.elapsed() < Duration::from_millis(2000),
        "{:?}",
        hung_up.elapsed()
    );
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
}

/// Found by schemathesis: a BYOK key with a control character cannot be
/// sent in a header; it was answered 502 "network error", a 5xx of the
/// gateway's own making. It is the caller's mistake: 400, no upstream call,
/// the key not echoed.
#[tokio::test]
async fn a_byok_key_no_header_can_carry_is_a_400_without_an_upstream_call() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    for path in ["/chat/completions", "/completions", "/embeddings"] {
        let mut body = match path {
            "/chat/completions" => chat_body("Hello"),
            "/completions" => json!({"model": "sim/sim-instruct", "prompt": "Hello"}),
            _ => json!({"model": "sim/sim-embed", "input": "Hello"}),
        };
        body["byok_api_key"] = json!("sk-line\nbreak");
        let a = env.api(path, body).await;
        envelope(&a, 400);
        assert!(a.text.contains("byok_api_key"), "{}", a.text);
        assert!(!a.text.contains("sk-line"), "{}", a.text);
    }
    assert!(env.sim_requests().await.is_empty());
    assert_eq!(env.balance(), d("1"));
}

/// Found by schemathesis: a BYOK key the provider refuses (401) was
/// answered 502 "refused the gateway's credentials", a 5xx blaming the
/// gateway for the caller's key. It is the caller's to fix: 400, nothing
/// charged, the key not echoed.
#[tokio::test]
async fn a_byok_key_the_provider_refuses_is_a_400_naming_byok_api_key() {
    let env = llm_env(|_| {}).await;
    env.sim_config(json!({"api_key": "sk-the-only-good-key"}))
        .await;
    env.grant("1");
    for stream in [false, true] {
        let mut body = chat_body("Hello");
        body["byok_api_key"] = json!("sk-wrong-key-0123456789");
        body["stream"] = json!(stream);
        let a = env.api("/chat/completions", body).await;
        let message = envelope(&a, 400);
        assert!(message.contains("byok_api_key"), "{message}");
        assert!(!a.text.contains("sk-wrong-key"), "{}", a.text);
    }
    assert_eq!(env.balance(), d("1"));
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
}
