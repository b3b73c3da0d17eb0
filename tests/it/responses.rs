//! The Responses API (`/api/v1/responses`) over HTTP. OpenAI's official
//! Python SDK (tests/openai_sdk/responses.py) on each provider kind: an
//! `openai` provider serving `/responses` itself (the caller's body passed
//! through), an `openai` one without (translated to chat completions), an
//! `anthropic` one and a `gemini` one (translated to their APIs); each
//! answer checked against its usage record (tokens, and a charge equal to
//! the answer's `cost` and to the model's prices, to the 8th decimal), the
//! third turn of a conversation served by a fallback of another kind.
//! Raw HTTP: another user's response is a 404 everywhere, bad input a 400
//! naming its field with nothing charged or stored, `store: false` keeps
//! nothing.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::harness::{
    assert_charge_is_four_counts, checks, env_with_providers, native_toml, nothing_charged,
    run_script, Env, LLM_KEY_VAR,
};

/// [`native_toml`] plus `oai` (an `openai` provider serving the Responses
/// API itself) and `plain` (an `openai` provider without it), each with a
/// 10 % markup.
pub(crate) fn responses_toml(llm_url: &str) -> String {
    format!(
        r#"{}
[[provider]]
id = "oai"
kind = "openai"
base_url = "{llm_url}"
api_key_env = "{LLM_KEY_VAR}"
markup_pct = "10"
responses = true

[[provider.model]]
id = "gpt-native"
type = "chat"
input_per_mtok = "1.25"
output_per_mtok = "10.00"
cache_read_per_mtok = "0.125"

[[provider]]
id = "plain"
kind = "openai"
base_url = "{llm_url}"
api_key_env = "{LLM_KEY_VAR}"
markup_pct = "10"

[[provider.model]]
id = "gpt-plain"
type = "chat"
input_per_mtok = "2.00"
output_per_mtok = "8.00"
"#,
        native_toml(llm_url)
    )
}

async fn responses_env() -> Env {
    let env = env_with_providers(responses_toml, |_| {}).await;
    env.grant("5");
    env
}

/// Runs tests/openai_sdk/responses.py on `model`, its conversation's third
/// turn failing over to `fallback` after `fault`: each check's name and
/// the JSON it printed.
async fn sdk(env: &Env, model: &str, fallback: &str, fault: Value) -> HashMap<String, Value> {
    let vars = vec![
        ("GATEWAY_BASE_URL", env.url("/api/v1")),
        ("GATEWAY_KEY", env.key.clone()),
        ("GATEWAY_MODEL", model.to_owned()),
        ("GATEWAY_FALLBACK", fallback.to_owned()),
        ("GATEWAY_SIM_URL", env.sim.url()),
        ("GATEWAY_FAULT", fault.to_string()),
    ];
    checks(&run_script("python3", "tests/openai_sdk/responses.py", vars).await)
}

/// The script's model calls, in the order it makes them.
const CALLS: [&str; 10] = [
    "create",
    "stream",
    "tool_call",
    "tool_answer",
    "tool_call_stream",
    "tool_answer_stream",
    "json_schema",
    "turn1",
    "turn2",
    "turn3",
];

/// Every model call of the script on `model`: its usage record's tokens
/// are the answer's, its charge the answer's `cost` and the served model's
/// prices; the third turn served by `fallback`; every response but the
/// deleted third turn stored.
async fn every_call_billed_as_answered(env: &Env, model: &str, fallback: &str, fault: Value) {
    let ok = sdk(env, model, fallback, fault).await;
    for name in ["retrieve", "delete"] {
        assert!(ok.contains_key(name), "{name}: {ok:?}");
    }
    let rows = env.wait_model_usage(CALLS.len()).await;
    assert_eq!(rows.len(), CALLS.len(), "{rows:?}");
    for (i, name) in CALLS.into_iter().enumerate() {
        let seen = &ok[name];
        let m = assert_charge_is_four_counts(env, i).await;
        let served = if name == "turn3" { fallback } else { model };
        assert_eq!(
            (m.model.as_str(), m.route_id.as_str()),
            (served, "responses"),
            "{name}"
        );
        assert_eq!(
            m.input_tokens + m.cache_read_tokens + m.cache_write_tokens,
            seen["input"].as_i64().unwrap(),
            "{name}: {seen}"
        );
        assert_eq!(m.output_tokens, seen["output"].as_i64().unwrap(), "{name}");
        let charged = env
            .usage()
            .into_iter()
            .find(|u| u.request_id == m.request_id)
            .unwrap()
            .charged;
        let cost = seen["cost"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no cost: {seen}"));
        assert_eq!(
            format!("{charged:.8}"),
            cost,
            "{name}: the answer's cost is the charge"
        );
    }
    // The conversation grew: each turn's input holds the turns before it.
    let input = |n: &str| ok[n]["input"].as_i64().unwrap();
    assert!(input("turn2") > input("turn1") && input("turn3") > input("turn2"));
    // Stored: each response but the deleted one, under the caller.
    let stored =
        crate::harness::own_query(env, "SELECT id, CAST(user_id AS TEXT) FROM responses").await;
    assert_eq!(stored.len(), CALLS.len() - 1, "{stored:?}");
    let turn3 = ok["turn3"]["id"].as_str().unwrap();
    assert!(stored
        .iter()
        .all(|r| r[0] != turn3 && r[1] == env.user_id.to_string()));
}

#[tokio::test]
async fn the_openai_sdk_on_an_openai_provider_serving_responses_itself() {
    let env = responses_env().await;
    let fault = json!({"path": "/v1/responses", "fault": {"status": 503}, "count": 0});
    every_call_billed_as_answered(&env, "oai/gpt-native", "claude/claude-sim", fault).await;
    // The caller's body went to `/v1/responses` as sent, the third turn's
    // conversation whole to the fallback.
    let reqs = env.sim_requests().await;
    let native: Vec<&Value> = reqs
        .iter()
        .filter(|r| r["path"] == "/v1/responses")
        .collect();
    assert!(native.len() >= 9, "{reqs:#?}");
    assert_eq!(native[0]["json"]["instructions"], "Be brief.");
    assert_eq!(native[0]["json"]["model"], "gpt-native");
    let last = reqs
        .iter()
        .rev()
        .find(|r| r["path"] == "/v1/messages")
        .unwrap();
    let msgs = last["json"]["messages"].as_array().unwrap();
    assert!(
        msgs.len() >= 5,
        "the whole conversation went to the fallback: {msgs:?}"
    );
}

#[tokio::test]
async fn the_openai_sdk_on_an_openai_provider_translated_to_chat() {
    let env = responses_env().await;
    let fault = json!({"path": "/v1/chat/completions", "fault": {"status": 503}, "count": 0});
    every_call_billed_as_answered(&env, "plain/gpt-plain", "gem/gemini-sim", fault).await;
    let reqs = env.sim_requests().await;
    assert!(
        reqs.iter().all(|r| r["path"] != "/v1/responses"),
        "{reqs:#?}"
    );
}

#[tokio::test]
async fn the_openai_sdk_on_an_anthropic_provider() {
    let env = responses_env().await;
    let fault = json!({"path": "/v1/messages", "fault": {"status": 503}, "count": 0});
    every_call_billed_as_answered(&env, "claude/claude-sim", "plain/gpt-plain", fault).await;
}

#[tokio::test]
async fn the_openai_sdk_on_a_gemini_provider() {
    let env = responses_env().await;
    let fault = json!({"path": "/v1beta/*", "fault": {"status": 503}, "count": 0});
    every_call_billed_as_answered(&env, "gem/gemini-sim", "oai/gpt-native", fault).await;
}

#[tokio::test]
async fn another_users_response_is_a_404_everywhere() {
    let env = responses_env().await;
    let mine = env
        .api(
            "/responses",
            json!({"model": "plain/gpt-plain", "input": "Hi"}),
        )
        .await;
    mine.expect(200);
    let id = mine.json["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("resp_"), "{id}");
    let (_, other) = env.new_user("other@example.com");
    env.wait_no_holds().await;
    let balance = env.balance();
    env.clear_sim_log().await;
    let url = |p: &str| env.url(&format!("/api/v1/responses/{id}{p}"));
    for (method, u) in [
        ("GET", url("")),
        ("GET", url("/input_items")),
        ("DELETE", url("")),
        ("POST", url("/cancel")),
    ] {
        let a = env.call_as(&other, method, &u, None).await;
        a.expect(404);
        assert_eq!(
            a.json["error"]["type"], "invalid_request_error",
            "{}",
            a.text
        );
        assert_eq!(a.json["success"], false);
    }
    let body = json!({"model": "plain/gpt-plain", "input": "Go on", "previous_response_id": id});
    let a = env
        .call_as(&other, "POST", &env.url("/api/v1/responses"), Some(body))
        .await;
    a.expect(404);
    assert!(a.text.contains(&id), "{}", a.text);
    // Still the owner's, whole; the other user's calls reached no provider
    // and cost the owner nothing.
    env.call_as(&env.key, "GET", &url(""), None)
        .await
        .expect(200);
    assert_eq!(env.balance(), balance);
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn bad_input_is_refused_by_name_and_nothing_is_charged_or_stored() {
    let env = responses_env().await;
    let balance = env.balance();
    for (body, field) in [
        (
            json!({"model": "plain/gpt-plain", "input": [{"type": "bogus"}]}),
            "input[0]",
        ),
        (
            json!({"model": "plain/gpt-plain", "input": "Hi", "tools": [{"type": "web_search"}]}),
            "tools[0].type",
        ),
        (
            json!({"model": "plain/gpt-plain", "input": "Hi", "frobnicate": 1}),
            "frobnicate",
        ),
    ] {
        let a = env.api("/responses", body).await;
        a.expect(400);
        let message = a.json["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{field}: {}", a.text);
        let param = a.json["error"]["param"].as_str().unwrap_or_default();
        assert!(param.starts_with(field), "{field}: {}", a.text);
    }
    nothing_charged(&env, balance).await;
    assert!(env.sim_requests().await.is_empty());
    // Without `store`, answered and billed but kept nowhere.
    let a = env
        .api(
            "/responses",
            json!({"model": "plain/gpt-plain", "input": "Hi", "store": false}),
        )
        .await;
    a.expect(200);
    let id = a.json["id"].as_str().unwrap();
    env.call_as(
        &env.key,
        "GET",
        &env.url(&format!("/api/v1/responses/{id}")),
        None,
    )
    .await
    .expect(404);
    let stored = crate::harness::own_query(&env, "SELECT id FROM responses").await;
    assert!(stored.is_empty(), "{stored:?}");
    assert_eq!(env.wait_model_usage(1).await.len(), 1);
    assert!(env.balance() < balance);
}

/// The AI SDK's default OpenAI provider (`openai(model)`, which posts to
/// `/responses`) pointed at the gateway: `generateText`, `streamText` and a
/// tool call succeed, on a translated deployment; what they report is
/// what was billed.
#[tokio::test]
async fn the_ai_sdks_default_openai_provider_works_unchanged() {
    crate::harness::npm_installed(
        &crate::harness::workspace_root().join("tests/ai_sdk"),
        "@ai-sdk/openai",
    );
    let env = responses_env().await;
    let vars = vec![
        ("GATEWAY_BASE_URL", env.url("/api/v1")),
        ("GATEWAY_KEY", env.key.clone()),
        ("GATEWAY_MODEL", "claude/claude-sim".to_owned()),
    ];
    let out = run_script("node", "tests/ai_sdk/responses.mjs", vars).await;
    let lines = crate::harness::reports(&out);
    let whats: Vec<&str> = lines.iter().filter_map(|l| l["what"].as_str()).collect();
    assert_eq!(whats, ["generate", "stream", "tool"], "{out}");
    let rows = env.wait_model_usage(3).await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (i, l) in lines.iter().enumerate() {
        let m = assert_charge_is_four_counts(&env, i).await;
        assert_eq!(
            (m.model.as_str(), m.route_id.as_str()),
            ("claude/claude-sim", "responses")
        );
        let input = m.input_tokens + m.cache_read_tokens + m.cache_write_tokens;
        assert_eq!(l["input"].as_i64(), Some(input), "{l}");
        assert_eq!(l["output"].as_i64(), Some(m.output_tokens), "{l}");
        if let Some(cost) = l["cost"].as_str() {
            let charged = env
                .usage()
                .into_iter()
                .find(|u| u.request_id == m.request_id)
                .unwrap()
                .charged;
            assert_eq!(cost, format!("{charged:.8}"), "{l}");
        }
    }
    assert!(
        lines[0]["cost"].is_string(),
        "generateText hands over the answer's body"
    );
}

/// With `GATEWAY_RESPONSES_SCOPE=key`, another key of the same user does
/// not find a response either (the key that made it does).
#[tokio::test]
async fn with_key_scope_another_keys_response_is_a_404() {
    let env = env_with_providers(responses_toml, |c| c.responses_by_key = true).await;
    env.grant("1");
    let a = env
        .api(
            "/responses",
            json!({"model": "plain/gpt-plain", "input": "Hi"}),
        )
        .await;
    a.expect(200);
    let url = env.url(&format!(
        "/api/v1/responses/{}",
        a.json["id"].as_str().unwrap()
    ));
    let other = runtime::auth::create_key(env.store(), env.user_id).unwrap();
    env.call_as(&other, "GET", &url, None).await.expect(404);
    env.call_as(&env.key, "GET", &url, None).await.expect(200);
}
