//! OpenAI's Realtime API over real WebSockets: a text turn, an audio turn,
//! `max_output_tokens`, cancel, errors, the browser subprotocol, refusals
//! before the upgrade, the usage factor and the client-event log.

use base64::Engine;
use serde_json::{json, Value};
use sim::SimConfig;

use crate::support::{client, get, post};
use crate::ws::{connect, next, send, types, until, Ws};

const KEY: &str = "k-rt";
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

async fn start() -> sim::Sim {
    crate::support::start(SimConfig {
        api_key: Some(KEY.into()),
        ..Default::default()
    })
    .await
}

fn url(sim: &sim::Sim, path: &str) -> String {
    format!("ws://{}{path}", sim.addr)
}

/// A session opened with the bearer key: the socket and `session.created`.
async fn open(sim: &sim::Sim) -> (Ws, Value) {
    let auth = format!("Bearer {KEY}");
    let (mut ws, _) = connect(
        &url(sim, "/v1/realtime?model=gpt-realtime"),
        &[("authorization", &auth)],
    )
    .await
    .unwrap();
    let created = next(&mut ws).await.unwrap();
    (ws, created)
}

/// The text of the reply the documented rule gives to `prompt`.
fn reply(prompt: &str) -> String {
    let first8: Vec<&str> = prompt.split_whitespace().take(8).collect();
    let base = format!("This is a simulated reply to: {}", first8.join(" "));
    let words: Vec<&str> = base.split_whitespace().cycle().take(12).collect();
    words.join(" ")
}

fn user_text(text: &str) -> Value {
    json!({"type": "conversation.item.create", "item": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}})
}

#[tokio::test]
async fn a_text_turn_answers_in_order_with_documented_usage() {
    let sim = start().await;
    let (mut ws, created) = open(&sim).await;
    assert_eq!(created["type"], "session.created");
    let s = &created["session"];
    assert!(created["event_id"].as_str().unwrap().starts_with("event_"));
    assert!(s["id"].as_str().unwrap().starts_with("sess_"));
    assert_eq!(
        (s["type"].clone(), s["object"].clone(), s["model"].clone()),
        (
            json!("realtime"),
            json!("realtime.session"),
            json!("gpt-realtime")
        )
    );
    assert_eq!(s["output_modalities"], json!(["audio"]));
    assert_eq!(
        s["audio"]["input"]["format"],
        json!({"type": "audio/pcm", "rate": 24000})
    );
    assert_eq!(s["audio"]["output"]["voice"], "alloy");
    assert_eq!(s["max_output_tokens"], "inf");

    let update = json!({"type": "session.update", "session": {"instructions": "Be brief today", "output_modalities": ["text"]}});
    send(&mut ws, update).await;
    let updated = next(&mut ws).await.unwrap();
    assert_eq!(updated["type"], "session.updated");
    assert_eq!(updated["session"]["instructions"], "Be brief today");
    assert_eq!(updated["session"]["output_modalities"], json!(["text"]));
    assert_eq!(updated["session"]["audio"]["output"]["voice"], "alloy");

    send(&mut ws, user_text("Hello there simulated friend")).await;
    let added = until(&mut ws, "conversation.item.done").await;
    assert_eq!(
        types(&added),
        ["conversation.item.added", "conversation.item.done"]
    );
    assert_eq!(added[0]["item"]["role"], "user");
    assert_eq!(added[0]["item"]["content"][0]["type"], "input_text");

    send(&mut ws, json!({"type": "response.create"})).await;
    let events = until(&mut ws, "response.done").await;
    let want_text = reply("Hello there simulated friend");
    let mut want = vec![
        "response.created",
        "response.output_item.added",
        "response.content_part.added",
    ];
    want.extend(std::iter::repeat_n("response.output_text.delta", 12));
    want.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.done",
    ]);
    assert_eq!(types(&events), want);
    let deltas: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, want_text);
    let done = &events.last().unwrap()["response"];
    assert_eq!(
        (done["object"].clone(), done["status"].clone()),
        (json!("realtime.response"), json!("completed"))
    );
    assert!(done["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(
        done["output"][0]["content"][0],
        json!({"type": "output_text", "text": want_text})
    );
    // input: 3 words of instructions + 4 of the user; output: 12 words
    let u = &done["usage"];
    assert_eq!(
        (
            u["input_tokens"].clone(),
            u["output_tokens"].clone(),
            u["total_tokens"].clone()
        ),
        (json!(7), json!(12), json!(19))
    );
    assert_eq!(u["input_token_details"]["text_tokens"], 7);
    assert_eq!(u["input_token_details"]["audio_tokens"], 0);
    assert_eq!(u["input_token_details"]["cached_tokens"], 0);
    assert_eq!(
        u["output_token_details"],
        json!({"text_tokens": 12, "audio_tokens": 0})
    );

    // the second turn: the reply and the new text join the input; the
    // previous input (7) is cached
    send(&mut ws, user_text("again")).await;
    until(&mut ws, "conversation.item.done").await;
    send(&mut ws, json!({"type": "response.create"})).await;
    let u = until(&mut ws, "response.done").await.pop().unwrap()["response"]["usage"].clone();
    assert_eq!(u["input_token_details"]["text_tokens"], 3 + 4 + 12 + 1);
    assert_eq!(u["input_token_details"]["cached_tokens"], 7);
    assert_eq!(
        u["input_token_details"]["cached_tokens_details"]["text_tokens"],
        7
    );

    // the log: the upgrade request and every client event, in order
    let session_id = s["id"].as_str().unwrap();
    let (_, log) = get(&client(), format!("{}/__sim/realtime/events", sim.url())).await;
    let sent: Vec<&str> = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["session_id"] == session_id)
        .map(|e| e["event"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        sent,
        [
            "session.update",
            "conversation.item.create",
            "response.create",
            "conversation.item.create",
            "response.create"
        ]
    );
    assert!(sim
        .requests()
        .iter()
        .any(|r| r["method"] == "GET" && r["path"] == "/v1/realtime"));
}

#[tokio::test]
async fn an_audio_turn_answers_audio_of_the_documented_length() {
    let sim = start().await;
    let (mut ws, _) = open(&sim).await;
    let second = sim::audio::wav_tone(1000, 24000, 16)[44..].to_vec();
    assert_eq!(second.len(), 48_000);
    for chunk in second.chunks(12_000) {
        send(
            &mut ws,
            json!({"type": "input_audio_buffer.append", "audio": B64.encode(chunk)}),
        )
        .await;
    }
    send(
        &mut ws,
        json!({"type": "input_audio_buffer.commit", "event_id": "c1"}),
    )
    .await;
    let committed = until(&mut ws, "conversation.item.done").await;
    assert_eq!(
        types(&committed),
        [
            "input_audio_buffer.committed",
            "conversation.item.added",
            "conversation.item.done"
        ]
    );
    let item_id = committed[0]["item_id"].as_str().unwrap();
    assert_eq!(committed[1]["item"]["id"], item_id);
    assert_eq!(committed[1]["item"]["content"][0]["type"], "input_audio");

    send(&mut ws, json!({"type": "response.create"})).await;
    let events = until(&mut ws, "response.done").await;
    let t = types(&events);
    assert_eq!(
        &t[..3],
        [
            "response.created",
            "response.output_item.added",
            "response.content_part.added"
        ]
    );
    assert_eq!(
        &t[3..5],
        [
            "response.output_audio.delta",
            "response.output_audio_transcript.delta"
        ]
    );
    assert_eq!(
        &t[t.len() - 5..],
        [
            "response.output_audio.done",
            "response.output_audio_transcript.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.done"
        ]
    );
    let mut pcm = Vec::new();
    let mut transcript = String::new();
    for e in &events {
        match e["type"].as_str().unwrap() {
            "response.output_audio.delta" => {
                pcm.extend(B64.decode(e["delta"].as_str().unwrap()).unwrap())
            }
            "response.output_audio_transcript.delta" => {
                transcript.push_str(e["delta"].as_str().unwrap())
            }
            _ => {}
        }
    }
    // an audio item has no text: the reply to ""
    assert_eq!(transcript, reply(""));
    let ms = sim::audio::synth_duration_ms(
        transcript.chars().count(),
        SimConfig::default().seconds_per_char,
    );
    assert_eq!(
        pcm.len() as u64,
        ms * 48,
        "PCM16 24 kHz mono, as long as the text spoken"
    );
    assert!(pcm.iter().any(|b| *b != 0), "a tone, not silence");
    let done = &events.last().unwrap()["response"];
    assert_eq!(
        done["output"][0]["content"][0],
        json!({"type": "output_audio", "transcript": transcript})
    );
    let u = &done["usage"];
    assert_eq!(
        u["input_token_details"]["audio_tokens"], 10,
        "10 a second of input audio"
    );
    assert_eq!(u["input_token_details"]["text_tokens"], 0);
    assert_eq!(u["output_token_details"]["text_tokens"], 12);
    assert_eq!(
        u["output_token_details"]["audio_tokens"],
        (ms * 20).div_ceil(1000),
        "20 a second of output audio"
    );
    assert_eq!(u["total_tokens"], 10 + 12 + (ms * 20).div_ceil(1000));
}

#[tokio::test]
async fn max_output_tokens_cuts_the_reply() {
    let sim = start().await;
    let (mut ws, _) = open(&sim).await;
    send(&mut ws, user_text("cut me short")).await;
    until(&mut ws, "conversation.item.done").await;
    send(&mut ws, json!({"type": "response.create", "response": {"output_modalities": ["text"], "max_output_tokens": 3}})).await;
    let events = until(&mut ws, "response.done").await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "response.output_text.delta")
            .count(),
        3
    );
    let done = &events.last().unwrap()["response"];
    assert_eq!(done["status"], "incomplete");
    assert_eq!(
        done["status_details"],
        json!({"type": "incomplete", "reason": "max_output_tokens"})
    );
    assert_eq!(done["output"][0]["content"][0]["text"], "This is a");
    assert_eq!(done["usage"]["output_tokens"], 3);
}

#[tokio::test]
async fn cancel_ends_the_response_in_flight() {
    let sim = start().await;
    let (s, _) = post(
        &client(),
        format!("{}/__sim/config", sim.url()),
        json!({"realtime_delta_ms": 40}),
    )
    .await;
    assert_eq!(s, 200);
    let (mut ws, _) = open(&sim).await;
    send(&mut ws, user_text("a long answer please")).await;
    until(&mut ws, "conversation.item.done").await;
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"output_modalities": ["text"]}}),
    )
    .await;
    until(&mut ws, "response.output_text.delta").await;
    send(&mut ws, json!({"type": "response.cancel"})).await;
    let events = until(&mut ws, "response.done").await;
    let sent = 1 + events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .count();
    assert!(sent < 12, "cancelled before the end ({sent} words)");
    let done = &events.last().unwrap()["response"];
    assert_eq!(done["status"], "cancelled");
    assert_eq!(done["status_details"]["reason"], "client_cancelled");
    assert_eq!(done["usage"]["output_tokens"], sent as u64);
    // nothing in flight any more
    send(
        &mut ws,
        json!({"type": "response.cancel", "event_id": "evt_9"}),
    )
    .await;
    let e = next(&mut ws).await.unwrap();
    assert_eq!(
        (
            e["type"].clone(),
            e["error"]["code"].clone(),
            e["error"]["event_id"].clone()
        ),
        (
            json!("error"),
            json!("response_cancel_not_active"),
            json!("evt_9")
        )
    );
}

#[tokio::test]
async fn unknown_and_malformed_events_get_error_events() {
    let sim = start().await;
    let (mut ws, _) = open(&sim).await;
    send(
        &mut ws,
        json!({"type": "no.such.event", "event_id": "evt_1"}),
    )
    .await;
    let e = next(&mut ws).await.unwrap();
    assert_eq!(e["type"], "error");
    assert_eq!(e["error"]["type"], "invalid_request_error");
    assert_eq!(e["error"]["code"], "invalid_value");
    assert_eq!(e["error"]["event_id"], "evt_1");
    assert_eq!(e["error"]["param"], Value::Null);
    use futures_util::SinkExt;
    ws.send(tokio_tungstenite::tungstenite::Message::text("not json"))
        .await
        .unwrap();
    let e = next(&mut ws).await.unwrap();
    assert_eq!(
        (e["error"]["code"].clone(), e["error"]["event_id"].clone()),
        (json!("invalid_json"), Value::Null)
    );
    send(&mut ws, json!({"type": "input_audio_buffer.commit"})).await;
    assert_eq!(
        next(&mut ws).await.unwrap()["error"]["code"],
        "input_audio_buffer_commit_empty"
    );
    // the session goes on
    send(&mut ws, json!({"type": "input_audio_buffer.clear"})).await;
    assert_eq!(
        next(&mut ws).await.unwrap()["type"],
        "input_audio_buffer.cleared"
    );
}

#[tokio::test]
async fn the_browser_subprotocol_carries_the_key() {
    let sim = start().await;
    let protocols = format!("realtime, openai-insecure-api-key.{KEY}");
    let (mut ws, headers) = connect(
        &url(&sim, "/p/east/v1/realtime?model=m"),
        &[("sec-websocket-protocol", &protocols)],
    )
    .await
    .unwrap();
    assert_eq!(headers["sec-websocket-protocol"], "realtime");
    let created = next(&mut ws).await.unwrap();
    assert_eq!(created["session"]["model"], "m");
    let wrong = "realtime, openai-insecure-api-key.nope";
    let refused = connect(
        &url(&sim, "/v1/realtime"),
        &[("sec-websocket-protocol", wrong)],
    )
    .await;
    assert_eq!(refused.err(), Some(401));
}

#[tokio::test]
async fn a_wrong_key_or_a_fault_refuses_the_upgrade() {
    let sim = start().await;
    let refused = connect(
        &url(&sim, "/v1/realtime"),
        &[("authorization", "Bearer nope")],
    )
    .await;
    assert_eq!(refused.err(), Some(401));
    let no_key = connect(&url(&sim, "/v1/realtime"), &[]).await;
    assert_eq!(no_key.err(), Some(401));
    sim.add_fault(json!({"path": "/v1/realtime", "fault": {"status": 503}}))
        .unwrap();
    let auth = format!("Bearer {KEY}");
    let faulted = connect(&url(&sim, "/v1/realtime"), &[("authorization", &auth)]).await;
    assert_eq!(faulted.err(), Some(503));
    // the fault is spent: the next upgrade goes through
    assert!(
        connect(&url(&sim, "/v1/realtime"), &[("authorization", &auth)])
            .await
            .is_ok()
    );
    let logged = sim
        .requests()
        .iter()
        .filter(|r| r["path"] == "/v1/realtime")
        .count();
    assert_eq!(logged, 4);
}

#[tokio::test]
async fn the_usage_factor_scales_every_figure() {
    let sim = start().await;
    let (s, v) = post(
        &client(),
        format!("{}/__sim/config", sim.url()),
        json!({"realtime_usage_factor": 2.5}),
    )
    .await;
    assert_eq!((s, v["realtime_usage_factor"].clone()), (200, json!(2.5)));
    let (mut ws, _) = open(&sim).await;
    send(&mut ws, user_text("one two")).await;
    until(&mut ws, "conversation.item.done").await;
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"output_modalities": ["text"]}}),
    )
    .await;
    let u = until(&mut ws, "response.done").await.pop().unwrap()["response"]["usage"].clone();
    // 2 input words × 2.5 = 5; 12 output words × 2.5 = 30
    assert_eq!(
        (
            u["input_tokens"].clone(),
            u["output_tokens"].clone(),
            u["total_tokens"].clone()
        ),
        (json!(5), json!(30), json!(35))
    );
}
