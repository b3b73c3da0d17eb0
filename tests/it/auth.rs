//! Authentication by gateway API key (spec §5): 401 causes, 403 for a
//! disabled account; nothing is forwarded or recorded for a refused request.

use runtime::store::{Accounts, Keys};

use crate::harness::*;

async fn refused(env: &Env, auth: Option<&str>) -> Answer {
    let mut rb = env.client.get(env.voice("/tts/voices"));
    if let Some(a) = auth {
        rb = rb.header("authorization", a);
    }
    Answer::from(rb.send().await.unwrap()).await
}

#[tokio::test]
async fn missing_malformed_and_unknown_keys_get_401() {
    let env = Env::start().await;
    let unknown = format!("gk_{}", "0".repeat(64));
    let cases: &[(Option<&str>, &str)] = &[
        (None, "missing credentials"),
        (Some("Basic dXNlcjpwYXNz"), "malformed Authorization header"),
        (Some("Bearer"), "malformed Authorization header"),
        (Some("Bearer not-a-key"), "malformed API key"),
        (Some("Bearer gk_abc"), "malformed API key"),
        (Some(&format!("Bearer {unknown}")), "invalid API key"),
    ];
    for (auth, expected) in cases {
        let a = refused(&env, *auth).await;
        a.expect(401);
        assert!(a.detail().contains(expected), "{auth:?}: {}", a.text);
        assert_eq!(
            a.json.as_object().unwrap().len(),
            1,
            "voice errors are {{\"detail\"}} only"
        );
    }
    env.assert_no_upstream_call().await;
    assert!(env.audit().is_empty(), "no audit row for refused requests");
}

#[tokio::test]
async fn a_valid_key_passes_and_the_key_is_stored_only_hashed() {
    let env = Env::start().await;
    env.get("/tts/voices").await.expect(200);
    if test_database_url().is_some() {
        // On PostgreSQL there is no file to read: the key is found by its
        // hash, never by itself.
        let hash = runtime::auth::hash_key(&env.key);
        assert!(env.store().key_owner(&hash).unwrap().is_some());
        assert!(env.store().key_owner(&env.key).unwrap().is_none());
        return;
    }
    let conn = rusqlite::Connection::open(env.dir.0.join("gateway.db")).unwrap();
    let hashes: Vec<String> = conn
        .prepare("SELECT key_hash FROM api_keys")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(hashes, vec![runtime::auth::hash_key(&env.key)]);
    let raw = std::fs::read(env.dir.0.join("gateway.db")).unwrap();
    assert!(
        !raw.windows(env.key.len()).any(|w| w == env.key.as_bytes()),
        "the key itself is not in the database file"
    );
}

#[tokio::test]
async fn disabled_user_gets_403_and_revoked_key_401() {
    let env = Env::start().await;
    let (bob, bob_key) = env.new_user("bob@example.com");
    env.store().set_user_disabled(bob, true).unwrap();
    let a = env
        .call_as(&bob_key, "GET", &env.voice("/tts/voices"), None)
        .await;
    a.expect(403);
    assert_eq!(a.detail(), "account disabled");

    let (_carol, carol_key) = env.new_user("carol@example.com");
    env.store()
        .revoke_key_hash(&runtime::auth::hash_key(&carol_key))
        .unwrap();
    env.call_as(&carol_key, "GET", &env.voice("/tts/voices"), None)
        .await
        .expect(401);
    env.assert_no_upstream_call().await;
    assert!(env.audit().is_empty());
}
