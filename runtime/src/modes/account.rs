//! The account modes: `register`, `login`, `token_refresh`, `logout`,
//! `confirm_email`, `reset_password`, `me`. Served from the database; errors
//! in the row's format (format 1), 400s with `details.reason`.
//!
//! Passwords are hashed (argon2, in the blocking pool) and never logged or
//! answered; mailed tokens are stored as SHA-256 hashes and expire.

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::common::user_json;
use super::read_body;
use crate::auth::{self, passwords, tokens::Typ, TokenPair};
use crate::body::Request;
use crate::ctx::{Ctx, Outcome};
use crate::errors::ApiError;
use crate::store::Registration;
use crate::{body, mail};

/// How long a confirmation token is valid.
const CONFIRM_TTL_HOURS: i64 = 48;
/// How long a password-reset token is valid.
const RESET_TTL_HOURS: i64 = 1;

fn reason(reason: &'static str, message: &str) -> ApiError {
    ApiError::BadRequestReason {
        reason,
        message: message.to_owned(),
    }
}

fn text<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    obj.get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn answer(status: StatusCode, v: Value) -> Outcome {
    Outcome::new(body::json(status, &v), None)
}

fn pair_json(p: &TokenPair) -> Value {
    json!({
        "access_token": p.access_token,
        "refresh_token": p.refresh_token,
        "token_type": "bearer",
        "expires_in": p.expires_in,
    })
}

async fn hash_password(password: String) -> Result<String, ApiError> {
    tokio::task::spawn_blocking(move || passwords::hash(&password))
        .await
        .map_err(|e| ApiError::internal("hashing a password", e))?
        .map_err(|e| ApiError::internal("hashing a password", e))
}

/// A new random token for a mail, stored hashed for `purpose`.
async fn mail_token(
    ctx: &Ctx,
    user_id: i64,
    purpose: &'static str,
    hours: i64,
) -> Result<String, ApiError> {
    let token = hex::encode(rand::random::<[u8; 32]>());
    let hash = auth::hash_key(&token);
    let expires = crate::store::rfc3339(chrono::Utc::now() + chrono::Duration::hours(hours));
    ctx.gw
        .store
        .blocking(move |s| s.insert_account_token(&hash, user_id, purpose, &expires))
        .await?;
    Ok(token)
}

async fn send_mail(ctx: &Ctx, to: &str, subject: &str, body: String) {
    let c = &ctx.gw.config;
    if let Err(e) = mail::send(&c.accounts, &c.data_dir, to, subject, body).await {
        tracing::warn!(request_id = %ctx.request_id, error = %e, "mail not sent");
    }
}

/// `POST /auth/register`.
pub async fn register(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let obj = read_body(ctx, req).await?;
    if obj.get("accept_privacy_policy") != Some(&Value::Bool(true)) {
        return Err(reason(
            "privacy_policy_not_accepted",
            "the privacy policy must be accepted (accept_privacy_policy: true)",
        ));
    }
    let (Some(username), Some(email), Some(password)) = (
        text(&obj, "username"),
        text(&obj, "email"),
        obj.get("password").and_then(Value::as_str),
    ) else {
        return Err(ApiError::BadRequest(
            "username, email and password are required".into(),
        ));
    };
    if !email.contains('@') || email.contains(char::is_whitespace) {
        return Err(ApiError::BadRequest("email: not an e-mail address".into()));
    }
    passwords::check(password).map_err(ApiError::BadRequest)?;
    let hash = hash_password(password.to_owned()).await?;
    let confirm = ctx.gw.config.accounts.require_email_confirmation;
    let (u, e) = (username.to_owned(), email.to_owned());
    let id = match ctx
        .gw
        .store
        .blocking(move |s| s.register(&u, &e, &hash, !confirm))
        .await?
    {
        Registration::Created(id) => id,
        Registration::UsernameExists => {
            return Err(reason("username_exists", "this username is taken"))
        }
        Registration::EmailExists => {
            return Err(reason(
                "email_exists",
                "this e-mail address is registered already",
            ))
        }
    };
    if confirm {
        let token = mail_token(ctx, id, "confirm", CONFIRM_TTL_HOURS).await?;
        let body = format!(
            "Welcome, {username}.\n\nConfirm your e-mail address with this token\n(POST /api/v1/auth/confirm {{\"token\": \"...\"}}):\n\nToken: {token}\n"
        );
        send_mail(ctx, email, "Confirm your e-mail address", body).await;
    }
    let row = ctx.gw.store.blocking(move |s| s.user_row(id)).await?;
    let row = row.ok_or_else(|| ApiError::bug("registered user not found"))?;
    Ok(answer(StatusCode::CREATED, user_json(&row)))
}

/// `POST /auth/login` with `email` or `username`, and `password`.
pub async fn login(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let obj = read_body(ctx, req).await?;
    let ident = text(&obj, "email").or_else(|| text(&obj, "username"));
    let (Some(ident), Some(password)) = (ident, obj.get("password").and_then(Value::as_str)) else {
        return Err(ApiError::BadRequest(
            "email (or username) and password are required".into(),
        ));
    };
    let id = ident.to_owned();
    let found = ctx.gw.store.blocking(move |s| s.login_lookup(&id)).await?;
    let (user, stored, confirmed) = match found {
        Some((u, h, c)) => (Some(u), h, c),
        None => (None, None, false),
    };
    let pw = password.to_owned();
    let ok = tokio::task::spawn_blocking(move || passwords::verify(&pw, stored.as_deref()))
        .await
        .map_err(|e| ApiError::internal("verifying a password", e))?;
    let user = match user {
        Some(u) if ok && !u.deleted => u,
        _ => {
            return Err(ApiError::Unauthorized(
                "incorrect email, username or password".into(),
            ))
        }
    };
    if user.disabled {
        return Err(auth::disabled());
    }
    if !confirmed && ctx.gw.config.accounts.require_email_confirmation {
        return Err(ApiError::Forbidden(
            "e-mail address not confirmed: use the token mailed at registration".into(),
        ));
    }
    let pair = ctx.gw.auth.issue(user.id);
    ctx.user = Some(user);
    Ok(answer(StatusCode::OK, pair_json(&pair)))
}

/// `POST /auth/refresh` `{refresh_token}`: a new pair, the old refresh token revoked.
pub async fn refresh(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let obj = read_body(ctx, req).await?;
    let token = text(&obj, "refresh_token")
        .ok_or_else(|| ApiError::BadRequest("refresh_token is required".into()))?;
    let pair = ctx.gw.auth.refresh(token).await?;
    Ok(answer(StatusCode::OK, pair_json(&pair)))
}

/// `POST /auth/logout` (access token) `{refresh_token?}`.
pub async fn logout(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let uid = ctx.require_user("logout")?;
    let access = ctx.gw.auth.presented_token(req.headers())?;
    let obj = read_body(ctx, req).await?;
    ctx.gw.auth.revoke(&access, uid).await?;
    if let Some(r) = text(&obj, "refresh_token") {
        match ctx.gw.auth.token_user(r, Typ::Refresh).await {
            Ok((u, v)) if u.id == uid => {
                ctx.gw.auth.revoke(&v, uid).await?;
            }
            // Someone else's, expired or revoked already: nothing to revoke.
            _ => {}
        }
    }
    Ok(answer(StatusCode::OK, json!({ "message": "logged out" })))
}

/// `POST /auth/confirm` `{token}`.
pub async fn confirm(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let obj = read_body(ctx, req).await?;
    let token = text(&obj, "token").ok_or_else(|| reason("missing_token", "token is required"))?;
    let hash = auth::hash_key(token);
    let user = ctx
        .gw
        .store
        .blocking(move |s| s.take_account_token(&hash, "confirm"))
        .await?
        .ok_or_else(|| reason("invalid_token", "the token is unknown, used or expired"))?;
    ctx.gw.store.blocking(move |s| s.confirm_user(user)).await?;
    Ok(answer(
        StatusCode::OK,
        json!({ "message": "e-mail address confirmed" }),
    ))
}

/// `POST /auth/reset-password`: `{email}` mails a token (always 200);
/// `{token, new_password}` sets the password.
pub async fn reset_password(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let obj = read_body(ctx, req).await?;
    let (token, new_password) = (
        text(&obj, "token"),
        obj.get("new_password").and_then(Value::as_str),
    );
    if let (Some(token), Some(new_password)) = (token, new_password) {
        passwords::check(new_password).map_err(ApiError::BadRequest)?;
        let hash = auth::hash_key(token);
        let user = ctx
            .gw
            .store
            .blocking(move |s| s.take_account_token(&hash, "reset"))
            .await?
            .ok_or_else(|| reason("invalid_token", "the token is unknown, used or expired"))?;
        let pw = hash_password(new_password.to_owned()).await?;
        ctx.gw
            .store
            .blocking(move |s| s.set_password(user, &pw))
            .await?;
        return Ok(answer(
            StatusCode::OK,
            json!({ "message": "password changed" }),
        ));
    }
    let email = match (text(&obj, "email"), token, new_password) {
        (Some(e), None, None) => e.to_owned(),
        _ => {
            return Err(reason(
                "missing_fields",
                "send {email} to request a reset, or {token, new_password} to complete one",
            ))
        }
    };
    let e = email.clone();
    if let Some(user) = ctx.gw.store.blocking(move |s| s.user_by_email(&e)).await? {
        let token = mail_token(ctx, user.id, "reset", RESET_TTL_HOURS).await?;
        let body = format!(
            "A password reset was requested for this address.\n\nComplete it with this token\n(POST /api/v1/auth/reset-password {{\"token\": \"...\", \"new_password\": \"...\"}}):\n\nToken: {token}\n\nIf you did not ask for it, ignore this message.\n"
        );
        send_mail(ctx, &email, "Reset your password", body).await;
    }
    Ok(answer(
        StatusCode::OK,
        json!({ "message": "if the address is registered, a reset token has been mailed" }),
    ))
}

/// `GET /auth/me`: the caller and their balance.
pub async fn me(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let uid = ctx.require_user("me")?;
    let (row, balance) = ctx
        .gw
        .store
        .blocking(move |s| Ok((s.user_row(uid)?, s.balance(uid)?)))
        .await?;
    let row = row.ok_or_else(|| ApiError::bug("caller not found"))?;
    let mut v = user_json(&row);
    v["balance"] = json!(format!("{balance:.8}"));
    Ok(answer(StatusCode::OK, v))
}
