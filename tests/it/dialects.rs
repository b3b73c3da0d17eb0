//! Across dialects, every field is translated or refused, never dropped
//! (`docs/dialects.md`): `/messages` to an `openai` and a `gemini`
//! provider, `/chat/completions` to an `anthropic` and a `gemini`
//! provider. Each answer is checked with what the provider was sent and
//! what was billed (the usage record's counts and its charge to the 8th
//! decimal); each refusal is a 400 in the route's format naming the field,
//! with no upstream call, no usage record and the balance unchanged.

use std::time::{Duration, Instant};

use runtime::store::ModelUsageRow;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::adapter_anthropic::{chunks, read_stream};
use crate::harness::{assert_charge_is_four_counts, envelope, native_env, Answer, Env};
use crate::messages::post;

const OPENAI: &str = "sim/sim-gpt";
const GEMINI: &str = "gem/gemini-sim";
const CLAUDE: &str = "claude/claude-sim";

/// Asserts the usage record of row `row` charged its counts at its
/// model's prices (`sim/sim-gpt`: 2.00 and 8.00 a million, the default
/// markup of 20 %;
/// the native models: [`assert_charge_is_four_counts`]); returns the row.
async fn billed(env: &Env, row: usize) -> ModelUsageRow {
    let m = env.wait_model_usage(row + 1).await[row].clone();
    if m.model != OPENAI {
        return assert_charge_is_four_counts(env, row).await;
    }
    let raw = (Decimal::from(m.input_tokens) * Decimal::from(2)
        + Decimal::from(m.output_tokens) * Decimal::from(8))
        / Decimal::from(1_000_000);
    let start = Instant::now();
    let usage = loop {
        if let Some(u) = env
            .usage()
            .into_iter()
            .find(|u| u.request_id == m.request_id)
        {
            break u;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no usage record of {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let expected = runtime::billing::with_markup(raw, Decimal::from(20));
    assert_eq!(usage.charged, expected.round_dp(8), "{m:?} {usage:?}");
    m
}

/// Asserts the Messages answer's usage is the record's and its charge exact.
async fn message_billed(env: &Env, a: &Answer, row: usize) {
    let m = billed(env, row).await;
    let u = &a.json["usage"];
    assert_eq!(
        (
            u["input_tokens"].as_i64().unwrap() + u["cache_read_input_tokens"].as_i64().unwrap(),
            u["output_tokens"].as_i64()
        ),
        (m.input_tokens + m.cache_read_tokens, Some(m.output_tokens)),
        "{}",
        a.text
    );
}

/// Asserts a refusal charged and called nothing; `rows`: the usage rows before.
async fn nothing_done(env: &Env, balance: Decimal, rows: usize) {
    env.wait_no_holds().await;
    assert_eq!(env.balance(), balance);
    assert_eq!(env.usage().len(), rows, "{:?}", env.usage());
    env.assert_no_upstream_call().await;
}

fn schema() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
}

fn message(model: &str) -> Value {
    json!({"model": model, "max_tokens": 20,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Hello there", "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "greet", "signature": "sig"},
                {"type": "text", "text": "Hi."}]},
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "Say more"}],
        "output_config": {"format": {"type": "json_schema", "schema": schema()}},
        "stop_sequences": ["END"], "thinking": {"type": "enabled", "budget_tokens": 2000},
        "metadata": {"user_id": "u-1"}, "cache_control": {"type": "ephemeral"}})
}

#[tokio::test]
async fn messages_fields_cross_to_openai_and_gemini_providers() {
    let env = native_env().await;
    env.grant("1");
    for (row, model) in [OPENAI, GEMINI].into_iter().enumerate() {
        env.clear_sim_log().await;
        let a = post(&env, "/messages", &env.key, &message(model)).await;
        a.expect(200);
        assert_eq!(a.json["content"][0]["type"], "text", "{}", a.text);
        // Neither OpenAI's `stop` nor Gemini's `STOP` tells a stop sequence
        // from a natural end (both simulations answer the schema's
        // instance whole).
        assert_eq!(
            (a.json["stop_reason"].as_str(), &a.json["stop_sequence"]),
            (Some("end_turn"), &Value::Null)
        );
        message_billed(&env, &a, row).await;
        let sent = env.sim_requests().await[0]["json"].clone();
        assert!(!sent.to_string().contains("cache_control"), "{sent}");
        assert!(!sent.to_string().contains("greet"), "{sent}");
        if model == OPENAI {
            assert_eq!(
                sent["messages"],
                json!([{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hello there"},
                    {"role": "assistant", "content": "Hi."},
                    {"role": "system", "content": "Answer in French."},
                    {"role": "user", "content": "Say more"}])
            );
            assert_eq!(
                sent["response_format"],
                json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema(), "strict": true}})
            );
            assert_eq!(sent["stop"], json!(["END"]));
            assert_eq!(sent["reasoning_effort"], "medium");
            assert_eq!(sent["user"], "u-1");
            assert!(sent.get("thinking").is_none() && sent.get("metadata").is_none());
        } else {
            assert_eq!(
                sent["systemInstruction"],
                json!({"parts": [{"text": "Be brief."}, {"text": "Answer in French."}]})
            );
            let gc = &sent["generationConfig"];
            assert_eq!(gc["responseMimeType"], "application/json");
            assert_eq!(gc["responseJsonSchema"], schema());
            assert_eq!(gc["stopSequences"], json!(["END"]));
            assert_eq!(
                gc["thinkingConfig"],
                json!({"thinkingBudget": 8192, "includeThoughts": true})
            );
        }
    }
    // The older `output_format`, a disabled thinking, an effort.
    for (row, model) in [OPENAI, GEMINI].into_iter().enumerate() {
        env.clear_sim_log().await;
        let b = json!({"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}],
            "output_format": {"type": "json_schema", "schema": schema()},
            "thinking": {"type": "disabled"}, "output_config": {"effort": "high"}});
        let a = post(&env, "/messages", &env.key, &b).await;
        a.expect(200);
        message_billed(&env, &a, 2 + row).await;
        let sent = env.sim_requests().await[0]["json"].clone();
        if model == OPENAI {
            assert_eq!(sent["response_format"]["json_schema"]["schema"], schema());
            assert_eq!(sent["reasoning_effort"], "none");
        } else {
            assert_eq!(sent["generationConfig"]["responseJsonSchema"], schema());
            assert_eq!(
                sent["generationConfig"]["thinkingConfig"]["thinkingBudget"],
                0
            );
        }
    }
}

#[tokio::test]
async fn messages_fields_without_equivalent_are_refused_by_name_and_charge_nothing() {
    let env = native_env().await;
    env.grant("1");
    let balance = env.balance();
    for model in [OPENAI, GEMINI] {
        for (field, value, named) in [
            (
                "context_management",
                json!({"edits": [{"type": "clear_tool_uses_20250919"}]}),
                "context_management",
            ),
            ("top_k", json!(5), "top_k"),
            ("frobnicate", json!(true), "frobnicate"),
            ("metadata", json!({"tag": "x"}), "metadata.tag"),
            (
                "thinking",
                json!({"type": "enabled", "budget_tokens": 10}),
                "thinking.budget_tokens",
            ),
            (
                "output_config",
                json!({"format": {"type": "text"}}),
                "output_config.format.type",
            ),
            ("service_tier", json!("standard_only"), "service_tier"),
        ] {
            env.clear_sim_log().await;
            let mut b = json!({"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]});
            b[field] = value;
            let a = post(&env, "/messages", &env.key, &b).await;
            a.expect(400);
            assert_eq!(
                (a.json["type"].as_str(), a.json["error"]["type"].as_str()),
                (Some("error"), Some("invalid_request_error")),
                "{}",
                a.text
            );
            let msg = a.json["error"]["message"].as_str().unwrap();
            assert!(msg.starts_with(&format!("{named}: ")), "{model} {msg}");
            nothing_done(&env, balance, 0).await;
        }
    }
}

/// The Anthropic events of a stream: (name, data).
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

#[tokio::test]
async fn messages_tools_cross_both_ways_whole_and_streamed() {
    let env = native_env().await;
    env.grant("1");
    let mut row = 0;
    for model in [OPENAI, GEMINI] {
        env.clear_sim_log().await;
        let b = json!({"model": model, "max_tokens": 50,
            "messages": [{"role": "user", "content": "What does get_weather say?"}],
            "tools": [{"name": "get_weather", "description": "The weather", "input_schema": schema()}],
            "tool_choice": {"type": "any"}});
        let a = post(&env, "/messages", &env.key, &b).await;
        a.expect(200);
        let call = a.json["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "tool_use")
            .unwrap()
            .clone();
        assert_eq!(call["name"], "get_weather");
        assert!(call["input"]["city"].is_string(), "{call}");
        assert_eq!(a.json["stop_reason"], "tool_use");
        message_billed(&env, &a, row).await;
        row += 1;
        let sent = env.sim_requests().await[0]["json"].clone();
        if model == OPENAI {
            assert_eq!(
                sent["tools"][0],
                json!({"type": "function", "function": {"name": "get_weather",
                "description": "The weather", "parameters": schema()}})
            );
            assert_eq!(sent["tool_choice"], "required");
        } else {
            assert_eq!(
                sent["tools"][0]["functionDeclarations"][0]["name"],
                "get_weather"
            );
            assert_eq!(
                sent["toolConfig"],
                json!({"functionCallingConfig": {"mode": "ANY"}})
            );
        }
        // The result goes back: tool_use and tool_result blocks.
        env.clear_sim_log().await;
        let mut follow = b.clone();
        follow.as_object_mut().unwrap().remove("tool_choice");
        follow["messages"] = json!([
            {"role": "user", "content": "What does get_weather say?"},
            {"role": "assistant", "content": [call.clone()]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "sunny"}]}]);
        let a = post(&env, "/messages", &env.key, &follow).await;
        a.expect(200);
        let text = a.json["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("sunny"), "{text}");
        // The OpenAI simulation's reply ends at `max_tokens`.
        let stop = if model == OPENAI {
            "max_tokens"
        } else {
            "end_turn"
        };
        assert_eq!(a.json["stop_reason"], stop);
        message_billed(&env, &a, row).await;
        row += 1;
        let sent = env.sim_requests().await[0]["json"].clone();
        if model == OPENAI {
            assert_eq!(sent["messages"][1]["tool_calls"][0]["id"], call["id"]);
            assert_eq!(
                sent["messages"][2],
                json!({"role": "tool", "tool_call_id": call["id"], "content": "sunny"})
            );
        } else {
            assert_eq!(
                sent["contents"][1]["parts"][0]["functionCall"]["name"],
                "get_weather"
            );
            assert_eq!(
                sent["contents"][2]["parts"][0]["functionResponse"],
                json!({"name": "get_weather", "response": {"content": "sunny"}})
            );
        }
        // Streamed: a tool_use block, its input in pieces, the stop reason.
        let mut s = b.clone();
        s["stream"] = json!(true);
        let r = env
            .client
            .post(env.url("/api/v1/messages"))
            .header("x-api-key", &env.key)
            .json(&s)
            .send()
            .await
            .unwrap();
        let ev = events(&String::from_utf8(r.bytes().await.unwrap().to_vec()).unwrap());
        let start = ev
            .iter()
            .find(|(n, d)| n == "content_block_start" && d["content_block"]["type"] == "tool_use")
            .unwrap();
        assert_eq!(start.1["content_block"]["name"], "get_weather");
        let input: String = ev
            .iter()
            .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
            .collect();
        assert!(
            serde_json::from_str::<Value>(&input).unwrap()["city"].is_string(),
            "{input}"
        );
        let delta = &ev.iter().find(|(n, _)| n == "message_delta").unwrap().1;
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
        let m = billed(&env, row).await;
        row += 1;
        assert_eq!(
            delta["usage"]["output_tokens"].as_i64(),
            Some(m.output_tokens)
        );
    }
}

#[tokio::test]
async fn chat_fields_cross_to_anthropic_and_gemini_providers() {
    let env = native_env().await;
    env.grant("1");
    for (row, model) in [CLAUDE, GEMINI].into_iter().enumerate() {
        env.clear_sim_log().await;
        let b = json!({"model": model, "max_tokens": 2000,
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": schema()}},
            "reasoning_effort": "high", "stop": "END", "user": "u-2", "store": true,
            "prompt_cache_key": "k", "n": 1, "logprobs": false,
            "tools": [{"type": "function", "function": {"name": "lookup", "parameters": schema()}}],
            "tool_choice": "auto", "parallel_tool_calls": model == GEMINI});
        let a = env.api("/chat/completions", b).await;
        a.expect(200);
        let m = assert_charge_is_four_counts(&env, row).await;
        assert_eq!(
            a.json["usage"]["completion_tokens"].as_i64(),
            Some(m.output_tokens)
        );
        let sent = env.sim_requests().await[0]["json"].clone();
        for hint in ["store", "prompt_cache_key", "logprobs", "\"n\""] {
            assert!(!sent.to_string().contains(hint), "{hint} in {sent}");
        }
        if model == CLAUDE {
            assert_eq!(
                sent["output_config"],
                json!({"format": {"type": "json_schema", "schema": schema()}})
            );
            assert_eq!(
                sent["thinking"],
                json!({"type": "enabled", "budget_tokens": 1999})
            );
            assert_eq!(sent["stop_sequences"], json!(["END"]));
            assert_eq!(sent["metadata"], json!({"user_id": "u-2"}));
            assert_eq!(
                sent["tool_choice"],
                json!({"type": "auto", "disable_parallel_tool_use": true})
            );
        } else {
            let gc = &sent["generationConfig"];
            assert_eq!(gc["responseJsonSchema"], schema());
            assert_eq!(
                gc["thinkingConfig"],
                json!({"thinkingBudget": 24576, "includeThoughts": true})
            );
            assert_eq!(gc["stopSequences"], json!(["END"]));
            assert!(!sent.to_string().contains("u-2"), "{sent}");
        }
    }
    // Gemini's own equivalents: seed and the penalties; a streamed usage chunk.
    env.clear_sim_log().await;
    let b = json!({"model": GEMINI, "messages": [{"role": "user", "content": "Hi"}], "seed": 7,
        "presence_penalty": 0.5, "frequency_penalty": 0.25, "stream": true,
        "stream_options": {"include_usage": true}});
    let (cs, done) = chunks(&read_stream(&env, b).await);
    assert!(done);
    let usage = &cs.last().unwrap()["usage"];
    let m = assert_charge_is_four_counts(&env, 2).await;
    assert_eq!(usage["completion_tokens"].as_i64(), Some(m.output_tokens));
    let gc = &env.sim_requests().await[0]["json"]["generationConfig"];
    assert_eq!(
        (
            gc["seed"].as_i64(),
            gc["presencePenalty"].as_f64(),
            gc["frequencyPenalty"].as_f64()
        ),
        (Some(7), Some(0.5), Some(0.25))
    );
}

#[tokio::test]
async fn chat_fields_without_equivalent_are_refused_by_name_and_charge_nothing() {
    let env = native_env().await;
    env.grant("1");
    let balance = env.balance();
    let tools =
        json!([{"type": "function", "function": {"name": "lookup", "parameters": schema()}}]);
    let cases = [
        (CLAUDE, "n", json!(2), "n"),
        (CLAUDE, "logprobs", json!(true), "logprobs"),
        (CLAUDE, "seed", json!(1), "seed"),
        (CLAUDE, "presence_penalty", json!(0.5), "presence_penalty"),
        (
            CLAUDE,
            "response_format",
            json!({"type": "json_object"}),
            "response_format.type",
        ),
        (
            CLAUDE,
            "reasoning_effort",
            json!("turbo"),
            "reasoning_effort",
        ),
        (CLAUDE, "frobnicate", json!(1), "frobnicate"),
        (GEMINI, "n", json!(3), "n"),
        (GEMINI, "top_logprobs", json!(2), "top_logprobs"),
        (
            GEMINI,
            "parallel_tool_calls",
            json!(false),
            "parallel_tool_calls",
        ),
        (GEMINI, "logit_bias", json!({"50256": -100}), "logit_bias"),
        (
            GEMINI,
            "tools",
            json!([{"type": "custom", "custom": {"name": "x"}}]),
            "tools.0",
        ),
        (
            GEMINI,
            "messages",
            json!([{"role": "user", "name": "ann", "content": "Hi"}]),
            "messages.0.name",
        ),
    ];
    for (model, field, value, named) in cases {
        env.clear_sim_log().await;
        let mut b = json!({"model": model, "messages": [{"role": "user", "content": "Hi"}], "tools": tools});
        b[field] = value;
        let a = env.api("/chat/completions", b).await;
        let msg = envelope(&a, 400);
        assert!(
            msg.starts_with(&format!("{named}: ")) || msg.starts_with(&format!("{named} (")),
            "{model} {msg}"
        );
        nothing_done(&env, balance, 0).await;
    }
}
