//! `POST /tts/synthesize` (spec A1, §2): the request reaches the synthesis
//! cluster in the provider's shape, and the answer has the gateway's shape.

use base64::Engine;
use serde_json::{json, Value};

use crate::harness::*;

fn is_request_id(s: &str) -> bool {
    s.len() == 28
        && s.starts_with("res_")
        && s[4..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

#[tokio::test]
async fn synthesis_answer_has_the_spec_shape() {
    let env = Env::start().await;
    let a = env.post("/tts/synthesize", json!({"voice_uuid": "stock-voice-1", "text": "Hello there, world", "output_format": "wav", "sample_rate": 16000})).await;
    a.expect(200);
    let v = &a.json;
    assert!(
        is_request_id(v["request_id"].as_str().unwrap()),
        "{}",
        v["request_id"]
    );
    assert_eq!(v["request_id"].as_str(), a.header("x-request-id"));
    assert_eq!(v["voice_uuid"], json!("stock-voice-1"));
    let audio = base64::engine::general_purpose::STANDARD
        .decode(v["audio_content"].as_str().unwrap())
        .unwrap();
    let wav = hound::WavReader::new(std::io::Cursor::new(&audio)).expect("real WAV audio");
    let secs = wav.duration() as f64 / wav.spec().sample_rate as f64;
    let reported = v["audio_duration"].as_f64().unwrap();
    assert!(
        (secs - reported).abs() < 0.01,
        "duration {secs} vs reported {reported}"
    );
    assert_eq!(v["raw_response"]["duration"].as_f64(), Some(reported));
    assert!(
        v["raw_response"].get("audio_content").is_none(),
        "audio is not repeated in raw_response"
    );
    assert_eq!(v["raw_response"]["success"], json!(true));

    // Upstream saw the provider's shape: `data`, not `text`, with the bearer key.
    let reqs = env.sim_requests().await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["path"], json!("/synthesize"));
    let sent: Value = serde_json::from_str(reqs[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(sent["data"], json!("Hello there, world"));
    assert!(sent.get("text").is_none());
    assert_eq!(sent["sample_rate"], json!(16000));
    let auth = reqs[0]["headers"]["authorization"].as_str().unwrap();
    assert_eq!(auth, format!("Bearer {PROVIDER_KEY}"));

    let rows = env.audit();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].request_id, v["request_id"].as_str().unwrap());
}

#[tokio::test]
async fn output_format_defaults_to_mp3() {
    let env = Env::start().await;
    let a = env
        .post(
            "/tts/synthesize",
            json!({"voice_uuid": "stock-voice-1", "text": "Hello"}),
        )
        .await;
    a.expect(200);
    let audio = base64::engine::general_purpose::STANDARD
        .decode(a.json["audio_content"].as_str().unwrap())
        .unwrap();
    assert_eq!(audio[0], 0xFF, "MPEG frame sync");
    assert_eq!(audio[1] & 0xE0, 0xE0, "MPEG frame sync");
    let reqs = env.sim_requests().await;
    let sent: Value = serde_json::from_str(reqs[0]["body"].as_str().unwrap()).unwrap();
    assert_eq!(sent["output_format"], json!("mp3"));
}

#[tokio::test]
async fn longer_text_gives_longer_audio() {
    let env = Env::start().await;
    let short = env.post("/tts/synthesize", synth_body("Hello there")).await;
    let long = env
        .post("/tts/synthesize", synth_body(&"Hello there. ".repeat(20)))
        .await;
    let d = |a: &Answer| a.json["audio_duration"].as_f64().unwrap();
    assert!(d(&long) > d(&short) * 5.0, "{} vs {}", d(&long), d(&short));
}

#[tokio::test]
async fn unknown_voice_is_404_and_not_recorded() {
    let env = Env::start().await;
    let a = env
        .post(
            "/tts/synthesize",
            json!({"voice_uuid": "nope", "text": "hi"}),
        )
        .await;
    a.expect(404);
    assert!(env.audit().is_empty());
}
