//! Account deletion (#46): `DELETE /api/v1/auth/me` with the password (or
//! a fresh sign-in for an account without one), and the operator's
//! `gateway users delete --user ID --purge`: keys answer 401, objects 404,
//! stored responses gone, the address free to register again; usage,
//! ledger and audit kept under the anonymous id, still summing to what it
//! was charged.

use rust_decimal::Decimal;
use serde_json::json;

use crate::budgets::{gateway_cli, succeeded};
use crate::harness::*;
use crate::media_files::{file, png, post_media, text};
use runtime::store::{Accounts, History, Ledger};

const PASSWORD: &str = "a long enough password 42";

/// A registered account with a key, credit, a charged chat, a media file
/// and a stored response: (id, access token, key, media URL, response id).
async fn busy_account(env: &Env, email: &str) -> (i64, String, String, String, String) {
    let body = json!({"username": email.split('@').next().unwrap(), "email": email,
                      "password": PASSWORD, "accept_privacy_policy": true});
    let a = env
        .client
        .post(env.url("/api/v1/auth/register"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let a = Answer::from(a).await;
    a.expect(201);
    let uid = a.json["id"].as_i64().unwrap();
    env.store().grant_credit(uid, d("5"), Some("test")).unwrap();
    let token = env.gw.gateway.auth.issue(uid).access_token;
    let k = env
        .call_as(
            &token,
            "POST",
            &env.url("/api/v1/keys"),
            Some(json!({"name": "k"})),
        )
        .await;
    let key = k.json["key"].as_str().unwrap().to_owned();
    let chat = json!({"model": "sim/sim-gpt", "messages": [{"role": "user", "content": "hi"}]});
    env.call_as(
        &key,
        "POST",
        &env.url("/api/v1/chat/completions"),
        Some(chat),
    )
    .await
    .expect(200);
    let m = post_media(
        env,
        &key,
        vec![("file_type", text("image")), ("file", file(png(), "a.png"))],
    )
    .await;
    m.expect(200);
    let media_url = m.json["url"].as_str().unwrap().to_owned();
    let r = env
        .call_as(
            &key,
            "POST",
            &env.url("/api/v1/responses"),
            Some(json!({"model": "sim/sim-gpt", "input": "hi"})),
        )
        .await;
    r.expect(200);
    (
        uid,
        token,
        key,
        media_url,
        r.json["id"].as_str().unwrap().to_owned(),
    )
}

/// What the user was charged: the ledger's debits, and the usage records.
fn charged(env: &Env, uid: i64) -> (Decimal, Decimal) {
    let usage: Decimal = env
        .store()
        .usage_rows()
        .unwrap()
        .iter()
        .filter(|u| u.user_id == Some(uid))
        .map(|u| u.charged)
        .sum();
    (d("5") - env.store().balance(uid).unwrap(), usage)
}

#[tokio::test]
async fn a_deleted_account_answers_401_its_objects_404_its_address_is_free_and_its_usage_stays() {
    let env = llm_env(|_| {}).await;
    let (uid, token, key, media_url, response) = busy_account(&env, "leaver@example.com").await;
    let me = env.url("/api/v1/auth/me");
    let (spent, usage) = charged(&env, uid);
    assert!(spent > Decimal::ZERO && spent == usage, "{spent} {usage}");
    // A wrong or missing password: refused, nothing erased.
    env.call_as(&token, "DELETE", &me, Some(json!({"password": "wrong"})))
        .await
        .expect(401);
    env.call_as(&token, "DELETE", &me, Some(json!({})))
        .await
        .expect(400);
    env.call_as(&key, "GET", &env.url("/api/v1/credits"), None)
        .await
        .expect(200);
    assert_eq!(
        env.client.get(&media_url).send().await.unwrap().status(),
        200
    );

    let a = env
        .call_as(&token, "DELETE", &me, Some(json!({"password": PASSWORD})))
        .await;
    a.expect(200);
    assert_eq!(a.json["deleted"], json!(true));
    assert_eq!(a.json["keys_revoked"], json!(1));
    // Its key and token: 401 at once; its objects and stored response gone.
    env.call_as(&key, "GET", &env.url("/api/v1/credits"), None)
        .await
        .expect(401);
    env.call_as(&token, "GET", &me, None).await.expect(401);
    assert_eq!(
        env.client.get(&media_url).send().await.unwrap().status(),
        404
    );
    let stored: Vec<Vec<String>> = own_query(
        &env,
        &format!("SELECT id FROM responses WHERE id = '{response}'"),
    )
    .await;
    assert!(stored.is_empty());
    // Its personal fields erased; its address free to register again.
    let row = env.store().user(uid).unwrap().unwrap();
    assert_eq!(row.email, format!("deleted-{uid}@deleted.invalid"));
    let again = json!({"username": "leaver2", "email": "leaver@example.com", "password": PASSWORD,
                       "accept_privacy_policy": true});
    let a = env
        .client
        .post(env.url("/api/v1/auth/register"))
        .json(&again)
        .send()
        .await
        .unwrap();
    assert_eq!(a.status(), 201);
    // Its usage and ledger kept under the same (anonymous) id.
    assert_eq!(charged(&env, uid), (spent, usage));
}

#[tokio::test]
async fn an_account_without_a_password_is_deleted_on_a_fresh_sign_in_and_the_operator_purges_one() {
    let env = llm_env(|_| {}).await;
    let (uid, _) = env.new_user("nopassword@example.com");
    let token = env.gw.gateway.auth.issue(uid).access_token;
    let a = env
        .call_as(
            &token,
            "DELETE",
            &env.url("/api/v1/auth/me"),
            Some(json!({})),
        )
        .await;
    a.expect(200);
    assert!(env.store().user(uid).unwrap().unwrap().deleted);

    // The operator's purge.
    let (uid, _, key, media_url, _) = busy_account(&env, "purged@example.com").await;
    let (spent, usage) = charged(&env, uid);
    let out = succeeded(gateway_cli(
        &env.dir,
        &["users", "delete", "--user", &uid.to_string(), "--purge"],
    ));
    assert!(out.contains("1 keys revoked"), "{out}");
    // Revoked (a running instance without Redis sees it within its key
    // cache's 30 s; with Redis at once, through the bus).
    use runtime::store::Keys;
    let owner = env
        .store()
        .key_owner(&runtime::auth::hash_key(&key))
        .unwrap()
        .unwrap();
    assert!(owner.revoked && owner.user.deleted);
    assert_eq!(
        env.client.get(&media_url).send().await.unwrap().status(),
        404
    );
    assert_eq!(charged(&env, uid), (spent, usage));
    let row = env.store().user(uid).unwrap().unwrap();
    assert_eq!(row.email, format!("deleted-{uid}@deleted.invalid"));
}
