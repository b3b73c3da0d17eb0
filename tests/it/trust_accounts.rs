//! Issue #37's account findings, over HTTP: 4 (an address a sign-in
//! provider did not verify is never claimed, and a sign-in never joins an
//! account it did not make), 9 (every answer carrying a token or an API
//! key is `no-store`), 12 (the login back-off counts by account and client
//! address: a stranger cannot lock the owner out). A test's clients choose
//! their address by binding to another loopback address (127.0.0.x): the
//! gateway's client address is the TCP peer.

use std::net::IpAddr;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::harness::*;
use crate::oauth::{self, format1};

const PASSWORD: &str = "correct horse battery";
const WRONG: &str = "not the password at all";

/// A client whose connections come from `ip` (a loopback address).
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<IpAddr>().unwrap())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// `/api/v1` + `path` from `client`, with an optional bearer and JSON body.
async fn call(
    env: &Env,
    client: &reqwest::Client,
    method: Method,
    path: &str,
    bearer: Option<&str>,
    body: Option<Value>,
) -> Answer {
    let mut rb = client.request(method, env.url(&format!("/api/v1{path}")));
    if let Some(t) = bearer {
        rb = rb.bearer_auth(t);
    }
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    Answer::from(rb.send().await.unwrap()).await
}

async fn register(env: &Env, username: &str, email: &str) -> Answer {
    let body = json!({"username": username, "email": email, "password": PASSWORD, "accept_privacy_policy": true});
    call(
        env,
        &env.client,
        Method::POST,
        "/auth/register",
        None,
        Some(body),
    )
    .await
}

/// Registers a user: their id.
async fn registered(env: &Env, username: &str, email: &str) -> i64 {
    let r = register(env, username, email).await;
    r.expect(201);
    r.json["id"].as_i64().unwrap()
}

async fn login(env: &Env, client: &reqwest::Client, email: &str, password: &str) -> Answer {
    let body = json!({"email": email, "password": password});
    call(env, client, Method::POST, "/auth/login", None, Some(body)).await
}

/// The access token of a 200 carrying a pair.
fn access(a: &Answer) -> String {
    a.expect(200);
    a.json["access_token"].as_str().unwrap().to_owned()
}

async fn create_key(env: &Env, access: &str, name: &str) -> Answer {
    let body = json!({ "name": name });
    call(
        env,
        &env.client,
        Method::POST,
        "/keys",
        Some(access),
        Some(body),
    )
    .await
}

// ---------------------------------------------------------------------------
// Finding 9
// ---------------------------------------------------------------------------

/// `Cache-Control: no-store` and `Pragma: no-cache` (RFC 6749 §5.1).
#[track_caller]
fn no_store(what: &str, a: &Answer) {
    assert_eq!(a.header("cache-control"), Some("no-store"), "{what}");
    assert_eq!(a.header("pragma"), Some("no-cache"), "{what}");
}

/// Finding 9: every route whose answer carries an access or refresh token
/// (`login`, `token_refresh`, `oauth_callback`) or an API key
/// (`key_create`) answers `no-store`.
#[tokio::test]
async fn every_answer_carrying_a_token_or_a_key_is_no_store() {
    let t = oauth::start().await;
    let env = &t.env;
    let uid = registered(env, "nia", "nia@example.com").await;
    let a = login(env, &env.client, "nia@example.com", PASSWORD).await;
    no_store("login", &a);
    let access = access(&a);
    let body = json!({"refresh_token": a.json["refresh_token"]});
    let a = call(
        env,
        &env.client,
        Method::POST,
        "/auth/refresh",
        None,
        Some(body),
    )
    .await;
    a.expect(200);
    assert!(a.json["refresh_token"].is_string());
    no_store("refresh", &a);
    let a = create_key(env, &access, "nia's key").await;
    a.expect(201);
    let key = a.json["key"].as_str().unwrap();
    assert!(key.starts_with("gk_"));
    no_store("key creation", &a);
    let a = t
        .sign_in(json!({"sub": "subject-nia", "email": "nia.signed@example.com", "email_verified": true}))
        .await;
    a.expect(200);
    assert!(a.json["access_token"].is_string());
    no_store("sign-in callback", &a);
    // What they answered is what was stored: the key is the user's, live.
    let keys = env.store().keys_of(uid).unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].name.as_deref(), Some("nia's key"));
    assert!(keys[0].revoked_at.is_none());
    assert!(key.starts_with(keys[0].prefix.as_deref().unwrap()));
}

// ---------------------------------------------------------------------------
// Finding 12
// ---------------------------------------------------------------------------

/// The `Retry-After` of a 429 of the login back-off.
#[track_caller]
fn locked(a: &Answer) -> u64 {
    a.expect(429);
    let message = a.json["message"].as_str().unwrap_or_default();
    assert!(message.contains("failed logins"), "{}", a.text);
    a.header("retry-after").unwrap().parse().unwrap()
}

/// Finding 12: a stranger failing an account's logins from an address
/// locks that address out of it, the right password included, and never
/// the owner logging in from another address; the owner's success leaves
/// the stranger locked.
#[tokio::test]
async fn a_strangers_failures_never_lock_the_owner_out_from_another_address() {
    let env = Env::start().await;
    let owner_id = registered(&env, "ola", "ola@example.com").await;
    let stranger = client_from("127.0.0.2");
    // 5 failures are free; the 6th, 7th and 8th lock the address for 1,
    // 2 and 4 s (the test waits out the first two locks).
    let mut failures = 0;
    while failures < 8 {
        let a = login(&env, &stranger, "ola@example.com", WRONG).await;
        if a.status == 429 {
            assert!(failures > 5, "locked after {failures} failures: {}", a.text);
            tokio::time::sleep(Duration::from_secs(locked(&a))).await;
        } else {
            format1(&a, 401, "unauthorized", None);
            failures += 1;
        }
    }
    // Locked: the right password from there is refused before it is checked.
    locked(&login(&env, &stranger, "ola@example.com", PASSWORD).await);
    // The owner, from an address that has not failed, logs in.
    let owner = client_from("127.0.0.3");
    let a = login(&env, &owner, "ola@example.com", PASSWORD).await;
    let me = call(
        &env,
        &owner,
        Method::GET,
        "/auth/me",
        Some(&access(&a)),
        None,
    )
    .await;
    me.expect(200);
    assert_eq!(me.json["id"], json!(owner_id));
    // The stranger's address stays locked.
    locked(&login(&env, &stranger, "ola@example.com", WRONG).await);
    // What was written: one login, the owner's (a refused one writes nothing).
    let logins: Vec<_> = env
        .audit()
        .into_iter()
        .filter(|r| r.route_id == "auth.login")
        .map(|r| (r.user_id, r.status))
        .collect();
    assert_eq!(logins, [(Some(owner_id), 200)]);
}

/// Finding 12 with many addresses: each address's free failures are its
/// own, and an account failed from many addresses, so many times that it
/// counts as under attack, still lets in an address that has not failed.
#[tokio::test]
async fn an_account_failed_from_many_addresses_lets_a_fresh_address_in() {
    let env = Env::start().await;
    let owner_id = registered(&env, "pia", "pia@example.com").await;
    // 4 addresses x 5 free failures, then one more from a fifth address:
    // more than the account's 20.
    for (i, n) in [(10, 5), (11, 5), (12, 5), (13, 5), (14, 1)] {
        let from = client_from(&format!("127.0.1.{i}"));
        for _ in 0..n {
            let a = login(&env, &from, "pia@example.com", WRONG).await;
            format1(&a, 401, "unauthorized", None);
        }
    }
    let fresh = client_from("127.0.1.99");
    let a = login(&env, &fresh, "pia@example.com", PASSWORD).await;
    let token = access(&a);
    let me = call(&env, &fresh, Method::GET, "/auth/me", Some(&token), None).await;
    me.expect(200);
    assert_eq!(me.json["id"], json!(owner_id));
}
