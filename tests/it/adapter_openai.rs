//! The `openai` provider kind passes OpenAI's own fields through unchanged:
//! tools, `response_format`, `seed`, `logprobs`, `stream_options` reach the
//! provider as the caller sent them; and OpenAI's cached prompt tokens
//! (`prompt_tokens_details.cached_tokens`) are billed at the cache-read
//! price, not again as input.

use serde_json::json;

use crate::harness::{llm_env, Env};

#[tokio::test]
async fn openais_own_fields_reach_an_openai_provider_unchanged() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let format =
        json!({"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object"}}});
    let body = json!({"model": "sim/sim-gpt", "max_tokens": 5,
        "messages": [{"role": "user", "content": "Hello there"}],
        "tools": tools, "tool_choice": "auto", "parallel_tool_calls": false,
        "response_format": format, "seed": 7, "logprobs": true, "top_logprobs": 2,
        "stream": true, "stream_options": {"include_usage": true}});
    let r = env.stream_chat(&env.key, body.clone()).await;
    assert_eq!(r.status().as_u16(), 200);
    let _ = r.bytes().await.unwrap();
    let sent = &env.sim_requests().await[0];
    assert_eq!(sent["path"], "/v1/chat/completions");
    let sent = &sent["json"];
    for k in [
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
        "seed",
        "logprobs",
        "top_logprobs",
        "stream",
        "stream_options",
        "messages",
        "max_tokens",
    ] {
        assert_eq!(sent[k], body[k], "{k}");
    }
    assert_eq!(sent["model"], "sim-gpt");
}

/// An OpenAI answer reporting cached tokens, as the provider would.
async fn cached_answer(env: &Env) {
    env.fault(json!({"path": "/v1/chat/completions", "fault": {"status": 200, "body": {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "sim-gpt",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 2, "total_tokens": 102,
            "prompt_tokens_details": {"cached_tokens": 60}}}}}))
        .await;
}

#[tokio::test]
async fn openais_cached_tokens_are_taken_out_of_the_input() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    cached_answer(&env).await;
    let long = "word ".repeat(200);
    env.api(
        "/chat/completions",
        json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": long}]}),
    )
    .await
    .expect(200);
    let rows = env.wait_model_usage(1).await;
    assert_eq!(
        (
            rows[0].input_tokens,
            rows[0].cache_read_tokens,
            rows[0].output_tokens
        ),
        (40, 60, 2)
    );
    // sim-gpt has no cache price: cache reads at the input price (2.00),
    // output 8.00, markup as configured.
    let u = &env.usage()[0];
    assert_eq!(u.quantity, rust_decimal::Decimal::from(102));
}
