//! Observability: the OpenAPI document generated from the table (checked-in
//! snapshot, like the route listing), `/openapi.json`, `X-Request-Id` on
//! every answer. Set `UPDATE_SNAPSHOTS=1` to rewrite the snapshot after an
//! intended change.

use serde_json::Value;

use crate::harness::{workspace_root, Answer, Env};

async fn send(rb: reqwest::RequestBuilder) -> Answer {
    Answer::from(rb.send().await.expect("gateway answered")).await
}

fn document() -> Value {
    serde_json::from_str(server::routes::OPENAPI_JSON).expect("OPENAPI_JSON is JSON")
}

#[test]
fn openapi_document_matches_snapshot() {
    let pretty = serde_json::to_string_pretty(&document()).unwrap() + "\n";
    let path = workspace_root().join("tests/snapshots/openapi.json");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &pretty).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .expect("tests/snapshots/openapi.json (UPDATE_SNAPSHOTS=1 creates it)");
    assert!(
        pretty == expected,
        "the OpenAPI document changed; review and rerun with UPDATE_SNAPSHOTS=1"
    );
}

#[test]
fn openapi_document_lists_every_route_with_typed_bodies() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    for spec in server::routes::ROUTES {
        // A tail parameter `{name*}` is OpenAPI's `{name}`.
        let path = spec.path.replace("*}", "}");
        let op = &doc["paths"][path.as_str()][spec.method.as_str().to_ascii_lowercase()];
        assert_eq!(
            op["operationId"],
            spec.id,
            "{} {}",
            spec.method.as_str(),
            spec.path
        );
        let params: Vec<&str> = op["parameters"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p["name"].as_str()).collect())
            .unwrap_or_default();
        for q in spec.query {
            assert!(params.contains(&q.name), "{}: query {}", spec.id, q.name);
        }
        if !spec.body.is_empty() {
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            for f in spec.body {
                let field = &schema["properties"][f.name];
                assert!(field.is_object(), "{}: body field {}", spec.id, f.name);
                let required = schema["required"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|n| n == f.name));
                assert_eq!(required, f.required, "{}: {} required", spec.id, f.name);
            }
        }
        let error = op["responses"]["4XX"]["$ref"].as_str().unwrap();
        let expected = match spec.errors {
            runtime::spec::ErrorFormat::Detail => "ErrorDetail",
            runtime::spec::ErrorFormat::Error => "ErrorFormat1",
            runtime::spec::ErrorFormat::Envelope => "ErrorEnvelope",
            runtime::spec::ErrorFormat::Anthropic => "ErrorAnthropic",
            runtime::spec::ErrorFormat::Gemini => "ErrorGemini",
            runtime::spec::ErrorFormat::OpenAi => "ErrorOpenAi",
        };
        assert!(error.ends_with(expected), "{}: {error}", spec.id);
    }
    // One typed body, in detail: the synthesis row.
    let synth = &doc["paths"]["/api/v1/voice/tts/synthesize"]["post"];
    let text = &synth["requestBody"]["content"]["application/json"]["schema"]["properties"]["text"];
    assert_eq!(text["type"], "string");
    assert_eq!(text["maxLength"], 10000);
    assert_eq!(
        synth["responses"]["2XX"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/SynthesisResponse"
    );
    // Streamed model answers are server-sent events (found by schemathesis).
    let chat = &doc["paths"]["/api/v1/chat/completions"]["post"]["responses"]["2XX"]["content"];
    assert!(chat["text/event-stream"].is_object(), "{chat}");
}

#[tokio::test]
async fn openapi_json_is_served() {
    let env = Env::start().await;
    let a = send(env.client.get(env.url("/openapi.json"))).await;
    a.expect(200);
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_eq!(a.json, document());
    assert!(a.header("x-request-id").is_some());
}

#[tokio::test]
async fn every_answer_carries_a_request_id() {
    let env = Env::start().await;
    let is_id = |v: Option<&str>| v.is_some_and(|v| v.len() == 28 && v.starts_with("res_"));
    // 404 (both areas), 405, /healthz, a routed answer.
    for (method, path, status) in [
        ("GET", "/api/v1/voice/no/such/route", 404),
        ("GET", "/api/v1/no/such/route", 404),
        ("GET", "/nothing-here", 404),
        ("PATCH", "/api/v1/voice/tts/synthesize", 405),
        ("GET", "/healthz", 200),
        ("GET", "/api/v1/voice/tts/voices", 200),
    ] {
        let a = send(
            env.client
                .request(method.parse().unwrap(), env.url(path))
                .bearer_auth(&env.key),
        )
        .await;
        assert_eq!(a.status, status, "{method} {path}: {}", a.text);
        assert!(
            is_id(a.header("x-request-id")),
            "{method} {path}: {:?}",
            a.headers
        );
    }
    // The envelope's request_id is the header's.
    let a = send(env.client.get(env.url("/api/v1/no/such/route"))).await;
    assert_eq!(a.json["request_id"].as_str(), a.header("x-request-id"));
}

#[tokio::test]
async fn metrics_count_a_request_by_route_and_status() {
    let env = Env::start().await;
    env.grant("10");
    env.get("/tts/voices").await.expect(200);
    send(env.client.get(env.url("/api/v1/voice/no/such/route"))).await;
    env.post("/tts/synthesize", crate::harness::synth_body("Hello there"))
        .await
        .expect(200);
    let a = send(env.client.get(env.url("/metrics"))).await;
    a.expect(200);
    assert!(a.header("content-type").unwrap().starts_with("text/plain"));
    let count = |route: &str, status: &str| -> f64 {
        a.text
            .lines()
            .filter(|l| l.starts_with("gateway_requests_total{"))
            .filter(|l| l.contains(&format!("route=\"{route}\"")))
            .filter(|l| l.contains(&format!("status=\"{status}\"")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert!(count("tts.voices.list", "200") >= 1.0, "{}", a.text);
    assert!(count("unmatched", "404") >= 1.0, "{}", a.text);
    assert!(count("tts.synthesize", "200") >= 1.0, "{}", a.text);
    let charged: f64 = a
        .text
        .lines()
        .filter(|l| l.starts_with("gateway_charged_microusd_total{capability=\"tts\"}"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(charged > 0.0, "{}", a.text);
    for name in [
        "gateway_request_duration_seconds_bucket",
        "gateway_upstream_duration_seconds_bucket",
        "gateway_record_commit_duration_seconds_bucket",
    ] {
        assert!(a.text.contains(name), "{name} missing:\n{}", a.text);
    }
}

#[tokio::test]
async fn json_logs_carry_the_request_id_on_every_line_of_a_request() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::Duration;
    let dir = crate::harness::TempDir::new("json-log");
    let sim = crate::harness::start_sim().await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(dir.gateway_env())
        .env("GATEWAY_LOG_FORMAT", "json")
        .env("RUST_LOG", "debug")
        .env("GATEWAY_ADDR", "127.0.0.1:0")
        .env("PROVIDER_API_KEY", "sk-json-log-test")
        .env("PROVIDER_BASE_URL", sim.base_url())
        .env("PROVIDER_SYNTH_URL", sim.synth_url())
        .arg("serve")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("a log line")
    };
    let parse = |line: &str| -> Value {
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"))
    };
    let addr = loop {
        let line = next();
        let v = parse(&line);
        if let Some(m) = v["message"].as_str().filter(|m| m.contains("listening on")) {
            break m.rsplit("listening on ").next().unwrap().trim().to_owned();
        }
    };
    // A refused request (no key) logs "request refused" inside its span.
    let a =
        send(reqwest::Client::new().get(format!("http://{addr}/api/v1/voice/tts/voices"))).await;
    a.expect(401);
    let id = a.header("x-request-id").unwrap().to_owned();
    let mut lines = Vec::new();
    loop {
        let v = parse(&next());
        let refused = v["message"] == "request refused";
        lines.push(v);
        if refused {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let of_request: Vec<&Value> = lines
        .iter()
        .filter(|v| v["span"]["name"] == "request")
        .collect();
    assert!(!of_request.is_empty(), "{lines:#?}");
    for v in &of_request {
        assert_eq!(v["span"]["request_id"], id.as_str(), "{v}");
        assert_eq!(v["span"]["route"], "tts.voices.list", "{v}");
    }
    let refused = lines.last().unwrap();
    assert_eq!(refused["span"]["request_id"], id.as_str(), "{refused}");
}

#[test]
fn an_unknown_log_format_stops_the_gateway() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gateway"))
        .env("GATEWAY_LOG_FORMAT", "yaml")
        .arg("routes")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("GATEWAY_LOG_FORMAT"), "{err}");
}

#[tokio::test]
async fn docs_page_is_served_and_lists_every_route() {
    let env = Env::start().await;
    let a = send(env.client.get(env.url("/docs"))).await;
    a.expect(200);
    assert_eq!(a.header("content-type"), Some("text/html; charset=utf-8"));
    assert_eq!(a.text, server::routes::DOCS_HTML);
    for spec in server::routes::ROUTES {
        assert!(
            a.text.contains(&format!("id=\"{}\"", spec.id)),
            "{}",
            spec.id
        );
        assert!(
            a.text
                .contains(&format!("<code>{}</code>", spec.path.replace("*}", "}"))),
            "{}",
            spec.path
        );
    }
    // Self-contained: no script and no asset from elsewhere.
    assert!(!a.text.contains("<script"));
    assert!(!a.text.contains("src="));
    assert!(!a.text.contains("http://") && !a.text.contains("https://"));
}

/// The `/docs` page as headless Chromium renders it (its DOM after
/// loading): it lists every route. Skipped when `chromium` is not installed,
/// unless `GATEWAY_TEST_REQUIRE_CHROMIUM` is set (the test command sets it
/// after `scripts/setup-tools.sh` installed Debian's `chromium`).
#[tokio::test]
async fn docs_page_renders_in_headless_chromium() {
    let Some(chromium) = crate::harness::chromium("/docs") else {
        return;
    };
    let env = Env::start().await;
    let url = env.url("/docs");
    let profile = crate::harness::TempDir::new("chromium");
    let mut cmd = std::process::Command::new("timeout");
    cmd.arg("120")
        .arg(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.0.display()))
        .args(["--dump-dom", &url]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("chromium ran");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("<ul id=\"routes\">"),
        "no route list in the rendered page: {}\n{}",
        dom,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        dom.matches("<li class=\"route\">").count(),
        server::routes::ROUTES.len(),
        "{dom}"
    );
    for spec in server::routes::ROUTES {
        assert!(
            dom.contains(&format!("<section id=\"{}\">", spec.id)),
            "{}",
            spec.id
        );
    }
}
