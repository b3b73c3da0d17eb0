//! Request and token limits per key and per model (#45): a key's `rpm`
//! and `tpm` (`PATCH /keys/{key_id}`, the CLI), a model's per user (the
//! providers file); admission counts a request's token bound and its
//! settlement corrects it to what was used; 429 with `Retry-After` in the
//! route's format, nothing held or charged; the window's end recovers;
//! two instances share one window through Redis, exactly; every answer
//! under a limit carries OpenAI's `x-ratelimit-*` headers.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::future::join_all;
use runtime::store::{History, Keys};
use serde_json::{json, Value};

use crate::budgets::{gateway_cli, succeeded};
use crate::harness::*;

/// The window the tests run under.
const WINDOW: Duration = Duration::from_secs(10);

/// Waits for a fresh window of `WINDOW`, so that a test's requests fit in one.
async fn fresh_window() {
    let ms = WINDOW.as_millis() as u64;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    if now % ms > 200 {
        tokio::time::sleep(Duration::from_millis(ms - now % ms + 20)).await;
    }
}

fn chat() -> Value {
    json!({"model": "sim/sim-gpt", "max_tokens": 5,
           "messages": [{"role": "user", "content": "hello there, how are you today?"}]})
}

/// Sets `body` on key `key_id` of the env's user, as its owner would.
async fn patch_key(env: &Env, key_id: i64, body: Value) -> Answer {
    let token = env.gw.gateway.auth.issue(env.user_id).access_token;
    let url = env.url(&format!("/api/v1/keys/{key_id}"));
    env.call_as(&token, "PATCH", &url, Some(body)).await
}

fn header_u64(a: &Answer, name: &str) -> u64 {
    a.header(name)
        .unwrap_or_else(|| panic!("no {name}"))
        .parse()
        .unwrap()
}

/// Tokens used, by the model-usage rows.
fn used_tokens(env: &Env) -> u64 {
    env.store()
        .model_usage_rows()
        .unwrap()
        .iter()
        .map(|r| (r.input_tokens + r.output_tokens) as u64)
        .sum()
}

#[tokio::test]
async fn a_keys_tpm_admits_until_the_used_tokens_reach_it_then_429_until_the_window_moves() {
    let env = llm_env(|c| c.limit_window = WINDOW).await;
    env.grant("10");
    let key_id = env.store().keys_of(env.user_id).unwrap()[0].id;
    // Bad limits: 400 naming the field, nothing set.
    for (bad, field) in [(json!({"tpm": 0}), "tpm"), (json!({"rpm": "ten"}), "rpm")] {
        let a = patch_key(&env, key_id, bad).await;
        a.expect(400);
        assert!(
            a.json["message"].as_str().unwrap().contains(field),
            "{}",
            a.text
        );
    }
    let a = patch_key(&env, key_id, json!({"tpm": 1000, "rpm": 100})).await;
    a.expect(200);
    assert_eq!(
        (a.json["tpm"].as_u64(), a.json["rpm"].as_u64()),
        (Some(1000), Some(100))
    );

    fresh_window().await;
    let mut admitted = 0u64;
    let mut bound = 0u64;
    let refused = loop {
        let a = env.api("/chat/completions", chat()).await;
        if a.status == 429 {
            break a;
        }
        a.expect(200);
        admitted += 1;
        assert_eq!(header_u64(&a, "x-ratelimit-limit-tokens"), 1000);
        assert_eq!(header_u64(&a, "x-ratelimit-limit-requests"), 100);
        // Requests count one each; the tokens' remaining is after this
        // request's bound (the earlier ones settled to what they used).
        assert_eq!(
            header_u64(&a, "x-ratelimit-remaining-requests"),
            100 - admitted
        );
        let remaining = header_u64(&a, "x-ratelimit-remaining-tokens");
        bound = bound.max(1000 - remaining - (used_tokens(&env) - used_of_last(&env)));
        assert!(a.header("x-ratelimit-reset-tokens").is_some());
        assert!(admitted < 200, "never limited");
    };
    // Each request used far less than its bound: more were admitted than
    // the bounds alone would allow, and the used tokens reached the limit.
    let used = used_tokens(&env);
    assert!(
        admitted > 1000 / bound,
        "{admitted} admitted, bound {bound}"
    );
    assert!(
        used >= 1000 && used < 1000 + bound,
        "used {used}, bound {bound}"
    );
    // Refused in format 2, with Retry-After, nothing held or charged.
    let message = envelope(&refused, 429);
    assert!(message.contains("1000 tokens"), "{message}");
    let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=WINDOW.as_secs()).contains(&wait), "{wait}");
    let rows = env.store().model_usage_rows().unwrap().len();
    assert_eq!(rows as u64, admitted);
    env.wait_no_holds().await;
    // The window moves: admitted again.
    tokio::time::sleep(Duration::from_secs(wait)).await;
    let a = env.api("/chat/completions", chat()).await;
    a.expect(200);
    assert_eq!(env.store().model_usage_rows().unwrap().len(), rows + 1);
}

/// The tokens of the last model-usage row.
fn used_of_last(env: &Env) -> u64 {
    env.store()
        .model_usage_rows()
        .unwrap()
        .last()
        .map_or(0, |r| (r.input_tokens + r.output_tokens) as u64)
}

#[tokio::test]
async fn a_models_rpm_per_user_from_the_providers_file_and_a_keys_limits_by_the_cli() {
    let env = env_with_providers(
        |url| providers_toml(url).replace("aliases = [\"gpt\"]", "aliases = [\"gpt\"]\nrpm = 2"),
        |c| c.limit_window = WINDOW,
    )
    .await;
    env.grant("10");
    fresh_window().await;
    for left in [1, 0] {
        let a = env.api("/chat/completions", chat()).await;
        a.expect(200);
        assert_eq!(header_u64(&a, "x-ratelimit-limit-requests"), 2);
        assert_eq!(header_u64(&a, "x-ratelimit-remaining-requests"), left);
        assert!(a.header("x-ratelimit-limit-tokens").is_none());
    }
    let a = env.api("/chat/completions", chat()).await;
    a.expect(429);
    assert!(a.header("retry-after").is_some());
    assert_eq!(env.store().model_usage_rows().unwrap().len(), 2);
    // Another user has a window of their own.
    let (other, key) = env.new_user("other@example.com");
    use runtime::store::Ledger;
    env.store()
        .grant_credit(other, d("1"), Some("test"))
        .unwrap();
    let a = env
        .call_as(
            &key,
            "POST",
            &env.url("/api/v1/chat/completions"),
            Some(chat()),
        )
        .await;
    a.expect(200);

    // The CLI sets a key's limits; `keys list` prints them.
    let key_id = env.store().keys_of(env.user_id).unwrap()[0].id;
    let id = key_id.to_string();
    succeeded(gateway_cli(
        &env.dir,
        &["keys", "update", &id, "--rpm", "7", "--tpm", "900"],
    ));
    let k = &env.store().keys_of(env.user_id).unwrap()[0];
    assert_eq!((k.rpm, k.tpm), (Some(7), Some(900)));
    let list = succeeded(gateway_cli(
        &env.dir,
        &["keys", "list", "--user", &env.user_id.to_string()],
    ));
    assert!(list.lines().next().unwrap().ends_with("\t7\t900"), "{list}");
    succeeded(gateway_cli(
        &env.dir,
        &["keys", "update", &id, "--rpm", "0"],
    ));
    let k = &env.store().keys_of(env.user_id).unwrap()[0];
    assert_eq!((k.rpm, k.tpm), (None, Some(900)));
}

#[tokio::test]
async fn two_instances_share_a_keys_tpm_exactly_through_redis() {
    let Some(pair) = llm_pair_with("two_instances_share_a_keys_tpm", |c| {
        c.limit_window = WINDOW
    })
    .await
    else {
        return;
    };
    let env = &pair.a;
    env.grant("10");
    let key_id = env.store().keys_of(env.user_id).unwrap()[0].id;
    patch_key(env, key_id, json!({"tpm": 2000}))
        .await
        .expect(200);
    fresh_window().await;
    let calls = (0..48).map(|i| {
        let url = if i % 2 == 0 {
            pair.url_a("/api/v1/chat/completions")
        } else {
            pair.url_b("/api/v1/chat/completions")
        };
        async move { env.call_as(&env.key, "POST", &url, Some(chat())).await }
    });
    let answers = join_all(calls).await;
    let ok: Vec<&Answer> = answers.iter().filter(|a| a.status == 200).collect();
    let limited = answers.iter().filter(|a| a.status == 429).count();
    assert_eq!(ok.len() + limited, answers.len());
    assert!(limited > 0, "never limited");
    // What one request can count: its bound (the first answer's count
    // against a fresh window is at most the bound).
    let bound = ok
        .iter()
        .map(|a| 2000 - header_u64(a, "x-ratelimit-remaining-tokens").min(2000))
        .min()
        .unwrap();
    let used = used_tokens(env);
    assert_eq!(env.store().model_usage_rows().unwrap().len(), ok.len());
    assert!(used <= 2000 + bound, "used {used} > 2000 + bound {bound}");
    // The window's counter is Redis's, shared.
    let counters: Vec<String> = pair
        .redis(redis::cmd("KEYS").arg(format!("{}tl:key:{key_id}:t:*", pair.prefix)))
        .await;
    assert!(!counters.is_empty());
}
