//! The MCP gateway (issue #44): the official `mcp` Python SDK's Streamable
//! HTTP client (tests/mcp_sdk/client.py) through the gateway to two MCP
//! servers started with the same SDK (tests/mcp_sdk/server.py): the key's
//! allow-list filters `tools/list` and refuses a call outside it (never
//! forwarded), a priced call is charged to the 8th decimal and recorded
//! without its arguments, progress arrives before the result, the
//! server's credential never reaches a caller; another user's session is a
//! 404; a server that is down is a JSON-RPC error naming it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use runtime::store::{Keys, Ledger, McpSessions};
use serde_json::{json, Value};

use crate::harness::*;

/// The credential the servers require (sent by the gateway only).
const TOKEN: &str = "mcp-upstream-secret-0123456789";
const TOKEN_VAR: &str = "GW_IT_MCP_AUTH";

/// An MCP server of tests/mcp_sdk/server.py on a free port, and what it
/// printed (one line per tool it ran).
struct Server {
    child: Child,
    port: u16,
    out: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    fn start(name: &str) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("python3")
            .arg(workspace_root().join("tests/mcp_sdk/server.py"))
            .args([name, &port.to_string()])
            .env("MCP_TEST_TOKEN", TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs tests/mcp_sdk/server.py (scripts/setup-tools.sh installs mcp)");
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lines = BufReader::new(child.stdout.take().unwrap());
        let o = out.clone();
        std::thread::spawn(move || {
            for l in lines.lines().map_while(Result::ok) {
                o.lock().unwrap().push(l);
            }
        });
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the MCP server {name} did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Server { child, port, out }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn printed(&self) -> Vec<String> {
        self.out.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A gateway with the two servers (and one that is down) in its MCP file.
async fn mcp_env(docs: &Server, github: &Server) -> Env {
    mcp_env_with(docs, github, |_| {}).await
}

/// [`mcp_env`], its configuration adjusted by `f`.
async fn mcp_env_with(
    docs: &Server,
    github: &Server,
    f: impl FnOnce(&mut runtime::config::Config),
) -> Env {
    std::env::set_var(TOKEN_VAR, format!("Bearer {TOKEN}"));
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let file = format!(
        r#"
[[server]]
id = "docs"
url = "{}"
headers_env = {{ Authorization = "{TOKEN_VAR}" }}
tools = ["add", "slow", "whoami"]

[[server]]
id = "github"
url = "{}"
headers_env = {{ Authorization = "{TOKEN_VAR}" }}
per_call = {{ create_issue = "0.01" }}
tools = ["create_issue", "search"]

[[server]]
id = "down"
url = "http://127.0.0.1:{down}/mcp"
"#,
        docs.url(),
        github.url()
    );
    llm_env(move |c| {
        let path = c.data_dir.join("mcp.toml");
        std::fs::write(&path, file).unwrap();
        c.mcp.servers_file = Some(path);
        f(c);
    })
    .await
}

/// Runs tests/mcp_sdk/client.py as `key` (its checks by name).
async fn client(env: &Env, key: &str, step: &str) -> std::collections::HashMap<String, Value> {
    let vars = vec![
        ("GATEWAY_MCP_URL", env.url("/api/v1/mcp")),
        ("GATEWAY_KEY", key.to_owned()),
        ("MCP_STEP", step.to_owned()),
    ];
    let out = run_script("python3", "tests/mcp_sdk/client.py", vars).await;
    assert!(
        !out.contains(TOKEN),
        "the server's credential reached the caller: {out}"
    );
    checks(&out)
}

#[tokio::test]
async fn the_mcp_sdk_reaches_two_servers_through_the_gateway() {
    let (docs, github) = (Server::start("docs"), Server::start("github"));
    let env = mcp_env(&docs, &github).await;
    env.grant("1");
    let key_id = env.store().keys_of(env.user_id).unwrap()[0].id;
    let allow = "docs/*,github/create_issue";
    assert!(env
        .store()
        .set_key_mcp_tools(Some(env.user_id), key_id, Some(allow))
        .unwrap());
    let ok = client(&env, &env.key, "all").await;
    // The allow-list and the servers' `tools` filter what is listed.
    assert_eq!(ok["docs_tools"], json!(["add", "slow", "whoami"]));
    assert_eq!(ok["github_tools"], json!(["create_issue"]));
    assert_eq!(ok["add"], json!({"text": "5", "error": false}));
    // Progress before the result, each step.
    assert_eq!(ok["slow"]["text"], "slow done");
    assert_eq!(
        ok["slow"]["progress"],
        json!([[1.0, 3.0], [2.0, 3.0], [3.0, 3.0]])
    );
    // The server saw its credential; the caller sees it scrubbed.
    assert_eq!(
        ok["whoami"]["text"], "Bearer [redacted]",
        "{:?}",
        ok["whoami"]
    );
    assert_eq!(ok["create_issue"]["text"], "issue opened: hello");
    assert_eq!(
        ok["search_refused"]["refused"], true,
        "{:?}",
        ok["search_refused"]
    );
    // The virtual server: every server as one, names prefixed, calls
    // routed to their server, the allow-list applied the same way.
    assert_eq!(
        ok["virtual_tools"],
        json!([
            "docs__add",
            "docs__slow",
            "docs__whoami",
            "github__create_issue"
        ])
    );
    assert_eq!(ok["virtual_add"], json!({"text": "42", "error": false}));
    assert_eq!(
        ok["virtual_slow"]["progress"],
        json!([[1.0, 2.0], [2.0, 2.0]])
    );
    assert_eq!(
        ok["virtual_issue"]["text"],
        "issue opened: through the virtual server"
    );
    assert_eq!(ok["virtual_refused"]["refused"], true);
    // Refused calls never reached the server.
    let ran = github.printed();
    assert!(
        ran.iter().any(|l| l == "called create_issue hello"),
        "{ran:?}"
    );
    assert!(
        !ran.iter().any(|l| l.starts_with("called search")),
        "{ran:?}"
    );
    // Records: every call, none with its arguments; the priced one charged.
    let calls = env.store().mcp_calls().unwrap();
    let seen: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|c| (c.server.as_str(), c.tool.as_str(), c.outcome.as_str()))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("docs", "add", "ok"),
            ("docs", "slow", "ok"),
            ("docs", "whoami", "ok"),
            ("github", "create_issue", "ok"),
            ("github", "search", "refused"),
            ("docs", "add", "ok"),
            ("docs", "slow", "ok"),
            ("github", "create_issue", "ok"),
            ("github", "search", "refused"),
        ]
    );
    assert!(calls
        .iter()
        .all(|c| c.arguments.is_none() && c.result.is_none()));
    let priced: Vec<_> = calls.iter().filter(|c| c.tool == "create_issue").collect();
    assert!(priced
        .iter()
        .all(|c| c.charged.as_deref() == Some("0.01000000")));
    let usage: Vec<_> = env
        .usage()
        .into_iter()
        .filter(|u| u.product.starts_with("mcp:"))
        .collect();
    assert_eq!(usage.len(), 2, "{usage:?}");
    for (u, c) in usage.iter().zip(&priced) {
        assert_eq!(u.product, "mcp:github/create_issue");
        assert_eq!(u.charged, d("0.01"));
        assert_eq!(u.request_id, c.request_id);
    }
    assert_eq!(env.balance(), d("0.98"));
    // Metrics per call.
    let metrics = env.client.get(env.url("/metrics")).send().await.unwrap();
    let text = metrics.text().await.unwrap();
    for m in [
        "gateway_mcp_calls_total{server=\"github\",outcome=\"refused\"}",
        "gateway_mcp_calls_total{server=\"docs\",outcome=\"ok\"}",
        "gateway_mcp_call_duration_seconds",
    ] {
        assert!(text.contains(m), "{m} missing from /metrics");
    }
    // `/usage` by tool: every call sent (free ones too), what it cost.
    let u = env
        .call_as(
            &env.key,
            "GET",
            &env.url("/api/v1/usage?group_by=tool"),
            None,
        )
        .await;
    u.expect(200);
    let by: std::collections::BTreeMap<String, (u64, String)> = u.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let tool = g["tool"].as_str().unwrap().to_owned();
            (
                tool,
                (
                    g["requests"].as_u64().unwrap(),
                    g["cost"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect();
    assert_eq!(by["docs/add"], (2, "0.00000000".to_owned()), "{}", u.json);
    assert_eq!(by["github/create_issue"], (2, "0.02000000".to_owned()));
    assert!(
        !by.contains_key("github/search"),
        "refused calls were not sent"
    );
    assert!(env.store().holds_of(env.user_id).unwrap().is_empty());
}

/// A raw `initialize` as `key`; the answer.
async fn initialize(env: &Env, key: &str, server: &str) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    env.client
        .post(env.url(&format!("/api/v1/mcp/{server}")))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn unpaid_calls_other_users_sessions_and_servers_down_are_refused() {
    let (docs, github) = (Server::start("docs"), Server::start("github"));
    let env = mcp_env(&docs, &github).await;
    // No credit: the priced call is refused and never forwarded.
    let ok = client(&env, &env.key, "nocredit").await;
    assert_eq!(ok["unpaid"]["refused"], true, "{:?}", ok["unpaid"]);
    assert!(
        ok["unpaid"]["message"]
            .as_str()
            .unwrap()
            .contains("payment required"),
        "{:?}",
        ok["unpaid"]
    );
    assert!(!github.printed().iter().any(|l| l.contains("unpaid")));
    assert!(env.usage().iter().all(|u| !u.product.starts_with("mcp:")));
    // Another user's session id is a 404.
    let r = initialize(&env, &env.key, "docs").await;
    assert_eq!(r.status(), 200);
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert!(session.starts_with("mcp_"), "{session}");
    let (_, other) = env.new_user("mallory@example.com");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let r = env
        .client
        .post(env.url("/api/v1/mcp/docs"))
        .bearer_auth(&other)
        .header("mcp-session-id", &session)
        .header("accept", "application/json, text/event-stream")
        .json(&list)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // A server that is down: a JSON-RPC error naming it.
    let r = initialize(&env, &env.key, "down").await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("MCP server down"), "{v}");
    assert!(!v.to_string().contains(TOKEN));
    // An unknown server: 404.
    let r = initialize(&env, &env.key, "nope").await;
    assert_eq!(r.status(), 404);
    // The sessions opened are the caller's: ended with DELETE.
    let r = env
        .client
        .delete(env.url("/api/v1/mcp/docs"))
        .bearer_auth(&env.key)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert!(env
        .store()
        .mcp_session(env.user_id, &session)
        .unwrap()
        .is_none());
    // None is left open: the SDK's ended its own, the failed initialize
    // kept none.
    let sql = format!(
        "SELECT CAST(COUNT(*) AS TEXT) FROM mcp_sessions WHERE user_id = {} AND ended_at IS NULL",
        env.user_id
    );
    let open = own_query(&env, &sql).await;
    assert_eq!(open[0][0], "0", "{open:?}");
}

/// A raw message to `/mcp/{server}` in `session`: the answer (from JSON,
/// or from the event carrying it).
async fn raw(env: &Env, key: &str, server: &str, session: &str, body: Value) -> Value {
    let r = env
        .client
        .post(env.url(&format!("/api/v1/mcp/{server}")))
        .bearer_auth(key)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(_) => text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find(|v| v.get("result").is_some() || v.get("error").is_some())
            .unwrap_or_else(|| panic!("no answer in {text}")),
    }
}

/// The tools `/mcp/docs` lists to `key` (a session of its own).
async fn listed(env: &Env, key: &str) -> Vec<String> {
    let r = initialize(env, key, "docs").await;
    assert_eq!(r.status(), 200);
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let v = raw(
        env,
        key,
        "docs",
        &session,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let mut names: Vec<String> = v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_keys_mcp_tools_are_set_over_http_and_apply_at_once() {
    let (docs, github) = (Server::start("docs"), Server::start("github"));
    let jwt = |c: &mut runtime::config::Config| {
        c.accounts.jwt_secret = Some(b"test-jwt-secret-0123456789".to_vec())
    };
    let env = mcp_env_with(&docs, &github, jwt).await;
    let token = env.gw.gateway.auth.issue(env.user_id).access_token;
    let body = json!({"name": "agent", "mcp_tools": ["docs/add"]});
    let a = env
        .call_as(&token, "POST", &env.url("/api/v1/keys"), Some(body))
        .await;
    a.expect(201);
    assert_eq!(a.json["mcp_tools"], json!(["docs/add"]));
    let (id, key) = (
        a.json["id"].as_i64().unwrap(),
        a.json["key"].as_str().unwrap().to_owned(),
    );
    assert_eq!(listed(&env, &key).await, ["add"]);
    let url = env.url(&format!("/api/v1/keys/{id}"));
    let a = env
        .call_as(
            &token,
            "PATCH",
            &url,
            Some(json!({"mcp_tools": ["docs/*"]})),
        )
        .await;
    a.expect(200);
    assert_eq!(listed(&env, &key).await, ["add", "slow", "whoami"]);
    let a = env
        .call_as(&token, "PATCH", &url, Some(json!({"mcp_tools": ["docs"]})))
        .await;
    a.expect(400);
    assert!(a.text.contains("mcp_tools"), "{}", a.text);
    let a = env
        .call_as(&token, "PATCH", &url, Some(json!({"mcp_tools": null})))
        .await;
    a.expect(200);
    assert_eq!(a.json["mcp_tools"], Value::Null);
    assert_eq!(listed(&env, &key).await, ["add", "slow", "whoami"]);
}

#[tokio::test]
async fn arguments_are_kept_only_when_asked_and_sessions_are_limited_per_user() {
    let (docs, github) = (Server::start("docs"), Server::start("github"));
    let env = mcp_env_with(&docs, &github, |c| {
        c.mcp.log_arguments = true;
        c.mcp.sessions_per_user = 1;
    })
    .await;
    let r = initialize(&env, &env.key, "docs").await;
    assert_eq!(r.status(), 200);
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    // One session per user here: a second initialize is refused.
    assert_eq!(initialize(&env, &env.key, "docs").await.status(), 429);
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "add", "arguments": {"a": 1, "b": 2}}});
    let v = raw(&env, &env.key, "docs", &session, call).await;
    assert_eq!(v["result"]["content"][0]["text"], "3", "{v}");
    let calls = env.store().mcp_calls().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].arguments.as_deref(), Some(r#"{"a":1,"b":2}"#));
    assert!(
        calls[0].result.as_deref().unwrap().contains("\"3\""),
        "{:?}",
        calls[0].result
    );
    // Ended, the session frees its place.
    let r = env
        .client
        .delete(env.url("/api/v1/mcp/docs"))
        .bearer_auth(&env.key)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(initialize(&env, &env.key, "docs").await.status(), 200);
}

/// `gateway serve` (a process of its own, logging at debug) with the MCP
/// servers: after the SDK's session (its `whoami` echoes the credential)
/// and a server that is down, the credential is in no log line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_credential_is_never_logged() {
    use crate::cli::{gateway, read_until, stdout_of, terminate};
    let (docs, github) = (Server::start("docs"), Server::start("github"));
    let dir = TempDir::new("mcp-log");
    let mut c = gateway(&dir);
    c.args(["users", "create", "--email", "agent@example.com"]);
    let id = stdout_of(c);
    let mut c = gateway(&dir);
    c.args([
        "keys",
        "create",
        "--user",
        id.trim(),
        "--mcp-tools",
        "docs/*,down/*",
    ]);
    let key = stdout_of(c).trim().to_owned();
    let file = dir.0.join("mcp.toml");
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let text = format!(
        "[[server]]\nid = \"docs\"\nurl = \"{}\"\nheaders_env = {{ Authorization = \"{TOKEN_VAR}\" }}\n\n\
         [[server]]\nid = \"down\"\nurl = \"http://127.0.0.1:{down}/mcp\"\nheaders_env = {{ Authorization = \"{TOKEN_VAR}\" }}\n\n\
         [[server]]\nid = \"github\"\nurl = \"{}\"\n",
        docs.url(),
        github.url()
    );
    std::fs::write(&file, text).unwrap();
    let mut c = gateway(&dir);
    c.arg("serve")
        .env("RUST_LOG", "debug")
        .env("GATEWAY_ADDR", "127.0.0.1:0")
        .env("GATEWAY_MCP_SERVERS", &file)
        .env(TOKEN_VAR, format!("Bearer {TOKEN}"))
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let lines = read_until(&mut err, "listening on");
    let addr = lines
        .last()
        .unwrap()
        .rsplit("listening on ")
        .next()
        .unwrap()
        .trim()
        .to_owned();
    let base = format!("http://{addr}/api/v1/mcp");
    let vars = vec![
        ("GATEWAY_MCP_URL", base.clone()),
        ("GATEWAY_KEY", key.clone()),
        ("MCP_STEP", "docs".to_owned()),
    ];
    let out = run_script("python3", "tests/mcp_sdk/client.py", vars).await;
    assert!(
        checks(&out)["whoami"]["text"] == "Bearer [redacted]",
        "{out}"
    );
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let r = reqwest::Client::new()
        .post(format!("{base}/down"))
        .bearer_auth(&key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.text().await.unwrap().contains("MCP server down"));
    assert!(terminate(&mut child).success());
    let rest: Vec<String> = err.lines().map_while(Result::ok).collect();
    let logged: Vec<&String> = lines
        .iter()
        .chain(&rest)
        .filter(|l| l.contains(TOKEN))
        .collect();
    assert!(logged.is_empty(), "the credential was logged: {logged:#?}");
    assert!(
        rest.iter().any(|l| l.contains("MCP server down")),
        "the failure is logged: {rest:#?}"
    );
}
