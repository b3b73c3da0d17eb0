//! Business-plan gate (spec §3, §8): the five gated routes answer 503 without
//! any upstream call while `PROVIDER_BUSINESS_PLAN_ACTIVE` is false, and are
//! forwarded when it is true.

use serde_json::json;

use crate::harness::*;

fn gated() -> Vec<(&'static str, &'static str, serde_json::Value)> {
    vec![
        ("POST", "/voices", json!({"name": "My voice"})),
        ("POST", "/voices/stock-voice-1/build", json!({})),
        ("DELETE", "/voices/stock-voice-1", json!({})),
        (
            "POST",
            "/voice-design/candidates",
            json!({"description": "a calm narrator"}),
        ),
        (
            "POST",
            "/voice-design/d1/promote",
            json!({"candidate_index": 0, "name": "Calm"}),
        ),
    ]
}

#[tokio::test]
async fn gated_routes_answer_503_without_upstream_call() {
    let env = Env::start().await;
    for (method, path, body) in gated() {
        let a = env.call(method, path, Some(body)).await;
        a.expect(503);
        assert!(a.detail().contains("business plan"), "{path}: {}", a.text);
    }
    env.assert_no_upstream_call().await;
    assert!(env.audit().is_empty());
}

#[tokio::test]
async fn gate_checked_before_validation() {
    // Even an invalid body gets the 503: the capability is off for everyone.
    let env = Env::start().await;
    env.post("/voices", json!({})).await.expect(503);
}

#[tokio::test]
async fn open_gate_forwards() {
    let env = Env::with(|c| c.business_plan_active = true).await;
    let a = env
        .post(
            "/voices",
            json!({"name": "My voice", "consent_text": "I agree"}),
        )
        .await;
    a.expect(200);
    let uuid = a.json["item"]["uuid"]
        .as_str()
        .expect("voice uuid")
        .to_owned();
    env.post(&format!("/voices/{uuid}/build"), json!({}))
        .await
        .expect(200);
    let design = env
        .post(
            "/voice-design/candidates",
            json!({"description": "a calm narrator"}),
        )
        .await;
    design.expect(200);
    let design_uuid = design.json["item"]["uuid"]
        .as_str()
        .expect("design uuid")
        .to_owned();
    let promoted = env
        .post(
            &format!("/voice-design/{design_uuid}/promote"),
            json!({"candidate_index": 1, "name": "Calm"}),
        )
        .await;
    promoted.expect(200);
    assert!(promoted.json["voice_uuid"].is_string(), "{}", promoted.text);
    env.call("DELETE", &format!("/voices/{uuid}"), None)
        .await
        .expect(200);

    let reqs = env.sim_requests().await;
    let seen: Vec<(String, String)> = reqs
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap().to_owned(),
                r["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("POST".into(), "/api/v2/voices".into()),
            ("POST".into(), format!("/api/v2/voices/{uuid}/build")),
            ("POST".into(), "/api/v2/voice-design".into()),
            (
                "POST".into(),
                format!("/api/v2/voice-design/{design_uuid}/1/create_rapid_voice")
            ),
            ("DELETE".into(), format!("/api/v2/voices/{uuid}")),
        ]
    );
    // Mapped shapes: build sends {"fill": false}; design sends user_prompt; promote sends voice_name.
    let body = |i: usize| -> serde_json::Value {
        serde_json::from_str(reqs[i]["body"].as_str().unwrap()).unwrap()
    };
    assert_eq!(body(1), json!({"fill": false}));
    assert_eq!(body(2), json!({"user_prompt": "a calm narrator"}));
    assert_eq!(body(3), json!({"voice_name": "Calm"}));
    assert_eq!(env.audit().len(), 5);
}
