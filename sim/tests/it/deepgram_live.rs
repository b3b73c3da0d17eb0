//! Deepgram's live transcription over real WebSockets: Results a second,
//! Finalize, CloseStream's Metadata, the claimed-duration factor, WAV
//! streams and refusals before the upgrade.

use futures_util::SinkExt;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use sim::SimConfig;
use tokio_tungstenite::tungstenite::Message;

use crate::support::{client, post};
use crate::ws::{connect, next, send, Ws};

const KEY: &str = "k-dg";

async fn start() -> sim::Sim {
    crate::support::start(SimConfig {
        api_key: Some(KEY.into()),
        ..Default::default()
    })
    .await
}

async fn open(sim: &sim::Sim, query: &str) -> Ws {
    let url = format!("ws://{}/v1/listen?{query}", sim.addr);
    let auth = format!("Token {KEY}");
    connect(&url, &[("authorization", &auth)]).await.unwrap().0
}

/// Sends `audio` in chunks of `chunk` bytes.
async fn stream(ws: &mut Ws, audio: &[u8], chunk: usize) {
    for c in audio.chunks(chunk) {
        ws.send(Message::binary(c.to_vec())).await.unwrap();
    }
}

/// Every message until the close: (messages, close code).
async fn rest(ws: &mut Ws) -> (Vec<Value>, Option<Value>) {
    let mut out = Vec::new();
    while let Some(v) = next(ws).await {
        if v.get("close").is_some() {
            return (out, Some(v["close"].clone()));
        }
        out.push(v);
    }
    (out, None)
}

fn pcm(ms: u64, rate: u32) -> Vec<u8> {
    sim::audio::wav_tone(ms, rate, 16)[44..].to_vec()
}

#[tokio::test]
async fn three_seconds_give_three_results_then_metadata() {
    let sim = start().await;
    let mut ws = open(
        &sim,
        "model=nova-3&encoding=linear16&sample_rate=16000&channels=1",
    )
    .await;
    let audio = pcm(3000, 16000);
    stream(&mut ws, &audio, 8000).await;
    send(&mut ws, json!({"type": "KeepAlive"})).await;
    send(&mut ws, json!({"type": "CloseStream"})).await;
    let (msgs, close) = rest(&mut ws).await;
    assert_eq!(close, Some(json!(1000)), "a normal close");
    assert_eq!(msgs.len(), 4);
    for (i, r) in msgs[..3].iter().enumerate() {
        assert_eq!(r["type"], "Results");
        assert_eq!(
            (r["start"].as_f64(), r["duration"].as_f64()),
            (Some(i as f64), Some(1.0))
        );
        assert_eq!(
            (r["is_final"].clone(), r["speech_final"].clone()),
            (json!(true), json!(true))
        );
        assert_eq!(r["channel_index"], json!([0, 1]));
        let alt = &r["channel"]["alternatives"][0];
        assert_eq!(
            alt["transcript"],
            "the quick brown fox jumps over the lazy dog"
        );
        assert_eq!(alt["words"][0]["start"].as_f64(), Some(i as f64));
        assert_eq!(r["metadata"]["model_info"]["arch"], "nova-3");
    }
    let m = &msgs[3];
    assert_eq!(m["type"], "Metadata");
    assert_eq!(m["transaction_key"], "deprecated");
    assert_eq!(m["duration"].as_f64(), Some(3.0));
    assert_eq!(m["channels"], 1);
    assert_eq!(m["sha256"], hex::encode(Sha256::digest(&audio)));
    assert_eq!(m["request_id"], msgs[0]["metadata"]["request_id"]);
    // every client message is recorded; the upgrade request is logged
    let events = sim.shared().ws_events.render();
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "binary").count(), 12);
    assert_eq!(&kinds[12..], ["text", "text"]);
    assert!(sim
        .requests()
        .iter()
        .any(|r| r["method"] == "GET" && r["path"] == "/v1/listen"));
}

#[tokio::test]
async fn the_claimed_duration_follows_the_factor() {
    let sim = start().await;
    let (s, _) = post(
        &client(),
        format!("{}/__sim/config", sim.url()),
        json!({"stt_duration_factor": 1.5}),
    )
    .await;
    assert_eq!(s, 200);
    let mut ws = open(&sim, "encoding=linear16&sample_rate=8000").await;
    stream(&mut ws, &pcm(2000, 8000), 4000).await;
    send(&mut ws, json!({"type": "CloseStream"})).await;
    let (msgs, _) = rest(&mut ws).await;
    let starts: Vec<Option<f64>> = msgs[..2].iter().map(|r| r["start"].as_f64()).collect();
    assert_eq!(starts, [Some(0.0), Some(1.5)]);
    assert_eq!(msgs[1]["duration"].as_f64(), Some(1.5));
    assert_eq!(msgs[2]["duration"].as_f64(), Some(3.0));
}

#[tokio::test]
async fn finalize_flushes_the_rest_and_wav_streams_are_measured() {
    let sim = start().await;
    let mut ws = open(&sim, "encoding=linear16&sample_rate=16000").await;
    stream(&mut ws, &pcm(1500, 16000), 6400).await;
    let first = next(&mut ws).await.unwrap();
    assert_eq!(first["duration"].as_f64(), Some(1.0));
    send(&mut ws, json!({"type": "Finalize"})).await;
    let flushed = next(&mut ws).await.unwrap();
    assert_eq!(
        (flushed["start"].as_f64(), flushed["duration"].as_f64()),
        (Some(1.0), Some(0.5))
    );
    assert_eq!(flushed["from_finalize"], true);

    // no encoding: a WAV stream, measured from its header
    let mut ws = open(&sim, "model=nova-3").await;
    stream(&mut ws, &sim::audio::wav_tone(2000, 24000, 16), 10_000).await;
    send(&mut ws, json!({"type": "CloseStream"})).await;
    let (msgs, _) = rest(&mut ws).await;
    let kinds: Vec<&str> = msgs.iter().map(|m| m["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Results", "Results", "Metadata"]);
    assert_eq!(msgs[2]["duration"].as_f64(), Some(2.0));
}

#[tokio::test]
async fn a_wrong_key_a_bad_query_or_a_fault_refuse_the_upgrade() {
    let sim = start().await;
    let url = format!(
        "ws://{}/v1/listen?encoding=linear16&sample_rate=16000",
        sim.addr
    );
    assert_eq!(
        connect(&url, &[("authorization", "Token nope")])
            .await
            .err(),
        Some(401)
    );
    assert_eq!(
        connect(&url, &[("authorization", &format!("Bearer {KEY}"))])
            .await
            .err(),
        Some(401)
    );
    let auth = format!("Token {KEY}");
    let bad = format!("ws://{}/v1/listen?encoding=opus", sim.addr);
    assert_eq!(
        connect(&bad, &[("authorization", &auth)]).await.err(),
        Some(400)
    );
    sim.add_fault(json!({"path": "/v1/listen", "fault": {"status": 429}}))
        .unwrap();
    assert_eq!(
        connect(&url, &[("authorization", &auth)]).await.err(),
        Some(429)
    );
    // the subprotocol form of the key
    let (mut ws, headers) = connect(
        &url,
        &[("sec-websocket-protocol", &format!("token, {KEY}"))],
    )
    .await
    .unwrap();
    assert_eq!(headers["sec-websocket-protocol"], "token");
    send(&mut ws, json!({"type": "CloseStream"})).await;
    let (msgs, _) = rest(&mut ws).await;
    assert_eq!(msgs[0]["type"], "Metadata");
    assert_eq!(msgs[0]["duration"].as_f64(), Some(0.0));
}
