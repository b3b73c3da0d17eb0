//! The Gemini door (`/api/v1/gemini/v1beta/models/{model}:{method}`) over
//! HTTP: Google's official Python SDK (`google-genai`, tests/genai_sdk/)
//! on a `gemini` provider (the caller's body passed through, the answer as
//! the provider sent it) and on an `openai` one (translated both ways);
//! each checked against its usage records, token counts and charges to the
//! 8th decimal, counting free. Raw HTTP: a model name holding a `/`, the
//! key in `x-goog-api-key`, errors in Google's shape, a field an `openai`
//! provider cannot take refused by name with nothing charged.

use std::collections::HashMap;

use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::{
    assert_charge_is_four_counts, checks, native_env, nothing_charged, run_script, Answer, Env,
    PROVIDER_KEY,
};

/// Runs tests/genai_sdk/check.py on `model` and `embed`: each check's
/// name and the JSON it printed.
async fn sdk(env: &Env, model: &str, embed: &str) -> HashMap<String, Value> {
    let vars = vec![
        ("GATEWAY_BASE_URL", env.url("/api/v1/gemini")),
        ("GATEWAY_KEY", env.key.clone()),
        ("GATEWAY_MODEL", model.to_owned()),
        ("GATEWAY_EMBED_MODEL", embed.to_owned()),
    ];
    let stdout = run_script("python3", "tests/genai_sdk/check.py", vars).await;
    let checks = checks(&stdout);
    for name in ["generate", "stream", "count", "embed", "batch"] {
        assert!(checks.contains_key(name), "{name}: {stdout}");
    }
    checks
}

/// The charge of a usage record at `prices` per million (input, output)
/// with `markup` percent, to the 8th decimal.
fn charge(input: i64, output: i64, prices: (&str, &str), markup: u32) -> Decimal {
    let d = |s: &str| s.parse::<Decimal>().unwrap();
    let raw = (Decimal::from(input) * d(prices.0) + Decimal::from(output) * d(prices.1))
        / Decimal::from(1_000_000);
    runtime::billing::with_markup(raw, Decimal::from(markup)).round_dp(8)
}

/// The usage record (charge) of the model-usage row `m`.
fn charged(env: &Env, m: &runtime::store::ModelUsageRow) -> Decimal {
    env.usage()
        .into_iter()
        .find(|u| u.request_id == m.request_id)
        .expect("a usage record per model call")
        .charged
}

/// The door's usage records that are not model calls (counting) charge
/// nothing: one per count.
fn counts_free(env: &Env, model_calls: &[runtime::store::ModelUsageRow]) {
    let free: Vec<_> = env
        .usage()
        .into_iter()
        .filter(|u| !model_calls.iter().any(|m| m.request_id == u.request_id))
        .collect();
    assert_eq!(free.len(), 1, "{free:?}");
    assert_eq!(free[0].route_id, "gemini");
    assert_eq!(free[0].charged, Decimal::ZERO);
}

#[tokio::test]
async fn the_official_genai_sdk_drives_a_gemini_provider_passed_through() {
    let env = native_env().await;
    env.grant("1");
    let ok = sdk(&env, "gem/gemini-sim", "gem/gemini-embed").await;
    let rows = env.wait_model_usage(4).await;
    assert_eq!(rows.len(), 4, "{rows:?}");
    // generate and stream: the provider's own counts, four prices, 10 % markup.
    for (i, name) in ["generate", "stream"].into_iter().enumerate() {
        let m = assert_charge_is_four_counts(&env, i).await;
        assert_eq!(
            (m.model.as_str(), m.route_id.as_str()),
            ("gem/gemini-sim", "gemini")
        );
        assert_eq!(
            m.input_tokens,
            ok[name]["prompt"].as_i64().unwrap(),
            "{name}"
        );
        assert_eq!(m.output_tokens, ok[name]["candidates"].as_i64().unwrap());
        assert!(!m.counted);
    }
    // The caller's body went as sent, to Google's paths, with the provider's key.
    let reqs = env.sim_requests().await;
    let paths: Vec<&str> = reqs.iter().filter_map(|r| r["path"].as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1beta/models/gemini-sim:generateContent",
            "/v1beta/models/gemini-sim:streamGenerateContent",
            "/v1beta/models/gemini-sim:countTokens",
            "/v1beta/models/gemini-embed:batchEmbedContents",
            "/v1beta/models/gemini-embed:batchEmbedContents",
        ]
    );
    for r in &reqs {
        assert_eq!(r["headers"]["x-goog-api-key"], PROVIDER_KEY);
        assert!(r["json"].get("model").is_none(), "{r}");
    }
    assert_eq!(
        reqs[0]["json"]["systemInstruction"]["parts"],
        json!([{"text": "Be brief."}])
    );
    assert_eq!(
        reqs[0]["json"]["generationConfig"],
        json!({"maxOutputTokens": 5})
    );
    let batch = reqs[4]["json"]["requests"].as_array().unwrap();
    assert_eq!(batch.len(), 3);
    assert!(
        batch.iter().all(|r| r["model"] == "models/gemini-embed"),
        "{batch:?}"
    );
    // Embeddings: Gemini reports no tokens; the gateway counts them.
    for m in &rows[2..] {
        assert_eq!(m.model, "gem/gemini-embed");
        assert!(
            m.counted && m.input_tokens > 0 && m.output_tokens == 0,
            "{m:?}"
        );
        assert_eq!(
            charged(&env, m),
            charge(m.input_tokens, 0, ("0.15", "0"), 10)
        );
    }
    counts_free(&env, &rows);
}

#[tokio::test]
async fn the_official_genai_sdk_drives_an_openai_provider_translated() {
    let env = native_env().await;
    env.grant("1");
    let ok = sdk(&env, "sim/sim-gpt", "sim/sim-embed").await;
    let rows = env.wait_model_usage(4).await;
    assert_eq!(rows.len(), 4, "{rows:?}");
    for (i, name) in ["generate", "stream"].into_iter().enumerate() {
        let m = &rows[i];
        assert_eq!(
            (m.model.as_str(), m.route_id.as_str()),
            ("sim/sim-gpt", "gemini")
        );
        assert_eq!(
            m.input_tokens,
            ok[name]["prompt"].as_i64().unwrap(),
            "{name}"
        );
        assert_eq!(m.output_tokens, ok[name]["candidates"].as_i64().unwrap());
        assert_eq!(
            charged(&env, m),
            charge(m.input_tokens, m.output_tokens, ("2.00", "8.00"), 20)
        );
    }
    let reqs = env.sim_requests().await;
    let sent = &reqs[0]["json"];
    assert_eq!(reqs[0]["path"], "/v1/chat/completions");
    assert_eq!(
        sent["messages"],
        json!([{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello there"}])
    );
    assert_eq!(
        (&sent["model"], &sent["max_tokens"]),
        (&json!("sim-gpt"), &json!(5))
    );
    assert_eq!(
        reqs[1]["json"]["stream_options"],
        json!({"include_usage": true})
    );
    // Counting asks no provider: the hold's estimate, an upper bound.
    assert_eq!(reqs.len(), 4, "{reqs:?}");
    let estimate = ok["count"]["total"].as_i64().unwrap();
    assert!(estimate >= rows[0].input_tokens - 10, "{estimate}");
    assert_eq!(reqs[3]["json"]["input"], json!(["one", "two", "three"]));
    for m in &rows[2..] {
        assert_eq!(m.model, "sim/sim-embed");
        assert!(m.input_tokens > 0, "{m:?}");
        assert_eq!(
            charged(&env, m),
            charge(m.input_tokens, 0, ("0.10", "0"), 20)
        );
    }
    counts_free(&env, &rows);
}

/// A raw call of the door: `target` after `models/`, the key in
/// `x-goog-api-key`.
async fn door(env: &Env, target: &str, key: &str, body: Value) -> Answer {
    let url = env.url(&format!("/api/v1/gemini/v1beta/models/{target}"));
    let r = env
        .client
        .post(url)
        .header("x-goog-api-key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    Answer::from(r).await
}

fn hello(max: u32) -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": "Hello there"}]}],
        "generationConfig": {"maxOutputTokens": max}})
}

/// Google's error shape with `code` and `status`.
fn google_error(a: &Answer, code: u16, status: &str) {
    a.expect(code);
    assert_eq!(a.json["error"]["code"], code, "{}", a.text);
    assert_eq!(a.json["error"]["status"], status, "{}", a.text);
    assert!(a.json["error"]["message"].is_string());
}

#[tokio::test]
async fn a_model_name_with_a_slash_is_answered_in_geminis_shape() {
    let env = native_env().await;
    env.grant("1");
    let a = door(&env, "sim/sim-gpt:generateContent", &env.key, hello(3)).await;
    a.expect(200);
    let cand = &a.json["candidates"][0];
    assert_eq!(cand["content"]["role"], "model");
    assert_eq!(cand["finishReason"], "MAX_TOKENS");
    let text = cand["content"]["parts"][0]["text"].as_str().unwrap();
    assert_eq!(text.split(' ').count(), 3, "{text}");
    assert_eq!(a.json["modelVersion"], "sim/sim-gpt");
    let u = &a.json["usageMetadata"];
    let m = &env.wait_model_usage(1).await[0];
    assert_eq!(u["promptTokenCount"].as_i64(), Some(m.input_tokens));
    assert_eq!(u["candidatesTokenCount"], 3);
    assert_eq!(
        charged(&env, m),
        charge(m.input_tokens, 3, ("2.00", "8.00"), 20)
    );
    // `Authorization: Bearer` works as well; a stream is server-sent events.
    let url = env.url("/api/v1/gemini/v1beta/models/gem/gemini-sim:streamGenerateContent?alt=sse");
    let r = env
        .client
        .post(url)
        .bearer_auth(&env.key)
        .json(&hello(2))
        .send()
        .await
        .unwrap();
    let a = Answer::from(r).await;
    a.expect(200);
    assert_eq!(a.headers["content-type"], "text/event-stream");
    let events: Vec<Value> = a
        .text
        .split("\r\n\r\n")
        .filter_map(|e| e.trim().strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{}", a.text);
    assert_eq!(events[1]["usageMetadata"]["candidatesTokenCount"], 2);
    assert_charge_is_four_counts(&env, 1).await;
}

#[tokio::test]
async fn errors_are_googles_and_charge_nothing() {
    let env = native_env().await;
    env.grant("1");
    let balance = env.balance();
    let a = door(&env, "sim/sim-gpt:generateContent", "sk-wrong", hello(3)).await;
    google_error(&a, 401, "UNAUTHENTICATED");
    let a = door(&env, "nope/nothing:generateContent", &env.key, hello(3)).await;
    assert!(matches!(a.status, 400 | 404), "{}", a.text);
    assert!(a.json["error"]["status"].is_string(), "{}", a.text);
    let a = door(&env, "sim/sim-gpt:predict", &env.key, hello(3)).await;
    google_error(&a, 404, "NOT_FOUND");
    // A field an openai provider cannot take: 400 naming it.
    let mut b = hello(3);
    b["safetySettings"] = json!([{"category": "harassment"}]);
    let a = door(&env, "sim/sim-gpt:generateContent", &env.key, b.clone()).await;
    google_error(&a, 400, "INVALID_ARGUMENT");
    assert!(a.json["error"]["message"]
        .as_str()
        .unwrap()
        .contains("safetySettings"));
    let mut b = hello(3);
    b["generationConfig"]["topK"] = json!(4);
    let a = door(&env, "sim/sim-gpt:generateContent", &env.key, b).await;
    google_error(&a, 400, "INVALID_ARGUMENT");
    assert!(a.json["error"]["message"]
        .as_str()
        .unwrap()
        .contains("generationConfig.topK"));
    let a = door(
        &env,
        "sim/sim-gpt:streamGenerateContent",
        &env.key,
        hello(3),
    )
    .await;
    google_error(&a, 400, "INVALID_ARGUMENT");
    assert!(env.sim_requests().await.is_empty());
    nothing_charged(&env, balance).await;
}

/// A key limited to other models is refused on the door as on the chat
/// path, counting included (403 in Google's shape, no provider called,
/// nothing charged).
#[tokio::test]
async fn a_key_limited_to_other_models_may_not_generate_or_count() {
    let env = native_env().await;
    env.grant("1");
    let balance = env.balance();
    let hash = runtime::auth::hash_key(&env.key);
    use runtime::store::Keys;
    assert!(env
        .store()
        .set_key_models(&hash, Some("sim/sim-gpt"))
        .unwrap());
    for method in ["generateContent", "countTokens"] {
        let a = door(
            &env,
            &format!("gem/gemini-sim:{method}"),
            &env.key,
            hello(3),
        )
        .await;
        google_error(&a, 403, "PERMISSION_DENIED");
    }
    env.assert_no_upstream_call().await;
    nothing_charged(&env, balance).await;
}
