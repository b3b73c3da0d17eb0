//! The steps of a sign-in with OpenID Connect, which the modes
//! `oauth_authorize` and `oauth_callback` are made of (the parent module's
//! docs say what is made, linked and refused): the provider's failures, the
//! state taken once, the code exchanged for a checked identity, the account
//! found or made, and the login.

use super::answers::reason;
use crate::ctx::Ctx;
use gateway_adapters::auth::{self, TokenPair};
use gateway_adapters::oidc::OidcError;
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;
use gateway_store::{Accounts, OauthSignIn, OauthUser, ProviderSignIns};

/// How long a sign-in with a provider may take, from its redirect to its callback.
pub const OAUTH_STATE_TTL_MINUTES: i64 = 10;
/// `Retry-After` of the 503 of a sign-in provider that cannot be reached.
pub const OAUTH_RETRY_AFTER_SECS: u64 = 30;

/// A sign-in provider's failure in format 1: unknown 404; unreachable 503
/// with `Retry-After`; any other failure of the provider 502.
pub(super) fn oidc_error(e: OidcError) -> ApiError {
    if !matches!(e, OidcError::UnknownProvider) {
        // Operators see why (never a secret: see `oidc`); the pipeline
        // logs refusals at debug only.
        tracing::warn!(error = %e, "sign-in with a provider failed");
    }
    match e {
        OidcError::UnknownProvider => ApiError::NotFound("unknown sign-in provider".into()),
        OidcError::Unreachable(_) => ApiError::Unreachable {
            message: format!("{e}; retry shortly"),
            retry_after: OAUTH_RETRY_AFTER_SECS,
        },
        OidcError::Provider { .. } | OidcError::InvalidToken { .. } => {
            ApiError::BadGateway(e.to_string())
        }
    }
}

/// The row's `{provider}`, a configured one (else 404).
pub(super) fn oauth_provider(ctx: &Ctx, params: &PathParams) -> Result<String, ApiError> {
    let id = params.get("provider").unwrap_or_default().into_owned();
    if !ctx.gw.oidc.load().knows(&id) {
        return Err(oidc_error(OidcError::UnknownProvider));
    }
    Ok(id)
}

/// A non-empty query parameter.
pub(super) fn query<'a>(ctx: &'a Ctx, name: &str) -> Option<&'a str> {
    ctx.query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// The username a new signed-in account asks for: the provider's
/// `preferred_username`, else the address's local part; letters, digits,
/// `.`, `_` and `-` only, at most 48 characters; `user` when nothing is left.
fn wanted_username(preferred: Option<&str>, email: &str) -> String {
    let local = email.split('@').next().unwrap_or_default();
    let from = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            .take(48)
            .collect()
    };
    [preferred.map(from), Some(from(local))]
        .into_iter()
        .flatten()
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "user".to_owned())
}

/// The nonce and PKCE verifier of the sign-in the query's `state` names,
/// taken once: a second callback with it is refused, as is an unknown or
/// expired one.
pub(super) async fn take_state(ctx: &Ctx, provider: &str) -> Result<(String, String), ApiError> {
    let invalid_state = || {
        reason(
            "invalid_state",
            "the sign-in state is missing, unknown, used or expired: start the sign-in again",
        )
    };
    let hash = auth::hash_key(query(ctx, "state").ok_or_else(invalid_state)?);
    let p = provider.to_owned();
    ctx.gw
        .store
        .blocking(move |s| s.take_oauth_state(&hash, &p))
        .await?
        .ok_or_else(invalid_state)
}

/// Who the provider says signed in, from an ID token it issued for this
/// sign-in (the code exchanged with the verifier, the nonce checked).
pub(super) struct Identity {
    subject: String,
    email: String,
    email_verified: bool,
    username: String,
}

/// Exchanges the query's `code` and checks the ID token; one naming no
/// usable e-mail address is the provider's failure (502).
pub(super) async fn identify(
    ctx: &Ctx,
    provider: &str,
    verifier: &str,
    nonce: &str,
) -> Result<Identity, ApiError> {
    let code = query(ctx, "code").ok_or_else(|| ApiError::BadRequest("code is required".into()))?;
    let id = ctx
        .gw
        .oidc
        .load_full()
        .sign_in(provider, code, verifier, nonce)
        .await
        .map_err(oidc_error)?;
    let email = id
        .email
        .filter(|e| e.contains('@') && !e.contains(char::is_whitespace))
        .ok_or_else(|| {
            ApiError::BadGateway(format!(
                "the sign-in provider {provider}'s ID token names no e-mail address (the email scope is needed)"
            ))
        })?;
    Ok(Identity {
        username: wanted_username(id.preferred_username.as_deref(), &email),
        subject: id.subject,
        email,
        email_verified: id.email_verified,
    })
}

/// The account linked to the provider's subject, made on its first
/// sign-in; an address that is another account's (409) or not verified
/// (400) is refused.
pub(super) async fn account_of(
    ctx: &Ctx,
    provider: String,
    who: Identity,
) -> Result<i64, ApiError> {
    let signed = ctx
        .gw
        .store
        .blocking(move |s| {
            s.oauth_sign_in(&OauthUser {
                provider: &provider,
                subject: &who.subject,
                email: &who.email,
                email_verified: who.email_verified,
                username: &who.username,
            })
        })
        .await?;
    match signed {
        OauthSignIn::Linked(id) | OauthSignIn::Created(id) => Ok(id),
        OauthSignIn::EmailExists => Err(ApiError::Conflict {
            reason: "email_exists",
            message: "this e-mail address belongs to another account: log in with it".into(),
        }),
        OauthSignIn::Unverified => Err(reason(
            "email_not_verified",
            "the sign-in provider does not say that this e-mail address is verified (email_verified): no account is made with it; verify it at the provider, then sign in again",
        )),
    }
}

/// Logs the signed-in account in, as `/auth/login` does: a deleted or
/// disabled account gets no tokens.
pub(super) async fn log_in(ctx: &mut Ctx, uid: i64) -> Result<TokenPair, ApiError> {
    let user = ctx.gw.store.blocking(move |s| s.user(uid)).await?;
    let user = user.ok_or_else(|| ApiError::bug("signed-in user not found"))?;
    if user.deleted {
        return Err(ApiError::Unauthorized("this account was deleted".into()));
    }
    if user.disabled {
        return Err(auth::disabled());
    }
    let pair = ctx.gw.auth.issue(user.id);
    ctx.user = Some(user);
    Ok(pair)
}

#[cfg(test)]
mod tests {
    use super::wanted_username;

    #[test]
    fn a_wanted_username_is_tidy_and_never_empty() {
        assert_eq!(wanted_username(Some("Ann Lee"), "a@x.io"), "AnnLee");
        assert_eq!(wanted_username(None, "ann.lee+x@x.io"), "ann.leex");
        assert_eq!(wanted_username(Some("@@"), "éé@x.io"), "user");
        assert_eq!(wanted_username(Some(&"a".repeat(99)), "b@x").len(), 48);
    }
}
