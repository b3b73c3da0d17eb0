//! Issue #37 ("Trust, round 2"), findings 1 and 6: what a model request is
//! held and charged for, over HTTP, on the three provider kinds (openai,
//! anthropic, gemini) and both chat front doors (`/chat/completions`,
//! `/messages`), against the simulator's worst-case count (`strict_tokens`:
//! one token per byte of every text a provider reads).
//!
//! * Finding 1: an object shaped like an image (`type` `image`,
//!   `image_url`, `input_image`; `inlineData`) outside an image's place
//!   counts its bytes: the charge is the provider's count at list price.
//! * Finding 6: a cache of the provider's account (Gemini's
//!   `cachedContent`) is refused (400 naming the field) before anything is
//!   held or called.
//! * Inline documents: a PDF counts an image a page and its text
//!   decompressed (many near-empty pages; Flate text that expands), on the
//!   three provider kinds; an unreadable or over-long PDF, an inline
//!   video, a document by URL is refused before anything is held.
//! * A property test: generated bodies of both front doors, a random text
//!   in a random place, on each provider kind: the hold is at least the
//!   provider's count and the charge is that count at list price.

use std::time::{Duration, Instant};

use proptest::prelude::{prop_oneof, Just, Strategy};
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use runtime::store::Ledger;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::{d, native_env, Answer, Env, PROVIDER_KEY};
use crate::integrity::refused;

const OPENAI: &str = "sim/sim-gpt";
const CLAUDE: &str = "claude/claude-sim";
const GEMINI: &str = "gem/gemini-sim";

/// A 1×1 PNG, as a `data:` URL (every simulator takes it as an image).
const PNG: &str = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// The test providers file's prices (`harness::native_toml`): input and
/// output USD per million tokens, and the provider's markup (%).
fn prices(model: &str) -> (Decimal, Decimal, Decimal) {
    match model {
        OPENAI => (d("2.00"), d("8.00"), d("20")),
        CLAUDE => (d("3.00"), d("15.00"), d("10")),
        GEMINI => (d("1.25"), d("10.00"), d("10")),
        other => panic!("no prices for {other}"),
    }
}

/// `input` and `output` tokens of `model` at list price and markup, 8 places.
fn list_price(model: &str, input: u64, output: u64) -> Decimal {
    let (i, o, markup) = prices(model);
    let raw = (i * Decimal::from(input) + o * Decimal::from(output)) / d("1000000");
    runtime::billing::with_markup(raw, markup)
}

/// The provider's count in an answer (a chat completion's `usage`, or a
/// Messages answer's, whose four figures add up to the prompt): (prompt,
/// output).
fn counted(a: &Answer) -> (u64, u64) {
    let u = &a.json["usage"];
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    match u.get("prompt_tokens") {
        Some(_) => (n("prompt_tokens"), n("completion_tokens")),
        None => (
            n("input_tokens") + n("cache_read_input_tokens") + n("cache_creation_input_tokens"),
            n("output_tokens"),
        ),
    }
}

/// Asserts that the answer `a` (200) of `model` was charged exactly the
/// provider's count at list price, to the 8th decimal: its usage record
/// (found by the answer's `X-Request-Id`) and the balance's debit from
/// `before`. Returns the count.
async fn charged_as_counted(env: &Env, a: &Answer, model: &str, before: Decimal) -> (u64, u64) {
    a.expect(200);
    let (input, output) = counted(a);
    let id = a.header("x-request-id").expect("X-Request-Id").to_owned();
    let start = Instant::now();
    let row = loop {
        if let Some(u) = env.usage().into_iter().find(|u| u.request_id == id) {
            break u;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "no usage of {id}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let want = list_price(model, input, output);
    assert_eq!(
        (row.product.as_str(), row.quantity, row.charged),
        (model, Decimal::from(input + output), want),
        "{model}: the provider counted {input} + {output}"
    );
    assert_eq!(env.balance(), before - want, "{model}: the debit");
    (input, output)
}

/// A gateway with the three provider kinds on a simulator counting every
/// byte (`strict_tokens`), and credit for a few hundred 200 KB requests.
async fn strict_env() -> Env {
    let env = native_env().await;
    env.sim_config(json!({"strict_tokens": true})).await;
    env.grant("100");
    env
}

/// `POST /api/v1{path}` with the env's key in `x-api-key` (the Messages
/// API's way).
async fn anthropic_post(env: &Env, path: &str, body: &Value) -> Answer {
    crate::messages::post(env, path, &env.key, body).await
}

/// A tool whose parameter schema holds `hidden` at `place` (`examples`,
/// `default`, `enum`: a list for the first and last).
fn schema_with(place: &str, hidden: &Value) -> Value {
    let v = match place {
        "default" => hidden.clone(),
        _ => json!([hidden]),
    };
    json!({"type": "object", "properties": {"city": {"type": "string", place: v}}})
}

/// Finding 1: 200 KB hidden in a tool schema's `examples`, `default` or
/// `enum` as an image-shaped object, or in a chat message typed
/// `image_url`, reaches every provider kind and is charged as the provider
/// counts it, on `/chat/completions` and `/messages`; `count_tokens` says
/// at least that count.
#[tokio::test]
async fn f1_an_image_shape_hides_no_bytes_from_the_hold_or_the_charge() {
    let env = strict_env().await;
    let big = "200 KB of text hidden in an image's shape. ".repeat(4_700);
    let hiders = [
        ("examples", json!({"type": "image", "text": big})),
        ("default", json!({"type": "image_url", "text": big})),
        ("enum", json!({"type": "input_image", "text": big})),
        ("examples", json!({"inlineData": {"data": big}})),
    ];
    for model in [OPENAI, CLAUDE, GEMINI] {
        for (place, hidden) in &hiders {
            let body = json!({"model": model, "max_tokens": 5,
                "messages": [{"role": "user", "content": "Hello there"}],
                "tools": [{"type": "function", "function": {"name": "get_weather",
                    "parameters": schema_with(place, hidden)}}]});
            let before = env.balance();
            let a = env.api("/chat/completions", body).await;
            let (input, _) = charged_as_counted(&env, &a, model, before).await;
            assert!(
                input > 200_000,
                "{model} {place}: the provider counted {input}"
            );
        }
        // A chat message typed as an image, beside its text.
        let body = json!({"model": model, "max_tokens": 5,
            "messages": [{"role": "user", "type": "image_url", "content": big}]});
        let before = env.balance();
        let a = env.api("/chat/completions", body).await;
        let (input, _) = charged_as_counted(&env, &a, model, before).await;
        assert!(input > 200_000, "{model}: the provider counted {input}");
        // The Messages API: a tool's `input_schema`.
        let body = json!({"model": model, "max_tokens": 5,
            "messages": [{"role": "user", "content": "Hello there"}],
            "tools": [{"name": "get_weather",
                "input_schema": schema_with("examples", &json!({"type": "image", "text": big}))}]});
        let before = env.balance();
        let a = anthropic_post(&env, "/messages", &body).await;
        let (input, _) = charged_as_counted(&env, &a, model, before).await;
        assert!(input > 200_000, "{model}: the provider counted {input}");
        // count_tokens (the hold's input) is at least the provider's count.
        let c = anthropic_post(&env, "/messages/count_tokens", &body).await;
        c.expect(200);
        let estimate = c.json["input_tokens"].as_u64().unwrap();
        assert!(
            estimate >= input,
            "{model}: count_tokens {estimate} < {input}"
        );
    }
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
}

/// Finding 6: a cache made on the provider's account (here 200,000
/// tokens, not through the gateway) may not be named by a caller — Gemini's
/// `cachedContent` in `additional_params` or at the top level, its snake
/// case, or Gemini's OpenAI-compatible `extra_body.google.cached_content`
/// through an `openai` provider, streamed or not, on both front doors:
/// 400 naming the field, nothing called upstream, nothing held or charged.
#[tokio::test]
async fn f6_a_providers_cached_content_is_refused_before_anything_is_held() {
    let env = native_env().await;
    env.sim_config(json!({"strict_tokens": true})).await;
    env.grant("1");
    // Made on the provider's account, straight at the provider.
    let cache = json!({"model": "models/gemini-sim",
        "contents": [{"role": "user", "parts": [{"text": "x".repeat(200_000)}]}]});
    let made = env
        .client
        .post(format!("{}/v1beta/cachedContents", env.sim.url()))
        .header("x-goog-api-key", PROVIDER_KEY)
        .json(&cache)
        .send();
    let created: Value = made.await.unwrap().json().await.unwrap();
    let name = created["name"].as_str().unwrap();
    assert!(
        created["usageMetadata"]["totalTokenCount"]
            .as_u64()
            .unwrap()
            > 200_000
    );
    env.clear_sim_log().await;
    let chat = |model: &str| json!({"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "Hello there"}]});
    let with = |mut b: Value, k: &str, v: Value| {
        b[k] = v;
        b
    };
    let cases = [
        (
            with(
                chat(GEMINI),
                "additional_params",
                json!({"cachedContent": name}),
            ),
            "additional_params.cachedContent",
        ),
        (
            with(
                chat(GEMINI),
                "additional_params",
                json!({"cached_content": name}),
            ),
            "additional_params.cached_content",
        ),
        (
            with(chat(GEMINI), "cachedContent", json!(name)),
            "cachedContent",
        ),
        (
            with(chat(GEMINI), "cached_content", json!(name)),
            "cached_content",
        ),
        (
            with(
                with(chat(GEMINI), "stream", json!(true)),
                "additional_params",
                json!({"cachedContent": name}),
            ),
            "additional_params.cachedContent",
        ),
        (
            with(
                chat(OPENAI),
                "additional_params",
                json!({"extra_body": {"google": {"cached_content": name}}}),
            ),
            "additional_params.extra_body.google.cached_content",
        ),
    ];
    for (body, field) in cases {
        let a = env.api("/chat/completions", body).await;
        refused(&env, &a, field, d("1")).await;
    }
    let body = with(
        chat(GEMINI),
        "additional_params",
        json!({"cachedContent": name}),
    );
    let a = anthropic_post(&env, "/messages", &body).await;
    assert_eq!(
        a.json["error"]["type"], "invalid_request_error",
        "{}",
        a.text
    );
    refused(&env, &a, "additional_params.cachedContent", d("1")).await;
    // The same request without the cache: served, charged its own count.
    let a = env.api("/chat/completions", chat(GEMINI)).await;
    let (input, _) = charged_as_counted(&env, &a, GEMINI, d("1")).await;
    assert!(input < 100, "{input}");
    let sent = &env.sim_requests().await[0]["json"];
    assert!(sent.get("cachedContent").is_none(), "{sent}");
}

/// Beside finding 6: a chat body that makes the provider read content it
/// does not carry (a file held on the provider's account, a video by URL)
/// is refused (400 naming where) before anything is held or called, on
/// each door that reaches it; an image by URL is still served.
#[tokio::test]
async fn provider_files_and_unbounded_references_are_refused_before_anything_is_held() {
    let env = native_env().await;
    env.sim_config(json!({"strict_tokens": true})).await;
    env.grant("1");
    env.clear_sim_log().await;
    let with_parts = |model: &str, part: Value| {
        json!({"model": model, "max_tokens": 5, "messages": [{"role": "user",
            "content": [{"type": "text", "text": "Read this"}, part]}]})
    };
    let cases = [
        (
            with_parts(
                OPENAI,
                json!({"type": "file", "file": {"file_id": "file-owned-by-someone"}}),
            ),
            "messages[0].content[1].file.file_id",
        ),
        (
            with_parts(
                GEMINI,
                json!({"type": "image_url", "image_url": {"url": "https://generativelanguage.googleapis.com/v1beta/files/abc123"}}),
            ),
            "contents[0].parts[1].fileData",
        ),
        (
            with_parts(
                GEMINI,
                json!({"type": "image_url", "image_url": {"url": "gs://bucket/frames.png"}}),
            ),
            "contents[0].parts[1].fileData",
        ),
    ];
    for (body, field) in cases {
        let a = env.api("/chat/completions", body.clone()).await;
        refused(&env, &a, field, d("1")).await;
        let mut streamed = body;
        streamed["stream"] = json!(true);
        let a = env.api("/chat/completions", streamed).await;
        refused(&env, &a, field, d("1")).await;
    }
    // An image by URL is an image: served, and charged the provider's count.
    let body = with_parts(
        GEMINI,
        json!({"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}),
    );
    let a = env.api("/chat/completions", body).await;
    charged_as_counted(&env, &a, GEMINI, d("1")).await;
}

// ---- the property test ----

/// A random text: up to 64 characters (escapes, control characters,
/// multi-byte characters among them) repeated up to 300 times.
fn text() -> impl Strategy<Value = String> {
    (
        "[a-zA-Z0-9 .,:{}\\[\\]\"\\\\\n\t\u{1}éλ€😀]{1,64}",
        1usize..300,
    )
        .prop_map(|(s, n)| s.repeat(n))
}

/// `t` as a JSON value of some shape: a string, or an object shaped like
/// an image of one dialect or another (which holds `t` as text).
fn wrapped(t: String) -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(t)),
        Just(json!({"type": "image", "text": t})),
        Just(json!({"type": "image_url", "text": t})),
        Just(json!({"type": "input_image", "text": t})),
        Just(json!({"type": "image_url", "image_url": {"url": PNG}, "text": t})),
        Just(json!({"inlineData": {"data": t}})),
        Just(json!({"inlineData": {"mimeType": "image/png", "data": t}})),
        Just(json!({"fileData": {"fileUri": t}})),
        Just(
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": t}})
        ),
    ]
}

/// Where a generated body puts its text.
#[derive(Debug, Clone, Copy)]
enum Place {
    ToolDescription,
    SchemaExamples,
    SchemaDefault,
    SchemaEnum,
    /// A property's schema replaced by the (image-shaped) value.
    SchemaProperty,
    /// An unknown field of a message (or of a content block).
    MessageField,
    /// An unknown field of the body.
    UnknownField,
    /// An unknown field given through `additional_params`.
    AdditionalParam,
    /// `metadata` (the Messages API's, or through `additional_params`).
    Metadata,
    UserText,
    SystemText,
    /// A text part beside an image part.
    TextPart,
    /// Beside an image, in the image part itself.
    BesideImage,
    /// A tool call's arguments and its result.
    ToolCall,
    /// A chat `response_format` schema.
    ResponseFormat,
}

const PLACES: [Place; 15] = [
    Place::ToolDescription,
    Place::SchemaExamples,
    Place::SchemaDefault,
    Place::SchemaEnum,
    Place::SchemaProperty,
    Place::MessageField,
    Place::UnknownField,
    Place::AdditionalParam,
    Place::Metadata,
    Place::UserText,
    Place::SystemText,
    Place::TextPart,
    Place::BesideImage,
    Place::ToolCall,
    Place::ResponseFormat,
];

/// One generated request: the Messages API's body (`messages`) or a chat
/// completion's.
#[derive(Debug, Clone)]
struct Case {
    messages_api: bool,
    place: Place,
    body: Value,
}

fn cases(model: &'static str) -> impl Strategy<Value = Case> {
    let place = (0..PLACES.len()).prop_map(|i| PLACES[i]);
    (proptest::bool::ANY, place, text())
        .prop_flat_map(|(messages_api, place, t)| {
            (Just(messages_api), Just(place), Just(t.clone()), wrapped(t))
        })
        .prop_map(move |(messages_api, place, t, w)| {
            let body = match messages_api {
                true => messages_body(model, place, t, w),
                false => chat_body(model, place, t, w),
            };
            Case {
                messages_api,
                place,
                body,
            }
        })
}

/// The tool `get_weather`'s description and parameter properties, with
/// `t` (or its shape `w`) there when `place` is in the tool.
fn tool(place: Place, t: &str, w: &Value) -> (Value, Value) {
    let mut props = json!({"city": {"type": "string"}});
    let mut description = json!("The weather of a city");
    match place {
        Place::ToolDescription => description = json!(t),
        Place::SchemaExamples => props["city"]["examples"] = json!([w]),
        Place::SchemaDefault => props["city"]["default"] = w.clone(),
        Place::SchemaEnum => props["city"]["enum"] = json!(["Oslo", w]),
        Place::SchemaProperty => props["note"] = w.clone(),
        _ => {}
    }
    (description, props)
}

/// A chat completion's body with text `t` (or its shape `w`) at `place`.
fn chat_body(model: &str, place: Place, t: String, w: Value) -> Value {
    let (description, props) = tool(place, &t, &w);
    let mut user = json!("Hello there");
    let mut b = json!({"model": model, "max_tokens": 5});
    match place {
        Place::MessageField => {
            b["messages"] =
                json!([{"role": "user", "content": "Hello there", "type": "image_url", "note": w}])
        }
        Place::UnknownField => b["x_note"] = w,
        Place::AdditionalParam => b["additional_params"] = json!({"x_note": w}),
        Place::Metadata => b["additional_params"] = json!({"metadata": {"note": w}}),
        Place::UserText => user = json!(t),
        Place::SystemText => {
            b["messages"] = json!([{"role": "system", "content": t},
                {"role": "user", "content": "Hello there"}])
        }
        Place::TextPart => {
            user = json!([{"type": "text", "text": t}, {"type": "image_url", "image_url": {"url": PNG}}])
        }
        Place::BesideImage => {
            user = json!([{"type": "text", "text": "Look"},
                {"type": "image_url", "image_url": {"url": PNG, "detail": "high"}, "text": w}])
        }
        Place::ToolCall => {
            b["messages"] = json!([{"role": "user", "content": "What does get_weather say?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": json!({"city": t}).to_string()}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": t}])
        }
        Place::ResponseFormat => {
            b["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "s",
                "schema": {"type": "object", "description": t, "examples": [w]}}})
        }
        // The tool's places: [`tool`].
        _ => {}
    }
    if b.get("messages").is_none() {
        b["messages"] = json!([{"role": "user", "content": user}]);
    }
    b["tools"] = json!([{"type": "function", "function": {"name": "get_weather",
        "description": description, "parameters": {"type": "object", "properties": props}}}]);
    b
}

/// A Messages API body with text `t` (or its shape `w`) at `place`.
/// (No `response_format` in it: that place is a schema property here.)
fn messages_body(model: &str, place: Place, t: String, w: Value) -> Value {
    let in_tool = match place {
        Place::ResponseFormat => Place::SchemaProperty,
        other => other,
    };
    let (description, props) = tool(in_tool, &t, &w);
    let mut user = json!("Hello there");
    let png = PNG.trim_start_matches("data:image/png;base64,");
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}});
    let mut b = json!({"model": model, "max_tokens": 5});
    match place {
        Place::MessageField => {
            user = json!([{"type": "text", "text": "Hello there", "note": w}]);
        }
        Place::UnknownField => b["x_note"] = w,
        Place::AdditionalParam => b["additional_params"] = json!({"x_note": w}),
        Place::Metadata => b["metadata"] = json!({"user_id": t, "note": w}),
        Place::UserText => user = json!(t),
        Place::SystemText => b["system"] = json!([{"type": "text", "text": t}]),
        Place::TextPart => user = json!([{"type": "text", "text": t}, image]),
        Place::BesideImage => {
            let mut image = image;
            image["text"] = w;
            user = json!([{"type": "text", "text": "Look"}, image]);
        }
        Place::ToolCall => {
            b["messages"] = json!([{"role": "user", "content": "What does get_weather say?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                    "name": "get_weather", "input": {"city": t}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": t}]}]}])
        }
        // The tool's places: [`tool`].
        _ => {}
    }
    if b.get("messages").is_none() {
        b["messages"] = json!([{"role": "user", "content": user}]);
    }
    b["tools"] = json!([{"name": "get_weather", "description": description,
        "input_schema": {"type": "object", "properties": props}}]);
    b
}

/// The property, on the provider kind of `model` (`shape`: its API): for
/// 24 generated bodies (a deterministic seed; one gateway and simulator),
/// each served one is charged exactly the simulator's worst-case count at
/// list price (a charge never exceeds its hold: a short hold would show as
/// less), and the hold computed from the body the provider received — and,
/// for a Messages body, `count_tokens` — is at least that count. A body the
/// gateway refuses (400) charges nothing; most are served.
async fn property(model: &'static str, shape: runtime::bounds::Shape) {
    let env = strict_env().await;
    let mut runner = TestRunner::deterministic();
    let strategy = cases(model);
    let (mut served, mut refused) = (0, Vec::new());
    for n in 0..24 {
        let case = strategy.new_tree(&mut runner).unwrap().current();
        env.clear_sim_log().await;
        let before = env.balance();
        let rows = env.usage().len();
        let a = match case.messages_api {
            true => anthropic_post(&env, "/messages", &case.body).await,
            false => env.api("/chat/completions", case.body.clone()).await,
        };
        let what = format!(
            "case {n} ({:?}, messages API: {})",
            case.place, case.messages_api
        );
        if a.status == 400 {
            refused.push(format!("{what}: {}", a.text));
            env.wait_no_holds().await;
            assert_eq!(env.balance(), before, "{what}");
            assert_eq!(env.usage().len(), rows, "{what}");
            continue;
        }
        assert_eq!(a.status, 200, "{what}: {}\n{}", a.text, case.body);
        let (input, _) = charged_as_counted(&env, &a, model, before).await;
        let sent = env.sim_requests().await.last().unwrap()["json"].clone();
        let bound = runtime::bounds::chat(sent.as_object().unwrap(), shape, None).unwrap();
        assert!(
            bound.input >= input,
            "{what}: held {} < counted {input}\n{sent}",
            bound.input
        );
        if case.messages_api {
            let c = anthropic_post(&env, "/messages/count_tokens", &case.body).await;
            c.expect(200);
            let estimate = c.json["input_tokens"].as_u64().unwrap();
            assert!(
                estimate >= input,
                "{what}: count_tokens {estimate} < {input}"
            );
        }
        served += 1;
    }
    assert!(
        served >= 20,
        "only {served} of 24 served; refused: {refused:#?}"
    );
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
}

#[tokio::test]
async fn property_the_hold_covers_an_openai_providers_count_and_the_charge_is_it() {
    property(OPENAI, runtime::bounds::Shape::OpenAi).await;
}

#[tokio::test]
async fn property_the_hold_covers_an_anthropic_providers_count_and_the_charge_is_it() {
    property(CLAUDE, runtime::bounds::Shape::Anthropic).await;
}

#[tokio::test]
async fn property_the_hold_covers_a_gemini_providers_count_and_the_charge_is_it() {
    property(GEMINI, runtime::bounds::Shape::Gemini).await;
}

// ---- inline documents ----

/// `pdf` as an OpenAI chat `file` part, after a text part.
fn pdf_body(model: &str, pdf: &[u8]) -> Value {
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD.encode(pdf);
    json!({"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Summarise this"},
        {"type": "file", "file": {"file_data": format!("data:application/pdf;base64,{data}"),
            "filename": "a.pdf"}}]}]})
}

/// An inline PDF is billed by its pages and its text, not its bytes: 400
/// near-empty pages (a few KB), and 2 pages whose Flate-compressed text
/// expands to 800 KB, sent from the chat door to each provider kind (a
/// `file` part passes to an openai provider, becomes an Anthropic
/// `document` and a Gemini `inlineData`): the hold (the bound of the body
/// sent upstream) is at least the simulator's strict count (a page's image
/// and every byte of text), and the charge is that count at list price.
#[tokio::test]
async fn inline_pdfs_are_held_by_their_pages_and_text_and_charged_as_counted() {
    use runtime::bounds::{documents, Shape};
    let env = strict_env().await;
    let line = b"BT /F1 1 Tf 0 0 Td (The same line of text, again and again.) Tj ET\n";
    let pdfs = [
        ("400 near-empty pages", documents::sample(400, b""), 400, 0),
        (
            "2 pages of expanding text",
            documents::sample(2, &line.repeat(6_000)),
            2,
            2 * 6_000 * line.len() as u64,
        ),
    ];
    for (model, shape, per_page) in [
        (OPENAI, Shape::OpenAi, 1445),
        (CLAUDE, Shape::Anthropic, 1600),
        (GEMINI, Shape::Gemini, 258),
    ] {
        for (what, pdf, pages, text) in &pdfs {
            assert!(pdf.len() < 100_000, "{what}: {} bytes", pdf.len());
            env.clear_sim_log().await;
            let before = env.balance();
            let a = env.api("/chat/completions", pdf_body(model, pdf)).await;
            assert_eq!(a.status, 200, "{model} {what}: {}", a.text);
            let (input, _) = charged_as_counted(&env, &a, model, before).await;
            assert!(
                input >= pages * per_page + text,
                "{model} {what}: the provider counted {input}"
            );
            let sent = env.sim_requests().await.last().unwrap()["json"].clone();
            let bound = runtime::bounds::chat(sent.as_object().unwrap(), shape, None).unwrap();
            assert!(
                bound.input >= input,
                "{model} {what}: held {} < counted {input}",
                bound.input
            );
        }
    }
    assert_eq!(env.store().held(env.user_id).unwrap(), Decimal::ZERO);
}

/// A PDF that does not parse, or of more pages than the gateway reads, a
/// file part other than an inline PDF to a native provider, an inline
/// video or Word file, a document by URL: 400 naming the part, nothing called upstream,
/// held or charged. An inline text file is served and charged as counted.
#[tokio::test]
async fn unreadable_or_overlong_pdfs_are_refused_before_anything_is_held() {
    let env = native_env().await;
    env.sim_config(json!({"strict_tokens": true})).await;
    env.grant("1");
    env.clear_sim_log().await;
    let broken = b"%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n".repeat(50);
    let long = runtime::bounds::documents::sample(1001, b"");
    let cases = [
        (
            OPENAI,
            &broken,
            "messages[0].content[1].file.file_data: not a readable PDF",
        ),
        (
            CLAUDE,
            &broken,
            "messages[0].content[1].source.data: not a readable PDF",
        ),
        (
            GEMINI,
            &broken,
            "contents[0].parts[1].inlineData: not a readable PDF",
        ),
        (
            OPENAI,
            &long,
            "messages[0].content[1].file.file_data: too many pages",
        ),
        (
            GEMINI,
            &long,
            "contents[0].parts[1].inlineData: too many pages",
        ),
    ];
    for (model, pdf, field) in cases {
        let a = env.api("/chat/completions", pdf_body(model, pdf)).await;
        refused(&env, &a, field, d("1")).await;
    }
    let file = |model: &str, part: Value| {
        let mut body = pdf_body(model, b"");
        body["messages"][0]["content"][1] = part;
        body
    };
    let text =
        json!({"type": "file", "file": {"file_data": "data:text/plain;base64,cGxhaW4gdGV4dA=="}});
    let others = [
        // Another file to a native provider: only a PDF is translated.
        (file(CLAUDE, text.clone()), "file: only a PDF given inline"),
        (file(GEMINI, text.clone()), "file: only a PDF given inline"),
        // An inline video: billed by its frames, which its bytes do not bound.
        (
            file(
                OPENAI,
                json!({"type": "file", "file": {"file_data": "data:video/mp4;base64,AAAAIGZ0eXBpc29t"}}),
            ),
            "messages[0].content[1].file.file_data: an inline video",
        ),
        // Another document type: zipped text, pages rendered.
        (
            file(OPENAI, json!({"type": "file", "file": {"file_data":
                "data:application/vnd.openxmlformats-officedocument.wordprocessingml.document;base64,UEsDBBQ="}})),
            "messages[0].content[1].file.file_data: an inline document of type application/vnd.openxmlformats",
        ),
        // A document by URL: not in the body.
        (
            file(
                OPENAI,
                json!({"type": "input_file", "file_url": "https://x.test/a.pdf"}),
            ),
            "messages[0].content[1].file_url: a document by URL",
        ),
    ];
    for (body, field) in others {
        let a = env.api("/chat/completions", body).await;
        refused(&env, &a, field, d("1")).await;
    }
    // A text file counts its bytes: served, charged the provider's count.
    let a = env.api("/chat/completions", file(OPENAI, text)).await;
    charged_as_counted(&env, &a, OPENAI, d("1")).await;
}
