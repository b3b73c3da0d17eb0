//! Budgets on the voice API, issue #37 (findings 5 and 7).
//!
//! * What is measured is what is billed: a synthesis whose audio outlasts
//!   its text's bound (the hold, 0.2 s a character) is billed the measured
//!   seconds; the key's spend goes past its budget by that one request, the
//!   key listing shows it (`spent_usd` above `budget_usd`), and the next
//!   request is refused.

use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::budgets::listed;
use crate::budgets_voice::budget_key;
use crate::harness::*;

/// 50 characters: a bound of 10 s, a hold of 0.005 at 0.0005 a second.
const TEXT: &str = "Fifty characters of text, bound to ten seconds ok.";
const SECRET: &str = "whsec-test-0123456789";

/// No markup, transcription at 0.01 a second, no rate limits in the way,
/// access tokens for the key listing, the webhook verified.
fn priced(c: &mut runtime::config::Config) {
    c.prices = runtime::billing::Prices::parse(Some("stt.audio_seconds=0.01"), "0").unwrap();
    c.rate_limits =
        runtime::ratelimit::Limits::parse(Some("tts=off,stt=off,watermark=off,uploads=off"))
            .unwrap();
    c.accounts.jwt_secret = Some(b"test-jwt-secret-0123456789".to_vec());
    c.webhook_secret = Some(SECRET.into());
}

/// A gateway whose simulated jobs stay pending until a test ends them.
async fn env_with(f: impl FnOnce(&mut runtime::config::Config)) -> Env {
    let env = Env::with(|c| {
        priced(c);
        f(c);
    })
    .await;
    env.sim_config(json!({"job_duration_ms": 600_000})).await;
    env
}

/// The key `id` as `GET /api/v1/keys` lists it.
async fn listing(env: &Env, id: i64) -> Value {
    let token = env.gw.gateway.auth.issue(env.user_id).access_token;
    let list = env
        .call_as(&token, "GET", &env.url("/api/v1/keys"), None)
        .await;
    list.expect(200);
    listed(&list, id)
}

/// `(spent_usd, held_usd)` of the key `id` in the listing.
async fn spent_and_held(env: &Env, id: i64) -> (String, String) {
    let k = listing(env, id).await;
    let text = |f: &str| k[f].as_str().unwrap_or_default().to_owned();
    (text("spent_usd"), text("held_usd"))
}

fn figures(spent: &str, held: &str) -> (String, String) {
    (spent.to_owned(), held.to_owned())
}

#[tokio::test]
async fn a_synthesis_longer_than_its_bound_is_billed_what_was_measured_and_the_key_shows_the_overshoot(
) {
    assert_eq!(TEXT.chars().count(), 50);
    let env = env_with(|_| {}).await;
    let (key_id, key) = budget_key(&env, "0.006", "total");
    // 0.5 s a character: 25 s of audio, 2.5 times the bound held for.
    env.sim_config(json!({"seconds_per_char": 0.5})).await;
    let url = env.voice("/tts/synthesize");
    let a = env
        .call_as(&key, "POST", &url, Some(synth_body(TEXT)))
        .await;
    a.expect(200);
    assert_eq!(a.json["audio_duration"], json!(25), "{}", a.json["billing"]);
    assert_eq!(
        a.json["billing"],
        json!({"unit": "audio_seconds", "quantity": 25, "charged": "0.01250000"})
    );
    assert_eq!(a.header("x-gateway-cost"), Some("0.01250000"));
    let synthesis = |env: &Env| -> Vec<runtime::store::UsageRow> {
        let rows = env.usage().into_iter();
        rows.filter(|u| u.route_id == "tts.synthesize").collect()
    };
    let usage = synthesis(&env);
    assert_eq!(usage.len(), 1, "{usage:?}");
    assert_eq!(
        (usage[0].quantity, usage[0].charged),
        (d("25"), d("0.0125"))
    );
    // The key's spend is what was charged: past its budget by this request.
    assert_eq!(env.balance(), d("-0.0125"));
    assert_eq!(
        spent_and_held(&env, key_id).await,
        figures("0.01250000", "0.00000000")
    );
    let k = listing(&env, key_id).await;
    assert_eq!(k["budget_usd"], json!("0.006"), "{k}");
    // Spent: the next request's hold does not fit; no upstream call.
    env.clear_sim_log().await;
    let a = env
        .call_as(&key, "POST", &url, Some(synth_body(TEXT)))
        .await;
    a.expect(402);
    assert!(
        a.detail()
            .contains("0.006 USD in total, 0.01250000 USD of it is spent or held"),
        "{}",
        a.text
    );
    env.assert_no_upstream_call().await;
    assert_eq!(synthesis(&env).len(), 1);
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
}
