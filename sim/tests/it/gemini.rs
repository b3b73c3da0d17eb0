//! Google's Gemini API under `/v1beta`.

use serde_json::{json, Value};
use sim::SimConfig;

use crate::support::client;

const KEY: &str = "AIza-test";

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

async fn call(sim: &sim::Sim, c: &reqwest::Client, path: &str, body: Value) -> (u16, Value) {
    let r = c
        .post(format!("{}/v1beta/{path}", sim.url()))
        .header("x-goog-api-key", KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn generate(sim: &sim::Sim, c: &reqwest::Client, body: Value) -> (u16, Value) {
    call(sim, c, "models/gemini-sim:generateContent", body).await
}

/// The `data:` payloads of an SSE answer (Google's `\r\n\r\n` separators).
async fn stream(sim: &sim::Sim, c: &reqwest::Client, body: Value) -> Vec<Value> {
    let r = c
        .post(format!(
            "{}/v1beta/models/gemini-sim:streamGenerateContent?alt=sse",
            sim.url()
        ))
        .header("x-goog-api-key", KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let text = r.text().await.unwrap();
    assert!(text.ends_with("\r\n\r\n"));
    text.split("\r\n\r\n")
        .filter(|e| !e.is_empty())
        .map(|e| serde_json::from_str(e.strip_prefix("data: ").unwrap()).unwrap())
        .collect()
}

fn hello() -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": "hello there"}]}]})
}

fn weather_tools() -> Value {
    json!([{"functionDeclarations": [{"name": "get_weather", "description": "Weather of a city",
        "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}, "days": {"type": "INTEGER"}}}}]}])
}

#[tokio::test]
async fn key_header_is_checked() {
    let (sim, c) = start().await;
    let url = format!("{}/v1beta/models/gemini-sim:generateContent", sim.url());
    let send = |k: &'static str, v: &'static str| {
        let r = c.post(&url).header(k, v).json(&hello());
        async move {
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (s, v) = send("authorization", "Bearer AIza-test").await;
    assert_eq!(
        (s, v["error"]["code"].clone(), v["error"]["status"].clone()),
        (403, json!(403), json!("PERMISSION_DENIED"))
    );
    assert!(v["error"]["message"].is_string());
    let (s, v) = send("x-goog-api-key", "wrong").await;
    assert_eq!(
        (s, v["error"]["code"].clone(), v["error"]["status"].clone()),
        (401, json!(401), json!("UNAUTHENTICATED"))
    );
    assert_eq!(v["error"]["details"][0]["reason"], "API_KEY_INVALID");
    let (s, _) = send("x-goog-api-key", KEY).await;
    assert_eq!(s, 200);
    let log = sim.requests();
    assert_eq!(log.len(), 3);
    assert_eq!(log[2]["path"], "/v1beta/models/gemini-sim:generateContent");
    assert_eq!(log[2]["headers"]["x-goog-api-key"], KEY);
    assert_eq!(log[2]["json"], hello());
}

#[tokio::test]
async fn generate_content_limits_and_stops() {
    let (sim, c) = start().await;
    let (s, v) = generate(&sim, &c, hello()).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["candidates"],
        json!([{"content": {"parts": [{"text": "This is a simulated reply to: hello there This is a simulated"}], "role": "model"},
            "finishReason": "STOP", "index": 0}])
    );
    assert_eq!(
        v["usageMetadata"],
        json!({"promptTokenCount": 2, "candidatesTokenCount": 12, "totalTokenCount": 14})
    );
    assert_eq!(v["modelVersion"], "gemini-sim");
    // systemInstruction counts (snake_case too); maxOutputTokens cuts.
    let mut b = hello();
    b["system_instruction"] = json!({"parts": [{"text": "Be brief."}]});
    b["generationConfig"] = json!({"maxOutputTokens": 3, "temperature": 0.2});
    let (_, v) = generate(&sim, &c, b).await;
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0]["text"],
        "This is a"
    );
    assert_eq!(v["candidates"][0]["finishReason"], "MAX_TOKENS");
    assert_eq!(
        v["usageMetadata"],
        json!({"promptTokenCount": 4, "candidatesTokenCount": 3, "totalTokenCount": 7})
    );
    let mut b = hello();
    b["generationConfig"] = json!({"stopSequences": ["reply"]});
    let (_, v) = generate(&sim, &c, b).await;
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0]["text"],
        "This is a simulated "
    );
    assert_eq!(v["candidates"][0]["finishReason"], "STOP");
    assert_eq!(v["usageMetadata"]["candidatesTokenCount"], 4);
    let (s, v) = call(&sim, &c, "models/gemini-sim:countTokens", hello()).await;
    assert_eq!((s, v), (200, json!({"totalTokens": 2})));
    for bad in [
        json!({}),
        json!({"contents": []}),
        json!({"contents": [{"role": "bot", "parts": [{"text": "x"}]}]}),
        json!({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"maxOutputTokens": 0}}),
    ] {
        let (s, v) = generate(&sim, &c, bad).await;
        assert_eq!(
            (s, v["error"]["status"].clone()),
            (400, json!("INVALID_ARGUMENT")),
            "{v}"
        );
    }
}

#[tokio::test]
async fn function_call_then_function_response() {
    let (sim, c) = start().await;
    let ask = json!({"role": "user", "parts": [{"text": "Use get_weather for Paris"}]});
    let body = json!({"contents": [ask], "tools": weather_tools()});
    let (s, v) = generate(&sim, &c, body.clone()).await;
    assert_eq!(s, 200, "{v}");
    let call_part = v["candidates"][0]["content"]["parts"][0].clone();
    assert_eq!(
        call_part,
        json!({"functionCall": {"name": "get_weather", "args": {"city": "sim", "days": 1}}})
    );
    assert_eq!(v["candidates"][0]["finishReason"], "STOP");
    // name (1) + args JSON (1).
    assert_eq!(v["usageMetadata"]["candidatesTokenCount"], 2);
    let decl_words = weather_tools()[0]["functionDeclarations"][0]
        .to_string()
        .split_whitespace()
        .count() as u64;
    assert_eq!(v["usageMetadata"]["promptTokenCount"], 4 + decl_words);
    // Mode NONE never calls; ANY calls without a mention.
    let mut none = body.clone();
    none["toolConfig"] = json!({"functionCallingConfig": {"mode": "NONE"}});
    let (_, v) = generate(&sim, &c, none).await;
    assert!(v["candidates"][0]["content"]["parts"][0]["text"].is_string());
    let mut any = body.clone();
    any["contents"][0]["parts"][0]["text"] = json!("hello");
    any["tool_config"] = json!({"function_calling_config": {"mode": "ANY"}});
    let (_, v) = generate(&sim, &c, any).await;
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0]["functionCall"]["name"],
        "get_weather"
    );
    // The response goes back: a text answer using it.
    let mut follow = body;
    follow["contents"] = json!([ask, {"role": "model", "parts": [call_part]},
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temperature": 22}}}]}]);
    let (s, v) = generate(&sim, &c, follow).await;
    assert_eq!(s, 200, "{v}");
    let text = v["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.starts_with("Using the tool result: {\"temperature\" 22}"),
        "{text}"
    );
}

#[tokio::test]
async fn inline_images_are_accepted_and_counted() {
    let (sim, c) = start().await;
    let body = json!({"contents": [{"role": "user", "parts": [
        {"inline_data": {"mime_type": "image/png", "data": sim::openai::PNG_1X1}},
        {"inlineData": {"mimeType": "image/jpeg", "data": sim::openai::PNG_1X1}},
        {"text": "describe these"}]}]});
    let (s, v) = generate(&sim, &c, body.clone()).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["usageMetadata"]["promptTokenCount"], 85 * 2 + 2);
    crate::support::post(
        &c,
        format!("{}/__sim/config", sim.url()),
        json!({"strict_tokens": true}),
    )
    .await;
    let (_, v) = generate(&sim, &c, body.clone()).await;
    assert_eq!(
        v["usageMetadata"]["promptTokenCount"],
        1600 * 2 + 14 + 4 + 4 + 3
    );
    let mut bad = body;
    bad["contents"][0]["parts"][0] = json!({"inline_data": {"data": "xx"}});
    let (s, v) = generate(&sim, &c, bad).await;
    assert_eq!(
        (s, v["error"]["status"].clone()),
        (400, json!("INVALID_ARGUMENT"))
    );
}

#[tokio::test]
async fn stream_generate_content_chunks() {
    let (sim, c) = start().await;
    let chunks = stream(&sim, &c, hello()).await;
    assert_eq!(chunks.len(), 12);
    let text: String = chunks
        .iter()
        .map(|ch| {
            assert_eq!(ch["candidates"][0]["content"]["role"], "model");
            ch["candidates"][0]["content"]["parts"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        text,
        "This is a simulated reply to: hello there This is a simulated"
    );
    for ch in &chunks[..11] {
        assert!(
            ch.get("usageMetadata").is_none() && ch["candidates"][0].get("finishReason").is_none(),
            "{ch}"
        );
    }
    assert_eq!(chunks[11]["candidates"][0]["finishReason"], "STOP");
    assert_eq!(
        chunks[11]["usageMetadata"],
        json!({"promptTokenCount": 2, "candidatesTokenCount": 12, "totalTokenCount": 14})
    );
    // A function call is one chunk.
    let chunks = stream(
        &sim,
        &c,
        json!({"contents": [{"parts": [{"text": "get_weather now"}]}], "tools": weather_tools()}),
    )
    .await;
    assert_eq!(chunks.len(), 1);
    assert_eq!(
        chunks[0]["candidates"][0]["content"]["parts"][0]["functionCall"]["name"],
        "get_weather"
    );
    assert_eq!(chunks[0]["usageMetadata"]["candidatesTokenCount"], 2);
    // Without alt=sse: a JSON array of the same chunks.
    let mut b = hello();
    b["generationConfig"] = json!({"maxOutputTokens": 2});
    let (s, v) = call(&sim, &c, "models/gemini-sim:streamGenerateContent", b).await;
    assert_eq!(s, 200);
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 2);
    assert_eq!(arr[1]["candidates"][0]["finishReason"], "MAX_TOKENS");
}

#[tokio::test]
async fn embeddings_are_deterministic() {
    let (sim, c) = start().await;
    let one = |t: &str| json!({"content": {"parts": [{"text": t}]}, "outputDimensionality": 8});
    let (s, a) = call(&sim, &c, "models/embed-sim:embedContent", one("alpha")).await;
    assert_eq!(s, 200, "{a}");
    let a = a["embedding"]["values"].clone();
    assert_eq!(a.as_array().unwrap().len(), 8);
    let norm: f64 = a
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap().powi(2))
        .sum();
    assert!((norm - 1.0).abs() < 1e-4);
    let mut r1 = one("alpha");
    r1["model"] = json!("models/embed-sim");
    let (s, v) = call(
        &sim,
        &c,
        "models/embed-sim:batchEmbedContents",
        json!({"requests": [r1, one("beta")]}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["embeddings"][0]["values"], a);
    assert_ne!(v["embeddings"][1]["values"], a);
    let (_, d) = call(
        &sim,
        &c,
        "models/embed-sim:embedContent",
        json!({"content": {"parts": [{"text": "x"}]}}),
    )
    .await;
    assert_eq!(d["embedding"]["values"].as_array().unwrap().len(), 16);
    let mut other = one("x");
    other["model"] = json!("models/other");
    let (s, _) = call(
        &sim,
        &c,
        "models/embed-sim:batchEmbedContents",
        json!({"requests": [other]}),
    )
    .await;
    assert_eq!(s, 400);
    let (s, v) = call(
        &sim,
        &c,
        "models/embed-sim:embedContent",
        json!({"content": {"parts": []}}),
    )
    .await;
    assert_eq!(
        (s, v["error"]["status"].clone()),
        (400, json!("INVALID_ARGUMENT"))
    );
}

#[tokio::test]
async fn cached_content_is_reported() {
    let (sim, c) = start().await;
    let (s, cache) = call(
        &sim,
        &c,
        "cachedContents",
        json!({"model": "models/gemini-sim",
        "systemInstruction": {"parts": [{"text": "You answer questions about this long document"}]},
        "contents": [{"role": "user", "parts": [{"text": "the document text"}]}], "ttl": "300s"}),
    )
    .await;
    assert_eq!(s, 200, "{cache}");
    assert_eq!(cache["usageMetadata"]["totalTokenCount"], 10);
    let name = cache["name"].as_str().unwrap();
    assert!(name.starts_with("cachedContents/"));
    let mut b = hello();
    b["cachedContent"] = json!(name);
    let (_, v) = generate(&sim, &c, b.clone()).await;
    assert_eq!(
        v["usageMetadata"],
        json!({"promptTokenCount": 12, "candidatesTokenCount": 12, "totalTokenCount": 24, "cachedContentTokenCount": 10})
    );
    let chunks = stream(&sim, &c, b).await;
    assert_eq!(
        chunks.last().unwrap()["usageMetadata"]["cachedContentTokenCount"],
        10
    );
    let mut unknown = hello();
    unknown["cachedContent"] = json!("cachedContents/nope");
    let (s, v) = generate(&sim, &c, unknown).await;
    assert_eq!(
        (s, v["error"]["status"].clone()),
        (403, json!("PERMISSION_DENIED"))
    );
}

#[tokio::test]
async fn faults_answer_in_googles_shape() {
    let (sim, c) = start().await;
    for (status, name) in [
        (429, "RESOURCE_EXHAUSTED"),
        (503, "UNAVAILABLE"),
        (500, "INTERNAL"),
        (400, "INVALID_ARGUMENT"),
    ] {
        sim.add_fault(json!({"path": "/v1beta/models/*", "fault": {"status": status}}))
            .unwrap();
        let (s, v) = generate(&sim, &c, hello()).await;
        assert_eq!(s, status);
        assert_eq!(
            (v["error"]["code"].clone(), v["error"]["status"].clone()),
            (json!(status), json!(name))
        );
    }
    sim.add_fault(json!({"path": "/v1beta/models/gemini-sim:streamGenerateContent", "fault": {"stream_error": 503, "after": 3}})).unwrap();
    let chunks = stream(&sim, &c, hello()).await;
    assert_eq!(chunks.len(), 4);
    assert!(chunks[..3]
        .iter()
        .all(|ch| ch["candidates"][0]["content"]["parts"][0]["text"].is_string()));
    assert_eq!(
        (
            chunks[3]["error"]["code"].clone(),
            chunks[3]["error"]["status"].clone()
        ),
        (json!(503), json!("UNAVAILABLE"))
    );
    // A non-streamed call is untouched by (and spends) a stream_error rule.
    sim.add_fault(json!({"path": "/v1beta/*", "fault": {"stream_error": 503}}))
        .unwrap();
    let (s, _) = generate(&sim, &c, hello()).await;
    assert_eq!(s, 200);
    assert_eq!(stream(&sim, &c, hello()).await.len(), 12);
}
