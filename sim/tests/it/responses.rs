//! OpenAI's Responses API under `/v1/responses`.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sim::SimConfig;

use crate::support::{client, get, post};

async fn start() -> (sim::Sim, reqwest::Client, String) {
    let sim = crate::support::start(SimConfig::default()).await;
    let url = format!("{}/responses", sim.llm_url());
    (sim, client(), url)
}

/// The output text of a response: its messages' `output_text` parts.
fn output_text(r: &Value) -> String {
    r["output"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "message")
        .flat_map(|i| i["content"].as_array().unwrap().iter())
        .map(|p| p["text"].as_str().unwrap().to_owned())
        .collect()
}

/// (event name, data) of each event of a streamed body.
fn events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, data) = e.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap().to_owned();
            let data = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            (name, data)
        })
        .collect()
}

#[tokio::test]
async fn a_text_answer_in_the_response_shape() {
    let (sim, c, url) = start().await;
    let (s, r) = post(
        &c,
        url.clone(),
        json!({"model": "sim-gpt", "input": "hello there", "metadata": {"k": "v"}}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert!(r["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(
        (&r["object"], &r["status"], &r["model"]),
        (&json!("response"), &json!("completed"), &json!("sim-gpt"))
    );
    let msg = &r["output"][0];
    assert_eq!(
        (&msg["type"], &msg["role"]),
        (&json!("message"), &json!("assistant"))
    );
    assert!(msg["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(msg["content"][0]["type"], "output_text");
    assert_eq!(msg["content"][0]["annotations"], json!([]));
    let text = output_text(&r);
    assert!(text.starts_with("This is a simulated reply to: hello there"));
    // The same words and figures as a chat completion of the same prompt.
    let (_, chat) = post(
        &c,
        format!("{}/chat/completions", sim.llm_url()),
        json!({"messages": [{"role": "user", "content": "hello there"}]}),
    )
    .await;
    assert_eq!(text, chat["choices"][0]["message"]["content"]);
    let u = &r["usage"];
    assert_eq!(u["input_tokens"], chat["usage"]["prompt_tokens"]);
    assert_eq!(u["output_tokens"], chat["usage"]["completion_tokens"]);
    assert_eq!(u["input_tokens_details"]["cached_tokens"], 0);
    assert_eq!(u["input_tokens_details"]["cache_write_tokens"], 0);
    assert_eq!(u["output_tokens_details"]["reasoning_tokens"], 0);
    assert_eq!(u["total_tokens"], 2 + 12);
    assert_eq!(
        (&r["metadata"], &r["store"]),
        (&json!({"k": "v"}), &json!(true))
    );
    assert_eq!(
        (&r["tool_choice"], &r["text"]["format"]["type"]),
        (&json!("auto"), &json!("text"))
    );
    assert_eq!(r["error"], Value::Null);

    // max_output_tokens cuts the reply: incomplete.
    let (_, r) = post(
        &c,
        url.clone(),
        json!({"input": "hello there", "max_output_tokens": 3}),
    )
    .await;
    assert_eq!(r["status"], "incomplete");
    assert_eq!(r["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(
        (output_text(&r).as_str(), &r["usage"]["output_tokens"]),
        ("This is a", &json!(3))
    );
    assert_eq!(r["output"][0]["status"], "incomplete");

    // Every request is in the request log.
    assert!(sim.requests().iter().any(|e| e["path"] == "/v1/responses"));
}

#[tokio::test]
async fn a_streamed_answer_numbers_its_events() {
    let (_sim, c, url) = start().await;
    let body = c
        .post(&url)
        .json(&json!({"input": "hi", "stream": true, "max_output_tokens": 4}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!body.contains("[DONE]"));
    let ev = events(&body);
    let names: Vec<&str> = ev.iter().map(|(n, _)| n.as_str()).collect();
    let deltas = vec!["response.output_text.delta"; 4];
    let expected = [
        &[
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
        ][..],
        &deltas,
        &[
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.incomplete",
        ],
    ]
    .concat();
    assert_eq!(names, expected);
    for (i, (name, data)) in ev.iter().enumerate() {
        assert_eq!(
            (&data["sequence_number"], &data["type"]),
            (&json!(i), &json!(name))
        );
    }
    assert_eq!(ev[0].1["response"]["status"], "in_progress");
    let item_id = &ev[2].1["item"]["id"];
    let text: String = ev[4..8]
        .iter()
        .map(|(_, d)| {
            assert_eq!(
                (&d["item_id"], &d["output_index"], &d["content_index"]),
                (item_id, &json!(0), &json!(0))
            );
            d["delta"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(text, "This is a simulated");
    assert_eq!(ev[8].1["text"], "This is a simulated");
    let last = &ev.last().unwrap().1["response"];
    assert_eq!(
        (&last["status"], &last["usage"]["output_tokens"]),
        (&json!("incomplete"), &json!(4))
    );
}

#[tokio::test]
async fn a_tool_call_then_its_output_gives_text() {
    let (_sim, c, url) = start().await;
    let tools = json!([{"type": "function", "name": "get_weather", "description": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]);
    let (s, r) = post(
        &c,
        url.clone(),
        json!({"input": "call get_weather for Paris", "tools": tools}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    let call = &r["output"][0];
    assert_eq!(
        (&call["type"], &call["name"]),
        (&json!("function_call"), &json!("get_weather"))
    );
    assert_eq!(call["arguments"], r#"{"city":"sim"}"#);
    assert!(call["call_id"].as_str().unwrap().starts_with("call_"));
    assert!(call["id"].as_str().unwrap().starts_with("fc_"));
    assert_eq!(r["usage"]["output_tokens"], 4);
    // tool_choice none: text.
    let (_, t) = post(
        &c,
        url.clone(),
        json!({"input": "call get_weather", "tools": tools, "tool_choice": "none"}),
    )
    .await;
    assert_eq!(t["output"][0]["type"], "message");
    // The call's output given back: text.
    let input = json!([{"role": "user", "content": "call get_weather for Paris"},
        {"type": "function_call", "call_id": call["call_id"], "name": "get_weather", "arguments": call["arguments"]},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "22 degrees"}]);
    let (_, r) = post(&c, url.clone(), json!({"input": input, "tools": tools})).await;
    assert_eq!(r["output"][0]["type"], "message");
    assert!(output_text(&r).contains("22 degrees"));
    // Streamed call: argument deltas.
    let body = c
        .post(&url)
        .json(&json!({"input": "get_weather", "tools": tools, "stream": true}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let ev = events(&body);
    let args: String = ev
        .iter()
        .filter(|(n, _)| n == "response.function_call_arguments.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(args, r#"{"city":"sim"}"#);
    assert!(ev
        .iter()
        .any(|(n, d)| n == "response.function_call_arguments.done" && d["arguments"] == args));
    // A hosted tool is refused by name.
    let (s, r) = post(
        &c,
        url.clone(),
        json!({"input": "x", "tools": [tools[0].clone(), {"type": "web_search"}]}),
    )
    .await;
    assert_eq!((s, &r["error"]["param"]), (400, &json!("tools[1].type")));
    assert_eq!(r["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn json_schema_and_reasoning() {
    let (_sim, c, url) = start().await;
    let format = json!({"type": "json_schema", "name": "person", "strict": true, "schema": {
        "type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 18}},
        "required": ["name", "age"], "additionalProperties": false}});
    let (s, r) = post(
        &c,
        url.clone(),
        json!({"input": "who?", "text": {"format": format}}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    let v: Value = serde_json::from_str(&output_text(&r)).unwrap();
    assert_eq!(v, json!({"name": "sim", "age": 18}));
    assert_eq!(r["text"]["format"]["name"], "person");

    let (_, r) = post(&c, url.clone(),
        json!({"model": "o4-mini", "input": "think hard", "reasoning": {"effort": "high", "summary": "auto"}})).await;
    let rs = &r["output"][0];
    assert_eq!(rs["type"], "reasoning");
    assert!(rs["id"].as_str().unwrap().starts_with("rs_"));
    assert_eq!(rs["summary"][0]["type"], "summary_text");
    assert!(rs["summary"][0]["text"]
        .as_str()
        .unwrap()
        .contains("think hard"));
    assert_eq!(r["output"][1]["type"], "message");
    let u = &r["usage"];
    assert_eq!(u["output_tokens_details"]["reasoning_tokens"], 64);
    assert_eq!(u["output_tokens"], 64 + 12);
    assert_eq!(
        (&r["reasoning"]["effort"], &r["reasoning"]["summary"]),
        (&json!("high"), &json!("auto"))
    );
    // Streamed: the summary's events before the message's.
    let body = c
        .post(&url)
        .json(
            &json!({"model": "o3", "input": "x", "reasoning": {"summary": "auto"}, "stream": true}),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let names: Vec<String> = events(&body).into_iter().map(|(n, _)| n).collect();
    let pos = |n: &str| names.iter().position(|x| x == n).unwrap();
    assert!(
        pos("response.reasoning_summary_part.added") < pos("response.reasoning_summary_text.delta")
    );
    assert!(
        pos("response.reasoning_summary_text.done") < pos("response.reasoning_summary_part.done")
    );
    assert!(pos("response.reasoning_summary_part.done") < pos("response.content_part.added"));
    // Not a reasoning model, no effort: no reasoning item.
    let (_, r) = post(&c, url.clone(), json!({"model": "sim-gpt", "input": "x"})).await;
    assert_eq!(r["output"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn previous_responses_chain_and_are_kept_per_key() {
    let (sim, c, url) = start().await;
    let (_, first) = post(
        &c,
        url.clone(),
        json!({"input": "one two three", "instructions": "be brief"}),
    )
    .await;
    let first_in = first["usage"]["input_tokens"].as_u64().unwrap();
    assert_eq!(first_in, 2 + 3);
    let id = first["id"].as_str().unwrap();
    let (s, second) = post(
        &c,
        url.clone(),
        json!({"input": "four", "previous_response_id": id}),
    )
    .await;
    assert_eq!(s, 200, "{second}");
    // The earlier turn (input and output; not its instructions) counts as input.
    assert_eq!(second["usage"]["input_tokens"], 3 + 12 + 1);
    assert_eq!(second["previous_response_id"], id);
    // Another key does not see it.
    let r = c
        .post(&url)
        .bearer_auth("other")
        .json(&json!({"input": "x", "previous_response_id": id}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let (s, e) = post(
        &c,
        url.clone(),
        json!({"input": "x", "previous_response_id": "resp_nope"}),
    )
    .await;
    assert_eq!(s, 404);
    assert_eq!(
        e,
        json!({"error": {"message": "Previous response with id 'resp_nope' not found.",
        "type": "invalid_request_error", "param": "previous_response_id", "code": "previous_response_not_found"}})
    );
    // store: false keeps nothing.
    let (_, unstored) = post(&c, url.clone(), json!({"input": "x", "store": false})).await;
    let (s, _) = get(&c, format!("{url}/{}", unstored["id"].as_str().unwrap())).await;
    assert_eq!(s, 404);
    // GET, DELETE, then 404.
    let (s, got) = get(&c, format!("{url}/{id}")).await;
    assert_eq!((s, &got["output"]), (200, &first["output"]));
    let r = c.delete(format!("{url}/{id}")).send().await.unwrap();
    let deleted: Value = r.json().await.unwrap();
    assert_eq!(
        deleted,
        json!({"id": id, "object": "response", "deleted": true})
    );
    let (s, e) = get(&c, format!("{url}/{id}")).await;
    assert_eq!(
        (s, &e["error"]["type"]),
        (404, &json!("invalid_request_error"))
    );
    // An unknown field is refused by name.
    let (s, e) = post(&c, url.clone(), json!({"input": "x", "messages": []})).await;
    assert_eq!(
        (s, &e["error"]["param"], &e["error"]["code"]),
        (400, &json!("messages"), &json!("unknown_parameter"))
    );
    drop(sim);
}

#[tokio::test]
async fn input_items_are_paged() {
    let (_sim, c, url) = start().await;
    let input: Vec<Value> = (1..=5)
        .map(|i| json!({"role": "user", "content": format!("m{i}")}))
        .collect();
    let (_, r) = post(&c, url.clone(), json!({"input": input})).await;
    let items = format!("{url}/{}/input_items", r["id"].as_str().unwrap());
    let (s, p) = get(&c, format!("{items}?limit=2")).await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(
        (&p["object"], &p["has_more"]),
        (&json!("list"), &json!(true))
    );
    let texts = |p: &Value| -> Vec<String> {
        p["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["content"][0]["text"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(texts(&p), ["m5", "m4"]);
    assert_eq!(p["data"][0]["type"], "message");
    assert_eq!(p["data"][0]["content"][0]["type"], "input_text");
    assert_eq!(p["first_id"], p["data"][0]["id"]);
    let last = p["last_id"].as_str().unwrap();
    let (_, p) = get(&c, format!("{items}?limit=2&after={last}")).await;
    assert_eq!(texts(&p), ["m3", "m2"]);
    let (_, p) = get(
        &c,
        format!("{items}?order=asc&after={}", p["last_id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(
        (texts(&p), &p["has_more"]),
        (
            vec!["m3".to_owned(), "m4".into(), "m5".into()],
            &json!(false)
        )
    );
    let (s, _) = get(&c, format!("{items}?limit=0")).await;
    assert_eq!(s, 400);
}

#[tokio::test]
async fn background_responses_complete_or_are_cancelled() {
    let (sim, c, url) = start().await;
    let (s, r) = post(
        &c,
        url.clone(),
        json!({"input": "slow", "background": true}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        (&r["status"], &r["output"], &r["background"]),
        (&json!("queued"), &json!([]), &json!(true))
    );
    let id = r["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(5);
    let done = loop {
        let (_, g) = get(&c, format!("{url}/{id}")).await;
        if g["status"] == "completed" {
            break g;
        }
        assert!(
            ["queued", "in_progress"].contains(&g["status"].as_str().unwrap()),
            "{g}"
        );
        assert!(Instant::now() < deadline, "never completed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(output_text(&done).starts_with("This is a simulated reply to: slow"));
    assert_eq!(done["usage"]["output_tokens"], 12);
    // Cancelling a finished one answers it as it is.
    let (s, r) = post(&c, format!("{url}/{id}/cancel"), json!({})).await;
    assert_eq!((s, &r["status"]), (200, &json!("completed")));

    // A long one cancelled while queued stays cancelled.
    post(
        &c,
        format!("{}/__sim/config", sim.url()),
        json!({"background_ms": 600000}),
    )
    .await;
    let (_, r) = post(
        &c,
        url.clone(),
        json!({"input": "slow", "background": true}),
    )
    .await;
    let id = r["id"].as_str().unwrap();
    let (s, r) = post(&c, format!("{url}/{id}/cancel"), json!({})).await;
    assert_eq!((s, &r["status"]), (200, &json!("cancelled")));
    let (_, g) = get(&c, format!("{url}/{id}")).await;
    assert_eq!(
        (&g["status"], &g["usage"]),
        (&json!("cancelled"), &Value::Null)
    );
    // A response made without background cannot be cancelled.
    let (_, r) = post(&c, url.clone(), json!({"input": "x"})).await;
    let (s, e) = post(
        &c,
        format!("{url}/{}/cancel", r["id"].as_str().unwrap()),
        json!({}),
    )
    .await;
    assert_eq!(
        (s, &e["error"]["type"]),
        (400, &json!("invalid_request_error"))
    );
}

#[tokio::test]
async fn faults_apply_to_responses() {
    let (sim, c, url) = start().await;
    sim.add_fault(json!({"path": "/v1/responses", "fault": {"status": 429}}))
        .unwrap();
    let r = c
        .post(&url)
        .json(&json!({"input": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    sim.add_fault(json!({"path": "/v1/responses", "fault": {"status": 500}}))
        .unwrap();
    let r = c
        .post(&url)
        .json(&json!({"input": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 500);
    // A stream cut after 3 events: the connection breaks, no terminal event.
    sim.add_fault(json!({"path": "/v1/responses", "fault": {"stream_error": 500, "after": 3}}))
        .unwrap();
    let r = c
        .post(&url)
        .json(&json!({"input": "x", "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut seen = String::new();
    let mut r = r;
    let broke = loop {
        match r.chunk().await {
            Ok(Some(b)) => seen.push_str(&String::from_utf8_lossy(&b)),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    assert!(broke, "{seen}");
    assert_eq!(seen.matches("event: ").count(), 3);
    assert!(!seen.contains("response.completed"));
}
