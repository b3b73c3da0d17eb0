//! Routing and resilience (issue 26): one model name over several
//! deployments, retries before the first byte, fallbacks, cool-downs, and
//! the money of it: one charge, at the prices of the deployment that
//! answered. Two named providers of one simulator (`/p/a/v1`, `/p/b/v1`)
//! fail apart.

use std::time::Duration;

use runtime::store::{Keys, Ledger};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::{env_with_providers, LLM_KEY_VAR};
use crate::harness::{start_sim, Answer, Env, Pair, PROVIDER_KEY};

/// Two providers, each with a chat model `gpt` (a dearer than b, no
/// markup), and routes over them.
pub(crate) fn routes_toml(llm_url: &str) -> String {
    let root = llm_url.trim_end_matches("/v1");
    format!(
        r#"
[[provider]]
id = "a"
kind = "openai"
base_url = "{root}/p/a/v1"
api_key_env = "{LLM_KEY_VAR}"
markup_pct = "0"
[[provider.model]]
id = "gpt"
type = "chat"
context_window = 8192
input_per_mtok = "2.00"
output_per_mtok = "8.00"

[[provider]]
id = "b"
kind = "openai"
base_url = "{root}/p/b/v1"
api_key_env = "{LLM_KEY_VAR}"
markup_pct = "0"
[[provider.model]]
id = "gpt"
type = "chat"
context_window = 8192
input_per_mtok = "1.00"
output_per_mtok = "4.00"

[[route]]
model = "smart"
strategy = "weighted"
targets = [ {{ model = "a/gpt", weight = 3 }}, {{ model = "b/gpt", weight = 1 }} ]

[[route]]
model = "pri"
strategy = "priority"
targets = [ {{ model = "a/gpt" }}, {{ model = "b/gpt" }} ]

[[route]]
model = "fb"
strategy = "least-latency"
targets = [ {{ model = "a/gpt" }} ]
fallbacks = ["b/gpt"]
"#
    )
}

/// The routes' gateway, with the default retries (the harness turns them off).
pub(crate) async fn routes_env(f: impl FnOnce(&mut runtime::config::Config)) -> Env {
    let env = env_with_providers(routes_toml, |c| {
        c.routing.retry_max = 2;
        f(c)
    })
    .await;
    env.grant("10");
    env
}

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 16})
}

/// Upstream requests to provider `p` in the simulator's log.
async fn calls_to(env: &Env, p: &str) -> usize {
    let prefix = format!("/p/{p}/");
    env.sim_requests()
        .await
        .iter()
        .filter(|r| r["path"].as_str().unwrap_or("").starts_with(&prefix))
        .count()
}

/// The charge of `input` + `output` tokens at b's prices (no markup).
pub(crate) fn b_price(input: i64, output: i64) -> Decimal {
    (Decimal::from(input) + Decimal::from(output) * Decimal::from(4)) / Decimal::from(1_000_000)
}

#[tokio::test]
async fn routes_are_listed_by_models_with_their_targets() {
    let env = routes_env(|_| {}).await;
    let a = env
        .call_as(&env.key, "GET", &env.url("/api/v1/models"), None)
        .await;
    a.expect(200);
    let smart = a.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "smart")
        .cloned()
        .expect("the route is listed");
    assert_eq!(smart["type"], "chat");
    assert_eq!(smart["route"]["strategy"], "weighted");
    assert_eq!(
        smart["route"]["targets"][0],
        json!({"model": "a/gpt", "weight": 3})
    );
}

#[tokio::test]
async fn a_weighted_route_splits_400_requests_by_its_weights() {
    let env = routes_env(|c| {
        c.rate_limits = runtime::ratelimit::Limits::parse(Some("chat=off")).unwrap()
    })
    .await;
    for _ in 0..25 {
        let batch = (0..16).map(|_| env.api("/chat/completions", chat("smart")));
        for a in futures_util::future::join_all(batch).await {
            a.expect(200);
        }
    }
    let (a, b) = (calls_to(&env, "a").await, calls_to(&env, "b").await);
    assert_eq!(a + b, 400);
    // 3:1 is 300 to a; 45 is five standard deviations of the binomial.
    assert!((255..=345).contains(&a), "a served {a} of 400");
}

#[tokio::test]
async fn a_failing_deployment_is_routed_around_each_request_billed_once_at_the_servers_prices() {
    let env = routes_env(|_| {}).await;
    env.fault(json!({"path": "/p/a/*", "fault": {"status": 503}, "count": 0}))
        .await;
    let mut attempts = Vec::new();
    for _ in 0..5 {
        let a = env.api("/chat/completions", chat("pri")).await;
        a.expect(200);
        assert_eq!(a.header("x-gateway-model"), Some("b/gpt"));
        attempts.push(a.header("x-gateway-attempts").unwrap().to_owned());
    }
    // Three failures cool `a` down: the last two go straight to b.
    assert_eq!(attempts, ["2", "2", "2", "1", "1"]);
    assert_eq!(calls_to(&env, "a").await, 3);
    let rows = env.wait_model_usage(5).await;
    let usage = env.usage();
    let usage: Vec<_> = usage.iter().filter(|u| u.unit == "tokens").collect();
    assert_eq!(usage.len(), 5, "one usage record per request: {usage:#?}");
    let mut total = Decimal::ZERO;
    for (row, u) in rows.iter().zip(&usage) {
        assert_eq!((row.model.as_str(), u.product.as_str()), ("b/gpt", "b/gpt"));
        assert_eq!(row.route.as_deref(), Some("pri"));
        assert_eq!(u.charged, b_price(row.input_tokens, row.output_tokens));
        total += u.charged;
    }
    assert_eq!(
        rows.iter().map(|r| r.attempts).collect::<Vec<_>>(),
        [2, 2, 2, 1, 1]
    );
    env.wait_no_holds().await;
    assert_eq!(env.balance(), Decimal::from(10) - total);
    // The grant and one debit per request.
    assert_eq!(env.store().ledger(env.user_id).unwrap().len(), 1 + 5);
}

#[tokio::test]
async fn a_cooled_deployment_is_skipped_then_readmitted_by_one_probe() {
    let env = routes_env(|c| c.routing.cooldown = Duration::from_secs(1)).await;
    env.fault(json!({"path": "/p/a/*", "fault": {"status": 500}, "count": 3}))
        .await;
    for _ in 0..3 {
        env.api("/chat/completions", chat("pri")).await.expect(200);
    }
    env.clear_sim_log().await;
    let a = env.api("/chat/completions", chat("pri")).await;
    assert_eq!(a.header("x-gateway-model"), Some("b/gpt"));
    assert_eq!(calls_to(&env, "a").await, 0, "a is cooling down");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for _ in 0..2 {
        let a = env.api("/chat/completions", chat("pri")).await;
        a.expect(200);
        assert_eq!(a.header("x-gateway-model"), Some("a/gpt"));
        assert_eq!(a.header("x-gateway-attempts"), Some("1"));
    }
}

#[tokio::test]
async fn a_429_with_retry_after_is_honoured_and_one_past_the_cap_is_answered() {
    let env = routes_env(|_| {}).await;
    env.fault(json!({"path": "/p/a/v1/chat/completions", "fault": {"status": 429, "headers": {"Retry-After": "1"}}}))
        .await;
    let a = env.api("/chat/completions", chat("a/gpt")).await;
    a.expect(200);
    assert_eq!(a.header("x-gateway-attempts"), Some("2"));
    let reqs = env.sim_requests().await;
    let at =
        |i: usize| chrono::DateTime::parse_from_rfc3339(reqs[i]["at"].as_str().unwrap()).unwrap();
    assert_eq!(reqs.len(), 2);
    assert!(
        at(1) - at(0) >= chrono::Duration::milliseconds(1000),
        "the retry came before Retry-After"
    );
    env.clear_sim_log().await;
    env.fault(json!({"path": "/p/a/v1/chat/completions", "fault": {"status": 429, "headers": {"Retry-After": "3600"}}}))
        .await;
    let a = env.api("/chat/completions", chat("a/gpt")).await;
    a.expect(429);
    assert_eq!(env.sim_requests().await.len(), 1, "not retried");
    env.wait_no_holds().await;
    let tokens = env.usage().iter().filter(|u| u.unit == "tokens").count();
    assert_eq!(tokens, 1, "the failed request is not billed");
}

#[tokio::test]
async fn other_4xx_are_the_callers_and_never_retried() {
    let env = routes_env(|_| {}).await;
    env.fault(
        json!({"path": "/p/a/*", "fault": {"status": 400, "body": {"error": {"message": "bad"}}}}),
    )
    .await;
    let a = env.api("/chat/completions", chat("pri")).await;
    a.expect(400);
    assert_eq!(env.sim_requests().await.len(), 1);
    env.wait_no_holds().await;
    assert!(env.usage().iter().all(|u| u.unit != "tokens"));
}

/// Reads a whole streamed answer: its headers and text.
async fn stream(env: &Env, model: &str) -> (reqwest::header::HeaderMap, String) {
    let mut body = chat(model);
    body["stream"] = json!(true);
    let r = env.stream_chat(&env.key, body).await;
    assert_eq!(r.status().as_u16(), 200);
    let headers = r.headers().clone();
    (headers, r.text().await.unwrap_or_default())
}

#[tokio::test]
async fn a_fallback_serves_a_stream_when_the_first_target_fails_before_its_first_byte() {
    let env = routes_env(|_| {}).await;
    env.fault(json!({"path": "/p/a/*", "fault": "reset"})).await;
    let (h, text) = stream(&env, "fb").await;
    assert_eq!(h["x-gateway-model"], "b/gpt");
    assert_eq!(h["x-gateway-attempts"], "2");
    assert!(text.contains("[DONE]"), "{text}");
    let rows = env.wait_model_usage(1).await;
    assert_eq!(
        (rows[0].model.as_str(), rows[0].ended.as_str()),
        ("b/gpt", "complete")
    );
    assert_eq!(env.usage()[0].product, "b/gpt");
    env.wait_no_holds().await;
}

#[tokio::test]
async fn a_stream_broken_after_its_first_byte_is_not_retried_and_bills_what_was_streamed() {
    let env = routes_env(|_| {}).await;
    env.fault(
        json!({"path": "/p/a/v1/chat/completions", "fault": {"stream_error": 500, "after": 3}}),
    )
    .await;
    let (h, text) = stream(&env, "pri").await;
    assert_eq!(h["x-gateway-model"], "a/gpt");
    assert!(text.contains("\"error\""), "an error event ends it: {text}");
    assert_eq!(
        calls_to(&env, "b").await,
        0,
        "not retried after the first byte"
    );
    let rows = env.wait_model_usage(1).await;
    assert_eq!(rows[0].ended, "error");
    assert!(rows[0].output_tokens > 0);
    let u = &env.usage()[0];
    assert_eq!(u.product, "a/gpt");
    assert!(u.charged > Decimal::ZERO);
    env.wait_no_holds().await;
}

#[tokio::test]
async fn a_json_answer_broken_after_its_headers_is_retried_on_the_next_deployment() {
    let env = routes_env(|_| {}).await;
    // a answers 200 and its headers, then drops the connection 10 bytes
    // into the body: nothing has reached the caller, so b is tried.
    env.fault(json!({"path": "/p/a/v1/chat/completions", "fault": {"body_break": 10}}))
        .await;
    let a = env.api("/chat/completions", chat("pri")).await;
    a.expect(200);
    assert_eq!(a.header("x-gateway-model"), Some("b/gpt"));
    assert_eq!(a.header("x-gateway-attempts"), Some("2"));
    assert_eq!(
        (calls_to(&env, "a").await, calls_to(&env, "b").await),
        (1, 1)
    );
    let rows = env.wait_model_usage(1).await;
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].model.as_str(), rows[0].attempts), ("b/gpt", 2));
    let usage = env.usage();
    let usage: Vec<_> = usage.iter().filter(|u| u.unit == "tokens").collect();
    assert_eq!(usage.len(), 1, "billed once: {usage:#?}");
    assert_eq!(usage[0].product, "b/gpt");
    let charged = b_price(rows[0].input_tokens, rows[0].output_tokens);
    assert_eq!(usage[0].charged, charged);
    env.wait_no_holds().await;
    assert_eq!(env.balance(), Decimal::from(10) - charged);
    assert_eq!(env.store().ledger(env.user_id).unwrap().len(), 1 + 1);
}

#[tokio::test]
async fn a_request_names_its_own_order_with_models() {
    let env = routes_env(|_| {}).await;
    env.fault(json!({"path": "/p/a/*", "fault": {"status": 502}}))
        .await;
    let mut body = chat("a/gpt");
    body["models"] = json!(["b/gpt"]);
    let a = env.api("/chat/completions", body).await;
    a.expect(200);
    assert_eq!(a.header("x-gateway-model"), Some("b/gpt"));
    assert!(env.sim_requests().await[1]["json"].get("models").is_none());
    let mut body = chat("a/gpt");
    body["models"] = json!(["nobody/none"]);
    envelope_404(&env.api("/chat/completions", body).await);
}

fn envelope_404(a: &Answer) {
    crate::harness::envelope(a, 404);
}

#[tokio::test]
async fn two_instances_share_a_cool_down_through_redis() {
    std::env::set_var(LLM_KEY_VAR, PROVIDER_KEY);
    let sim = start_sim().await;
    let toml = routes_toml(&sim.llm_url());
    let Some(p) = Pair::on_sim("routing::two_instances_share_a_cool_down", sim, move |c| {
        c.routing.retry_max = 2;
        let path = c.data_dir.join("providers.toml");
        std::fs::write(&path, &toml).unwrap();
        c.providers_file = Some(path);
    })
    .await
    else {
        return;
    };
    let env = &p.a;
    env.grant("10");
    env.fault(json!({"path": "/p/a/*", "fault": {"status": 503}, "count": 0}))
        .await;
    for _ in 0..3 {
        env.api("/chat/completions", chat("pri")).await.expect(200);
    }
    env.clear_sim_log().await;
    let a = env
        .call_as(
            &env.key,
            "POST",
            &p.url_b("/api/v1/chat/completions"),
            Some(chat("pri")),
        )
        .await;
    a.expect(200);
    assert_eq!(a.header("x-gateway-attempts"), Some("1"));
    assert_eq!(calls_to(env, "a").await, 0, "instance b skipped a");
}

#[tokio::test]
async fn a_keys_model_list_applies_to_the_name_the_caller_sent() {
    let env = routes_env(|_| {}).await;
    let hash = runtime::auth::hash_key(&env.key);
    // The route's name is what the key lists, not its targets.
    assert!(env.store().set_key_models(&hash, Some("pri")).unwrap());
    let a = env.api("/chat/completions", chat("pri")).await;
    a.expect(200);
    let a = env.api("/chat/completions", chat("smart")).await;
    assert!(crate::harness::envelope(&a, 403).contains("smart"));
    let a = env.api("/chat/completions", chat("a/gpt")).await;
    crate::harness::envelope(&a, 403);
    // Each model of `models: [...]` is the caller's too.
    let (id, key) = env.new_user("carol@example.com");
    env.store().grant_credit(id, Decimal::ONE, None).unwrap();
    let hash = runtime::auth::hash_key(&key);
    assert!(env.store().set_key_models(&hash, Some("a/gpt")).unwrap());
    let mut body = chat("a/gpt");
    body["models"] = json!(["b/gpt"]);
    let url = env.url("/api/v1/chat/completions");
    crate::harness::envelope(&env.call_as(&key, "POST", &url, Some(body)).await, 403);
    assert_eq!(calls_to(&env, "a").await + calls_to(&env, "b").await, 1);
}
