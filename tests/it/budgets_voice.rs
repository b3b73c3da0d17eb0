//! Budgets per key on the voice API (#27): a billed voice request made
//! with a budgeted key holds its most possible charge in the same atomic
//! step as the budget's check (synthesis: its text's bound, 0.2 s a
//! character), so concurrent requests cannot overshoot; refused ones are
//! 402 in `detail` naming the budget, with no upstream call; a job's charge,
//! made when it completes, counts in the spend of the key it was submitted
//! with, whoever observes the completion.

use futures_util::future::join_all;
use runtime::store::{Jobs, Keys, Ledger};
use rust_decimal::Decimal;
use serde_json::json;
use tokio::net::TcpListener;

use crate::harness::*;

/// 50 characters: 10 s of audio at the simulator's (and the bound's) 0.2 s
/// a character, 0.005 USD at 0.0005 a second without markup.
const TEXT: &str = "Fifty characters of text, bound to ten seconds ok.";
const ONE: &str = "0.005";

pub(crate) fn budget_key(env: &Env, usd: &str, period: &str) -> (i64, String) {
    let b = runtime::store::Budget::parse(usd, period).unwrap();
    runtime::auth::create_named_key(env.store(), env.user_id, None, Some(b)).unwrap()
}

async fn spent_today(env: &Env, key_id: i64) -> Vec<String> {
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let sql = format!("SELECT spent FROM key_spend WHERE key_id = {key_id} AND period = '{today}'");
    own_query(env, &sql)
        .await
        .into_iter()
        .map(|r| r[0].clone())
        .collect()
}

fn no_markup(c: &mut runtime::config::Config) {
    c.prices = runtime::billing::Prices::parse(None, "0").unwrap();
    c.rate_limits = runtime::ratelimit::Limits::parse(Some("tts=off")).unwrap();
}

/// A simulator whose speech lasts 0.2 s a character: the bound exactly.
async fn slow_speech_sim() -> sim::Sim {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    sim::start(
        l,
        sim::SimConfig {
            api_key: Some(PROVIDER_KEY.to_owned()),
            seconds_per_char: 0.2,
            ..Default::default()
        },
    )
    .await
}

#[tokio::test]
async fn concurrent_synthesis_against_a_budget_of_five_serves_exactly_five() {
    assert_eq!(TEXT.chars().count(), 50);
    let env = Env::on_sim(slow_speech_sim().await, no_markup).await;
    let (key_id, key) = budget_key(&env, "0.025", "day");
    let url = env.voice("/tts/synthesize");
    let calls = (0..16).map(|_| env.call_as(&key, "POST", &url, Some(synth_body(TEXT))));
    let answers = join_all(calls).await;
    let served = answers.iter().filter(|a| a.status == 200).count();
    assert_eq!(
        served,
        5,
        "{:?}",
        answers.iter().map(|a| a.status).collect::<Vec<_>>()
    );
    for a in answers.iter().filter(|a| a.status != 200) {
        a.expect(402);
        let m = a.detail();
        assert!(
            m.contains("budget") && m.contains("0.025 USD per day") && m.contains("0.00500000"),
            "{m}"
        );
    }
    for a in answers.iter().filter(|a| a.status == 200) {
        assert_eq!(
            a.json["billing"]["charged"],
            json!("0.00500000"),
            "{}",
            a.text
        );
    }
    let synth_calls = env
        .sim_requests()
        .await
        .iter()
        .filter(|r| r["path"].as_str().unwrap_or("").contains("synthesize"))
        .count();
    assert_eq!(synth_calls, 5);
    // No hold left; five charges, and the key's spend is their sum.
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
    let charges: Vec<Decimal> = env.usage().iter().map(|u| u.charged).collect();
    assert_eq!(charges.len(), 5, "{charges:?}");
    let total: Decimal = charges.iter().sum();
    assert_eq!(total, d(ONE) * Decimal::from(5));
    assert_eq!(
        spent_today(&env, key_id).await,
        vec!["0.02500000".to_owned()]
    );
    let b = env
        .store()
        .keys_of(env.user_id)
        .unwrap()
        .into_iter()
        .find(|k| k.id == key_id)
        .unwrap()
        .budget
        .unwrap();
    assert_eq!((b.spent, b.held), (total, Decimal::ZERO));
}

#[tokio::test]
async fn a_synthesis_whose_bound_does_not_fit_is_refused_and_a_failed_one_releases_its_hold() {
    let env = Env::on_sim(slow_speech_sim().await, no_markup).await;
    // Less than one request's bound (0.005).
    let (key_id, key) = budget_key(&env, "0.004", "total");
    let url = env.voice("/tts/synthesize");
    let a = env
        .call_as(&key, "POST", &url, Some(synth_body(TEXT)))
        .await;
    a.expect(402);
    assert!(a.detail().contains("0.004 USD in total"), "{}", a.text);
    env.assert_no_upstream_call().await;
    assert!(env.usage().is_empty());
    // An upstream failure: the hold is released, nothing is spent.
    let (ok_id, ok_key) = budget_key(&env, "1", "total");
    env.fault(json!({"path": "/synthesize", "fault": {"status": 500}}))
        .await;
    let a = env
        .call_as(&ok_key, "POST", &url, Some(synth_body(TEXT)))
        .await;
    assert!(a.status >= 500, "{}", a.text);
    env.wait_no_holds().await;
    assert!(env.usage().is_empty(), "{:?}", env.usage());
    for id in [key_id, ok_id] {
        let sql = format!("SELECT spent FROM key_spend WHERE key_id = {id}");
        assert!(own_query(&env, &sql).await.is_empty());
    }
}

#[tokio::test]
async fn a_jobs_charge_counts_in_the_spend_of_the_key_it_was_submitted_with() {
    let env = Env::with(|c| {
        c.prices = runtime::billing::Prices::parse(Some("stt.audio_seconds=0.01"), "0").unwrap();
    })
    .await;
    let (key_id, key) = budget_key(&env, "5", "month");
    let up = env.upload("in.wav", wav(2.0), Some("stt_input")).await;
    up.expect(200);
    let a = env
        .call_as(
            &key,
            "POST",
            &env.voice("/stt"),
            Some(json!({"audio_url": up.json["url"]})),
        )
        .await;
    assert!(a.status == 200 || a.status == 202, "{}", a.text);
    let job = a.json["job_id"].as_str().unwrap().to_owned();
    let row = env.store().job("stt", &job).unwrap().unwrap();
    assert_eq!(row.key_id, Some(key_id));
    assert!(env.usage().iter().all(|u| u.charged.is_zero()));
    // Completed, and observed by a GET made with the user's other key (no
    // budget): the charge counts in the submitting key's spend.
    env.complete_job(&job).await;
    env.get(&format!("/stt/{job}")).await.expect(200);
    let charged: Decimal = env.usage().iter().map(|u| u.charged).sum();
    assert!(charged > Decimal::ZERO);
    let month = chrono::Utc::now().format("%Y-%m").to_string();
    let sql = format!("SELECT period, spent FROM key_spend WHERE key_id = {key_id}");
    let rows = own_query(&env, &sql).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0][0].as_str(), d(&rows[0][1])),
        (month.as_str(), charged)
    );
    let plain = env.store().keys_of(env.user_id).unwrap()[0].id;
    let sql = format!("SELECT spent FROM key_spend WHERE key_id = {plain}");
    assert!(own_query(&env, &sql).await.is_empty());
}

#[tokio::test]
async fn concurrent_per_request_searches_against_a_budget_of_two_serve_exactly_two() {
    let env = Env::with(|c| {
        c.prices = runtime::billing::Prices::parse(Some("identity.searches=0.01"), "0").unwrap();
    })
    .await;
    let (key_id, key) = budget_key(&env, "0.02", "total");
    let up = env.upload("in.wav", wav(1.0), None).await;
    up.expect(200);
    env.clear_sim_log().await;
    let url = env.voice("/identity/search");
    let body = json!({"audio_url": up.json["url"], "top_k": 3});
    let calls = (0..6).map(|_| env.call_as(&key, "POST", &url, Some(body.clone())));
    let answers = join_all(calls).await;
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        2,
        "{statuses:?}"
    );
    for a in answers.iter().filter(|a| a.status != 200) {
        a.expect(402);
        assert!(a.detail().contains("0.02 USD in total"), "{}", a.text);
    }
    let searches = env
        .sim_requests()
        .await
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .unwrap_or("")
                .ends_with("/identity/search")
        })
        .count();
    assert_eq!(searches, 2);
    let charged: Vec<Decimal> = env
        .usage()
        .iter()
        .filter(|u| u.route_id == "identity.search")
        .map(|u| u.charged)
        .collect();
    assert_eq!(charged, vec![d("0.01"), d("0.01")]);
    let sql = format!("SELECT spent FROM key_spend WHERE key_id = {key_id}");
    assert_eq!(
        own_query(&env, &sql).await,
        vec![vec!["0.02000000".to_owned()]]
    );
    env.wait_no_holds().await;
}
