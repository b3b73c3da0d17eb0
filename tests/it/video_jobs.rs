//! The general gateway's video jobs (area B, issue #12): a finished video
//! stored and billed once in seconds, listed for its owner only; a pending
//! job cancelled; failed jobs and submissions charge nothing; the follower
//! completes jobs nobody asks about.

use runtime::store::{Assets, Ledger, Videos};
use rust_decimal::Decimal;
use serde_json::json;

use crate::harness::*;

/// `GET`/`POST` of a video route as `key`.
async fn video(
    env: &Env,
    key: &str,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> Answer {
    env.call_as(
        key,
        method,
        &env.url(&format!("/api/v1/videos{path}")),
        body,
    )
    .await
}

fn charged_sum(env: &Env) -> Decimal {
    env.usage().iter().map(|u| u.charged).sum()
}

async fn submit(env: &Env) -> String {
    let a = video(
        env,
        &env.key,
        "POST",
        "/generations",
        Some(json!({"model": "sim/sim-video", "prompt": "waves at dusk", "seconds": 4, "size": "720x1280"})),
    )
    .await;
    a.expect(200);
    assert_eq!(a.json["status"], "pending", "{}", a.text);
    assert_eq!(a.json["model"], "sim/sim-video");
    a.json["job_id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_video_job_completes_is_stored_billed_once_and_listed_for_its_owner_only() {
    let env = media_env().await;
    env.grant("1");
    let id = submit(&env).await;
    // 4 s at 0.10 USD, +20 %, held until the job ends.
    assert_eq!(env.store().held(env.user_id).unwrap(), d("0.48"));
    assert!(env.usage().is_empty(), "nothing billed at submit");
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let a = video(&env, &env.key, "GET", &format!("/jobs/{id}"), None).await;
    a.expect(200);
    assert_eq!(a.json["status"], "completed", "{}", a.text);
    let url = a.json["video_url"].as_str().unwrap();
    assert!(url.starts_with(&env.gw.url()), "{url}");
    let r = env.client.get(url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(&r.bytes().await.unwrap()[4..8], b"ftyp");
    let assets = env.store().assets().unwrap();
    assert_eq!(assets.len(), 1);
    assert_eq!(assets[0].class, "video");
    let u = env.usage();
    assert_eq!(u.len(), 1);
    assert_eq!(
        (u[0].unit.as_str(), u[0].quantity, u[0].charged),
        ("video_seconds", d("4"), d("0.48"))
    );
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
    assert_eq!(env.balance(), d("0.52"));
    // Observed again: answered from the record, not billed or copied again.
    env.clear_sim_log().await;
    for _ in 0..3 {
        let a = video(&env, &env.key, "GET", &format!("/jobs/{id}"), None).await;
        a.expect(200);
        assert_eq!(a.json["status"], "completed");
    }
    env.assert_no_upstream_call().await;
    assert_eq!(charged_sum(&env), d("0.48"));
    assert_eq!(env.object_keys().len(), 1);
    // Listed for its owner only.
    let a = video(&env, &env.key, "GET", "/jobs?limit=10&skip=0", None).await;
    a.expect(200);
    let data = a.json["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["job_id"], json!(id));
    assert_eq!(a.json["total"], 1);
    let a = video(&env, &env.key, "GET", "/jobs?skip=1", None).await;
    assert!(a.json["data"].as_array().unwrap().is_empty());
    let (_, other) = env.new_user("other@example.com");
    let a = video(&env, &other, "GET", "/jobs", None).await;
    a.expect(200);
    assert!(a.json["data"].as_array().unwrap().is_empty());
    envelope(
        &video(&env, &other, "GET", &format!("/jobs/{id}"), None).await,
        404,
    );
    envelope(
        &video(
            &env,
            &other,
            "POST",
            &format!("/jobs/{id}/cancel"),
            Some(json!({})),
        )
        .await,
        404,
    );
    envelope(
        &video(&env, &env.key, "GET", "/jobs/video_nope", None).await,
        404,
    );
    // A finished job cannot be cancelled.
    envelope(
        &video(
            &env,
            &env.key,
            "POST",
            &format!("/jobs/{id}/cancel"),
            Some(json!({})),
        )
        .await,
        400,
    );
    assert_eq!(charged_sum(&env), d("0.48"));
}

#[tokio::test]
async fn a_pending_video_job_is_cancelled_and_not_charged() {
    let env = media_env().await;
    env.sim_config(json!({"job_duration_ms": 60000})).await;
    env.grant("1");
    let id = submit(&env).await;
    let a = video(
        &env,
        &env.key,
        "POST",
        &format!("/jobs/{id}/cancel"),
        Some(json!({})),
    )
    .await;
    a.expect(200);
    assert_eq!(a.json["status"], "cancelled");
    let a = video(&env, &env.key, "GET", &format!("/jobs/{id}"), None).await;
    assert_eq!(a.json["status"], "cancelled");
    envelope(
        &video(
            &env,
            &env.key,
            "POST",
            &format!("/jobs/{id}/cancel"),
            Some(json!({})),
        )
        .await,
        400,
    );
    nothing_charged(&env, d("1")).await;
    assert!(env.usage().is_empty());
    assert!(env.object_keys().is_empty());
}

#[tokio::test]
async fn failed_video_jobs_and_submissions_charge_nothing() {
    let env = media_env().await;
    env.sim_config(json!({"job_duration_ms": 60000})).await;
    env.grant("1");
    let id = submit(&env).await;
    let r = env
        .client
        .post(format!("{}/__sim/jobs/{id}/fail", env.sim.url()))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let a = video(&env, &env.key, "GET", &format!("/jobs/{id}"), None).await;
    a.expect(200);
    assert_eq!(a.json["status"], "failed");
    // A refused submission: no job, nothing held.
    env.fault(json!({"path": "/v1/videos", "method": "POST", "fault": {"status": 500}}))
        .await;
    let a = video(
        &env,
        &env.key,
        "POST",
        "/generations",
        Some(json!({"prompt": "rain"})),
    )
    .await;
    envelope(&a, a.status);
    assert!(a.status >= 500);
    for bad in [
        json!({"prompt": "rain", "seconds": 0}),
        json!({"prompt": "rain", "seconds": "61"}),
        json!({"prompt": "rain", "byok_api_key": "sk-mine"}),
        json!({"model": "sim/sim-video"}),
        json!({"prompt": "rain", "model": "sim/sim-tts"}),
    ] {
        envelope(
            &video(&env, &env.key, "POST", "/generations", Some(bad)).await,
            400,
        );
    }
    nothing_charged(&env, d("1")).await;
    assert!(env.usage().is_empty());
    let a = video(&env, &env.key, "GET", "/jobs", None).await;
    assert_eq!(a.json["total"], 1);
}

#[tokio::test]
async fn the_follower_completes_and_bills_a_video_job_nobody_asks_about() {
    let env = media_env_with(follow_fast).await;
    env.grant("1");
    let id = submit(&env).await;
    let start = std::time::Instant::now();
    loop {
        let job = env.store().video_job(&id).unwrap().unwrap();
        if job.status == "completed" {
            assert!(job.object_key.is_some());
            break;
        }
        assert!(start.elapsed().as_secs() < 10, "not followed: {job:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(charged_sum(&env), d("0.48"));
    assert_eq!(env.balance(), d("0.52"));
    let a = video(&env, &env.key, "GET", &format!("/jobs/{id}"), None).await;
    a.expect(200);
    assert_eq!(a.json["status"], "completed");
    assert!(a.json["video_url"].is_string());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(charged_sum(&env), d("0.48"), "billed once");
    assert_eq!(env.object_keys().len(), 1, "copied once");
}
