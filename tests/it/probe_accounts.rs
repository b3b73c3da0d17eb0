//! The account-side findings of issue #23's black-box probe, one test each:
//! N2 (password hashing bounded: memory and 429), N6 (limits per address and
//! per account on the account routes), N7 (a reset revokes tokens and older
//! reset tokens), N10 (a username cannot stand for an e-mail address), N11
//! (a reset request does not wait for its mail), N12 (a short JWT secret is
//! refused at start), N13 (objects and mails private whatever the umask).
//! N2, N12 and N13 run the `gateway` binary (its memory, its start-up, its
//! umask); the others an in-process gateway.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::Method;
use runtime::store::Accounts;
use serde_json::{json, Value};

use crate::harness::*;

const BIN: &str = env!("CARGO_BIN_EXE_gateway");
const SECRET: &[u8] = b"probe-accounts-jwt-secret-0123456789";
const PASSWORD: &str = "correct horse battery";

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

async fn start_with(f: impl FnOnce(&mut runtime::config::Config)) -> Env {
    Env::with(|c| {
        c.accounts.jwt_secret = Some(SECRET.to_vec());
        c.accounts.env = "test".into();
        f(c);
    })
    .await
}

/// A request to `/api/v1` + `path` with an optional bearer and JSON body.
async fn call(env: &Env, method: Method, path: &str, bearer: Option<&str>, body: Value) -> Answer {
    let mut rb = env
        .client
        .request(method, env.url(&format!("/api/v1{path}")));
    if let Some(t) = bearer {
        rb = rb.bearer_auth(t);
    }
    Answer::from(rb.json(&body).send().await.unwrap()).await
}

async fn register(env: &Env, username: &str, email: &str) -> Answer {
    call(
        env,
        Method::POST,
        "/auth/register",
        None,
        json!({"username": username, "email": email, "password": PASSWORD, "accept_privacy_policy": true}),
    )
    .await
}

async fn login(env: &Env, ident: &str, password: &str) -> Answer {
    call(
        env,
        Method::POST,
        "/auth/login",
        None,
        json!({"email": ident, "password": password}),
    )
    .await
}

/// Format 1 (`error`, `message`, `status_code`, `details`) with `status`.
#[track_caller]
fn format1(a: &Answer, status: u16) {
    a.expect(status);
    for k in ["error", "message", "status_code", "details"] {
        assert!(a.json.get(k).is_some(), "{k} missing: {}", a.text);
    }
    assert_eq!(a.json["status_code"], json!(status), "{}", a.text);
}

/// The `message` of a format 1 error.
fn message(a: &Answer) -> &str {
    a.json["message"].as_str().unwrap_or_default()
}

/// A 429 in format 1 with a whole `Retry-After` of at least 1 s.
#[track_caller]
fn too_many(a: &Answer) {
    format1(a, 429);
    let secs: u64 = a
        .header("retry-after")
        .unwrap_or_else(|| panic!("Retry-After missing: {}", a.text))
        .parse()
        .unwrap();
    assert!(secs >= 1, "{secs}");
}

/// The reset tokens mailed to `to`, oldest first.
fn outbox_tokens(dir: &std::path::Path, to: &str) -> Vec<String> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("outbox"))
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).ok()?;
            if !text.contains(&format!("To: {to}")) || !text.contains("Reset your password") {
                return None;
            }
            text.lines()
                .find_map(|l| l.strip_prefix("Token: "))
                .map(|t| t.trim().to_owned())
        })
        .collect()
}

/// Waits (up to 10 s) until `to` has at least `n` reset mails; returns them.
pub(crate) async fn wait_for_mails(dir: &std::path::Path, to: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tokens = outbox_tokens(dir, to);
        if tokens.len() >= n || Instant::now() > deadline {
            return tokens;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn request_reset(env: &Env, email: &str) {
    call(
        env,
        Method::POST,
        "/auth/reset-password",
        None,
        json!({"email": email}),
    )
    .await
    .expect(200);
}

/// A `gateway serve` child, killed when dropped (its log drained by a thread).
pub(crate) struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A line of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
    fn memory_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in {status}"))
    }
}

/// `gateway <args>` on `dir`, with `vars`, run through `sh` (so that a test
/// can set the umask first).
pub(crate) fn gateway(
    dir: &TempDir,
    shell_prefix: &str,
    args: &str,
    vars: &[(&str, &str)],
) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("{shell_prefix} exec \"$GATEWAY_BIN\" {args}"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GATEWAY_BIN", BIN)
        .env("RUST_LOG", "info")
        .envs(dir.gateway_env());
    for (k, v) in vars {
        c.env(k, v);
    }
    c
}

/// Starts `gateway serve` and waits for its address.
pub(crate) fn serve(dir: &TempDir, shell_prefix: &str, vars: &[(&str, &str)]) -> Served {
    let mut c = gateway(dir, shell_prefix, "serve", vars);
    c.env("GATEWAY_ADDR", "127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    let addr = loop {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            panic!("gateway ended before listening: {seen:#?}");
        }
        if let Some(a) = line.trim_end().rsplit("listening on ").next() {
            if line.contains("listening on") {
                break a.trim().to_owned();
            }
        }
        seen.push(line);
    };
    std::thread::spawn(move || {
        let mut sink = std::io::sink();
        let _ = std::io::copy(&mut stderr, &mut sink);
    });
    Served { child, addr }
}

// ---------------------------------------------------------------------------
// N2
// ---------------------------------------------------------------------------

/// N2: a burst of wrong-password logins takes at most the password pool's
/// memory (one hasher here: 19 MiB), the excess waits briefly and is then
/// answered 429 in the route's format, and the memory is back after the
/// burst (the probe saw 8.9 GiB, and 7.9 GiB 15 s later).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn n2_a_login_burst_is_bounded_in_memory_and_answers_429_beyond_the_pool() {
    let dir = TempDir::new("n2");
    let gw = serve(
        &dir,
        "",
        &[
            ("GATEWAY_JWT_SECRET", std::str::from_utf8(SECRET).unwrap()),
            ("GATEWAY_RATE_LIMITS", "accounts=off"),
            ("GATEWAY_PASSWORD_HASHERS", "1"),
            ("GATEWAY_PASSWORD_HASH_WAIT_MS", "1000"),
        ],
    );
    let before = gw.memory_kib("VmRSS");
    let client = reqwest::Client::new();
    const BURST: usize = 96;
    let calls = (0..BURST).map(|i| {
        let (client, url) = (client.clone(), gw.url("/api/v1/auth/login"));
        async move {
            let r = client
                .post(url)
                .json(&json!({"email": format!("nobody{i}@example.com"), "password": "wrong password"}))
                .send()
                .await
                .unwrap();
            Answer::from(r).await
        }
    });
    let answers = futures_util::future::join_all(calls).await;
    let peak = gw.memory_kib("VmHWM");
    // 96 argon2 hashes at once would take 96 × 19 MiB ≈ 1.8 GiB.
    assert!(
        peak < before + 100 * 1024,
        "peak {peak} KiB, {before} KiB before the burst"
    );
    let mut by_status = std::collections::BTreeMap::new();
    for a in &answers {
        *by_status.entry(a.status).or_insert(0) += 1;
        match a.status {
            401 => format1(a, 401),
            429 => too_many(a),
            other => panic!("{other}: {}", a.text),
        }
    }
    assert!(
        by_status.get(&429).copied().unwrap_or(0) > 0,
        "the excess is refused: {by_status:?}"
    );
    assert!(
        by_status.get(&401).copied().unwrap_or(0) > 0,
        "the pool works: {by_status:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = gw.memory_kib("VmRSS");
    assert!(
        after < before + 32 * 1024,
        "{after} KiB after the burst, {before} KiB before"
    );
    eprintln!("n2: {by_status:?}; RSS {before} KiB → peak {peak} KiB → {after} KiB");
}

// ---------------------------------------------------------------------------
// N6
// ---------------------------------------------------------------------------

/// One request to each account route that needs no account.
async fn round(env: &Env) -> Vec<Answer> {
    vec![
        call(env, Method::POST, "/auth/register", None, json!({})).await,
        login(env, "no@example.com", "wrong password").await,
        call(
            env,
            Method::POST,
            "/auth/confirm",
            None,
            json!({"token": "nope"}),
        )
        .await,
        call(
            env,
            Method::POST,
            "/auth/reset-password",
            None,
            json!({"email": "no@example.com"}),
        )
        .await,
    ]
}

/// N6: every account route (register, login, confirm, reset-password)
/// counts against `accounts` for the client's address; an account that
/// failed too many logins in a row is locked, the right password included;
/// an account gets at most 3 reset mails in a burst.
#[tokio::test]
async fn n6_account_routes_are_limited_per_address_and_per_account() {
    // The address limit, on each of the four routes.
    let env = start_with(|c| {
        c.rate_limits = runtime::ratelimit::Limits::parse(Some("accounts=4/m")).unwrap();
    })
    .await;
    let first = round(&env).await;
    assert_eq!(
        first.iter().map(|a| a.status).collect::<Vec<_>>(),
        [400, 401, 400, 200],
        "within the address's quota"
    );
    for a in round(&env).await {
        too_many(&a);
        assert!(message(&a).contains("accounts"), "{}", a.text);
    }
    // The per-account back-off: 5 failures are free, the 6th locks.
    let env = start_with(|_| {}).await;
    register(&env, "kim", "kim@example.com").await.expect(201);
    for _ in 0..6 {
        format1(&login(&env, "kim@example.com", "wrong password").await, 401);
    }
    let locked = login(&env, "kim@example.com", PASSWORD).await;
    too_many(&locked);
    assert!(
        message(&locked).contains("failed logins"),
        "{}",
        locked.text
    );
    // By username too: the same account.
    too_many(
        &call(
            &env,
            Method::POST,
            "/auth/login",
            None,
            json!({"username": "kim", "password": PASSWORD}),
        )
        .await,
    );
    // Another account is not locked.
    register(&env, "lou", "lou@example.com").await.expect(201);
    login(&env, "lou@example.com", PASSWORD).await.expect(200);
    // The lock ends (1 s after the 6th failure); success clears the count.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    login(&env, "kim@example.com", PASSWORD).await.expect(200);
    format1(&login(&env, "kim@example.com", "wrong password").await, 401);

    // Reset mails per account: 6 requests, 3 mails.
    for _ in 0..6 {
        request_reset(&env, "lou@example.com").await;
    }
    let mails = wait_for_mails(&env.dir.0, "lou@example.com", 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        outbox_tokens(&env.dir.0, "lou@example.com").len(),
        3,
        "{mails:?}"
    );
}

// ---------------------------------------------------------------------------
// N7
// ---------------------------------------------------------------------------

/// N7: completing a reset revokes the user's access and refresh tokens and
/// every other outstanding reset token; tokens issued after it work.
#[tokio::test]
async fn n7_a_reset_revokes_the_users_tokens_and_older_reset_tokens() {
    let env = start_with(|_| {}).await;
    register(&env, "max", "max@example.com").await.expect(201);
    let l = login(&env, "max@example.com", PASSWORD).await;
    l.expect(200);
    let (access, refresh) = (
        l.json["access_token"].as_str().unwrap().to_owned(),
        l.json["refresh_token"].as_str().unwrap().to_owned(),
    );
    call(&env, Method::GET, "/auth/me", Some(&access), json!({}))
        .await
        .expect(200);
    request_reset(&env, "max@example.com").await;
    wait_for_mails(&env.dir.0, "max@example.com", 1).await;
    request_reset(&env, "max@example.com").await;
    let tokens = wait_for_mails(&env.dir.0, "max@example.com", 2).await;
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    let (older, newer) = (&tokens[0], &tokens[1]);
    call(
        &env,
        Method::POST,
        "/auth/reset-password",
        None,
        json!({"token": newer, "new_password": "new password 1"}),
    )
    .await
    .expect(200);

    let me = call(&env, Method::GET, "/auth/me", Some(&access), json!({})).await;
    format1(&me, 401);
    assert_eq!(message(&me), "token revoked", "{}", me.text);
    let r = call(
        &env,
        Method::POST,
        "/auth/refresh",
        None,
        json!({"refresh_token": refresh}),
    )
    .await;
    format1(&r, 401);
    assert_eq!(message(&r), "token revoked", "{}", r.text);
    let old = call(
        &env,
        Method::POST,
        "/auth/reset-password",
        None,
        json!({"token": older, "new_password": "new password 2"}),
    )
    .await;
    format1(&old, 400);
    assert_eq!(
        old.json["details"]["reason"], "invalid_token",
        "{}",
        old.text
    );

    // What is written: the password is the new one; a login right after the
    // reset gets tokens that work.
    format1(&login(&env, "max@example.com", "new password 2").await, 401);
    let l = login(&env, "max@example.com", "new password 1").await;
    l.expect(200);
    let access = l.json["access_token"].as_str().unwrap();
    call(&env, Method::GET, "/auth/me", Some(access), json!({}))
        .await
        .expect(200);
    let refresh = l.json["refresh_token"].as_str().unwrap();
    call(
        &env,
        Method::POST,
        "/auth/refresh",
        None,
        json!({"refresh_token": refresh}),
    )
    .await
    .expect(200);
}

// ---------------------------------------------------------------------------
// N10
// ---------------------------------------------------------------------------

/// N10: a username cannot contain `@`, and an identifier with `@` logs in by
/// e-mail address only, so no username (not even one stored before the
/// rule) can take over someone's address.
#[tokio::test]
async fn n10_a_username_cannot_take_over_an_email_login() {
    let env = start_with(|_| {}).await;
    let a = register(&env, "victim@example.com", "mallory@example.com").await;
    format1(&a, 400);
    assert_eq!(
        a.json["details"]["reason"], "invalid_username",
        "{}",
        a.text
    );
    assert!(env
        .store()
        .login_lookup("mallory@example.com")
        .unwrap()
        .is_none());

    // A username with `@` from before the rule (written to the database).
    let hash = runtime::auth::passwords::hash("mallory's password").unwrap();
    env.store()
        .register("eve@example.org", "mallory2@example.com", &hash, true)
        .unwrap();
    register(&env, "eve", "eve@example.org").await.expect(201);
    let l = login(&env, "eve@example.org", PASSWORD).await;
    l.expect(200);
    let me = call(
        &env,
        Method::GET,
        "/auth/me",
        l.json["access_token"].as_str(),
        json!({}),
    )
    .await;
    me.expect(200);
    assert_eq!(
        (me.json["username"].as_str(), me.json["email"].as_str()),
        (Some("eve"), Some("eve@example.org"))
    );
    format1(
        &login(&env, "eve@example.org", "mallory's password").await,
        401,
    );
}

// ---------------------------------------------------------------------------
// N11
// ---------------------------------------------------------------------------

/// N11: a reset request is answered without waiting for the database or the
/// mail server, alike for a registered and an unknown address; the mail is
/// still sent (here to a mail server that accepts and never answers).
#[tokio::test]
async fn n11_a_reset_request_does_not_wait_for_its_mail() {
    let smtp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let smtp_addr = smtp.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Accepts and holds connections, never greeting.
        let mut held = Vec::new();
        for s in smtp.incoming().flatten() {
            held.push(s);
            let _ = tx.send(());
        }
    });
    let env = start_with(|c| c.accounts.smtp_url = Some(format!("smtp://{smtp_addr}"))).await;
    register(&env, "ned", "ned@example.com").await.expect(201);
    let mut answers = Vec::new();
    for email in ["ned@example.com", "nobody@example.com"] {
        let t = Instant::now();
        let a = call(
            &env,
            Method::POST,
            "/auth/reset-password",
            None,
            json!({"email": email}),
        )
        .await;
        let took = t.elapsed();
        a.expect(200);
        assert!(took < Duration::from_secs(2), "{email}: {took:?}");
        answers.push(a.json);
    }
    assert_eq!(answers[0], answers[1], "nothing revealed");
    // The registered address's mail was attempted after the answer (waited
    // for without blocking the runtime the gateway runs on).
    let connections = || async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        rx.try_iter().count()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = 0;
    while seen == 0 && Instant::now() < deadline {
        seen += connections().await;
    }
    assert_eq!(seen, 1, "the mail server got the registered address's mail");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(connections().await, 0, "no mail for the unknown address");
}

// ---------------------------------------------------------------------------
// N12
// ---------------------------------------------------------------------------

/// N12: `gateway serve` refuses a `GATEWAY_JWT_SECRET` under 32 bytes,
/// naming the variable; 32 bytes start.
#[test]
fn n12_a_short_jwt_secret_is_refused_at_start() {
    let dir = TempDir::new("n12");
    let mut c = gateway(&dir, "", "serve", &[("GATEWAY_JWT_SECRET", "x")]);
    c.env("GATEWAY_ADDR", "127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a 1-byte GATEWAY_JWT_SECRET was accepted: the gateway is serving");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("GATEWAY_JWT_SECRET") && err.contains("32"),
        "{err}"
    );
    let ok = serve(&dir, "", &[("GATEWAY_JWT_SECRET", &"k".repeat(32))]);
    drop(ok);
}

// ---------------------------------------------------------------------------
// N13
// ---------------------------------------------------------------------------

/// Every file and directory under `root` with a mode other than 0600 (files)
/// or 0700 (directories).
pub(crate) fn not_private(root: &std::path::Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::metadata(&p).unwrap();
        let mode = m.permissions().mode() & 0o777;
        let want = if m.is_dir() { 0o700 } else { 0o600 };
        if mode != want {
            out.push(format!("{} {mode:o}", p.display()));
        }
        if m.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    out
}

/// Registers `uma@example.com` on `gw` and asks for a reset of its
/// password: one mail (a live token) lands in `data_dir`'s outbox.
pub(crate) async fn mail_a_reset(gw: &Served, data_dir: &std::path::Path) {
    let client = reqwest::Client::new();
    let r = client
        .post(gw.url("/api/v1/auth/register"))
        .json(&json!({"username": "uma", "email": "uma@example.com", "password": PASSWORD, "accept_privacy_policy": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let r = client
        .post(gw.url("/api/v1/auth/reset-password"))
        .json(&json!({"email": "uma@example.com"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let mails = wait_for_mails(data_dir, "uma@example.com", 1).await;
    assert_eq!(mails.len(), 1);
}

/// N13: under umask 000, the stored objects and the outbox's mails (live
/// reset tokens) are 0600 in 0700 directories.
#[tokio::test]
async fn n13_objects_and_mails_are_private_whatever_the_umask() {
    let dir = TempDir::new("n13");
    let sim = start_sim().await;
    let out = gateway(&dir, "", "users create --email ops@example.com", &[])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let id = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let out = gateway(&dir, "", &format!("keys create --user {id}"), &[])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let key = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let (base, synth) = (sim.base_url(), sim.synth_url());
    let gw = serve(
        &dir,
        "umask 000 &&",
        &[
            ("GATEWAY_JWT_SECRET", std::str::from_utf8(SECRET).unwrap()),
            ("PROVIDER_API_KEY", PROVIDER_KEY),
            ("PROVIDER_BASE_URL", &base),
            ("PROVIDER_SYNTH_URL", &synth),
        ],
    );
    let client = reqwest::Client::new();
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(wav(0.5)).file_name("a.wav"),
    );
    let r = client
        .post(gw.url("/api/v1/voice/uploads"))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let up = Answer::from(r).await;
    assert!(up.status < 300, "{} {}", up.status, up.text);
    mail_a_reset(&gw, &dir.0).await;

    let objects = dir.0.join("objects");
    let files = not_private(&objects);
    assert!(files.is_empty(), "{files:#?}");
    assert!(
        std::fs::read_dir(&objects)
            .unwrap()
            .flatten()
            .any(|e| !e.file_name().to_string_lossy().starts_with('.')),
        "an object was stored"
    );
    let outbox = not_private(&dir.0.join("outbox"));
    assert!(outbox.is_empty(), "{outbox:#?}");
    drop(gw);
}
