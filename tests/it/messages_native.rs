//! `POST /api/v1/messages` and `/api/v1/messages/count_tokens` to an
//! `anthropic` provider: today's Messages API passed through as sent
//! (Claude Code's first request, the official SDK), the hold's bound of
//! thinking and `output_config`, and the provider's own token count; each
//! answer checked with its usage record's four token counts and charge.

use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::{
    assert_charge_is_four_counts, d, native_env, nothing_charged, Answer, Env, PROVIDER_KEY,
};

const MODEL: &str = "claude/claude-sim";
const BETA: &str = "claude-code-20250219,context-management-2025-06-27";

/// `POST /api/v1{path}` as Anthropic's clients send it, with `beta` in
/// `anthropic-beta` when given.
async fn post(env: &Env, path: &str, beta: Option<&str>, body: &Value) -> reqwest::Response {
    let mut r = env
        .client
        .post(env.url(&format!("/api/v1{path}")))
        .header("x-api-key", &env.key)
        .header("anthropic-version", "2023-06-01");
    if let Some(b) = beta {
        r = r.header("anthropic-beta", b);
    }
    r.json(body).send().await.unwrap()
}

/// The events of an Anthropic stream: (name, data).
fn events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let name = e.lines().find_map(|l| l.strip_prefix("event: ")).unwrap();
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            (name.to_owned(), serde_json::from_str(data).unwrap())
        })
        .collect()
}

/// Asserts that the usage record of row `row` holds `usage` (Anthropic's
/// four counts) and charged them at the model's four prices.
async fn billed_as(env: &Env, row: usize, usage: &Value) {
    let m = assert_charge_is_four_counts(env, row).await;
    let n = |k: &str| usage[k].as_i64().unwrap();
    assert_eq!(
        (
            m.input_tokens,
            m.output_tokens,
            m.cache_read_tokens,
            m.cache_write_tokens
        ),
        (
            n("input_tokens"),
            n("output_tokens"),
            n("cache_read_input_tokens"),
            n("cache_creation_input_tokens")
        ),
        "{usage}"
    );
    assert_eq!((m.model.as_str(), m.counted), (MODEL, false));
}

/// What the usage record of request `id` charged.
fn charged(env: &Env, id: &str) -> Decimal {
    env.usage()
        .into_iter()
        .find(|u| u.request_id == id)
        .unwrap()
        .charged
}

/// Claude Code's first request (`ANTHROPIC_BASE_URL=<gateway>/api`): the
/// beta path, its headers and today's fields; the events pass as the
/// provider sent them and the record is the stream's final usage.
#[tokio::test]
async fn claude_codes_first_request_streams_as_sent_and_is_billed_by_its_final_usage() {
    let env = native_env().await;
    env.grant("5");
    let body = json!({
        "model": MODEL, "max_tokens": 32000, "stream": true,
        "system": [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude.",
            "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "system", "content": "The working directory is /work."},
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>Use the tools.</system-reminder>"},
                {"type": "text", "text": "Hello there, what is here?", "cache_control": {"type": "ephemeral"}}]}],
        "tools": [{"name": "Bash", "description": "Runs a command",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}],
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "thinking": {"type": "adaptive"},
        "metadata": {"user_id": "user_abc_account_def_session_ghi"},
    });
    let r = post(&env, "/messages?beta=true", Some(BETA), &body).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let text = String::from_utf8(r.bytes().await.unwrap().to_vec()).unwrap();
    let ev = events(&text);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names[0], "message_start");
    assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
    // As the provider sent them: its model id, its thinking block and deltas.
    assert_eq!(ev[0].1["message"]["model"], "claude-sim");
    assert_eq!(ev[1].1["content_block"]["type"], "thinking");
    let kinds: Vec<&str> = ev
        .iter()
        .filter_map(|(_, d)| d["delta"]["type"].as_str())
        .collect();
    assert!(kinds.contains(&"thinking_delta") && kinds.contains(&"signature_delta"));
    assert!(kinds.contains(&"text_delta"), "{kinds:?}");
    let last = &ev[ev.len() - 2].1["usage"];
    assert!(last["cache_creation_input_tokens"].as_u64().unwrap() > 0);
    billed_as(&env, 0, last).await;
    // The provider got the body as sent (the provider's model id) and the headers.
    let reqs = env.sim_requests().await;
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["path"], "/v1/messages");
    assert_eq!(reqs[0]["headers"]["anthropic-beta"], BETA);
    assert_eq!(reqs[0]["headers"]["anthropic-version"], "2023-06-01");
    assert_eq!(reqs[0]["headers"]["x-api-key"], PROVIDER_KEY);
    let mut expected = body.clone();
    expected["model"] = json!("claude-sim");
    assert_eq!(reqs[0]["json"], expected);
    // The same request again reads what the first wrote.
    let r = post(&env, "/messages?beta=true", Some(BETA), &body).await;
    let ev = events(&r.text().await.unwrap());
    let last = &ev[ev.len() - 2].1["usage"];
    assert!(last["cache_read_input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(last["cache_creation_input_tokens"], 0);
    billed_as(&env, 1, last).await;
}

/// `thinking.budget_tokens` counts in the hold's output bound and must be
/// below `max_tokens` (400 naming it, nothing sent or charged); bad
/// `thinking` and `output_config` are refused the same way.
#[tokio::test]
async fn thinking_and_output_config_are_bounded_and_checked() {
    let env = native_env().await;
    env.grant("1");
    let before = env.balance();
    let hello = |max: u64| {
        json!({"model": MODEL, "max_tokens": max,
            "messages": [{"role": "user", "content": "Hello there"}]})
    };
    for (field, value, named) in [
        (
            "thinking",
            json!({"type": "enabled", "budget_tokens": 2048}),
            "thinking.budget_tokens",
        ),
        (
            "thinking",
            json!({"type": "enabled", "budget_tokens": 9000}),
            "thinking.budget_tokens",
        ),
        (
            "thinking",
            json!({"type": "enabled"}),
            "thinking.budget_tokens",
        ),
        ("thinking", json!({"type": "sometimes"}), "thinking.type"),
        ("thinking", json!("on"), "thinking"),
        (
            "output_config",
            json!({"effort": "huge"}),
            "output_config.effort",
        ),
        (
            "output_config",
            json!({"format": {"type": "json_schema"}}),
            "output_config.format.schema",
        ),
        ("output_config", json!([]), "output_config"),
    ] {
        let mut b = hello(2048);
        b[field] = value;
        let a = Answer::from(post(&env, "/messages", None, &b).await).await;
        a.expect(400);
        assert_eq!(a.json["type"], "error", "{}", a.text);
        assert_eq!(a.json["error"]["type"], "invalid_request_error");
        let msg = a.json["error"]["message"].as_str().unwrap();
        assert!(msg.starts_with(named), "{named}: {msg}");
    }
    assert!(env.sim_requests().await.is_empty());
    nothing_charged(&env, before).await;
    // A budget below max_tokens: answered with its thinking, billed.
    let mut b = hello(2048);
    b["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    let a = Answer::from(post(&env, "/messages", None, &b).await).await;
    a.expect(200);
    assert_eq!(a.json["content"][0]["type"], "thinking");
    assert!(a.json["content"][0]["signature"].as_str().is_some());
    billed_as(&env, 0, &a.json["usage"]).await;
    // The hold is the bound's: a balance below 2048 output tokens' cost refuses it.
    let poor = native_env().await;
    poor.grant("0.02");
    let a = Answer::from(post(&poor, "/messages", None, &b).await).await;
    a.expect(402);
    assert!(poor.sim_requests().await.is_empty());
}

/// count_tokens to an `anthropic` model is the provider's own count, asked
/// with the caller's headers and the provider's model id; to another kind,
/// the estimate, marked. Nothing is charged for either.
#[tokio::test]
async fn count_tokens_is_the_providers_own_count_and_free() {
    let env = native_env().await;
    env.grant("1");
    let before = env.balance();
    let body = json!({"model": MODEL, "system": "Be brief.",
        "messages": [{"role": "system", "content": "Answer in English."},
            {"role": "user", "content": "Hello there"}],
        "thinking": {"type": "adaptive"}, "byok_api_key": null});
    let r = post(&env, "/messages/count_tokens", Some(BETA), &body).await;
    assert_eq!(r.status(), 200);
    let request_id = r.headers()["x-request-id"].clone();
    assert_eq!(r.headers()["request-id"], request_id);
    let a = Answer::from(r).await;
    // Asked of the provider: its path, headers and body (gateway fields gone).
    let reqs = env.sim_requests().await;
    assert_eq!(reqs.len(), 1);
    let asked = &reqs[0];
    assert_eq!(asked["path"], "/v1/messages/count_tokens");
    assert_eq!(asked["headers"]["anthropic-beta"], BETA);
    assert_eq!(asked["headers"]["x-api-key"], PROVIDER_KEY);
    let mut sent = body.clone();
    sent["model"] = json!("claude-sim");
    sent.as_object_mut().unwrap().remove("byok_api_key");
    assert_eq!(asked["json"], sent);
    // Answered as the provider answers it (asked directly).
    let direct: Value = env
        .client
        .post(format!("{}/v1/messages/count_tokens", env.sim.url()))
        .header("x-api-key", PROVIDER_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&sent)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(a.json, direct);
    assert_eq!(a.json, json!({"input_tokens": 7}));
    // The message of the same request counts as many input tokens.
    let mut m = body.clone();
    m["max_tokens"] = json!(10);
    let msg = Answer::from(post(&env, "/messages", None, &m).await).await;
    msg.expect(200);
    assert_eq!(msg.json["usage"]["input_tokens"], 7);
    billed_as(&env, 0, &msg.json["usage"]).await;
    let charged = charged(&env, &env.wait_model_usage(1).await[0].request_id);
    // Another kind: the estimate, marked; nothing asked of a provider.
    env.clear_sim_log().await;
    let other = json!({"model": "sim/sim-gpt", "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hello there"}]});
    let a = Answer::from(post(&env, "/messages/count_tokens", None, &other).await).await;
    a.expect(200);
    assert_eq!(a.json["estimate"], true);
    assert!(a.json["input_tokens"].as_u64().unwrap() >= 4);
    assert!(env.sim_requests().await.is_empty());
    // Counting charged nothing: one charge, the message's.
    env.wait_no_holds().await;
    let usage = env.usage();
    let billed: Vec<Decimal> = usage
        .iter()
        .map(|u| u.charged)
        .filter(|c| *c > Decimal::ZERO)
        .collect();
    assert_eq!(billed, vec![charged]);
    assert_eq!(env.balance(), before - charged);
    // An unknown model is refused before anything is asked.
    let mut unknown = body;
    unknown["model"] = json!("claude/nope");
    let a = Answer::from(post(&env, "/messages/count_tokens", None, &unknown).await).await;
    assert!(a.status >= 400, "{}", a.text);
    assert!(env.sim_requests().await.is_empty());
}

/// The official Python SDK (tests/anthropic_sdk/native.py) over an
/// `anthropic` model: prompt caching billed as a write then a read,
/// structured output, a stop sequence, adaptive thinking streamed, system
/// messages, a beta header, the request id, count_tokens.
#[tokio::test]
async fn the_official_sdk_uses_todays_messages_api_through_the_gateway() {
    let env = native_env().await;
    env.grant("1");
    let vars = vec![
        ("GATEWAY_BASE_URL", env.url("/api")),
        ("GATEWAY_KEY", env.key.clone()),
        ("GATEWAY_MODEL", MODEL.to_owned()),
    ];
    let stdout = crate::harness::run_script("python3", "tests/anthropic_sdk/native.py", vars).await;
    for check in [
        "cache",
        "output_config",
        "stop_sequence",
        "thinking",
        "system_role",
        "count_tokens",
    ] {
        assert!(
            stdout.contains(&format!("ok {check}\n")),
            "{check}: {stdout}"
        );
    }
    // Each message's usage is its record's, charged at the four prices.
    let usages: Vec<(String, Value)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("usage "))
        .map(|l| {
            let (name, json) = l.split_once(' ').unwrap();
            (name.to_owned(), serde_json::from_str(json).unwrap())
        })
        .collect();
    assert_eq!(usages.len(), 6, "{stdout}");
    for (row, (_, u)) in usages.iter().enumerate() {
        billed_as(&env, row, u).await;
    }
    // The cache write, then its read, each at its own price.
    let rows = env.wait_model_usage(6).await;
    let [pi, po, pr, pw] = crate::harness::native_prices(MODEL);
    let mtok = Decimal::from(1_000_000);
    let charge = |r: &runtime::store::ModelUsageRow, cached: Decimal| {
        let raw =
            (Decimal::from(r.input_tokens) * pi + Decimal::from(r.output_tokens) * po + cached)
                / mtok;
        runtime::billing::with_markup(raw, Decimal::from(10)).round_dp(8)
    };
    assert_eq!(
        (rows[0].cache_write_tokens, rows[0].cache_read_tokens),
        (200, 0)
    );
    assert_eq!(
        (rows[1].cache_write_tokens, rows[1].cache_read_tokens),
        (0, 200)
    );
    let (write, read) = (
        charged(&env, &rows[0].request_id),
        charged(&env, &rows[1].request_id),
    );
    assert_eq!(write, charge(&rows[0], d("200") * pw));
    assert_eq!(read, charge(&rows[1], d("200") * pr));
    assert!(read < write);
    // The beta header reached the provider; the request id is the gateway's.
    let reqs = env.sim_requests().await;
    let beta: Vec<&Value> = reqs
        .iter()
        .filter(|r| r["headers"].get("anthropic-beta").is_some())
        .collect();
    assert_eq!(beta.len(), 1);
    assert_eq!(
        beta[0]["headers"]["anthropic-beta"],
        "context-management-2025-06-27"
    );
    assert_eq!(beta[0]["json"]["messages"][0]["role"], "system");
    let request_id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("request_id "))
        .unwrap();
    assert_eq!(rows[5].request_id, request_id);
    // count_tokens: the provider's count of what it was asked.
    let count: Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("count "))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap();
    let asked = reqs
        .iter()
        .find(|r| r["path"] == "/v1/messages/count_tokens")
        .unwrap();
    let direct: Value = env
        .client
        .post(format!("{}/v1/messages/count_tokens", env.sim.url()))
        .header("x-api-key", PROVIDER_KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&asked["json"])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(count, direct);
}

/// The official SDK through `/messages` to a model of another API (an
/// `openai` provider): `output_config`'s JSON schema translated and
/// honoured, system-role messages and a stop sequence translated, a field
/// with no equivalent refused by name; each message's usage its record's,
/// charged at the model's prices to the 8th decimal; nothing for the
/// refusal.
#[tokio::test]
async fn the_official_sdk_reaches_a_model_of_another_api_translated() {
    let env = native_env().await;
    env.grant("1");
    let vars = vec![
        ("GATEWAY_BASE_URL", env.url("/api")),
        ("GATEWAY_KEY", env.key.clone()),
        ("GATEWAY_MODEL", "sim/sim-gpt".to_owned()),
    ];
    let stdout =
        crate::harness::run_script("python3", "tests/anthropic_sdk/translated.py", vars).await;
    for check in ["output_config", "system_role", "refused"] {
        assert!(
            stdout.contains(&format!("ok {check}\n")),
            "{check}: {stdout}"
        );
    }
    // What the provider was sent: OpenAI's fields.
    let sent: Vec<Value> = env
        .sim_requests()
        .await
        .into_iter()
        .map(|r| r["json"].clone())
        .collect();
    assert_eq!(sent.len(), 2, "the refused request reached no provider");
    assert_eq!(
        sent[0]["response_format"]["type"], "json_schema",
        "{}",
        sent[0]
    );
    assert_eq!(sent[1]["messages"][0]["role"], "system", "{}", sent[1]);
    assert_eq!(sent[1]["stop"], json!(["zebra"]), "{}", sent[1]);
    let usages: Vec<Value> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("usage "))
        .map(|l| serde_json::from_str(l.split_once(' ').unwrap().1).unwrap())
        .collect();
    assert_eq!(usages.len(), 2, "{stdout}");
    // sim/sim-gpt: 2.00 and 8.00 per million tokens in and out, the
    // default 20 % markup (the test providers file).
    let rows = env.wait_model_usage(2).await;
    for (row, u) in rows.iter().zip(&usages) {
        assert_eq!(
            (row.model.as_str(), row.input_tokens, row.output_tokens),
            (
                "sim/sim-gpt",
                u["input_tokens"].as_i64().unwrap(),
                u["output_tokens"].as_i64().unwrap()
            ),
            "{u}"
        );
        let raw = (Decimal::from(row.input_tokens) * d("2.00")
            + Decimal::from(row.output_tokens) * d("8.00"))
            / Decimal::from(1_000_000);
        let expected = runtime::billing::with_markup(raw, Decimal::from(20)).round_dp(8);
        assert_eq!(charged(&env, &row.request_id), expected, "{u}");
    }
    env.wait_no_holds().await;
    assert_eq!(env.usage().len(), 2, "nothing recorded for the refusal");
}
