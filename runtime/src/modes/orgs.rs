//! The organization modes (access token only): `org_create` (the caller
//! its owner), `org_list` (the caller's, with their role), `org_invite`
//! (a mailed token, `owner`/`admin`), `org_accept` (the invited address
//! joins), `org_members` (every member reads), `org_member_remove`
//! (`owner`/`admin`: the member's keys of it revoked, every instance's
//! key cache dropped, so they lose access at once).
//!
//! An organization is an account: its keys (`/organizations/{org_id}/keys`,
//! the key modes), usage and credits (the history modes) are an account's,
//! held and billed against its balance, so every isolation rule between
//! users holds between organizations. Who may do what is
//! [`OrgRight`](super::common::OrgRight).

use chrono::Utc;
use http::StatusCode;
use rand::RngCore;
use serde_json::{json, Value};

use super::common::{account_for, read_body, OrgRight};
use crate::ctx::{Ctx, Outcome};
use gateway_base::body::{self, Request};
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;
use gateway_store::{Accounts, Organizations, Removal};

/// How long an invitation's token lives.
const INVITATION_DAYS: i64 = 7;

/// The roles an invitation may give (`owner` is the creator's).
const ROLES: [&str; 3] = ["admin", "billing", "member"];

fn ok(status: StatusCode, v: Value) -> Outcome {
    Outcome::new(body::json(status, &v), None)
}

fn text_field(
    obj: &serde_json::Map<String, Value>,
    name: &str,
    max: usize,
) -> Result<String, ApiError> {
    obj.get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.chars().count() <= max)
        .map(str::to_owned)
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "{name}: a non-empty string of at most {max} characters is required"
            ))
        })
}

/// `POST /organizations` `{name}`.
pub async fn create(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let uid = ctx.require_user("an organization")?;
    let obj = read_body(ctx, req).await?;
    let name = text_field(&obj, "name", 100)?;
    let handle = format!(
        "org-{}@organizations.invalid",
        uuid::Uuid::new_v4().simple()
    );
    let n = name.clone();
    let id = ctx
        .gw
        .store
        .blocking(move |s| s.create_org(&n, uid, &handle))
        .await?;
    Ok(ok(
        StatusCode::CREATED,
        json!({"id": id, "name": name, "role": "owner"}),
    ))
}

/// `GET /organizations`.
pub async fn list(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let uid = ctx.require_user("organizations")?;
    let orgs = ctx.gw.store.blocking(move |s| s.orgs_of(uid)).await?;
    let data: Vec<Value> = orgs
        .iter()
        .map(|o| json!({"id": o.id, "name": o.name, "role": o.role, "created_at": o.created_at}))
        .collect();
    Ok(ok(StatusCode::OK, json!({ "data": data })))
}

/// `POST /organizations/{org_id}/invitations` `{email, role}`: the token
/// mailed to the address (never answered), valid for a week.
pub async fn invite(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let acc = account_for(ctx, params, OrgRight::Manage).await?;
    let obj = read_body(ctx, req).await?;
    let email = text_field(&obj, "email", 254)?.to_lowercase();
    if !email.contains('@') {
        return Err(ApiError::BadRequest(
            "email: an e-mail address is required".into(),
        ));
    }
    let role = obj.get("role").and_then(Value::as_str).unwrap_or("member");
    if !ROLES.contains(&role) {
        return Err(ApiError::BadRequest(format!(
            "role: one of {}",
            ROLES.join(", ")
        )));
    }
    let mut raw = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut raw);
    let token = hex::encode(raw);
    let expires_at = gateway_store::rfc3339(Utc::now() + chrono::Duration::days(INVITATION_DAYS));
    let (org, by, hash) = (acc.id, acc.caller, gateway_adapters::auth::hash_key(&token));
    let (e, r, x) = (email.clone(), role.to_owned(), expires_at.clone());
    let name = ctx
        .gw
        .store
        .blocking(move |s| {
            s.invite(org, &e, &r, &hash, by, &x)?;
            Ok(s.orgs_of(by)?
                .into_iter()
                .find(|o| o.id == org)
                .map(|o| o.name))
        })
        .await?
        .unwrap_or_default();
    let body = format!(
        "You are invited to join the organization {name:?} as {role}.\n\nAccept while signed in as this address\n(POST /api/v1/organizations/invitations/accept {{\"token\": \"...\"}}):\n\nToken: {token}\n\nThe invitation ends at {expires_at}.\n"
    );
    let c = &ctx.gw.config;
    if let Err(e) = gateway_adapters::mail::send(
        &c.accounts,
        &c.data_dir,
        &email,
        "An invitation to an organization",
        body,
    )
    .await
    {
        tracing::warn!(request_id = %ctx.request_id, error = %e, "invitation mail not sent");
        return Err(ApiError::Unavailable(
            "the invitation could not be mailed; try again".into(),
        ));
    }
    Ok(ok(
        StatusCode::CREATED,
        json!({"organization_id": org, "email": email, "role": role, "expires_at": expires_at}),
    ))
}

/// `POST /organizations/invitations/accept` `{token}`: the caller joins,
/// when the invitation is live and was sent to their address (else 404).
pub async fn accept(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let uid = ctx.require_user("an invitation")?;
    let obj = read_body(ctx, req).await?;
    let token = text_field(&obj, "token", 200)?;
    let hash = gateway_adapters::auth::hash_key(&token);
    let joined = ctx
        .gw
        .store
        .blocking(move |s| {
            let Some(me) = s.user(uid)? else {
                return Ok(None);
            };
            s.accept_invitation(&hash, uid, &me.email)
        })
        .await?
        .ok_or_else(|| {
            ApiError::NotFound("no such invitation for this account (or it has ended)".into())
        })?;
    Ok(ok(
        StatusCode::OK,
        json!({"organization_id": joined.org_id, "role": joined.role}),
    ))
}

/// `GET /organizations/{org_id}/members`.
pub async fn members(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let org = account_for(ctx, params, OrgRight::Read).await?.id;
    let rows = ctx.gw.store.blocking(move |s| s.members(org)).await?;
    let data: Vec<Value> = rows
        .iter()
        .map(|m| json!({"user_id": m.user_id, "email": m.email, "role": m.role, "joined_at": m.joined_at}))
        .collect();
    Ok(ok(
        StatusCode::OK,
        json!({ "organization_id": org, "data": data }),
    ))
}

/// `DELETE /organizations/{org_id}/members/{member_id}`: removed, their
/// keys of the organization revoked, at once on every instance. An
/// `admin` does not remove an `owner`; the last owner is not removed (409).
pub async fn remove(ctx: &mut Ctx, params: &PathParams) -> Result<Outcome, ApiError> {
    let acc = account_for(ctx, params, OrgRight::Manage).await?;
    let none = || ApiError::NotFound("no such member".into());
    let member: i64 = params
        .get("member_id")
        .and_then(|v| v.parse().ok())
        .ok_or_else(none)?;
    let org = acc.id;
    let their = ctx
        .gw
        .store
        .blocking(move |s| s.org_role(org, member))
        .await?
        .ok_or_else(none)?;
    if their == "owner" && acc.role.as_deref() != Some("owner") {
        return Err(ApiError::Forbidden(
            "an owner is removed by an owner".into(),
        ));
    }
    let removed = match ctx
        .gw
        .store
        .blocking(move |s| s.remove_member(org, member))
        .await?
    {
        Removal::Removed(n) => n,
        Removal::NotMember => return Err(none()),
        Removal::LastOwner => {
            return Err(ApiError::Conflict {
                reason: "last_owner",
                message: "the last owner of an organization is not removed".into(),
            })
        }
    };
    ctx.gw.credentials_changed().await;
    Ok(ok(
        StatusCode::OK,
        json!({"organization_id": org, "user_id": member, "removed": true, "keys_revoked": removed}),
    ))
}
