//! The `gemini` provider kind over HTTP: OpenAI-shaped chat through the
//! simulator's Gemini API (`:generateContent`, `:streamGenerateContent?alt=sse`,
//! `x-goog-api-key`), answers and streams translated back, function calls,
//! images, finish reasons, provider errors, embeddings, and billing of the
//! four token counts (implicitly cached tokens at the cache-read price).

use runtime::store::History;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::adapter_anthropic::{chunks, content, read_stream};
use crate::harness::{
    assert_charge_is_four_counts, d, envelope, native_env, nothing_charged, PROVIDER_KEY,
};

const MODEL: &str = "gem/gemini-sim";

fn chat(text: &str) -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": text}]})
}

fn weather_tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
}

#[tokio::test]
async fn plain_chat_is_translated_both_ways_and_billed_at_the_four_prices() {
    let env = native_env().await;
    env.grant("1");
    let mut b = chat("Hello there");
    b["messages"] = json!([{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello there"}]);
    b["max_tokens"] = json!(5);
    b["temperature"] = json!(0.5);
    let a = env.api("/chat/completions", b).await;
    a.expect(200);
    let choice = &a.json["choices"][0];
    let text = choice["message"]["content"].as_str().unwrap();
    assert_eq!(text.split(' ').count(), 5, "{text}");
    assert_eq!(choice["finish_reason"], "length");
    let reqs = env.sim_requests().await;
    assert_eq!(reqs[0]["path"], "/v1beta/models/gemini-sim:generateContent");
    assert_eq!(reqs[0]["headers"]["x-goog-api-key"], PROVIDER_KEY);
    assert!(reqs[0]["headers"].get("authorization").is_none());
    let sent = &reqs[0]["json"];
    assert_eq!(
        sent["systemInstruction"],
        json!({"parts": [{"text": "Be brief."}]})
    );
    assert_eq!(
        sent["contents"],
        json!([{"role": "user", "parts": [{"text": "Hello there"}]}])
    );
    assert_eq!(
        sent["generationConfig"],
        json!({"maxOutputTokens": 5, "temperature": 0.5})
    );
    let m = assert_charge_is_four_counts(&env, 0).await;
    assert_eq!(
        a.json["usage"]["prompt_tokens"].as_i64(),
        Some(m.input_tokens)
    );
    assert_eq!((m.output_tokens, m.counted), (5, false));
}

#[tokio::test]
async fn every_finish_reason_maps_to_openais() {
    let env = native_env().await;
    env.grant("1");
    let finish = |a: &crate::harness::Answer| a.json["choices"][0]["finish_reason"].clone();
    assert_eq!(
        finish(
            env.api("/chat/completions", chat("Hello there"))
                .await
                .expect(200)
        ),
        "stop"
    );
    let mut b = chat("Hello there");
    b["max_tokens"] = json!(3);
    assert_eq!(
        finish(env.api("/chat/completions", b).await.expect(200)),
        "length"
    );
    let mut b = chat("Hello there");
    b["stop"] = json!(["reply"]);
    let a = env.api("/chat/completions", b).await;
    assert_eq!(finish(a.expect(200)), "stop");
    assert_eq!(
        env.sim_requests().await[2]["json"]["generationConfig"]["stopSequences"],
        json!(["reply"])
    );
    let mut b = chat("What does get_weather say?");
    b["tools"] = weather_tools();
    assert_eq!(
        finish(env.api("/chat/completions", b).await.expect(200)),
        "tool_calls"
    );
    for i in 0..4 {
        assert_charge_is_four_counts(&env, i).await;
    }
}

#[tokio::test]
async fn tools_round_trip_call_result_answer() {
    let env = native_env().await;
    env.grant("1");
    let mut b = chat("What does get_weather say for Paris?");
    b["tools"] = weather_tools();
    b["tool_choice"] = "required".into();
    let a = env.api("/chat/completions", b.clone()).await;
    a.expect(200);
    let call = a.json["choices"][0]["message"]["tool_calls"][0].clone();
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "sim"}));
    let sent = &env.sim_requests().await[0]["json"];
    assert_eq!(
        sent["tools"][0]["functionDeclarations"][0]["name"],
        "get_weather"
    );
    assert_eq!(
        sent["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
    let id = call["id"].as_str().unwrap().to_owned();
    let mut follow = b.clone();
    follow.as_object_mut().unwrap().remove("tool_choice");
    follow["messages"] = json!([
        {"role": "user", "content": "What does get_weather say for Paris?"},
        {"role": "assistant", "content": null, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": id, "content": "{\"sky\": \"sunny\"}"}]);
    let a = env.api("/chat/completions", follow).await;
    a.expect(200);
    let text = a.json["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(
        text.starts_with("Using the tool result:") && text.contains("sunny"),
        "{text}"
    );
    assert_eq!(a.json["choices"][0]["finish_reason"], "stop");
    let sent = &env.sim_requests().await[1]["json"]["contents"];
    assert_eq!(
        sent[1],
        json!({"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "sim"}}}]})
    );
    assert_eq!(
        sent[2],
        json!({"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"sky": "sunny"}}}]})
    );
    // Streamed: the call arrives as one tool-call delta.
    let mut s = b.clone();
    s["stream"] = json!(true);
    let (cs, done) = chunks(&read_stream(&env, s).await);
    assert!(done);
    let call = cs
        .iter()
        .find_map(|c| c["choices"][0]["delta"]["tool_calls"].get(0))
        .unwrap();
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(
        serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"city": "sim"})
    );
    let last = cs
        .iter()
        .rev()
        .find(|c| !c["choices"][0]["finish_reason"].is_null())
        .unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    for i in 0..3 {
        assert_charge_is_four_counts(&env, i).await;
    }
}

#[tokio::test]
async fn images_in_content_go_as_inline_data_and_file_data() {
    let env = native_env().await;
    env.grant("1");
    let mut b = chat("x");
    b["messages"] = json!([{"role": "user", "content": [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}]}]);
    env.api("/chat/completions", b).await.expect(200);
    let parts = &env.sim_requests().await[0]["json"]["contents"][0]["parts"];
    assert_eq!(
        parts[1],
        json!({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}})
    );
    assert_eq!(
        parts[2],
        json!({"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.jpg"}})
    );
    assert_charge_is_four_counts(&env, 0).await;
}

#[tokio::test]
async fn streamed_chat_becomes_openai_chunks_billed_at_the_reported_usage() {
    let env = native_env().await;
    env.grant("1");
    let mut b = chat("Hello there");
    b["stream"] = json!(true);
    b["stream_options"] = json!({"include_usage": true});
    let text = read_stream(&env, b).await;
    assert_eq!(
        env.sim_requests().await[0]["path"],
        "/v1beta/models/gemini-sim:streamGenerateContent"
    );
    let (cs, done) = chunks(&text);
    assert!(done, "{text}");
    assert_eq!(content(&cs).split(' ').count(), 12);
    let usage = cs.last().unwrap();
    let m = assert_charge_is_four_counts(&env, 0).await;
    assert_eq!((m.output_tokens, m.counted), (12, false));
    assert_eq!(usage["usage"]["completion_tokens"], 12);
    assert_eq!(
        usage["usage"]["prompt_tokens"].as_i64(),
        Some(m.input_tokens)
    );
    assert!(usage["usage"]["cost"].is_number());
}

/// Gemini's implicit cache: an answer reporting `cachedContentTokenCount`
/// bills those tokens at the cache-read price, out of the input. (A named
/// `cachedContent`, a cache of the provider's account, is refused:
/// `trust_bounds::f6_*`.)
#[tokio::test]
async fn a_cached_contents_tokens_are_billed_at_the_cache_read_price() {
    let env = native_env().await;
    env.grant("1");
    env.fault(json!({"path": "/v1beta/models/gemini-sim:generateContent", "fault": {"status": 200, "body": {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 1, "cachedContentTokenCount": 30}}}}))
        .await;
    let a = env.api("/chat/completions", chat("Hello there")).await;
    a.expect(200);
    let m = assert_charge_is_four_counts(&env, 0).await;
    assert_eq!(
        (m.input_tokens, m.cache_read_tokens, m.cache_write_tokens),
        (20, 30, 0)
    );
    assert_eq!(a.json["usage"]["prompt_tokens"], 50);
    assert_eq!(
        a.json["usage"]["prompt_tokens_details"]["cached_tokens"],
        30
    );
}

/// (The general gateway's envelope answers a provider's failure and its
/// refusal of the gateway's key as 500, spec §7.)
#[tokio::test]
async fn provider_errors_map_to_the_gateways_statuses_and_charge_nothing() {
    let env = native_env().await;
    env.grant("1");
    for (status, want) in [(429, 429), (400, 400), (403, 500), (503, 500)] {
        env.fault(json!({"path": "/v1beta/*", "fault": {"status": status}}))
            .await;
        let message = envelope(
            &env.api("/chat/completions", chat("Hello there")).await,
            want,
        );
        assert!(!message.contains(PROVIDER_KEY), "{message}");
    }
    nothing_charged(&env, d("1")).await;
    assert!(env.store().model_usage_rows().unwrap().is_empty());
    // An error mid-stream: an error event, [DONE], what was streamed billed.
    env.fault(json!({"path": "/v1beta/*", "fault": {"stream_error": 503, "after": 3}}))
        .await;
    let mut b = chat("Hello there");
    b["stream"] = json!(true);
    let (cs, done) = chunks(&read_stream(&env, b).await);
    assert!(done);
    assert_eq!(
        cs.iter().find(|c| c.get("error").is_some()).unwrap()["error"]["code"],
        503
    );
    let m = assert_charge_is_four_counts(&env, 0).await;
    assert_eq!((m.output_tokens, m.counted), (3, true));
}

#[tokio::test]
async fn a_stopped_stream_and_a_hang_up_bill_what_was_streamed_at_the_four_prices() {
    crate::adapter_anthropic::a_stop_and_a_hang_up_bill_what_was_streamed(
        &native_env().await,
        chat("Hello there"),
    )
    .await;
}

#[tokio::test]
async fn embeddings_go_through_embed_content_and_batch_embed_contents() {
    let env = native_env().await;
    env.grant("1");
    let a = env
        .api(
            "/embeddings",
            json!({"model": "gem/gemini-embed", "input": "hello"}),
        )
        .await;
    a.expect(200);
    assert_eq!(a.json["data"][0]["embedding"].as_array().unwrap().len(), 16);
    let a = env
        .api(
            "/embeddings",
            json!({"model": "gem/gemini-embed", "input": ["hello", "world"], "dimensions": 8}),
        )
        .await;
    a.expect(200);
    assert_eq!(a.json["data"].as_array().unwrap().len(), 2);
    assert_eq!(a.json["data"][1]["embedding"].as_array().unwrap().len(), 8);
    let reqs = env.sim_requests().await;
    assert_eq!(reqs[0]["path"], "/v1beta/models/gemini-embed:embedContent");
    assert_eq!(
        reqs[1]["path"],
        "/v1beta/models/gemini-embed:batchEmbedContents"
    );
    assert_eq!(
        reqs[1]["json"]["requests"][1]["model"],
        "models/gemini-embed"
    );
    let rows = env.wait_model_usage(2).await;
    assert!(rows.iter().all(|r| r.counted && r.input_tokens > 0));
    assert!(env.usage().iter().all(|u| u.charged > Decimal::ZERO));
}
