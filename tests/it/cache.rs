//! The exact response cache (#28), over HTTP against the simulator: a hit
//! makes no upstream call (the simulator's request log stays empty), keys
//! ignore key order and whitespace, entries stay within their user, expire,
//! are refreshed, replay streams as they came and answer the other form,
//! survive a Redis that stops (bypassed) and are shared by two instances
//! through Redis; hits are billed and recorded as configured.

use std::time::{Duration, Instant};

use runtime::store::Ledger;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::*;

/// The test providers file with `sim-gpt` cached for a minute, a hit
/// costing half the original.
fn cached_toml(url: &str) -> String {
    providers_toml(url).replacen(
        "output_per_mtok = \"8.00\"\n",
        "output_per_mtok = \"8.00\"\ncache_ttl_secs = 60\ncache_hit_price_pct = \"50\"\n",
        1,
    )
}

fn chat_body(text: &str) -> Value {
    json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": text}], "max_tokens": 12})
}

/// `POST /api/v1` + `path` with `key`, the raw `body` and `headers`.
async fn post(env: &Env, key: &str, path: &str, body: &str, headers: &[(&str, &str)]) -> Answer {
    let mut rb = env
        .client
        .post(env.url(&format!("/api/v1{path}")))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    Answer::from(rb.send().await.unwrap()).await
}

async fn chat(env: &Env, key: &str, body: &Value, headers: &[(&str, &str)]) -> Answer {
    post(env, key, "/chat/completions", &body.to_string(), headers).await
}

/// The data payloads of a streamed answer, in order.
fn events(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|e| e.trim().strip_prefix("data:").map(|d| d.trim().to_owned()))
        .collect()
}

/// The text of a stream's content deltas.
fn streamed_text(evs: &[String]) -> String {
    evs.iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// Asserts the answer's cache header and how many upstream calls were
/// made since the log was last cleared (then clears it).
#[track_caller]
fn cache_state(a: &Answer, want: &str) {
    a.expect(200);
    assert_eq!(a.header("x-gateway-cache"), Some(want), "{}", a.text);
}

async fn upstream_calls(env: &Env) -> usize {
    let n = env
        .sim_requests()
        .await
        .iter()
        .filter(|r| r["path"].as_str().is_some_and(|p| p.starts_with("/v1/")))
        .count();
    env.clear_sim_log().await;
    n
}

#[tokio::test]
async fn a_hit_skips_the_provider_ignores_key_order_and_is_billed_as_configured() {
    let env = env_with_providers(cached_toml, |_| {}).await;
    env.grant("10");
    let first = chat(&env, &env.key, &chat_body("tell me a story"), &[]).await;
    cache_state(&first, "MISS");
    assert_eq!(upstream_calls(&env).await, 1);
    // The same request, keys in another order, other whitespace, `user`
    // and `stream: false` added: the same entry.
    let same = "{ \"max_tokens\" : 12, \"user\": \"someone\", \"stream\": false,\n  \"messages\" : [ {\"content\": \"tell me a story\", \"role\": \"user\"} ],\n \"model\": \"sim/sim-gpt\" }";
    let hit = post(&env, &env.key, "/chat/completions", same, &[]).await;
    cache_state(&hit, "HIT");
    assert_eq!(upstream_calls(&env).await, 0, "a hit calls no provider");
    assert_eq!(hit.json["choices"], first.json["choices"]);
    assert_eq!(hit.json["id"], first.json["id"]);
    // Another request is a miss.
    let other = chat(&env, &env.key, &chat_body("tell me another"), &[]).await;
    cache_state(&other, "MISS");
    assert_eq!(upstream_calls(&env).await, 1);

    // Records: the hit has its audit, usage and token rows, marked, no
    // upstream status, and half the original's charge.
    let rows = env.wait_model_usage(3).await;
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].ended, "complete");
    assert_eq!(rows[1].ended, "cache_hit");
    assert_eq!(
        (rows[1].input_tokens, rows[1].output_tokens),
        (rows[0].input_tokens, rows[0].output_tokens)
    );
    let usage = env.usage();
    assert_eq!(usage.len(), 3);
    assert!(usage[0].charged > Decimal::ZERO);
    assert_eq!(usage[1].charged, usage[0].charged / Decimal::TWO);
    assert_eq!(
        hit.json["usage"]["cost"].to_string(),
        format!("{:.8}", usage[1].charged)
    );
    let hit_audit = env
        .audit()
        .into_iter()
        .find(|a| a.request_id == usage[1].request_id)
        .expect("the hit's audit record");
    assert_eq!((hit_audit.status, hit_audit.upstream_status), (200, None));
    env.wait_no_holds().await;
    let charged: Decimal = usage.iter().map(|u| u.charged).sum();
    assert_eq!(env.balance(), Decimal::TEN - charged);

    let metrics = env.client.get(env.url("/metrics")).send().await.unwrap();
    let text = metrics.text().await.unwrap();
    for m in [
        "gateway_cache_hits_total",
        "gateway_cache_misses_total",
        "gateway_cache_stores_total",
        "gateway_cache_bytes",
    ] {
        assert!(text.contains(m), "{m} missing from /metrics");
    }
}

/// A hit is held like any model request: a balance that does not cover
/// its price answers 402, calls nothing and writes no charge; with credit,
/// the same request is a hit billed at its price.
#[tokio::test]
async fn a_hit_the_balance_cannot_cover_is_402_and_charges_nothing() {
    let env = env_with_providers(cached_toml, |_| {}).await;
    env.grant("10");
    let body = chat_body("a story worth keeping");
    cache_state(&chat(&env, &env.key, &body, &[]).await, "MISS");
    env.wait_no_holds().await;
    let first = env.usage();
    assert_eq!(first.len(), 1);
    let hit_price = first[0].charged / Decimal::TWO;
    assert!(hit_price > Decimal::ZERO);
    // Less than the hit's price left.
    let left = (hit_price / Decimal::TWO).round_dp(8);
    let set = format!(
        "UPDATE credit_balances SET balance = '{left}' WHERE user_id = {}",
        env.user_id
    );
    own_sql(&env, &set, &set).await;
    assert_eq!(env.balance(), left);
    env.clear_sim_log().await;

    let refused = chat(&env, &env.key, &body, &[]).await;
    refused.expect(402);
    assert_eq!(upstream_calls(&env).await, 0, "a refused hit calls nothing");
    env.wait_no_holds().await;
    assert_eq!(env.usage().len(), 1, "a refused hit is charged nothing");
    assert_eq!(env.balance(), left, "a hit never overdraws a balance");

    env.grant("1");
    let hit = chat(&env, &env.key, &body, &[]).await;
    cache_state(&hit, "HIT");
    assert_eq!(upstream_calls(&env).await, 0);
    env.wait_no_holds().await;
    let usage = env.usage();
    assert_eq!(usage.len(), 2);
    assert_eq!(usage[1].charged, hit_price);
    assert_eq!(env.balance(), left + Decimal::ONE - hit_price);
}

/// A hit of an answer billed with the provider's cache writes (then reads)
/// is billed the original's four counts, each at its price (here at 100 %:
/// exactly the original's charge), not its whole prompt as input.
#[tokio::test]
async fn a_hit_is_billed_the_four_token_counts_of_its_original() {
    let toml = |url: &str| {
        native_toml(url).replacen(
            "cache_write_per_mtok = \"3.75\"\n",
            "cache_write_per_mtok = \"3.75\"\ncache_ttl_secs = 60\ncache_hit_price_pct = \"100\"\n",
            1,
        )
    };
    let env = env_with_providers(toml, |_| {}).await;
    env.grant("1");
    let long = "You are a careful assistant. ".repeat(20);
    let body = json!({"model": "claude/claude-sim", "messages": [
        {"role": "system", "content": [{"type": "text", "text": long, "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "Hello there"}]});
    for (stream, want) in [(false, "MISS"), (false, "HIT"), (true, "HIT")] {
        let mut b = body.clone();
        b["stream"] = json!(stream);
        let a = chat(&env, &env.key, &b, &[]).await;
        cache_state(&a, want);
    }
    let rows = env.wait_model_usage(3).await;
    let first = assert_charge_is_four_counts(&env, 0).await;
    assert!(first.cache_write_tokens > 0, "{first:?}");
    for (i, hit) in rows.iter().enumerate().skip(1) {
        assert_eq!(hit.ended, "cache_hit");
        assert_eq!(
            (
                hit.input_tokens,
                hit.output_tokens,
                hit.cache_read_tokens,
                hit.cache_write_tokens
            ),
            (
                first.input_tokens,
                first.output_tokens,
                first.cache_read_tokens,
                first.cache_write_tokens
            ),
            "hit {i}"
        );
        assert_charge_is_four_counts(&env, i).await;
    }
    let usage = env.usage();
    assert_eq!(usage[1].charged, usage[0].charged);
    assert_eq!(usage[2].charged, usage[0].charged);
}

#[tokio::test]
async fn another_users_identical_request_is_a_miss_unless_the_scope_is_global() {
    let env = env_with_providers(cached_toml, |_| {}).await;
    env.grant("10");
    let (bob, bob_key) = env.new_user("bob@example.com");
    env.store()
        .grant_credit(bob, Decimal::TEN, Some("test"))
        .unwrap();
    let body = chat_body("a secret of alice");
    cache_state(&chat(&env, &env.key, &body, &[]).await, "MISS");
    cache_state(&chat(&env, &bob_key, &body, &[]).await, "MISS");
    assert_eq!(upstream_calls(&env).await, 2, "no answer crosses users");
    cache_state(&chat(&env, &bob_key, &body, &[]).await, "HIT");
    // BYOK: only within the same key.
    let byok = |k: &str| {
        let mut b = chat_body("byok question");
        b["byok_api_key"] = json!(k);
        b
    };
    cache_state(
        &chat(&env, &env.key, &byok(PROVIDER_KEY), &[]).await,
        "MISS",
    );
    cache_state(
        &chat(&env, &env.key, &chat_body("byok question"), &[]).await,
        "MISS",
    );
    cache_state(&chat(&env, &env.key, &byok(PROVIDER_KEY), &[]).await, "HIT");
    env.clear_sim_log().await;

    let global = env_with_providers(cached_toml, |c| {
        c.cache_scope = runtime::cache::Scope::Global;
    })
    .await;
    global.grant("10");
    let (carol, carol_key) = global.new_user("carol@example.com");
    global
        .store()
        .grant_credit(carol, Decimal::TEN, Some("test"))
        .unwrap();
    cache_state(&chat(&global, &global.key, &body, &[]).await, "MISS");
    cache_state(&chat(&global, &carol_key, &body, &[]).await, "HIT");
    assert_eq!(upstream_calls(&global).await, 1);
}

#[tokio::test]
async fn per_request_headers_ttl_expiry_refresh_off_and_bad_values() {
    // The default providers file: nothing cached unless asked.
    let env = llm_env(|_| {}).await;
    env.grant("10");
    let body = chat_body("short lived");
    let a = chat(&env, &env.key, &body, &[]).await;
    a.expect(200);
    assert_eq!(a.header("x-gateway-cache"), None, "off by default");
    let use1 = [("x-gateway-cache", "use"), ("x-gateway-cache-ttl", "1")];
    cache_state(&chat(&env, &env.key, &body, &use1).await, "MISS");
    cache_state(&chat(&env, &env.key, &body, &use1).await, "HIT");
    assert_eq!(upstream_calls(&env).await, 2);
    // The TTL: a second later the entry is gone.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    cache_state(&chat(&env, &env.key, &body, &use1).await, "MISS");
    assert_eq!(upstream_calls(&env).await, 1);
    // Refresh goes upstream and stores; off bypasses.
    let refresh = [
        ("x-gateway-cache", "refresh"),
        ("x-gateway-cache-ttl", "60"),
    ];
    cache_state(&chat(&env, &env.key, &body, &refresh).await, "MISS");
    assert_eq!(upstream_calls(&env).await, 1);
    cache_state(
        &chat(&env, &env.key, &body, &[("x-gateway-cache", "use")]).await,
        "HIT",
    );
    cache_state(
        &chat(&env, &env.key, &body, &[("x-gateway-cache", "off")]).await,
        "BYPASS",
    );
    assert_eq!(upstream_calls(&env).await, 1);
    // n > 1 is not cached unless asked.
    let mut n2 = chat_body("two answers");
    n2["n"] = json!(2);
    let model_ttl = env_with_providers(cached_toml, |_| {}).await;
    model_ttl.grant("10");
    cache_state(&chat(&model_ttl, &model_ttl.key, &n2, &[]).await, "BYPASS");
    cache_state(&chat(&model_ttl, &model_ttl.key, &n2, &[]).await, "BYPASS");
    assert_eq!(upstream_calls(&model_ttl).await, 2);
    // An error is not stored.
    let failing = chat_body("fails once");
    model_ttl
        .fault(json!({"path": "/v1/chat/completions", "fault": {"status": 500}}))
        .await;
    let e = chat(&model_ttl, &model_ttl.key, &failing, &[]).await;
    assert!(e.status >= 500, "{}", e.text);
    cache_state(
        &chat(&model_ttl, &model_ttl.key, &failing, &[]).await,
        "MISS",
    );
    // Bad headers: 400 in the route's format, nothing sent or charged.
    env.clear_sim_log().await;
    let before = env.balance();
    for bad in [
        [("x-gateway-cache", "sometimes")],
        [("x-gateway-cache-ttl", "86401")],
    ] {
        let r = chat(&env, &env.key, &body, &bad).await;
        assert_eq!(r.status, 400, "{}", r.text);
        assert!(r.text.contains("X-Gateway-Cache"), "{}", r.text);
    }
    assert_eq!(upstream_calls(&env).await, 0);
    assert_eq!(env.balance(), before);
}

#[tokio::test]
async fn a_streamed_hit_replays_the_original_and_streams_and_json_answer_each_other() {
    let env = llm_env(|_| {}).await;
    env.grant("10");
    let use_ = [("x-gateway-cache", "use")];
    let mut streamed = chat_body("stream this please");
    streamed["stream"] = json!(true);
    let first = chat(&env, &env.key, &streamed, &use_).await;
    cache_state(&first, "MISS");
    let original = events(&first.text);
    assert_eq!(original.last().map(String::as_str), Some("[DONE]"));
    assert!(original.len() > 4, "{original:?}");
    let replay = chat(&env, &env.key, &streamed, &use_).await;
    cache_state(&replay, "HIT");
    assert_eq!(replay.header("content-type"), Some("text/event-stream"));
    assert_eq!(events(&replay.text), original, "the same events, in order");
    assert_eq!(upstream_calls(&env).await, 1);
    // The JSON form of the streamed entry.
    let json_hit = chat(&env, &env.key, &chat_body("stream this please"), &use_).await;
    cache_state(&json_hit, "HIT");
    assert_eq!(
        json_hit.json["choices"][0]["message"]["content"]
            .as_str()
            .unwrap(),
        streamed_text(&original)
    );
    assert_eq!(json_hit.json["object"], "chat.completion");
    // And the reverse: a JSON entry streamed, with usage when asked.
    let plain = chat(&env, &env.key, &chat_body("answer in json"), &use_).await;
    cache_state(&plain, "MISS");
    let mut as_stream = chat_body("answer in json");
    as_stream["stream"] = json!(true);
    as_stream["stream_options"] = json!({"include_usage": true});
    let s = chat(&env, &env.key, &as_stream, &use_).await;
    cache_state(&s, "HIT");
    let evs = events(&s.text);
    assert_eq!(
        streamed_text(&evs),
        plain.json["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
    );
    assert_eq!(evs.last().map(String::as_str), Some("[DONE]"));
    let usage: Value = serde_json::from_str(&evs[evs.len() - 2]).unwrap();
    assert_eq!(
        usage["usage"]["completion_tokens"],
        plain.json["usage"]["completion_tokens"]
    );
    assert_eq!(upstream_calls(&env).await, 1);
    let rows = env.wait_model_usage(5).await;
    assert_eq!(rows.iter().filter(|r| r.ended == "cache_hit").count(), 3);
}

#[tokio::test]
async fn messages_and_embeddings_are_cached_too() {
    let env = llm_env(|_| {}).await;
    env.grant("10");
    let use_ = [("x-gateway-cache", "use")];
    let m = json!({"model": "sim/sim-gpt", "max_tokens": 10, "messages": [{"role": "user", "content": "hello claude"}]});
    let a = post(&env, &env.key, "/messages", &m.to_string(), &use_).await;
    cache_state(&a, "MISS");
    let b = post(&env, &env.key, "/messages", &m.to_string(), &use_).await;
    cache_state(&b, "HIT");
    assert_eq!(a.json["content"], b.json["content"]);
    let e = json!({"model": "sim/sim-embed", "input": ["one", "two"]});
    cache_state(
        &post(&env, &env.key, "/embeddings", &e.to_string(), &use_).await,
        "MISS",
    );
    let hit = post(&env, &env.key, "/embeddings", &e.to_string(), &use_).await;
    cache_state(&hit, "HIT");
    assert_eq!(hit.json["data"].as_array().unwrap().len(), 2);
    assert_eq!(upstream_calls(&env).await, 2);
}

#[tokio::test]
async fn a_redis_that_stops_is_bypassed() {
    let test = "a_redis_that_stops_is_bypassed";
    let Some(mut redis) = RedisServer::start(test) else {
        return;
    };
    let url = redis.url();
    let env = env_with_providers(cached_toml, move |c| {
        c.redis =
            Some(runtime::cluster::RedisConfig::parse(&url, Some(&fresh_prefix("cache"))).unwrap());
    })
    .await;
    env.grant("10");
    let body = chat_body("kept in redis");
    cache_state(&chat(&env, &env.key, &body, &[]).await, "MISS");
    wait_for_store(&env, &body).await;
    assert_eq!(upstream_calls(&env).await, 1);
    redis.stop();
    let a = chat(&env, &env.key, &body, &[]).await;
    cache_state(&a, "BYPASS");
    assert_eq!(upstream_calls(&env).await, 1, "answered by the provider");
}

/// Sends `body` until it is a hit (the Redis store is written in the
/// background); at most 5 s.
async fn wait_for_store(env: &Env, body: &Value) {
    let start = Instant::now();
    loop {
        let a = chat(env, &env.key, body, &[]).await;
        a.expect(200);
        if a.header("x-gateway-cache") == Some("HIT") {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "never stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn two_instances_share_entries_through_redis() {
    let Some(p) = llm_pair("two_instances_share_entries_through_redis").await else {
        return;
    };
    p.a.grant("10");
    let use_ = [("x-gateway-cache", "use")];
    let body = chat_body("asked on a, answered on b");
    cache_state(&chat(&p.a, &p.a.key, &body, &use_).await, "MISS");
    // Written in the background: wait until Redis holds it.
    let start = Instant::now();
    loop {
        let keys: Vec<String> = p
            .redis(redis::cmd("KEYS").arg(format!("{}cache:*", p.prefix)))
            .await;
        if !keys.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "never stored in Redis"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let b = Answer::from(
        p.a.client
            .post(p.url_b("/api/v1/chat/completions"))
            .bearer_auth(&p.a.key)
            .header("x-gateway-cache", "use")
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    cache_state(&b, "HIT");
    assert_eq!(upstream_calls(&p.a).await, 1);
}

/// A route cached for a minute (`cache_ttl_secs` on the `[[route]]`) over
/// the simulator's model, which is itself not cached.
fn route_cached_toml(url: &str) -> String {
    format!(
        "{}\n[[route]]\nmodel = \"cached\"\ntargets = [ {{ model = \"sim/sim-gpt\" }} ]\ncache_ttl_secs = 60\n",
        providers_toml(url)
    )
}

#[tokio::test]
async fn a_routes_cache_ttl_caches_the_route_and_not_its_model() {
    let env = env_with_providers(route_cached_toml, |_| {}).await;
    env.grant("10");
    let mut body = chat_body("a routed question");
    body["model"] = json!("cached");
    cache_state(&chat(&env, &env.key, &body, &[]).await, "MISS");
    assert_eq!(upstream_calls(&env).await, 1);
    let hit = chat(&env, &env.key, &body, &[]).await;
    cache_state(&hit, "HIT");
    assert_eq!(upstream_calls(&env).await, 0, "a hit calls no provider");
    // The route's target by its own name: not cached (the model has no
    // cache_ttl_secs), and never the route's entry.
    let direct = chat(&env, &env.key, &chat_body("a routed question"), &[]).await;
    direct.expect(200);
    assert_eq!(direct.header("x-gateway-cache"), None, "{}", direct.text);
    assert_eq!(upstream_calls(&env).await, 1);
    let rows = env.wait_model_usage(3).await;
    let ended: Vec<&str> = rows.iter().map(|r| r.ended.as_str()).collect();
    assert_eq!(ended, ["complete", "cache_hit", "complete"]);
}
