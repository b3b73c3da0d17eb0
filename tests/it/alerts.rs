//! Spend alerts (#45): a user's thresholds on their keys' budgets and a
//! floor under their balance (`PUT /api/v1/alerts/settings`), each fired
//! once per period from any instance, within seconds of the settlement
//! that crossed it, by mail and by a webhook signed over
//! `"{timestamp}.{body}"` (retried when the receiver fails), listed by
//! `GET /api/v1/alerts`.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::harness::*;

/// A receiver's check of a delivery: the signature over
/// `"{timestamp}.{body}"`, and a timestamp at most 5 minutes from `now`
/// (an older one is a replay).
fn accept(secret: &str, time: &str, body: &[u8], sig: &str, now: i64) -> Result<(), &'static str> {
    let ts: i64 = time.parse().map_err(|_| "bad timestamp")?;
    if (now - ts).abs() > 300 {
        return Err("stale timestamp: a replay");
    }
    let mut signed = format!("{time}.").into_bytes();
    signed.extend_from_slice(body);
    runtime::signing::verify(secret.as_bytes(), &signed, Some(sig))
}

fn image() -> Value {
    json!({"model": "sim/sim-image", "prompt": "a cat", "n": 1})
}

/// `GET /api/v1/alerts` until `done` holds of its list (10 s at most).
async fn alerts_until(
    env: &Env,
    url: &str,
    token: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let a = env.call_as(token, "GET", url, None).await;
        a.expect(200);
        let list = a.json["data"].as_array().unwrap().clone();
        if done(&list) || start.elapsed() > Duration::from_secs(15) {
            return list;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn delivered(list: &[Value]) -> bool {
    list.iter()
        .all(|a| a["deliveries"]["webhook"] == "delivered" && a["deliveries"]["email"] == "sent")
}

/// Messages in the outbox sent to `to`.
fn mails_to(env: &Env, to: &str) -> Vec<String> {
    std::fs::read_dir(env.dir.0.join("outbox"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .filter(|m| m.contains(&format!("To: {to}")))
        .collect()
}

#[tokio::test]
async fn budget_alerts_fire_once_each_by_mail_and_a_signed_webhook_from_two_instances() {
    let Some(pair) = llm_pair("budget_alerts_fire_once").await else {
        return;
    };
    let env = &pair.a;
    let (uid, _) = env.new_user("alerted@example.com");
    use runtime::store::Ledger;
    env.store()
        .grant_credit(uid, d("10"), Some("test"))
        .unwrap();
    // A budget of five images a day (0.048 USD each).
    let budget = runtime::store::Budget::parse("0.24", "day").unwrap();
    let (_, key) = runtime::auth::create_named_key(env.store(), uid, None, Some(budget)).unwrap();
    let token = env.gw.gateway.auth.issue(uid).access_token;
    // The receiver fails its first delivery: the alert is retried.
    let rx = receiver(1).await;
    let settings = env.url("/api/v1/alerts/settings");
    let set = json!({"budget_thresholds": [100, 50], "email": true, "webhook_url": rx.url});
    let a = env
        .call_as(&token, "PUT", &settings, Some(set.clone()))
        .await;
    a.expect(200);
    let secret = a.json["webhook_secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"));
    assert_eq!(a.json["budget_thresholds"], json!([50, 100]));
    // Set again with the same URL: the secret is kept and not shown again.
    let a = env.call_as(&token, "PUT", &settings, Some(set)).await;
    assert!(a.json.get("webhook_secret").is_none(), "{}", a.text);
    let a = env.call_as(&token, "GET", &settings, None).await;
    assert_eq!(a.json["webhook_secret_set"], json!(true));
    assert!(!a.text.contains(&secret));

    // Three images (60 %) on both instances at once: the 50 % alert.
    let images = |n: usize| {
        (0..n).map(|i| {
            let url = if i % 2 == 0 {
                pair.url_a("/api/v1/images/generations")
            } else {
                pair.url_b("/api/v1/images/generations")
            };
            let key = key.clone();
            async move { env.call_as(&key, "POST", &url, Some(image())).await }
        })
    };
    for a in join_all(images(3)).await {
        a.expect(200);
    }
    let alerts = env.url("/api/v1/alerts");
    let list = alerts_until(env, &alerts, &token, |l| l.len() == 1 && delivered(l)).await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["threshold"], json!(50));
    assert_eq!(list[0]["type"], "budget.threshold");
    assert_eq!(list[0]["spent_usd"], "0.14400000");
    // Two more (100 %), then one refused by the budget: the 100 % alert, once.
    for a in join_all(images(2)).await {
        a.expect(200);
    }
    let a = env
        .call_as(
            &key,
            "POST",
            &pair.url_b("/api/v1/images/generations"),
            Some(image()),
        )
        .await;
    a.expect(402);
    let list = alerts_until(env, &alerts, &token, |l| l.len() == 2 && delivered(l)).await;
    assert_eq!(list.len(), 2, "{list:?}");
    assert_eq!(list[0]["threshold"], json!(100));
    assert!(delivered(&list), "{list:?}");
    // A few more rounds of both instances: nothing fires twice.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let list = alerts_until(env, &alerts, &token, |_| true).await;
    assert_eq!(list.len(), 2, "{list:?}");

    // The webhook: each alert delivered (the first attempt refused and
    // retried), each delivery signed over its timestamp and body.
    let seen = rx.seen.lock().unwrap().clone();
    let times = rx.times.lock().unwrap().clone();
    let now = chrono::Utc::now().timestamp();
    let mut ids = std::collections::BTreeSet::new();
    for ((sig, body), time) in seen.iter().zip(&times) {
        let (sig, time) = (sig.as_deref().unwrap(), time.as_deref().unwrap());
        accept(&secret, time, body, sig, now).expect("a fresh, signed delivery");
        let v: Value = serde_json::from_slice(body).unwrap();
        ids.insert(v["id"].as_str().unwrap().to_owned());
        // The same delivery replayed later, or its body changed: refused.
        let ts: i64 = time.parse().unwrap();
        assert_eq!(
            accept(&secret, time, body, sig, ts + 301),
            Err("stale timestamp: a replay")
        );
        assert!(accept(&secret, time, b"{\"threshold\":1}", sig, now).is_err());
    }
    assert_eq!(ids.len(), 2, "{seen:?}");
    assert_eq!(seen.len(), 3, "one refused attempt, then one delivery each");
    // The mail: one message per alert, to the user's address.
    let mails = mails_to(env, "alerted@example.com");
    assert_eq!(mails.len(), 2, "{mails:?}");
    assert!(mails
        .iter()
        .any(|m| m.contains("reached 50 % of its budget")));
    assert!(mails
        .iter()
        .any(|m| m.contains("reached 100 % of its budget")));
}

#[tokio::test]
async fn a_balance_floor_fires_once_until_the_balance_is_above_it_again_and_bad_settings_are_refused(
) {
    let env = media_env().await;
    env.grant("1");
    let token = env.gw.gateway.auth.issue(env.user_id).access_token;
    let settings = env.url("/api/v1/alerts/settings");
    for (bad, field) in [
        (json!({"budget_thresholds": [0]}), "budget_thresholds"),
        (json!({"budget_thresholds": [101]}), "budget_thresholds"),
        (json!({"budget_thresholds": "50"}), "budget_thresholds"),
        (json!({"balance_floor_usd": "-1"}), "balance_floor_usd"),
        (
            json!({"balance_floor_usd": "1.123456789"}),
            "balance_floor_usd",
        ),
        (json!({"webhook_url": "ftp://example.com/x"}), "webhook_url"),
        (json!({"webhook_url": "/relative"}), "webhook_url"),
    ] {
        let a = env.call_as(&token, "PUT", &settings, Some(bad)).await;
        a.expect(400);
        assert!(
            a.json["message"].as_str().unwrap().contains(field),
            "{}",
            a.text
        );
    }
    let a = env.call_as(&token, "GET", &settings, None).await;
    assert_eq!(a.json["budget_thresholds"], json!([]));
    assert_eq!(a.json["updated_at"], "");
    // An API key cannot set them (access tokens only).
    let a = env
        .call_as(&env.key, "PUT", &settings, Some(json!({})))
        .await;
    assert!(matches!(a.status, 401 | 403), "{}", a.text);

    let a = env
        .call_as(
            &token,
            "PUT",
            &settings,
            Some(json!({"balance_floor_usd": "0.95"})),
        )
        .await;
    a.expect(200);
    assert_eq!(a.json["balance_floor_usd"], "0.95000000");
    assert!(a.json.get("webhook_secret").is_none());
    let alerts = env.url("/api/v1/alerts");
    // 1.00 → 0.952 (above) → 0.904 (below: the alert) → 0.856 (no second).
    for _ in 0..3 {
        env.api("/images/generations", image()).await.expect(200);
    }
    let list = alerts_until(&env, &alerts, &token, |l| !l.is_empty()).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let list2 = alerts_until(&env, &alerts, &token, |_| true).await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list2.len(), 1, "{list2:?}");
    assert_eq!(list[0]["type"], "balance.floor");
    assert_eq!(list[0]["threshold"], "0.95000000");
    assert_eq!(
        list[0]["deliveries"],
        json!({"email": "none", "webhook": "none", "attempts": 0})
    );
    // Topped up above the floor (the next charge's check re-arms it),
    // then below again: a second alert.
    env.grant("0.2");
    env.api("/images/generations", image()).await.expect(200); // 1.008
                                                               // The alerts task's check of that charge re-arms the floor.
    let start = Instant::now();
    while runtime::store::Alerts::alert_settings(env.store(), env.user_id)
        .unwrap()
        .unwrap()
        .floor_alerted
    {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the floor was not re-armed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..2 {
        env.api("/images/generations", image()).await.expect(200); // 0.912
    }
    let list = alerts_until(&env, &alerts, &token, |l| l.len() == 2).await;
    assert_eq!(list.len(), 2, "{list:?}");
}
