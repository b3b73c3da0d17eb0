//! The dashboard (`/dashboard`, issue #27): its files and headers over HTTP,
//! and the page itself driven in headless Chromium (Debian's, through
//! playwright-core: `tests/dashboard/drive.mjs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use runtime::store::{Keys, Ledger, Purchases};
use serde_json::{json, Value};

use crate::harness::*;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
const PASSWORD: &str = "correct horse battery staple";
/// What the page buys with "Buy credit" (Stripe is the simulator's).
const BUY: &str = "12.50";
const STRIPE_KEY: &str = "sk_test_dashboard_0f3a9c";

async fn get(env: &Env, path: &str) -> Answer {
    Answer::from(env.client.get(env.url(path)).send().await.unwrap()).await
}

/// Every file of the page: 200, its type, the Content-Security-Policy and
/// the other headers; a file it does not have is 404; nothing is recorded.
#[tokio::test]
async fn dashboard_files_and_headers() {
    let env = Env::start().await;
    for (path, content_type) in [
        ("/dashboard", "text/html; charset=utf-8"),
        ("/dashboard/app.js", "text/javascript; charset=utf-8"),
        ("/dashboard/app.css", "text/css; charset=utf-8"),
        ("/dashboard/config.json", "application/json"),
    ] {
        let a = get(&env, path).await;
        a.expect(200);
        assert_eq!(a.header("content-type"), Some(content_type), "{path}");
        assert_eq!(a.header("content-security-policy"), Some(CSP), "{path}");
        assert_eq!(
            a.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(a.header("referrer-policy"), Some("no-referrer"), "{path}");
        assert!(a.header("x-request-id").is_some(), "{path}");
        assert!(
            !a.text.contains("http://") || path == "/dashboard/app.js",
            "{path}"
        );
    }
    // The page: its script and style from the gateway, nothing inline.
    let page = get(&env, "/dashboard").await;
    assert!(page
        .text
        .contains(r#"<script src="/dashboard/app.js" defer></script>"#));
    assert!(page
        .text
        .contains(r#"<link rel="stylesheet" href="/dashboard/app.css">"#));
    assert_eq!(page.text.matches("<script").count(), 1);
    assert!(!page.text.contains("<style") && !page.text.contains("style="));
    assert!(!page.text.contains("https://") && !page.text.contains("http://"));
    let js = get(&env, "/dashboard/app.js").await;
    assert!(!js.text.contains("localStorage") && !js.text.contains("sessionStorage"));
    assert!(!js.text.contains("document.cookie") && !js.text.contains(".innerHTML"));
    // What the page may use: the table's routes; Stripe is not configured.
    let config = get(&env, "/dashboard/config.json").await;
    assert_eq!(config.json["stripe"], json!(false));
    let routes = config.json["routes"].as_array().unwrap();
    assert_eq!(routes.len(), server::routes::ROUTES.len());
    assert!(routes.contains(&json!("POST /api/v1/auth/login")));
    assert!(routes.contains(&json!("DELETE /api/v1/keys/{key_id}")));
    // A query parameter's fixed values, by route.
    assert_eq!(
        config.json["choices"]["GET /api/v1/keys?limit"],
        Value::Null,
        "only parameters with fixed values"
    );
    let usage_row = server::routes::ROUTES
        .iter()
        .find(|s| s.path == "/api/v1/usage")
        .unwrap();
    let group_by = usage_row
        .query
        .iter()
        .find(|q| q.name == "group_by")
        .unwrap();
    assert_eq!(
        config.json["choices"]["GET /api/v1/usage?group_by"],
        json!(group_by.one_of)
    );
    // Unknown files and look-alike paths: 404, no dashboard headers.
    for path in [
        "/dashboard/",
        "/dashboard/app.jsx",
        "/dashboard/../Cargo.toml",
        "/dashboard/index.html",
        "/dashboards",
    ] {
        let a = get(&env, path).await;
        a.expect(404);
        assert!(a.header("content-security-policy").is_none(), "{path}");
    }
    // Files, not requests: no audit record, no usage.
    assert!(env.audit().is_empty());
    assert!(env.usage().is_empty());
}

/// `tests/dashboard`, with playwright-core installed.
fn driver_dir() -> PathBuf {
    let dir = workspace_root().join("tests").join("dashboard");
    npm_installed(&dir, "playwright-core");
    dir
}

/// Where the screenshots go: the test's output directory.
fn output_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `tests/dashboard/drive.mjs` against `url`: what it saw.
async fn drive(chromium: PathBuf, url: String, user: &str, out: &std::path::Path) -> Value {
    let mut cmd = std::process::Command::new("timeout");
    cmd.args(["180", "node", "drive.mjs"])
        .current_dir(driver_dir())
        .env("CHROMIUM", chromium)
        .env("DASHBOARD_URL", url)
        .env("DASHBOARD_USER", user)
        .env("DASHBOARD_PASSWORD", PASSWORD)
        .env("DASHBOARD_OUT", out)
        .env("DASHBOARD_BUY", BUY);
    let o = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("node runs tests/dashboard/drive.mjs");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|_| {
        panic!(
            "the driver said nothing readable: {stdout}\n{}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// Spend of `usage` per UTC day (`YYYY-MM-DD`), 8 places.
fn spend_per_day(usage: &[runtime::store::UsageRow]) -> BTreeMap<String, String> {
    let mut days: BTreeMap<String, rust_decimal::Decimal> = BTreeMap::new();
    for u in usage {
        *days.entry(u.created_at[..10].to_owned()).or_default() += u.charged;
    }
    days.into_iter()
        .map(|(day, cost)| (day, format!("{cost:.8}")))
        .collect()
}

/// The page in headless Chromium: sign in with username and password; see
/// the balance and holds, a chart with one bar per day that has usage (two
/// requests, one moved three days back), the latest requests and one's
/// cost in its details; create a key with a budget (its secret shown once),
/// change its budget and revoke it; buy credit (Stripe is the simulator's:
/// the browser is sent to the checkout URL the payment API gave, and a
/// pending purchase is recorded). Screenshots at desktop (1280) and phone
/// (390) width go to the test's output directory; any console error, failed
/// request or error answer fails the test.
#[tokio::test]
async fn dashboard_in_headless_chromium() {
    let Some(chromium) = chromium("the dashboard") else {
        return;
    };
    let env = llm_env(|c| {
        c.stripe = runtime::stripe::StripeConfig {
            secret_key: Some(STRIPE_KEY.into()),
            webhook_secret: None,
            api_base: Some(c.provider_synth_url.clone()),
        };
    })
    .await;
    env.sim
        .shared()
        .stripe
        .configure(Some(STRIPE_KEY.into()), None, None);
    let a = env
        .client
        .post(env.url("/api/v1/auth/register"))
        .json(&json!({"username": "dora", "email": "dora@example.com", "password": PASSWORD, "accept_privacy_policy": true}))
        .send()
        .await
        .unwrap();
    let a = Answer::from(a).await;
    a.expect(201);
    let uid = a.json["id"].as_i64().unwrap();
    env.store().grant_credit(uid, d("25"), None).unwrap();
    // Two requests of dora's (the first moved three days back), then a batch.
    let key = runtime::auth::create_key(env.store(), uid).unwrap();
    let chat = env.url("/api/v1/chat/completions");
    for text in ["Hello there", "Hello again, a little longer this time"] {
        let body = json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": text}]});
        env.call_as(&key, "POST", &chat, Some(body))
            .await
            .expect(200);
    }
    // A batch of two lines of dora's, done (listed, and two more charges).
    let lines = crate::batches::chat_lines(2, |_| "sim/sim-gpt");
    let file = crate::batches::batch_file(&env.gw.url(), &key, lines).await;
    let batch = crate::batches::create(&env.gw.url(), &key, &file).await;
    let batch_id = batch.json["id"].as_str().unwrap().to_owned();
    let batch = crate::batches::wait_for(&env.gw.url(), &key, &batch_id, &["completed"]).await;
    let mine = |env: &Env| -> Vec<runtime::store::UsageRow> {
        let rows = env.usage().into_iter();
        rows.filter(|u| u.user_id == Some(uid) && u.unit != "free")
            .collect()
    };
    let first = mine(&env)[0].request_id.clone();
    let earlier = (chrono::Utc::now() - chrono::Duration::days(3))
        .format("%Y-%m-%d")
        .to_string();
    let sql = format!(
        "UPDATE usage SET created_at = '{earlier}' || substr(created_at, 11) WHERE request_id = '{first}'"
    );
    own_sql(&env, &sql, &sql).await;
    let usage = mine(&env);
    assert_eq!(usage.len(), 4);
    let newest = usage.last().unwrap();
    let days = spend_per_day(&usage);
    assert_eq!(days.len(), 2, "{days:?}");
    // A key of keys (the one made above) listed before the page's own.
    let keys_at_start = env.store().keys_of(uid).unwrap().len();

    let out = output_dir();
    for shot in ["dashboard-desktop.png", "dashboard-phone.png"] {
        let _ = std::fs::remove_file(out.join(shot));
    }
    let r = drive(chromium, env.url("/dashboard"), "dora", &out).await;
    let seen = &r["seen"];
    assert_eq!(r["problems"], json!([]), "{r:#}");
    assert_eq!(
        seen["tab_order"],
        json!(["username", "password", "Sign in"]),
        "{r:#}"
    );
    assert_eq!(seen["who"], json!("Signed in as dora"), "{r:#}");
    let balance = env.store().balance(uid).unwrap();
    assert!(balance < d("25"));
    assert_eq!(seen["balance"], json!(format!("{balance:.8}")), "{r:#}");
    assert_eq!(seen["held"], json!("0.00000000"), "{r:#}");
    assert_eq!(seen["available"], json!(format!("{balance:.8}")), "{r:#}");
    // Stripe is configured: the buy button.
    assert_eq!(seen["buy_visible"], json!(true), "{r:#}");

    // One bar per day with usage, each with that day's spend.
    let bars: BTreeMap<String, String> = seen["bars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["day"].as_str().unwrap().into(),
                b["cost"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(bars, days, "{r:#}");

    // The latest requests, newest first; the newest's details say its cost.
    let listed = seen["requests"].to_string();
    assert!(
        listed.contains(&newest.request_id) && listed.contains(&first),
        "{r:#}"
    );
    assert_eq!(
        seen["generation"]["request_id"],
        json!(newest.request_id),
        "{r:#}"
    );
    assert_eq!(
        seen["generation"]["cost"],
        json!(format!("{:.8}", newest.charged)),
        "{r:#}"
    );

    // The key: shown once in full, listed by its prefix with its budget,
    // then revoked, in the store too.
    let secret = seen["new_key"].as_str().unwrap();
    let keys = env.store().keys_of(uid).unwrap();
    assert_eq!(keys.len(), keys_at_start + 1, "{keys:?}");
    let k = keys.last().unwrap();
    assert_eq!(k.name.as_deref(), Some("dashboard key"));
    // Created with 5 per day (listed so), then changed to 7 per month.
    let budget = k.budget.as_ref().expect("the budget set on the page");
    assert_eq!(
        (budget.budget.usd, budget.budget.period.as_str()),
        (d("7"), "month")
    );
    assert_eq!((k.rpm, k.tpm), (Some(60), Some(100000)));
    let prefix = k.prefix.as_deref().unwrap();
    assert!(secret.starts_with(prefix) && secret.len() > prefix.len() + 16);
    assert!(k.revoked_at.is_some(), "{keys:?}");
    assert!(keys[..keys_at_start].iter().all(|k| k.revoked_at.is_none()));
    let before = seen["keys_before"].to_string();
    assert!(before.contains("dashboard key") && before.contains("Revoke"));
    assert!(before.contains("$5 per day: spent $0.00000000"), "{before}");
    assert!(
        !before.contains(secret),
        "the key is listed by its prefix only"
    );
    assert!(seen["keys_after"].to_string().contains("revoked"), "{r:#}");
    // Its budget was changed on the page before: 7 per month, stored.
    let changed = seen["keys_budget_set"].to_string();
    assert!(changed.contains("$7 per month"), "{r:#}");
    // The session: an HttpOnly, Secure, SameSite=Strict cookie the page's
    // script cannot read; a reload kept it signed in.
    assert_eq!(
        seen["cookie"],
        json!({"httpOnly": true, "secure": true, "sameSite": "Strict"}),
        "{r:#}"
    );
    assert_eq!(seen["script_sees_cookie"], json!(false));
    assert_eq!(seen["signed_in_after_reload"], json!(true), "{r:#}");
    // Alerts and an organization set on the page, stored.
    assert_eq!(seen["alert_thresholds"], json!("50, 100"));
    let alerts = runtime::store::Alerts::alert_settings(env.store(), uid)
        .unwrap()
        .unwrap();
    assert_eq!(
        (alerts.budget_thresholds, alerts.email),
        (vec![50, 100], true)
    );
    assert!(seen["orgs"].to_string().contains("Dashboard Org"), "{r:#}");
    let orgs = runtime::store::Organizations::orgs_of(env.store(), uid).unwrap();
    assert_eq!(
        (orgs[0].name.as_str(), orgs[0].role.as_str()),
        ("Dashboard Org", "owner")
    );
    // Its limits set on the page: 60 requests and 100,000 tokens a minute, stored.
    let limits = seen["keys_limits_set"].to_string();
    assert!(
        limits.contains("60 requests, 100000 tokens per minute"),
        "{r:#}"
    );

    // Spend by key: the one key the two requests came with, by its prefix
    // (it has no name); by model.
    let unavailable = seen["unavailable"].to_string();
    assert!(!unavailable.contains("group_by=key"), "{r:#}");
    let prefix = env.store().keys_of(uid).unwrap()[0].prefix.clone().unwrap();
    let by_key: Vec<String> = serde_json::from_value(seen["by_key"].clone()).unwrap();
    assert_eq!(by_key.len(), 1, "{r:#}");
    assert!(by_key[0].starts_with(&prefix), "{r:#}");
    let spent: rust_decimal::Decimal = usage.iter().map(|u| u.charged).sum();
    assert!(by_key[0].ends_with(&format!("\t4\t{spent:.8}")), "{r:#}");
    assert!(
        seen["by_model"].to_string().contains("sim/sim-gpt"),
        "{r:#}"
    );

    // "Buy credit": the payment API was asked once, the browser went to the
    // checkout URL it gave, and the purchase is pending.
    let checkouts: Vec<Value> = env
        .sim_requests()
        .await
        .into_iter()
        .filter(|r| r["path"].as_str().unwrap_or("").starts_with("/v1/checkout"))
        .collect();
    assert_eq!(checkouts.len(), 1, "{checkouts:#?}");
    let purchases = env.store().purchases_of(uid, 10).unwrap();
    assert_eq!(purchases.len(), 1, "{purchases:?}");
    let p = &purchases[0];
    assert_eq!(
        (p.status.as_str(), p.amount_usd),
        ("pending", d(BUY)),
        "{p:?}"
    );
    let url = seen["checkout_url"].as_str().unwrap_or_default();
    assert!(
        url.contains("/c/pay/") && url.contains(&p.session_id),
        "{r:#}"
    );

    // The batch: its status, its lines ended of all, its cost.
    let batches: Vec<String> = serde_json::from_value(seen["batches"].clone()).unwrap();
    assert_eq!(batches.len(), 1, "{r:#}");
    let cost = batch["cost"].as_str().unwrap();
    assert!(
        batches[0].starts_with(&format!("{batch_id}\tcompleted\t2 / 2\t{cost}\t")),
        "{r:#}"
    );

    // Works at a phone's width: nothing wider than the screen.
    assert_eq!(seen["phone_overflow"], json!(0), "{r:#}");
    for shot in ["dashboard-desktop.png", "dashboard-phone.png"] {
        let bytes = std::fs::read(out.join(shot)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{shot}");
        eprintln!("screenshot: {}", out.join(shot).display());
    }
}

/// With Stripe configured, the page is told so (it shows "Buy credit").
#[tokio::test]
async fn dashboard_config_says_when_stripe_is_configured() {
    let env = Env::with(|c| {
        c.stripe = runtime::stripe::StripeConfig {
            secret_key: Some("sk_test_dashboard_0f3a9c".into()),
            webhook_secret: None,
            api_base: None,
        };
    })
    .await;
    let a = get(&env, "/dashboard/config.json").await;
    a.expect(200);
    assert_eq!(a.json["stripe"], json!(true));
    assert!(
        !a.text.contains("sk_test"),
        "no secret in the page's config"
    );
    assert!(a.json["routes"]
        .as_array()
        .unwrap()
        .contains(&json!("POST /api/v1/stripe/checkout")));
}

/// The dashboard's session over HTTP: set with a refresh token (not an
/// access token, not an API key), its cookie `HttpOnly; Secure;
/// SameSite=Strict`; a call it signs in needs the session's CSRF token
/// (without it 403, nothing done), `Authorization` wins over it; signing
/// out revokes it.
#[tokio::test]
async fn the_session_cookie_signs_in_only_with_its_csrf_token_and_signs_out() {
    let env = Env::start().await;
    let pair = env.gw.gateway.auth.issue(env.user_id);
    let session = env.url("/dashboard/session");
    let post = |bearer: String| {
        let c = env.client.post(&session).bearer_auth(bearer);
        async move { c.send().await.unwrap() }
    };
    for wrong in [pair.access_token.clone(), env.key.clone()] {
        assert_eq!(post(wrong).await.status(), 401);
    }
    let r = post(pair.refresh_token.clone()).await;
    assert_eq!(r.status(), 200);
    let set = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        set.starts_with("gateway_session=")
            && set.contains("; HttpOnly; Secure; SameSite=Strict; Path=/"),
        "{set}"
    );
    let csrf = r.json::<Value>().await.unwrap()["csrf_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let cookie = set.split(';').next().unwrap().to_owned();
    // Signed in or not, as a page asks on load.
    let a = Answer::from(
        env.client
            .get(&session)
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (a.json["signed_in"].clone(), a.json["csrf_token"].as_str()),
        (json!(true), Some(csrf.as_str()))
    );
    let a = Answer::from(env.client.get(&session).send().await.unwrap()).await;
    assert_eq!(a.json, json!({"signed_in": false}));
    // A call that changes something: refused without the CSRF token, nothing made.
    let keys = env.url("/api/v1/keys");
    let before = env.store().keys_of(env.user_id).unwrap().len();
    let call = |csrf: Option<&str>| {
        let mut c = env
            .client
            .post(&keys)
            .header("cookie", &cookie)
            .json(&json!({"name": "s"}));
        if let Some(t) = csrf {
            c = c.header("x-csrf-token", t);
        }
        async move { Answer::from(c.send().await.unwrap()).await }
    };
    call(None).await.expect(403);
    call(Some("0000")).await.expect(403);
    assert_eq!(env.store().keys_of(env.user_id).unwrap().len(), before);
    call(Some(&csrf)).await.expect(201);
    assert_eq!(env.store().keys_of(env.user_id).unwrap().len(), before + 1);
    // Signed out: the token revoked, the cookie dropped, the session refused.
    let out = env.client.delete(&session).header("cookie", &cookie);
    let r = out.header("x-csrf-token", &csrf).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    call(Some(&csrf)).await.expect(401);
}
