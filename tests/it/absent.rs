//! Absent by design (spec §1): WebSocket streaming synthesis, live agent
//! dispatch, agent phone numbers and an OpenAI-style `POST /audio/speech`
//! for the voice provider are not routes. Each answers 404 or 405 and
//! nothing reaches the upstream (the simulator's request log stays empty).

use serde_json::json;

use crate::harness::*;

#[tokio::test]
async fn routes_absent_by_design_answer_404_or_405_without_an_upstream_call() {
    let env = Env::start().await;
    let agent = "0b7c7c1e-0000-4000-8000-000000000001";
    let cases: &[(&str, String)] = &[
        // WebSocket streaming synthesis, under any likely name.
        ("GET", "/tts/websocket".into()),
        ("GET", "/tts/stream".into()),
        ("GET", "/tts/synthesize/stream".into()),
        ("GET", "/websocket".into()),
        ("GET", "/stream".into()),
        // Live agent dispatch.
        ("POST", format!("/agents/{agent}/dispatch")),
        ("GET", format!("/agents/{agent}/dispatch")),
        // Agent phone numbers.
        ("GET", "/agents/phone-numbers".into()),
        ("POST", "/agents/phone-numbers".into()),
        ("DELETE", "/agents/phone-numbers".into()),
        ("GET", "/agents/phone-numbers/pn-1".into()),
        ("POST", "/agents/phone-numbers/pn-1".into()),
        ("DELETE", "/agents/phone-numbers/pn-1".into()),
        // An OpenAI-style speech shape for the voice provider.
        ("POST", "/audio/speech".into()),
        ("POST", "/tts/audio/speech".into()),
        ("POST", "/v1/audio/speech".into()),
    ];
    for (method, path) in cases {
        let a = env
            .call(
                method,
                path,
                (*method != "GET" && *method != "DELETE")
                    .then(|| json!({"input": "hi", "voice": "v", "phone_number": "+15550100"})),
            )
            .await;
        assert!(
            a.status == 404 || a.status == 405,
            "{method} {path}: {} {}",
            a.status,
            a.text
        );
    }
    // The WebSocket upgrade itself is refused, not switched.
    let a = env
        .client
        .get(env.voice("/tts/websocket"))
        .bearer_auth(&env.key)
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    assert_eq!(a.status().as_u16(), 404);
    env.assert_no_upstream_call().await;
    assert!(env.usage().is_empty(), "nothing billed");
    assert!(env.audit().is_empty(), "nothing audited as a success");
}
