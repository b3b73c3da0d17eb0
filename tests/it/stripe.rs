//! Buying credits through Stripe Checkout (issue #24): the simulator plays
//! Stripe (`sim::stripe`: its real paths, form-encoded bodies, error shape
//! and signed webhooks). Each test checks the answer and the rows:
//! purchases, the ledger, the balance, the audit.

use std::time::Duration;

use runtime::store::{Ledger, Purchases};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use crate::harness::*;

const SECRET_KEY: &str = "sk_test_it_5f1e0c9a7b3d2e4f";
const WEBHOOK_SECRET: &str = "whsec_it_8c6b4a2e0d9f7";

/// Points the gateway's Stripe at `api_base` (the simulator's root).
fn stripe_config(c: &mut runtime::config::Config, api_base: &str) {
    c.stripe = runtime::stripe::StripeConfig {
        secret_key: Some(SECRET_KEY.into()),
        webhook_secret: Some(WEBHOOK_SECRET.into()),
        api_base: Some(api_base.into()),
    };
}

/// A gateway whose Stripe is the simulator's; the simulator delivers its
/// events to the gateway's webhook when `deliver`.
async fn env(deliver: bool) -> Env {
    let sim = start_sim().await;
    let base = sim.url();
    let env = Env::on_sim(sim, |c| stripe_config(c, &base)).await;
    let url = deliver.then(|| env.url("/api/v1/stripe/webhook"));
    env.sim
        .shared()
        .stripe
        .configure(Some(SECRET_KEY.into()), url, Some(WEBHOOK_SECRET.into()));
    env
}

fn buy(amount: &str) -> Value {
    json!({
        "amount_usd": amount,
        "success_url": "https://shop.example/paid?session={CHECKOUT_SESSION_ID}",
        "cancel_url": "https://shop.example/cancelled",
    })
}

async fn checkout_as(env: &Env, key: &str, body: Value) -> Answer {
    let a = env
        .call_as(key, "POST", &env.url("/api/v1/stripe/checkout"), Some(body))
        .await;
    assert!(
        !a.text.contains(SECRET_KEY),
        "secret key leaked: {}",
        a.text
    );
    a
}

async fn checkout(env: &Env, body: Value) -> Answer {
    checkout_as(env, &env.key, body).await
}

/// The simulator's control call paying (or expiring) a session: the event
/// it made, its signature and the gateway's status (null when not delivered).
async fn sim_control(env: &Env, session: &str, action: &str) -> Value {
    env.client
        .post(format!(
            "{}/__sim/stripe/sessions/{session}/{action}",
            env.sim.url()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn signed(body: &[u8]) -> String {
    runtime::stripe::sign(WEBHOOK_SECRET, body, now())
}

/// Posts a raw event with a `Stripe-Signature` header (none when `None`).
async fn deliver(env: &Env, body: &[u8], signature: Option<&str>) -> Answer {
    let mut rb = env
        .client
        .post(env.url("/api/v1/stripe/webhook"))
        .header("content-type", "application/json")
        .body(body.to_vec());
    if let Some(s) = signature {
        rb = rb.header("Stripe-Signature", s);
    }
    Answer::from(rb.send().await.unwrap()).await
}

fn purchase_lines(env: &Env, user: i64) -> Vec<runtime::store::LedgerRow> {
    env.store()
        .ledger(user)
        .unwrap()
        .into_iter()
        .filter(|l| l.kind == "purchase")
        .collect()
}

fn stripe_calls(reqs: &[Value]) -> Vec<&Value> {
    reqs.iter()
        .filter(|r| r["path"].as_str().unwrap_or("").starts_with("/v1/checkout"))
        .collect()
}

#[tokio::test]
async fn a_paid_checkout_is_credited_once_by_the_recorded_amount() {
    let env = env(true).await;
    let a = checkout(&env, buy("25.00")).await;
    a.expect(200);
    let session = a.json["session_id"].as_str().unwrap().to_owned();
    assert!(session.starts_with("cs_test_"), "{}", a.text);
    assert_eq!(a.json["amount_usd"], "25.00");
    assert!(a.json["checkout_url"].as_str().unwrap().contains(&session));
    assert!(a.json["expires_at"].as_str().unwrap().ends_with('Z'));

    // What Stripe was asked: form-encoded bracket keys, the key as bearer.
    let reqs = env.sim_requests().await;
    let calls = stripe_calls(&reqs);
    assert_eq!(calls.len(), 1);
    let call = calls[0];
    assert_eq!(call["method"], "POST");
    assert_eq!(
        call["headers"]["authorization"],
        format!("Bearer {SECRET_KEY}")
    );
    assert!(call["headers"]["idempotency-key"].as_str().is_some());
    let form: std::collections::HashMap<String, String> =
        form_urlencoded::parse(call["body"].as_str().unwrap().as_bytes())
            .into_owned()
            .collect();
    for (k, v) in [
        ("mode", "payment"),
        ("line_items[0][price_data][currency]", "usd"),
        ("line_items[0][price_data][unit_amount]", "2500"),
        ("line_items[0][quantity]", "1"),
        ("client_reference_id", &env.user_id.to_string()),
        ("metadata[user_id]", &env.user_id.to_string()),
        ("metadata[amount_usd]", "25.00"),
        ("cancel_url", "https://shop.example/cancelled"),
    ] {
        assert_eq!(form.get(k).map(String::as_str), Some(v), "{k} in {form:?}");
    }
    assert!(form.contains_key("line_items[0][price_data][product_data][name]"));

    // Pending, nothing credited yet.
    let p = env.store().purchase(&session).unwrap().unwrap();
    assert_eq!(
        (p.status.as_str(), p.amount_usd, p.user_id),
        ("pending", d("25.00"), env.user_id)
    );
    assert_eq!(env.balance(), Decimal::ZERO);
    assert!(purchase_lines(&env, env.user_id).is_empty());

    // Paid: the simulator sends Stripe's signed event; credited once.
    let paid = sim_control(&env, &session, "pay").await;
    assert_eq!(paid["status"], 200, "{paid}");
    assert_eq!(env.balance(), d("25.00"));
    let lines = purchase_lines(&env, env.user_id);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0].amount, d("25.00"));
    assert!(lines[0].note.as_deref().unwrap().contains(&session));
    let p = env.store().purchase(&session).unwrap().unwrap();
    assert_eq!(p.status, "paid");
    assert_eq!(p.paid_event.as_deref(), paid["event"]["id"].as_str());
    // The gateway read the session back from Stripe before crediting.
    let reqs = env.sim_requests().await;
    assert!(stripe_calls(&reqs)
        .iter()
        .any(|r| r["method"] == "GET" && r["path"].as_str().unwrap().ends_with(&session)));

    // The purchase list shows it paid.
    let list = env
        .call_as(&env.key, "GET", &env.url("/api/v1/stripe/purchases"), None)
        .await;
    list.expect(200);
    assert_eq!(list.json["data"][0]["session_id"], session.as_str());
    assert_eq!(list.json["data"][0]["status"], "paid");
    assert_eq!(list.json["data"][0]["amount_usd"], "25.00");
    assert!(list.json["data"][0]["paid_at"].is_string());
}

#[tokio::test]
async fn amounts_below_10_or_not_two_place_decimals_and_bad_urls_are_400_with_nothing_recorded() {
    let env = env(true).await;
    let cases: Vec<(Value, &str)> = vec![
        (buy("9.99"), "amount_below_minimum"),
        (buy("0.50"), "amount_below_minimum"),
        (buy("10.001"), "invalid_amount"),
        (buy("25.5.0"), "invalid_amount"),
        (buy("-25.00"), "invalid_amount"),
        (buy("1e3"), "invalid_amount"),
        (buy("25."), "invalid_amount"),
        (buy(""), "invalid_amount"),
        (buy("1000000.00"), "amount_above_maximum"),
        (
            json!({"amount_usd": "25.00", "success_url": "not a url", "cancel_url": "https://a.example/"}),
            "invalid_url",
        ),
        (
            json!({"amount_usd": "25.00", "success_url": "https://a.example/", "cancel_url": "ftp://a.example/"}),
            "invalid_url",
        ),
    ];
    for (body, reason) in cases {
        let a = checkout(&env, body.clone()).await;
        a.expect(400);
        assert_eq!(a.json["error"], "bad_request", "{body}");
        assert_eq!(a.json["status_code"], 400);
        assert_eq!(a.json["details"]["reason"], reason, "{body}: {}", a.text);
    }
    // Missing fields and a number instead of a decimal string: 400 too.
    for body in [
        json!({"amount_usd": "25.00", "success_url": "https://a.example/"}),
        json!({"amount_usd": 25, "success_url": "https://a.example/", "cancel_url": "https://a.example/"}),
    ] {
        checkout(&env, body).await.expect(400);
    }
    assert!(stripe_calls(&env.sim_requests().await).is_empty());
    assert!(env
        .store()
        .purchases_of(env.user_id, 100)
        .unwrap()
        .is_empty());

    // The boundary is allowed: 10.00 and 10.
    for amount in ["10.00", "10"] {
        let a = checkout(&env, buy(amount)).await;
        a.expect(200);
        assert_eq!(a.json["amount_usd"], "10.00");
    }
    let rows = env.store().purchases_of(env.user_id, 100).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows
        .iter()
        .all(|p| p.amount_usd == d("10.00") && p.status == "pending"));
    assert_eq!(env.balance(), Decimal::ZERO);
}

#[tokio::test]
async fn stripe_unreachable_or_stalling_answers_503_with_retry_after_30() {
    // A closed port: nothing listens there.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let sim = start_sim().await;
    let env = Env::on_sim(sim, |c| stripe_config(c, &format!("http://{closed}"))).await;
    let a = checkout(&env, buy("25.00")).await;
    a.expect(503);
    assert_eq!(a.json["error"], "service_unavailable");
    assert_eq!(a.header("retry-after"), Some("30"));
    assert!(env
        .store()
        .purchases_of(env.user_id, 100)
        .unwrap()
        .is_empty());
    assert_eq!(env.balance(), Decimal::ZERO);

    // Stalling: Stripe accepts the connection and never answers.
    let sim = start_sim().await;
    let base = sim.url();
    let env = Env::on_sim(sim, |c| {
        stripe_config(c, &base);
        c.upstream_timeout = Duration::from_millis(500);
    })
    .await;
    env.fault(json!({"path": "/v1/checkout/sessions", "method": "POST", "fault": "timeout"}))
        .await;
    let a = checkout(&env, buy("25.00")).await;
    a.expect(503);
    assert_eq!(a.header("retry-after"), Some("30"));
    assert!(env
        .store()
        .purchases_of(env.user_id, 100)
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn stripe_refusing_answers_500_checkout_session_creation_failed() {
    let env = env(true).await;
    env.fault(json!({
        "path": "/v1/checkout/sessions", "method": "POST",
        "fault": {"status": 402, "body": {"error": {"type": "card_error", "message": "Your account cannot currently make live charges."}}},
    }))
    .await;
    let a = checkout(&env, buy("25.00")).await;
    a.expect(500);
    assert_eq!(a.json["error"], "internal_server_error");
    assert_eq!(a.json["message"], "checkout session creation failed");
    assert!(env
        .store()
        .purchases_of(env.user_id, 100)
        .unwrap()
        .is_empty());

    // A wrong secret key: Stripe's 401 in its error shape, the same 500.
    env.sim
        .shared()
        .stripe
        .configure(Some("sk_test_other".into()), None, None);
    let a = checkout(&env, buy("25.00")).await;
    a.expect(500);
    assert_eq!(a.json["message"], "checkout session creation failed");
    assert!(env
        .store()
        .purchases_of(env.user_id, 100)
        .unwrap()
        .is_empty());
    assert!(env.audit().iter().all(|r| r.route_id != "stripe.checkout"));
}

#[tokio::test]
async fn without_stripe_secret_key_the_routes_answer_503_saying_so() {
    let env = Env::start().await;
    let a = checkout(&env, buy("25.00")).await;
    a.expect(503);
    assert!(
        a.json["message"]
            .as_str()
            .unwrap()
            .contains("STRIPE_SECRET_KEY"),
        "{}",
        a.text
    );
    let a = env
        .call_as(&env.key, "GET", &env.url("/api/v1/stripe/purchases"), None)
        .await;
    a.expect(503);
    let body =
        br#"{"id":"evt_1","type":"checkout.session.completed","data":{"object":{"id":"cs_1"}}}"#;
    deliver(&env, body, Some(&signed(body))).await.expect(503);
    assert!(stripe_calls(&env.sim_requests().await).is_empty());
}

/// A checkout of 25.00 and the paid event for it, not delivered.
async fn paid_event(env: &Env) -> (String, Vec<u8>) {
    let a = checkout(env, buy("25.00")).await;
    a.expect(200);
    let session = a.json["session_id"].as_str().unwrap().to_owned();
    let paid = sim_control(env, &session, "pay").await;
    assert!(paid["status"].is_null(), "delivered: {paid}");
    (session, serde_json::to_vec(&paid["event"]).unwrap())
}

#[tokio::test]
async fn bad_stale_or_missing_signatures_are_400_and_nothing_is_stored() {
    let env = env(false).await;
    let (session, body) = paid_event(&env).await;
    let stale = runtime::stripe::sign(WEBHOOK_SECRET, &body, now() - 301);
    let wrong = runtime::stripe::sign("whsec_someone_else", &body, now());
    let mut tampered = body.clone();
    let at = tampered.len() - 2;
    tampered.insert(at, b' ');
    let cases: Vec<(&[u8], Option<String>)> = vec![
        (&body, None),
        (&body, Some(stale)),
        (&body, Some(wrong)),
        (&body, Some("t=abc,v1=00".into())),
        (&body, Some(format!("t={}", now()))),
        (&tampered, Some(signed(&body))),
    ];
    for (b, sig) in cases {
        let a = deliver(&env, b, sig.as_deref()).await;
        a.expect(400);
        assert_eq!(a.json["error"], "bad_request");
        assert_eq!(a.json["details"]["reason"], "invalid_signature", "{sig:?}");
    }
    // An unsigned body that is not even JSON: 400 as well, never parsed.
    deliver(&env, b"not json", None).await.expect(400);
    let p = env.store().purchase(&session).unwrap().unwrap();
    assert_eq!(p.status, "pending");
    assert_eq!(env.balance(), Decimal::ZERO);
    assert!(purchase_lines(&env, env.user_id).is_empty());
    assert!(env.audit().iter().all(|r| r.route_id != "stripe.webhook"));
}

#[tokio::test]
async fn other_event_types_and_unpaid_sessions_are_answered_200_and_ignored() {
    let env = env(false).await;
    let (session, _) = {
        let a = checkout(&env, buy("30.00")).await;
        a.expect(200);
        (a.json["session_id"].as_str().unwrap().to_owned(), ())
    };
    let events = [
        json!({"id": "evt_a", "object": "event", "type": "payment_intent.succeeded",
               "data": {"object": {"id": "pi_1", "amount": 3000}}}),
        json!({"id": "evt_b", "object": "event", "type": "checkout.session.completed",
               "data": {"object": {"id": session, "payment_status": "unpaid"}}}),
        json!({"id": "evt_c", "object": "event", "type": "checkout.session.completed",
               "data": {"object": {"id": "cs_test_nobody", "payment_status": "paid"}}}),
    ];
    let mut outcomes = Vec::new();
    for e in events {
        let body = serde_json::to_vec(&e).unwrap();
        let a = deliver(&env, &body, Some(&signed(&body))).await;
        a.expect(200);
        assert_eq!(a.json["received"], true);
        outcomes.push(a.json["outcome"].as_str().unwrap().to_owned());
    }
    assert_eq!(outcomes, ["ignored", "not_paid", "unknown_session"]);
    assert_eq!(
        env.store().purchase(&session).unwrap().unwrap().status,
        "pending"
    );
    assert_eq!(env.balance(), Decimal::ZERO);
    assert!(purchase_lines(&env, env.user_id).is_empty());

    // A session that expires unpaid: the purchase is marked expired.
    let expired = sim_control(&env, &session, "expire").await;
    let body = serde_json::to_vec(&expired["event"]).unwrap();
    let a = deliver(&env, &body, Some(&signed(&body))).await;
    a.expect(200);
    assert_eq!(a.json["outcome"], "expired");
    assert_eq!(
        env.store().purchase(&session).unwrap().unwrap().status,
        "expired"
    );
    assert_eq!(env.balance(), Decimal::ZERO);
}

/// Sends `body` `n` times at once, each with a fresh valid signature.
async fn deliver_concurrently(base: &str, body: &[u8], n: usize) -> Vec<u16> {
    let client = reqwest::Client::new();
    let sends = (0..n).map(|_| {
        let client = client.clone();
        let (url, body) = (format!("{base}/api/v1/stripe/webhook"), body.to_vec());
        async move {
            let sig = signed(&body);
            client
                .post(url)
                .header("content-type", "application/json")
                .header("Stripe-Signature", sig)
                .body(body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    });
    futures_util::future::join_all(sends).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_paid_event_20_times_concurrently_across_a_restart_finds_one_credit() {
    let env = env(false).await;
    let (session, body) = paid_event(&env).await;
    let first = deliver_concurrently(&env.gw.url(), &body, 10).await;
    assert!(first.iter().all(|s| *s == 200), "{first:?}");

    // The gateway restarts on the same database; Stripe delivers again.
    let Env {
        sim,
        gw,
        dir,
        user_id,
        ..
    } = env;
    gw.stop().await;
    let mut config = config_for(&sim, &dir);
    stripe_config(&mut config, &sim.url());
    let gw = server::start(config, TcpListener::bind("127.0.0.1:0").await.unwrap()).unwrap();
    let again = deliver_concurrently(&gw.url(), &body, 10).await;
    assert!(again.iter().all(|s| *s == 200), "{again:?}");

    // Another event for the same session, claiming another amount: 200,
    // nothing more (and never the event's figure).
    let other = json!({"id": "evt_other", "object": "event", "type": "checkout.session.completed",
        "data": {"object": {"id": session, "payment_status": "paid", "amount_total": 99_999_900}}});
    let other = serde_json::to_vec(&other).unwrap();
    let statuses = deliver_concurrently(&gw.url(), &other, 1).await;
    assert_eq!(statuses, [200]);

    let store = &gw.gateway.store;
    assert_eq!(store.balance(user_id).unwrap(), d("25.00"));
    let lines: Vec<_> = store
        .ledger(user_id)
        .unwrap()
        .into_iter()
        .filter(|l| l.kind == "purchase")
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].amount, d("25.00"));
    let p = store.purchase(&session).unwrap().unwrap();
    assert_eq!(p.status, "paid");
    assert_ne!(p.paid_event.as_deref(), Some("evt_other"));
    gw.stop().await;
}

#[tokio::test]
async fn the_purchase_list_is_the_callers_own_newest_first() {
    let env = env(true).await;
    let (bob, bob_key) = env.new_user("bob@example.com");
    let a1 = checkout(&env, buy("10.00")).await;
    a1.expect(200);
    let a2 = checkout(&env, buy("42.50")).await;
    a2.expect(200);
    checkout_as(&env, &bob_key, buy("99.00")).await.expect(200);
    let paid = a2.json["session_id"].as_str().unwrap();
    assert_eq!(sim_control(&env, paid, "pay").await["status"], 200);

    let list = env
        .call_as(&env.key, "GET", &env.url("/api/v1/stripe/purchases"), None)
        .await;
    list.expect(200);
    let data = list.json["data"].as_array().unwrap();
    let seen: Vec<(&str, &str)> = data
        .iter()
        .map(|p| {
            (
                p["amount_usd"].as_str().unwrap(),
                p["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen, [("42.50", "paid"), ("10.00", "pending")]);
    assert!(data.iter().all(|p| p["created_at"].is_string()));
    let limited = env
        .call_as(
            &env.key,
            "GET",
            &env.url("/api/v1/stripe/purchases?limit=1"),
            None,
        )
        .await;
    assert_eq!(limited.json["data"].as_array().unwrap().len(), 1);
    env.call_as(
        &env.key,
        "GET",
        &env.url("/api/v1/stripe/purchases?limit=0"),
        None,
    )
    .await
    .expect(400);

    let bobs = env
        .call_as(&bob_key, "GET", &env.url("/api/v1/stripe/purchases"), None)
        .await;
    bobs.expect(200);
    assert_eq!(bobs.json["data"].as_array().unwrap().len(), 1);
    assert_eq!(bobs.json["data"][0]["amount_usd"], "99.00");
    assert_eq!(env.balance(), d("42.50"));
    assert_eq!(env.store().balance(bob).unwrap(), Decimal::ZERO);
    // No credentials: 401 in format 1.
    let anon = Answer::from(
        env.client
            .get(env.url("/api/v1/stripe/purchases"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    anon.expect(401);
    assert_eq!(anon.json["error"], "unauthorized");
}

/// A checkout made with an access token (the dashboard's way) is the
/// token's user's. A pending purchase past its session's expiry is listed
/// `expired` before Stripe's event arrives (the stored row stays pending
/// until the event marks it).
#[tokio::test]
async fn an_access_token_checks_out_and_a_lapsed_session_is_listed_expired() {
    let env = env(false).await;
    let token = env.gw.gateway.auth.issue(env.user_id).access_token;
    let a = checkout_as(&env, &token, buy("12.00")).await;
    a.expect(200);
    let session = a.json["session_id"].as_str().unwrap().to_owned();
    let row = env.store().purchase(&session).unwrap().unwrap();
    assert_eq!((row.user_id, row.status.as_str()), (env.user_id, "pending"));
    let list = |who: String| {
        let env = &env;
        async move {
            let l = env
                .call_as(&who, "GET", &env.url("/api/v1/stripe/purchases"), None)
                .await;
            l.expect(200);
            l.json["data"][0]["status"].as_str().unwrap().to_owned()
        }
    };
    assert_eq!(list(token.clone()).await, "pending");
    // The session lapses (Stripe's 24 hours, passed).
    let lapsed = format!(
        "UPDATE purchases SET expires_at = '2020-01-01T00:00:00Z' WHERE session_id = '{session}'"
    );
    own_sql(&env, &lapsed, &lapsed).await;
    assert_eq!(list(token.clone()).await, "expired");
    assert_eq!(list(env.key.clone()).await, "expired");
    let row = env.store().purchase(&session).unwrap().unwrap();
    assert_eq!(row.status, "pending", "derived when listed, not written");
    assert_eq!(env.balance(), Decimal::ZERO);
}

#[tokio::test]
async fn a_paid_event_is_credited_only_when_stripe_confirms_the_session_and_its_amount() {
    let env = env(false).await;
    let (session, body) = paid_event(&env).await;
    let read_back = format!("/v1/checkout/sessions/{session}");

    // Stripe cannot be reached to confirm: 503 with Retry-After (Stripe
    // delivers again later), nothing credited.
    env.fault(json!({"path": read_back, "method": "GET", "fault": "reset"}))
        .await;
    let a = deliver(&env, &body, Some(&signed(&body))).await;
    a.expect(503);
    assert_eq!(a.header("retry-after"), Some("30"));
    assert_eq!(
        env.store().purchase(&session).unwrap().unwrap().status,
        "pending"
    );
    assert_eq!(env.balance(), Decimal::ZERO);

    // Stripe says the session is for another amount than recorded: not credited.
    env.fault(
        json!({"path": read_back, "method": "GET", "fault": {"status": 200, "body": {
        "id": session, "object": "checkout.session", "payment_status": "paid",
        "status": "complete", "amount_total": 9_999_900, "currency": "usd"}}}),
    )
    .await;
    let a = deliver(&env, &body, Some(&signed(&body))).await;
    a.expect(200);
    assert_eq!(a.json["outcome"], "amount_mismatch");
    assert_eq!(env.balance(), Decimal::ZERO);
    assert!(purchase_lines(&env, env.user_id).is_empty());

    // Delivered again with Stripe answering: credited, once.
    let a = deliver(&env, &body, Some(&signed(&body))).await;
    a.expect(200);
    assert_eq!(a.json["outcome"], "credited");
    let a = deliver(&env, &body, Some(&signed(&body))).await;
    assert_eq!(a.json["outcome"], "already_credited");
    assert_eq!(env.balance(), d("25.00"));
    assert_eq!(purchase_lines(&env, env.user_id).len(), 1);
}
