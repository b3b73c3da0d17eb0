//! Organizations (#45): an account of its own (balance, keys, budgets,
//! resources) whose members act in roles — `owner` and `admin` (keys,
//! budgets, members), `billing` (purchases and history), `member` (their
//! own keys against its balance); invitations by a mailed token; a
//! request with an organization's key held and billed against the
//! organization, grouped by member; isolation as between users; a member
//! removed loses access at once.

use rust_decimal::Decimal;
use serde_json::{json, Value};

use crate::budgets::{gateway_cli, succeeded};
use crate::harness::*;

/// The token of the newest invitation mailed to `to`.
fn mailed_token(env: &Env, to: &str) -> String {
    let mut mails: Vec<(std::path::PathBuf, String)> = std::fs::read_dir(env.dir.0.join("outbox"))
        .unwrap()
        .flatten()
        .map(|e| (e.path(), std::fs::read_to_string(e.path()).unwrap()))
        .filter(|(_, m)| m.contains(&format!("To: {to}")) && m.contains("invited"))
        .collect();
    mails.sort();
    let (_, mail) = mails.pop().expect("an invitation");
    mail.lines()
        .find_map(|l| l.strip_prefix("Token: "))
        .unwrap()
        .trim()
        .to_owned()
}

struct Org<'a> {
    env: &'a Env,
    id: i64,
}

impl Org<'_> {
    fn url(&self, tail: &str) -> String {
        self.env
            .url(&format!("/api/v1/organizations/{}{tail}", self.id))
    }

    async fn call(&self, token: &str, method: &str, tail: &str, body: Option<Value>) -> Answer {
        self.env.call_as(token, method, &self.url(tail), body).await
    }
}

fn chat() -> Value {
    json!({"model": "sim/sim-gpt", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn an_organization_bills_its_keys_to_itself_and_keeps_each_role_to_its_rights() {
    let env = llm_env(|_| {}).await;
    let tok = |u: i64| env.gw.gateway.auth.issue(u).access_token;
    let (owner, _) = env.new_user("owner@acme.test");
    let (biller, _) = env.new_user("billing@acme.test");
    let (member, member_personal) = env.new_user("member@acme.test");
    let (stranger, stranger_key) = env.new_user("stranger@other.test");
    let (t_owner, t_biller, t_member, t_stranger) =
        (tok(owner), tok(biller), tok(member), tok(stranger));

    let a = env
        .call_as(
            &t_owner,
            "POST",
            &env.url("/api/v1/organizations"),
            Some(json!({"name": "Acme"})),
        )
        .await;
    a.expect(201);
    let org = Org {
        env: &env,
        id: a.json["id"].as_i64().unwrap(),
    };
    // Invitations: by the owner only; accepted by the invited address only.
    let invite = |email: &str, role: &str| json!({"email": email, "role": role});
    org.call(
        &t_member,
        "POST",
        "/invitations",
        Some(invite("x@acme.test", "member")),
    )
    .await
    .expect(404);
    let a = org
        .call(
            &t_owner,
            "POST",
            "/invitations",
            Some(invite("member@acme.test", "owner")),
        )
        .await;
    a.expect(400);
    for (email, role) in [
        ("billing@acme.test", "billing"),
        ("member@acme.test", "member"),
    ] {
        let a = org
            .call(&t_owner, "POST", "/invitations", Some(invite(email, role)))
            .await;
        a.expect(201);
        assert!(!a.text.contains("Token"), "{}", a.text);
    }
    let accept = env.url("/api/v1/organizations/invitations/accept");
    let member_token = mailed_token(&env, "member@acme.test");
    let a = env
        .call_as(
            &t_stranger,
            "POST",
            &accept,
            Some(json!({"token": member_token})),
        )
        .await;
    a.expect(404);
    for (t, to, role) in [
        (&t_member, "member@acme.test", "member"),
        (&t_biller, "billing@acme.test", "billing"),
    ] {
        let a = env
            .call_as(
                t,
                "POST",
                &accept,
                Some(json!({"token": mailed_token(&env, to)})),
            )
            .await;
        a.expect(200);
        assert_eq!(a.json["role"], role);
    }
    // Used once.
    let a = env
        .call_as(
            &t_member,
            "POST",
            &accept,
            Some(json!({"token": member_token})),
        )
        .await;
    a.expect(404);
    let a = org.call(&t_member, "GET", "/members", None).await;
    a.expect(200);
    let roles: Vec<&str> = a.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["owner", "member", "billing"]);
    let a = env
        .call_as(&t_member, "GET", &env.url("/api/v1/organizations"), None)
        .await;
    assert_eq!(a.json["data"][0]["role"], "member");

    // The organization's credit, by the CLI.
    succeeded(gateway_cli(
        &env.dir,
        &[
            "credits",
            "grant",
            "--org",
            &org.id.to_string(),
            "--amount",
            "5",
        ],
    ));
    // Keys: a member's own (no budget of theirs), none for billing.
    let a = org
        .call(
            &t_member,
            "POST",
            "/keys",
            Some(json!({"name": "m", "budget_usd": "1", "budget_period": "day"})),
        )
        .await;
    a.expect(403);
    org.call(&t_biller, "POST", "/keys", Some(json!({"name": "b"})))
        .await
        .expect(403);
    let a = org
        .call(&t_member, "POST", "/keys", Some(json!({"name": "m"})))
        .await;
    a.expect(201);
    let (member_key, member_key_id) = (
        a.json["key"].as_str().unwrap().to_owned(),
        a.json["id"].as_i64().unwrap(),
    );
    assert_eq!(a.json["member_id"], json!(member));
    let a = org
        .call(
            &t_owner,
            "POST",
            "/keys",
            Some(json!({"name": "o", "tpm": 100000})),
        )
        .await;
    a.expect(201);
    let owner_key = a.json["key"].as_str().unwrap().to_owned();
    // Held and billed against the organization: the member's own account has no credit.
    let chat_url = env.url("/api/v1/chat/completions");
    env.call_as(&member_personal, "POST", &chat_url, Some(chat()))
        .await
        .expect(402);
    for key in [&member_key, &member_key, &owner_key] {
        env.call_as(key, "POST", &chat_url, Some(chat()))
            .await
            .expect(200);
    }
    use runtime::store::Ledger;
    let spent = d("5") - env.store().balance(org.id).unwrap();
    assert!(spent > Decimal::ZERO);
    assert_eq!(env.store().balance(member).unwrap(), Decimal::ZERO);
    // Usage by member: for owners, admins and billing.
    let a = org
        .call(&t_biller, "GET", "/usage?group_by=member", None)
        .await;
    a.expect(200);
    let data = a.json["data"].as_array().unwrap();
    let of = |who: i64| {
        data.iter()
            .find(|g| g["member"] == json!(who))
            .unwrap_or_else(|| panic!("{data:?}"))
    };
    assert_eq!(of(member)["requests"], json!(2));
    assert_eq!(of(owner)["requests"], json!(1));
    let total: Decimal = data
        .iter()
        .map(|g| g["cost"].as_str().unwrap().parse::<Decimal>().unwrap())
        .sum();
    assert_eq!(total, spent);
    let a = org.call(&t_biller, "GET", "/credits", None).await;
    a.expect(200);
    assert_eq!(
        a.text
            .contains(&runtime::billing::format_money(d("5") - spent)),
        true,
        "{}",
        a.text
    );
    org.call(&t_member, "GET", "/usage", None).await.expect(403);
    org.call(&t_member, "GET", "/credits", None)
        .await
        .expect(403);
    org.call(
        &t_member,
        "POST",
        "/invitations",
        Some(invite("y@acme.test", "member")),
    )
    .await
    .expect(403);
    // Keys seen: a member their own, the owner every one; budgets by owners.
    let a = org.call(&t_member, "GET", "/keys", None).await;
    assert_eq!(a.json["data"].as_array().unwrap().len(), 1);
    let a = org.call(&t_owner, "GET", "/keys", None).await;
    assert_eq!(a.json["data"].as_array().unwrap().len(), 2);
    let budget = json!({"budget_usd": "2", "budget_period": "month"});
    org.call(
        &t_biller,
        "PATCH",
        &format!("/keys/{member_key_id}"),
        Some(budget.clone()),
    )
    .await
    .expect(403);
    org.call(
        &t_owner,
        "PATCH",
        &format!("/keys/{member_key_id}"),
        Some(budget),
    )
    .await
    .expect(200);

    // Isolation: a stranger sees nothing of it; the organization's stored
    // response is not the member's own account's, nor the stranger's.
    for tail in ["/members", "/usage", "/credits", "/keys"] {
        org.call(&t_stranger, "GET", tail, None).await.expect(404);
    }
    let a = env
        .call_as(
            &member_key,
            "POST",
            &env.url("/api/v1/responses"),
            Some(json!({"model": "sim/sim-gpt", "input": "hi"})),
        )
        .await;
    a.expect(200);
    let resp = env.url(&format!(
        "/api/v1/responses/{}",
        a.json["id"].as_str().unwrap()
    ));
    env.call_as(&member_key, "GET", &resp, None)
        .await
        .expect(200);
    env.call_as(&member_personal, "GET", &resp, None)
        .await
        .expect(404);
    env.call_as(&stranger_key, "GET", &resp, None)
        .await
        .expect(404);

    // The last owner stays; the member removed loses access at once.
    let a = org
        .call(&t_owner, "DELETE", &format!("/members/{owner}"), None)
        .await;
    a.expect(409);
    let a = org
        .call(&t_owner, "DELETE", &format!("/members/{member}"), None)
        .await;
    a.expect(200);
    assert_eq!(a.json["keys_revoked"], json!(1));
    env.call_as(&member_key, "POST", &chat_url, Some(chat()))
        .await
        .expect(401);
    org.call(&t_member, "GET", "/members", None)
        .await
        .expect(404);
    env.call_as(&owner_key, "POST", &chat_url, Some(chat()))
        .await
        .expect(200);
}

/// A checkout with `organization_id` credits the organization: bought by
/// its billing member, refused to a plain member (403) and to a stranger
/// (404); nothing recorded for the refused ones.
#[tokio::test]
async fn a_checkout_for_an_organization_is_its_billing_members() {
    const STRIPE_KEY: &str = "sk_test_orgs_5d1e";
    let env = Env::with(|c| {
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
    let tok = |u: i64| env.gw.gateway.auth.issue(u).access_token;
    let (owner, _) = env.new_user("owner@shop.test");
    let (biller, _) = env.new_user("billing@shop.test");
    let (member, _) = env.new_user("member@shop.test");
    let (stranger, _) = env.new_user("stranger@shop.test");
    let a = env
        .call_as(
            &tok(owner),
            "POST",
            &env.url("/api/v1/organizations"),
            Some(json!({"name": "Shop"})),
        )
        .await;
    let org = a.json["id"].as_i64().unwrap();
    let accept = env.url("/api/v1/organizations/invitations/accept");
    for (u, email, role) in [
        (biller, "billing@shop.test", "billing"),
        (member, "member@shop.test", "member"),
    ] {
        let url = env.url(&format!("/api/v1/organizations/{org}/invitations"));
        env.call_as(
            &tok(owner),
            "POST",
            &url,
            Some(json!({"email": email, "role": role})),
        )
        .await
        .expect(201);
        let t = mailed_token(&env, email);
        env.call_as(&tok(u), "POST", &accept, Some(json!({"token": t})))
            .await
            .expect(200);
    }
    let checkout = env.url("/api/v1/stripe/checkout");
    let body = json!({"amount_usd": "20.00", "organization_id": org,
                      "success_url": "https://example.com/ok", "cancel_url": "https://example.com/no"});
    env.call_as(&tok(member), "POST", &checkout, Some(body.clone()))
        .await
        .expect(403);
    env.call_as(&tok(stranger), "POST", &checkout, Some(body.clone()))
        .await
        .expect(404);
    use runtime::store::Purchases;
    assert!(env.store().purchases_of(org, 10).unwrap().is_empty());
    let a = env
        .call_as(&tok(biller), "POST", &checkout, Some(body))
        .await;
    a.expect(200);
    let bought = env.store().purchases_of(org, 10).unwrap();
    assert_eq!(bought.len(), 1);
    assert!(env.store().purchases_of(biller, 10).unwrap().is_empty());
}
