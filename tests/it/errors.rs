//! Upstream error mapping (spec §7, voice API), network failures and
//! time-outs; the upstream key never reaches an answer; failures leave no record.

use serde_json::json;

use crate::harness::*;

#[tokio::test]
async fn upstream_statuses_map_as_spec_7() {
    let env = Env::start().await;
    // (injected status, expected gateway status, text the detail must contain)
    let cases = [
        (400, 400, "voice_uuid is not valid"),
        (422, 400, "voice_uuid is not valid"),
        (401, 502, "credentials"),
        (403, 502, "credentials or plan"),
        (500, 502, "failed (status 500)"),
        (502, 502, "failed (status 502)"),
        (503, 502, "failed (status 503)"),
    ];
    for (injected, expected, words) in cases {
        env.fault(json!({
            "path": "/api/v2/voices/*",
            "fault": {"status": injected, "body": {"success": false, "message": "voice_uuid is not valid"}},
        }))
        .await;
        let a = env.get("/tts/voices/stock-voice-1").await;
        a.expect(expected);
        assert!(a.detail().contains(words), "{injected}: {}", a.text);
    }
    assert!(
        env.audit().is_empty(),
        "failed requests write no audit record"
    );
}

#[tokio::test]
async fn upstream_429_passes_through_with_retry_after() {
    let env = Env::start().await;
    env.fault(
        json!({"path": "/synthesize", "fault": {"status": 429, "headers": {"Retry-After": "7"}}}),
    )
    .await;
    let a = env.post("/tts/synthesize", synth_body("hi")).await;
    a.expect(429);
    assert_eq!(a.header("retry-after"), Some("7"));
    assert!(env.audit().is_empty());
}

#[tokio::test]
async fn upstream_message_is_scrubbed_of_the_key() {
    let env = Env::start().await;
    env.fault(json!({
        "path": "/api/v2/voices*",
        "fault": {"status": 400, "body": {"success": false, "message": format!("bad token {PROVIDER_KEY}")}},
    }))
    .await;
    let a = env.get("/tts/voices").await;
    a.expect(400); // expect() also checks that the key is absent
    assert!(a.detail().contains("[redacted]"), "{}", a.text);
}

#[tokio::test]
async fn reset_timeout_and_refused_are_502_network_error() {
    let env = Env::with(|c| c.upstream_timeout = std::time::Duration::from_millis(500)).await;
    env.fault(json!({"path": "/api/v2/voices*", "fault": "reset"}))
        .await;
    let a = env.get("/tts/voices").await;
    a.expect(502);
    assert!(
        a.detail().contains("network error contacting"),
        "{}",
        a.text
    );

    env.fault(json!({"path": "/synthesize", "fault": "timeout"}))
        .await;
    let a = env.post("/tts/synthesize", synth_body("hi")).await;
    a.expect(502);
    assert!(
        a.detail()
            .contains("network error contacting the voice provider"),
        "{}",
        a.text
    );
    assert!(a.detail().contains("timed out"), "{}", a.text);

    // A delay shorter than the time-out is just slow, not an error.
    env.fault(json!({"path": "/api/v2/voices*", "fault": {"delay_ms": 100}}))
        .await;
    env.get("/tts/voices").await.expect(200);
    assert_eq!(env.audit().len(), 1, "only the successful call is recorded");

    // Connection refused: an upstream on a port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let env2 = Env::with(|c| c.provider_base_url = format!("http://127.0.0.1:{port}/api/v2")).await;
    let a = env2.get("/tts/voices").await;
    a.expect(502);
    assert!(
        a.detail()
            .contains("network error contacting the voice provider"),
        "{}",
        a.text
    );
    assert!(env2.audit().is_empty());
}

#[tokio::test]
async fn not_configured_upstream_is_503() {
    let env = Env::with(|c| c.provider_api_key = None).await;
    for (m, p, b) in [
        ("GET", "/tts/voices", None),
        ("POST", "/tts/synthesize", Some(synth_body("hi"))),
        ("GET", "/projects", None),
    ] {
        let a = env.call(m, p, b).await;
        a.expect(503);
        assert_eq!(a.detail(), "upstream integration not configured");
    }
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn unknown_routes_and_methods() {
    let env = Env::start().await;
    let a = env.get("/no/such/route").await;
    a.expect(404);
    assert!(a.detail().contains("no route"));
    let a = env.call("DELETE", "/tts/synthesize", None).await;
    a.expect(405);
    assert_eq!(a.header("allow"), Some("POST"));
    let health = env.client.get(env.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
    // General-gateway routes answer in format 2 (here: no video model is
    // configured without a providers file).
    let a = env
        .call_as(
            &env.key,
            "POST",
            &env.url("/api/v1/videos/generations"),
            Some(json!({"prompt": "a cat"})),
        )
        .await;
    a.expect(404);
    assert_eq!(a.json["success"], json!(false));
    assert!(a.json["request_id"].as_str().unwrap().starts_with("res_"));
    assert_eq!(a.json["data"], json!(""));
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn upstream_404_is_404() {
    let env = Env::start().await;
    let a = env.get("/tts/voices/no-such-voice").await;
    a.expect(404);
    assert!(env.audit().is_empty());
}

#[tokio::test]
async fn successful_answers_are_scrubbed_of_the_key_too() {
    let env = Env::start().await;
    env.grant("10");
    let echo = format!("the upstream echoes {PROVIDER_KEY} back");
    // Streamed pass-through (proxy).
    env.fault(json!({
        "path": "/api/v2/voices/stock-voice-1",
        "fault": {"status": 200, "body": {"uuid": "stock-voice-1", "note": echo}},
    }))
    .await;
    let a = env.get("/tts/voices/stock-voice-1").await;
    a.expect(200); // expect() also checks that the key is absent
    assert!(
        a.text.contains("the upstream echoes [redacted] back"),
        "{}",
        a.text
    );
    // Read and answered (fields create).
    env.fault(json!({
        "path": "/api/v2/projects",
        "fault": {"status": 200, "body": {"success": true, "item": {"uuid": "p-echo", "note": echo}}},
    }))
    .await;
    let a = env
        .post("/projects", json!({"fields": {"name": "echo"}}))
        .await;
    a.expect(200);
    assert!(a.text.contains("[redacted]"), "{}", a.text);
    // A job submission.
    env.fault(json!({
        "path": "/api/v2/speech-to-text",
        "fault": {"status": 200, "body": {"success": true, "item": {"uuid": "j-echo", "status": "pending", "note": echo}}},
    }))
    .await;
    let up = env.upload("a.wav", wav(1.0), None).await;
    up.expect(200);
    let a = env.post("/stt", json!({"audio_url": up.json["url"]})).await;
    a.expect(200);
    assert!(a.text.contains("[redacted]"), "{}", a.text);
}
