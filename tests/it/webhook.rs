//! Inbound webhook (spec §6) and job callbacks: signatures verified in
//! constant time, events stored whole and applied once, jobs completed by
//! webhook billed exactly once, callbacks signed and retried.

use std::time::Duration;

use runtime::store::{Jobs, Owners, Webhooks};
use serde_json::{json, Value};

use crate::harness::*;

const SECRET: &str = "whsec-test-0123456789";

async fn post_webhook(env: &Env, body: &[u8], signature: Option<String>) -> Answer {
    let mut rb = env
        .client
        .post(env.voice("/webhooks/provider"))
        .header("content-type", "application/json")
        .body(body.to_vec());
    if let Some(s) = signature {
        rb = rb.header("x-provider-signature", s);
    }
    Answer::from(rb.send().await.unwrap()).await
}

fn sign(secret: &str, body: &[u8]) -> String {
    runtime::signing::sign(secret.as_bytes(), body)
}

async fn stt_job(env: &Env) -> String {
    let up = env.upload("in.wav", wav(3.0), Some("stt_input")).await;
    let a = env.post("/stt", json!({"audio_url": up.json["url"]})).await;
    a.json["job_id"].as_str().unwrap().to_owned()
}

fn completion(job: &str, seconds: f64) -> Vec<u8> {
    json!({"event": "job.completed", "kind": "stt", "id": job, "status": "completed",
           "item": {"uuid": job, "status": "completed", "text": "hello", "duration_seconds": seconds}})
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn bad_signatures_are_refused_and_store_nothing() {
    let env = Env::with(|c| c.webhook_secret = Some(SECRET.into())).await;
    let job = stt_job(&env).await;
    let body = completion(&job, 3.0);
    let good = sign(SECRET, &body);
    for (what, sig) in [
        ("wrong", Some(sign("another-secret", &body))),
        ("truncated", Some(good[..good.len() - 4].to_owned())),
        ("missing", None),
        ("malformed", Some("sha256=not-hex".to_owned())),
        (
            "no scheme",
            Some(good.trim_start_matches("sha256=").to_owned()),
        ),
        ("other body", Some(sign(SECRET, b"{}"))),
    ] {
        let a = post_webhook(&env, &body, sig).await;
        assert_eq!(a.status, 401, "{what}: {}", a.text);
        assert!(
            a.detail().contains("X-Provider-Signature"),
            "{what}: {}",
            a.text
        );
    }
    assert!(env.store().webhook_events().unwrap().is_empty());
    assert_eq!(
        env.store().job("stt", &job).unwrap().unwrap().status,
        "pending"
    );
    assert!(env.usage().iter().all(|u| u.once_key.is_none()));
}

#[tokio::test]
async fn a_signed_event_completes_the_job_once_and_a_later_get_bills_nothing_more() {
    let env = Env::with(|c| {
        c.webhook_secret = Some(SECRET.into());
        c.prices = runtime::billing::Prices::parse(Some("stt.audio_seconds=0.01"), "20").unwrap();
    })
    .await;
    let job = stt_job(&env).await;
    let body = completion(&job, 3.0);
    let a = post_webhook(&env, &body, Some(sign(SECRET, &body))).await;
    a.expect(200);
    assert_eq!(a.json, json!({"received": true}));
    let row = env.store().job("stt", &job).unwrap().unwrap();
    assert_eq!((row.status.as_str(), row.billed), ("completed", true));
    let events = env.store().webhook_events().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].body, body, "stored whole");
    assert_eq!(
        (
            events[0].kind.as_deref(),
            events[0].upstream_id.as_deref(),
            events[0].outcome.as_str()
        ),
        (Some("stt"), Some(job.as_str()), "job_updated")
    );

    // The same delivery again changes nothing.
    post_webhook(&env, &body, Some(sign(SECRET, &body)))
        .await
        .expect(200);
    assert_eq!(env.store().webhook_events().unwrap().len(), 1);

    // The job completes upstream too; GET sees it complete and bills nothing more.
    env.complete_job(&job).await;
    env.get(&format!("/stt/{job}")).await.expect(200);
    let charges: Vec<_> = env
        .usage()
        .into_iter()
        .filter(|u| !u.charged.is_zero())
        .collect();
    assert_eq!(charges.len(), 1, "{charges:#?}");
    assert_eq!(
        charges[0].user_id,
        Some(env.user_id),
        "the job's owner is charged, not the webhook"
    );
    assert_eq!(charges[0].quantity, rust_decimal::Decimal::from(3));
    assert_eq!(charges[0].charged, "0.036".parse().unwrap());
}

#[tokio::test]
async fn unknown_jobs_and_malformed_json_are_stored_and_acknowledged() {
    let env = Env::with(|c| c.webhook_secret = Some(SECRET.into())).await;
    let unknown = completion("no-such-job", 1.0);
    post_webhook(&env, &unknown, Some(sign(SECRET, &unknown)))
        .await
        .expect(200);
    let garbage = b"{not json".to_vec();
    post_webhook(&env, &garbage, Some(sign(SECRET, &garbage)))
        .await
        .expect(200);
    let outcomes: Vec<String> = env
        .store()
        .webhook_events()
        .unwrap()
        .into_iter()
        .map(|e| e.outcome)
        .collect();
    assert_eq!(outcomes, ["unknown_job", "malformed"]);
    let big = vec![b' '; (1 << 20) + 1];
    post_webhook(&env, &big, Some(sign(SECRET, &big)))
        .await
        .expect(413);
    assert_eq!(env.store().webhook_events().unwrap().len(), 2);
}

#[tokio::test]
async fn without_a_secret_every_event_is_refused_and_nothing_changes() {
    let env = Env::start().await;
    let job = stt_job(&env).await;
    let body = completion(&job, 1.0);
    let unsigned = post_webhook(&env, &body, None).await;
    unsigned.expect(503);
    assert!(
        unsigned.text.contains("PROVIDER_WEBHOOK_SECRET"),
        "{}",
        unsigned.text
    );
    // Signed with some secret: still nothing to verify it against.
    post_webhook(&env, &body, Some(sign(SECRET, &body)))
        .await
        .expect(503);
    assert_ne!(
        env.store().job("stt", &job).unwrap().unwrap().status,
        "completed"
    );
    assert!(env.store().webhook_events().unwrap().is_empty());
}

#[tokio::test]
async fn the_simulator_delivers_signed_webhooks_that_complete_jobs_and_voices() {
    let env = Env::with(|c| {
        c.webhook_secret = Some(SECRET.into());
        c.business_plan_active = true;
    })
    .await;
    let r = env
        .client
        .post(format!("{}/__sim/config", env.sim.url()))
        .json(&json!({"webhook_url": env.voice("/webhooks/provider"), "webhook_secret": SECRET, "job_duration_ms": 200}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let job = stt_job(&env).await;
    let voice = env
        .post("/voices", json!({"name": "Trained"}))
        .await
        .expect(200)
        .json["item"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    env.post(&format!("/voices/{voice}/build"), json!({}))
        .await
        .expect(200);
    let mut done = false;
    for _ in 0..100 {
        let job_done = env.store().job("stt", &job).unwrap().unwrap().status == "completed";
        let voice_done = env
            .store()
            .resource_status("voice", &voice)
            .unwrap()
            .as_deref()
            == Some("ready");
        if job_done && voice_done {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(done, "events: {:#?}", env.store().webhook_events().unwrap());
    assert!(env
        .store()
        .webhook_events()
        .unwrap()
        .iter()
        .all(|e| e.signed));
}

#[tokio::test]
async fn callbacks_are_signed_retried_and_delivered_once() {
    let env = Env::start().await;
    let rx = receiver(1).await;
    let up = env.upload("in.wav", wav(1.0), Some("stt_input")).await;
    let job = env
        .post(
            "/stt",
            json!({"audio_url": up.json["url"], "callback_uri": rx.url}),
        )
        .await
        .json["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    env.complete_job(&job).await;
    // Two GETs of the finished job: still one delivery.
    env.get(&format!("/stt/{job}")).await.expect(200);
    env.get(&format!("/stt/{job}")).await.expect(200);
    for _ in 0..100 {
        if rx.seen.lock().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = rx.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "one failed attempt, one retry, nothing more");
    let secret = env.store().callback_secret(env.user_id).unwrap().unwrap();
    for (sig, body) in &seen {
        runtime::signing::verify(secret.as_bytes(), body, sig.as_deref())
            .expect("signed with the user's callback secret");
    }
    let v: Value = serde_json::from_slice(&seen[1].1).unwrap();
    assert_eq!(
        (v["job_id"].as_str(), v["status"].as_str()),
        (Some(job.as_str()), Some("completed"))
    );
    for _ in 0..50 {
        if env.store().job("stt", &job).unwrap().unwrap().status == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The operator can read the secret with the CLI too.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gateway"))
        .args([
            "users",
            "callback-secret",
            "--user",
            &env.user_id.to_string(),
        ])
        .envs(env.dir.gateway_env())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), secret);
}

#[tokio::test]
async fn callbacks_to_private_addresses_are_refused_unless_allowed() {
    let env = Env::with(|c| c.allow_private_fetch = false).await;
    let rx = receiver(0).await;
    // An allowed audio URL (own upload) but a loopback callback: refused at
    // submit (it would never be delivered), nothing sent upstream.
    let up = env.upload("in.wav", wav(1.0), Some("stt_input")).await;
    env.clear_sim_log().await;
    let a = env
        .post(
            "/stt",
            json!({"audio_url": up.json["url"], "callback_uri": rx.url}),
        )
        .await;
    a.expect(400);
    assert!(a.detail().contains("callback_uri"), "{}", a.text);
    env.assert_no_upstream_call().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        rx.seen.lock().unwrap().is_empty(),
        "no request to a loopback callback"
    );
}
