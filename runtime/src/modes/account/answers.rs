//! What the account modes answer with, shared by a password's modes and a
//! provider's sign-in: a 400 with its reason, and a token pair.

use serde_json::{json, Value};

use gateway_adapters::auth::TokenPair;
use gateway_base::errors::ApiError;

/// A 400 whose `details.reason` a client can act on.
pub(super) fn reason(reason: &'static str, message: &str) -> ApiError {
    ApiError::BadRequestReason {
        reason,
        message: message.to_owned(),
    }
}

/// A token pair as `/auth/login` answers it.
pub(super) fn pair_json(p: &TokenPair) -> Value {
    json!({
        "access_token": p.access_token,
        "refresh_token": p.refresh_token,
        "token_type": "bearer",
        "expires_in": p.expires_in,
    })
}
