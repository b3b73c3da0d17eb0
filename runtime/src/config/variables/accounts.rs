//! Accounts: tokens and their secret, password hashing, e-mail confirmation,
//! the admin key and the gateway's mail.

use super::row::{Scope, Variable};

/// In the page's order.
pub(super) const VARIABLES: &[Variable] = &[
    Variable {
        name: "GATEWAY_JWT_SECRET",
        default: r#"`$GATEWAY_DATA_DIR/jwt.key` (created)"#,
        meaning: r#"HS256 secret of access and refresh tokens (share it between instances); at
            least 32 bytes, else the gateway refuses to start naming the variable
            (`openssl rand -hex 32`)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_PASSWORD_HASHERS",
        default: r#"CPUs, at most 4"#,
        meaning: r#"passwords hashed or checked at once (argon2: 19 MiB each), on threads of
            their own"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_PASSWORD_HASH_WAIT_MS",
        default: r#"`2000`"#,
        meaning: r#"how long a register, login or reset waits for a free hasher before it is
            answered 429 (`Retry-After: 1`)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_ENV",
        default: r#"`production`"#,
        meaning: r#"environment named in tokens (`env` claim); a token of another environment
            is refused"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_ACCESS_TOKEN_TTL_SECS",
        default: r#"`900`"#,
        meaning: r#"lifetime of an access token (15 minutes)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_REFRESH_TOKEN_TTL_SECS",
        default: r#"`2592000`"#,
        meaning: r#"lifetime of a refresh token (30 days)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_REQUIRE_EMAIL_CONFIRMATION",
        default: r#"`false`"#,
        meaning: r#"`true`: a new account cannot log in before confirming its e-mail address"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_ADMIN_KEY",
        default: r#"none"#,
        meaning: r#"value of `X-Admin-Key` accepted on admin routes (unset: only admin users)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_SMTP_URL",
        default: r#"none"#,
        meaning: r#"`smtp://` / `smtps://` URL (lettre's syntax, credentials in the URL);
            unset: mail is written to `$GATEWAY_DATA_DIR/outbox/*.eml`"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_MAIL_FROM",
        default: r#"`gateway@localhost`"#,
        meaning: r#"sender of the gateway's mail"#,
        scope: Scope::Gateway,
    },
];
