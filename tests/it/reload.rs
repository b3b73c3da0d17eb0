//! Reloading the catalogue (#46): `POST /api/v1/admin/reload` under load
//! (chat streams in flight, c=8) that changes a price: no request fails,
//! those that started before are billed at the old price and the later
//! ones at the new, each usage record naming its version
//! (`/admin/prices/{version}` shows each version's prices); a bad file
//! changes nothing; one admin call reloads two instances.

use std::time::Duration;

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::harness::*;
use runtime::store::History;

const ADMIN_KEY: &str = "reload-admin-key-0123456789abcdef";

fn chat(stream: bool) -> Value {
    json!({"model": "sim/sim-gpt", "stream": stream, "max_tokens": 5,
           "messages": [{"role": "user", "content": "hello"}]})
}

/// The providers file at `env`'s path, with sim-gpt's input at `price`.
fn write_price(path: &std::path::Path, price: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    let mut in_gpt = false;
    for line in text.lines() {
        if line.starts_with("id = ") {
            in_gpt = line == "id = \"sim-gpt\"";
        }
        if in_gpt && line.starts_with("input_per_mtok") {
            out.push_str(&format!("input_per_mtok = \"{price}\"\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    std::fs::write(path, out).unwrap();
}

async fn admin(env: &Env, method: &str, url: &str) -> Answer {
    let mut r = env
        .client
        .request(method.parse().unwrap(), url)
        .header("x-admin-key", ADMIN_KEY);
    if method == "POST" {
        r = r.json(&json!({}));
    }
    Answer::from(r.send().await.unwrap()).await
}

/// A streamed chat read to its end: its request id.
async fn streamed(env: &Env) -> String {
    let r = env.stream_chat(&env.key, chat(true)).await;
    assert_eq!(r.status(), 200);
    let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
    let body = r.text().await.unwrap();
    assert!(body.contains("[DONE]"), "{body}");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reload_under_load_bills_the_streams_begun_before_at_the_old_price_and_later_ones_at_the_new(
) {
    let env = llm_env(|c| c.accounts.admin_key = Some(ADMIN_KEY.into())).await;
    env.grant("100");
    let path = env.dir.0.join("providers.toml");
    let old = env.gw.gateway.catalogue().version.clone();
    // Streams slow enough to be in flight across the reload.
    env.sim_config(json!({"stream_delay_ms": 150})).await;
    let reload = env.url("/api/v1/admin/reload");
    // The reload once all 8 have started (their answers' headers came):
    // each is in flight, its catalogue taken.
    let started = std::sync::atomic::AtomicUsize::new(0);
    let streams = join_all((0..8).map(|_| {
        let (env, started) = (&env, &started);
        async move {
            let r = env.stream_chat(&env.key, chat(true)).await;
            assert_eq!(r.status(), 200);
            started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
            assert!(r.text().await.unwrap().contains("[DONE]"));
            id
        }
    }));
    let (before, answer) = tokio::join!(streams, async {
        while started.load(std::sync::atomic::Ordering::SeqCst) < 8 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        write_price(&path, "20.00");
        admin(&env, "POST", &reload).await
    });
    answer.expect(200);
    let new = answer.json["instances"][0]["version"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(answer.json["instances"][0]["previous_version"], json!(old));
    assert_ne!(new, old);
    env.sim_config(json!({"stream_delay_ms": 0})).await;
    let after = join_all((0..8).map(|_| streamed(&env))).await;
    // Each request's usage record names the version it started with, and is priced so.
    let rows = env.store().usage_rows().unwrap();
    let version_of = |id: &String| {
        rows.iter()
            .find(|u| &u.request_id == id)
            .unwrap()
            .price_version
            .clone()
    };
    let price_of = |id: &String| {
        rows.iter()
            .find(|u| &u.request_id == id)
            .unwrap()
            .unit_price
            .unwrap()
    };
    for id in &before {
        assert_eq!(version_of(id).as_deref(), Some(old.as_str()), "{id}");
    }
    for id in &after {
        assert_eq!(version_of(id).as_deref(), Some(new.as_str()), "{id}");
    }
    assert!(price_of(&after[0]) > price_of(&before[0]));
    // Each version's prices, as recorded.
    for (v, input) in [(&old, "2"), (&new, "20")] {
        let a = admin(&env, "GET", &env.url(&format!("/api/v1/admin/prices/{v}"))).await;
        a.expect(200);
        assert_eq!(
            a.json["models"]["sim/sim-gpt"]["input_per_mtok"],
            json!(input),
            "{}",
            a.text
        );
    }
    admin(&env, "GET", &env.url("/api/v1/admin/prices/nope"))
        .await
        .expect(404);
    // The generation names it too.
    let g = env
        .call_as(
            &env.key,
            "GET",
            &env.url(&format!("/api/v1/generations/{}", after[0])),
            None,
        )
        .await;
    assert_eq!(g.json["price_version"], json!(new));

    // A bad file: nothing changes; every mistake answered.
    std::fs::write(
        &path,
        std::fs::read_to_string(&path)
            .unwrap()
            .replace("\"20.00\"", "\"twenty\""),
    )
    .unwrap();
    let a = admin(&env, "POST", &reload).await;
    a.expect(422);
    assert!(
        a.json["instances"][0]["errors"][0]
            .as_str()
            .unwrap()
            .contains("input_per_mtok"),
        "{}",
        a.text
    );
    assert_eq!(env.gw.gateway.catalogue().version, new);
    let id = streamed(&env).await;
    let rows = env.store().usage_rows().unwrap();
    assert_eq!(
        rows.iter()
            .find(|u| u.request_id == id)
            .unwrap()
            .price_version
            .as_deref(),
        Some(new.as_str())
    );
}

#[tokio::test]
async fn one_admin_call_reloads_two_instances() {
    let Some(pair) = llm_pair_with("one_admin_call_reloads_two_instances", |c| {
        c.accounts.admin_key = Some(ADMIN_KEY.into())
    })
    .await
    else {
        return;
    };
    let env = &pair.a;
    env.grant("10");
    write_price(&env.dir.0.join("providers.toml"), "3.00");
    let a = admin(env, "POST", &env.url("/api/v1/admin/reload")).await;
    a.expect(200);
    let all = a.json["instances"].as_array().unwrap();
    assert_eq!(all.len(), 2, "{}", a.text);
    assert!(
        all.iter().all(|i| i["reloaded"] == json!(true)),
        "{}",
        a.text
    );
    assert_eq!(all[0]["version"], all[1]["version"]);
    assert_eq!(
        pair.b.gateway.catalogue().version,
        env.gw.gateway.catalogue().version
    );
    let a = env
        .call_as(
            &env.key,
            "POST",
            &pair.url_b("/api/v1/chat/completions"),
            Some(chat(false)),
        )
        .await;
    a.expect(200);
    let id = a.header("x-request-id").unwrap().to_owned();
    let rows = env.store().usage_rows().unwrap();
    let version = rows
        .iter()
        .find(|u| u.request_id == id)
        .unwrap()
        .price_version
        .clone();
    assert_eq!(version.as_deref(), all[0]["version"].as_str());
}

/// The MCP servers file is reloaded with the providers file: a server
/// added is reachable at once; a file with a mistake changes nothing.
#[tokio::test]
async fn a_reload_reads_the_mcp_servers_file_too() {
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server =
        |id: &str| format!("[[server]]\nid = \"{id}\"\nurl = \"http://127.0.0.1:{down}/mcp\"\n\n");
    let first = server("docs");
    let env = llm_env(move |c| {
        c.accounts.admin_key = Some(ADMIN_KEY.into());
        let path = c.data_dir.join("mcp.toml");
        std::fs::write(&path, first).unwrap();
        c.mcp.servers_file = Some(path);
    })
    .await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let status = |name: &'static str| {
        let env = &env;
        let init = init.clone();
        async move {
            let r = env
                .client
                .post(env.url(&format!("/api/v1/mcp/{name}")))
                .bearer_auth(&env.key)
                .header("accept", "application/json, text/event-stream")
                .json(&init)
                .send()
                .await
                .unwrap();
            r.status().as_u16()
        }
    };
    assert_ne!(status("docs").await, 404);
    assert_eq!(status("wiki").await, 404);
    let path = env.dir.0.join("mcp.toml");
    std::fs::write(&path, format!("{}{}", server("docs"), server("wiki"))).unwrap();
    admin(&env, "POST", &env.url("/api/v1/admin/reload"))
        .await
        .expect(200);
    assert_ne!(status("wiki").await, 404);
    // A mistake: nothing changes.
    std::fs::write(&path, "[[server]]\nid = \"only\"\n").unwrap();
    let a = admin(&env, "POST", &env.url("/api/v1/admin/reload")).await;
    a.expect(422);
    assert_ne!(status("wiki").await, 404);
}

/// `SIGHUP` reloads a running `gateway serve`, the sign-in providers file
/// the environment names included: a provider added answers at once.
#[tokio::test]
async fn sighup_reloads_the_sign_in_providers_file_of_a_running_gateway() {
    let dir = TempDir::new("reload-sighup");
    let sim = start_sim().await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let idp = |id: &str| {
        format!("[[provider]]\nid = \"{id}\"\nissuer = \"http://127.0.0.1:{closed}\"\nclient_id = \"c\"\nclient_secret_env = \"GW_IT_RELOAD_SECRET\"\n\n")
    };
    let file = dir.0.join("oauth.toml");
    std::fs::write(&file, idp("first")).unwrap();
    let file_var = file.display().to_string();
    let (mut child, addr) = crate::crash_holds::serve_providers(
        &dir,
        &sim,
        &providers_toml(&sim.llm_url()),
        &[
            ("GATEWAY_OAUTH_PROVIDERS", &file_var),
            ("GW_IT_RELOAD_SECRET", "s"),
        ],
    );
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let status = |id: &'static str| {
        let (client, addr) = (&client, &addr);
        async move {
            let url = format!("http://{addr}/api/v1/auth/oauth/{id}/authorize");
            client.get(url).send().await.unwrap().status().as_u16()
        }
    };
    assert_ne!(status("first").await, 404);
    assert_eq!(status("second").await, 404);
    std::fs::write(&file, format!("{}{}", idp("first"), idp("second"))).unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let start = std::time::Instant::now();
    while status("second").await == 404 {
        assert!(start.elapsed() < Duration::from_secs(10), "not reloaded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
}
