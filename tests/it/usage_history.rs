//! Issue #27's first part: every answer says what it cost (`usage.cost`,
//! `X-Gateway-Cost`, a stream's last usage event), and the caller's
//! history over HTTP (generations, usage totals, credits, the ledger), the
//! same for any user under `/admin/users/{id}/...`; another user's request
//! or ledger is never shown.

use std::time::Duration;

use futures_util::StreamExt;
use runtime::store::{History, Keys, Ledger};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::*;

const ADMIN_KEY: &str = "usage-history-admin-key-0123456789";

fn chat_body(text: &str) -> Value {
    json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": text}]})
}

async fn admin_env() -> Env {
    llm_env(|c| c.accounts.admin_key = Some(ADMIN_KEY.into())).await
}

/// `GET /api/v1` + `path` with `key`.
async fn get_as(env: &Env, key: &str, path: &str) -> Answer {
    env.call_as(key, "GET", &env.url(&format!("/api/v1{path}")), None)
        .await
}

/// `GET /api/v1/admin/users/{user}` + `path` with the admin key.
async fn admin_get(env: &Env, user: i64, path: &str) -> Answer {
    let r = env
        .client
        .get(env.url(&format!("/api/v1/admin/users/{user}{path}")))
        .header("x-admin-key", ADMIN_KEY)
        .send()
        .await
        .unwrap();
    Answer::from(r).await
}

/// The stored charge of request `id`, as the answers show it.
fn charged_of(env: &Env, id: &str) -> String {
    let u: Vec<_> = env
        .usage()
        .into_iter()
        .filter(|u| u.request_id == id)
        .collect();
    assert_eq!(u.len(), 1, "one usage record of {id}");
    format!("{:.8}", u[0].charged)
}

#[tokio::test]
async fn every_model_answer_says_its_cost_which_is_the_usage_records_charge() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let answers = [
        ("/chat/completions", chat_body("Hello there")),
        (
            "/completions",
            json!({"model": "sim/sim-instruct", "prompt": "Once upon", "max_tokens": 4}),
        ),
        (
            "/embeddings",
            json!({"model": "sim/sim-embed", "input": "The quick brown fox"}),
        ),
        (
            "/images/generations",
            json!({"model": "sim/sim-image", "prompt": "a cat"}),
        ),
    ];
    for (path, body) in answers {
        let a = env.api(path, body).await;
        a.expect(200);
        let id = a.header("x-request-id").unwrap().to_owned();
        let charged = charged_of(&env, &id);
        assert_ne!(charged, "0.00000000", "{path} is billed");
        assert_eq!(
            a.json["usage"]["cost"].to_string(),
            charged,
            "{path}: {}",
            a.text
        );
        assert!(
            a.text.contains(&format!("\"cost\":{charged}")),
            "{path}: a number of 8 decimals: {}",
            a.text
        );
        assert_eq!(a.json["usage"]["byok"], json!(false), "{path}");
        assert_eq!(a.header("x-gateway-cost"), Some(charged.as_str()), "{path}");
    }
    // The chat answer keeps the provider's token counts beside the cost.
    let a = env.api("/chat/completions", chat_body("Hi")).await;
    assert!(a.json["usage"]["prompt_tokens"].is_u64(), "{}", a.text);
    // A free route says no cost.
    let a = get_as(&env, &env.key, "/credits").await;
    a.expect(200);
    assert_eq!(a.header("x-gateway-cost"), None);
}

#[tokio::test]
async fn a_byok_answer_costs_zero_and_says_so() {
    const BYOK: &str = "sk-caller-own-key-usage-0123456789";
    let env = llm_env(|_| {}).await;
    env.sim_config(json!({"api_key": BYOK})).await;
    let mut body = chat_body("Hello there");
    body["byok_api_key"] = json!(BYOK);
    let a = env.api("/chat/completions", body).await;
    a.expect(200);
    assert_eq!(a.json["usage"]["cost"].to_string(), "0.00000000");
    assert_eq!(a.json["usage"]["byok"], true);
    assert_eq!(a.header("x-gateway-cost"), Some("0.00000000"));
    let id = a.header("x-request-id").unwrap();
    assert_eq!(charged_of(&env, id), "0.00000000");
}

#[tokio::test]
async fn speech_and_transcription_answers_say_their_cost() {
    let env = media_env().await;
    env.grant("1");
    let a = env
        .api(
            "/audio/tts/generations",
            json!({"model": "sim/sim-tts", "input": "hello world", "response_format": "wav"}),
        )
        .await;
    a.expect(200);
    let charged = charged_of(&env, a.header("x-request-id").unwrap());
    assert_eq!(charged, "0.00792000");
    assert_eq!(a.json["usage"]["cost"].to_string(), charged);
    assert_eq!(a.header("x-gateway-cost"), Some(charged.as_str()));
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(wav(1.0)).file_name("a.wav"),
    );
    let a = env
        .post_form(&env.url("/api/v1/audio/stt/transcriptions"), form)
        .await;
    a.expect(200);
    let charged = charged_of(&env, a.header("x-request-id").unwrap());
    assert_ne!(charged, "0.00000000");
    assert_eq!(a.json["usage"]["cost"].to_string(), charged, "{}", a.text);
    assert_eq!(a.header("x-gateway-cost"), Some(charged.as_str()));
}

#[tokio::test]
async fn a_voice_answer_says_its_cost_in_a_header() {
    let env = Env::start().await;
    env.grant("10");
    let a = env.post("/tts/synthesize", synth_body("Hello there")).await;
    a.expect(200);
    let charged = charged_of(&env, a.header("x-request-id").unwrap());
    assert_ne!(charged, "0.00000000");
    assert_eq!(a.header("x-gateway-cost"), Some(charged.as_str()));
}

/// The `data:` events of a stream, `[DONE]` included.
fn events(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|e| e.trim().strip_prefix("data:").map(|d| d.trim().to_owned()))
        .collect()
}

/// The usage of the event before `[DONE]`, which must end the stream.
fn last_usage(text: &str) -> Value {
    let ev = events(text);
    assert_eq!(ev.last().map(String::as_str), Some("[DONE]"), "{text}");
    assert_eq!(ev.iter().filter(|e| *e == "[DONE]").count(), 1, "{text}");
    let with_usage = ev.iter().filter(|e| e.contains("\"usage\":{")).count();
    assert_eq!(with_usage, 1, "one usage event: {text}");
    let v: Value = serde_json::from_str(&ev[ev.len() - 2]).unwrap();
    v["usage"].clone()
}

async fn read_all(r: reqwest::Response) -> String {
    let mut s = r.bytes_stream();
    let mut text = String::new();
    while let Some(c) = s.next().await {
        text.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    text
}

#[tokio::test]
async fn a_stream_that_asked_for_usage_ends_with_its_cost_however_it_ends() {
    let env = llm_env(|c| c.stream_timeout = Duration::from_secs(1)).await;
    env.grant("1");
    // Complete: the upstream's own usage event, with the cost, last.
    let mut body = chat_body("Hello there");
    body["stream"] = json!(true);
    body["max_tokens"] = json!(4);
    body["stream_options"] = json!({"include_usage": true});
    let r = env.stream_chat(&env.key, body.clone()).await;
    let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    let usage = last_usage(&read_all(r).await);
    env.wait_model_usage(1).await;
    assert_eq!(usage["cost"].to_string(), charged_of(&env, &id));
    assert_eq!(
        (
            usage["prompt_tokens"].as_u64(),
            usage["completion_tokens"].as_u64()
        ),
        (Some(2), Some(4))
    );
    // Without include_usage: no cost in the stream.
    let mut plain = body.clone();
    plain.as_object_mut().unwrap().remove("stream_options");
    let text = read_all(env.stream_chat(&env.key, plain).await).await;
    assert!(!text.contains("\"cost\""), "{text}");
    // Stopped: the usage event (made of what was counted), then [DONE].
    env.sim_config(json!({"stream_delay_ms": 200})).await;
    body["max_tokens"] = json!(50);
    let r = env.stream_chat(&env.key, body.clone()).await;
    let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    let stream_id = r.headers()["x-stream-id"].to_str().unwrap().to_owned();
    let mut s = r.bytes_stream();
    let mut text = String::new();
    while text.matches("data: ").count() < 2 {
        text.push_str(&String::from_utf8_lossy(&s.next().await.unwrap().unwrap()));
    }
    env.api(&format!("/completions/stop-stream/{stream_id}"), json!({}))
        .await
        .expect(200);
    while let Some(c) = s.next().await {
        text.push_str(&String::from_utf8_lossy(&c.unwrap()));
    }
    let usage = last_usage(&text);
    env.wait_model_usage(3).await;
    assert_eq!(usage["cost"].to_string(), charged_of(&env, &id), "{text}");
    let g = get_as(&env, &env.key, &format!("/generations/{id}")).await;
    g.expect(200);
    assert_eq!(
        (g.json["streamed"].as_bool(), g.json["ended"].as_str()),
        (Some(true), Some("stopped"))
    );
    // Timed out: the error event, the usage event, [DONE].
    env.sim_config(json!({"stream_delay_ms": 1500})).await;
    let r = env.stream_chat(&env.key, body).await;
    let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    let text = read_all(r).await;
    assert!(text.contains("stream idle"), "{text}");
    let usage = last_usage(&text);
    env.wait_model_usage(4).await;
    assert_eq!(usage["cost"].to_string(), charged_of(&env, &id), "{text}");
    let g = get_as(&env, &env.key, &format!("/generations/{id}")).await;
    assert_eq!(g.json["ended"], "timed_out");
}

#[tokio::test]
async fn a_generation_is_shown_to_its_caller_and_the_admin_only() {
    let env = admin_env().await;
    env.grant("1");
    let a = env.api("/chat/completions", chat_body("Hello there")).await;
    a.expect(200);
    let id = a.header("x-request-id").unwrap().to_owned();
    let g = get_as(&env, &env.key, &format!("/generations/{id}")).await;
    g.expect(200);
    let rows = env.store().model_usage_rows().unwrap();
    assert_eq!(g.json["request_id"], json!(id));
    assert_eq!(g.json["route"], "chat.completions");
    assert_eq!(
        (g.json["deployment"].as_str(), g.json["model"].as_str()),
        (Some("sim"), Some("sim-gpt"))
    );
    assert_eq!(g.json["tokens"]["input"], json!(rows[0].input_tokens));
    assert_eq!(g.json["tokens"]["output"], json!(rows[0].output_tokens));
    assert_eq!(g.json["tokens"]["cache_read"], 0);
    assert_eq!(g.json["cost"], json!(charged_of(&env, &id)));
    assert_eq!(
        g.json["cost"].as_str(),
        Some(&*a.json["usage"]["cost"].to_string())
    );
    assert_eq!(
        (g.json["streamed"].as_bool(), g.json["ended"].as_str()),
        (Some(false), Some("complete"))
    );
    assert!(g.json["latency_ms"].is_u64(), "{}", g.text);
    assert!(g.json["created_at"].is_string());
    // Another user's request and an unknown one: 404, the same answer.
    let (bob, bob_key) = env.new_user("bob@example.com");
    let other = get_as(&env, &bob_key, &format!("/generations/{id}")).await;
    let unknown = get_as(&env, &bob_key, "/generations/res_000000000000000000000000").await;
    assert_eq!(envelope(&other, 404), envelope(&unknown, 404));
    // A free request is no generation.
    let free = get_as(&env, &env.key, "/credits").await;
    let free_id = free.header("x-request-id").unwrap();
    envelope(
        &get_as(&env, &env.key, &format!("/generations/{free_id}")).await,
        404,
    );
    // The admin sees it under its user, not under another.
    let g = admin_get(&env, env.user_id, &format!("/generations/{id}")).await;
    g.expect(200);
    assert_eq!(g.json["cost"], json!(charged_of(&env, &id)));
    admin_get(&env, bob, &format!("/generations/{id}"))
        .await
        .expect(404);
    admin_get(&env, 999_999, "/credits").await.expect(404);
    // Without the admin key: refused.
    let r = get_as(&env, &env.key, &format!("/admin/users/{bob}/credits")).await;
    assert!(r.status == 401 || r.status == 403, "{}", r.status);
}

#[tokio::test]
async fn usage_totals_per_day_model_and_route_as_json_and_csv() {
    let env = admin_env().await;
    env.grant("1");
    for _ in 0..2 {
        env.api("/chat/completions", chat_body("Hello there"))
            .await
            .expect(200);
    }
    env.api(
        "/embeddings",
        json!({"model": "sim/sim-embed", "input": "fox"}),
    )
    .await
    .expect(200);
    let usage = env.usage();
    let cost_of = |product: &str| -> Decimal {
        usage
            .iter()
            .filter(|u| u.product == product)
            .map(|u| u.charged)
            .sum()
    };
    let tokens_of = |product: &str| -> Decimal {
        usage
            .iter()
            .filter(|u| u.product == product)
            .map(|u| u.quantity)
            .sum()
    };
    let a = get_as(&env, &env.key, "/usage?group_by=model").await;
    a.expect(200);
    let data = a.json["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "{}", a.text);
    let gpt = data.iter().find(|g| g["model"] == "sim/sim-gpt").unwrap();
    assert_eq!(gpt["requests"], 2);
    assert_eq!(gpt["cost"], json!(format!("{:.8}", cost_of("sim/sim-gpt"))));
    assert_eq!(
        gpt["tokens"],
        json!(tokens_of("sim/sim-gpt").normalize().to_string())
    );
    let total: Decimal = cost_of("sim/sim-gpt") + cost_of("sim/sim-embed");
    assert_eq!(a.json["total"]["cost"], json!(format!("{total:.8}")));
    assert_eq!(a.json["total"]["requests"], 3);
    // By day (the default): today only; by route.
    let a = get_as(&env, &env.key, "/usage").await;
    let today = chrono::Utc::now().date_naive().to_string();
    assert_eq!(a.json["data"].as_array().unwrap().len(), 1, "{}", a.text);
    assert_eq!(a.json["data"][0]["day"], json!(today));
    assert_eq!(a.json["data"][0]["requests"], 3);
    let a = get_as(&env, &env.key, "/usage?group_by=route").await;
    let routes: Vec<&str> = a.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["route"].as_str().unwrap())
        .collect();
    assert_eq!(routes, ["chat.completions", "embeddings"]);
    // A range without usage.
    let a = get_as(&env, &env.key, "/usage?from=2020-01-01&to=2020-01-31").await;
    a.expect(200);
    assert_eq!(a.json["data"], json!([]));
    // CSV.
    let a = get_as(&env, &env.key, "/usage?group_by=model&format=csv").await;
    a.expect(200);
    assert!(a.header("content-type").unwrap().starts_with("text/csv"));
    let lines: Vec<&str> = a.text.lines().collect();
    assert_eq!(lines[0], "model,requests,tokens,seconds,images,cost");
    assert!(
        lines.contains(
            &format!(
                "sim/sim-gpt,2,{},0,0,{:.8}",
                tokens_of("sim/sim-gpt").normalize(),
                cost_of("sim/sim-gpt")
            )
            .as_str()
        ),
        "{}",
        a.text
    );
    // Bad ranges: 400.
    for q in [
        "from=2026-02-01&to=2026-01-01",
        "from=2024-01-01&to=2025-06-01",
        "from=yesterday",
        "group_by=week",
    ] {
        envelope(&get_as(&env, &env.key, &format!("/usage?{q}")).await, 400);
    }
    // Another user sees none of it; the admin sees it under the user.
    let (bob, bob_key) = env.new_user("bob@example.com");
    let a = get_as(&env, &bob_key, "/usage?group_by=model").await;
    assert_eq!(a.json["data"], json!([]));
    let a = admin_get(&env, env.user_id, "/usage?group_by=model").await;
    a.expect(200);
    assert_eq!(a.json["total"]["requests"], 3);
    let a = admin_get(&env, bob, "/usage").await;
    assert_eq!(a.json["data"], json!([]));
}

#[tokio::test]
async fn credits_and_the_ledger_newest_first_by_cursor() {
    let env = admin_env().await;
    for amount in ["1", "2", "3"] {
        env.grant(amount);
    }
    env.api("/chat/completions", chat_body("Hello there"))
        .await
        .expect(200);
    // A request in flight holds credit.
    env.store()
        .reserve(env.user_id, "res_inflight", d("0.5"))
        .unwrap();
    let a = get_as(&env, &env.key, "/credits").await;
    a.expect(200);
    let balance = env.balance();
    assert_eq!(a.json["balance"], json!(format!("{balance:.8}")));
    assert_eq!(a.json["held"], "0.50000000");
    assert_eq!(
        a.json["available"],
        json!(format!("{:.8}", balance - d("0.5")))
    );
    // The ledger: the charge first, then the grants, newest first.
    let full = get_as(&env, &env.key, "/credits/ledger").await;
    full.expect(200);
    let kinds: Vec<&str> = full.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["charge", "grant", "grant", "grant"]);
    assert_eq!(
        full.json["data"][0]["balance_after"],
        json!(format!("{balance:.8}"))
    );
    assert_eq!(full.json["data"][1]["amount"], "3.00000000");
    // A charge names its request (the generation to look up); a grant none.
    let charged = full.json["data"][0]["request_id"].as_str().unwrap();
    assert!(env.usage().iter().any(|u| u.request_id == charged));
    assert_eq!(full.json["data"][1]["request_id"], Value::Null);
    assert_eq!(full.json["next_cursor"], Value::Null);
    // Pages of 3 then 1, together the whole ledger.
    let p1 = get_as(&env, &env.key, "/credits/ledger?limit=3").await;
    let cursor = p1.json["next_cursor"].as_str().unwrap().to_owned();
    let p2 = get_as(
        &env,
        &env.key,
        &format!("/credits/ledger?limit=3&cursor={cursor}"),
    )
    .await;
    assert_eq!(p2.json["next_cursor"], Value::Null);
    let mut paged = p1.json["data"].as_array().unwrap().clone();
    paged.extend(p2.json["data"].as_array().unwrap().iter().cloned());
    assert_eq!(json!(paged), full.json["data"]);
    envelope(
        &get_as(&env, &env.key, "/credits/ledger?cursor=abc").await,
        400,
    );
    // Another user's ledger is not the caller's; the admin reads the user's.
    let (bob, bob_key) = env.new_user("bob@example.com");
    let a = get_as(&env, &bob_key, "/credits/ledger").await;
    assert_eq!(a.json["data"], json!([]));
    let a = get_as(&env, &bob_key, "/credits").await;
    assert_eq!(
        (a.json["balance"].as_str(), a.json["held"].as_str()),
        (Some("0.00000000"), Some("0.00000000"))
    );
    let a = admin_get(&env, env.user_id, "/credits/ledger?limit=2").await;
    a.expect(200);
    assert_eq!(
        a.json["data"],
        json!(full.json["data"].as_array().unwrap()[..2])
    );
    let a = admin_get(&env, env.user_id, "/credits").await;
    assert_eq!(a.json["held"], "0.50000000");
    admin_get(&env, bob, "/credits/ledger").await.expect(200);
    admin_get(&env, 999_999, "/credits/ledger")
        .await
        .expect(404);
}

#[tokio::test]
async fn usage_by_key_names_each_api_key_and_every_request_records_its_key() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let (second_id, second) =
        runtime::auth::create_named_key(env.store(), env.user_id, Some("second"), None).unwrap();
    let first_id: i64 = env.store().keys_of(env.user_id).unwrap()[0].id;
    // Two plain chats with the env's key; a streamed one (settled by the
    // relay, not the pipeline) and an embedding with the second key.
    for _ in 0..2 {
        env.api("/chat/completions", chat_body("Hello there"))
            .await
            .expect(200);
    }
    let mut body = chat_body("Hello there");
    body["stream"] = json!(true);
    let text = read_all(env.stream_chat(&second, body).await).await;
    assert!(text.contains("[DONE]"), "{text}");
    env.call_as(
        &second,
        "POST",
        &env.url("/api/v1/embeddings"),
        Some(json!({"model": "sim/sim-embed", "input": "fox"})),
    )
    .await
    .expect(200);
    env.wait_model_usage(4).await;
    // Every usage record names the key its request came with.
    let stored = own_query(
        &env,
        "SELECT CAST(api_key_id AS TEXT), CAST(COUNT(*) AS TEXT) FROM usage
         GROUP BY api_key_id ORDER BY api_key_id",
    )
    .await;
    assert_eq!(
        stored,
        vec![
            vec![first_id.to_string(), "2".to_owned()],
            vec![second_id.to_string(), "2".to_owned()]
        ]
    );
    let key_of: Vec<(String, String)> = own_query(
        &env,
        "SELECT request_id, CAST(api_key_id AS TEXT) FROM usage",
    )
    .await
    .into_iter()
    .map(|r| (r[0].clone(), r[1].clone()))
    .collect();
    let cost_by_key = |key: i64| -> Decimal {
        env.usage()
            .iter()
            .filter(|u| key_of.contains(&(u.request_id.clone(), key.to_string())))
            .map(|u| u.charged)
            .sum()
    };
    let a = get_as(&env, &env.key, "/usage?group_by=key").await;
    a.expect(200);
    assert_eq!(a.json["group_by"], "key");
    let data = a.json["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "{}", a.text);
    let second_row = data.iter().find(|g| g["key"] == json!(second_id)).unwrap();
    assert_eq!(second_row["key_name"], "second");
    assert_eq!(second_row["requests"], 2);
    assert_eq!(
        second_row["cost"],
        json!(format!("{:.8}", cost_by_key(second_id)))
    );
    let first_row = data.iter().find(|g| g["key"] == json!(first_id)).unwrap();
    assert_eq!(first_row["requests"], 2);
    assert_eq!(
        first_row["cost"],
        json!(format!("{:.8}", cost_by_key(first_id)))
    );
    assert!(first_row["key_prefix"].is_string(), "{}", a.text);
    // CSV: the key's id.
    let a = get_as(&env, &env.key, "/usage?group_by=key&format=csv").await;
    a.expect(200);
    let lines: Vec<&str> = a.text.lines().collect();
    assert_eq!(lines[0], "key,requests,tokens,seconds,images,cost");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&format!("{second_id},2,"))),
        "{}",
        a.text
    );
    // Another user's keys are not the caller's groups.
    let (_, bob_key) = env.new_user("bob@example.com");
    let a = get_as(&env, &bob_key, "/usage?group_by=key").await;
    assert_eq!(a.json["data"], json!([]));
}
