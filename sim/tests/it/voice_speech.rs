//! The voice vendors' speech APIs (ElevenLabs, Deepgram, Cartesia): real
//! audio of the asked format and length, paced in several chunks, keys,
//! validation errors, voice lists, faults in the vendor's shape and the
//! request log.

use std::io::Cursor;

use serde_json::{json, Value};
use sim::SimConfig;

use crate::support::{chunks, client, post};

const KEY: &str = "k-voice";

async fn start() -> (sim::Sim, reqwest::Client) {
    let sim = crate::support::start(SimConfig {
        api_key: Some(KEY.into()),
        tts_chunk_ms: 30,
        ..Default::default()
    })
    .await;
    (sim, client())
}

/// A WAV's (sample rate, seconds).
fn wav_info(bytes: &[u8]) -> (u32, f64) {
    let r = hound::WavReader::new(Cursor::new(bytes)).unwrap();
    let rate = r.spec().sample_rate;
    (rate, f64::from(r.duration()) / f64::from(rate))
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.03
}

#[tokio::test]
async fn elevenlabs_speech_formats_lengths_and_stream() {
    let (sim, c) = start().await;
    let tts = format!("{}/v1/text-to-speech/21m00Tcm4TlvDq8ikWAM", sim.url());
    // 50 two-byte characters: 3 s at 0.06 s a character.
    let body = json!({"text": "é".repeat(50), "model_id": "eleven_multilingual_v2", "voice_settings": {"stability": 0.5, "similarity_boost": 0.75}});
    let r = c
        .post(&tts)
        .header("xi-api-key", KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/mpeg");
    assert_eq!(r.headers()["x-character-count"], "50");
    assert!(!r.headers()["request-id"].is_empty());
    let (_, secs) = sim::audio::mp3_frames(&r.bytes().await.unwrap()).unwrap();
    assert!(near(secs, 3.0), "{secs}");

    let r = c
        .post(format!("{tts}?output_format=pcm_16000"))
        .header("xi-api-key", KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "audio/pcm");
    assert_eq!(r.bytes().await.unwrap().len(), 3 * 16000 * 2);

    let r = c
        .post(format!("{tts}?output_format=wav_44100"))
        .header("xi-api-key", KEY)
        .json(&json!({"text": "x".repeat(50), "voice_settings": {"speed": 1.2}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "audio/wav");
    let (rate, secs) = wav_info(&r.bytes().await.unwrap());
    assert_eq!(rate, 44100);
    assert!(near(secs, 2.5), "speed 1.2 shortens 3 s to 2.5 s: {secs}");

    let r = c
        .post(format!("{tts}/stream?output_format=mp3_22050_32"))
        .header("xi-api-key", KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-character-count"], "50");
    let (n, bytes) = chunks(r).await;
    assert!(n > 1, "streamed in {n} chunks");
    let (_, secs) = sim::audio::mp3_frames(&bytes).unwrap();
    assert!(near(secs, 3.0), "{secs}");
}

#[tokio::test]
async fn elevenlabs_errors_keys_and_voices() {
    let (sim, c) = start().await;
    let url = sim.url();
    let tts = format!("{url}/v1/text-to-speech/21m00Tcm4TlvDq8ikWAM");
    let send = |u: String, key: Option<&str>, body: Value| {
        let mut b = c.post(u).json(&body);
        if let Some(k) = key {
            b = b.header("xi-api-key", k);
        }
        async move {
            let r = b.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (s, v) = send(tts.clone(), None, json!({"text": "hi"})).await;
    assert_eq!(
        (s, v["detail"]["status"].clone()),
        (401, json!("invalid_api_key"))
    );
    let (s, _) = send(tts.clone(), Some("wrong"), json!({"text": "hi"})).await;
    assert_eq!(s, 401);
    let r = c
        .post(&tts)
        .bearer_auth(KEY)
        .json(&json!({"text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "ElevenLabs takes xi-api-key only");
    let (s, v) = send(
        tts.clone(),
        Some(KEY),
        json!({"model_id": "eleven_flash_v2_5"}),
    )
    .await;
    assert_eq!(s, 422);
    assert_eq!(
        v["detail"][0],
        json!({"loc": ["body", "text"], "msg": "Field required", "type": "missing"})
    );
    let (s, v) = send(
        format!("{tts}?output_format=flac_9"),
        Some(KEY),
        json!({"text": "hi"}),
    )
    .await;
    assert_eq!(
        (s, v["detail"][0]["loc"].clone()),
        (422, json!(["query", "output_format"]))
    );
    let (s, v) = send(
        format!("{url}/v1/text-to-speech/nobody"),
        Some(KEY),
        json!({"text": "hi"}),
    )
    .await;
    assert_eq!(
        (s, v["detail"]["status"].clone()),
        (404, json!("voice_not_found"))
    );
    assert!(v["detail"]["message"].as_str().unwrap().contains("nobody"));

    let r = c
        .get(format!("{url}/v1/voices"))
        .header("xi-api-key", KEY)
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    let voices = v["voices"].as_array().unwrap();
    assert!(voices.len() >= 3);
    assert_eq!(v["total_count"], voices.len());
    assert_eq!(
        (v["has_more"].clone(), v["next_page_token"].clone()),
        (json!(false), Value::Null)
    );
    assert_eq!(voices[0]["voice_id"], "21m00Tcm4TlvDq8ikWAM");
    assert_eq!(voices[0]["name"], "Rachel");
    assert_eq!(voices[0]["category"], "premade");
    assert!(voices[0]["labels"].is_object() && voices[0]["preview_url"].is_string());
}

#[tokio::test]
async fn deepgram_speak_formats_stream_and_errors() {
    let (sim, c) = start().await;
    let speak = format!("{}/v1/speak", sim.url());
    let body = json!({"text": "x".repeat(50)});
    let r = c
        .post(format!("{speak}?model=aura-2-thalia-en"))
        .header("authorization", format!("Token {KEY}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/mpeg");
    assert_eq!(r.headers()["dg-model-name"], "aura-2-thalia-en");
    assert_eq!(r.headers()["dg-char-count"], "50");
    assert!(!r.headers()["dg-request-id"].is_empty());
    let (n, bytes) = chunks(r).await;
    assert!(n > 1, "streamed in {n} chunks");
    let (_, secs) = sim::audio::mp3_frames(&bytes).unwrap();
    assert!(near(secs, 3.0), "{secs}");

    let q = "model=aura-2-thalia-en&encoding=linear16&container=wav&sample_rate=16000";
    let r = c
        .post(format!("{speak}?{q}"))
        .header("authorization", format!("Token {KEY}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "audio/wav");
    let (n, bytes) = chunks(r).await;
    assert!(n > 1);
    assert_eq!(wav_info(&bytes), (16000, 3.0));
    let q = "model=aura-2-thalia-en&encoding=linear16&container=none&sample_rate=24000";
    let r = c
        .post(format!("{speak}?{q}"))
        .header("authorization", format!("Token {KEY}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.bytes().await.unwrap().len(), 3 * 24000 * 2);

    let r = c
        .post(format!("{speak}?model=nova-3"))
        .header("authorization", format!("Token {KEY}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["err_code"], "Bad Request");
    assert!(v["err_msg"].is_string() && v["request_id"].is_string());
    for auth in [
        format!("Token token={KEY}"),
        format!("Bearer {KEY}"),
        "Token nope".into(),
    ] {
        let r = c
            .post(&speak)
            .header("authorization", auth)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            (v["err_code"].clone(), v["err_msg"].clone()),
            (json!("INVALID_AUTH"), json!("Invalid credentials."))
        );
    }
}

#[tokio::test]
async fn cartesia_bytes_formats_stream_and_errors() {
    let (sim, c) = start().await;
    let url = format!("{}/tts/bytes", sim.url());
    let body = |format: Value| json!({"model_id": "sonic-2", "transcript": "x".repeat(50), "voice": {"mode": "id", "id": "694f9389-aac1-45b6-b726-9d9369183238"}, "output_format": format, "language": "en"});
    let call = |b: Value| {
        c.post(&url)
            .header("x-api-key", KEY)
            .header("cartesia-version", "2025-04-16")
            .json(&b)
            .send()
    };
    let r = call(body(
        json!({"container": "wav", "encoding": "pcm_s16le", "sample_rate": 44100}),
    ))
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    let (n, bytes) = chunks(r).await;
    assert!(n > 1, "streamed in {n} chunks");
    assert_eq!(wav_info(&bytes), (44100, 3.0));
    let r = call(body(
        json!({"container": "mp3", "sample_rate": 44100, "bit_rate": 128000}),
    ))
    .await
    .unwrap();
    assert_eq!(r.headers()["content-type"], "audio/mpeg");
    let (_, secs) = sim::audio::mp3_frames(&r.bytes().await.unwrap()).unwrap();
    assert!(near(secs, 3.0));
    let r = call(body(
        json!({"container": "raw", "encoding": "pcm_f32le", "sample_rate": 16000}),
    ))
    .await
    .unwrap();
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    assert_eq!(r.bytes().await.unwrap().len(), 3 * 16000 * 4);

    let mut no_text =
        body(json!({"container": "wav", "encoding": "pcm_s16le", "sample_rate": 44100}));
    no_text.as_object_mut().unwrap().remove("transcript");
    let r = call(no_text).await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.json::<Value>().await.unwrap()["message"]
        .as_str()
        .unwrap()
        .contains("transcript"));
    let mut other =
        body(json!({"container": "wav", "encoding": "pcm_s16le", "sample_rate": 44100}));
    other["voice"]["id"] = json!("00000000-0000-0000-0000-000000000000");
    assert_eq!(call(other).await.unwrap().status(), 404);

    let good = body(json!({"container": "wav", "encoding": "pcm_s16le", "sample_rate": 44100}));
    let r = c
        .post(&url)
        .header("x-api-key", KEY)
        .json(&good)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "Cartesia-Version is required");
    let r = c
        .post(&url)
        .bearer_auth(KEY)
        .header("cartesia-version", "2025-04-16")
        .json(&good)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "a Bearer key is accepted too");
    let r = c
        .post(&url)
        .header("x-api-key", "nope")
        .header("cartesia-version", "2025-04-16")
        .json(&good)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.unwrap();
    assert!(v["error"].is_string() && v["message"].is_string());

    let r = c
        .get(format!("{}/voices", sim.url()))
        .header("x-api-key", KEY)
        .header("cartesia-version", "2025-04-16")
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert!(!v["data"].as_array().unwrap().is_empty());
    assert_eq!(
        (v["has_more"].clone(), v["next_page"].clone()),
        (json!(false), Value::Null)
    );
    assert_eq!(v["data"][0]["is_public"], true);
    assert!(v["data"][0]["id"].is_string() && v["data"][0]["created_at"].is_string());
}

#[tokio::test]
async fn faults_take_the_vendor_shape_and_calls_are_logged() {
    let (sim, c) = start().await;
    let url = sim.url();
    for path in ["/v1/text-to-speech/*", "/v1/speak", "/tts/bytes"] {
        let (s, _) = post(
            &c,
            format!("{url}/__sim/faults"),
            json!({"path": path, "fault": {"status": 429}}),
        )
        .await;
        assert_eq!(s, 200);
    }
    let r = c
        .post(format!(
            "{url}/v1/text-to-speech/21m00Tcm4TlvDq8ikWAM/stream"
        ))
        .header("xi-api-key", KEY)
        .json(&json!({"text": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["detail"]["status"], "too_many_concurrent_requests");
    let r = c
        .post(format!("{url}/v1/speak"))
        .json(&json!({"text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(
        r.json::<Value>().await.unwrap()["err_code"],
        "TOO_MANY_REQUESTS"
    );
    let r = c
        .post(format!("{url}/tts/bytes"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.json::<Value>().await.unwrap()["message"].is_string());

    // The faults are spent: the next call is answered, and every call is logged.
    let r = c
        .post(format!(
            "{url}/v1/text-to-speech/21m00Tcm4TlvDq8ikWAM?output_format=pcm_22050"
        ))
        .header("xi-api-key", KEY)
        .json(&json!({"text": "hello", "seed": 7}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let log = sim.requests();
    let e = log
        .iter()
        .rev()
        .find(|e| e["path"] == "/v1/text-to-speech/21m00Tcm4TlvDq8ikWAM")
        .unwrap();
    assert_eq!(e["query"], "output_format=pcm_22050");
    assert_eq!(e["headers"]["xi-api-key"], KEY);
    assert_eq!(e["json"], json!({"text": "hello", "seed": 7}));
    assert!(
        log.iter().any(|e| e["path"] == "/v1/speak")
            && log.iter().any(|e| e["path"] == "/tts/bytes")
    );
}
