//! Several instances behaving as one (#14), the database's and the object
//! store's part: two gateways ([`Pair`]) on one database (PostgreSQL when
//! the suite runs on it), one S3-compatible bucket and one Redis. Concurrent
//! first GETs of one job spread over both make one mirrored copy; requests
//! spread over both never overdraw a balance; usage totals are the sum of
//! what both served.

use std::collections::BTreeSet;
use std::str::FromStr;

use runtime::store::{Assets, Reconciliations};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::*;

impl Pair {
    /// The voice API's `path` on instance A (`even`) or B.
    fn voice_on(&self, even: bool, path: &str) -> String {
        if even {
            self.a.voice(path)
        } else {
            self.url_b(&format!("/api/v1/voice{path}"))
        }
    }

    /// The general gateway's `path` on instance A (`even`) or B.
    fn api_on(&self, even: bool, path: &str) -> String {
        if even {
            self.a.url(&format!("/api/v1{path}"))
        } else {
            self.url_b(&format!("/api/v1{path}"))
        }
    }
}

#[tokio::test]
async fn concurrent_first_gets_of_one_job_on_both_instances_make_one_copy() {
    let Some(p) = Pair::start("scaleout_storage::one_copy", |_| {}).await else {
        return;
    };
    let env = &p.a;
    let up = env
        .upload("noisy.wav", wav(1.0), Some("audio_job_input"))
        .await;
    up.expect(200);
    let a = env
        .post("/enhance", json!({"audio_url": up.json["url"]}))
        .await;
    assert!(a.status == 200 || a.status == 202, "{}", a.text);
    let job_id = a.json["job_id"].as_str().unwrap().to_owned();
    env.complete_job(&job_id).await;
    env.clear_sim_log().await;
    let before: BTreeSet<String> = p.s3_keys().into_iter().collect();

    let mut tasks = Vec::new();
    for i in 0..12 {
        let (client, url, key) = (
            env.client.clone(),
            p.voice_on(i % 2 == 0, &format!("/enhance/{job_id}")),
            env.key.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let r = client.get(url).bearer_auth(key).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }));
    }
    let mut objects = BTreeSet::new();
    for t in tasks {
        let (status, v) = t.await.unwrap();
        assert_eq!(status, 200, "{v}");
        if let Some(u) = v["audio_url"].as_str() {
            assert!(u.starts_with(&p.s3.endpoint()), "an S3 URL: {u}");
            objects.insert(u.split('?').next().unwrap().to_owned());
        }
    }
    assert_eq!(
        objects.len(),
        1,
        "every answer points at one object: {objects:?}"
    );
    let mirrors: Vec<_> = env
        .store()
        .assets()
        .unwrap()
        .into_iter()
        .filter(|a| a.class == "mirror")
        .collect();
    assert_eq!(mirrors.len(), 1, "one asset record");
    let added: Vec<String> = p
        .s3_keys()
        .into_iter()
        .filter(|k| !before.contains(k))
        .collect();
    assert_eq!(
        added,
        vec![mirrors[0].object_key.clone()],
        "one object stored"
    );
    let fetches = env
        .sim_requests()
        .await
        .iter()
        .filter(|r| r["path"].as_str().unwrap().starts_with("/__sim/media/"))
        .count();
    assert_eq!(fetches, 1, "the result was fetched from the upstream once");
    // The copy is served from the shared bucket to whoever asks either instance.
    let body = reqwest::get(objects.first().unwrap().as_str()).await;
    assert!(body.is_ok());
}

#[tokio::test]
async fn requests_spread_over_both_instances_never_overdraw_a_balance() {
    let Some(p) = llm_pair("scaleout_storage::never_overdrawn").await else {
        return;
    };
    let env = &p.a;
    // Each request holds (89*2 + 100*8) / 1e6 * 1.2 = 0.0011736 (89: the
    // upstream body's JSON text, 4 for the message, 8 for the request):
    // five fit.
    env.grant("0.006");
    env.sim_config(json!({"stream_delay_ms": 20})).await;
    let mut tasks = Vec::new();
    for i in 0..16 {
        let (client, url, key) = (
            env.client.clone(),
            p.api_on(i % 2 == 0, "/chat/completions"),
            env.key.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let r = client
                .post(url)
                .bearer_auth(key)
                .json(
                    &json!({"model": "sim/sim-gpt", "stream": true, "max_tokens": 100,
                    "messages": [{"role": "user", "content": "hi"}]}),
                )
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let _ = r.bytes().await;
            (i % 2 == 0, status)
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    assert!(
        answers.iter().all(|(_, s)| *s == 200 || *s == 402),
        "{answers:?}"
    );
    let ok = answers.iter().filter(|(_, s)| *s == 200).count();
    assert_eq!(ok, 5, "exactly what the balance covers: {answers:?}");
    let rows = env.wait_model_usage(5).await;
    assert_eq!(rows.len(), 5);
    env.wait_no_holds().await;
    // 1 prompt + 100 completion tokens counted each: 0.0009624 each.
    assert_eq!(env.balance(), d("0.006") - d("0.0009624") * d("5"));
    assert!(env.balance() >= Decimal::ZERO);
}

#[tokio::test]
async fn usage_totals_are_the_sum_of_what_both_instances_served() {
    let Some(p) = Pair::start("scaleout_storage::usage_totals", |_| {}).await else {
        return;
    };
    let env = &p.a;
    env.grant("10");
    let mut tasks = Vec::new();
    for i in 0..14 {
        let (client, url, key) = (
            env.client.clone(),
            p.voice_on(i % 2 == 0, "/tts/synthesize"),
            env.key.clone(),
        );
        let body = synth_body(&"Many words spoken here. ".repeat(1 + i % 4));
        tasks.push(tokio::spawn(async move {
            let r = client
                .post(url)
                .bearer_auth(key)
                .json(&body)
                .send()
                .await
                .unwrap();
            let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
            (r.status().as_u16(), id, r.json::<Value>().await.unwrap())
        }));
    }
    let mut served = Decimal::ZERO;
    let mut ids = BTreeSet::new();
    for t in tasks {
        let (status, id, v) = t.await.unwrap();
        assert_eq!(status, 200, "{v}");
        served += Decimal::from_str(&v["audio_duration"].to_string()).unwrap();
        ids.insert(id);
    }
    assert_eq!(ids.len(), 14);
    let usage = env.usage();
    assert_eq!(usage.len(), 14, "one usage record per request");
    let recorded: BTreeSet<String> = usage.iter().map(|u| u.request_id.clone()).collect();
    assert_eq!(recorded, ids, "each instance's requests are recorded");
    let audited: BTreeSet<String> = env.audit().into_iter().map(|a| a.request_id).collect();
    assert_eq!(audited, ids);
    let quantity: Decimal = usage.iter().map(|u| u.quantity).sum();
    assert_eq!(quantity, served, "usage quantities are what was answered");
    let day = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let totals = env.store().usage_totals(&day).unwrap();
    let total: Decimal = totals.values().copied().sum();
    assert_eq!(total, served, "the day's totals: {totals:?}");
    let charged: Decimal = usage.iter().map(|u| u.charged).sum();
    assert!(charged > Decimal::ZERO);
    assert_eq!(
        env.balance(),
        d("10") - charged,
        "every charge debited once"
    );
}
