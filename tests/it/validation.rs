//! Validation (spec §4, §8): each rule answers 400 `{"detail"}` naming the
//! field, with no upstream call and no record.

use serde_json::{json, Value};

use crate::harness::*;

/// (method, path, body, words the detail must contain)
fn cases() -> Vec<(&'static str, String, Option<Value>, &'static str)> {
    let long = |n: usize| "a".repeat(n);
    let synth = |extra: Value| {
        let mut b = json!({"voice_uuid": "stock-voice-1", "text": "hello"});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        Some(b)
    };
    vec![
        (
            "POST",
            "/tts/synthesize".into(),
            synth(json!({"text": long(10_001)})),
            "text must be at most 10000 characters",
        ),
        (
            "POST",
            "/tts/synthesize".into(),
            Some(json!({"voice_uuid": "stock-voice-1"})),
            "text is required",
        ),
        (
            "POST",
            "/tts/synthesize".into(),
            Some(json!({"text": "hi"})),
            "voice_uuid is required",
        ),
        (
            "POST",
            "/tts/synthesize".into(),
            synth(json!({"sample_rate": 7999})),
            "sample_rate must be between 8000 and 48000",
        ),
        (
            "POST",
            "/tts/synthesize".into(),
            synth(json!({"sample_rate": 48001})),
            "sample_rate must be between 8000 and 48000",
        ),
        (
            "POST",
            "/tts/synthesize".into(),
            synth(json!({"sample_rate": "fast"})),
            "sample_rate must be an integer",
        ),
        (
            "POST",
            "/tts/synthesize".into(),
            synth(json!({"speed": 0.49})),
            "speed must be between 0.5 and 2",
        ),
        (
            "POST",
            "/tts/synthesize".into(),
            synth(json!({"speed": 2.01})),
            "speed must be between 0.5 and 2",
        ),
        (
            "POST",
            "/tts/synthesize".into(),
            synth(json!({"output_format": "ogg"})),
            "output_format must be one of: mp3, wav",
        ),
        (
            "POST",
            "/tts/synthesize".into(),
            synth(json!({"precision": "PCM_8"})),
            "precision must be one of: PCM_16, PCM_32, MULAW",
        ),
        (
            "POST",
            "/tts/synthesize".into(),
            None,
            "voice_uuid is required",
        ),
        (
            "GET",
            "/tts/voices?page_size=9".into(),
            None,
            "page_size must be between 10 and 1000",
        ),
        (
            "GET",
            "/tts/voices?page_size=1001".into(),
            None,
            "page_size must be between 10 and 1000",
        ),
        (
            "GET",
            "/tts/voices?page_size=ten".into(),
            None,
            "page_size must be an integer",
        ),
        (
            "GET",
            "/tts/voices?page=0".into(),
            None,
            "page must be at least 1",
        ),
        (
            "POST",
            "/stt".into(),
            Some(json!({})),
            "audio_url is required",
        ),
        (
            "POST",
            "/enhance".into(),
            Some(json!({"audio_url": 5})),
            "audio_url must be a string",
        ),
        (
            "POST",
            "/agents".into(),
            Some(json!({"name": "x"})),
            "fields is required",
        ),
        (
            "POST",
            "/projects".into(),
            Some(json!({"fields": "x"})),
            "fields must be an object",
        ),
        (
            "POST",
            "/knowledge-base".into(),
            Some(json!([1, 2])),
            "request body must be a JSON object",
        ),
        (
            "POST",
            "/agent-tools".into(),
            Some(json!({"fields": {"name": "x"}})),
            "fields.agent_uuid is required",
        ),
        (
            "POST",
            "/identity/search".into(),
            Some(json!({})),
            "audio_url is required",
        ),
    ]
}

fn gated_cases(design: &str) -> Vec<(&'static str, String, Option<Value>, &'static str)> {
    let promote = format!("/voice-design/{design}/promote");
    vec![
        (
            "POST",
            "/voices".into(),
            Some(json!({"name": "a".repeat(129)})),
            "name must be at most 128 characters",
        ),
        (
            "POST",
            "/voices".into(),
            Some(json!({})),
            "name is required",
        ),
        (
            "POST",
            "/voice-design/candidates".into(),
            Some(json!({"description": "d".repeat(1025)})),
            "description must be at most 1024 characters",
        ),
        (
            "POST",
            "/voice-design/candidates".into(),
            Some(json!({"description": "d", "params": 3})),
            "params must be an object",
        ),
        (
            "POST",
            promote.clone(),
            Some(json!({"name": "x"})),
            "candidate_index is required",
        ),
        (
            "POST",
            promote.clone(),
            Some(json!({"candidate_index": -1, "name": "x"})),
            "candidate_index must be at least 0",
        ),
        (
            "POST",
            promote.clone(),
            Some(json!({"candidate_index": 0, "name": "n".repeat(129)})),
            "name must be at most 128 characters",
        ),
        (
            "POST",
            promote.clone(),
            Some(json!({"candidate_index": 0})),
            "name is required",
        ),
    ]
}

async fn run(env: &Env, cases: Vec<(&'static str, String, Option<Value>, &'static str)>) {
    run_after(env, cases, 0).await
}

/// Runs the cases; `audit_rows` records existed before them.
async fn run_after(
    env: &Env,
    cases: Vec<(&'static str, String, Option<Value>, &'static str)>,
    audit_rows: usize,
) {
    for (method, path, body, expected) in cases {
        let mut rb = env
            .client
            .request(method.parse().unwrap(), env.voice(&path))
            .bearer_auth(&env.key);
        if let Some(b) = &body {
            rb = rb.json(b);
        }
        let a = Answer::from(rb.send().await.unwrap()).await;
        assert_eq!(a.status, 400, "{method} {path}: {}", a.text);
        assert!(
            a.detail().contains(expected),
            "{method} {path}: expected {expected:?} in {}",
            a.text
        );
    }
    env.assert_no_upstream_call().await;
    assert_eq!(
        env.audit().len(),
        audit_rows,
        "no record for a refused request"
    );
}

#[tokio::test]
async fn every_rule_answers_400_naming_the_field() {
    let env = Env::start().await;
    run(&env, cases()).await;
}

#[tokio::test]
async fn gated_routes_validate_once_the_gate_is_open() {
    let env = Env::with(|c| c.business_plan_active = true).await;
    let design = env
        .post("/voice-design/candidates", json!({"description": "calm"}))
        .await;
    design.expect(200);
    let design = design.json["item"]["uuid"].as_str().unwrap().to_owned();
    env.clear_sim_log().await;
    let before = env.audit().len();
    run_after(&env, gated_cases(&design), before).await;
}

#[tokio::test]
async fn boundaries_are_accepted() {
    let env = Env::start().await;
    for extra in [
        json!({"sample_rate": 8000}),
        json!({"sample_rate": 48000}),
        json!({"speed": 0.5}),
        json!({"speed": 2.0}),
        json!({"precision": "MULAW"}),
    ] {
        let mut b = synth_body("hello");
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        env.post("/tts/synthesize", b).await.expect(200);
    }
    env.post("/tts/synthesize", synth_body(&"a".repeat(10_000)))
        .await
        .expect(200);
    env.get("/tts/voices?page_size=10").await.expect(200);
    env.get("/tts/voices?page_size=1000").await.expect(200);
}

#[tokio::test]
async fn oversized_json_body_is_413() {
    let env = Env::with(|c| c.max_json_bytes = 1024).await;
    let a = env
        .post("/tts/synthesize", synth_body(&"a".repeat(2000)))
        .await;
    a.expect(413);
    env.assert_no_upstream_call().await;
}
