//! Result mirroring (spec §3): the first GET of a complete enhance, edit or
//! watermark-apply job copies the result once; later GETs reuse it; a failed
//! copy is retried; watermark-detect results are never mirrored.

use runtime::store::Assets;
use serde_json::json;

use crate::harness::*;

async fn completed_job(env: &Env, route: &str, body: serde_json::Value) -> String {
    let a = env.post(route, body).await;
    assert!(a.status == 200 || a.status == 202, "{route}: {}", a.text);
    let job_id = a.json["job_id"].as_str().unwrap().to_owned();
    env.complete_job(&job_id).await;
    job_id
}

fn media_fetches(reqs: &[serde_json::Value]) -> usize {
    reqs.iter()
        .filter(|r| r["path"].as_str().unwrap().starts_with("/__sim/media/"))
        .count()
}

#[tokio::test]
async fn first_get_copies_once_and_later_gets_reuse_it() {
    let env = Env::start().await;
    let up = env
        .upload("noisy.wav", wav(1.0), Some("audio_job_input"))
        .await;
    let job_id = completed_job(&env, "/enhance", json!({"audio_url": up.json["url"]})).await;
    env.clear_sim_log().await;

    let first = env.get(&format!("/enhance/{job_id}")).await;
    first.expect(200);
    let resemble = first.json["resemble_url"]
        .as_str()
        .expect("resemble_url")
        .to_owned();
    assert!(resemble.contains("/__sim/media/"), "{resemble}");
    let audio_url = first.json["audio_url"]
        .as_str()
        .expect("audio_url")
        .to_owned();
    assert!(first.json["expires_at"].is_string());
    let body = reqwest::get(&audio_url).await.unwrap();
    assert_eq!(body.status().as_u16(), 200);
    let copied = body.bytes().await.unwrap();
    let original = reqwest::get(&resemble)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(copied, original, "the stored copy is the upstream's audio");

    let second = env.get(&format!("/enhance/{job_id}")).await;
    second.expect(200);
    assert!(second.json["audio_url"].is_string());
    let mirrors: Vec<_> = env
        .store()
        .assets()
        .unwrap()
        .into_iter()
        .filter(|a| a.class == "mirror")
        .collect();
    assert_eq!(mirrors.len(), 1, "one stored copy");
    let exp =
        chrono::DateTime::parse_from_rfc3339(mirrors[0].expires_at.as_deref().unwrap()).unwrap();
    assert!(
        (exp.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_hours() >= 167,
        "7-day retention"
    );
    let reqs = env.sim_requests().await;
    assert_eq!(
        media_fetches(&reqs) - 1,
        1,
        "the gateway fetched the result once (the other fetch is the test's)"
    );
}

#[tokio::test]
async fn concurrent_first_gets_produce_exactly_one_copy() {
    let env = Env::start().await;
    let up = env
        .upload("in.wav", wav(1.0), Some("watermark_input"))
        .await;
    let job_id = completed_job(
        &env,
        "/watermark/apply",
        json!({"audio_url": up.json["url"]}),
    )
    .await;
    env.clear_sim_log().await;
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let (client, url, key) = (
            env.client.clone(),
            env.voice(&format!("/watermark/apply/{job_id}")),
            env.key.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let r = client.get(url).bearer_auth(key).send().await.unwrap();
            (
                r.status().as_u16(),
                r.json::<serde_json::Value>().await.unwrap(),
            )
        }));
    }
    let mut urls = Vec::new();
    for t in tasks {
        let (status, v) = t.await.unwrap();
        assert_eq!(status, 200, "{v}");
        assert!(v["resemble_url"].is_string());
        if let Some(u) = v["audio_url"].as_str() {
            urls.push(u.split('?').next().unwrap().to_owned());
        }
    }
    assert!(!urls.is_empty());
    urls.dedup();
    assert_eq!(urls.len(), 1, "every answer points at the same object");
    assert_eq!(
        env.store()
            .assets()
            .unwrap()
            .iter()
            .filter(|a| a.class == "mirror")
            .count(),
        1
    );
    assert_eq!(
        media_fetches(&env.sim_requests().await),
        1,
        "one copy fetched from the upstream"
    );
    let mirrored: Vec<String> = env
        .object_keys()
        .into_iter()
        .filter(|k| k.starts_with("mirror/"))
        .collect();
    assert_eq!(mirrored.len(), 1);
}

#[tokio::test]
async fn a_failed_copy_still_answers_and_is_retried() {
    let env = Env::start().await;
    let up = env.upload("in.wav", wav(1.0), None).await;
    let job_id = completed_job(
        &env,
        "/edit",
        json!({"audio_url": up.json["url"], "original_transcript": "a", "target_transcript": "b", "voice_uuid": "stock-voice-1"}),
    )
    .await;
    env.fault(json!({"path": "/__sim/media/*", "fault": {"status": 500}}))
        .await;
    let a = env.get(&format!("/edit/{job_id}")).await;
    a.expect(200);
    assert!(a.json["resemble_url"].is_string());
    assert!(a.json.get("audio_url").is_none(), "no copy yet: {}", a.text);
    assert!(env.object_keys().iter().all(|k| !k.starts_with("mirror/")));
    let b = env.get(&format!("/edit/{job_id}")).await;
    b.expect(200);
    assert!(
        b.json["audio_url"].is_string(),
        "retried on the next GET: {}",
        b.text
    );
}

#[tokio::test]
async fn watermark_detect_is_never_mirrored() {
    let env = Env::start().await;
    let up = env
        .upload("in.wav", wav(1.0), Some("watermark_input"))
        .await;
    let job_id = completed_job(
        &env,
        "/watermark/detect",
        json!({"audio_url": up.json["url"]}),
    )
    .await;
    let a = env.get(&format!("/watermark/detect/{job_id}")).await;
    a.expect(200);
    assert!(
        a.json["item"]["metrics"]["confidence"].is_number(),
        "{}",
        a.text
    );
    assert!(a.json.get("audio_url").is_none() && a.json.get("resemble_url").is_none());
    assert!(env
        .store()
        .assets()
        .unwrap()
        .iter()
        .all(|a| a.class != "mirror"));
}

#[tokio::test]
async fn jobs_of_others_and_unknown_jobs_are_404_without_upstream_call() {
    let env = Env::start().await;
    let up = env.upload("in.wav", wav(0.5), None).await;
    let job_id = completed_job(&env, "/enhance", json!({"audio_url": up.json["url"]})).await;
    let (_, bob) = env.new_user("bob@example.com");
    env.clear_sim_log().await;
    let a = env
        .call_as(&bob, "GET", &env.voice(&format!("/enhance/{job_id}")), None)
        .await;
    a.expect(404);
    let unknown = env.get("/enhance/no-such-job").await;
    unknown.expect(404);
    assert_eq!(
        a.detail().replace(&job_id, "X"),
        unknown.detail().replace("no-such-job", "X"),
        "same answer as an unknown job"
    );
    let other_kind = env.get(&format!("/edit/{job_id}")).await;
    other_kind.expect(404);
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn result_urls_off_the_upstream_hosts_are_never_fetched() {
    let env = Env::start().await;
    let up = env.upload("in.wav", wav(0.5), None).await;
    // A real, fetchable result, but named through another host ("localhost"
    // instead of the configured 127.0.0.1): fetching it would succeed.
    let first = completed_job(&env, "/enhance", json!({"audio_url": up.json["url"]})).await;
    let item: serde_json::Value = env
        .client
        .get(format!("{}/audio_enhancements/{first}", env.sim.base_url()))
        .bearer_auth(PROVIDER_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let real = item["item"]["enhanced_audio_url"].as_str().unwrap();
    let foreign = real.replace("127.0.0.1", "localhost");
    assert_eq!(
        reqwest::get(&foreign).await.unwrap().status().as_u16(),
        200,
        "reachable"
    );
    let a = env
        .post("/enhance", json!({"audio_url": up.json["url"]}))
        .await;
    let job_id = a.json["job_id"].as_str().unwrap().to_owned();
    env.fault(json!({
        "path": format!("/api/v2/audio_enhancements/{job_id}"),
        "fault": {"status": 200, "body": {"success": true, "item": {"uuid": job_id, "status": "completed", "enhanced_audio_url": foreign, "duration_seconds": 0.5}}},
    }))
    .await;
    env.clear_sim_log().await;
    let a = env.get(&format!("/enhance/{job_id}")).await;
    a.expect(200);
    assert_eq!(a.json["resemble_url"], json!(foreign));
    assert!(a.json.get("audio_url").is_none(), "not copied: {}", a.text);
    assert_eq!(media_fetches(&env.sim_requests().await), 0, "never fetched");
    assert!(env
        .store()
        .assets()
        .unwrap()
        .iter()
        .all(|a| a.class != "mirror"));
}
