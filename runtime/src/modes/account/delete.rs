//! `account_delete`: `DELETE /auth/me`, the caller's account erased
//! ([`crate::erase`]). The caller proves it is them: `{"password"}` for an
//! account with a password (a wrong one is 401, counted by the login
//! back-off as a failed sign-in), else an access token issued within the
//! last [`FRESH_SIGN_IN`] (a fresh sign-in through their provider). The
//! last owner of an organization is refused (409) until another owner is
//! named, so that no organization is left without one.

use serde_json::{json, Value};

use crate::ctx::{Ctx, Outcome};
use crate::modes::common::read_body;
use gateway_adapters::auth::backoff::LoginKey;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_store::{Erasure, Organizations};

/// How recent a sign-in must be to delete an account without a password.
pub const FRESH_SIGN_IN: std::time::Duration = std::time::Duration::from_secs(300);

/// `DELETE /auth/me` `{password}`.
pub async fn delete_me(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let uid = ctx.require_user("an account's deletion")?;
    let headers = req.headers().clone();
    let from = super::limits::client_addr(&req).map_or(0, super::limits::address_key);
    let obj = read_body(ctx, req).await?;
    let stored = ctx
        .gw
        .store
        .blocking(move |s| s.password_hash_of(uid))
        .await?;
    match stored {
        Some(hash) => {
            let password = obj.get("password").and_then(Value::as_str).ok_or_else(|| {
                ApiError::BadRequest("password: the account's password is required".into())
            })?;
            let key = LoginKey::User(uid);
            let backoff = &ctx.gw.auth.login_backoff;
            if let Err(retry_after) = backoff.check(&key, from) {
                return Err(ApiError::RateLimited {
                    message: format!("too many wrong passwords; retry in {retry_after} s"),
                    retry_after,
                });
            }
            let ok = ctx
                .gw
                .auth
                .passwords
                .verify(password.to_owned(), Some(hash))
                .await?;
            if !ok {
                backoff.failed(key, from);
                return Err(ApiError::Unauthorized("incorrect password".into()));
            }
        }
        None => {
            let token = ctx.gw.auth.presented_token(&headers)?;
            let age_ms = chrono::Utc::now().timestamp_millis() - token.issued_ms;
            if age_ms > FRESH_SIGN_IN.as_millis() as i64 {
                return Err(ApiError::Unauthorized(format!(
                    "sign in again (within {} minutes) to delete an account without a password",
                    FRESH_SIGN_IN.as_secs() / 60
                )));
            }
        }
    }
    last_owner(ctx, uid).await?;
    let erased = crate::erase::erase(&ctx.gw, uid).await?;
    Ok(Outcome::new(
        gateway_base::body::json(
            http::StatusCode::OK,
            &json!({"id": uid, "deleted": true, "keys_revoked": erased.keys_revoked,
                    "objects_deleted": erased.objects, "responses_deleted": erased.responses}),
        ),
        None,
    ))
}

/// 409 when `uid` is the last owner of an organization.
async fn last_owner(ctx: &Ctx, uid: i64) -> Result<(), ApiError> {
    let alone = ctx
        .gw
        .store
        .blocking(move |s| {
            for o in s.orgs_of(uid)?.into_iter().filter(|o| o.role == "owner") {
                let owners = s
                    .members(o.id)?
                    .iter()
                    .filter(|m| m.role == "owner")
                    .count();
                if owners <= 1 {
                    return Ok(Some(o.name));
                }
            }
            Ok(None)
        })
        .await?;
    match alone {
        Some(name) => Err(ApiError::Conflict {
            reason: "last_owner",
            message: format!(
                "you are the last owner of the organization {name:?}; name another owner first"
            ),
        }),
        None => Ok(()),
    }
}
