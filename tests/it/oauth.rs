//! Sign-in with OpenID Connect (issue #24): against a real provider nobody
//! on the team wrote (`oauth2-mock-server`, [`OidcServer`]), followed like
//! a browser: the gateway's authorize (302) → the provider's authorize
//! (302 back with code and state) → the gateway's callback (tokens). What
//! each answer wrote, or did not write, is read from the database: users
//! and their (provider, subject) links. Plus register's 409
//! `email_already_linked` (spec §7).

use std::collections::BTreeSet;

use reqwest::redirect::Policy;
use runtime::store::{Accounts, ProviderSignIns};
use serde_json::{json, Value};

use crate::harness::*;

const PASSWORD: &str = "correct horse battery";
const CLIENT_ID: &str = "gateway-client";
const SECRET_VAR: &str = "IDP_CLIENT_SECRET";
const CLIENT_SECRET: &str = "idp-client-secret-0123456789";

/// A gateway with the providers of [`providers`].
pub(crate) struct SignIn {
    pub(crate) env: Env,
    pub(crate) idp: OidcServer,
    /// Follows no redirect (see [`browser`]).
    browser: reqwest::Client,
}

/// The providers file of the tests, through its parser: `idp` (the mock)
/// and `down` (nothing listens at its issuer).
fn providers(idp: &OidcServer) -> Vec<runtime::oidc::ProviderConfig> {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let file = format!(
        r#"
        [[provider]]
        id = "idp"
        issuer = "{}"
        client_id = "{CLIENT_ID}"
        client_secret_env = "{SECRET_VAR}"
        scopes = ["openid", "email", "profile"]

        [[provider]]
        id = "down"
        issuer = "http://127.0.0.1:{closed}"
        client_id = "{CLIENT_ID}"
        client_secret_env = "{SECRET_VAR}"
        "#,
        idp.issuer
    );
    runtime::oidc::config::parse(&file, "oauth.toml", |n| {
        (n == SECRET_VAR).then(|| CLIENT_SECRET.to_owned())
    })
    .unwrap()
}

/// A client that follows no redirect: each hop is the test's.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap()
}

pub(crate) async fn start() -> SignIn {
    let idp = OidcServer::start().await;
    let providers = providers(&idp);
    let env = Env::with(|c| c.oauth_providers = providers).await;
    SignIn {
        env,
        idp,
        browser: browser(),
    }
}

/// Format 1 with this status (and `details.reason`); never a secret.
#[track_caller]
pub(crate) fn format1(a: &Answer, status: u16, error: &str, reason: Option<&str>) {
    a.expect(status);
    let keys: BTreeSet<&str> = a
        .json
        .as_object()
        .unwrap_or_else(|| panic!("{}", a.text))
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["error", "message", "status_code", "details"]),
        "{}",
        a.text
    );
    assert_eq!(a.json["error"], error, "{}", a.text);
    assert_eq!(a.json["status_code"], json!(status));
    if let Some(r) = reason {
        assert_eq!(a.json["details"]["reason"], r, "{}", a.text);
    }
    assert!(!a.text.contains(CLIENT_SECRET), "{}", a.text);
}

impl SignIn {
    pub(crate) fn url(&self, path: &str) -> String {
        self.env.url(&format!("/api/v1{path}"))
    }

    async fn get(&self, url: &str) -> reqwest::Response {
        self.browser.get(url).send().await.unwrap()
    }

    /// The gateway's authorize: its 302 and where it points.
    async fn authorize(&self, provider: &str) -> String {
        let r = self
            .get(&self.url(&format!("/auth/oauth/{provider}/authorize")))
            .await;
        assert_eq!(r.status(), 302, "{}", r.text().await.unwrap());
        assert_eq!(r.headers()["cache-control"], "no-store");
        r.headers()["location"].to_str().unwrap().to_owned()
    }

    /// The gateway's authorize and the provider's: the callback URL the
    /// provider sends the browser back to (with code and state).
    async fn to_callback(&self) -> String {
        let at_provider = self.authorize("idp").await;
        assert!(
            at_provider.starts_with(&format!("{}/authorize?", self.idp.issuer)),
            "{at_provider}"
        );
        let r = self.get(&at_provider).await;
        assert_eq!(r.status(), 302, "{}", r.text().await.unwrap());
        let back = r.headers()["location"].to_str().unwrap().to_owned();
        assert!(
            back.starts_with(&self.url("/auth/oauth/idp/callback?")),
            "{back}"
        );
        back
    }

    /// A whole sign-in as `claims` (the provider's next ID token).
    pub(crate) async fn sign_in(&self, claims: Value) -> Answer {
        self.idp.set(claims).await;
        let back = self.to_callback().await;
        Answer::from(self.get(&back).await).await
    }

    pub(crate) async fn me(&self, access: &str) -> Value {
        let a = self
            .env
            .call_as(access, "GET", &self.url("/auth/me"), None)
            .await;
        a.expect(200);
        a.json
    }

    pub(crate) fn users(&self) -> usize {
        self.env.store().user_rows().unwrap().len()
    }

    pub(crate) fn links(&self, user: i64) -> Vec<(String, String)> {
        self.env.store().oauth_links_of(user).unwrap()
    }
}

/// The decoded query of a URL.
fn query_of(url: &str) -> Vec<(String, String)> {
    reqwest::Url::parse(url)
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn param<'a>(q: &'a [(String, String)], name: &str) -> &'a str {
    q.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name} in {q:?}"))
}

#[tokio::test]
async fn a_first_sign_in_makes_a_linked_account_and_later_ones_log_into_it() {
    let t = start().await;
    // The redirect asks for the code flow with PKCE S256, a state and a nonce.
    let at_provider = t.authorize("idp").await;
    let q = query_of(&at_provider);
    assert_eq!(param(&q, "response_type"), "code");
    assert_eq!(param(&q, "client_id"), CLIENT_ID);
    assert_eq!(param(&q, "code_challenge_method"), "S256");
    assert_eq!(param(&q, "code_challenge").len(), 43);
    assert!(param(&q, "state").len() >= 16 && param(&q, "nonce").len() >= 16);
    let scopes: BTreeSet<&str> = param(&q, "scope").split(' ').collect();
    assert_eq!(scopes, BTreeSet::from(["openid", "email", "profile"]));
    assert_eq!(param(&q, "redirect_uri"), t.url("/auth/oauth/idp/callback"));
    assert!(!at_provider.contains(CLIENT_SECRET));

    let before = t.users();
    let ann = json!({"sub": "subject-ann", "email": "Ann@Example.com", "email_verified": true, "preferred_username": "ann"});
    let a = t.sign_in(ann.clone()).await;
    a.expect(200);
    assert_eq!(a.json["token_type"], "bearer");
    assert!(a.json["refresh_token"].as_str().unwrap().len() > 20);
    let me = t.me(a.json["access_token"].as_str().unwrap()).await;
    assert_eq!(me["email"], "ann@example.com");
    assert_eq!(me["username"], "ann");
    assert_eq!(me["confirmed"], true);
    let ann_id = me["id"].as_i64().unwrap();
    assert_eq!(t.users(), before + 1);
    assert_eq!(t.links(ann_id), [("idp".into(), "subject-ann".into())]);
    // The refresh token works as /auth/login's does.
    let r = t
        .env
        .client
        .post(t.url("/auth/refresh"))
        .json(&json!({"refresh_token": a.json["refresh_token"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Again (the address changed at the provider): the same account, nothing new.
    let a = t
        .sign_in(
            json!({"sub": "subject-ann", "email": "ann.new@example.com", "email_verified": true}),
        )
        .await;
    a.expect(200);
    let me = t.me(a.json["access_token"].as_str().unwrap()).await;
    assert_eq!(me["id"], json!(ann_id));
    assert_eq!(t.users(), before + 1);

    // Another subject wanting the same username gets another one. (A
    // first sign-in with an address the provider did not verify makes no
    // account: `trust_accounts`.)
    let a = t
        .sign_in(json!({"sub": "subject-bob", "email": "bob@example.com", "email_verified": true, "preferred_username": "ANN"}))
        .await;
    a.expect(200);
    let me = t.me(a.json["access_token"].as_str().unwrap()).await;
    assert_eq!(me["username"], "ANN-2");
    assert_eq!(me["confirmed"], true);
    assert_ne!(me["id"], json!(ann_id));
    assert_eq!(t.users(), before + 2);
    // The audit names the signed-in user.
    let audit = t.env.audit();
    let last = audit
        .iter()
        .rfind(|r| r.route_id == "auth.oauth_callback")
        .unwrap();
    assert_eq!(last.user_id, me["id"].as_i64());
}

#[tokio::test]
async fn a_used_unknown_or_expired_state_is_400_and_writes_nothing() {
    let t = start().await;
    t.idp
        .set(json!({"sub": "subject-cid", "email": "cid@example.com", "email_verified": true}))
        .await;
    let back = t.to_callback().await;
    let a = Answer::from(t.get(&back).await).await;
    a.expect(200);
    let users = t.users();
    // The same callback again (the provider's code and the one-time state).
    let again = Answer::from(t.get(&back).await).await;
    format1(&again, 400, "bad_request", Some("invalid_state"));
    // A state the gateway never made, none at all, and one that expired.
    let code = param(&query_of(&back), "code").to_owned();
    for q in [
        format!("code={code}&state=made-up-state"),
        format!("code={code}"),
        format!("code={code}&state=expired-state"),
    ] {
        if q.ends_with("expired-state") {
            let past = "2000-01-01T00:00:00.000Z";
            let hash = runtime::auth::hash_key("expired-state");
            t.env
                .store()
                .insert_oauth_state(&hash, "idp", "n", "v", past)
                .unwrap();
        }
        let a = Answer::from(
            t.get(&t.url(&format!("/auth/oauth/idp/callback?{q}")))
                .await,
        )
        .await;
        format1(&a, 400, "bad_request", Some("invalid_state"));
    }
    // A state made for one provider is no other's (and is spent).
    let at_provider = t.authorize("idp").await;
    let state = param(&query_of(&at_provider), "state").to_owned();
    let a = Answer::from(
        t.get(&t.url(&format!("/auth/oauth/down/callback?code=x&state={state}")))
            .await,
    )
    .await;
    format1(&a, 400, "bad_request", Some("invalid_state"));
    assert_eq!(t.users(), users, "nothing written");
    // The provider refusing at its end (`error`) spends the state: 400.
    let at_provider = t.authorize("idp").await;
    let state = param(&query_of(&at_provider), "state").to_owned();
    let a = Answer::from(
        t.get(&t.url(&format!(
            "/auth/oauth/idp/callback?error=access_denied&error_description=no&state={state}"
        )))
        .await,
    )
    .await;
    format1(&a, 400, "bad_request", Some("provider_error"));
    // An unknown provider is 404 on both routes.
    for path in [
        "/auth/oauth/nope/authorize",
        "/auth/oauth/nope/callback?code=x&state=y",
    ] {
        let a = Answer::from(t.get(&t.url(path)).await).await;
        format1(&a, 404, "not_found", None);
    }
    assert_eq!(t.users(), users, "nothing written");
}

#[tokio::test]
async fn an_id_token_failing_a_check_or_a_refused_code_is_502_and_makes_no_account() {
    let t = start().await;
    let users = t.users();
    let now = chrono::Utc::now().timestamp();
    for (what, tamper) in [
        ("Invalid audiences", json!({"aud": "another-client"})),
        (
            "Invalid issuer",
            json!({"iss": "http://127.0.0.1:1/other-issuer"}),
        ),
        (
            "Invalid nonce",
            json!({"nonce": "not-the-nonce-of-this-sign-in"}),
        ),
        ("Expired", json!({"exp": now - 3600, "iat": now - 7200})),
    ] {
        let a = t
            .sign_in(json!({"sub": "subject-eve", "email": "eve@example.com", "email_verified": true, "tamper": tamper}))
            .await;
        format1(&a, 502, "bad_gateway", None);
        let message = a.json["message"].as_str().unwrap();
        assert!(
            message.contains("ID token is invalid") && message.contains(what),
            "{what}: {}",
            a.text
        );
    }
    // Signed by a key the provider's JWKS lacks (the keys are fetched
    // again once, and still lack it).
    let a = t
        .sign_in(
            json!({"sub": "subject-eve", "email": "eve@example.com", "kid": "not-a-published-key"}),
        )
        .await;
    format1(&a, 502, "bad_gateway", None);
    assert!(
        a.text.contains("Signature verification failed"),
        "{}",
        a.text
    );
    let a = t
        .sign_in(json!({"sub": "subject-eve", "email": "eve@example.com", "refuse": true}))
        .await;
    format1(&a, 502, "bad_gateway", None);
    assert!(a.text.contains("invalid_grant"), "{}", a.text);
    assert_eq!(t.users(), users, "no account made");
    // The same subject with a good token afterwards: one account.
    let a = t
        .sign_in(json!({"sub": "subject-eve", "email": "eve@example.com", "email_verified": true}))
        .await;
    a.expect(200);
    assert_eq!(t.users(), users + 1);
}

#[tokio::test]
async fn an_unreachable_provider_is_503_with_retry_after_and_writes_nothing() {
    let mut t = start().await;
    // Discovery of a provider nobody answers for.
    let a = Answer::from(t.get(&t.url("/auth/oauth/down/authorize")).await).await;
    format1(&a, 503, "service_unavailable", None);
    assert_eq!(a.header("retry-after"), Some("30"));
    // A sign-in under way whose provider goes away before the callback:
    // the code cannot be exchanged.
    t.idp
        .set(json!({"sub": "subject-fay", "email": "fay@example.com"}))
        .await;
    let back = t.to_callback().await;
    let users = t.users();
    t.idp.stop();
    let a = Answer::from(t.get(&back).await).await;
    format1(&a, 503, "service_unavailable", None);
    assert_eq!(a.header("retry-after"), Some("30"));
    assert_eq!(t.users(), users, "nothing written");
}

#[tokio::test]
async fn registering_an_address_that_signs_in_with_a_provider_is_409() {
    let t = start().await;
    let a = t
        .sign_in(json!({"sub": "subject-gus", "email": "gus@example.com", "email_verified": true}))
        .await;
    a.expect(200);
    let users = t.users();
    let register = |username: &str, email: &str| {
        let body = json!({"username": username, "email": email, "password": PASSWORD, "accept_privacy_policy": true});
        let req = t.env.client.post(t.url("/auth/register")).json(&body);
        async move { Answer::from(req.send().await.unwrap()).await }
    };
    let a = register("gus2", "GUS@example.com").await;
    format1(&a, 409, "conflict", Some("email_already_linked"));
    assert_eq!(t.users(), users, "no user row");
    // An account that signs in with a password keeps its 400 email_exists.
    let a = register("alice2", "alice@example.com").await;
    format1(&a, 400, "bad_request", Some("email_exists"));
    // And a provider's user with that address is not linked to it: 409.
    let a = t
        .sign_in(
            json!({"sub": "subject-mallory", "email": "alice@example.com", "email_verified": true}),
        )
        .await;
    format1(&a, 409, "conflict", Some("email_exists"));
    assert!(t.links(t.env.user_id).is_empty());
    assert_eq!(t.users(), users, "no user row");
}

#[tokio::test]
async fn two_first_sign_ins_of_one_subject_at_once_make_one_account() {
    let t = start().await;
    t.idp
        .set(json!({"sub": "subject-hal", "email": "hal@example.com", "email_verified": true}))
        .await;
    let users = t.users();
    let (one, two) = (t.to_callback().await, t.to_callback().await);
    let (a, b) = tokio::join!(t.get(&one), t.get(&two));
    let (a, b) = (Answer::from(a).await, Answer::from(b).await);
    a.expect(200);
    b.expect(200);
    let ids = [&a, &b].map(|x| x.json["access_token"].as_str().unwrap().to_owned());
    let (ma, mb) = (t.me(&ids[0]).await, t.me(&ids[1]).await);
    assert_eq!(ma["id"], mb["id"]);
    assert_eq!(t.users(), users + 1);
    assert_eq!(t.links(ma["id"].as_i64().unwrap()).len(), 1);
}

/// The address both instances are known by (`GATEWAY_PUBLIC_URL`, as behind
/// a load balancer); the test routes each hop to the instance it chooses.
const PUBLIC: &str = "http://gateway.test";

#[tokio::test]
async fn a_sign_in_started_on_one_instance_is_finished_by_another() {
    let idp = OidcServer::start().await;
    let providers = providers(&idp);
    let Some(pair) = Pair::start("sign-in across instances", |c| {
        c.oauth_providers = providers.clone();
        c.public_url = Some(PUBLIC.to_owned());
    })
    .await
    else {
        return;
    };
    idp.set(json!({"sub": "subject-ida", "email": "ida@example.com", "email_verified": true}))
        .await;
    let browser = browser();
    let hop = |url: String| {
        let r = browser.get(url).send();
        async move {
            let r = r.await.unwrap();
            assert_eq!(r.status(), 302);
            r.headers()["location"].to_str().unwrap().to_owned()
        }
    };
    let at_provider = hop(pair.url_a("/api/v1/auth/oauth/idp/authorize")).await;
    let back = hop(at_provider).await;
    let path = back
        .strip_prefix(PUBLIC)
        .unwrap_or_else(|| panic!("{back}"))
        .to_owned();
    assert!(
        path.starts_with("/api/v1/auth/oauth/idp/callback?"),
        "{path}"
    );
    // The callback reaches instance B.
    let a = Answer::from(browser.get(pair.url_b(&path)).send().await.unwrap()).await;
    a.expect(200);
    let access = a.json["access_token"].as_str().unwrap();
    let me = pair
        .a
        .call_as(access, "GET", &pair.url_a("/api/v1/auth/me"), None)
        .await;
    me.expect(200);
    assert_eq!(me.json["email"], "ida@example.com");
    // Spent for every instance: A refuses it too.
    let again = Answer::from(browser.get(pair.url_a(&path)).send().await.unwrap()).await;
    format1(&again, 400, "bad_request", Some("invalid_state"));
}

#[test]
fn a_bad_providers_file_stops_the_gateway_naming_the_file_and_key() {
    let dir = TempDir::new("oauth-bad-file");
    let file = dir.0.join("oauth.toml");
    std::fs::write(
        &file,
        "[[provider]]\nid = \"idp\"\nissuer = \"not a url\"\nclient_id = \"c\"\nclient_secret_env = \"GW_TEST_NO_SUCH_SECRET\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .env_clear()
        .envs(dir.gateway_env())
        .env("GATEWAY_ADDR", "127.0.0.1:0")
        .env("GATEWAY_OAUTH_PROVIDERS", &file)
        .arg("serve")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let at = format!("{}: provider \"idp\"", file.display());
    for want in [
        "GATEWAY_OAUTH_PROVIDERS".to_owned(),
        format!("{at}: issuer"),
        format!("{at}: client_secret_env"),
    ] {
        assert!(err.contains(&want), "{want} in {err}");
    }
}
