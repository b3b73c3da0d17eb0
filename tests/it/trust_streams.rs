//! Issue #37: a stream's charge is committed before its last event leaves.
//! The moment a caller reads a stream's final event (`data: [DONE]`, or
//! `/messages`' `message_stop`), its generation answers 200 with the charge
//! and its usage record and ledger debit are in the store, to the 8th
//! decimal the charge of the tokens the stream announced; on every streamed
//! model route, with and without `stream_options.include_usage`, on each
//! provider kind. When the settlement cannot be committed (PostgreSQL
//! stopped under the gateway) the last event waits for the retried commit,
//! and past the stream's idle time-out the stream ends with an error event
//! instead of a success, its usage recorded once the database answers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use runtime::store::{History, Ledger};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::postgres::PgServer;
use crate::harness::*;

/// A streamed request: its route and body.
struct Case {
    what: String,
    path: &'static str,
    body: Value,
    /// The model as the gateway resolves it (`provider/model`).
    model: &'static str,
    messages: bool,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let kinds = [
        ("sim/sim-gpt", Some("sim/sim-instruct")),
        ("claude/claude-sim", Some("claude/claude-instruct")),
        // Gemini serves no text completions (docs/models.md, "Kinds").
        ("gem/gemini-sim", None),
    ];
    for (chat, completion) in kinds {
        for usage in [false, true] {
            let mut with = |path, model, messages: bool, mut body: Value| {
                body["model"] = json!(model);
                body["stream"] = json!(true);
                // `stream_options` is OpenAI's: Anthropic's API has none
                // (`/messages` refuses it, docs/dialects.md).
                if usage && !messages {
                    body["stream_options"] = json!({"include_usage": true});
                }
                out.push(Case {
                    what: format!("{path} on {model}, include_usage {usage}"),
                    path,
                    body,
                    model,
                    messages,
                });
            };
            let msgs =
                json!({"max_tokens": 6, "messages": [{"role": "user", "content": "Hello there"}]});
            with("/chat/completions", chat, false, msgs.clone());
            // `/messages` always asks its chat stream for the usage chunk.
            with("/messages", chat, true, msgs);
            if let Some(m) = completion {
                let prompt = json!({"max_tokens": 6, "prompt": "Once upon a time"});
                with("/completions", m, false, prompt);
            }
        }
    }
    out
}

/// The final event of a stream's text, if it has arrived.
fn final_event(text: &str, messages: bool) -> bool {
    if messages {
        text.contains("event: message_stop\n")
    } else {
        text.contains("data: [DONE]\n\n")
    }
}

/// The `data:` JSON of each event of `text`.
fn data_of(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// What a stream announced at its end: its tokens (input and output, when
/// it told them) and its cost (when it told it).
fn announced(text: &str, messages: bool) -> (Option<(i64, i64)>, Option<String>) {
    let events = data_of(text);
    if messages {
        let delta = events.iter().find(|v| v["type"] == "message_delta");
        let u = delta.map(|d| &d["usage"]);
        let tokens = u.map(|u| {
            let n = |k: &str| u[k].as_i64().unwrap_or(0);
            (
                n("input_tokens") + n("cache_read_input_tokens") + n("cache_creation_input_tokens"),
                n("output_tokens"),
            )
        });
        return (tokens, None);
    }
    let usage = events.iter().rev().find_map(|v| v.get("usage"));
    let tokens = usage.and_then(|u| {
        Some((
            u["prompt_tokens"].as_i64()?,
            u["completion_tokens"].as_i64()?,
        ))
    });
    let cost = usage
        .map(|u| &u["cost"])
        .filter(|c| c.is_number())
        .map(Value::to_string);
    (tokens, cost)
}

/// Sends `case` to `base` with `key`: the response, its headers read.
async fn start(client: &reqwest::Client, base: &str, key: &str, case: &Case) -> reqwest::Response {
    let r = client
        .post(format!("{base}/api/v1{}", case.path))
        .bearer_auth(key)
        .json(&case.body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", case.what);
    r
}

/// Reads a stream until its final event, or an error event, or its end:
/// the text read, and the rest of the stream.
async fn read_to_last(
    r: reqwest::Response,
    messages: bool,
) -> (
    String,
    impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>>,
) {
    let mut s = r.bytes_stream();
    let mut text = String::new();
    while !final_event(&text, messages) && !text.contains("\"error\"") {
        match s.next().await {
            Some(chunk) => text.push_str(&String::from_utf8_lossy(&chunk.unwrap())),
            None => break,
        }
    }
    (text, s)
}

/// The charge of `input` + `output` tokens of `model` on `env`'s gateway.
fn charge_of(env: &Env, model: &str, (input, output): (i64, i64)) -> Decimal {
    let catalogue = env.gw.gateway.catalogue();
    let (p, m) = catalogue
        .resolve(Some(model), runtime::providers::ModelType::Chat)
        .or_else(|_| catalogue.resolve(Some(model), runtime::providers::ModelType::Completion))
        .unwrap();
    runtime::money::token_cost(p, m, input as u64, output as u64)
}

/// Asserts, now, that request `id` is settled at `charged` to the 8th
/// decimal: its generation answers 200 with that cost, and its usage
/// record and ledger debit are in the store.
async fn assert_settled(env: &Env, key: &str, id: &str, charged: Decimal, what: &str) {
    let g = env
        .call_as(
            key,
            "GET",
            &env.url(&format!("/api/v1/generations/{id}")),
            None,
        )
        .await;
    assert_eq!(g.status, 200, "{what}: the generation of {id}: {}", g.text);
    assert_eq!(
        g.json["cost"],
        json!(format!("{charged:.8}")),
        "{what}: {}",
        g.text
    );
    assert_eq!(g.json["streamed"], json!(true), "{what}: {}", g.text);
    let usage: Vec<_> = env
        .usage()
        .into_iter()
        .filter(|u| u.request_id == id)
        .collect();
    assert_eq!(usage.len(), 1, "{what}: one usage record of {id}");
    assert_eq!(usage[0].charged, charged, "{what}");
    let debits: Vec<_> = env
        .store()
        .ledger(env.user_id)
        .unwrap()
        .into_iter()
        .filter(|l| l.usage_id == Some(usage[0].id))
        .collect();
    assert_eq!(debits.len(), 1, "{what}: one ledger debit of {id}");
    assert_eq!(debits[0].amount, -charged, "{what}");
}

/// The model-usage row of request `id` (committed).
fn model_row(env: &Env, id: &str) -> runtime::store::ModelUsageRow {
    let rows = env.store().model_usage_rows().unwrap();
    rows.into_iter()
        .find(|r| r.request_id == id)
        .unwrap_or_else(|| panic!("no model usage row of {id}"))
}

/// Checks what a stream announced against what was committed for it: its
/// tokens those of its model-usage row (when it told them), the charge
/// those tokens' cost, and its cost (when it told it) that charge.
fn check_announced(env: &Env, case: &Case, id: &str, text: &str) -> Decimal {
    let row = model_row(env, id);
    let tokens = (
        row.input_tokens + row.cache_read_tokens + row.cache_write_tokens,
        row.output_tokens,
    );
    let (told, cost) = announced(text, case.messages);
    if case.messages || case.body.get("stream_options").is_some() {
        assert_eq!(
            told,
            Some(tokens),
            "{}: the announced tokens\n{text}",
            case.what
        );
    }
    let charged = charge_of(env, case.model, tokens);
    assert!(charged > Decimal::ZERO, "{}", case.what);
    if case.body.get("stream_options").is_some() && !case.messages {
        assert_eq!(cost, Some(format!("{charged:.8}")), "{}\n{text}", case.what);
    }
    charged
}

/// Every streamed model route (chat completions, completions, `/messages`),
/// with and without `include_usage`, on OpenAI, Anthropic and Gemini
/// providers: when the caller reads the final event, the generation (by
/// the `X-Request-Id`) already answers 200 with the charge, and the usage
/// record and ledger debit are committed, equal to the 8th decimal to the
/// cost of the tokens (and the cost) the stream announced. The provider
/// keeps its connection open a while after its last event: the gateway
/// ends the stream at the provider's `[DONE]`, settled, without waiting
/// for the close.
#[tokio::test]
async fn the_final_event_of_every_stream_leaves_after_its_charge_is_committed() {
    let env = env_with_providers(native_toml, |_| {}).await;
    env.grant("10");
    env.sim_config(json!({"stream_linger_ms": 500})).await;
    let cases = cases();
    assert_eq!(cases.len(), 16);
    for case in &cases {
        let r = start(&env.client, &env.gw.url(), &env.key, case).await;
        let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
        let (text, mut rest) = read_to_last(r, case.messages).await;
        assert!(
            final_event(&text, case.messages),
            "{}: no final event\n{text}",
            case.what
        );
        // At once: no wait between the final event and these reads.
        let row = env
            .store()
            .model_usage_rows()
            .unwrap()
            .into_iter()
            .find(|r| r.request_id == id);
        assert!(
            row.is_some(),
            "{}: the final event came before the settlement was committed\n{text}",
            case.what
        );
        let charged = check_announced(&env, case, &id, &text);
        assert_settled(&env, &env.key, &id, charged, &case.what).await;
        // Nothing follows the final event.
        let mut after = String::new();
        while let Some(chunk) = rest.next().await {
            after.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        }
        assert_eq!(after, "", "{}: after the final event", case.what);
        assert_eq!(
            text.matches("[DONE]").count() + text.matches("event: message_stop").count(),
            1,
            "{}: one final event\n{text}",
            case.what
        );
    }
    env.wait_no_holds().await;
    let charged: Decimal = env.usage().iter().map(|u| u.charged).sum();
    assert_eq!(env.balance(), d("10") - charged);
}

/// Reads a whole stream, and at the moment its final event arrives (said
/// in `seen`), the generation of request `id` with `key` (before the
/// stream's end).
async fn read_with_generation(
    client: reqwest::Client,
    r: reqwest::Response,
    messages: bool,
    (generation, key): (String, String),
    seen: Arc<AtomicBool>,
) -> (String, u16, Value) {
    let (mut text, mut rest) = read_to_last(r, messages).await;
    let (status, json) = if final_event(&text, messages) {
        seen.store(true, Ordering::Release);
        let g = client
            .get(generation)
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        let status = g.status().as_u16();
        (status, g.json().await.unwrap_or(Value::Null))
    } else {
        (0, Value::Null)
    };
    while let Some(chunk) = rest.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    (text, status, json)
}

/// Polls `probe` every 20 ms until it holds; fails past `limit`.
async fn until(limit: Duration, what: &str, mut probe: impl FnMut() -> bool) {
    let start = Instant::now();
    while !probe() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A chat stream without `include_usage`, and a `/messages` stream.
fn db_cases() -> [Case; 2] {
    let body = json!({"model": "sim/sim-gpt", "stream": true, "max_tokens": 12,
        "messages": [{"role": "user", "content": "Hello there"}]});
    [
        Case {
            what: "chat".into(),
            path: "/chat/completions",
            body: body.clone(),
            model: "sim/sim-gpt",
            messages: false,
        },
        Case {
            what: "messages".into(),
            path: "/messages",
            body,
            model: "sim/sim-gpt",
            messages: true,
        },
    ]
}

/// PostgreSQL stopped while streams run: their settlement cannot commit.
/// On an instance with the default idle time-out, the last event waits
/// for the retried commit: it leaves only once PostgreSQL is back, settled
/// (the generation answers at that moment). On an instance whose idle
/// time-out passes first, the stream ends with an error event naming the
/// database (Anthropic's `error` event on `/messages`) instead of `[DONE]`
/// or `message_stop`, and what was streamed is recorded and debited once
/// PostgreSQL answers again; no hold stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_settlement_the_database_cannot_commit_holds_back_the_final_event() {
    let Some(pg) = PgServer::start("trust_streams") else {
        return;
    };
    let url = pg.url();
    let env = llm_env(move |c| c.database_url = Some(url)).await;
    env.grant("10");
    // 12 words 400 ms apart: each stream still runs when PostgreSQL is down.
    env.sim_config(json!({"stream_delay_ms": 400})).await;
    let mut config = config_for(&env.sim, &env.dir);
    config.database_url = Some(pg.url());
    config.providers_file = Some(env.dir.0.join("providers.toml"));
    config.stream_timeout = Duration::from_secs(2);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let short = server::start(config, listener).unwrap();

    // The last event waits for the commit.
    let mut open = Vec::new();
    for case in db_cases() {
        let r = start(&env.client, &env.gw.url(), &env.key, &case).await;
        let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
        let seen = Arc::new(AtomicBool::new(false));
        let generation = env.url(&format!("/api/v1/generations/{id}"));
        let reader = tokio::spawn(read_with_generation(
            env.client.clone(),
            r,
            case.messages,
            (generation, env.key.clone()),
            seen.clone(),
        ));
        open.push((case, id, seen, reader));
    }
    tokio::task::block_in_place(|| pg.stop());
    for (case, _, seen, _) in &open {
        let seen = seen.load(Ordering::Acquire);
        assert!(!seen, "{}: ended before PostgreSQL stopped", case.what);
    }
    for (case, id, seen, _) in &open {
        until(
            Duration::from_secs(20),
            "the settlement failed on the stopped database",
            || env.store().owes_release(id),
        )
        .await;
        assert!(
            !seen.load(Ordering::Acquire),
            "{}: the final event came with the settlement not committed",
            case.what
        );
    }
    tokio::task::block_in_place(|| pg.start_again());
    for (case, id, _, reader) in open {
        let (text, status, g) = reader.await.unwrap();
        assert!(final_event(&text, case.messages), "{}: {text}", case.what);
        assert!(!text.contains("\"error\""), "{}: {text}", case.what);
        assert_eq!(
            status, 200,
            "{}: the generation at the final event: {g}",
            case.what
        );
        let charged = check_announced(&env, &case, &id, &text);
        assert_eq!(g["cost"], json!(format!("{charged:.8}")), "{}", case.what);
        assert_settled(&env, &env.key, &id, charged, &case.what).await;
    }

    // Past the idle time-out: an error event instead of the final event.
    let mut ended = Vec::new();
    let mut responses = Vec::new();
    for case in db_cases() {
        let r = start(&env.client, &short.url(), &env.key, &case).await;
        let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
        let mut s = r.bytes_stream();
        let first = s.next().await.unwrap().unwrap();
        responses.push((case, id, String::from_utf8_lossy(&first).into_owned(), s));
    }
    tokio::task::block_in_place(|| pg.stop());
    for (case, id, mut text, mut s) in responses {
        while let Some(chunk) = s.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        }
        assert!(!final_event(&text, case.messages), "{}: {text}", case.what);
        assert!(!text.contains("[DONE]"), "{}: {text}", case.what);
        let last = text.trim_end().rsplit("\n\n").next().unwrap().to_owned();
        assert!(last.contains("database"), "{}: {text}", case.what);
        if case.messages {
            assert!(last.starts_with("event: error\n"), "{}: {text}", case.what);
        } else {
            assert!(last.contains("\"code\":503"), "{}: {text}", case.what);
        }
        ended.push((case, id, text));
    }
    tokio::task::block_in_place(|| pg.start_again());
    for (case, id, text) in ended {
        let store = env.store();
        until(
            Duration::from_secs(20),
            "the usage is recorded once the database answers",
            || {
                store
                    .usage_rows()
                    .unwrap()
                    .iter()
                    .any(|u| u.request_id == id)
            },
        )
        .await;
        let row = model_row(&env, &id);
        assert_eq!(row.ended, "complete", "{}", case.what);
        let tokens = (row.input_tokens, row.output_tokens);
        let charged = charge_of(&env, case.model, tokens);
        assert_settled(&env, &env.key, &id, charged, &case.what).await;
        // What was streamed: the counted output of the content events.
        let content = data_of(&text)
            .iter()
            .filter(|v| {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .is_some_and(|t| !t.is_empty())
                    || v["delta"]["text"].as_str().is_some_and(|t| !t.is_empty())
            })
            .count();
        assert!(content > 0, "{}: {text}", case.what);
    }
    env.wait_no_holds().await;
    let charged: Decimal = env.usage().iter().map(|u| u.charged).sum();
    assert_eq!(env.balance(), d("10") - charged);
    drop(short);
}
