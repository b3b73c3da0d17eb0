//! Every voice route forwards to the upstream in the provider's shape
//! (upstream.md) and returns the upstream's answer. One walk through every
//! resource's lifecycle; at the end, the audit log must name every voice row
//! that has an upstream, so a new row without a test here fails.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use crate::harness::*;

/// The last upstream request the simulator saw (control-plane and media fetches skipped).
async fn last_upstream(env: &Env) -> Value {
    env.sim_requests()
        .await
        .into_iter()
        .rfind(|r| !r["path"].as_str().unwrap().starts_with("/__sim"))
        .expect("an upstream request")
}

async fn expect_upstream(env: &Env, method: &str, path: &str) -> Value {
    let r = last_upstream(env).await;
    assert_eq!(
        (r["method"].as_str().unwrap(), r["path"].as_str().unwrap()),
        (method, path),
        "{r:#}"
    );
    r
}

fn id_of(a: &Answer) -> String {
    let v = &a.json;
    ["uuid", "id", "voice_uuid", "job_id"]
        .iter()
        .find_map(|k| v[k].as_str().or_else(|| v["item"][k].as_str()))
        .unwrap_or_else(|| panic!("no id in {}", a.text))
        .to_owned()
}

#[tokio::test]
async fn every_voice_route_forwards() {
    let env = Env::with(|c| c.business_plan_active = true).await;

    // A1
    env.get("/tts/voices?page=1&page_size=10").await.expect(200);
    // Lists are read whole from the upstream and filtered to what the caller may see.
    let r = expect_upstream(&env, "GET", "/api/v2/voices").await;
    assert_eq!(r["query"], json!("page=1&page_size=1000"));
    env.get("/tts/voices/stock-voice-1").await.expect(200);
    expect_upstream(&env, "GET", "/api/v2/voices/stock-voice-1").await;
    env.post("/tts/synthesize", synth_body("hi"))
        .await
        .expect(200);
    expect_upstream(&env, "POST", "/synthesize").await;

    // A2
    let voice = id_of(
        env.post("/voices", json!({"name": "Mine", "description": "warm"}))
            .await
            .expect(200),
    );
    let r = expect_upstream(&env, "POST", "/api/v2/voices").await;
    assert_eq!(r["json"], json!({"name": "Mine", "description": "warm"}));

    // A3: recordings, `fields` forwarded unchanged
    let fields =
        json!({"name": "take 1", "text": "hello", "emotion": "neutral", "is_active": true});
    let rec = id_of(
        env.post(
            &format!("/voices/{voice}/recordings"),
            json!({"fields": fields}),
        )
        .await
        .expect(200),
    );
    let r = expect_upstream(&env, "POST", &format!("/api/v2/voices/{voice}/recordings")).await;
    assert_eq!(r["json"], fields);
    env.get(&format!("/voices/{voice}/recordings?page=1"))
        .await
        .expect(200);
    expect_upstream(&env, "GET", &format!("/api/v2/voices/{voice}/recordings")).await;
    env.get(&format!("/voices/{voice}/recordings/{rec}"))
        .await
        .expect(200);
    expect_upstream(
        &env,
        "GET",
        &format!("/api/v2/voices/{voice}/recordings/{rec}"),
    )
    .await;
    env.call(
        "PUT",
        &format!("/voices/{voice}/recordings/{rec}"),
        Some(json!({"fields": {"name": "take 2"}})),
    )
    .await
    .expect(200);
    let r = expect_upstream(
        &env,
        "PUT",
        &format!("/api/v2/voices/{voice}/recordings/{rec}"),
    )
    .await;
    assert_eq!(r["json"], json!({"name": "take 2"}));
    env.call("DELETE", &format!("/voices/{voice}/recordings/{rec}"), None)
        .await
        .expect(200);
    expect_upstream(
        &env,
        "DELETE",
        &format!("/api/v2/voices/{voice}/recordings/{rec}"),
    )
    .await;

    env.post(&format!("/voices/{voice}/build"), json!({}))
        .await
        .expect(200);
    expect_upstream(&env, "POST", &format!("/api/v2/voices/{voice}/build")).await;

    // A4
    let design = env
        .post(
            "/voice-design/candidates",
            json!({"description": "calm", "sample_text": "Hi"}),
        )
        .await;
    design.expect(200);
    let design_uuid = id_of(&design);
    let audio_url = design.json["item"]["voice_candidates"][0]["audio_url"]
        .as_str()
        .expect("candidate audio")
        .to_owned();
    env.post(
        &format!("/voice-design/{design_uuid}/promote"),
        json!({"candidate_index": 0, "name": "Calm"}),
    )
    .await
    .expect(200);
    expect_upstream(
        &env,
        "POST",
        &format!("/api/v2/voice-design/{design_uuid}/0/create_rapid_voice"),
    )
    .await;
    env.call("DELETE", &format!("/voices/{voice}"), None)
        .await
        .expect(200);
    expect_upstream(&env, "DELETE", &format!("/api/v2/voices/{voice}")).await;

    // A5, A6: jobs. Multipart uploads carry the fetched audio as the row's file field.
    let multipart_jobs = [
        ("/stt", "/api/v2/speech-to-text", "file"),
        ("/enhance", "/api/v2/audio_enhancements", "audio_file"),
        ("/edit", "/api/v2/edit", "input_audio"),
    ];
    let mut jobs = Vec::new();
    for (route, upstream, field) in multipart_jobs {
        let mut body = json!({"audio_url": audio_url});
        if route == "/edit" {
            body = json!({"audio_url": audio_url, "original_transcript": "a", "target_transcript": "b", "voice_uuid": "stock-voice-1"});
        }
        if route == "/stt" {
            body = json!({"audio_url": audio_url, "language": "en", "callback_uri": "https://example.com/cb"});
        }
        let a = env.post(route, body).await;
        assert!(a.status == 200 || a.status == 202, "{route}: {}", a.text);
        let job = a.json["job_id"].as_str().expect("job_id").to_owned();
        let r = expect_upstream(&env, "POST", upstream).await;
        let parts = r["parts"].as_array().expect("multipart upstream");
        let file = parts
            .iter()
            .find(|p| p["name"] == json!(field))
            .unwrap_or_else(|| panic!("{route}: no part {field}: {r:#}"));
        assert!(
            file["size"].as_u64().unwrap() > 44,
            "{route}: the audio itself was sent"
        );
        assert!(
            parts
                .iter()
                .all(|p| p["name"] != json!("audio_url") && p["name"] != json!("callback_uri")),
            "{r:#}"
        );
        jobs.push((route, job));
    }
    let json_jobs = [
        ("/detect", "/api/v2/detect"),
        ("/intelligence", "/api/v2/intelligence"),
        ("/tracing", "/api/v2/detect"),
        ("/watermark/apply", "/api/v2/watermark/apply"),
        ("/watermark/detect", "/api/v2/watermark/detect"),
    ];
    for (route, upstream) in json_jobs {
        let a = env.post(route, json!({"audio_url": audio_url})).await;
        assert!(a.status == 200 || a.status == 202, "{route}: {}", a.text);
        let job = a.json["job_id"].as_str().expect("job_id").to_owned();
        let r = expect_upstream(&env, "POST", upstream).await;
        assert_eq!(
            r["json"]["url"],
            json!(audio_url),
            "{route}: audio_url → url"
        );
        if route == "/tracing" {
            assert_eq!(r["json"]["audio_source_tracing"], json!(true));
        }
        jobs.push((route, job));
    }
    let get_paths = |route: &str, job: &str| -> String {
        match route {
            "/stt" => format!("/api/v2/speech-to-text/{job}"),
            "/enhance" => format!("/api/v2/audio_enhancements/{job}"),
            "/edit" => format!("/api/v2/edit/{job}"),
            "/detect" => format!("/api/v2/detect/{job}"),
            "/intelligence" => format!("/api/v2/intelligences/{job}"),
            "/tracing" => format!("/api/v2/audio_source_tracings/{job}"),
            "/watermark/apply" => format!("/api/v2/watermark/apply/{job}/result"),
            "/watermark/detect" => format!("/api/v2/watermark/detect/{job}/result"),
            other => panic!("{other}"),
        }
    };
    for (route, job) in &jobs {
        env.get(&format!("{route}/{job}")).await.expect(200);
        expect_upstream(&env, "GET", &get_paths(route, job)).await;
    }
    // The job list comes from the gateway's own records, not the upstream.
    env.get("/stt?page=1&page_size=10").await.expect(200);

    // A7
    let identity = id_of(
        env.post(
            "/identity/enroll",
            json!({"name": "Ann", "audio_url": audio_url}),
        )
        .await
        .expect(200),
    );
    expect_upstream(&env, "POST", "/api/v2/identity").await;
    env.post(
        "/identity/search",
        json!({"audio_url": audio_url, "top_k": 3}),
    )
    .await
    .expect(200);
    let r = expect_upstream(&env, "POST", "/api/v2/identity/search").await;
    // The upstream ranks every tenant's identities: it is asked for as many as
    // the row allows (100), and the caller gets their own 3 nearest.
    assert_eq!(r["json"], json!({"url": audio_url, "top_k": 100}));
    env.get("/identity").await.expect(200);
    expect_upstream(&env, "GET", "/api/v2/identity").await;
    env.get(&format!("/identity/{identity}")).await.expect(200);
    expect_upstream(&env, "GET", &format!("/api/v2/identity/{identity}")).await;
    env.call("DELETE", &format!("/identity/{identity}"), None)
        .await
        .expect(200);
    expect_upstream(&env, "DELETE", &format!("/api/v2/identity/{identity}")).await;

    // A8
    let project = id_of(
        env.post(
            "/projects",
            json!({"fields": {"name": "P", "description": "d"}}),
        )
        .await
        .expect(200),
    );
    let r = expect_upstream(&env, "POST", "/api/v2/projects").await;
    assert_eq!(r["json"], json!({"name": "P", "description": "d"}));
    env.get("/projects").await.expect(200);
    env.get(&format!("/projects/{project}")).await.expect(200);
    env.call(
        "PUT",
        &format!("/projects/{project}"),
        Some(json!({"fields": {"is_archived": true}})),
    )
    .await
    .expect(200);
    expect_upstream(&env, "PUT", &format!("/api/v2/projects/{project}")).await;
    let clip = id_of(
        env.post(
            &format!("/projects/{project}/clips"),
            json!({"fields": {"title": "c", "body": "Hi"}}),
        )
        .await
        .expect(200),
    );
    env.get(&format!("/projects/{project}/clips"))
        .await
        .expect(200);
    env.get(&format!("/projects/{project}/clips/{clip}"))
        .await
        .expect(200);
    expect_upstream(
        &env,
        "GET",
        &format!("/api/v2/projects/{project}/clips/{clip}"),
    )
    .await;
    env.call("DELETE", &format!("/projects/{project}/clips/{clip}"), None)
        .await
        .expect(200);
    env.call("DELETE", &format!("/projects/{project}"), None)
        .await
        .expect(200);
    expect_upstream(&env, "DELETE", &format!("/api/v2/projects/{project}")).await;

    // A9
    env.get("/agents/capabilities").await.expect(200);
    expect_upstream(&env, "GET", "/api/v2/agents/capabilities").await;
    env.get("/agents/system-tools").await.expect(200);
    expect_upstream(&env, "GET", "/api/v2/agents/system-tools").await;
    let agent = id_of(
        env.post("/agents", json!({"fields": {"name": "Receptionist"}}))
            .await
            .expect(200),
    );
    env.get("/agents").await.expect(200);
    env.get(&format!("/agents/{agent}")).await.expect(200);
    env.call(
        "PUT",
        &format!("/agents/{agent}"),
        Some(json!({"fields": {"name": "Front desk"}})),
    )
    .await
    .expect(200);
    // The spec's flat paths: the agent is named once, inside the envelope;
    // the gateway fills the upstream path from its records afterwards.
    for (prefix, upstream) in [("/agent-tools", "tools"), ("/agent-webhooks", "webhooks")] {
        let id = id_of(
            env.post(
                prefix,
                json!({"fields": {"agent_uuid": agent, "name": "x", "url": "https://example.com/h"}}),
            )
            .await
            .expect(200),
        );
        let r = expect_upstream(&env, "POST", &format!("/api/v2/agents/{agent}/{upstream}")).await;
        assert_eq!(
            r["query"].as_str().unwrap_or(""),
            "",
            "agent_uuid is a path variable upstream, not a query parameter"
        );
        let sent: Value = serde_json::from_str(r["body"].as_str().unwrap()).unwrap();
        assert_eq!(
            sent,
            json!({"name": "x", "url": "https://example.com/h"}),
            "agent_uuid is not forwarded as a body field"
        );
        let listed = env.get(prefix).await;
        listed.expect(200);
        assert_eq!(
            listed.json["items"][0]["uuid"],
            json!(id),
            "{}",
            listed.text
        );
        expect_upstream(&env, "GET", &format!("/api/v2/agents/{agent}/{upstream}")).await;
        env.get(&format!("{prefix}?agent_uuid={agent}"))
            .await
            .expect(200);
        env.get(&format!("{prefix}/{id}")).await.expect(200);
        expect_upstream(
            &env,
            "GET",
            &format!("/api/v2/agents/{agent}/{upstream}/{id}"),
        )
        .await;
        env.call(
            "PUT",
            &format!("{prefix}/{id}"),
            Some(json!({"fields": {"name": "y"}})),
        )
        .await
        .expect(200);
        expect_upstream(
            &env,
            "PUT",
            &format!("/api/v2/agents/{agent}/{upstream}/{id}"),
        )
        .await;
        env.call("DELETE", &format!("{prefix}/{id}"), None)
            .await
            .expect(200);
        expect_upstream(
            &env,
            "DELETE",
            &format!("/api/v2/agents/{agent}/{upstream}/{id}"),
        )
        .await;
    }
    let kb = id_of(
        env.post(
            "/knowledge-base",
            json!({"fields": {"title": "FAQ", "content": "..."}}),
        )
        .await
        .expect(200),
    );
    expect_upstream(&env, "POST", "/api/v2/knowledge_items").await;
    env.get("/knowledge-base").await.expect(200);
    env.get(&format!("/knowledge-base/{kb}")).await.expect(200);
    env.call(
        "PUT",
        &format!("/knowledge-base/{kb}"),
        Some(json!({"fields": {"title": "FAQ 2"}})),
    )
    .await
    .expect(200);
    env.call("DELETE", &format!("/knowledge-base/{kb}"), None)
        .await
        .expect(200);
    expect_upstream(&env, "DELETE", &format!("/api/v2/knowledge_items/{kb}")).await;
    env.call("DELETE", &format!("/agents/{agent}"), None)
        .await
        .expect(200);

    // Every credential sent upstream is the configured one, as a bearer token.
    for r in env
        .sim_requests()
        .await
        .iter()
        .filter(|r| !r["path"].as_str().unwrap().starts_with("/__sim"))
    {
        assert_eq!(
            r["headers"]["authorization"],
            json!(format!("Bearer {PROVIDER_KEY}")),
            "{r:#}"
        );
    }

    // Coverage: every voice row with an upstream was exercised successfully.
    let exercised: BTreeSet<String> = env.audit().into_iter().map(|a| a.route_id).collect();
    let expected: BTreeSet<String> = server::routes::ROUTES
        .iter()
        .filter(|s| s.area == runtime::spec::Area::Voice && s.upstream.is_some())
        .filter(|s| s.mode != runtime::spec::Mode::JobList)
        .map(|s| s.id.to_owned())
        .collect();
    let missing: Vec<_> = expected.difference(&exercised).collect();
    assert!(
        missing.is_empty(),
        "voice routes not exercised: {missing:?}"
    );
}

#[tokio::test]
async fn path_parameters_are_percent_encoded_upstream() {
    // Stock voices are readable by everyone, so these reach the upstream
    // (which knows none of them).
    let env = Env::with(|c| {
        c.stock_voices = ["a b", "a/b", "été?"].map(String::from).to_vec();
    })
    .await;
    env.get("/tts/voices/a%20b").await.expect(404);
    expect_upstream(&env, "GET", "/api/v2/voices/a%20b").await;
    env.get("/tts/voices/a%2Fb").await.expect(404);
    expect_upstream(&env, "GET", "/api/v2/voices/a%2Fb").await;
    env.get("/tts/voices/%C3%A9t%C3%A9%3F").await.expect(404);
    expect_upstream(&env, "GET", "/api/v2/voices/%C3%A9t%C3%A9%3F").await;
}

#[tokio::test]
async fn private_audio_urls_are_refused_unless_allowed() {
    let env = Env::with(|c| c.allow_private_fetch = false).await;
    let a = env
        .post(
            "/enhance",
            json!({"audio_url": format!("{}/__sim/media/x.wav", env.sim.url())}),
        )
        .await;
    a.expect(400);
    assert!(a.detail().contains("private or loopback"), "{}", a.text);
    let a = env
        .post("/stt", json!({"audio_url": "file:///etc/passwd"}))
        .await;
    a.expect(400);
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn a_recording_with_audio_is_sent_upstream_as_multipart() {
    let env = Env::with(|c| c.business_plan_active = true).await;
    let voice = id_of(
        env.post("/voices", json!({"name": "Mine"}))
            .await
            .expect(200),
    );
    let audio = wav(1.0);
    let up = env
        .upload("take1.wav", audio.clone(), Some("voice_clone"))
        .await;
    up.expect(200);
    let a = env
        .post(&format!("/voices/{voice}/recordings"), json!({"fields": {"audio_url": up.json["url"], "name": "take 1", "text": "hello", "is_active": true}}))
        .await;
    a.expect(200);
    let r = expect_upstream(&env, "POST", &format!("/api/v2/voices/{voice}/recordings")).await;
    let parts = r["parts"]
        .as_array()
        .unwrap_or_else(|| panic!("multipart upstream: {r:#}"));
    let part = |name: &str| {
        parts
            .iter()
            .find(|p| p["name"] == json!(name))
            .cloned()
            .unwrap_or_else(|| panic!("no part {name}: {r:#}"))
    };
    assert_eq!(part("file")["size"].as_u64(), Some(audio.len() as u64));
    assert_eq!(part("name")["value"], json!("take 1"));
    assert_eq!(part("is_active")["value"], json!("true"));
    assert!(parts.iter().all(|p| p["name"] != json!("audio_url")));
}
