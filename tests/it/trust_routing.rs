//! Issue #37, findings 2 and 3: what a request that can be served by
//! several deployments (a route's targets and fallbacks, the caller's
//! `models: [...]`) may share with the others.
//!
//! * The response cache: an answer is stored under the deployment that
//!   served it (a route's under the route), a hit answers only a request
//!   that could have been served by that deployment, and it carries the
//!   original's `X-Gateway-Model` and is billed at its prices. A fallback's
//!   answer is never a hit for a plain request of the first model, in the
//!   global scope (another tenant) or the user's; JSON or streamed.
//! * BYOK: the caller's key goes only to the provider of the model it was
//!   given with; candidates of other providers are skipped, and a request
//!   with no candidate on that provider is a 400 that calls and charges
//!   nothing.
//!
//! Two named providers of one simulator (`/p/a/v1`, `/p/b/v1`: the routing
//! tests' file) fail apart; the simulator's request log shows what each
//! received, headers included.

use runtime::store::Ledger;
use rust_decimal::{Decimal, RoundingStrategy};
use serde_json::{json, Value};

use crate::harness::{env_with_providers, envelope, Answer, Env, PROVIDER_KEY};
use crate::routing::{b_price, routes_toml};

/// The routing tests' providers: a's model cached for a minute with hits
/// at 50 %, b's at 25 %, so that a hit's price tells whose it is.
fn cached_routes_toml(url: &str) -> String {
    routes_toml(url)
        .replacen(
            "output_per_mtok = \"8.00\"\n",
            "output_per_mtok = \"8.00\"\ncache_ttl_secs = 60\ncache_hit_price_pct = \"50\"\n",
            1,
        )
        .replacen(
            "output_per_mtok = \"4.00\"\n",
            "output_per_mtok = \"4.00\"\ncache_ttl_secs = 60\ncache_hit_price_pct = \"25\"\n",
            1,
        )
}

/// A gateway on [`cached_routes_toml`] with the cache's `scope`, the
/// default retries, and 10 of credit.
async fn cached_env(scope: runtime::cache::Scope) -> Env {
    let env = env_with_providers(cached_routes_toml, |c| {
        c.routing.retry_max = 2;
        c.cache_scope = scope;
    })
    .await;
    env.grant("10");
    env
}

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "Which is the tallest tree?"}], "max_tokens": 16})
}

/// `model` falling back to the caller's own `models: [fallback]`.
fn with_fallback(model: &str, fallback: &str) -> Value {
    let mut b = chat(model);
    b["models"] = json!([fallback]);
    b
}

/// `POST /api/v1/chat/completions` with `key`, `body` and `headers`.
async fn ask(env: &Env, key: &str, body: &Value, headers: &[(&str, &str)]) -> Answer {
    let mut rb = env
        .client
        .post(env.url("/api/v1/chat/completions"))
        .bearer_auth(key)
        .json(body);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    Answer::from(rb.send().await.unwrap()).await
}

/// Asserts a 200 with its cache state and the deployment that answered.
#[track_caller]
fn served(a: &Answer, cache: &str, model: &str) {
    a.expect(200);
    assert_eq!(a.header("x-gateway-cache"), Some(cache), "{}", a.text);
    assert_eq!(a.header("x-gateway-model"), Some(model), "{}", a.text);
}

/// Upstream calls to provider a and to provider b since the log was last
/// cleared (then clears it).
async fn calls(env: &Env) -> (usize, usize) {
    let log = env.sim_requests().await;
    let to = |p: &str| {
        log.iter()
            .filter(|r| r["path"].as_str().unwrap_or("").starts_with(p))
            .count()
    };
    let n = (to("/p/a/"), to("/p/b/"));
    env.clear_sim_log().await;
    n
}

/// The charge of `input` + `output` tokens at a's prices (no markup).
fn a_price(input: i64, output: i64) -> Decimal {
    (Decimal::from(input) * Decimal::TWO + Decimal::from(output) * Decimal::from(8))
        / Decimal::from(1_000_000)
}

/// `pct` % of `charge`, to the 8th decimal, as a hit is billed.
fn hit_of(charge: Decimal, pct: u32) -> Decimal {
    (charge * Decimal::from(pct) / Decimal::ONE_HUNDRED)
        .round_dp_with_strategy(8, RoundingStrategy::MidpointAwayFromZero)
}

/// The `usage.cost` an answer reports (a JSON number).
fn cost(a: &Answer) -> Decimal {
    let c = &a.json["usage"]["cost"];
    assert!(c.is_number(), "{}", a.text);
    c.to_string().parse().unwrap()
}

#[tokio::test]
async fn a_fallbacks_answer_is_never_a_global_hit_for_the_first_model_and_answers_its_own() {
    let env = cached_env(runtime::cache::Scope::Global).await;
    let (bob, bob_key) = env.new_user("bob@example.com");
    env.store()
        .grant_credit(bob, Decimal::TEN, Some("test"))
        .unwrap();
    // a fails once: alice's `models: [...]` request is served by b.
    env.fault(json!({"path": "/p/a/v1/chat/completions", "fault": {"status": 503}}))
        .await;
    let fell_back = ask(&env, &env.key, &with_fallback("a/gpt", "b/gpt"), &[]).await;
    served(&fell_back, "MISS", "b/gpt");
    assert_eq!(fell_back.header("x-gateway-attempts"), Some("2"));
    assert_eq!(calls(&env).await, (1, 1));

    // Bob asks the first model plainly: a's own answer, never b's.
    let plain_a = ask(&env, &bob_key, &chat("a/gpt"), &[]).await;
    served(&plain_a, "MISS", "a/gpt");
    assert_ne!(plain_a.json["id"], fell_back.json["id"]);
    assert_eq!(calls(&env).await, (1, 0));
    // Bob asks the model that served: b's entry, as b's.
    let plain_b = ask(&env, &bob_key, &chat("b/gpt"), &[]).await;
    served(&plain_b, "HIT", "b/gpt");
    assert_eq!(plain_b.json["id"], fell_back.json["id"]);
    assert_eq!(plain_b.json["choices"], fell_back.json["choices"]);
    // And a again: a's entry, as a's.
    let again_a = ask(&env, &bob_key, &chat("a/gpt"), &[]).await;
    served(&again_a, "HIT", "a/gpt");
    assert_eq!(again_a.json["id"], plain_a.json["id"]);
    assert_eq!(calls(&env).await, (0, 0), "hits call no provider");

    // The records: each request at the prices of the deployment whose
    // answer it got; a hit at its original's tokens and percentage.
    let rows = env.wait_model_usage(4).await;
    let models: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.model.as_str(), r.ended.as_str()))
        .collect();
    assert_eq!(
        models,
        [
            ("b/gpt", "complete"),
            ("a/gpt", "complete"),
            ("b/gpt", "cache_hit"),
            ("a/gpt", "cache_hit")
        ]
    );
    for (hit, original) in [(2, 0), (3, 1)] {
        assert_eq!(
            (rows[hit].input_tokens, rows[hit].output_tokens),
            (rows[original].input_tokens, rows[original].output_tokens)
        );
    }
    let usage = env.usage();
    assert_eq!(usage.len(), 4);
    let first_b = b_price(rows[0].input_tokens, rows[0].output_tokens);
    let first_a = a_price(rows[1].input_tokens, rows[1].output_tokens);
    let want = [first_b, first_a, hit_of(first_b, 25), hit_of(first_a, 50)];
    let charged: Vec<Decimal> = usage.iter().map(|u| u.charged).collect();
    assert_eq!(charged, want);
    assert_eq!(
        usage.iter().map(|u| u.user_id).collect::<Vec<_>>(),
        [Some(env.user_id), Some(bob), Some(bob), Some(bob)]
    );
    assert_eq!(cost(&plain_b), want[2]);
    assert_eq!(cost(&again_a), want[3]);
    env.wait_no_holds().await;
    assert_eq!(env.balance(), Decimal::TEN - want[0]);
    assert_eq!(
        env.store().balance(bob).unwrap(),
        Decimal::TEN - want[1] - want[2] - want[3]
    );
}

#[tokio::test]
async fn in_the_users_scope_a_fallbacks_answer_answers_only_requests_b_could_serve() {
    let env = cached_env(runtime::cache::Scope::User).await;
    env.fault(json!({"path": "/p/a/v1/chat/completions", "fault": {"status": 503}}))
        .await;
    let fb = with_fallback("a/gpt", "b/gpt");
    let first = ask(&env, &env.key, &fb, &[]).await;
    served(&first, "MISS", "b/gpt");
    assert_eq!(calls(&env).await, (1, 1));
    // The same `models: [...]` request could be served by b: b's entry.
    let again = ask(&env, &env.key, &fb, &[]).await;
    served(&again, "HIT", "b/gpt");
    assert_eq!(again.json["id"], first.json["id"]);
    // The first model plainly: never b's answer.
    let plain_a = ask(&env, &env.key, &chat("a/gpt"), &[]).await;
    served(&plain_a, "MISS", "a/gpt");
    assert_ne!(plain_a.json["id"], first.json["id"]);
    assert_eq!(calls(&env).await, (1, 0));
    let plain_b = ask(&env, &env.key, &chat("b/gpt"), &[]).await;
    served(&plain_b, "HIT", "b/gpt");
    assert_eq!(plain_b.json["id"], first.json["id"]);
    // Now that a has an entry, the `models: [...]` request finds it first.
    let in_order = ask(&env, &env.key, &fb, &[]).await;
    served(&in_order, "HIT", "a/gpt");
    assert_eq!(in_order.json["id"], plain_a.json["id"]);
    assert_eq!(calls(&env).await, (0, 0));

    let rows = env.wait_model_usage(5).await;
    let b0 = b_price(rows[0].input_tokens, rows[0].output_tokens);
    let a0 = a_price(rows[2].input_tokens, rows[2].output_tokens);
    let want = [b0, hit_of(b0, 25), a0, hit_of(b0, 25), hit_of(a0, 50)];
    let charged: Vec<Decimal> = env.usage().iter().map(|u| u.charged).collect();
    assert_eq!(charged, want);
    assert_eq!(
        rows.iter().map(|r| r.model.as_str()).collect::<Vec<_>>(),
        ["b/gpt", "b/gpt", "a/gpt", "b/gpt", "a/gpt"]
    );
    env.wait_no_holds().await;
    assert_eq!(env.balance(), Decimal::TEN - want.iter().sum::<Decimal>());
}

#[tokio::test]
async fn a_streamed_fallbacks_answer_is_captured_under_the_deployment_that_served_it() {
    let env = cached_env(runtime::cache::Scope::User).await;
    env.fault(json!({"path": "/p/a/v1/chat/completions", "fault": {"status": 503}}))
        .await;
    let mut fb = with_fallback("a/gpt", "b/gpt");
    fb["stream"] = json!(true);
    let streamed = ask(&env, &env.key, &fb, &[]).await;
    served(&streamed, "MISS", "b/gpt");
    assert!(
        streamed.text.ends_with("data: [DONE]\n\n"),
        "{}",
        streamed.text
    );
    assert_eq!(calls(&env).await, (1, 1));
    let text: String = streamed
        .text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert!(!text.is_empty());

    // The first model, streamed or not: its own answers.
    let mut plain_a = chat("a/gpt");
    plain_a["stream"] = json!(true);
    served(&ask(&env, &env.key, &plain_a, &[]).await, "MISS", "a/gpt");
    assert_eq!(calls(&env).await, (1, 0));
    // b, as JSON: the captured stream, as b's.
    let plain_b = ask(&env, &env.key, &chat("b/gpt"), &[]).await;
    served(&plain_b, "HIT", "b/gpt");
    assert_eq!(
        plain_b.json["choices"][0]["message"]["content"],
        json!(text)
    );
    assert_eq!(calls(&env).await, (0, 0));

    let rows = env.wait_model_usage(3).await;
    let b0 = b_price(rows[0].input_tokens, rows[0].output_tokens);
    let a0 = a_price(rows[1].input_tokens, rows[1].output_tokens);
    assert_eq!(rows[2].ended, "cache_hit");
    let charged: Vec<Decimal> = env.usage().iter().map(|u| u.charged).collect();
    assert_eq!(charged, [b0, a0, hit_of(b0, 25)]);
    assert_eq!(cost(&plain_b), hit_of(b0, 25));
    env.wait_no_holds().await;
    assert_eq!(env.balance(), Decimal::TEN - b0 - a0 - hit_of(b0, 25));
}

#[tokio::test]
async fn a_routes_hit_names_and_bills_the_deployment_that_served_its_original() {
    let env = cached_env(runtime::cache::Scope::User).await;
    let use_ = [("x-gateway-cache", "use")];
    // Route `fb`: target a, fallback b; a fails once.
    env.fault(json!({"path": "/p/a/v1/chat/completions", "fault": {"status": 503}}))
        .await;
    let first = ask(&env, &env.key, &chat("fb"), &use_).await;
    served(&first, "MISS", "b/gpt");
    assert_eq!(calls(&env).await, (1, 1));
    let hit = ask(&env, &env.key, &chat("fb"), &use_).await;
    served(&hit, "HIT", "b/gpt");
    assert_eq!(hit.json["id"], first.json["id"]);
    // The route's entry is the route's: neither model's plain request.
    served(
        &ask(&env, &env.key, &chat("a/gpt"), &use_).await,
        "MISS",
        "a/gpt",
    );
    served(
        &ask(&env, &env.key, &chat("b/gpt"), &use_).await,
        "MISS",
        "b/gpt",
    );
    assert_eq!(calls(&env).await, (1, 1));

    let rows = env.wait_model_usage(4).await;
    assert_eq!(
        (rows[1].model.as_str(), rows[1].ended.as_str()),
        ("b/gpt", "cache_hit")
    );
    assert_eq!(rows[1].route.as_deref(), Some("fb"));
    let b0 = b_price(rows[0].input_tokens, rows[0].output_tokens);
    let usage = env.usage();
    assert_eq!(usage[0].charged, b0);
    assert_eq!(usage[1].charged, hit_of(b0, 25));
    assert_eq!(usage[1].product, "b/gpt");
    assert_eq!(cost(&hit), hit_of(b0, 25));
    env.wait_no_holds().await;
    let total: Decimal = usage.iter().map(|u| u.charged).sum();
    assert_eq!(env.balance(), Decimal::TEN - total);
}

const BYOK: &str = "sk-caller-openai-key-0123456789abcdef";

/// [`cached_env`] whose simulator takes any key (ours or the caller's),
/// so that only its request log tells where a key went.
async fn byok_env() -> Env {
    let env = cached_env(runtime::cache::Scope::User).await;
    env.sim_config(json!({"api_key": null})).await;
    env
}

fn byok(mut body: Value) -> Value {
    body["byok_api_key"] = json!(BYOK);
    body
}

/// Asserts that every upstream request since the log was cleared went to
/// provider a with the caller's key, and that nothing reached b.
async fn only_a_got_the_key(env: &Env) {
    let log = env.sim_requests().await;
    assert!(!log.is_empty());
    for r in &log {
        let path = r["path"].as_str().unwrap_or("");
        assert!(path.starts_with("/p/a/"), "{path} was called: {r:#}");
        assert_eq!(r["headers"]["authorization"], format!("Bearer {BYOK}"));
        assert!(r["json"].get("byok_api_key").is_none());
    }
    env.clear_sim_log().await;
}

#[tokio::test]
async fn a_byok_key_goes_only_to_the_provider_of_the_model_it_was_given_with() {
    let env = byok_env().await;
    // a fails every time: b would answer, but b is another provider.
    env.fault(json!({"path": "/p/a/*", "fault": {"status": 503}, "count": 0}))
        .await;
    let mut streamed = byok(chat("fb"));
    streamed["stream"] = json!(true);
    for body in [
        byok(chat("fb")),
        byok(with_fallback("a/gpt", "b/gpt")),
        streamed,
    ] {
        let a = ask(&env, &env.key, &body, &[]).await;
        // a's failure, in the route's format (spec §7: 500).
        let message = envelope(&a, 500);
        assert!(message.contains("503"), "{message}");
        assert!(!a.text.contains(BYOK), "{}", a.text);
        only_a_got_the_key(&env).await;
    }
    // Given with b: only b gets it (a, the caller's fallback, is skipped).
    let a = ask(&env, &env.key, &byok(with_fallback("b/gpt", "a/gpt")), &[]).await;
    served(&a, "MISS", "b/gpt");
    let log = env.sim_requests().await;
    assert_eq!(log.len(), 1, "{log:#?}");
    assert!(log[0]["path"].as_str().unwrap().starts_with("/p/b/"));
    assert_eq!(log[0]["headers"]["authorization"], format!("Bearer {BYOK}"));
    env.clear_sim_log().await;
    // Without BYOK the route's fallback still serves, with the gateway's key.
    let a = ask(&env, &env.key, &chat("fb"), &[]).await;
    a.expect(200);
    assert_eq!(a.header("x-gateway-model"), Some("b/gpt"));
    let log = env.sim_requests().await;
    let to_b: Vec<&Value> = log
        .iter()
        .filter(|r| r["path"].as_str().unwrap().starts_with("/p/b/"))
        .collect();
    assert_eq!(to_b.len(), 1);
    assert_eq!(
        to_b[0]["headers"]["authorization"],
        format!("Bearer {PROVIDER_KEY}")
    );
    assert!(!log.iter().any(|r| r.to_string().contains(BYOK)));

    // The BYOK requests: recorded, charged nothing; the last one charged.
    let rows = env.wait_model_usage(2).await;
    assert_eq!(
        rows.iter().map(|r| r.byok).collect::<Vec<_>>(),
        [true, false]
    );
    let usage = env.usage();
    assert_eq!(usage.len(), 2);
    assert_eq!(usage[0].charged, Decimal::ZERO);
    let b1 = b_price(rows[1].input_tokens, rows[1].output_tokens);
    assert_eq!(usage[1].charged, b1);
    env.wait_no_holds().await;
    assert_eq!(env.balance(), Decimal::TEN - b1);
}

#[tokio::test]
async fn a_byok_request_with_no_candidate_on_one_provider_is_a_400_that_calls_and_charges_nothing()
{
    let env = byok_env().await;
    // `pri` and `smart` have targets on a and on b: no one provider.
    for route in ["pri", "smart"] {
        for stream in [false, true] {
            let mut body = byok(chat(route));
            body["stream"] = json!(stream);
            let a = ask(&env, &env.key, &body, &[]).await;
            let message = envelope(&a, 400);
            assert!(
                message.contains("byok_api_key") && message.contains(route),
                "{message}"
            );
            assert!(!a.text.contains(BYOK));
        }
    }
    env.assert_no_upstream_call().await;
    env.wait_no_holds().await;
    assert!(env.usage().is_empty());
    assert!(env.wait_model_usage(0).await.is_empty());
    assert_eq!(env.balance(), Decimal::TEN);
    assert_eq!(
        env.store().ledger(env.user_id).unwrap().len(),
        1,
        "the grant"
    );
}
