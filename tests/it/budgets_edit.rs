//! A key's budget edited after its creation (#27): `PATCH
//! /api/v1/keys/{key_id}` sets it (`budget_usd` with `budget_period`) or
//! removes it (`budget_usd: null`); the next request sees it; another
//! user's, a revoked or an unknown key is 404; bad input is 400 naming the
//! field, with nothing changed. The CLI's `gateway keys update` does the same.

use runtime::store::Keys;
use serde_json::{json, Value};

use crate::budgets::{bad_budgets, gateway_cli, listed, succeeded};
use crate::harness::*;

fn image() -> Value {
    json!({"model": "sim/sim-image", "prompt": "a cat", "n": 1})
}

fn with_jwt(c: &mut runtime::config::Config) {
    c.accounts.jwt_secret = Some(b"test-jwt-secret-0123456789".to_vec());
}

/// `(budget_usd, budget_period)` as stored.
async fn stored(env: &Env, key_id: i64) -> Vec<String> {
    let sql = format!("SELECT COALESCE(budget_usd, 'NULL'), COALESCE(budget_period, 'NULL') FROM api_keys WHERE id = {key_id}");
    own_query(env, &sql).await.remove(0)
}

#[tokio::test]
async fn a_keys_budget_is_set_changed_and_removed_and_the_next_request_sees_it() {
    let env = llm_env(with_jwt).await;
    env.grant("10");
    let token = env.gw.gateway.auth.issue(env.user_id).access_token;
    let a = env
        .call_as(
            &token,
            "POST",
            &env.url("/api/v1/keys"),
            Some(json!({"name": "ci"})),
        )
        .await;
    a.expect(201);
    let id = a.json["id"].as_i64().unwrap();
    let key = a.json["key"].as_str().unwrap().to_owned();
    let images = env.url("/api/v1/images/generations");
    // Served (and cached as a key without a budget).
    env.call_as(&key, "POST", &images, Some(image()))
        .await
        .expect(200);
    // Less than one image (0.048): the next request is refused.
    let url = env.url(&format!("/api/v1/keys/{id}"));
    let a = env
        .call_as(
            &token,
            "PATCH",
            &url,
            Some(json!({"budget_usd": "0.01", "budget_period": "day"})),
        )
        .await;
    a.expect(200);
    assert_eq!(
        (
            &a.json["id"],
            &a.json["budget_usd"],
            &a.json["budget_period"]
        ),
        (&json!(id), &json!("0.01"), &json!("day")),
        "{}",
        a.text
    );
    assert_eq!(stored(&env, id).await, ["0.01", "day"]);
    env.clear_sim_log().await;
    let refused = env.call_as(&key, "POST", &images, Some(image())).await;
    assert!(envelope(&refused, 402).contains("0.01 USD per day"));
    env.assert_no_upstream_call().await;
    // Raised: served again, and counted.
    let a = env
        .call_as(
            &token,
            "PATCH",
            &url,
            Some(json!({"budget_usd": 1, "budget_period": "month"})),
        )
        .await;
    a.expect(200);
    env.call_as(&key, "POST", &images, Some(image()))
        .await
        .expect(200);
    let list = env
        .call_as(&token, "GET", &env.url("/api/v1/keys"), None)
        .await;
    let k = listed(&list, id);
    assert_eq!(
        (&k["budget_usd"], &k["spent_usd"]),
        (&json!("1"), &json!("0.04800000")),
        "{k}"
    );
    // Removed: no budget, served whatever it spent.
    let a = env
        .call_as(&token, "PATCH", &url, Some(json!({"budget_usd": null})))
        .await;
    a.expect(200);
    assert_eq!(a.json["budget_usd"], Value::Null, "{}", a.text);
    assert_eq!(stored(&env, id).await, ["NULL", "NULL"]);
}

#[tokio::test]
async fn another_users_revoked_or_unknown_key_is_404_and_bad_input_400_with_nothing_changed() {
    let env = llm_env(with_jwt).await;
    let token = env.gw.gateway.auth.issue(env.user_id).access_token;
    let b = runtime::store::Budget::parse("5", "day").unwrap();
    let (own, _) =
        runtime::auth::create_named_key(env.store(), env.user_id, None, Some(b)).unwrap();
    let (bob, _) = env.new_user("bob@example.com");
    let (bobs, _) = runtime::auth::create_named_key(env.store(), bob, None, None).unwrap();
    let (revoked, _) =
        runtime::auth::create_named_key(env.store(), env.user_id, None, None).unwrap();
    assert!(env.store().revoke_key(env.user_id, revoked).unwrap());
    let set = json!({"budget_usd": "1", "budget_period": "total"});
    for id in [
        bobs.to_string(),
        revoked.to_string(),
        "999999".into(),
        "x".into(),
    ] {
        let url = env.url(&format!("/api/v1/keys/{id}"));
        let a = env.call_as(&token, "PATCH", &url, Some(set.clone())).await;
        a.expect(404);
    }
    assert_eq!(stored(&env, bobs).await, ["NULL", "NULL"]);
    assert_eq!(stored(&env, revoked).await, ["NULL", "NULL"]);
    let url = env.url(&format!("/api/v1/keys/{own}"));
    let mut bad = bad_budgets();
    bad.push((json!({}), "budget_usd"));
    bad.push((
        json!({"budget_usd": null, "budget_period": "day"}),
        "budget_period",
    ));
    for (body, field) in bad {
        let a = env.call_as(&token, "PATCH", &url, Some(body.clone())).await;
        a.expect(400);
        assert!(
            a.json["message"]
                .as_str()
                .unwrap_or_default()
                .contains(field),
            "{body}: {}",
            a.text
        );
    }
    assert_eq!(stored(&env, own).await, ["5", "day"]);
    // An API key cannot edit keys (access token only).
    let a = env.call_as(&env.key, "PATCH", &url, Some(set)).await;
    a.expect(401);
    assert_eq!(stored(&env, own).await, ["5", "day"]);
}

#[tokio::test]
async fn the_cli_updates_a_keys_budget() {
    let dir = TempDir::new("budgets-cli-update");
    let gateway = |args: &[&str]| gateway_cli(&dir, args);
    let ok = succeeded;
    let user = ok(gateway(&["users", "create", "--email", "ops@example.com"]));
    let user = user.trim();
    ok(gateway(&["keys", "create", "--user", user]));
    let list = ok(gateway(&["keys", "list", "--user", user]));
    let id = list.split('\t').next().unwrap().to_owned();
    ok(gateway(&[
        "keys",
        "update",
        &id,
        "--budget-usd",
        "7",
        "--budget-period",
        "month",
    ]));
    let list = ok(gateway(&["keys", "list", "--user", user]));
    let fields: Vec<&str> = list.trim().split('\t').collect();
    assert_eq!(&fields[4..6], ["7", "month"], "{list}");
    for bad in [
        &["--budget-usd", "7"][..],
        &["--budget-usd", "7", "--budget-period", "week"],
        &["--budget-usd", "-7", "--budget-period", "day"],
        &[],
        &["--budget-usd", "7", "--budget-period", "day", "--no-budget"],
    ] {
        let mut args = vec!["keys", "update", &id];
        args.extend_from_slice(bad);
        assert!(!gateway(&args).status.success(), "{bad:?}");
    }
    assert!(!gateway(&["keys", "update", "999999", "--no-budget"])
        .status
        .success());
    ok(gateway(&["keys", "update", &id, "--no-budget"]));
    let list = ok(gateway(&["keys", "list", "--user", user]));
    let fields: Vec<&str> = list.trim().split('\t').collect();
    assert_eq!(&fields[4..6], ["-", "-"], "{list}");
}
