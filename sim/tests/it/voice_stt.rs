//! The voice vendors' transcription APIs (ElevenLabs speech to text,
//! Deepgram listen) and the claimed-duration factor, on them and on
//! OpenAI's transcription.

use reqwest::multipart::Form;
use serde_json::{json, Value};
use sim::SimConfig;

use crate::support::{client, post, serve_bytes, wav_part};

const KEY: &str = "k-voice";

async fn start() -> (sim::Sim, reqwest::Client) {
    let sim = crate::support::start(SimConfig {
        api_key: Some(KEY.into()),
        ..Default::default()
    })
    .await;
    (sim, client())
}

/// Sets the claimed-duration factor through the control plane.
async fn factor(sim: &sim::Sim, c: &reqwest::Client, f: f64) {
    let (s, v) = post(
        c,
        format!("{}/__sim/config", sim.url()),
        json!({"stt_duration_factor": f}),
    )
    .await;
    assert_eq!((s, v["stt_duration_factor"].clone()), (200, json!(f)));
}

/// ElevenLabs speech to text of a multipart form: (status, measured header, claimed header, body).
async fn scribe(
    c: &reqwest::Client,
    url: &str,
    key: &str,
    form: Form,
) -> (u16, Option<String>, Value) {
    let r = c
        .post(format!("{url}/v1/speech-to-text"))
        .header("xi-api-key", key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let measured = r
        .headers()
        .get("x-sim-audio-duration")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, measured, r.json().await.unwrap())
}

#[tokio::test]
async fn elevenlabs_transcribes_and_claims_the_factor() {
    let (sim, c) = start().await;
    let url = sim.url();
    let form = Form::new()
        .text("model_id", "scribe_v1")
        .part("file", wav_part(2500, "a.wav"));
    let (s, measured, v) = scribe(&c, &url, KEY, form).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(measured.as_deref(), Some("2.5"));
    assert_eq!(
        (
            v["language_code"].clone(),
            v["language_probability"].clone()
        ),
        (json!("en"), json!(0.98))
    );
    assert!(v["text"].as_str().unwrap().len() > 10);
    assert!(v["transcription_id"].is_string());
    let words = v["words"].as_array().unwrap();
    let spoken: Vec<&Value> = words.iter().filter(|w| w["type"] == "word").collect();
    assert_eq!(
        spoken.len(),
        v["text"].as_str().unwrap().split_whitespace().count()
    );
    assert_eq!(spoken[0]["speaker_id"], "speaker_0");
    assert_eq!(spoken[0]["start"], 0.0);
    assert_eq!(spoken.last().unwrap()["end"], 2.5);

    factor(&sim, &c, 2.0).await;
    let form = Form::new()
        .text("model_id", "scribe_v2")
        .part("file", wav_part(2500, "a.wav"));
    let (_, measured, v) = scribe(&c, &url, KEY, form).await;
    assert_eq!(
        measured.as_deref(),
        Some("2.5"),
        "the measured seconds stay true"
    );
    assert_eq!(
        v["words"].as_array().unwrap().last().unwrap()["end"],
        5.0,
        "the words claim twice as long"
    );

    // From a URL instead of a file.
    let remote = serve_bytes(sim::audio::wav_tone(1500, 16000, 16)).await;
    let form = Form::new()
        .text("model_id", "scribe_v1")
        .text("cloud_storage_url", remote);
    let (s, measured, _) = scribe(&c, &url, KEY, form).await;
    assert_eq!((s, measured.as_deref()), (200, Some("1.5")));

    // Validation and keys.
    let (s, _, v) = scribe(
        &c,
        &url,
        KEY,
        Form::new().part("file", wav_part(500, "a.wav")),
    )
    .await;
    assert_eq!(s, 422);
    assert_eq!(v["detail"][0]["loc"], json!(["body", "model_id"]));
    let (s, _, v) = scribe(
        &c,
        &url,
        KEY,
        Form::new()
            .text("model_id", "whisper-1")
            .part("file", wav_part(500, "a.wav")),
    )
    .await;
    assert_eq!(
        (s, v["detail"][0]["loc"].clone()),
        (422, json!(["body", "model_id"]))
    );
    let (s, _, v) = scribe(&c, &url, KEY, Form::new().text("model_id", "scribe_v1")).await;
    assert_eq!(
        (s, v["detail"]["status"].clone()),
        (400, json!("invalid_parameters"))
    );
    let (s, _, v) = scribe(&c, &url, "nope", Form::new().text("model_id", "scribe_v1")).await;
    assert_eq!(
        (s, v["detail"]["status"].clone()),
        (401, json!("invalid_api_key"))
    );
}

#[tokio::test]
async fn deepgram_listens_to_bytes_and_urls() {
    let (sim, c) = start().await;
    let listen = format!(
        "{}/v1/listen?model=nova-3&smart_format=true&language=en",
        sim.url()
    );
    let wav = sim::audio::wav_tone(2500, 16000, 16);
    let r = c
        .post(&listen)
        .header("authorization", format!("Token {KEY}"))
        .header("content-type", "audio/wav")
        .body(wav.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-sim-audio-duration"], "2.5");
    let v: Value = r.json().await.unwrap();
    let m = &v["metadata"];
    assert_eq!(
        (m["duration"].clone(), m["channels"].clone()),
        (json!(2.5), json!(1))
    );
    assert_eq!(m["transaction_key"], "deprecated");
    assert_eq!(m["sha256"].as_str().unwrap().len(), 64);
    assert!(chrono::DateTime::parse_from_rfc3339(m["created"].as_str().unwrap()).is_ok());
    let model = m["models"][0].as_str().unwrap();
    assert_eq!(m["model_info"][model]["name"], "general-nova-3");
    assert_eq!(m["model_info"][model]["arch"], "nova-3");
    let alt = &v["results"]["channels"][0]["alternatives"][0];
    assert!(alt["transcript"].as_str().unwrap().ends_with('.'));
    assert!(alt["confidence"].as_f64().unwrap() > 0.5);
    assert_eq!(alt["words"][0]["word"], "the");
    assert_eq!(alt["words"][0]["punctuated_word"], "The");
    assert_eq!(alt["words"].as_array().unwrap().last().unwrap()["end"], 2.5);

    factor(&sim, &c, 2.0).await;
    let remote = serve_bytes(wav).await;
    let r = c
        .post(&listen)
        .header("authorization", format!("Token {KEY}"))
        .json(&json!({"url": remote}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-sim-audio-duration"], "2.5");
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["metadata"]["duration"], 5.0,
        "the claim is twice the measured seconds"
    );

    let r = c
        .post(&listen)
        .header("authorization", format!("Token {KEY}"))
        .header("content-type", "audio/wav")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["err_code"], "Bad Request");
    let r = c
        .post(&listen)
        .header("authorization", format!("Token token={KEY}"))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.json::<Value>().await.unwrap()["err_code"], "INVALID_AUTH");
}

#[tokio::test]
async fn openai_transcription_claims_the_factor() {
    let (sim, c) = start().await;
    factor(&sim, &c, 2.0).await;
    let form = Form::new()
        .text("model", "sim-whisper")
        .part("file", wav_part(2500, "a.wav"));
    let r = c
        .post(format!("{}/audio/transcriptions", sim.llm_url()))
        .bearer_auth(KEY)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-sim-audio-duration"], "2.5");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["usage"]["seconds"], 5.0);
}
