//! What clients nobody on the team wrote read of our answers (#39): the
//! same headers on every model door (`X-Request-Id`, `X-Gateway-Model`,
//! `X-Gateway-Attempts`, and `X-Gateway-Cost` on a JSON answer),
//! `usage.cost` a JSON number of 8 decimals, an embeddings answer's
//! `usage` complete whatever the provider reported; and real clients
//! driving the gateway: litellm's (tests/litellm_client/check.py) and
//! the AI SDK's `embed`/`embedMany` (tests/ai_sdk/check.mjs), both pinned
//! and installed by scripts/setup-tools.sh.

use runtime::store::History;
use serde_json::{json, Value};

use crate::harness::*;

/// The charge of the usage record of request `id`, as answers show it.
fn charged_of(env: &Env, id: &str) -> String {
    let u: Vec<_> = env
        .usage()
        .into_iter()
        .filter(|u| u.request_id == id)
        .collect();
    assert_eq!(u.len(), 1, "one usage record of {id}");
    format!("{:.8}", u[0].charged)
}

/// The model-usage row of request `id`, once committed.
async fn model_row(env: &Env, id: &str) -> runtime::store::ModelUsageRow {
    let start = std::time::Instant::now();
    loop {
        let rows = env.store().model_usage_rows().unwrap();
        if let Some(r) = rows.into_iter().find(|r| r.request_id == id) {
            return r;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "no model usage row of {id}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// `POST /api/v1{path}` with the env's key as a bearer token, and
/// `x-api-key` too for `/messages`.
async fn send(env: &Env, path: &str, body: &Value) -> reqwest::Response {
    env.client
        .post(env.url(&format!("/api/v1{path}")))
        .bearer_auth(&env.key)
        .header("x-api-key", &env.key)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// Asserts the headers every model door's answer carries: its request
/// id, the deployment that served and the attempts made; the request id.
#[track_caller]
fn served_headers(h: &reqwest::header::HeaderMap, what: &str, deployment: &str) -> String {
    let get = |k: &str| h.get(k).and_then(|v| v.to_str().ok());
    assert_eq!(get("x-gateway-model"), Some(deployment), "{what}: {h:?}");
    assert_eq!(get("x-gateway-attempts"), Some("1"), "{what}: {h:?}");
    get("x-request-id")
        .unwrap_or_else(|| panic!("{what}: no x-request-id: {h:?}"))
        .to_owned()
}

/// A JSON answer of every model door (chat, completions, embeddings of an
/// `openai` and a `gemini` provider, images, messages) carries the served
/// headers and the cost header, the charge its usage record committed;
/// an OpenAI-shaped one has that charge as `usage.cost`, a JSON number of
/// 8 decimals. A streamed answer (chat, completions, messages) carries the
/// served headers (its cost comes in its last event).
#[tokio::test]
async fn every_model_door_says_who_served_how_often_and_what_it_cost() {
    let env = native_env().await;
    env.grant("1");
    let chat = json!({"model": "sim/sim-gpt", "max_tokens": 4,
        "messages": [{"role": "user", "content": "Hello there"}]});
    let doors = [
        (
            "chat",
            "/chat/completions",
            chat.clone(),
            "sim/sim-gpt",
            true,
        ),
        (
            "completions",
            "/completions",
            json!({"model": "sim/sim-instruct", "prompt": "Once upon", "max_tokens": 4}),
            "sim/sim-instruct",
            true,
        ),
        (
            "embeddings",
            "/embeddings",
            json!({"model": "sim/sim-embed", "input": "hello world"}),
            "sim/sim-embed",
            true,
        ),
        (
            "gemini embeddings",
            "/embeddings",
            json!({"model": "gem/gemini-embed", "input": ["hello", "world"]}),
            "gem/gemini-embed",
            true,
        ),
        (
            "images",
            "/images/generations",
            json!({"model": "sim/sim-image", "prompt": "a cat"}),
            "sim/sim-image",
            true,
        ),
        ("messages", "/messages", chat.clone(), "sim/sim-gpt", false),
    ];
    for (what, path, body, deployment, openai) in doors {
        let a = Answer::from(send(&env, path, &body).await).await;
        a.expect(200);
        let id = served_headers(&a.headers, what, deployment);
        let charged = charged_of(&env, &id);
        assert_ne!(charged, "0.00000000", "{what}");
        assert_eq!(a.header("x-gateway-cost"), Some(&*charged), "{what}");
        if openai {
            assert!(a.json["usage"]["cost"].is_number(), "{what}: {}", a.text);
            assert!(
                a.text.contains(&format!("\"cost\":{charged}")),
                "{what}: usage.cost is {charged} as written: {}",
                a.text
            );
        }
    }
    let streamed = [
        (
            "chat stream",
            "/chat/completions",
            chat.clone(),
            "sim/sim-gpt",
        ),
        (
            "completions stream",
            "/completions",
            json!({"model": "sim/sim-instruct", "prompt": "Once upon", "max_tokens": 4}),
            "sim/sim-instruct",
        ),
        ("messages stream", "/messages", chat, "sim/sim-gpt"),
    ];
    for (what, path, mut body, deployment) in streamed {
        body["stream"] = json!(true);
        let r = send(&env, path, &body).await;
        assert_eq!(r.status(), 200, "{what}");
        let id = served_headers(r.headers(), what, deployment);
        let text = r.text().await.unwrap();
        assert!(!text.is_empty(), "{what}");
        let row = model_row(&env, &id).await;
        assert_eq!(row.model, deployment, "{what}");
        assert_eq!(row.attempts, 1, "{what}");
    }
}

/// An OpenAI-shaped embeddings answer always says `usage.prompt_tokens`
/// and `usage.total_tokens`, the tokens billed: the gateway's count for a
/// `gemini` provider (which reports none), as answered and as replayed
/// from the response cache.
#[tokio::test]
async fn an_embeddings_answer_says_the_tokens_it_was_billed_for() {
    let env = env_with_providers(
        |url| {
            native_toml(url).replacen(
                "id = \"gemini-embed\"\ntype = \"embedding\"\n",
                "id = \"gemini-embed\"\ntype = \"embedding\"\ncache_ttl_secs = 60\n",
                1,
            )
        },
        |_| {},
    )
    .await;
    env.grant("1");
    let body =
        json!({"model": "gem/gemini-embed", "input": ["sunny day at the beach", "snowy night"]});
    for hit in ["miss", "hit"] {
        let a = env.api("/embeddings", body.clone()).await;
        a.expect(200);
        let id = a.header("x-request-id").unwrap().to_owned();
        let row = model_row(&env, &id).await;
        assert!(row.counted && row.input_tokens > 0, "{hit}: {row:?}");
        let usage = &a.json["usage"];
        assert_eq!(
            usage["prompt_tokens"].as_i64(),
            Some(row.input_tokens),
            "{hit}: {}",
            a.text
        );
        assert_eq!(
            usage["total_tokens"].as_i64(),
            Some(row.input_tokens),
            "{hit}: {}",
            a.text
        );
        assert_eq!(usage["cost"].to_string(), charged_of(&env, &id), "{hit}");
        assert_eq!(a.json["data"].as_array().map(Vec::len), Some(2));
    }
    // The second was the cache's: one upstream call.
    assert_eq!(env.sim_requests().await.len(), 1);
    // An `openai` provider's own counts are kept.
    let a = env
        .api(
            "/embeddings",
            json!({"model": "sim/sim-embed", "input": "hello world"}),
        )
        .await;
    a.expect(200);
    let id = a.header("x-request-id").unwrap().to_owned();
    let row = model_row(&env, &id).await;
    assert!(!row.counted, "{row:?}");
    assert_eq!(
        a.json["usage"]["prompt_tokens"].as_i64(),
        Some(row.input_tokens)
    );
    assert_eq!(
        a.json["usage"]["total_tokens"].as_i64(),
        Some(row.input_tokens)
    );
}

/// Runs `program` on `script` with the gateway's base URL, key and
/// `model`; its standard output, which says `ok` at the end.
async fn run_client(program: &'static str, script: &str, env: &Env, model: &str) -> String {
    let vars = vec![
        ("GATEWAY_BASE_URL", env.url("/api/v1")),
        ("GATEWAY_KEY", env.key.clone()),
        ("GATEWAY_MODEL", model.to_owned()),
    ];
    let stdout = run_script(program, script, vars).await;
    assert!(stdout.lines().any(|l| l == "ok"), "{stdout}");
    stdout
}

/// The AI SDK's `embed` and `embedMany` on a `gemini` provider's
/// embedding model through the gateway's OpenAI door: they succeed, and
/// the tokens and cost they report are those the usage records billed.
#[tokio::test]
async fn the_ai_sdk_embeds_through_a_gemini_provider() {
    let dir = workspace_root().join("tests/ai_sdk");
    npm_installed(&dir, "ai");
    let env = native_env().await;
    env.grant("1");
    let out = run_client("node", "tests/ai_sdk/check.mjs", &env, "gem/gemini-embed").await;
    let lines = reports(&out);
    assert_eq!(lines.len(), 2, "{out}");
    for (l, vectors) in lines.iter().zip([1, 3]) {
        assert_eq!(l["vectors"], vectors, "{l}");
        assert_eq!(l["model"], "gem/gemini-embed", "{l}");
        let id = l["request_id"].as_str().unwrap();
        let row = model_row(&env, id).await;
        assert_eq!(l["tokens"].as_i64(), Some(row.input_tokens), "{l}");
        assert!(row.counted && row.input_tokens > 0, "{row:?}");
        assert_eq!(l["cost"].as_str(), Some(&*charged_of(&env, id)), "{l}");
    }
    let paths: Vec<Value> = env
        .sim_requests()
        .await
        .iter()
        .map(|r| r["path"].clone())
        .collect();
    assert_eq!(
        paths,
        [
            "/v1beta/models/gemini-embed:batchEmbedContents",
            "/v1beta/models/gemini-embed:batchEmbedContents"
        ]
    );
}

/// litellm's client with the gateway as an OpenAI-compatible upstream
/// (`openai/sim/sim-gpt`): a chat completion with no warning or log line
/// about `cost` (it reads `usage.cost` as a number, as OpenRouter's), the
/// cost it reports ours to the 8th decimal, the tokens those billed.
#[tokio::test]
async fn litellms_client_reads_our_cost_without_a_warning() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let out = run_client(
        "python3",
        "tests/litellm_client/check.py",
        &env,
        "sim/sim-gpt",
    )
    .await;
    let lines = reports(&out);
    assert_eq!(lines.len(), 1, "{out}");
    let l = &lines[0];
    let id = l["request_id"].as_str().unwrap();
    let charged = charged_of(&env, id);
    for k in ["usage_cost", "response_cost", "completion_cost"] {
        assert_eq!(l[k].as_str(), Some(&*charged), "{k}: {l}");
    }
    let row = model_row(&env, id).await;
    assert_eq!(l["prompt_tokens"].as_i64(), Some(row.input_tokens), "{l}");
    assert_eq!(
        l["completion_tokens"].as_i64(),
        Some(row.output_tokens),
        "{l}"
    );
    assert_eq!(row.output_tokens, 5);
}
