//! OpenTelemetry traces (issue 26): spans exported over OTLP/HTTP to a test
//! receiver (the harness's, decoding the protobuf with `opentelemetry-proto`),
//! a request span per model request with a child per upstream attempt, the
//! GenAI attributes and ours, and none of the forbidden values; flushed on
//! graceful shutdown; nothing without the variable.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use runtime::store::History;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::{Env, Receiver, PROVIDER_KEY};
use crate::routing::routes_env;

/// A caller's W3C trace and span ids (`traceparent`).
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// A prompt no attribute may carry.
const PROMPT: &str = "Tell me about the quartz zebra 7781";

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 16})
}

/// The routes' gateway exporting to `recv` with a batch delay of `delay`.
async fn traced_env(recv: &Receiver, delay: Duration) -> Env {
    let endpoint = format!("{}/v1/traces", recv.url.trim_end_matches("/hook"));
    routes_env(|c| {
        c.traces = Some(runtime::traces::Settings {
            endpoint,
            schedule_delay: Some(delay),
        })
    })
    .await
}

/// Every span the receiver was sent (each body decoded).
fn spans(recv: &Receiver) -> Vec<Span> {
    let seen = recv.seen.lock().unwrap();
    let mut out = Vec::new();
    for (_, body) in seen.iter() {
        let req = ExportTraceServiceRequest::decode(&body[..]).expect("an OTLP protobuf body");
        for rs in req.resource_spans {
            for ss in rs.scope_spans {
                out.extend(ss.spans);
            }
        }
    }
    out
}

/// The text of an attribute value (arrays joined with `,`).
fn text(v: &AnyValue) -> String {
    match &v.value {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(Any::ArrayValue(a)) => a.values.iter().map(text).collect::<Vec<_>>().join(","),
        other => format!("{other:?}"),
    }
}

fn attr(s: &Span, key: &str) -> Option<String> {
    s.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .map(text)
}

fn int(s: &Span, key: &str) -> i64 {
    attr(s, key)
        .unwrap_or_else(|| panic!("{key} missing on {}", s.name))
        .parse()
        .unwrap()
}

/// The request span of `request_id` and its attempt spans (by attempt),
/// once the receiver has them all (`attempts` children): polled, not timed.
async fn request_spans(recv: &Receiver, request_id: &str, attempts: usize) -> (Span, Vec<Span>) {
    let start = Instant::now();
    loop {
        let all = spans(recv);
        let req = all
            .iter()
            .find(|s| attr(s, "gateway.request_id").as_deref() == Some(request_id));
        if let Some(req) = req {
            let mut children: Vec<Span> = all
                .iter()
                .filter(|s| s.parent_span_id == req.span_id && s.trace_id == req.trace_id)
                .cloned()
                .collect();
            if children.len() >= attempts {
                children.sort_by_key(|s| {
                    attr(s, "gateway.attempt").and_then(|a| a.parse::<i64>().ok())
                });
                return (req.clone(), children);
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the spans of {request_id} never arrived: {:#?}",
            all.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The usage row of `request_id` (its charge) and its model-usage row.
async fn usage_of(env: &Env, request_id: &str) -> (Decimal, runtime::store::ModelUsageRow) {
    let start = Instant::now();
    loop {
        let rows = env.store().model_usage_rows().unwrap();
        let usage = env.usage();
        let u = usage.iter().find(|u| u.request_id == request_id);
        if let (Some(u), Some(m)) = (u, rows.iter().find(|r| r.request_id == request_id)) {
            return (u.charged, m.clone());
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no usage row");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The serving attempt and the request carry the answer's usage and cost.
fn assert_usage(s: &Span, charged: Decimal, row: &runtime::store::ModelUsageRow) {
    let input = row.input_tokens + row.cache_read_tokens + row.cache_write_tokens;
    assert_eq!(int(s, "gen_ai.usage.input_tokens"), input, "{}", s.name);
    assert_eq!(int(s, "gen_ai.usage.output_tokens"), row.output_tokens);
    assert!(row.output_tokens > 0);
    let cost: Decimal = attr(s, "gateway.cost").unwrap().parse().unwrap();
    assert_eq!(cost, charged, "gateway.cost of {}", s.name);
    assert_eq!(attr(s, "gen_ai.response.model").as_deref(), Some("gpt"));
    let reasons = attr(s, "gen_ai.response.finish_reasons").unwrap_or_default();
    assert!(!reasons.is_empty(), "finish reasons on {}", s.name);
}

#[tokio::test]
async fn a_routed_request_exports_its_span_and_one_child_per_attempt_without_any_text_or_key() {
    let recv = crate::harness::receiver(0).await;
    let env = traced_env(&recv, Duration::from_millis(50)).await;
    // (a) a fails with 503, b serves.
    env.fault(json!({"path": "/p/a/*", "fault": {"status": 503}}))
        .await;
    let a = env.api("/chat/completions", chat("pri")).await;
    a.expect(200);
    let answer = a.json["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let rid = a.header("x-request-id").unwrap().to_owned();
    let (req, attempts) = request_spans(&recv, &rid, 2).await;
    assert_eq!(req.name, "chat pri");
    assert_eq!(attr(&req, "gen_ai.operation.name").as_deref(), Some("chat"));
    assert_eq!(attr(&req, "gen_ai.request.model").as_deref(), Some("pri"));
    assert_eq!(
        attr(&req, "gen_ai.provider.name").as_deref(),
        Some("openai")
    );
    assert_eq!(attr(&req, "gateway.route").as_deref(), Some("pri"));
    assert_eq!(attr(&req, "gateway.deployment").as_deref(), Some("b/gpt"));
    assert_eq!(int(&req, "http.response.status_code"), 200);
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    let (first, second) = (&attempts[0], &attempts[1]);
    assert_eq!(int(first, "gateway.attempt"), 1);
    assert_eq!(attr(first, "gateway.deployment").as_deref(), Some("a/gpt"));
    assert_eq!(
        attr(first, "gateway.outcome").as_deref(),
        Some("status_5xx")
    );
    assert_eq!(int(first, "http.response.status_code"), 503);
    assert!(attr(first, "gen_ai.usage.output_tokens").is_none());
    assert_eq!(int(second, "gateway.attempt"), 2);
    assert_eq!(attr(second, "gateway.deployment").as_deref(), Some("b/gpt"));
    assert_eq!(attr(second, "gateway.outcome").as_deref(), Some("ok"));
    assert_eq!(
        attr(second, "gen_ai.provider.name").as_deref(),
        Some("openai")
    );
    assert_eq!(int(second, "http.response.status_code"), 200);
    let (charged, row) = usage_of(&env, &rid).await;
    assert_eq!((row.model.as_str(), row.attempts), ("b/gpt", 2));
    assert_usage(second, charged, &row);
    assert_usage(&req, charged, &row);

    // (b) a streamed chat: its span ends with the stream, with its tokens.
    let mut body = chat("b/gpt");
    body["stream"] = json!(true);
    let r = env.stream_chat(&env.key, body).await;
    assert_eq!(r.status().as_u16(), 200);
    let rid2 = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    let streamed = r.text().await.unwrap();
    assert!(streamed.contains("[DONE]"));
    let (req2, attempts2) = request_spans(&recv, &rid2, 1).await;
    assert_eq!(req2.name, "chat b/gpt");
    assert_eq!(
        attr(&attempts2[0], "gateway.outcome").as_deref(),
        Some("ok")
    );
    let (charged2, row2) = usage_of(&env, &rid2).await;
    assert_usage(&req2, charged2, &row2);
    assert_usage(&attempts2[0], charged2, &row2);

    // (c) nothing anywhere carries the prompt, the answer, a key or the
    // caller's identity: every attribute value, and every byte sent.
    let forbidden = [
        PROMPT,
        "quartz zebra",
        answer.as_str(),
        PROVIDER_KEY,
        env.key.as_str(),
        "alice@example.com",
        "Bearer",
    ];
    for s in spans(&recv) {
        for kv in &s.attributes {
            let v = kv.value.as_ref().map(text).unwrap_or_default();
            for f in forbidden {
                assert!(!v.contains(f), "{} = {v:?} carries {f:?}", kv.key);
            }
            let key = kv.key.to_ascii_lowercase();
            assert!(
                !["prompt", "content", "authorization", "key", "email", "user"]
                    .iter()
                    .any(|w| key.contains(w)),
                "attribute {key} is not allowed"
            );
        }
    }
    for (_, body) in recv.seen.lock().unwrap().iter() {
        for f in forbidden {
            assert!(
                !body.windows(f.len()).any(|w| w == f.as_bytes()),
                "an export carries {f:?}"
            );
        }
    }
    stop(env).await;
}

/// Stops the gateway gracefully (what `gateway serve` does on SIGTERM).
async fn stop(env: Env) {
    let Env { gw, sim, dir, .. } = env;
    gw.stop().await;
    drop((sim, dir));
}

#[tokio::test]
async fn spans_still_in_the_batch_are_exported_on_graceful_shutdown() {
    let recv = crate::harness::receiver(0).await;
    // A batch delay no test waits for: only the shutdown's flush sends it.
    let env = traced_env(&recv, Duration::from_secs(3600)).await;
    // The caller's W3C trace context: the request span is its child.
    let r = env
        .client
        .post(env.url("/api/v1/chat/completions"))
        .bearer_auth(&env.key)
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .json(&chat("b/gpt"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let rid = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    let (charged, row) = usage_of(&env, &rid).await;
    // Anthropic's Messages API, the other chat front door.
    let m = env
        .api(
            "/messages",
            json!({"model": "b/gpt", "max_tokens": 16, "messages": [{"role": "user", "content": PROMPT}]}),
        )
        .await;
    m.expect(200);
    let mid = m.header("x-request-id").unwrap().to_owned();
    let (m_charged, m_row) = usage_of(&env, &mid).await;
    stop(env).await;
    let (req, attempts) = request_spans(&recv, &rid, 1).await;
    assert_eq!(req.name, "chat b/gpt");
    assert_eq!(hex::encode(&req.trace_id), CALLER_TRACE);
    assert_eq!(hex::encode(&req.parent_span_id), CALLER_SPAN);
    assert_usage(&attempts[0], charged, &row);
    let (req, attempts) = request_spans(&recv, &mid, 1).await;
    assert_ne!(
        hex::encode(&req.trace_id),
        CALLER_TRACE,
        "a trace of its own"
    );
    assert!(req.parent_span_id.is_empty());
    assert_eq!(req.name, "chat b/gpt");
    assert_eq!(
        attr(&req, "http.route").as_deref(),
        Some("/api/v1/messages")
    );
    assert_usage(&req, m_charged, &m_row);
    assert_usage(&attempts[0], m_charged, &m_row);
}

#[tokio::test]
async fn without_the_variable_nothing_is_traced() {
    let lookup = |vars: &'static [(&'static str, &'static str)]| {
        runtime::config::Config::from_lookup(move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
        .unwrap()
    };
    assert!(lookup(&[]).traces.is_none());
    assert!(lookup(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "")])
        .traces
        .is_none());
    let on = lookup(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")]);
    assert_eq!(
        on.traces.unwrap().endpoint,
        "http://collector:4318/v1/traces"
    );
    // The harness's gateways have no exporter: a request builds no span.
    let env = routes_env(|_| {}).await;
    assert!(env.gw.gateway.traces.is_none());
    env.api("/chat/completions", chat("b/gpt"))
        .await
        .expect(200);
}

/// Issue #38: when no attempt serves, the request's span carries every
/// attempt's error (what failed, on which side, the cause; a provider's
/// own message only in the log), each attempt's span its own, and none
/// carries the upstream key, even when the provider's error echoes it; the
/// caller gets one answer, the last attempt's.
#[tokio::test]
async fn when_every_attempt_fails_the_request_span_carries_each_attempts_error_without_the_key() {
    let recv = crate::harness::receiver(0).await;
    let env = traced_env(&recv, Duration::from_millis(50)).await;
    let echoed = format!("overloaded, key {PROVIDER_KEY} is busy");
    env.fault(json!({"path": "/p/a/*", "fault": {"status": 503, "body": {"error": {"message": echoed}}}, "count": 0}))
        .await;
    env.fault(json!({"path": "/p/b/*", "fault": "reset", "count": 0}))
        .await;
    let a = env.api("/chat/completions", chat("pri")).await;
    // The caller's answer is the last attempt's, as before (spec §7).
    a.expect(500);
    assert_eq!(
        a.json["message"],
        "network error contacting the model provider: connection error"
    );
    let answer = a.json.to_string();
    assert!(!answer.contains(PROVIDER_KEY), "{answer}");
    let rid = a.header("x-request-id").unwrap().to_owned();
    // a (503), b (reset), b again (retried: the last candidate).
    let (req, attempts) = request_spans(&recv, &rid, 3).await;
    assert_eq!(attempts.len(), 3, "{attempts:#?}");
    let errors = req
        .attributes
        .iter()
        .find(|kv| kv.key == "gateway.attempt_errors")
        .and_then(|kv| kv.value.as_ref())
        .map(|v| match &v.value {
            Some(Any::ArrayValue(a)) => a.values.iter().map(text).collect::<Vec<_>>(),
            other => panic!("gateway.attempt_errors is not an array: {other:?}"),
        })
        .expect("gateway.attempt_errors on the request span");
    assert_eq!(errors.len(), 3, "{errors:#?}");
    // The provider's own message stays in the log: it may quote the request.
    assert_eq!(
        errors[0], "#1 a/gpt: status_5xx (503, provider)",
        "{errors:#?}"
    );
    for (i, e) in errors[1..].iter().enumerate() {
        let head = format!("#{} b/gpt: network (network): ", i + 2);
        assert!(e.starts_with(&head), "{errors:#?}");
    }
    assert_eq!(
        attr(&attempts[0], "gateway.outcome").as_deref(),
        Some("status_5xx")
    );
    assert_eq!(
        attr(&attempts[0], "gateway.error").as_deref(),
        Some(&errors[0]["#1 a/gpt: ".len()..])
    );
    assert_eq!(
        attr(&attempts[1], "gateway.outcome").as_deref(),
        Some("network")
    );
    for s in spans(&recv) {
        for kv in &s.attributes {
            let v = kv.value.as_ref().map(text).unwrap_or_default();
            assert!(!v.contains(PROVIDER_KEY), "{} = {v:?}", kv.key);
        }
    }
    // Nothing was charged for a request no deployment served.
    assert!(
        env.usage().iter().all(|u| u.request_id != rid),
        "a usage row for a failed request"
    );
    stop(env).await;
}

/// A realtime session (issue #42): its span (named for the model, ended at
/// the session's end with status 101) and a child span per response, each
/// with its tokens and its charge, the usage record's.
#[tokio::test]
async fn a_realtime_session_exports_its_span_and_one_child_per_response() {
    use crate::realtime::{next_event, send};
    let recv = crate::harness::receiver(0).await;
    let endpoint = format!("{}/v1/traces", recv.url.trim_end_matches("/hook"));
    let env = crate::harness::env_with_providers(crate::realtime::realtime_toml, |c| {
        c.traces = Some(runtime::traces::Settings {
            endpoint,
            schedule_delay: Some(Duration::from_millis(50)),
        })
    })
    .await;
    env.grant("1");
    let (mut ws, h) = crate::realtime::session(&env, &env.key).await;
    let session = h["x-request-id"].to_str().unwrap().to_owned();
    for _ in 0..2 {
        send(
            &mut ws,
            json!({"type": "response.create", "response": {"max_output_tokens": 12}}),
        )
        .await;
        while next_event(&mut ws).await["type"] != "response.done" {}
    }
    drop(ws);
    let (span, children) = request_spans(&recv, &session, 2).await;
    assert_eq!(span.name, "realtime sim/gpt-realtime");
    let mut names: Vec<_> = children.iter().map(|c| c.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["response 1", "response 2"]);
    for c in &children {
        let id = format!("{session}.{}", c.name.trim_start_matches("response "));
        let charged = env
            .usage()
            .into_iter()
            .find(|u| u.request_id == id)
            .unwrap()
            .charged;
        assert_eq!(attr(c, "gateway.cost").unwrap(), format!("{charged:.8}"));
        assert!(int(c, "gen_ai.usage.output_tokens") > 0);
    }
}
