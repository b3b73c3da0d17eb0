//! Budgets on the voice API, issue #37 (findings 5 and 7).
//!
//! * What is measured is what is billed: a synthesis whose audio outlasts
//!   its text's bound (the hold, 0.2 s a character) is billed the measured
//!   seconds; the key's spend goes past its budget by that one request, the
//!   key listing shows it (`spent_usd` above `budget_usd`), and the next
//!   request is refused.
//! * A voice job's submit holds its bound (its input's measured seconds when
//!   the input is the caller's own upload, else the kind's ceiling from the
//!   table), so concurrent and sequential submits are accepted exactly as far
//!   as the budget covers their holds; the job's completion (a GET, the
//!   webhook, the follower) settles it, a failure releases it, and the hold
//!   outlives a restart of the gateway.

use futures_util::future::join_all;
use runtime::store::Ledger;
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

/// The provider's calls to `path` (a suffix) so far.
async fn calls_to(env: &Env, path: &str) -> usize {
    env.sim_requests()
        .await
        .iter()
        .filter(|r| r["method"] == "POST" && r["path"].as_str().unwrap_or("").ends_with(path))
        .count()
}

/// The charges of job `job` of `kind` (its once-keyed usage records).
fn job_charges(env: &Env, kind: &str, job: &str) -> Vec<Decimal> {
    let key = format!("job:{kind}:{job}");
    env.usage()
        .into_iter()
        .filter(|u| u.once_key.as_deref() == Some(key.as_str()))
        .map(|u| u.charged)
        .collect()
}

fn charged_in_all(env: &Env) -> Decimal {
    env.usage().iter().map(|u| u.charged).sum()
}

/// A caller's own upload of a 2-second WAV: its presigned URL.
async fn own_upload(env: &Env) -> String {
    let up = env.upload("in.wav", wav(2.0), Some("stt_input")).await;
    up.expect(200);
    up.json["url"].as_str().unwrap().to_owned()
}

async fn submit(env: &Env, key: &str, path: &str, audio_url: &str) -> Answer {
    env.call_as(
        key,
        "POST",
        &env.voice(path),
        Some(json!({"audio_url": audio_url})),
    )
    .await
}

fn accepted(a: &Answer) -> String {
    assert!(a.status == 200 || a.status == 202, "{}", a.text);
    a.json["job_id"].as_str().unwrap().to_owned()
}

/// A refusal for the key's budget, naming it and the hold that did not fit.
fn refused(a: &Answer, budget: &str, hold: &str) {
    a.expect(402);
    let m = a.detail();
    assert!(
        m.contains(&format!("budget is {budget}")) && m.contains(&format!("may cost up to {hold}")),
        "{m}"
    );
}

/// A submit of `audio_url` with `key` refused for the key's budget (see
/// [`refused`]), before any upstream call.
async fn refused_before_any_call(
    env: &Env,
    key: &str,
    path: &str,
    audio_url: &str,
    budget: &str,
    hold: &str,
) {
    env.clear_sim_log().await;
    refused(&submit(env, key, path, audio_url).await, budget, hold);
    env.assert_no_upstream_call().await;
}

/// A key with a budget of `usd` per `period` and the URL of the caller's
/// own 2-second upload (held 0.02 at 0.01 a second), the provider's log
/// cleared.
async fn key_and_upload(env: &Env, usd: &str, period: &str) -> (i64, String, String) {
    let (key_id, key) = budget_key(env, usd, period);
    let audio = own_upload(env).await;
    env.clear_sim_log().await;
    (key_id, key, audio)
}

/// Posts the provider's signed event for `job` of `kind`.
async fn webhook(env: &Env, kind: &str, job: &str, item: Value) {
    let body = json!({"event": "job.updated", "kind": kind, "id": job, "item": item}).to_string();
    let a = Answer::from(
        env.client
            .post(env.voice("/webhooks/provider"))
            .header("content-type", "application/json")
            .header(
                "x-provider-signature",
                runtime::signing::sign(SECRET.as_bytes(), body.as_bytes()),
            )
            .body(body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    a.expect(200);
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

#[tokio::test]
async fn concurrent_job_submits_are_accepted_as_far_as_their_holds_fit_and_settle_on_completion() {
    let env = env_with(|_| {}).await;
    // Five holds of a 2-second upload at 0.01 a second.
    let (key_id, key, audio) = key_and_upload(&env, "0.1", "total").await;
    let answers = join_all((0..12).map(|_| submit(&env, &key, "/stt", &audio))).await;
    let jobs: Vec<String> = answers
        .iter()
        .filter(|a| a.status != 402)
        .map(accepted)
        .collect();
    assert_eq!(
        jobs.len(),
        5,
        "{:?}",
        answers.iter().map(|a| a.status).collect::<Vec<_>>()
    );
    for a in answers.iter().filter(|a| a.status == 402) {
        refused(a, "0.1 USD in total", "0.02000000");
    }
    assert_eq!(calls_to(&env, "/speech-to-text").await, 5);
    // Held, not charged.
    assert_eq!(
        spent_and_held(&env, key_id).await,
        figures("0.00000000", "0.10000000")
    );
    assert_eq!(charged_in_all(&env), Decimal::ZERO);
    // A further submit's hold does not fit: 402 before any call.
    refused_before_any_call(&env, &key, "/stt", &audio, "0.1 USD in total", "0.02000000").await;
    // Each completion, seen by a GET made with the user's other key,
    // charges its measured 2 s and ends its hold in the same step.
    for (i, job) in jobs.iter().enumerate() {
        env.complete_job(job).await;
        env.get(&format!("/stt/{job}")).await.expect(200);
        assert_eq!(job_charges(&env, "stt", job), vec![d("0.02")]);
        let done = Decimal::from(i as u64 + 1) * d("0.02");
        assert_eq!(
            spent_and_held(&env, key_id).await,
            (
                runtime::billing::format_money(done),
                runtime::billing::format_money(d("0.1") - done)
            )
        );
    }
    assert_eq!(charged_in_all(&env), d("0.1"));
    assert!(env.store().holds_of(env.user_id).unwrap().is_empty());
    // Spent: a sequential submit is refused, with no upstream call.
    refused_before_any_call(&env, &key, "/stt", &audio, "0.1 USD in total", "0.02000000").await;
}

#[tokio::test]
async fn sequential_submits_fit_their_holds_a_failed_job_releases_its_own_and_a_webhook_settles() {
    let env = env_with(|_| {}).await;
    // Room for two holds of 0.02, not three.
    let (key_id, key, audio) = key_and_upload(&env, "0.05", "day").await;
    let first = accepted(&submit(&env, &key, "/stt", &audio).await);
    let second = accepted(&submit(&env, &key, "/stt", &audio).await);
    refused(
        &submit(&env, &key, "/stt", &audio).await,
        "0.05 USD per day",
        "0.02000000",
    );
    assert_eq!(calls_to(&env, "/speech-to-text").await, 2);
    assert_eq!(
        spent_and_held(&env, key_id).await,
        figures("0.00000000", "0.04000000")
    );
    // The first fails: seen by a GET, its hold is released, nothing charged.
    env.fail_job(&first).await;
    let a = env.get(&format!("/stt/{first}")).await;
    a.expect(200);
    assert_eq!(a.json["status"], json!("failed"), "{}", a.text);
    assert_eq!(
        spent_and_held(&env, key_id).await,
        figures("0.00000000", "0.02000000")
    );
    assert_eq!(charged_in_all(&env), Decimal::ZERO);
    // Its room is free again.
    let third = accepted(&submit(&env, &key, "/stt", &audio).await);
    // The second completes, told by the provider's webhook: 3 s measured by
    // the provider, charged 0.03 (more than the 0.02 held: billed as measured).
    webhook(
        &env,
        "stt",
        &second,
        json!({"uuid": second, "status": "completed", "text": "hi", "duration_seconds": 3}),
    )
    .await;
    assert_eq!(job_charges(&env, "stt", &second), vec![d("0.03")]);
    assert_eq!(
        spent_and_held(&env, key_id).await,
        figures("0.03000000", "0.02000000")
    );
    // 0.03 spent + 0.02 held: no room for another 0.02.
    refused_before_any_call(&env, &key, "/stt", &audio, "0.05 USD per day", "0.02000000").await;
    // The third fails, told by the webhook: released, charged nothing.
    webhook(
        &env,
        "stt",
        &third,
        json!({"uuid": third, "status": "failed"}),
    )
    .await;
    assert_eq!(
        spent_and_held(&env, key_id).await,
        figures("0.03000000", "0.00000000")
    );
    assert_eq!(charged_in_all(&env), d("0.03"));
    assert!(env.store().holds_of(env.user_id).unwrap().is_empty());
}

#[tokio::test]
async fn an_input_the_gateway_cannot_measure_holds_the_kinds_ceiling() {
    let env = env_with(|_| {}).await;
    // A URL the provider fetches itself: the gateway cannot measure it, so
    // the submit holds the table's ceiling for watermarking, 3600 s at
    // 0.0005 a second.
    let elsewhere = format!("{}/__sim/media/elsewhere.wav", env.sim.url());
    let (small_id, small, audio) = key_and_upload(&env, "1", "total").await;
    refused_before_any_call(
        &env,
        &small,
        "/watermark/apply",
        &elsewhere,
        "1 USD in total",
        "1.80000000",
    )
    .await;
    // The caller's own upload is measured: 2 s hold 0.001.
    let job = accepted(&submit(&env, &small, "/watermark/apply", &audio).await);
    assert_eq!(
        spent_and_held(&env, small_id).await,
        figures("0.00000000", "0.00100000")
    );
    // A budget that covers the ceiling: held, then settled at what the
    // provider measured (its default 5 s for media it could not read).
    let (big_id, big) = budget_key(&env, "2", "total");
    let far = accepted(&submit(&env, &big, "/watermark/apply", &elsewhere).await);
    assert_eq!(
        spent_and_held(&env, big_id).await,
        figures("0.00000000", "1.80000000")
    );
    for j in [&job, &far] {
        env.complete_job(j).await;
        env.get(&format!("/watermark/apply/{j}")).await.expect(200);
    }
    assert_eq!(job_charges(&env, "watermark_apply", &job), vec![d("0.001")]);
    assert_eq!(
        job_charges(&env, "watermark_apply", &far),
        vec![d("0.0025")]
    );
    assert_eq!(
        spent_and_held(&env, small_id).await,
        figures("0.00100000", "0.00000000")
    );
    assert_eq!(
        spent_and_held(&env, big_id).await,
        figures("0.00250000", "0.00000000")
    );
}

#[tokio::test]
async fn a_jobs_hold_outlives_a_restart_and_the_follower_settles_it() {
    const INSTANCE: &str = "voice-budgets";
    let env = env_with(|c| c.instance_id = Some(INSTANCE.into())).await;
    let (key_id, key) = budget_key(&env, "0.03", "total");
    let audio = own_upload(&env).await;
    let job = accepted(&submit(&env, &key, "/stt", &audio).await);
    let holds = env.store().holds_of(env.user_id).unwrap();
    assert_eq!(holds.len(), 1, "{holds:?}");
    assert_eq!(holds[0].1, None, "the job's hold names no instance");
    // The same instance again, now following jobs: its start releases the
    // holds of its previous run's requests, not the job's.
    let mut config = config_for(&env.sim, &env.dir);
    priced(&mut config);
    follow_fast(&mut config);
    config.instance_id = Some(INSTANCE.into());
    let env = env.restart(config).await;
    // Still held: a second submit does not fit (0.02 + 0.02 > 0.03). (An
    // upload again: the old URL names the old address.)
    assert_eq!(
        spent_and_held(&env, key_id).await,
        figures("0.00000000", "0.02000000")
    );
    let audio = own_upload(&env).await;
    refused_before_any_call(
        &env,
        &key,
        "/stt",
        &audio,
        "0.03 USD in total",
        "0.02000000",
    )
    .await;
    // The follower sees it complete: charged and released together.
    env.complete_job(&job).await;
    for _ in 0..400 {
        if env.store().holds_of(env.user_id).unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(job_charges(&env, "stt", &job), vec![d("0.02")]);
    assert_eq!(
        spent_and_held(&env, key_id).await,
        figures("0.02000000", "0.00000000")
    );
}
