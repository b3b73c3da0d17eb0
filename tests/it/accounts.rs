//! Accounts, access tokens, API-key management and admin (issue #10; spec
//! §5 and §7 format 1): every 401 cause with its own message, 403 for
//! non-admins and disabled accounts, every `details.reason`, confirmation
//! and password reset through the outbox, keys, refresh and logout, tokens
//! and keys interchangeable on voice routes, and no secret in a log.

use std::collections::BTreeSet;

use reqwest::Method;
use runtime::store::{Accounts, Ledger};
use serde_json::{json, Value};

use crate::harness::*;

const SECRET: &[u8] = b"test-jwt-secret-0123456789";
const ADMIN_KEY: &str = "admin-key-0123456789abcdef";
const PASSWORD: &str = "correct horse battery";

async fn start() -> Env {
    start_with(|_| {}).await
}

async fn start_with(f: impl FnOnce(&mut runtime::config::Config)) -> Env {
    Env::with(|c| {
        c.accounts.jwt_secret = Some(SECRET.to_vec());
        c.accounts.env = "test".into();
        c.accounts.admin_key = Some(ADMIN_KEY.into());
        f(c);
    })
    .await
}

/// A request to `/api/v1` + `path` with optional headers and JSON body.
async fn call(
    env: &Env,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> Answer {
    let mut rb = env
        .client
        .request(method, env.url(&format!("/api/v1{path}")));
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    Answer::from(rb.send().await.unwrap()).await
}

fn bearer(t: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {t}"))
}

async fn with_bearer(
    env: &Env,
    method: Method,
    path: &str,
    t: &str,
    body: Option<Value>,
) -> Answer {
    let (k, v) = bearer(t);
    call(env, method, path, &[(k, &v)], body).await
}

/// Format 1, with the status and (optionally) `details.reason`.
#[track_caller]
fn format1(a: &Answer, status: u16, reason: Option<&str>) -> String {
    a.expect(status);
    let o = a.json.as_object().unwrap_or_else(|| panic!("{}", a.text));
    let keys: BTreeSet<&str> = o.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        BTreeSet::from(["error", "message", "status_code", "details"]),
        "{}",
        a.text
    );
    assert_eq!(o["status_code"], json!(status));
    if let Some(r) = reason {
        assert_eq!(o["details"]["reason"], json!(r), "{}", a.text);
    }
    o["message"].as_str().unwrap().to_owned()
}

async fn register(env: &Env, username: &str, email: &str) -> i64 {
    let a = call(
        env,
        Method::POST,
        "/auth/register",
        &[],
        Some(json!({"username": username, "email": email, "password": PASSWORD, "accept_privacy_policy": true})),
    )
    .await;
    a.expect(201);
    assert!(
        !a.text.contains(PASSWORD) && !a.text.contains("argon2"),
        "{}",
        a.text
    );
    a.json["id"].as_i64().expect("integer id")
}

/// (access token, refresh token).
async fn login(env: &Env, ident: &str, password: &str) -> (String, String) {
    let a = call(
        env,
        Method::POST,
        "/auth/login",
        &[],
        Some(json!({"email": ident, "password": password})),
    )
    .await;
    a.expect(200);
    assert_eq!(a.json["token_type"], "bearer");
    assert!(a.json["expires_in"].as_u64().unwrap() > 0);
    (
        a.json["access_token"].as_str().unwrap().to_owned(),
        a.json["refresh_token"].as_str().unwrap().to_owned(),
    )
}

fn forge(claims: Value, secret: &[u8]) -> String {
    runtime::auth::tokens::sign(secret, &claims)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn register_login_me_and_every_register_reason() {
    let env = start().await;
    let id = register(&env, "dora", "Dora@Example.com").await;
    for (body, reason) in [
        (
            json!({"username": "x", "email": "x@example.com", "password": PASSWORD, "accept_privacy_policy": false}),
            "privacy_policy_not_accepted",
        ),
        (
            json!({"username": "x", "email": "x@example.com", "password": PASSWORD}),
            "privacy_policy_not_accepted",
        ),
        (
            json!({"username": "DORA", "email": "y@example.com", "password": PASSWORD, "accept_privacy_policy": true}),
            "username_exists",
        ),
        (
            json!({"username": "y", "email": "dora@example.com", "password": PASSWORD, "accept_privacy_policy": true}),
            "email_exists",
        ),
    ] {
        let a = call(&env, Method::POST, "/auth/register", &[], Some(body)).await;
        format1(&a, 400, Some(reason));
        assert_eq!(a.json["error"], "bad_request");
    }
    // By e-mail address or by username; a wrong password is 401.
    let (access, _) = login(&env, "dora@example.com", PASSWORD).await;
    let a = call(
        &env,
        Method::POST,
        "/auth/login",
        &[],
        Some(json!({"username": "dora", "password": PASSWORD})),
    )
    .await;
    a.expect(200);
    for body in [
        json!({"username": "dora", "password": "wrong password"}),
        json!({"email": "nobody@example.com", "password": PASSWORD}),
    ] {
        let a = call(&env, Method::POST, "/auth/login", &[], Some(body)).await;
        format1(&a, 401, None);
    }
    env.store()
        .grant_credit(id, "12.5".parse().unwrap(), None)
        .unwrap();
    let me = with_bearer(&env, Method::GET, "/auth/me", &access, None).await;
    me.expect(200);
    assert_eq!(me.json["id"], json!(id));
    assert_eq!(me.json["email"], "dora@example.com");
    assert_eq!(me.json["role"], "user");
    assert_eq!(me.json["balance"], "12.50000000");
    assert!(me.json.get("password_hash").is_none());
}

#[tokio::test]
async fn every_401_cause_has_its_own_message() {
    let env = start().await;
    let id = register(&env, "eve", "eve@example.com").await;
    let (access, refresh) = login(&env, "eve", PASSWORD).await;
    let mut seen = BTreeSet::new();
    let mut expect = |a: Answer, needle: &str| {
        let m = format1(&a, 401, None);
        assert_eq!(a.json["error"], "unauthorized");
        assert!(m.contains(needle), "{needle:?} not in {m:?}");
        assert!(seen.insert(m.clone()), "message used twice: {m}");
    };
    // No credentials; API key malformed; unknown.
    expect(
        call(&env, Method::GET, "/auth/me", &[], None).await,
        "missing credentials",
    );
    expect(
        with_bearer(&env, Method::GET, "/auth/me", "gk_abc", None).await,
        "malformed API key",
    );
    let unknown = format!("gk_{}", "0".repeat(64));
    expect(
        with_bearer(&env, Method::GET, "/auth/me", &unknown, None).await,
        "invalid API key",
    );
    // API key revoked: refused at once on this instance (it was cached).
    let k = with_bearer(
        &env,
        Method::POST,
        "/keys",
        &access,
        Some(json!({"name": "ci"})),
    )
    .await;
    k.expect(201);
    let key = k.json["key"].as_str().unwrap().to_owned();
    with_bearer(&env, Method::GET, "/auth/me", &key, None)
        .await
        .expect(200);
    with_bearer(
        &env,
        Method::DELETE,
        &format!("/keys/{}", k.json["id"]),
        &access,
        None,
    )
    .await
    .expect(200);
    expect(
        with_bearer(&env, Method::GET, "/auth/me", &key, None).await,
        "API key revoked",
    );
    // Token expired, undecodable (bad signature), other environment, no user id.
    let claims = |exp: i64| json!({"sub": id.to_string(), "exp": exp, "iat": now(), "jti": "j1", "typ": "access", "env": "test"});
    expect(
        with_bearer(
            &env,
            Method::GET,
            "/auth/me",
            &forge(claims(now() - 5), SECRET),
            None,
        )
        .await,
        "log in again",
    );
    expect(
        with_bearer(
            &env,
            Method::GET,
            "/auth/me",
            &forge(claims(now() + 60), b"another secret"),
            None,
        )
        .await,
        "cannot be decoded",
    );
    let mut other_env = claims(now() + 60);
    other_env["env"] = json!("staging");
    expect(
        with_bearer(
            &env,
            Method::GET,
            "/auth/me",
            &forge(other_env, SECRET),
            None,
        )
        .await,
        "different environment",
    );
    let mut no_sub = claims(now() + 60);
    no_sub.as_object_mut().unwrap().remove("sub");
    expect(
        with_bearer(&env, Method::GET, "/auth/me", &forge(no_sub, SECRET), None).await,
        "no user id",
    );
    // A refresh token where an access token is required.
    expect(
        with_bearer(&env, Method::GET, "/auth/me", &refresh, None).await,
        "refresh token presented",
    );
    // An API key where an access token is required.
    let (_, alice_key) = (env.user_id, env.key.clone());
    expect(
        with_bearer(&env, Method::GET, "/keys", &alice_key, None).await,
        "access token required",
    );
    // A wrong admin key.
    expect(
        call(
            &env,
            Method::GET,
            "/admin/users",
            &[("x-admin-key", "nope")],
            None,
        )
        .await,
        "invalid admin key",
    );
    // Token revoked (logout).
    with_bearer(&env, Method::POST, "/auth/logout", &access, Some(json!({})))
        .await
        .expect(200);
    expect(
        with_bearer(&env, Method::GET, "/auth/me", &access, None).await,
        "token revoked",
    );
    // User deleted: their tokens and keys.
    let (access2, _) = login(&env, "eve", PASSWORD).await;
    let k2 = with_bearer(&env, Method::POST, "/keys", &access2, Some(json!({}))).await;
    let key2 = k2.json["key"].as_str().unwrap().to_owned();
    call(
        &env,
        Method::DELETE,
        &format!("/admin/users/{id}"),
        &[("x-admin-key", ADMIN_KEY)],
        None,
    )
    .await
    .expect(200);
    expect(
        with_bearer(&env, Method::GET, "/auth/me", &access2, None).await,
        "user deleted",
    );
    let a = with_bearer(&env, Method::GET, "/auth/me", &key2, None).await;
    assert_eq!(format1(&a, 401, None), "user deleted");
    assert_eq!(seen.len(), 13);
    // Voice routes keep {"detail"} for the same causes.
    let a = env
        .call_as(
            &forge(claims(now() - 5), SECRET),
            "GET",
            &env.voice("/tts/voices"),
            None,
        )
        .await;
    a.expect(401);
    assert_eq!(a.detail(), "token expired; log in again");
}

#[tokio::test]
async fn admins_non_admins_and_disabled_accounts() {
    let env = start().await;
    let id = register(&env, "fay", "fay@example.com").await;
    let (access, _) = login(&env, "fay", PASSWORD).await;
    // A non-admin: 403, with a token or a key.
    for cred in [access.as_str(), env.key.as_str()] {
        let a = with_bearer(&env, Method::GET, "/admin/users", cred, None).await;
        assert_eq!(
            format1(&a, 403, None),
            "Insufficient privileges. Admin access required."
        );
        assert_eq!(a.json["error"], "forbidden");
    }
    // An admin by role (API key), and by X-Admin-Key.
    let root = env.store().create_user("root@example.com", true).unwrap();
    let root_key = runtime::auth::create_key(env.store(), root).unwrap();
    let a = with_bearer(&env, Method::GET, "/admin/users", &root_key, None).await;
    a.expect(200);
    assert!(a.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|u| u["id"] == json!(id)));
    let admin = [("x-admin-key", ADMIN_KEY)];
    call(&env, Method::GET, "/admin/users", &admin, None)
        .await
        .expect(200);
    // Disable: 403 for the user's token; enable again.
    call(
        &env,
        Method::POST,
        &format!("/admin/users/{id}/disable"),
        &admin,
        None,
    )
    .await
    .expect(200);
    let a = with_bearer(&env, Method::GET, "/auth/me", &access, None).await;
    assert_eq!(format1(&a, 403, None), "account disabled");
    let a = call(
        &env,
        Method::POST,
        "/auth/login",
        &[],
        Some(json!({"username": "fay", "password": PASSWORD})),
    )
    .await;
    format1(&a, 403, None);
    call(
        &env,
        Method::POST,
        &format!("/admin/users/{id}/enable"),
        &admin,
        None,
    )
    .await
    .expect(200);
    with_bearer(&env, Method::GET, "/auth/me", &access, None)
        .await
        .expect(200);
    // Credits and usage.
    let a = call(
        &env,
        Method::POST,
        &format!("/admin/users/{id}/credits"),
        &admin,
        Some(json!({"amount": "7.25"})),
    )
    .await;
    a.expect(200);
    assert_eq!(a.json["balance"], "7.25000000");
    format1(
        &call(
            &env,
            Method::POST,
            &format!("/admin/users/{id}/credits"),
            &admin,
            Some(json!({"amount": "-1"})),
        )
        .await,
        400,
        None,
    );
    let a = call(
        &env,
        Method::GET,
        &format!("/admin/users/{id}/credits"),
        &admin,
        None,
    )
    .await;
    a.expect(200);
    assert_eq!(a.json["balance"], "7.25000000");
    let a = call(
        &env,
        Method::GET,
        &format!("/admin/users/{id}/usage"),
        &admin,
        None,
    )
    .await;
    a.expect(200);
    assert_eq!(a.json["user_id"], id);
    format1(
        &call(
            &env,
            Method::POST,
            "/admin/users/99999/disable",
            &admin,
            None,
        )
        .await,
        404,
        None,
    );
}

/// The token line of the newest message in the outbox sent to `to`.
fn outbox_token(env: &Env, to: &str) -> Option<String> {
    let dir = env.dir.0.join("outbox");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .ok()?
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().rev().find_map(|f| {
        let text = std::fs::read_to_string(f).unwrap();
        if !text.contains(&format!("To: {to}")) {
            return None;
        }
        text.lines()
            .find_map(|l| l.strip_prefix("Token: "))
            .map(|t| t.trim().to_owned())
    })
}

fn outbox_count(env: &Env) -> usize {
    std::fs::read_dir(env.dir.0.join("outbox"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[tokio::test]
async fn confirmation_and_password_reset_through_the_outbox() {
    let env = start_with(|c| c.accounts.require_email_confirmation = true).await;
    register(&env, "gus", "gus@example.com").await;
    let a = call(
        &env,
        Method::POST,
        "/auth/login",
        &[],
        Some(json!({"email": "gus@example.com", "password": PASSWORD})),
    )
    .await;
    format1(&a, 403, None);
    let token = outbox_token(&env, "gus@example.com").expect("confirmation mail");
    format1(
        &call(&env, Method::POST, "/auth/confirm", &[], Some(json!({}))).await,
        400,
        Some("missing_token"),
    );
    format1(
        &call(
            &env,
            Method::POST,
            "/auth/confirm",
            &[],
            Some(json!({"token": "nope"})),
        )
        .await,
        400,
        Some("invalid_token"),
    );
    call(
        &env,
        Method::POST,
        "/auth/confirm",
        &[],
        Some(json!({"token": token})),
    )
    .await
    .expect(200);
    format1(
        &call(
            &env,
            Method::POST,
            "/auth/confirm",
            &[],
            Some(json!({"token": token})),
        )
        .await,
        400,
        Some("invalid_token"),
    );
    login(&env, "gus@example.com", PASSWORD).await;

    // Reset: an unknown address is answered the same, and mails nothing.
    let before = outbox_count(&env);
    let unknown = call(
        &env,
        Method::POST,
        "/auth/reset-password",
        &[],
        Some(json!({"email": "who@example.com"})),
    )
    .await;
    unknown.expect(200);
    assert_eq!(outbox_count(&env), before);
    let known = call(
        &env,
        Method::POST,
        "/auth/reset-password",
        &[],
        Some(json!({"email": "gus@example.com"})),
    )
    .await;
    known.expect(200);
    assert_eq!(known.json, unknown.json, "nothing revealed");
    // The mail is made after the answer (off the request path).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while outbox_count(&env) < before + 1 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(outbox_count(&env), before + 1);
    let reset = outbox_token(&env, "gus@example.com").unwrap();
    assert_ne!(reset, token);
    for body in [
        json!({}),
        json!({"token": reset}),
        json!({"new_password": "new password 1"}),
    ] {
        format1(
            &call(&env, Method::POST, "/auth/reset-password", &[], Some(body)).await,
            400,
            Some("missing_fields"),
        );
    }
    format1(
        &call(
            &env,
            Method::POST,
            "/auth/reset-password",
            &[],
            Some(json!({"token": "nope", "new_password": "new password 1"})),
        )
        .await,
        400,
        Some("invalid_token"),
    );
    call(
        &env,
        Method::POST,
        "/auth/reset-password",
        &[],
        Some(json!({"token": reset, "new_password": "new password 1"})),
    )
    .await
    .expect(200);
    format1(
        &call(
            &env,
            Method::POST,
            "/auth/reset-password",
            &[],
            Some(json!({"token": reset, "new_password": "new password 2"})),
        )
        .await,
        400,
        Some("invalid_token"),
    );
    login(&env, "gus", "new password 1").await;
    let a = call(
        &env,
        Method::POST,
        "/auth/login",
        &[],
        Some(json!({"username": "gus", "password": PASSWORD})),
    )
    .await;
    format1(&a, 401, None);
}

#[tokio::test]
async fn keys_refresh_and_logout() {
    let env = start().await;
    register(&env, "hal", "hal@example.com").await;
    let (access, refresh) = login(&env, "hal", PASSWORD).await;
    let k = with_bearer(
        &env,
        Method::POST,
        "/keys",
        &access,
        Some(json!({"name": "laptop"})),
    )
    .await;
    k.expect(201);
    let key = k.json["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("gk_") && key.len() == 67);
    assert_eq!(k.json["name"], "laptop");
    let list = with_bearer(&env, Method::GET, "/keys", &access, None).await;
    list.expect(200);
    assert!(!list.text.contains(&key), "no full key in a list");
    let data = list.json["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["id"], k.json["id"]);
    assert_eq!(data[0]["active"], true);
    assert!(key.starts_with(data[0]["prefix"].as_str().unwrap()));
    // Another user's key id is not found (and stays live); revoking twice is 404.
    let path = format!("/keys/{}", k.json["id"]);
    register(&env, "ida", "ida@example.com").await;
    let (other, _) = login(&env, "ida", PASSWORD).await;
    format1(
        &with_bearer(&env, Method::DELETE, &path, &other, None).await,
        404,
        None,
    );
    let other_list = with_bearer(&env, Method::GET, "/keys", &other, None).await;
    assert_eq!(other_list.json["data"], json!([]));
    env.call_as(&key, "GET", &env.voice("/tts/voices"), None)
        .await
        .expect(200);
    with_bearer(&env, Method::DELETE, &path, &access, None)
        .await
        .expect(200);
    format1(
        &with_bearer(&env, Method::DELETE, &path, &access, None).await,
        404,
        None,
    );
    let list = with_bearer(&env, Method::GET, "/keys", &access, None).await;
    assert_eq!(list.json["data"][0]["active"], false);

    // Refresh: a new pair; the old refresh token is used up.
    let a = call(
        &env,
        Method::POST,
        "/auth/refresh",
        &[],
        Some(json!({"refresh_token": refresh})),
    )
    .await;
    a.expect(200);
    let access2 = a.json["access_token"].as_str().unwrap().to_owned();
    let refresh2 = a.json["refresh_token"].as_str().unwrap().to_owned();
    assert_ne!(refresh2, refresh);
    with_bearer(&env, Method::GET, "/auth/me", &access2, None)
        .await
        .expect(200);
    let again = call(
        &env,
        Method::POST,
        "/auth/refresh",
        &[],
        Some(json!({"refresh_token": refresh})),
    )
    .await;
    assert_eq!(format1(&again, 401, None), "token revoked");
    let wrong = call(
        &env,
        Method::POST,
        "/auth/refresh",
        &[],
        Some(json!({"refresh_token": access2})),
    )
    .await;
    format1(&wrong, 401, None);

    // Logout revokes the access token and the refresh token given.
    with_bearer(
        &env,
        Method::POST,
        "/auth/logout",
        &access2,
        Some(json!({"refresh_token": refresh2})),
    )
    .await
    .expect(200);
    format1(
        &with_bearer(&env, Method::GET, "/auth/me", &access2, None).await,
        401,
        None,
    );
    let a = call(
        &env,
        Method::POST,
        "/auth/refresh",
        &[],
        Some(json!({"refresh_token": refresh2})),
    )
    .await;
    assert_eq!(format1(&a, 401, None), "token revoked");
    // The first access token is still good until it expires.
    with_bearer(&env, Method::GET, "/auth/me", &access, None)
        .await
        .expect(200);
}

#[tokio::test]
async fn a_token_and_a_key_of_one_user_are_interchangeable_on_voice_routes() {
    let env = start().await;
    let id = register(&env, "ivy", "ivy@example.com").await;
    let (access, _) = login(&env, "ivy", PASSWORD).await;
    let k = with_bearer(&env, Method::POST, "/keys", &access, Some(json!({}))).await;
    let key = k.json["key"].as_str().unwrap().to_owned();
    for cred in [&access, &key] {
        env.call_as(cred, "GET", &env.voice("/tts/voices"), None)
            .await
            .expect(200);
    }
    let rows: Vec<_> = env
        .usage()
        .into_iter()
        .filter(|u| u.route_id == "tts.voices.list")
        .collect();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert!(rows.iter().all(|u| u.user_id == Some(id)), "{rows:#?}");
}

#[tokio::test]
async fn no_password_token_or_key_appears_in_the_log() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Command, Stdio};
    let dir = TempDir::new("accounts-log");
    let sim = start_sim().await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(dir.gateway_env())
        .env("RUST_LOG", "debug")
        .env("GATEWAY_ADDR", "127.0.0.1:0")
        .env("GATEWAY_REQUIRE_EMAIL_CONFIRMATION", "true")
        .env("GATEWAY_ADMIN_KEY", ADMIN_KEY)
        .env("PROVIDER_API_KEY", PROVIDER_KEY)
        .env("PROVIDER_BASE_URL", sim.base_url())
        .env("PROVIDER_SYNTH_URL", sim.synth_url())
        .arg("serve")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut log = String::new();
    let addr = loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "no listening line: {log}"
        );
        log.push_str(&line);
        if let Some(a) = line
            .rsplit("listening on ")
            .next()
            .filter(|_| line.contains("listening on"))
        {
            break a.trim().to_owned();
        }
    };
    let base = format!("http://{addr}/api/v1");
    let c = reqwest::Client::new();
    let post = |path: &str, body: Value, auth: Option<&str>| {
        let mut rb = c.post(format!("{base}{path}")).json(&body);
        if let Some(t) = auth {
            rb = rb.bearer_auth(t);
        }
        rb.send()
    };
    let r = post("/auth/register", json!({"username": "joe", "email": "joe@example.com", "password": PASSWORD, "accept_privacy_policy": true}), None).await.unwrap();
    assert_eq!(r.status(), 201);
    let outbox = dir.0.join("outbox");
    let mail = std::fs::read_dir(&outbox)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(mail).unwrap();
    let confirm = text
        .lines()
        .find_map(|l| l.strip_prefix("Token: "))
        .unwrap()
        .trim()
        .to_owned();
    assert_eq!(
        post("/auth/confirm", json!({"token": confirm}), None)
            .await
            .unwrap()
            .status(),
        200
    );
    // A wrong password, then the right one.
    let wrong = "wrong-password-xyz";
    assert_eq!(
        post(
            "/auth/login",
            json!({"username": "joe", "password": wrong}),
            None
        )
        .await
        .unwrap()
        .status(),
        401
    );
    let v: Value = post(
        "/auth/login",
        json!({"username": "joe", "password": PASSWORD}),
        None,
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let access = v["access_token"].as_str().unwrap().to_owned();
    let refresh = v["refresh_token"].as_str().unwrap().to_owned();
    let v: Value = post("/keys", json!({"name": "k"}), Some(&access))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let key = v["key"].as_str().unwrap().to_owned();
    let v: Value = post("/auth/refresh", json!({"refresh_token": refresh}), None)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let access2 = v["access_token"].as_str().unwrap().to_owned();
    assert_eq!(
        post(
            "/auth/reset-password",
            json!({"email": "joe@example.com"}),
            None
        )
        .await
        .unwrap()
        .status(),
        200
    );
    // The reset mail is written after the answer (it never waits for its
    // mail): wait for it (up to 10 s) beside the registration's.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mails = loop {
        let mut mails: Vec<_> = std::fs::read_dir(&outbox)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        mails.sort();
        let texts: Vec<String> = mails
            .iter()
            .filter_map(|m| std::fs::read_to_string(m).ok())
            .collect();
        if texts.len() >= 2 || std::time::Instant::now() > deadline {
            break texts;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    // The mail that is not the registration's (its token was `confirm`).
    let text = mails.iter().find(|t| !t.contains(&confirm)).unwrap();
    let reset = text
        .lines()
        .find_map(|l| l.strip_prefix("Token: "))
        .unwrap()
        .trim()
        .to_owned();
    assert_eq!(
        post("/auth/logout", json!({}), Some(&access2))
            .await
            .unwrap()
            .status(),
        200
    );
    // Refused credentials are logged as refusals, never as themselves.
    assert_eq!(
        post("/auth/logout", json!({}), Some(&access2))
            .await
            .unwrap()
            .status(),
        401
    );
    let r = c
        .get(format!("http://{addr}/api/v1/voice/tts/voices"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = c
        .get(format!("{base}/admin/users"))
        .header("x-admin-key", "bad-admin-key-123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    child.wait().unwrap();
    log.push_str(&rest);
    assert!(
        log.contains("INFO") || log.contains("DEBUG"),
        "a log was written: {log}"
    );
    for (what, secret) in [
        ("password", PASSWORD),
        ("wrong password", wrong),
        ("access token", access.as_str()),
        ("refresh token", refresh.as_str()),
        ("rotated access token", access2.as_str()),
        ("API key", key.as_str()),
        ("confirmation token", confirm.as_str()),
        ("reset token", reset.as_str()),
        ("admin key", ADMIN_KEY),
        ("wrong admin key", "bad-admin-key-123"),
    ] {
        assert!(!log.contains(secret), "the {what} is in the log:\n{log}");
    }
}

#[tokio::test]
async fn without_gateway_admin_key_every_admin_key_is_wrong() {
    let env = start_with(|c| c.accounts.admin_key = None).await;
    let a = call(
        &env,
        Method::GET,
        "/admin/users",
        &[("x-admin-key", ADMIN_KEY)],
        None,
    )
    .await;
    assert_eq!(format1(&a, 401, None), "invalid admin key");
    let a = call(
        &env,
        Method::GET,
        "/admin/users",
        &[("x-admin-key", "")],
        None,
    )
    .await;
    format1(&a, 401, None);
}
