//! Tenant isolation (spec §5, issue "jobs, webhook, isolation"): a second
//! user gets 404 on the first user's things — exactly like an unknown id,
//! with no upstream call — and sees none of them in lists.

use runtime::store::{Ledger, Owners};
use serde_json::{json, Value};

use crate::harness::*;

fn ids(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {v}"))
        .iter()
        .filter_map(|i| {
            i["uuid"]
                .as_str()
                .or(i["job_id"].as_str())
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test]
async fn a_second_user_sees_nothing_of_the_first() {
    let env = Env::with(|c| c.business_plan_active = true).await;
    let (_, bob) = env.new_user("bob@example.com");
    let bob_get = |path: String| {
        let (env, bob) = (&env, bob.clone());
        async move { env.call_as(&bob, "GET", &env.voice(&path), None).await }
    };

    // Alice's things.
    let voice = env
        .post("/voices", json!({"name": "Alice's voice"}))
        .await
        .expect(200)
        .json["item"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let project = env
        .post("/projects", json!({"fields": {"name": "Alice's project"}}))
        .await
        .expect(200)
        .json["item"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let agent = env
        .post("/agents", json!({"fields": {"name": "Alice's agent"}}))
        .await
        .expect(200)
        .json["item"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let up = env.upload("id.wav", wav(0.5), None).await;
    let identity = env
        .post(
            "/identity/enroll",
            json!({"name": "Alice", "audio_url": up.json["url"]}),
        )
        .await
        .expect(200)
        .json["item"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let job = env
        .post("/stt", json!({"audio_url": up.json["url"]}))
        .await
        .json["job_id"]
        .as_str()
        .unwrap()
        .to_owned();

    env.clear_sim_log().await;
    for path in [
        format!("/tts/voices/{voice}"),
        format!("/voices/{voice}/recordings"),
        format!("/projects/{project}"),
        format!("/projects/{project}/clips"),
        format!("/agents/{agent}"),
        format!("/agent-tools?agent_uuid={agent}"),
        format!("/identity/{identity}"),
        format!("/stt/{job}"),
    ] {
        let a = bob_get(path.clone()).await;
        a.expect(404);
        let unknown = path
            .replace(&voice, "nope")
            .replace(&project, "nope")
            .replace(&agent, "nope")
            .replace(&identity, "nope")
            .replace(&job, "nope");
        let unknown = env.call_as(&bob, "GET", &env.voice(&unknown), None).await;
        assert_eq!(unknown.status, 404, "{path}");
        assert_eq!(
            unknown.text.replace("nope", "ID"),
            a.text
                .replace(&voice, "ID")
                .replace(&project, "ID")
                .replace(&agent, "ID")
                .replace(&identity, "ID")
                .replace(&job, "ID"),
            "same answer as an unknown id"
        );
    }
    env.clear_sim_log().await; // unknown voices are looked up upstream (they may be stock voices)
    for path in [
        format!("/tts/voices/{voice}"),
        format!("/projects/{project}"),
        format!("/stt/{job}"),
    ] {
        bob_get(path).await.expect(404);
    }
    for (method, path, body) in [
        (
            "PUT",
            format!("/projects/{project}"),
            Some(json!({"fields": {"name": "mine now"}})),
        ),
        ("DELETE", format!("/projects/{project}"), None),
        (
            "PUT",
            format!("/agents/{agent}"),
            Some(json!({"fields": {"name": "x"}})),
        ),
        ("DELETE", format!("/agents/{agent}"), None),
        ("DELETE", format!("/identity/{identity}"), None),
        ("DELETE", format!("/voices/{voice}"), None),
        ("POST", format!("/voices/{voice}/build"), Some(json!({}))),
        (
            "POST",
            format!("/voices/{voice}/recordings"),
            Some(json!({"fields": {"name": "r"}})),
        ),
        (
            "POST",
            format!("/projects/{project}/clips"),
            Some(json!({"fields": {"title": "c"}})),
        ),
    ] {
        env.call_as(&bob, method, &env.voice(&path), body)
            .await
            .expect(404);
    }
    env.assert_no_upstream_call().await;

    // Lists: Bob sees none of Alice's things; stock voices stay visible.
    let voices = bob_get("/tts/voices?page_size=100".into()).await;
    voices.expect(200);
    let bob_voices = ids(&voices.json);
    assert!(!bob_voices.contains(&voice));
    assert!(
        bob_voices.iter().any(|v| v.starts_with("stock-voice")),
        "{bob_voices:?}"
    );
    for path in ["/projects", "/agents", "/identity", "/stt"] {
        let a = bob_get(path.into()).await;
        a.expect(200);
        assert!(ids(&a.json).is_empty(), "{path}: {}", a.text);
    }
    // Alice sees hers.
    assert!(ids(&env.get("/tts/voices?page_size=100").await.json).contains(&voice));
    assert_eq!(ids(&env.get("/projects").await.json), vec![project.clone()]);
    assert_eq!(ids(&env.get("/agents").await.json), vec![agent.clone()]);
    assert_eq!(
        ids(&env.get("/identity").await.json),
        vec![identity.clone()]
    );
    assert_eq!(ids(&env.get("/stt").await.json), vec![job.clone()]);
    env.get(&format!("/projects/{project}")).await.expect(200);

    // A deleted resource is forgotten: Alice's own GET is now a 404 without upstream call.
    env.call("DELETE", &format!("/projects/{project}"), None)
        .await
        .expect(200);
    env.clear_sim_log().await;
    env.get(&format!("/projects/{project}")).await.expect(404);
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn resources_created_outside_the_gateway_are_not_visible() {
    let env = Env::start().await;
    // Created straight on the upstream account, not through the gateway.
    let r = env
        .client
        .post(format!("{}/projects", env.sim.base_url()))
        .bearer_auth(PROVIDER_KEY)
        .json(&json!({"name": "someone else's"}))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    let id = v["item"]["uuid"].as_str().unwrap().to_owned();
    env.get(&format!("/projects/{id}")).await.expect(404);
    assert!(ids(&env.get("/projects").await.json).is_empty());
    // Stock voices are readable by everyone but changeable by nobody.
    env.get("/tts/voices/stock-voice-1").await.expect(200);
    env.get("/voices/stock-voice-1/recordings")
        .await
        .expect(200);
    env.post(
        "/voices/stock-voice-1/recordings",
        json!({"fields": {"name": "x"}}),
    )
    .await
    .expect(404);
}

#[tokio::test]
async fn list_pagination_is_the_gateways() {
    let env = Env::start().await;
    let mut created = Vec::new();
    for i in 0..12 {
        created.push(
            env.post("/projects", json!({"fields": {"name": format!("p{i}")}}))
                .await
                .expect(200)
                .json["item"]["uuid"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let page1 = env.get("/projects?page=1&page_size=10").await;
    let page2 = env.get("/projects?page=2&page_size=10").await;
    assert_eq!(
        (
            page1.json["num_pages"].as_u64(),
            page1.json["total_items"].as_u64()
        ),
        (Some(2), Some(12))
    );
    let mut all = ids(&page1.json);
    all.extend(ids(&page2.json));
    all.sort();
    created.sort();
    assert_eq!(all, created);
}

#[tokio::test]
async fn nobody_synthesizes_with_another_users_voice() {
    let env = Env::with(|c| c.business_plan_active = true).await;
    let (_, bob) = env.new_user("bob@example.com");
    let voice = env
        .post("/voices", json!({"name": "Alice's voice"}))
        .await
        .expect(200)
        .json["item"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    env.clear_sim_log().await;
    let body = json!({"voice_uuid": voice, "text": "not yours"});
    let a = env
        .call_as(
            &bob,
            "POST",
            &env.voice("/tts/synthesize"),
            Some(body.clone()),
        )
        .await;
    a.expect(404);
    assert_eq!(a.detail(), format!("no voice {voice}"));
    // An edit with Bob's own audio but Alice's voice.
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(wav(0.5)).file_name("bob.wav"),
    );
    let r = env
        .client
        .post(env.voice("/uploads"))
        .bearer_auth(&bob)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let bob_upload = Answer::from(r).await;
    bob_upload.expect(200);
    env.clear_sim_log().await;
    let a = env
        .call_as(
            &bob,
            "POST",
            &env.voice("/edit"),
            Some(json!({"audio_url": bob_upload.json["url"], "voice_uuid": voice})),
        )
        .await;
    a.expect(404);
    assert_eq!(a.detail(), format!("no voice {voice}"));
    env.assert_no_upstream_call().await;
    // Stock voices are everyone's; the owner uses her own.
    env.call_as(
        &bob,
        "POST",
        &env.voice("/tts/synthesize"),
        Some(json!({"voice_uuid": "stock-voice-1", "text": "hi"})),
    )
    .await
    .expect(200);
    env.post("/tts/synthesize", body).await.expect(200);
}

/// Creates a voice on the provider account directly, outside the gateway.
async fn voice_made_outside(sim: &sim::Sim) -> String {
    let r = reqwest::Client::new()
        .post(format!("{}/voices", sim.base_url()))
        .bearer_auth(PROVIDER_KEY)
        .json(&json!({"name": "made outside the gateway"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let v: Value = r.json().await.unwrap();
    v["item"]["uuid"]
        .as_str()
        .or(v["uuid"].as_str())
        .unwrap_or_else(|| panic!("no uuid in {v}"))
        .to_owned()
}

#[tokio::test]
async fn only_stock_voices_are_shared_not_every_voice_nobody_owns() {
    let env = Env::start().await;
    env.grant("10");
    let outside = voice_made_outside(&env.sim).await;
    // Read, synthesize with, list: the unowned non-stock voice is nobody's.
    env.get(&format!("/tts/voices/{outside}")).await.expect(404);
    env.clear_sim_log().await;
    let before = env.usage().len();
    let a = env
        .post(
            "/tts/synthesize",
            json!({"voice_uuid": outside, "text": "hi"}),
        )
        .await;
    a.expect(404);
    assert_eq!(a.detail(), format!("no voice {outside}"));
    assert!(
        !env.sim_requests().await.iter().any(|r| r["path"]
            .as_str()
            .unwrap_or_default()
            .contains("synthesize")),
        "no synthesis upstream"
    );
    assert_eq!(env.usage().len(), before, "nothing billed");
    let list = env.get("/tts/voices?page_size=1000").await;
    list.expect(200);
    let listed = ids(&list.json);
    assert!(!listed.contains(&outside), "{listed:?}");
    assert!(listed.iter().any(|v| v == "stock-voice-1"), "{listed:?}");
    // Stock voices stay everyone's.
    env.get("/tts/voices/stock-voice-1").await.expect(200);
    env.post(
        "/tts/synthesize",
        json!({"voice_uuid": "stock-voice-2", "text": "hi"}),
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn gateway_stock_voices_names_more_shared_voices() {
    let sim = start_sim().await;
    let shared = voice_made_outside(&sim).await;
    let other = voice_made_outside(&sim).await;
    let env = Env::on_sim(sim, |c| {
        c.stock_voices = vec![shared.clone()];
        c.business_plan_active = true;
    })
    .await;
    env.grant("10");
    env.get(&format!("/tts/voices/{shared}")).await.expect(200);
    env.get(&format!("/tts/voices/{other}")).await.expect(404);
    env.post(
        "/tts/synthesize",
        json!({"voice_uuid": shared, "text": "hi"}),
    )
    .await
    .expect(200);
    let listed = ids(&env.get("/tts/voices?page_size=1000").await.json);
    assert!(
        listed.contains(&shared) && !listed.contains(&other),
        "{listed:?}"
    );
    // Still nobody may change it.
    env.clear_sim_log().await;
    env.call("DELETE", &format!("/voices/{shared}"), None)
        .await
        .expect(404);
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn identity_search_answers_only_the_callers_identities_from_the_callers_audio() {
    let env = Env::start().await;
    env.grant("10");
    let (bob_id, bob) = env.new_user("bob@example.com");
    env.store()
        .grant_credit(bob_id, "10".parse().unwrap(), Some("test"))
        .unwrap();
    let audio = "https://media.example.com/sample.wav";
    let alice_ids: Vec<String> = {
        let mut v = Vec::new();
        for name in ["A1", "A2", "A3"] {
            let a = env
                .post(
                    "/identity/enroll",
                    json!({"name": name, "audio_url": audio}),
                )
                .await;
            a.expect(200);
            v.push(a.json["item"]["uuid"].as_str().unwrap().to_owned());
        }
        v
    };
    let b = env
        .call_as(
            &bob,
            "POST",
            &env.voice("/identity/enroll"),
            Some(json!({"name": "B1", "audio_url": audio})),
        )
        .await;
    b.expect(200);
    let bob_identity = b.json["item"]["uuid"].as_str().unwrap().to_owned();
    // Bob's search: his identity only, never Alice's.
    let s = env
        .call_as(
            &bob,
            "POST",
            &env.voice("/identity/search"),
            Some(json!({"audio_url": audio, "top_k": 5})),
        )
        .await;
    s.expect(200);
    let found: Vec<&String> = s.json["item"].as_object().unwrap().keys().collect();
    assert_eq!(found, vec![&bob_identity], "{}", s.text);
    // Alice's: hers only, the top_k nearest.
    let all = env
        .post("/identity/search", json!({"audio_url": audio, "top_k": 3}))
        .await;
    all.expect(200);
    let all = all.json["item"].as_object().unwrap().clone();
    let mut ranked: Vec<(&String, f64)> = all
        .iter()
        .map(|(k, v)| (k, v["distance"].as_f64().unwrap()))
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut mine: Vec<&String> = all.keys().collect();
    mine.sort();
    let mut expected: Vec<&String> = alice_ids.iter().collect();
    expected.sort();
    assert_eq!(mine, expected, "all three of hers");
    let s = env
        .post("/identity/search", json!({"audio_url": audio, "top_k": 2}))
        .await;
    s.expect(200);
    let mut nearest: Vec<&String> = s.json["item"].as_object().unwrap().keys().collect();
    nearest.sort();
    let mut want: Vec<&String> = ranked[..2].iter().map(|(k, _)| *k).collect();
    want.sort();
    assert_eq!(nearest, want, "{}", s.text);
    // Alice's upload is not Bob's to enroll or search with.
    let up = env.upload("me.wav", wav(1.0), None).await;
    up.expect(200);
    env.clear_sim_log().await;
    for path in ["/identity/enroll", "/identity/search"] {
        let a = env
            .call_as(
                &bob,
                "POST",
                &env.voice(path),
                Some(json!({"name": "stolen", "audio_url": up.json["url"]})),
            )
            .await;
        a.expect(400);
        assert!(a.detail().contains("not yours"), "{path}: {}", a.text);
    }
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn agent_tools_belong_to_their_agent_and_its_owner() {
    let env = Env::start().await;
    let (_, bob) = env.new_user("bob@example.com");
    let agent = env
        .post("/agents", json!({"fields": {"name": "Alice's desk"}}))
        .await;
    agent.expect(200);
    let agent = agent.json["item"]["uuid"].as_str().unwrap().to_owned();
    let tool = env
        .post(
            "/agent-tools",
            json!({"fields": {"agent_uuid": agent, "name": "lookup"}}),
        )
        .await;
    tool.expect(200);
    let tool = tool.json["item"]["uuid"].as_str().unwrap().to_owned();
    let rows: Vec<(String, Option<String>)> = env
        .store()
        .resource_owners("agent_tool")
        .unwrap()
        .into_keys()
        .map(|id| {
            let parent = env.store().resource_parent("agent_tool", &id).unwrap();
            (id, parent)
        })
        .collect();
    assert_eq!(
        rows,
        vec![(tool.clone(), Some(agent.clone()))],
        "the tool's agent is recorded"
    );

    env.clear_sim_log().await;
    let bob_call = |method: &'static str, path: String, body: Option<Value>| {
        let (env, bob) = (&env, &bob);
        async move { env.call_as(bob, method, &env.voice(&path), body).await }
    };
    // Bob cannot hang a tool on Alice's agent, nor reach her tool.
    let a = bob_call(
        "POST",
        "/agent-tools".into(),
        Some(json!({"fields": {"agent_uuid": agent, "name": "mine now"}})),
    )
    .await;
    a.expect(404);
    assert_eq!(a.detail(), format!("no agent {agent}"));
    for (method, body) in [
        ("GET", None),
        ("PUT", Some(json!({"fields": {"name": "x"}}))),
        ("DELETE", None),
    ] {
        bob_call(method, format!("/agent-tools/{tool}"), body)
            .await
            .expect(404);
    }
    env.assert_no_upstream_call().await;
    // Bob's list across his (no) agents is empty; Alice's holds her tool.
    let listed = bob_call("GET", "/agent-tools".into(), None).await;
    listed.expect(200);
    assert_eq!(ids(&listed.json), Vec::<String>::new());
    assert_eq!(ids(&env.get("/agent-tools").await.json), vec![tool.clone()]);
    // A second agent of Alice's: the list spans both; a filter narrows it.
    let agent2 = env
        .post("/agents", json!({"fields": {"name": "Second desk"}}))
        .await;
    let agent2 = agent2.json["item"]["uuid"].as_str().unwrap().to_owned();
    let tool2 = env
        .post(
            "/agent-tools",
            json!({"fields": {"agent_uuid": agent2, "name": "book"}}),
        )
        .await;
    tool2.expect(200);
    let tool2 = tool2.json["item"]["uuid"].as_str().unwrap().to_owned();
    let mut all = ids(&env.get("/agent-tools").await.json);
    all.sort();
    let mut want = vec![tool.clone(), tool2.clone()];
    want.sort();
    assert_eq!(all, want);
    assert_eq!(
        ids(&env
            .get(&format!("/agent-tools?agent_uuid={agent2}"))
            .await
            .json),
        vec![tool2]
    );
}
