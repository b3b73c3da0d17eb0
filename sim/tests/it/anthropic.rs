//! Anthropic's Messages API: `/v1/messages` and `/v1/messages/count_tokens`.

use serde_json::{json, Value};
use sim::SimConfig;

use crate::support::client;

const KEY: &str = "sk-ant-test";

async fn start() -> (sim::Sim, reqwest::Client) {
    let sim = crate::support::start(SimConfig {
        api_key: Some(KEY.into()),
        ..Default::default()
    })
    .await;
    sim.shared()
        .stream_delay_ms
        .store(0, std::sync::atomic::Ordering::Relaxed);
    (sim, client())
}

/// POST with Anthropic's headers; (status, JSON).
async fn call(sim: &sim::Sim, c: &reqwest::Client, path: &str, body: Value) -> (u16, Value) {
    let r = c
        .post(format!("{}{path}", sim.url()))
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn messages(sim: &sim::Sim, c: &reqwest::Client, body: Value) -> (u16, Value) {
    call(sim, c, "/v1/messages", body).await
}

/// A streamed answer as (event name, data) pairs, checking each event's
/// `data.type` equals its name.
async fn stream(sim: &sim::Sim, c: &reqwest::Client, mut body: Value) -> Vec<(String, Value)> {
    body["stream"] = json!(true);
    let r = c
        .post(format!("{}/v1/messages", sim.url()))
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let text = r.text().await.unwrap();
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (ev, data) = e.split_once('\n').unwrap();
            let name = ev.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name.as_str(), "{e}");
            (name, data)
        })
        .collect()
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(n, _)| n.as_str()).collect()
}

fn hello() -> Value {
    json!({"model": "claude-sim", "max_tokens": 100,
        "messages": [{"role": "user", "content": "hello there"}]})
}

fn weather_tools() -> Value {
    json!([{"name": "get_weather", "description": "Weather of a city",
        "input_schema": {"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}])
}

#[tokio::test]
async fn key_and_version_headers_are_checked() {
    let (sim, c) = start().await;
    let url = format!("{}/v1/messages", sim.url());
    let send = |headers: Vec<(&'static str, &'static str)>| {
        let mut r = c.post(&url).json(&hello());
        for (k, v) in headers {
            r = r.header(k, v);
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let version = ("anthropic-version", "2023-06-01");
    for headers in [
        vec![version],
        vec![version, ("x-api-key", "wrong")],
        vec![version, ("authorization", "Bearer sk-ant-test")],
    ] {
        let (s, v) = send(headers).await;
        assert_eq!(s, 401);
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "authentication_error");
        assert!(v["error"]["message"].is_string());
    }
    let (s, v) = send(vec![("x-api-key", KEY)]).await;
    assert_eq!(
        (s, v["error"]["type"].clone()),
        (400, json!("invalid_request_error"))
    );
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("anthropic-version"));
    let (s, v) = send(vec![version, ("x-api-key", KEY)]).await;
    assert_eq!(s, 200, "{v}");
    // Every request is in the log, headers and body included.
    let log = sim.requests();
    assert_eq!(log.len(), 5);
    assert!(log.iter().all(|e| e["path"] == "/v1/messages"));
    assert_eq!(log[4]["headers"]["x-api-key"], KEY);
    assert_eq!(log[4]["json"]["model"], "claude-sim");
}

#[tokio::test]
async fn plain_answers_limits_and_stop_sequences() {
    let (sim, c) = start().await;
    let (s, v) = messages(&sim, &c, hello()).await;
    assert_eq!(s, 200, "{v}");
    assert!(v["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(
        (v["type"].clone(), v["role"].clone(), v["model"].clone()),
        (json!("message"), json!("assistant"), json!("claude-sim"))
    );
    assert_eq!(
        v["content"],
        json!([{"type": "text", "text": "This is a simulated reply to: hello there This is a simulated"}])
    );
    assert_eq!(
        (v["stop_reason"].clone(), v["stop_sequence"].clone()),
        (json!("end_turn"), Value::Null)
    );
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 2, "output_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
    );
    // max_tokens is required, and cuts the reply.
    let mut b = hello();
    b.as_object_mut().unwrap().remove("max_tokens");
    let (s, v) = messages(&sim, &c, b).await;
    assert_eq!(
        (s, v["error"]["type"].clone()),
        (400, json!("invalid_request_error"))
    );
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("max_tokens"));
    let mut b = hello();
    b["max_tokens"] = json!(3);
    let (_, v) = messages(&sim, &c, b).await;
    assert_eq!(v["content"][0]["text"], "This is a");
    assert_eq!(
        (
            v["stop_reason"].clone(),
            v["usage"]["output_tokens"].clone()
        ),
        (json!("max_tokens"), json!(3))
    );
    let mut b = hello();
    b["stop_sequences"] = json!(["reply", "nowhere"]);
    let (_, v) = messages(&sim, &c, b).await;
    assert_eq!(v["content"][0]["text"], "This is a simulated ");
    assert_eq!(
        (
            v["stop_reason"].clone(),
            v["stop_sequence"].clone(),
            v["usage"]["output_tokens"].clone()
        ),
        (json!("stop_sequence"), json!("reply"), json!(4))
    );
    // System text counts; count_tokens agrees and needs no max_tokens.
    let mut b = hello();
    b["system"] = json!("Be brief.");
    let (_, v) = messages(&sim, &c, b.clone()).await;
    assert_eq!(v["usage"]["input_tokens"], 4);
    b.as_object_mut().unwrap().remove("max_tokens");
    let (s, v) = call(&sim, &c, "/v1/messages/count_tokens", b).await;
    assert_eq!((s, v), (200, json!({"input_tokens": 4})));
    for bad in [
        json!({"model": "m", "max_tokens": 5}),
        json!({"model": "m", "max_tokens": 5, "messages": []}),
        json!({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]}),
        json!({"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}),
    ] {
        let (s, v) = messages(&sim, &c, bad).await;
        assert_eq!(
            (s, v["error"]["type"].clone()),
            (400, json!("invalid_request_error")),
            "{v}"
        );
    }
}

#[tokio::test]
async fn tool_use_then_tool_result_round_trip() {
    let (sim, c) = start().await;
    let ask = json!({"role": "user", "content": "What is the weather? Use get_weather for Paris."});
    let body = json!({"model": "claude-sim", "max_tokens": 200, "tools": weather_tools(), "messages": [ask]});
    let (s, v) = messages(&sim, &c, body.clone()).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(
        v["content"][0],
        json!({"type": "text", "text": "Calling get_weather."})
    );
    let call_block = v["content"][1].clone();
    assert_eq!(call_block["type"], "tool_use");
    assert_eq!(call_block["name"], "get_weather");
    assert_eq!(
        call_block["input"],
        json!({"city": "sim", "unit": "celsius"})
    );
    let id = call_block["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("toolu_"));
    // Words of the text (2) + the input JSON's (1).
    assert_eq!(v["usage"]["output_tokens"], 3);
    // Tools count as their JSON text.
    let tools_words = weather_tools()[0].to_string().split_whitespace().count() as u64;
    assert_eq!(v["usage"]["input_tokens"], 8 + tools_words);

    // No mention, no call; tool_choice "any" forces one; "none" forbids.
    let mut plain = body.clone();
    plain["messages"][0]["content"] = json!("hello");
    let (_, v) = messages(&sim, &c, plain.clone()).await;
    assert_eq!(v["stop_reason"], "end_turn");
    plain["tool_choice"] = json!({"type": "any"});
    let (_, v) = messages(&sim, &c, plain).await;
    assert_eq!(v["content"][1]["name"], "get_weather");
    let mut none = body.clone();
    none["tool_choice"] = json!({"type": "none"});
    let (_, v) = messages(&sim, &c, none).await;
    assert_eq!(v["stop_reason"], "end_turn");

    // The result goes back: a text answer using it.
    let mut follow = body.clone();
    follow["messages"] = json!([ask, {"role": "assistant", "content": [v_text("Calling get_weather."), call_block]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "22 degrees and sunny"}]}]);
    let (s, v) = messages(&sim, &c, follow.clone()).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["stop_reason"], "end_turn");
    assert!(v["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("Using the tool result: 22 degrees and sunny"));
    // A result for an unknown call, or a call left unanswered, is refused.
    let mut wrong = follow.clone();
    wrong["messages"][2]["content"][0]["tool_use_id"] = json!("toolu_other");
    let (s, v) = messages(&sim, &c, wrong).await;
    assert_eq!(s, 400);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("toolu_other"));
    let mut unanswered = follow;
    unanswered["messages"][2] = json!({"role": "user", "content": "and now?"});
    let (s, _) = messages(&sim, &c, unanswered).await;
    assert_eq!(s, 400);
}

fn v_text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

#[tokio::test]
async fn images_are_accepted_and_counted() {
    let (sim, c) = start().await;
    let png = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": sim::openai::PNG_1X1}});
    let url =
        json!({"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}});
    let body = json!({"model": "claude-sim", "max_tokens": 50, "messages": [{"role": "user",
        "content": [png, url, {"type": "text", "text": "describe these"}]}]});
    let (s, v) = messages(&sim, &c, body.clone()).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["usage"]["input_tokens"], 85 + 85 + 2);
    assert!(v["content"][0]["text"]
        .as_str()
        .unwrap()
        .ends_with("describe these This is a simulated"));
    // Strict counting: 1600 an image, bytes of text, 4 + role a message, 3.
    crate::support::post(
        &c,
        format!("{}/__sim/config", sim.url()),
        json!({"strict_tokens": true}),
    )
    .await;
    let (_, v) = messages(&sim, &c, body.clone()).await;
    assert_eq!(v["usage"]["input_tokens"], 1600 * 2 + 14 + 4 + 4 + 3);
    let mut bad = body;
    bad["messages"][0]["content"][0]["source"]["media_type"] = json!("image/bmp");
    let (s, v) = messages(&sim, &c, bad).await;
    assert_eq!(
        (s, v["error"]["type"].clone()),
        (400, json!("invalid_request_error"))
    );
}

#[tokio::test]
async fn cache_control_writes_then_reads() {
    let (sim, c) = start().await;
    let body = json!({"model": "claude-sim", "max_tokens": 50,
        "system": [{"type": "text", "text": "You are a very helpful assistant indeed", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hello there"}]});
    let (_, v) = messages(&sim, &c, body.clone()).await;
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 2, "output_tokens": 12, "cache_creation_input_tokens": 7, "cache_read_input_tokens": 0})
    );
    let (_, v) = messages(&sim, &c, body.clone()).await;
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 2, "output_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 7})
    );
    // A longer conversation marked at its end reads the cached system
    // prompt and writes the rest up to its mark.
    let mut longer = body.clone();
    longer["messages"] = json!([{"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": [{"type": "text", "text": "one two three", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "four"}]}]);
    let (_, v) = messages(&sim, &c, longer).await;
    assert_eq!(v["usage"]["cache_read_input_tokens"], 7);
    assert_eq!(v["usage"]["cache_creation_input_tokens"], 2 + 1 + 3);
    assert_eq!(v["usage"]["input_tokens"], 1);
    // Streams report the same figures in message_start; another model
    // shares nothing; count_tokens counts everything and caches nothing.
    let mut other = body.clone();
    other["model"] = json!("claude-other");
    let events = stream(&sim, &c, other).await;
    let usage = &events[0].1["message"]["usage"];
    assert_eq!(
        (
            usage["cache_creation_input_tokens"].clone(),
            usage["input_tokens"].clone()
        ),
        (json!(7), json!(2))
    );
    let mut count = body;
    count.as_object_mut().unwrap().remove("max_tokens");
    let (_, v) = call(&sim, &c, "/v1/messages/count_tokens", count).await;
    assert_eq!(v["input_tokens"], 9);
    // /__sim/reset forgets the cache.
    crate::support::post(&c, format!("{}/__sim/reset", sim.url()), json!({})).await;
    let events = stream(&sim, &c, hello_cached()).await;
    assert_eq!(
        events[0].1["message"]["usage"]["cache_read_input_tokens"],
        0
    );
}

fn hello_cached() -> Value {
    json!({"model": "claude-sim", "max_tokens": 50,
        "system": [{"type": "text", "text": "You are a very helpful assistant indeed", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hello there"}]})
}

#[tokio::test]
async fn streamed_text_is_the_full_event_sequence() {
    let (sim, c) = start().await;
    let events = stream(&sim, &c, hello()).await;
    let mut expected = vec!["message_start", "content_block_start", "ping"];
    expected.extend(["content_block_delta"; 12]);
    expected.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names(&events), expected);
    let start = &events[0].1["message"];
    assert!(start["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(
        (start["content"].clone(), start["stop_reason"].clone()),
        (json!([]), Value::Null)
    );
    assert_eq!(
        start["usage"],
        json!({"input_tokens": 2, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
    );
    assert_eq!(
        events[1].1,
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    );
    let text: String = events[3..15]
        .iter()
        .map(|(_, d)| {
            assert_eq!(
                (d["index"].clone(), d["delta"]["type"].clone()),
                (json!(0), json!("text_delta"))
            );
            d["delta"]["text"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        text,
        "This is a simulated reply to: hello there This is a simulated"
    );
    assert_eq!(
        events[15].1,
        json!({"type": "content_block_stop", "index": 0})
    );
    assert_eq!(
        events[16].1,
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
            "usage": {"input_tokens": 2, "output_tokens": 12,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
    );
    let mut stop = hello();
    stop["stop_sequences"] = json!(["reply"]);
    let events = stream(&sim, &c, stop).await;
    let last = &events[events.len() - 2].1;
    assert_eq!(
        last["delta"],
        json!({"stop_reason": "stop_sequence", "stop_sequence": "reply"})
    );
    assert_eq!(last["usage"]["output_tokens"], 4);
}

#[tokio::test]
async fn streamed_tool_use_sends_input_json_in_pieces() {
    let (sim, c) = start().await;
    let body = json!({"model": "claude-sim", "max_tokens": 200, "tools": weather_tools(),
        "messages": [{"role": "user", "content": "call get_weather please"}]});
    let events = stream(&sim, &c, body).await;
    let input = json!({"city": "sim", "unit": "celsius"}).to_string();
    let pieces = input.len().div_ceil(10);
    assert!(pieces >= 3);
    let mut expected = vec![
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
    ];
    expected.extend(vec!["content_block_delta"; pieces]);
    expected.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names(&events), expected);
    let start = &events[6].1;
    assert_eq!(start["index"], 1);
    assert_eq!(start["content_block"]["type"], "tool_use");
    assert_eq!(start["content_block"]["name"], "get_weather");
    assert_eq!(start["content_block"]["input"], json!({}));
    let json_text: String = events[7..7 + pieces]
        .iter()
        .map(|(_, d)| {
            assert_eq!(
                (d["index"].clone(), d["delta"]["type"].clone()),
                (json!(1), json!("input_json_delta"))
            );
            d["delta"]["partial_json"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&json_text).unwrap(),
        json!({"city": "sim", "unit": "celsius"})
    );
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 3);
}

#[tokio::test]
async fn faults_answer_in_anthropics_shape() {
    let (sim, c) = start().await;
    for (status, ty) in [
        (529, "overloaded_error"),
        (429, "rate_limit_error"),
        (400, "invalid_request_error"),
        (500, "api_error"),
    ] {
        sim.add_fault(json!({"path": "/v1/messages", "fault": {"status": status}}))
            .unwrap();
        let (s, v) = messages(&sim, &c, hello()).await;
        assert_eq!(s, status);
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], ty);
    }
    // A given body and headers still win.
    sim.add_fault(
        json!({"path": "/v1/messages*", "fault": {"status": 429, "headers": {"retry-after": "3"},
        "body": {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}}}),
    )
    .unwrap();
    let r = c
        .post(format!("{}/v1/messages", sim.url()))
        .json(&hello())
        .send()
        .await
        .unwrap();
    assert_eq!(
        (
            r.status().as_u16(),
            r.headers()["retry-after"].to_str().unwrap()
        ),
        (429, "3")
    );
    // Mid-stream: an error event after two deltas, nothing after it.
    sim.add_fault(json!({"path": "/v1/messages", "fault": {"stream_error": 529, "after": 2}}))
        .unwrap();
    let events = stream(&sim, &c, hello()).await;
    assert_eq!(
        names(&events),
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "error"
        ]
    );
    assert_eq!(events[5].1["error"]["type"], "overloaded_error");
    // The rule was used up: the next stream is whole.
    let events = stream(&sim, &c, hello()).await;
    assert_eq!(names(&events).last(), Some(&"message_stop"));
}

/// Today's request fields: `system`-role messages, `context_management`,
/// `metadata`, `output_config` (a JSON schema's smallest instance as the
/// text), a top-level `cache_control`; the request headers are logged.
#[tokio::test]
async fn todays_fields_are_accepted_and_structured_output_is_valid_json() {
    let (sim, c) = start().await;
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
        "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["city", "days"], "additionalProperties": false});
    let body = json!({"model": "claude-sim", "max_tokens": 100,
        "messages": [{"role": "system", "content": "Answer in JSON."},
            {"role": "user", "content": "hello there"}],
        "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
        "metadata": {"user_id": "u-1"},
        "output_config": {"format": {"type": "json_schema", "schema": schema}, "effort": "low"}});
    let r = c
        .post(format!("{}/v1/messages", sim.url()))
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "context-management-2025-06-27")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let text = v["content"][0]["text"].as_str().unwrap();
    let doc: Value = serde_json::from_str(text).unwrap();
    assert_eq!(doc, json!({"city": "sim", "days": 1}));
    assert_eq!(v["stop_reason"], "end_turn");
    // Output tokens: the document's 10-character pieces.
    assert_eq!(v["usage"]["output_tokens"], text.len().div_ceil(10) as u64);
    let (_, log) = crate::support::get(&c, format!("{}/__sim/requests", sim.url())).await;
    let last = log["requests"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last["headers"]["anthropic-beta"],
        "context-management-2025-06-27"
    );
    assert_eq!(last["headers"]["anthropic-version"], "2023-06-01");
    // The streamed document is the same text.
    let events = stream(&sim, &c, body.clone()).await;
    let streamed: String = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(streamed, text);
    // The system-role message counts as input; count_tokens agrees.
    let mut count = body.clone();
    count.as_object_mut().unwrap().remove("max_tokens");
    let (_, n) = call(&sim, &c, "/v1/messages/count_tokens", count).await;
    assert_eq!(n["input_tokens"], v["usage"]["input_tokens"]);
    assert_eq!(n["input_tokens"], 5);
    // A top-level cache_control caches the whole prompt: written, then read.
    let mut cached = hello();
    cached["cache_control"] = json!({"type": "ephemeral"});
    let (_, v) = messages(&sim, &c, cached.clone()).await;
    assert_eq!(
        (
            &v["usage"]["cache_creation_input_tokens"],
            &v["usage"]["input_tokens"]
        ),
        (&json!(2), &json!(0))
    );
    let (_, v) = messages(&sim, &c, cached).await;
    assert_eq!(v["usage"]["cache_read_input_tokens"], 2);
    // Bad options are refused as Anthropic refuses them.
    for (field, bad) in [
        ("output_config", json!({"format": {"type": "json_object"}})),
        ("output_config", json!({"format": {"type": "json_schema"}})),
        ("output_config", json!({"effort": "huge"})),
        ("context_management", json!([])),
        ("metadata", json!({"user_id": 5})),
    ] {
        let mut b = hello();
        b[field] = bad;
        let (s, v) = messages(&sim, &c, b).await;
        assert_eq!(s, 400, "{field}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().starts_with(field),
            "{v}"
        );
    }
}

/// Thinking (`enabled` with a budget, `adaptive`): a signed `thinking`
/// block first, its words output tokens; streamed as a thinking block of
/// `thinking_delta`s and a `signature_delta`.
#[tokio::test]
async fn thinking_comes_first_signed_and_streams_its_deltas() {
    let (sim, c) = start().await;
    let mut b = hello();
    b["max_tokens"] = json!(2000);
    b["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    let (s, v) = messages(&sim, &c, b.clone()).await;
    assert_eq!(s, 200, "{v}");
    let thinking = &v["content"][0];
    assert_eq!(thinking["type"], "thinking");
    assert_eq!(thinking["thinking"], "Let me think about: hello there");
    assert!(thinking["signature"].as_str().unwrap().starts_with("sim"));
    assert_eq!(v["content"][1]["type"], "text");
    // 6 words of thinking + 12 of reply.
    assert_eq!(v["usage"]["output_tokens"], 18);
    // Adaptive thinking with a small max_tokens: the reply gets the rest.
    let mut a = hello();
    a["max_tokens"] = json!(8);
    a["thinking"] = json!({"type": "adaptive"});
    let (_, v) = messages(&sim, &c, a.clone()).await;
    assert_eq!(v["content"][0]["type"], "thinking");
    assert_eq!(v["content"][1]["text"], "This is");
    assert_eq!(
        (&v["stop_reason"], &v["usage"]["output_tokens"]),
        (&json!("max_tokens"), &json!(8))
    );
    let events = stream(&sim, &c, a).await;
    assert_eq!(
        events[1].1["content_block"],
        json!({"type": "thinking", "thinking": "", "signature": ""})
    );
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|(n, d)| n == "content_block_delta" && d["index"] == 0)
        .map(|(_, d)| &d["delta"])
        .collect();
    let thought: String = deltas
        .iter()
        .filter(|d| d["type"] == "thinking_delta")
        .map(|d| d["thinking"].as_str().unwrap())
        .collect();
    assert_eq!(thought, "Let me think about: hello there");
    assert_eq!(deltas.last().unwrap()["type"], "signature_delta");
    assert_eq!(
        deltas.last().unwrap()["signature"],
        v["content"][0]["signature"]
    );
    let text_start = events
        .iter()
        .find(|(n, d)| n == "content_block_start" && d["index"] == 1)
        .unwrap();
    assert_eq!(text_start.1["content_block"]["type"], "text");
    let end = &events[events.len() - 2].1;
    assert_eq!(end["usage"]["output_tokens"], 8);
    // A budget under 1024, or not under max_tokens, is refused.
    for (budget, max) in [(100, 2000), (1024, 1024)] {
        let mut t = hello();
        t["max_tokens"] = json!(max);
        t["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        let (s, v) = messages(&sim, &c, t).await;
        assert_eq!(s, 400, "{v}");
    }
    b["thinking"] = json!({"type": "sometimes"});
    assert_eq!(messages(&sim, &c, b).await.0, 400);
}

/// A stop sequence cuts the streamed text before it, and message_delta
/// names it.
#[tokio::test]
async fn a_streamed_stop_sequence_is_named() {
    let (sim, c) = start().await;
    let mut b = hello();
    b["stop_sequences"] = json!(["simulated"]);
    let events = stream(&sim, &c, b).await;
    let text: String = events
        .iter()
        .filter(|(n, _)| n == "content_block_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "This is a ");
    let delta = &events[events.len() - 2].1;
    assert_eq!(
        delta["delta"],
        json!({"stop_reason": "stop_sequence", "stop_sequence": "simulated"})
    );
}
