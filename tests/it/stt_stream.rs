//! Live transcription over WebSocket (issue #42): `GET
//! /api/v1/audio/stt/stream` relayed to the simulator's Deepgram live
//! `/v1/listen`, the audio measured from its bytes and billed a period
//! (`GATEWAY_STREAM_BILLING_SECS`, 10 s) at a time: a 30-second WAV in
//! three commits; cut with 1008 and a reason naming the credit when the
//! next period cannot be held.

use std::time::Duration;

use futures_util::StreamExt;
use runtime::store::Ledger;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::harness::*;
use crate::realtime::{open, realtime_env, send, Ws};

/// Streams `audio` in half-second pieces (16 kHz PCM16: 16,000 bytes,
/// the WAV header riding on the first), then `CloseStream`; every text
/// message received, and the close frame.
async fn stream(ws: &mut Ws, audio: &[u8]) -> (Vec<Value>, Option<(u16, String)>) {
    let mut got = Vec::new();
    let mut closed = None;
    let (first, rest) = audio.split_at(44 + 16_000);
    let pieces = std::iter::once(first).chain(rest.chunks(16_000));
    for piece in pieces {
        if futures_util::SinkExt::send(ws, Message::Binary(piece.to_vec().into()))
            .await
            .is_err()
        {
            break;
        }
    }
    let _ =
        futures_util::SinkExt::send(ws, Message::Text(r#"{"type":"CloseStream"}"#.into())).await;
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next()).await;
        match m.expect("the stream ends in time") {
            Some(Ok(Message::Text(t))) => got.push(serde_json::from_str(t.as_str()).unwrap()),
            Some(Ok(Message::Close(f))) => {
                closed = f.map(|f| (u16::from(f.code), f.reason.to_string()));
                break;
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => break,
        }
    }
    (got, closed)
}

const PATH: &str = "/api/v1/audio/stt/stream?model=dg/nova-3&punctuate=true";

#[tokio::test]
async fn a_30_second_wav_is_billed_30_seconds_in_three_commits() {
    let env = realtime_env().await;
    env.grant("1");
    let (mut ws, _) = open(&env, PATH, Some(&env.key), None).await.unwrap();
    let (got, closed) = stream(&mut ws, &wav(30.0)).await;
    assert_eq!(closed.map(|c| c.0), Some(1000));
    let results = got.iter().filter(|m| m["type"] == "Results").count();
    assert_eq!(results, 30, "a Results message per second of audio");
    assert!(got.iter().any(|m| m["type"] == "Metadata"));
    let usage = env.usage();
    let seconds: Vec<_> = usage.iter().map(|u| u.quantity).collect();
    assert_eq!(seconds, vec![d("10"), d("10"), d("10")]);
    // 10 s at 0.0043 a minute, +20 %.
    assert!(usage
        .iter()
        .all(|u| u.charged == d("0.00086") && u.unit == "audio_seconds"));
    assert_eq!(env.balance(), d("1") - d("0.00258"));
    assert!(env.store().holds_of(env.user_id).unwrap().is_empty());
    // The query went on, the model the provider's id, the key as Token.
    let call = env
        .sim_requests()
        .await
        .into_iter()
        .find(|r| r["path"] == "/p/dg/v1/listen")
        .unwrap();
    assert_eq!(call["query"], "model=nova-3&punctuate=true");
    assert_eq!(
        call["headers"]["authorization"],
        format!("Token {PROVIDER_KEY}")
    );
    // The sessions' metrics (one recorder per process: present, counted).
    let metrics = env.client.get(env.url("/metrics")).send().await.unwrap();
    let text = metrics.text().await.unwrap();
    for m in [
        "gateway_open_sessions",
        "gateway_session_frames_total{direction=\"up\"}",
        "gateway_session_frames_total{direction=\"down\"}",
        "gateway_session_seconds_billed_total",
    ] {
        assert!(text.contains(m), "{m} missing from /metrics");
    }
}

#[tokio::test]
async fn the_stream_is_cut_when_the_next_period_cannot_be_held() {
    let env = realtime_env().await;
    // Two periods' worth (0.00086 each), not three.
    env.grant("0.002");
    let (mut ws, _) = open(&env, PATH, Some(&env.key), None).await.unwrap();
    let (_, closed) = stream(&mut ws, &wav(30.0)).await;
    let (code, reason) = closed.expect("a close frame");
    assert_eq!(code, 1008);
    assert!(reason.contains("insufficient credits"), "{reason}");
    let seconds: Vec<_> = env.usage().iter().map(|u| u.quantity).collect();
    assert_eq!(seconds, vec![d("10"), d("10")]);
    assert_eq!(env.balance(), d("0.002") - d("0.00172"));
    assert!(env.store().holds_of(env.user_id).unwrap().is_empty());
}

#[tokio::test]
async fn no_credit_for_the_first_period_is_a_402_before_the_upgrade() {
    let env = realtime_env().await;
    let (status, _) = open(&env, PATH, Some(&env.key), None).await.unwrap_err();
    assert_eq!(status, 402);
    env.assert_no_upstream_call().await;
    // Deepgram's browser form: `token, <key>`.
    env.grant("1");
    let offered = format!("token, {}", env.key);
    let (mut ws, h) = open(&env, PATH, None, Some(&offered)).await.unwrap();
    assert_eq!(h["sec-websocket-protocol"], "token");
    send(&mut ws, json!({"type": "KeepAlive"})).await;
    let (_, closed) = stream(&mut ws, &wav(2.0)).await;
    assert_eq!(closed.map(|c| c.0), Some(1000));
    assert_eq!(env.usage().pop().unwrap().quantity, d("2"));
    // An encoding the gateway cannot measure: 400, nothing opened.
    let (status, body) = open(
        &env,
        "/api/v1/audio/stt/stream?model=dg/nova-3&encoding=opus",
        Some(&env.key),
        None,
    )
    .await
    .unwrap_err();
    assert_eq!(status, 400, "{body}");
}
