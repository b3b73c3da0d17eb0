//! Budgets per key (#27): a key's spend in its period (charges plus holds
//! of requests in flight) never exceeds its budget, checked in the credit
//! hold's transaction: 32 concurrent requests against a budget that covers
//! 5 get exactly 5 served, on one instance and across two; spend of an
//! earlier period does not count; over budget is 402 naming the budget,
//! with no upstream call and nothing charged (the general gateway's format
//! 2, the voice API's `detail`); a key without a budget is unaffected;
//! budgets are set and listed over HTTP and by the CLI.
//!
//! The image route makes the arithmetic exact: an image of `sim-image`
//! holds and charges 0.048 USD (0.04 + 20 % markup).

use chrono::Datelike;
use futures_util::future::join_all;
use runtime::store::{History, Keys};
use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::harness::*;

/// What one image holds and charges.
const IMAGE: &str = "0.048";

fn image() -> Value {
    json!({"model": "sim/sim-image", "prompt": "a cat", "n": 1})
}

/// A key of `user` with a budget; (its id, the key).
fn budget_key(env: &Env, user: i64, usd: &str, period: &str) -> (i64, String) {
    let b = runtime::store::Budget::parse(usd, period).unwrap();
    runtime::auth::create_named_key(env.store(), user, None, Some(b)).unwrap()
}

/// Runs `gateway ARGS` on `dir`'s data, as an operator would.
pub(crate) fn gateway_cli(dir: &TempDir, args: &[&str]) -> std::process::Output {
    dir.cli(false).args(args).output().unwrap()
}

/// The standard output of a command that must have succeeded.
pub(crate) fn succeeded(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Budgets refused on create and on update (400), and the field each names.
pub(crate) fn bad_budgets() -> Vec<(Value, &'static str)> {
    vec![
        (
            json!({"budget_usd": "0.123456789", "budget_period": "day"}),
            "budget_usd",
        ),
        (
            json!({"budget_usd": "-1", "budget_period": "day"}),
            "budget_usd",
        ),
        (
            json!({"budget_usd": true, "budget_period": "day"}),
            "budget_usd",
        ),
        (json!({"budget_usd": "5"}), "budget_period"),
        (
            json!({"budget_usd": "5", "budget_period": "week"}),
            "budget_period",
        ),
    ]
}

/// The key `id` in a `GET /api/v1/keys` answer.
pub(crate) fn listed(list: &Answer, id: i64) -> Value {
    list.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == json!(id))
        .unwrap()
        .clone()
}

fn key_row(env: &Env, user: i64, id: i64) -> runtime::store::KeyRow {
    let keys = env.store().keys_of(user).unwrap();
    keys.into_iter().find(|k| k.id == id).unwrap()
}

/// `(period, spent)` rows of a key in `key_spend`, read through a
/// connection of the test's own.
async fn spend_rows(env: &Env, key_id: i64) -> Vec<(String, String)> {
    let sql =
        format!("SELECT period, spent FROM key_spend WHERE key_id = {key_id} ORDER BY period");
    own_query(env, &sql)
        .await
        .into_iter()
        .map(|r| (r[0].clone(), r[1].clone()))
        .collect()
}

/// Sets what a key spent in `period` (the clock stays real: an earlier
/// period is simply another row).
async fn set_spent(env: &Env, key_id: i64, period: &str, spent: &str) {
    let sql = format!(
        "INSERT INTO key_spend (key_id, period, spent) VALUES ({key_id}, '{period}', '{spent}')
         ON CONFLICT (key_id, period) DO UPDATE SET spent = excluded.spent"
    );
    own_sql(env, &sql, &sql).await;
}

async fn image_requests_sent(env: &Env) -> usize {
    env.sim_requests()
        .await
        .iter()
        .filter(|r| r["path"].as_str().unwrap_or("").contains("images"))
        .count()
}

/// Sends `n` image requests at once, alternately to each of `urls`; the
/// statuses, and the 402s' messages.
async fn burst(env: &Env, key: &str, urls: &[String], n: usize) -> (Vec<u16>, Vec<String>) {
    let calls = (0..n).map(|i| env.call_as(key, "POST", &urls[i % urls.len()], Some(image())));
    let answers = join_all(calls).await;
    let statuses = answers.iter().map(|a| a.status).collect();
    let refused = answers
        .iter()
        .filter(|a| a.status == 402)
        .map(|a| envelope(a, 402))
        .collect();
    (statuses, refused)
}

/// After a burst against a budget covering 5 images: 5 served and charged,
/// the rest refused naming the budget, no hold left, the key's spend 5
/// images in today's period.
async fn exactly_five(env: &Env, key_id: i64, statuses: &[u16], refused: &[String]) {
    let served = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(served, 5, "{statuses:?}");
    assert_eq!(refused.len(), statuses.len() - 5, "{statuses:?}");
    for m in refused {
        assert!(
            m.contains("budget") && m.contains("0.25 USD per day"),
            "{m}"
        );
    }
    assert_eq!(image_requests_sent(env).await, 5);
    env.wait_no_holds().await;
    let charged: Decimal = env.usage().iter().map(|u| u.charged).sum();
    assert_eq!(charged, d(IMAGE) * Decimal::from(5));
    assert_eq!(env.balance(), d("10") - charged);
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    assert_eq!(
        spend_rows(env, key_id).await,
        vec![(today, "0.24000000".to_owned())]
    );
    let b = key_row(env, env.user_id, key_id).budget.unwrap();
    assert_eq!((b.spent, b.held), (d("0.24"), Decimal::ZERO));
}

/// Room for the bursts under the rate limit of images.
fn no_image_limit(c: &mut runtime::config::Config) {
    c.rate_limits = runtime::ratelimit::Limits::parse(Some("images=off")).unwrap();
}

#[tokio::test]
async fn thirty_two_concurrent_requests_against_a_budget_of_five_serve_exactly_five() {
    let env = llm_env(no_image_limit).await;
    env.grant("10");
    let (key_id, key) = budget_key(&env, env.user_id, "0.25", "day");
    let url = env.url("/api/v1/images/generations");
    let (statuses, refused) = burst(&env, &key, &[url], 32).await;
    exactly_five(&env, key_id, &statuses, &refused).await;
}

#[tokio::test]
async fn two_instances_share_a_budget() {
    let Some(p) = llm_pair_with("budgets::two_instances_share_a_budget", no_image_limit).await
    else {
        return;
    };
    let env = &p.a;
    env.grant("10");
    let (key_id, key) = budget_key(env, env.user_id, "0.25", "day");
    let path = "/api/v1/images/generations";
    let urls = [p.url_a(path), p.url_b(path)];
    let (statuses, refused) = burst(env, &key, &urls, 32).await;
    exactly_five(env, key_id, &statuses, &refused).await;
}

#[tokio::test]
async fn spend_of_an_earlier_period_does_not_count() {
    let env = llm_env(|_| {}).await;
    env.grant("10");
    let now = chrono::Utc::now();
    let yesterday = (now - chrono::Duration::days(1))
        .format("%Y-%m-%d")
        .to_string();
    let last_month = (now.date_naive().with_day(1).unwrap() - chrono::Duration::days(1))
        .format("%Y-%m")
        .to_string();
    // Each covers two images (0.096), and spent all of it last period.
    let (day_id, day_key) = budget_key(&env, env.user_id, "0.1", "day");
    let (month_id, month_key) = budget_key(&env, env.user_id, "0.1", "month");
    set_spent(&env, day_id, &yesterday, "0.1").await;
    set_spent(&env, month_id, &last_month, "0.1").await;
    let url = env.url("/api/v1/images/generations");
    for key in [&day_key, &month_key] {
        for _ in 0..2 {
            env.call_as(key, "POST", &url, Some(image()))
                .await
                .expect(200);
        }
        let a = env.call_as(key, "POST", &url, Some(image())).await;
        envelope(&a, 402);
    }
    let today = now.format("%Y-%m-%d").to_string();
    let this_month = now.format("%Y-%m").to_string();
    assert_eq!(
        spend_rows(&env, day_id).await,
        vec![
            (yesterday, "0.1".to_owned()),
            (today, "0.09600000".to_owned())
        ]
    );
    assert_eq!(
        spend_rows(&env, month_id).await,
        vec![
            (last_month, "0.1".to_owned()),
            (this_month, "0.09600000".to_owned())
        ]
    );
    // The listing shows the current period and when it ends.
    let day = key_row(&env, env.user_id, day_id).budget.unwrap();
    assert_eq!(day.spent, d("0.096"));
    let end = day.period_end.unwrap();
    assert_eq!(end.date_naive(), now.date_naive().succ_opt().unwrap());
    let month = key_row(&env, env.user_id, month_id).budget.unwrap();
    assert_eq!(month.period_end.unwrap().format("%d").to_string(), "01");
    assert!(month.period_end.unwrap() > now);
}

#[tokio::test]
async fn over_budget_is_402_naming_the_budget_with_no_upstream_call_and_nothing_charged() {
    let env = llm_env(|_| {}).await;
    env.grant("10");
    // Less than one image.
    let (key_id, key) = budget_key(&env, env.user_id, "0.01", "month");
    let url = env.url("/api/v1/images/generations");
    let a = env.call_as(&key, "POST", &url, Some(image())).await;
    let m = envelope(&a, 402);
    assert!(
        m.contains("0.01 USD per month") && m.contains("0.04800000"),
        "{m}"
    );
    // A chat whose most possible cost is over what is left.
    let chat = json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2000});
    let a = env
        .call_as(
            &key,
            "POST",
            &env.url("/api/v1/chat/completions"),
            Some(chat),
        )
        .await;
    assert!(envelope(&a, 402).contains("budget"));
    env.assert_no_upstream_call().await;
    nothing_charged(&env, d("10")).await;
    assert!(env.usage().is_empty(), "{:?}", env.usage());
    assert!(env.store().model_usage_rows().unwrap().is_empty());
    assert!(spend_rows(&env, key_id).await.is_empty());
}

#[tokio::test]
async fn a_key_without_a_budget_is_unaffected() {
    let env = llm_env(|_| {}).await;
    env.grant("10");
    // A spent budget on another key of the same user.
    let (spent_id, spent_key) = budget_key(&env, env.user_id, "0.05", "total");
    set_spent(&env, spent_id, "total", "0.05").await;
    let url = env.url("/api/v1/images/generations");
    envelope(
        &env.call_as(&spent_key, "POST", &url, Some(image())).await,
        402,
    );
    // The env's own key has none: served, and nothing counted for a key.
    for _ in 0..3 {
        env.call_as(&env.key, "POST", &url, Some(image()))
            .await
            .expect(200);
    }
    let own = env.store().keys_of(env.user_id).unwrap();
    assert!(own[0].budget.is_none());
    assert_eq!(
        spend_rows(&env, spent_id).await,
        vec![("total".to_owned(), "0.05".to_owned())]
    );
    assert_eq!(spend_rows(&env, own[0].id).await, vec![]);
    assert_eq!(env.balance(), d("10") - d(IMAGE) * Decimal::from(3));
}

#[tokio::test]
async fn a_voice_request_over_budget_is_402_in_detail_and_its_charges_count() {
    let env = Env::start().await;
    let (key_id, key) = budget_key(&env, env.user_id, "1", "day");
    let url = env.voice("/tts/synthesize");
    env.call_as(&key, "POST", &url, Some(synth_body("Hello there")))
        .await
        .expect(200);
    let charged: Decimal = env.usage().iter().map(|u| u.charged).sum();
    assert!(charged > Decimal::ZERO);
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let rows = spend_rows(&env, key_id).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].0.as_str(), d(&rows[0].1)),
        (today.as_str(), charged)
    );
    // The budget reached: refused before the upstream call.
    set_spent(&env, key_id, &today, "1").await;
    env.clear_sim_log().await;
    let usage_before = env.usage().len();
    let a = env
        .call_as(&key, "POST", &url, Some(synth_body("Hello again")))
        .await;
    a.expect(402);
    assert!(a.detail().contains("1 USD per day"), "{}", a.text);
    env.assert_no_upstream_call().await;
    assert_eq!(env.usage().len(), usage_before);
}

#[tokio::test]
async fn budgets_are_set_and_listed_over_http() {
    let env = llm_env(|c| {
        c.accounts.jwt_secret = Some(b"test-jwt-secret-0123456789".to_vec());
    })
    .await;
    let token = env.gw.gateway.auth.issue(env.user_id).access_token;
    let keys = env.url("/api/v1/keys");
    let a = env
        .call_as(
            &token,
            "POST",
            &keys,
            Some(json!({"name": "ci", "budget_usd": 5.5, "budget_period": "month"})),
        )
        .await;
    a.expect(201);
    assert_eq!(a.json["budget_usd"], json!("5.5"), "{}", a.text);
    assert_eq!(a.json["budget_period"], json!("month"));
    assert_eq!(a.json["spent_usd"], json!("0.00000000"));
    let id = a.json["id"].as_i64().unwrap();
    let created = a.json["key"].as_str().unwrap().to_owned();
    // A request through it counts in its spend, shown by the list.
    env.grant("10");
    env.call_as(
        &created,
        "POST",
        &env.url("/api/v1/images/generations"),
        Some(image()),
    )
    .await
    .expect(200);
    let list = env.call_as(&token, "GET", &keys, None).await;
    list.expect(200);
    let k = listed(&list, id);
    assert_eq!(k["spent_usd"], json!("0.04800000"), "{k}");
    assert_eq!(k["held_usd"], json!("0.00000000"));
    let end = chrono::DateTime::parse_from_rfc3339(k["period_end"].as_str().unwrap()).unwrap();
    assert_eq!(
        (end.day(), end.format("%H:%M:%S").to_string()),
        (1, "00:00:00".into())
    );
    // The env's key: no budget.
    let plain = &list.json["data"][0];
    assert_eq!(plain["budget_usd"], Value::Null, "{plain}");
    // Bad budgets: 400 naming the field, no key made.
    let before = env.store().keys_of(env.user_id).unwrap().len();
    let mut bad = bad_budgets();
    bad.push((json!({"budget_period": "day"}), "budget_usd"));
    for (body, field) in bad {
        let a = env.call_as(&token, "POST", &keys, Some(body.clone())).await;
        a.expect(400);
        assert!(
            a.json["message"].as_str().unwrap().contains(field),
            "{body}: {}",
            a.text
        );
    }
    assert_eq!(env.store().keys_of(env.user_id).unwrap().len(), before);
}

#[tokio::test]
async fn the_cli_creates_and_lists_budgeted_keys() {
    let dir = TempDir::new("budgets-cli");
    let gateway = |args: &[&str]| gateway_cli(&dir, args);
    let ok = succeeded;
    let user = ok(gateway(&["users", "create", "--email", "ops@example.com"]));
    let user = user.trim();
    let key = ok(gateway(&[
        "keys",
        "create",
        "--user",
        user,
        "--budget-usd",
        "5",
        "--budget-period",
        "day",
    ]));
    assert!(key.trim().starts_with("gk_"), "{key}");
    ok(gateway(&["keys", "create", "--user", user]));
    for bad in [
        &["--budget-usd", "5"][..],
        &["--budget-period", "day"],
        &["--budget-usd", "5", "--budget-period", "week"],
        &["--budget-usd", "0.000000001", "--budget-period", "day"],
    ] {
        let mut args = vec!["keys", "create", "--user", user];
        args.extend_from_slice(bad);
        assert!(!gateway(&args).status.success(), "{bad:?}");
    }
    let list = ok(gateway(&["keys", "list", "--user", user]));
    let lines: Vec<Vec<&str>> = list.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(lines.len(), 2, "{list}");
    let tomorrow = (chrono::Utc::now() + chrono::Duration::days(1)).format("%Y-%m-%d");
    assert_eq!(
        &lines[0][2..8],
        ["active", "-", "5", "day", "0.00000000", "0.00000000"]
    );
    assert_eq!(lines[0][8], format!("{tomorrow}T00:00:00.000Z"), "{list}");
    assert_eq!(&lines[1][4..], ["-", "-", "-", "-", "-", "-", "-", "-"]);
    // The MCP allow-list (#44): set on create, changed, removed; a bad
    // entry refused.
    ok(gateway(&[
        "keys",
        "create",
        "--user",
        user,
        "--mcp-tools",
        "docs/*, github/create_issue",
    ]));
    let bad = gateway(&["keys", "create", "--user", user, "--mcp-tools", "docs"]);
    assert!(!bad.status.success());
    let mcp_column = |gateway: &dyn Fn(&[&str]) -> std::process::Output| {
        let list = succeeded(gateway(&["keys", "list", "--user", user]));
        list.lines()
            .last()
            .unwrap()
            .split('\t')
            .nth(9)
            .unwrap()
            .to_owned()
    };
    assert_eq!(mcp_column(&gateway), "docs/*,github/create_issue");
    let id = succeeded(gateway(&["keys", "list", "--user", user]));
    let id = id
        .lines()
        .last()
        .unwrap()
        .split('\t')
        .next()
        .unwrap()
        .to_owned();
    ok(gateway(&["keys", "update", &id, "--mcp-tools", "docs/add"]));
    assert_eq!(mcp_column(&gateway), "docs/add");
    ok(gateway(&["keys", "update", &id, "--no-mcp-tools"]));
    assert_eq!(mcp_column(&gateway), "-");
}
