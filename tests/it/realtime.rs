//! Realtime sessions over WebSocket (issue #42): `GET /api/v1/realtime`
//! relayed to the simulator's OpenAI Realtime socket, each response held
//! before its `response.create` goes upstream and billed (usage record,
//! debit, audit record) before its `response.done` reaches the caller; a
//! response the credit or the key's budget cannot hold refused with
//! `insufficient_credits` and nothing sent; OpenAI's official Python SDK
//! (`client.realtime.connect`, tests/openai_sdk/realtime.py) through three
//! text turns and an audio turn; the browser's subprotocol key; a wrong key refused before the upgrade; `kill -9` mid-response
//! losing no committed turn and freeing the hold on restart.

use std::time::Duration;

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use runtime::store::{Accounts, History, Ledger};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::harness::*;

/// The test providers plus a realtime model (audio priced apart, cache
/// reads cheaper) and a Deepgram provider for live transcription.
pub(crate) fn realtime_toml(llm_url: &str) -> String {
    let root = llm_url.trim_end_matches("/v1");
    format!(
        r#"{}
[[provider.model]]
id = "gpt-realtime"
type = "realtime"
input_per_mtok = "4.00"
output_per_mtok = "16.00"
input_audio_per_mtok = "32.00"
output_audio_per_mtok = "64.00"
cache_read_per_mtok = "0.40"

[[provider]]
id = "dg"
kind = "deepgram"
base_url = "{root}/p/dg"
api_key_env = "{LLM_KEY_VAR}"
[[provider.model]]
id = "nova-3"
type = "stt"
per_minute = "0.0043"
"#,
        providers_toml(llm_url)
    )
}

pub(crate) async fn realtime_env() -> Env {
    env_with_providers(realtime_toml, |_| {}).await
}

pub(crate) type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens `path` (with its query) on the gateway as a WebSocket, the key
/// in `Authorization: Bearer` (or nothing when `None`) and `protocols`
/// offered; the socket, or the refusal's status and body.
pub(crate) async fn open(
    env: &Env,
    path: &str,
    key: Option<&str>,
    protocols: Option<&str>,
) -> Result<(Ws, http::HeaderMap), (u16, Value)> {
    let url = env.url(path).replacen("http://", "ws://", 1);
    let mut req = url.into_client_request().unwrap();
    if let Some(k) = key {
        req.headers_mut()
            .insert("authorization", format!("Bearer {k}").parse().unwrap());
    }
    if let Some(p) = protocols {
        req.headers_mut()
            .insert("sec-websocket-protocol", p.parse().unwrap());
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, resp)) => Ok((ws, resp.headers().clone())),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            let body = resp.body().clone().unwrap_or_default();
            Err((
                resp.status().as_u16(),
                serde_json::from_slice(&body).unwrap_or(Value::Null),
            ))
        }
        Err(e) => panic!("connect: {e}"),
    }
}

/// A realtime session of `key` on the test model, its `session.created` read.
pub(crate) async fn session(env: &Env, key: &str) -> (Ws, http::HeaderMap) {
    let path = "/api/v1/realtime?model=sim/gpt-realtime";
    let (mut ws, h) = open(env, path, Some(key), None).await.unwrap();
    assert_eq!(next_event(&mut ws).await["type"], "session.created");
    (ws, h)
}

pub(crate) async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::Text(v.to_string().into())).await.unwrap();
}

/// The next text event (JSON), within 10 s.
pub(crate) async fn next_event(ws: &mut Ws) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("an event in time")
            .expect("the socket open")
            .unwrap();
        if let Message::Text(t) = m {
            return serde_json::from_str(t.as_str()).unwrap();
        }
        assert!(!m.is_close(), "closed: {m:?}");
    }
}

/// Events until one of type `kind` (that one included).
async fn until(ws: &mut Ws, kind: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let e = next_event(ws).await;
        let done = e["type"] == kind;
        out.push(e);
        if done {
            return out;
        }
    }
}

fn user_text(text: &str) -> Value {
    json!({"type": "conversation.item.create", "item": {"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": text}]}})
}

/// A response's charge from its reported usage at the test model's
/// prices, +20 %, to the 8th decimal.
pub(crate) fn priced(usage: &Value) -> Decimal {
    let n = |p: &str| Decimal::from(usage.pointer(p).and_then(Value::as_u64).unwrap_or(0));
    let ct = n("/input_token_details/cached_tokens_details/text_tokens");
    let ca = n("/input_token_details/cached_tokens_details/audio_tokens");
    let raw = (n("/input_token_details/text_tokens") - ct) * d("4")
        + (n("/input_token_details/audio_tokens") - ca) * d("32")
        + (ct + ca) * d("0.40")
        + n("/output_token_details/text_tokens") * d("16")
        + n("/output_token_details/audio_tokens") * d("64");
    (raw / d("1000000") * d("1.2")).round_dp(8)
}

/// The simulator's logged client events of the realtime API.
pub(crate) async fn sim_events(env: &Env) -> Vec<Value> {
    let v: Value = env
        .client
        .get(format!("{}/__sim/realtime/events", env.sim.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v.as_array()
        .cloned()
        .or_else(|| v["events"].as_array().cloned())
        .unwrap_or_default()
}

fn of_type(events: &[Value], kind: &str) -> usize {
    events
        .iter()
        .filter(|e| e.to_string().contains(&format!("\"type\":\"{kind}\"")))
        .count()
}

/// One text turn: the item, the response (capped at `cap` when given),
/// its `response.done`; asserts it was billed before it arrived.
async fn text_turn(env: &Env, ws: &mut Ws, text: &str, cap: Option<u64>, n: usize) -> Value {
    send(ws, user_text(text)).await;
    let mut create = json!({"type": "response.create"});
    if let Some(c) = cap {
        create["response"] = json!({"max_output_tokens": c});
    }
    send(ws, create).await;
    let done = until(ws, "response.done").await.pop().unwrap();
    // Committed before the event left: the row is there as it arrives.
    assert_eq!(env.usage().len(), n, "billed before response.done");
    done
}

#[tokio::test]
async fn text_and_audio_turns_are_billed_at_their_prices_before_each_response_done() {
    let env = realtime_env().await;
    env.grant("5");
    let (mut ws, h) = session(&env, &env.key).await;
    assert!(h.get("x-request-id").is_some());
    send(
        &mut ws,
        json!({"type": "session.update", "session": {"type": "realtime",
        "output_modalities": ["text"], "instructions": "Be brief."}}),
    )
    .await;
    until(&mut ws, "session.updated").await;
    let mut charged = Decimal::ZERO;
    for (i, text) in ["Hello there", "What is the weather", "Thanks a lot"]
        .iter()
        .enumerate()
    {
        let done = text_turn(&env, &mut ws, text, None, i + 1).await;
        let usage = &done["response"]["usage"];
        let cost = priced(usage);
        assert_eq!(d(&usage["cost"].to_string()), cost, "the event's cost");
        let row = env.usage().pop().unwrap();
        assert_eq!(row.charged, cost, "turn {i}");
        assert_eq!(row.unit, "tokens");
        charged += cost;
        if i > 0 {
            assert!(
                usage["input_token_details"]["cached_tokens"]
                    .as_u64()
                    .unwrap()
                    > 0
            );
        }
    }
    // An audio turn: a second of PCM16 at 24 kHz appended in two pieces.
    let pcm = base64::engine::general_purpose::STANDARD.encode(vec![0u8; 24_000]);
    for _ in 0..2 {
        send(
            &mut ws,
            json!({"type": "input_audio_buffer.append", "audio": pcm}),
        )
        .await;
    }
    send(&mut ws, json!({"type": "input_audio_buffer.commit"})).await;
    until(&mut ws, "input_audio_buffer.committed").await;
    send(
        &mut ws,
        json!({"type": "response.create",
        "response": {"output_modalities": ["audio"]}}),
    )
    .await;
    let events = until(&mut ws, "response.done").await;
    assert!(events
        .iter()
        .any(|e| e["type"] == "response.output_audio.delta"));
    let usage = &events.last().unwrap()["response"]["usage"];
    assert_eq!(usage["input_token_details"]["audio_tokens"], 10);
    assert!(
        usage["output_token_details"]["audio_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    let cost = priced(usage);
    assert_eq!(env.usage().pop().unwrap().charged, cost);
    charged += cost;
    assert_eq!(env.balance(), d("5") - charged);
    // Four turns, four audit records, no hold left; the key never upstream.
    let audit = env.audit();
    assert_eq!(audit.iter().filter(|a| a.route_id == "realtime").count(), 4);
    assert!(env.store().holds_of(env.user_id).unwrap().is_empty());
    let sent = sim_events(&env).await;
    assert_eq!(of_type(&sent, "response.create"), 4);
    assert!(!serde_json::to_string(&sent).unwrap().contains(&env.key));
    assert!(sent
        .iter()
        .filter(|e| e.to_string().contains("response.create"))
        .all(|e| e.to_string().contains("max_output_tokens")));
}

#[tokio::test]
async fn the_openai_sdk_runs_text_and_audio_turns_each_billed_before_its_response_done() {
    let env = realtime_env().await;
    env.grant("5");
    let vars = vec![
        ("GATEWAY_BASE_URL", env.url("/api/v1")),
        ("GATEWAY_KEY", env.key.clone()),
        ("GATEWAY_MODEL", "sim/gpt-realtime".to_owned()),
    ];
    let out = run_script("python3", "tests/openai_sdk/realtime.py", vars).await;
    let ok = checks(&out);
    let rows: Vec<_> = env
        .usage()
        .into_iter()
        .filter(|u| u.route_id == "realtime")
        .collect();
    assert_eq!(rows.len(), 4, "{out}");
    let mut balance = d("5");
    for (i, name) in ["turn1", "turn2", "turn3", "audio"].into_iter().enumerate() {
        let seen = &ok[name];
        let cost = priced(&seen["usage"]);
        assert_eq!(d(seen["cost"].as_str().unwrap()), cost, "{name}: {seen}");
        assert_eq!(rows[i].charged, cost, "{name}");
        balance -= cost;
        // Read when response.done arrived: the debit was already there.
        assert_eq!(d(seen["balance"].as_str().unwrap()), balance, "{name}");
    }
    assert!(
        ok["audio"]["usage"]["output_token_details"]["audio_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(env.balance(), balance);
}

#[tokio::test]
async fn a_response_the_credit_cannot_hold_is_refused_and_nothing_goes_upstream() {
    let env = realtime_env().await;
    env.grant("0.01");
    let (mut ws, _) = session(&env, &env.key).await;
    for i in 0..2 {
        text_turn(&env, &mut ws, "Hello", Some(12), i + 1).await;
    }
    let balance = env.balance();
    // The third asks for the default cap (4,096 tokens): more than is left.
    send(&mut ws, user_text("And again")).await;
    send(
        &mut ws,
        json!({"type": "response.create", "event_id": "evt_3"}),
    )
    .await;
    let e = until(&mut ws, "error").await.pop().unwrap();
    assert_eq!(e["error"]["code"], "insufficient_credits");
    assert_eq!(e["error"]["event_id"], "evt_3");
    assert_eq!(env.usage().len(), 2);
    assert_eq!(env.balance(), balance, "nothing charged for it");
    assert!(env.store().holds_of(env.user_id).unwrap().is_empty());
    assert_eq!(of_type(&sim_events(&env).await, "response.create"), 2);
    // The session stays open: a response that fits goes on.
    text_turn(&env, &mut ws, "Short one", Some(12), 3).await;
}

#[tokio::test]
async fn a_budget_reached_mid_session_refuses_the_next_response() {
    let env = realtime_env().await;
    env.grant("5");
    let b = runtime::store::Budget::parse("0.005", "total").unwrap();
    let (_, key) =
        runtime::auth::create_named_key(env.store(), env.user_id, None, Some(b)).unwrap();
    let (mut ws, _) = session(&env, &key).await;
    text_turn(&env, &mut ws, "Hello", Some(12), 1).await;
    send(&mut ws, json!({"type": "response.create"})).await;
    let e = until(&mut ws, "error").await.pop().unwrap();
    assert_eq!(e["error"]["code"], "insufficient_credits");
    assert!(e["error"]["message"].as_str().unwrap().contains("budget"));
    assert_eq!(env.usage().len(), 1);
    assert_eq!(of_type(&sim_events(&env).await, "response.create"), 1);
}

#[tokio::test]
async fn the_browser_form_of_the_key_works_and_a_wrong_key_is_refused_before_the_upgrade() {
    let env = realtime_env().await;
    env.grant("1");
    let offered = format!("realtime, openai-insecure-api-key.{}", env.key);
    let (mut ws, h) = open(
        &env,
        "/api/v1/realtime?model=sim/gpt-realtime",
        None,
        Some(&offered),
    )
    .await
    .unwrap();
    assert_eq!(h["sec-websocket-protocol"], "realtime");
    assert_eq!(next_event(&mut ws).await["type"], "session.created");
    text_turn(&env, &mut ws, "Hi", Some(12), 1).await;
    let sent = serde_json::to_string(&env.sim_requests().await).unwrap();
    assert!(!sent.contains(&env.key), "the caller's key never upstream");
    // A wrong key, a missing key: 401 in OpenAI's shape, no session.
    env.clear_sim_log().await;
    let bad = "realtime, openai-insecure-api-key.gw_wrongwrongwrongwrongwrongwrong";
    let (status, body) = open(
        &env,
        "/api/v1/realtime?model=sim/gpt-realtime",
        None,
        Some(bad),
    )
    .await
    .unwrap_err();
    assert_eq!(status, 401);
    assert!(body["error"]["message"].is_string());
    let (status, _) = open(&env, "/api/v1/realtime?model=sim/gpt-realtime", None, None)
        .await
        .unwrap_err();
    assert_eq!(status, 401);
    env.assert_no_upstream_call().await;
    // Not a realtime model; not a WebSocket: refused as HTTP.
    let (status, _) = open(&env, "/api/v1/realtime?model=sim-gpt", Some(&env.key), None)
        .await
        .unwrap_err();
    assert_eq!(status, 404);
    let a = env
        .call_as(
            &env.key,
            "GET",
            &env.url("/api/v1/realtime?model=sim/gpt-realtime"),
            None,
        )
        .await;
    a.expect(400);
    assert!(a.json["error"]["message"]
        .as_str()
        .unwrap()
        .contains("WebSocket"));
}

#[tokio::test]
async fn kill_9_mid_response_keeps_the_committed_turns_and_frees_the_hold_on_restart() {
    let sim = start_sim().await;
    let dir = TempDir::new("realtime-crash");
    let store = runtime::store::Store::open_at(&dir.database()).unwrap();
    let user = store.create_user("rt@example.com", false).unwrap();
    let key = runtime::auth::create_key(&store, user).unwrap();
    store.grant_credit(user, d("5"), Some("test")).unwrap();
    let toml = realtime_toml(&sim.llm_url());
    let (mut child, addr) = crate::crash_holds::serve_providers(&dir, &sim, &toml, &[]);
    let url = format!("ws://{addr}/api/v1/realtime?model=sim/gpt-realtime");
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    next_event(&mut ws).await;
    for _ in 0..2 {
        send(&mut ws, user_text("Hello")).await;
        send(
            &mut ws,
            json!({"type": "response.create", "response": {"max_output_tokens": 12}}),
        )
        .await;
        until(&mut ws, "response.done").await;
    }
    // The third response runs slowly: the process dies while it is held.
    reqwest::Client::new()
        .post(format!("{}/__sim/config", sim.url()))
        .json(&json!({"realtime_delta_ms": 2000}))
        .send()
        .await
        .unwrap();
    send(&mut ws, user_text("Hello")).await;
    send(&mut ws, json!({"type": "response.create"})).await;
    until(&mut ws, "response.created").await;
    assert_eq!(store.holds_of(user).unwrap().len(), 1);
    child.kill().unwrap();
    child.wait().unwrap();
    drop(ws);
    let (mut again, _) = crate::crash_holds::serve_providers(&dir, &sim, &toml, &[]);
    assert!(
        store.holds_of(user).unwrap().is_empty(),
        "the hold freed at start"
    );
    let usage = store.usage_rows_of(user).unwrap();
    assert_eq!(usage.len(), 2, "the committed turns kept");
    let charged: Decimal = usage.iter().map(|u| u.charged).sum();
    assert_eq!(store.balance(user).unwrap(), d("5") - charged);
    again.kill().unwrap();
    again.wait().unwrap();
}

#[tokio::test]
async fn server_vad_responses_are_created_by_the_gateway_after_their_hold() {
    let env = realtime_env().await;
    env.grant("5");
    let (mut ws, _) = session(&env, &env.key).await;
    // Turn detection on, responses wanted (OpenAI's default): the provider
    // is told not to create them; the caller sees its own setting.
    send(&mut ws, json!({"type": "session.update", "session": {"type": "realtime",
        "output_modalities": ["text"], "audio": {"input": {"turn_detection": {"type": "server_vad"}}}}}))
    .await;
    let updated = until(&mut ws, "session.updated").await.pop().unwrap();
    let td = &updated["session"]["audio"]["input"]["turn_detection"];
    assert_eq!(td["create_response"], true);
    let sent = sim_events(&env).await;
    assert!(sent
        .iter()
        .any(|e| e.to_string().contains(r#""create_response":false"#)));
    // The provider commits the speech: the gateway holds and creates the
    // response, billed as any.
    let pcm = base64::engine::general_purpose::STANDARD.encode(vec![0u8; 48_000]);
    send(
        &mut ws,
        json!({"type": "input_audio_buffer.append", "audio": pcm}),
    )
    .await;
    send(&mut ws, json!({"type": "input_audio_buffer.commit"})).await;
    let done = until(&mut ws, "response.done").await.pop().unwrap();
    assert_eq!(
        done["response"]["usage"]["input_token_details"]["audio_tokens"],
        10
    );
    let row = env
        .usage()
        .into_iter()
        .find(|u| u.route_id == "realtime")
        .unwrap();
    assert_eq!(row.charged, priced(&done["response"]["usage"]));
    assert_eq!(of_type(&sim_events(&env).await, "response.create"), 1);
}

/// The close frame a session ends with (code, reason), within 10 s.
pub(crate) async fn closed(ws: &mut Ws) -> (u16, String) {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("closed in time");
        match m {
            Some(Ok(Message::Close(Some(f)))) => return (u16::from(f.code), f.reason.to_string()),
            Some(Ok(Message::Close(None))) | None | Some(Err(_)) => return (1005, String::new()),
            Some(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn limits_close_a_session_with_a_code_naming_them() {
    let env = env_with_providers(realtime_toml, |c| {
        c.sessions.idle = Duration::from_secs(1);
        c.sessions.max_frame = 4096;
        c.sessions.per_user = 1;
    })
    .await;
    env.grant("1");
    let path = "/api/v1/realtime?model=sim/gpt-realtime";
    // One open session a user: the second is refused before the upgrade.
    let (mut ws, _) = open(&env, path, Some(&env.key), None).await.unwrap();
    next_event(&mut ws).await;
    let (status, _) = open(&env, path, Some(&env.key), None).await.unwrap_err();
    assert_eq!(status, 429);
    // A message over the largest: 1009.
    let big = json!({"type": "conversation.item.create", "item": {"type": "message",
        "role": "user", "content": [{"type": "input_text", "text": "x".repeat(5000)}]}});
    send(&mut ws, big).await;
    let (code, reason) = closed(&mut ws).await;
    assert_eq!(code, 1009, "{reason}");
    assert!(
        reason.contains("GATEWAY_REALTIME_MAX_FRAME_BYTES"),
        "{reason}"
    );
    // Its place is free again; a silent caller is closed after the idle time-out.
    let (mut ws, _) = wait_open(&env, path).await;
    next_event(&mut ws).await;
    let (code, reason) = closed(&mut ws).await;
    assert_eq!(code, 1000);
    assert!(reason.contains("idle"), "{reason}");
    assert!(env.usage().is_empty(), "nothing billed");
}

/// Opens `path` once the user's place among the open sessions is free.
async fn wait_open(env: &Env, path: &str) -> (Ws, http::HeaderMap) {
    for _ in 0..100 {
        match open(env, path, Some(&env.key), None).await {
            Ok(o) => return o,
            Err((429, _)) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("{e:?}"),
        }
    }
    panic!("the session's place was never given back");
}

#[tokio::test]
async fn a_graceful_shutdown_settles_the_response_in_flight_and_says_going_away() {
    let env = realtime_env().await;
    env.grant("1");
    env.sim_config(json!({"realtime_delta_ms": 200})).await;
    let (mut ws, _) = session(&env, &env.key).await;
    send(&mut ws, user_text("Hello")).await;
    send(
        &mut ws,
        json!({"type": "response.create", "response": {"max_output_tokens": 12}}),
    )
    .await;
    until(&mut ws, "response.created").await;
    let Env { gw, sim, dir, .. } = env;
    let store = gw.gateway.store.clone();
    let stopping = tokio::spawn(gw.stop());
    // The response in flight is cancelled upstream, settled, passed on.
    let done = until(&mut ws, "response.done").await.pop().unwrap();
    assert_eq!(done["response"]["status"], "cancelled");
    let (code, reason) = closed(&mut ws).await;
    assert_eq!(code, 1001);
    assert!(reason.contains("going away"), "{reason}");
    stopping.await.unwrap();
    use runtime::store::History;
    let rows = store.usage_rows().unwrap();
    assert_eq!(rows.len(), 1, "the cancelled response billed once");
    assert_eq!(rows[0].charged, priced(&done["response"]["usage"]));
    drop((sim, dir));
}
