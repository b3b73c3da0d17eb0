//! The job follower: jobs nobody GETs (and no webhook reports) are polled
//! upstream to the end, billed once, called back once and mirrored once;
//! after a restart and across instances sharing the database too.

use std::time::Duration;

use runtime::store::{Assets, Jobs, Webhooks};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::harness::*;

const PRICES: &str = "stt.audio_seconds=0.01";

fn priced(c: &mut runtime::config::Config) {
    c.prices = runtime::billing::Prices::parse(Some(PRICES), "20").unwrap();
}

/// Waits (generously) until `done` holds.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..400 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn stt_job(env: &Env, callback_uri: Option<&str>) -> String {
    let up = env.upload("in.wav", wav(2.0), Some("stt_input")).await;
    up.expect(200);
    let mut body = json!({"audio_url": up.json["url"]});
    if let Some(uri) = callback_uri {
        body["callback_uri"] = json!(uri);
    }
    let a = env.post("/stt", body).await;
    assert!(a.status == 200 || a.status == 202, "{}", a.text);
    a.json["job_id"].as_str().unwrap().to_owned()
}

fn job_charges(env: &Env, kind: &str, job: &str) -> Vec<runtime::store::UsageRow> {
    let key = format!("job:{kind}:{job}");
    env.usage()
        .into_iter()
        .filter(|u| u.once_key.as_deref() == Some(key.as_str()))
        .collect()
}

fn job_gets(reqs: &[Value], job: &str) -> usize {
    reqs.iter()
        .filter(|r| {
            r["method"] == "GET"
                && r["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with(&format!("/{job}")))
        })
        .count()
}

/// Exactly one signed callback for `job`, completed; and exactly one charge
/// for it and for each of `others`, debited once from a balance of 10.
async fn assert_called_back_and_billed_once(
    env: &Env,
    rx: &Receiver,
    job: &str,
    others: &[String],
) {
    let jobs: Vec<&str> = std::iter::once(job)
        .chain(others.iter().map(String::as_str))
        .collect();
    eventually("the callback", || !rx.seen.lock().unwrap().is_empty()).await;
    eventually("every charge", || {
        jobs.iter().all(|j| !job_charges(env, "stt", j).is_empty())
    })
    .await;
    // Time for a duplicate to show up, were there one.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let seen = rx.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "one callback");
    let secret = env.store().callback_secret(env.user_id).unwrap().unwrap();
    let (sig, body) = &seen[0];
    runtime::signing::verify(secret.as_bytes(), body, sig.as_deref())
        .expect("signed with the user's callback secret");
    let v: Value = serde_json::from_slice(body).unwrap();
    assert_eq!(
        (v["job_id"].as_str(), v["status"].as_str()),
        (Some(job), Some("completed"))
    );
    let mut total = Decimal::ZERO;
    for j in &jobs {
        let charges = job_charges(env, "stt", j);
        assert_eq!(charges.len(), 1, "{j}: {charges:#?}");
        let charge = &charges[0];
        assert_eq!(charge.user_id, Some(env.user_id));
        assert_eq!(charge.route_id, "stt.submit");
        assert!(charge.charged > Decimal::ZERO, "{charge:#?}");
        total += charge.charged;
        let row = env.store().job("stt", j).unwrap().unwrap();
        assert_eq!((row.status.as_str(), row.billed), ("completed", true));
        assert_eq!(row.follow_next_at, None, "no longer followed");
    }
    let all: Decimal = env.usage().iter().map(|u| u.charged).sum();
    assert_eq!(all, total, "each job charged once, nothing else");
    assert_eq!(env.balance(), Decimal::from(10) - total);
}

#[tokio::test]
async fn a_job_nobody_gets_is_called_back_and_billed_once() {
    let env = Env::with(|c| {
        follow_fast(c);
        priced(c);
    })
    .await;
    env.grant("10");
    let rx = receiver(0).await;
    let job = stt_job(&env, Some(&rx.url)).await;
    assert_called_back_and_billed_once(&env, &rx, &job, &[]).await;
    // The follower asked the upstream; the caller never did.
    assert!(job_gets(&env.sim_requests().await, &job) >= 1);
    assert!(env.audit().iter().all(|a| a.route_id != "stt.get"));
}

#[tokio::test]
async fn a_disabled_follower_polls_nothing_and_bills_nothing() {
    let env = Env::with(|c| {
        priced(c);
        c.job_follow_interval = None; // GATEWAY_JOB_FOLLOW_SECS=0
    })
    .await;
    env.grant("10");
    let rx = receiver(0).await;
    let job = stt_job(&env, Some(&rx.url)).await;
    // Long past the simulator's job duration and the first poll's time.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(job_gets(&env.sim_requests().await, &job), 0, "no job GET");
    assert!(job_charges(&env, "stt", &job).is_empty());
    assert_eq!(env.balance(), Decimal::from(10));
    assert!(rx.seen.lock().unwrap().is_empty());
    let row = env.store().job("stt", &job).unwrap().unwrap();
    assert!(!row.billed && row.status != "completed", "{row:?}");
    assert!(row.follow_next_at.is_some(), "still scheduled for later");
}

#[tokio::test]
async fn a_mirrored_kind_is_stored_once_and_a_later_get_answers_the_copy() {
    let env = Env::with(follow_fast).await;
    let up = env
        .upload("noisy.wav", wav(1.0), Some("audio_job_input"))
        .await;
    let a = env
        .post("/enhance", json!({"audio_url": up.json["url"]}))
        .await;
    assert!(a.status == 200 || a.status == 202, "{}", a.text);
    let job = a.json["job_id"].as_str().unwrap().to_owned();
    eventually("the follower's copy", || {
        let row = env.store().job("enhance", &job).unwrap().unwrap();
        row.status == "completed" && row.billed && row.mirror_asset_id.is_some()
    })
    .await;
    let mirrors = |env: &Env| {
        env.store()
            .assets()
            .unwrap()
            .into_iter()
            .filter(|a| a.class == "mirror")
            .count()
    };
    assert_eq!(mirrors(&env), 1, "one stored copy");
    assert_eq!(job_charges(&env, "enhance", &job).len(), 1);
    env.clear_sim_log().await;
    let got = env.get(&format!("/enhance/{job}")).await;
    got.expect(200);
    let audio_url = got.json["audio_url"].as_str().expect("audio_url");
    let row = env.store().job("enhance", &job).unwrap().unwrap();
    let asset = env
        .store()
        .asset(row.mirror_asset_id.unwrap())
        .unwrap()
        .unwrap();
    assert!(
        audio_url.contains(&asset.object_key),
        "{audio_url} is the stored copy {}",
        asset.object_key
    );
    let media = env
        .sim_requests()
        .await
        .iter()
        .filter(|r| r["path"].as_str().unwrap().starts_with("/__sim/media/"))
        .count();
    assert_eq!(media, 0, "the GET did not fetch the result again");
    assert_eq!(mirrors(&env), 1);
    assert_eq!(job_charges(&env, "enhance", &job).len(), 1, "billed once");
}

#[tokio::test]
async fn a_restarted_gateway_finishes_jobs_recorded_before() {
    // The first instance does not follow: the job is only recorded.
    let env = Env::with(priced).await;
    env.grant("10");
    let rx = receiver(0).await;
    let job = stt_job(&env, Some(&rx.url)).await;
    let Env {
        sim,
        gw,
        dir,
        key,
        user_id,
        client,
    } = env;
    gw.stop().await;
    let mut config = config_for(&sim, &dir);
    follow_fast(&mut config);
    priced(&mut config);
    let gw = server::start(config, TcpListener::bind("127.0.0.1:0").await.unwrap()).unwrap();
    let env = Env {
        sim,
        gw,
        dir,
        key,
        user_id,
        client,
    };
    assert_called_back_and_billed_once(&env, &rx, &job, &[]).await;
}

#[tokio::test]
async fn two_instances_on_one_database_call_back_and_bill_once() {
    let env = Env::with(|c| {
        follow_fast(c);
        priced(c);
    })
    .await;
    let mut config = config_for(&env.sim, &env.dir);
    follow_fast(&mut config);
    priced(&mut config);
    let other = server::start(config, TcpListener::bind("127.0.0.1:0").await.unwrap()).unwrap();
    env.grant("10");
    let rx = receiver(0).await;
    let mut jobs = Vec::new();
    for _ in 0..3 {
        jobs.push(stt_job(&env, None).await);
    }
    let job = stt_job(&env, Some(&rx.url)).await;
    assert_called_back_and_billed_once(&env, &rx, &job, &jobs).await;
    other.stop().await;
}

#[tokio::test]
async fn network_errors_back_off_and_the_job_still_finishes() {
    let env = Env::with(|c| {
        follow_fast(c);
        priced(c);
    })
    .await;
    env.grant("10");
    let rx = receiver(0).await;
    let up = env.upload("in.wav", wav(2.0), Some("stt_input")).await;
    // The job's upstream id is known only after submission: fail every job
    // GET three times, whichever job it is.
    env.fault(
        json!({"path": "/api/v2/speech-to-text/*", "method": "GET", "fault": "reset", "count": 3}),
    )
    .await;
    let a = env
        .post(
            "/stt",
            json!({"audio_url": up.json["url"], "callback_uri": rx.url}),
        )
        .await;
    assert!(a.status == 200 || a.status == 202, "{}", a.text);
    let job = a.json["job_id"].as_str().unwrap().to_owned();
    assert_called_back_and_billed_once(&env, &rx, &job, &[]).await;
    let row = env.store().job("stt", &job).unwrap().unwrap();
    assert!(
        row.follow_attempts >= 4,
        "three failed polls, then one: {row:?}"
    );
}

#[tokio::test]
async fn a_job_the_upstream_does_not_know_is_given_up_after_bounded_polls() {
    let env = Env::with(|c| {
        follow_fast(c);
        priced(c);
    })
    .await;
    env.grant("10");
    let job = stt_job(&env, None).await;
    env.fault(json!({"path": format!("/api/v2/speech-to-text/{job}"), "method": "GET", "fault": {"status": 404}, "count": 0}))
        .await;
    eventually("the follower to give up", || {
        env.store()
            .job("stt", &job)
            .unwrap()
            .unwrap()
            .follow_next_at
            .is_none()
    })
    .await;
    let polls = job_gets(&env.sim_requests().await, &job);
    assert_eq!(
        polls,
        runtime::follower::NOT_FOUND_ATTEMPTS as usize,
        "bounded"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        job_gets(&env.sim_requests().await, &job),
        polls,
        "no more polls"
    );
    let row = env.store().job("stt", &job).unwrap().unwrap();
    assert!(
        row.status != "failed" && row.status != "completed" && !row.billed,
        "kept as it was, not marked failed: {row:?}"
    );
    assert!(job_charges(&env, "stt", &job).is_empty());
}
