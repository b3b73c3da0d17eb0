//! The account modes: `register`, `login`, `token_refresh`, `logout`,
//! `confirm_email`, `reset_password`, `me`. Served from the database; errors
//! in the row's format (format 1), 400s with `details.reason`.
//!
//! Passwords are hashed (argon2, on the password pool of
//! [`gateway_adapters::auth::passwords`]) and never logged or answered; mailed tokens
//! are stored as SHA-256 hashes and expire.
//!
//! Abuse limits: register, login, confirm and reset-password count against
//! the row's capability (`accounts`) per client address (the TCP peer; see
//! [`address_key`]); a login of an account from an address that failed it
//! too often in a row is refused for a while, never one from an address
//! that has not failed ([`gateway_adapters::auth::backoff`]); an account gets at
//! most [`RESET_MAILS`] reset mails. Usernames cannot contain `@`, and an
//! identifier with `@` logs in by e-mail address only. A password reset
//! revokes the user's tokens and spends every other reset token. A reset
//! request is answered before its mail is made (the same answer and the
//! same work on the request path for any address). A reset of an account
//! made by a sign-in with an unverified address drops its links and keys
//! (see [`gateway_store::Store::reset_password_with_token`]). Answers
//! carrying tokens are `no-store` ([`super::common::secret_answer`]).
//!
//! Sign-in with OpenID Connect (`oauth_authorize`, `oauth_callback`): the
//! provider is [`gateway_adapters::oidc`]'s; a sign-in under way is a row of the
//! database (the hash of its one-time `state`, its nonce and PKCE
//! verifier, [`OAUTH_STATE_TTL_MINUTES`]), so any instance takes the
//! callback. The callback answers what `/auth/login` answers. An account
//! is made on the first sign-in of a (provider, subject) whose ID token
//! says `email_verified`, with its e-mail address (confirmed) and a
//! username from its `preferred_username` or the address; a first sign-in
//! without `email_verified` is refused (400 `email_not_verified`, nothing
//! made or looked up: an address is claimed only when verified), later
//! ones of a linked subject log into its own account. An address that is
//! already another account's is refused (409 `email_exists`: no account is
//! linked by its address alone). Registering an address that signs in with
//! a provider answers 409 `email_already_linked`.

use http::StatusCode;
use serde_json::{json, Map, Value};

mod answers;
pub mod delete;
mod limits;
mod oauth;

use super::common::read_body;
use super::common::{secret_answer, user_json};
use crate::ctx::{Ctx, Outcome};
use crate::services::Gateway;
use answers::{pair_json, reason};
use gateway_adapters::auth::backoff::LoginKey;
use gateway_adapters::auth::{self, passwords, tokens::Typ};
use gateway_adapters::mail;
use gateway_adapters::ratelimit::Quota;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;
use gateway_base::{body, telemetry};
use gateway_store::{Accounts, Ledger, ProviderSignIns, Registration};
use limits::{client_addr, limit_address};

pub use limits::address_key;
pub use oauth::{OAUTH_RETRY_AFTER_SECS, OAUTH_STATE_TTL_MINUTES};

/// How long a confirmation token is valid.
const CONFIRM_TTL_HOURS: i64 = 48;
/// How long a password-reset token is valid.
const RESET_TTL_HOURS: i64 = 1;
/// Reset mails one account may get: 3 at once, then one every 20 minutes.
pub const RESET_MAILS: Quota = Quota::per_hour(3);

/// A body's text field, trimmed; `None` when absent or blank.
fn text<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    obj.get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// A JSON answer with nothing secret in it (tokens go in a `secret_answer`).
fn answer(status: StatusCode, v: Value) -> Outcome {
    Outcome::new(body::json(status, &v), None)
}

/// A new random token for a mail, stored hashed for `purpose`.
async fn mail_token(
    gw: &Gateway,
    user_id: i64,
    purpose: &'static str,
    hours: i64,
) -> Result<String, ApiError> {
    let token = hex::encode(rand::random::<[u8; 32]>());
    let hash = auth::hash_key(&token);
    let expires = gateway_store::rfc3339(chrono::Utc::now() + chrono::Duration::hours(hours));
    gw.store
        .blocking(move |s| s.insert_account_token(&hash, user_id, purpose, &expires))
        .await?;
    Ok(token)
}

async fn send_mail(gw: &Gateway, request_id: &str, to: &str, subject: &str, body: String) {
    let c = &gw.config;
    if let Err(e) = mail::send(&c.accounts, &c.data_dir, to, subject, body).await {
        tracing::warn!(request_id = %request_id, error = %e, "mail not sent");
    }
}

/// `POST /auth/register`.
pub async fn register(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    limit_address(ctx, &req).await?;
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
    if username.contains('@') {
        return Err(reason(
            "invalid_username",
            "username: must not contain @ (log in with the e-mail address instead)",
        ));
    }
    passwords::check(password).map_err(ApiError::BadRequest)?;
    let hash = ctx.gw.auth.passwords.hash(password.to_owned()).await?;
    let confirm = ctx.gw.config.accounts.require_email_confirmation;
    let (u, e) = (username.to_owned(), email.to_owned());
    let id =
        match ctx
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
            Registration::EmailLinked => return Err(ApiError::Conflict {
                reason: "email_already_linked",
                message:
                    "this e-mail address belongs to an account that signs in with an OAuth provider"
                        .into(),
            }),
        };
    if confirm {
        let token = mail_token(&ctx.gw, id, "confirm", CONFIRM_TTL_HOURS).await?;
        let body = format!(
            "Welcome, {username}.\n\nConfirm your e-mail address with this token\n(POST /api/v1/auth/confirm {{\"token\": \"...\"}}):\n\nToken: {token}\n"
        );
        send_mail(
            &ctx.gw,
            &ctx.request_id,
            email,
            "Confirm your e-mail address",
            body,
        )
        .await;
    }
    let row = ctx.gw.store.blocking(move |s| s.user_row(id)).await?;
    let row = row.ok_or_else(|| ApiError::bug("registered user not found"))?;
    Ok(answer(StatusCode::CREATED, user_json(&row)))
}

/// `POST /auth/login` with `email` or `username`, and `password`. An
/// identifier with `@` is looked up among e-mail addresses only.
pub async fn login(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    limit_address(ctx, &req).await?;
    // The back-off counts by account and address (0: no address known).
    let from = client_addr(&req).map_or(0, address_key);
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
    let key = match &user {
        Some(u) => LoginKey::User(u.id),
        None => LoginKey::Unknown(ident.to_lowercase()),
    };
    let backoff = &ctx.gw.auth.login_backoff;
    if let Err(retry_after) = backoff.check(&key, from) {
        telemetry::rate_limited(ctx.spec.capability);
        return Err(ApiError::RateLimited {
            message: format!(
                "too many failed logins for this account from this address; retry in {retry_after} s"
            ),
            retry_after,
        });
    }
    let ok = ctx
        .gw
        .auth
        .passwords
        .verify(password.to_owned(), stored)
        .await?;
    let user = match user {
        Some(u) if ok && !u.deleted => {
            backoff.succeeded(&key, from);
            u
        }
        _ => {
            backoff.failed(key, from);
            return Err(ApiError::Unauthorized(
                "incorrect email, username or password".into(),
            ));
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
    Ok(secret_answer(StatusCode::OK, &pair_json(&pair)))
}

/// `POST /auth/refresh` `{refresh_token}`: a new pair, the old refresh token revoked.
pub async fn refresh(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let obj = read_body(ctx, req).await?;
    let token = text(&obj, "refresh_token")
        .ok_or_else(|| ApiError::BadRequest("refresh_token is required".into()))?;
    let pair = ctx.gw.auth.refresh(token).await?;
    Ok(secret_answer(StatusCode::OK, &pair_json(&pair)))
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
    limit_address(ctx, &req).await?;
    let obj = read_body(ctx, req).await?;
    let token = text(&obj, "token").ok_or_else(|| reason("missing_token", "token is required"))?;
    let hash = auth::hash_key(token);
    // The token is spent with the confirmation, in one transaction.
    ctx.gw
        .store
        .blocking(move |s| s.confirm_with_token(&hash))
        .await?
        .ok_or_else(|| reason("invalid_token", "the token is unknown, used or expired"))?;
    Ok(answer(
        StatusCode::OK,
        json!({ "message": "e-mail address confirmed" }),
    ))
}

/// `POST /auth/reset-password`: `{email}` mails a token (always 200, the
/// token and the mail made after the answer); `{token, new_password}` sets
/// the password, revokes every token of the user issued before and spends
/// the user's other reset tokens.
pub async fn reset_password(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    limit_address(ctx, &req).await?;
    let obj = read_body(ctx, req).await?;
    let (token, new_password) = (
        text(&obj, "token"),
        obj.get("new_password").and_then(Value::as_str),
    );
    if let (Some(token), Some(new_password)) = (token, new_password) {
        passwords::check(new_password).map_err(ApiError::BadRequest)?;
        // Hashed before the token is spent: a busy pool (429) leaves it usable.
        let pw = ctx.gw.auth.passwords.hash(new_password.to_owned()).await?;
        let hash = auth::hash_key(token);
        let accounts = &ctx.gw.config.accounts;
        let now = chrono::Utc::now();
        let keep_until = now
            + chrono::Duration::from_std(accounts.refresh_ttl.max(accounts.access_ttl))
                .unwrap_or(chrono::Duration::days(366));
        // The token is spent with the new password, in one transaction.
        let done = ctx
            .gw
            .store
            .blocking(move |s| s.reset_password_with_token(&hash, &pw, now, keep_until))
            .await?
            .ok_or_else(|| reason("invalid_token", "the token is unknown, used or expired"))?;
        if done.reclaimed {
            // Its keys were revoked: no instance may keep them cached.
            ctx.gw.credentials_changed().await;
        }
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
    // Off the request path, whether the address is registered or not: the
    // answer neither waits for the database and the mail server nor tells
    // by its timing whether the address has an account.
    tokio::spawn(reset_mail(ctx.gw.clone(), ctx.request_id.clone(), email));
    Ok(answer(
        StatusCode::OK,
        json!({ "message": "if the address is registered, a reset token has been mailed" }),
    ))
}

/// The reset token of `email`'s account, if there is one, stored and mailed
/// (at most [`RESET_MAILS`] per account). Errors are logged.
async fn reset_mail(gw: Gateway, request_id: String, email: String) {
    let e = email.clone();
    let user = match gw.store.blocking(move |s| s.user_by_email(&e)).await {
        Ok(Some(user)) => user,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(request_id = %request_id, error = %e, "reset mail: looking up the address");
            return;
        }
    };
    if gw
        .limiter
        .check_quota(user.id, "reset_mail", &RESET_MAILS)
        .await
        .is_err()
    {
        tracing::info!(request_id = %request_id, user_id = user.id, "reset mail not sent: the account's reset mails are used up for now");
        return;
    }
    let token = match mail_token(&gw, user.id, "reset", RESET_TTL_HOURS).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(request_id = %request_id, error = %e, "reset mail: storing the token");
            return;
        }
    };
    let body = format!(
        "A password reset was requested for this address.\n\nComplete it with this token\n(POST /api/v1/auth/reset-password {{\"token\": \"...\", \"new_password\": \"...\"}}):\n\nToken: {token}\n\nIf you did not ask for it, ignore this message.\n"
    );
    send_mail(&gw, &request_id, &email, "Reset your password", body).await;
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

/// `GET /auth/oauth/{provider}/authorize`: 302 to the provider's
/// authorization endpoint; the sign-in's state, nonce and PKCE verifier
/// are stored for the callback.
pub async fn oauth_authorize(
    ctx: &mut Ctx,
    req: Request,
    params: &PathParams,
) -> Result<Outcome, ApiError> {
    limit_address(ctx, &req).await?;
    let provider = oauth::oauth_provider(ctx, params)?;
    let a = ctx
        .gw
        .oidc
        .load_full()
        .authorize(&provider)
        .await
        .map_err(oauth::oidc_error)?;
    let hash = auth::hash_key(&a.state);
    let expires = gateway_store::rfc3339(
        chrono::Utc::now() + chrono::Duration::minutes(OAUTH_STATE_TTL_MINUTES),
    );
    let (nonce, verifier) = (a.nonce, a.pkce_verifier);
    ctx.gw
        .store
        .blocking(move |s| s.insert_oauth_state(&hash, &provider, &nonce, &verifier, &expires))
        .await?;
    let response = http::Response::builder()
        .status(StatusCode::FOUND)
        .header(http::header::LOCATION, a.url)
        .header(http::header::CACHE_CONTROL, "no-store")
        .body(body::empty())
        .map_err(|e| ApiError::internal("the sign-in redirect", e))?;
    Ok(Outcome::new(response, None))
}

/// `GET /auth/oauth/{provider}/callback?code=&state=`: the state taken
/// once, the code exchanged, the ID token checked, the account of the
/// provider's subject found or made; answers as `/auth/login`.
pub async fn oauth_callback(
    ctx: &mut Ctx,
    req: Request,
    params: &PathParams,
) -> Result<Outcome, ApiError> {
    limit_address(ctx, &req).await?;
    let provider = oauth::oauth_provider(ctx, params)?;
    let (nonce, verifier) = oauth::take_state(ctx, &provider).await?;
    if let Some(error) = oauth::query(ctx, "error") {
        let why = oauth::query(ctx, "error_description").unwrap_or_default();
        return Err(reason(
            "provider_error",
            &format!("the sign-in provider answered {error}: {why}"),
        ));
    }
    let who = oauth::identify(ctx, &provider, &verifier, &nonce).await?;
    let uid = oauth::account_of(ctx, provider, who).await?;
    let pair = oauth::log_in(ctx, uid).await?;
    Ok(secret_answer(StatusCode::OK, &pair_json(&pair)))
}
