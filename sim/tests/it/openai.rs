//! The OpenAI-compatible API under `/v1`.

use std::time::{Duration, Instant};

use reqwest::multipart::{Form, Part};
use serde_json::{json, Value};
use sim::SimConfig;

use crate::support::{client, post};

async fn start() -> (sim::Sim, reqwest::Client) {
    let sim = crate::support::start(SimConfig {
        job_duration: Duration::from_millis(90),
        ..Default::default()
    })
    .await;
    (sim, client())
}

#[tokio::test]
async fn chat_and_completions() {
    let (sim, c) = start().await;
    let llm = sim.llm_url();
    let (s, v) = post(
        &c,
        format!("{llm}/chat/completions"),
        json!({"model": "m1", "messages": [{"role": "user", "content": "hello there"}]}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "m1");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["prompt_tokens"], 2);
    assert_eq!(v["usage"]["completion_tokens"], 12);
    let (s, v) = post(
        &c,
        format!("{llm}/chat/completions"),
        json!({"messages": []}),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(v["error"]["type"], "invalid_request_error");
    let (s, v) = post(&c, format!("{llm}/chat/completions"), json!({})).await;
    assert_eq!((s, v["error"]["param"].clone()), (400, json!("messages")));

    // Streaming: word chunks, a finish chunk, a usage chunk, [DONE]; paced by stream_delay_ms.
    post(
        &c,
        format!("{}/__sim/config", sim.url()),
        json!({"stream_delay_ms": 20}),
    )
    .await;
    let t = Instant::now();
    let r = c
        .post(format!("{llm}/chat/completions"))
        .json(&json!({"messages": [{"role": "user", "content": "hi"}], "stream": true, "max_tokens": 5, "stream_options": {"include_usage": true}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let body = r.text().await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(100));
    let events: Vec<&str> = body
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.strip_prefix("data: ").unwrap())
        .collect();
    assert_eq!(*events.last().unwrap(), "[DONE]");
    let parsed: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert_eq!(parsed.len(), 1 + 5 + 1 + 1);
    let text: String = parsed
        .iter()
        .filter_map(|p| p["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text.split_whitespace().count(), 5);
    assert_eq!(parsed[6]["choices"][0]["finish_reason"], "length");
    assert_eq!(parsed[7]["usage"]["completion_tokens"], 5);

    let (s, v) = post(
        &c,
        format!("{llm}/completions"),
        json!({"prompt": "once upon", "max_tokens": 3}),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(v["object"], "text_completion");
    assert_eq!(
        v["choices"][0]["text"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count(),
        3
    );
    let (s, _) = post(&c, format!("{llm}/completions"), json!({})).await;
    assert_eq!(s, 400);
}

#[tokio::test]
async fn embeddings_images_models() {
    let (sim, c) = start().await;
    let llm = sim.llm_url();
    let (s, v) = post(
        &c,
        format!("{llm}/embeddings"),
        json!({"input": ["a", "b"], "dimensions": 8}),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert_eq!(v["data"][1]["embedding"].as_array().unwrap().len(), 8);
    let (_, w) = post(
        &c,
        format!("{llm}/embeddings"),
        json!({"text": "a", "dimensions": 8}),
    )
    .await;
    assert_eq!(
        w["data"][0]["embedding"], v["data"][0]["embedding"],
        "deterministic"
    );

    let (s, v) = post(
        &c,
        format!("{llm}/images/generations"),
        json!({"prompt": "a cat", "n": 2, "size": "256x256"}),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    let r = c
        .get(v["data"][0]["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "image/png");
    assert!(r.bytes().await.unwrap().starts_with(b"\x89PNG"));
    let (s, _) = post(
        &c,
        format!("{llm}/images/generations"),
        json!({"prompt": "x", "n": 11}),
    )
    .await;
    assert_eq!(s, 400);

    let v: Value = c
        .get(format!("{llm}/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["object"], "list");
    assert_eq!(
        c.get(format!("{llm}/models/nope"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

#[tokio::test]
async fn videos_speech_transcription() {
    let (sim, c) = start().await;
    let llm = sim.llm_url();
    let (s, v) = post(
        &c,
        format!("{llm}/videos"),
        json!({"prompt": "waves", "seconds": "8"}),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(v["status"], "queued");
    let id = v["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(120)).await;
    let v: Value = c
        .get(format!("{llm}/videos/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (v["status"].clone(), v["progress"].clone()),
        (json!("completed"), json!(100))
    );
    let (s, _) = post(&c, format!("{llm}/videos/{id}/cancel"), json!({})).await;
    assert_eq!(s, 400);
    let r = c
        .get(format!("{llm}/videos/{id}/content"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "video/mp4");
    assert_eq!(&r.bytes().await.unwrap()[4..8], b"ftyp");
    let (_, v) = post(&c, format!("{llm}/videos"), json!({"prompt": "rain"})).await;
    let id2 = v["id"].as_str().unwrap();
    let r = c
        .get(format!("{llm}/videos/{id2}/content"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400, "not ready while queued");
    let (s, v) = post(&c, format!("{llm}/videos/{id2}/cancel"), json!({})).await;
    assert_eq!((s, v["status"].clone()), (200, json!("cancelled")));
    let v: Value = c
        .get(format!("{llm}/videos"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);

    let r = c
        .post(format!("{llm}/audio/speech"))
        .json(&json!({"input": "x".repeat(50), "voice": "alloy"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "audio/mpeg");
    assert_eq!(r.headers()["x-sim-audio-duration"], "3");
    let (frames, secs) = sim::audio::mp3_frames(&r.bytes().await.unwrap()).unwrap();
    assert_eq!(frames, 125);
    assert!((secs - 3.0).abs() < 1e-9);

    let wav = sim::audio::wav_tone(2500, 16000, 16);
    let form = Form::new()
        .part("file", Part::bytes(wav).file_name("a.wav"))
        .text("model", "sim-whisper");
    let v: Value = c
        .post(format!("{llm}/audio/transcriptions"))
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(v["text"].as_str().unwrap().len() > 3);
    assert_eq!(v["usage"]["seconds"], 3.0);
    let form = Form::new().text("model", "sim-whisper");
    assert_eq!(
        c.post(format!("{llm}/audio/translations"))
            .multipart(form)
            .send()
            .await
            .unwrap()
            .status(),
        400
    );

    // Everything is in the request log.
    assert!(sim
        .requests()
        .iter()
        .any(|r| r["path"] == "/v1/audio/transcriptions"));
}
