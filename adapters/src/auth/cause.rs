//! Why a request is not authenticated: spec §5's 401 causes, each with a
//! message of its own, shared by the authenticator and the tokens.

use gateway_base::errors::ApiError;

/// Why a request is not authenticated: each answers 401 with its own message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    NoCredentials,
    MalformedHeader,
    MalformedKey,
    UnknownKey,
    KeyRevoked,
    TokenRevoked,
    TokenExpired,
    TokenUndecodable,
    TokenOtherEnv,
    TokenNoUser,
    RefreshNotAccess,
    AccessNotRefresh,
    UserDeleted,
    WrongAdminKey,
    AccessTokenRequired,
}

impl Cause {
    pub fn message(self) -> &'static str {
        match self {
            Cause::NoCredentials => {
                "missing credentials: send Authorization: Bearer <API key or access token>"
            }
            Cause::MalformedHeader => {
                "malformed Authorization header: expected Bearer <API key or access token>"
            }
            Cause::MalformedKey => "malformed API key",
            Cause::UnknownKey => "invalid API key",
            Cause::KeyRevoked => "API key revoked",
            Cause::TokenRevoked => "token revoked",
            Cause::TokenExpired => "token expired; log in again",
            Cause::TokenUndecodable => "invalid token: it cannot be decoded or its signature does not match",
            Cause::TokenOtherEnv => "token issued for a different environment",
            Cause::TokenNoUser => "token carries no user id",
            Cause::RefreshNotAccess => "refresh token presented where an access token is required",
            Cause::AccessNotRefresh => "access token presented where a refresh token is required",
            Cause::UserDeleted => "user deleted",
            Cause::WrongAdminKey => "invalid admin key",
            Cause::AccessTokenRequired => {
                "access token required: this route does not accept API keys; log in for an access token"
            }
        }
    }
}

impl From<Cause> for ApiError {
    fn from(c: Cause) -> ApiError {
        ApiError::Unauthorized(c.message().to_owned())
    }
}
