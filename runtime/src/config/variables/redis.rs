//! The Redis several instances share: its URL, its CAs and its keys' prefix.

use super::row::{Scope, Variable};

/// In the page's order.
pub(super) const VARIABLES: &[Variable] = &[
    Variable {
        name: "GATEWAY_REDIS_URL",
        default: r#"none"#,
        meaning: r#"the Redis several instances share, `redis://[:password@]host[:port][/db]`,
            `rediss://...` (TLS) or `unix:///path` (Redis 6.0 or later): rate limits,
            cache invalidation, stop-stream (see [Several
            instances](operations.md#several-instances)); unset: one instance, no
            Redis needed. `rediss://` verifies the server's certificate and host name
            (rustls), against the public web's CAs (webpki-roots) or
            `GATEWAY_REDIS_CA_FILE`'s; every connection (the shared one, the bus's
            subscriber, reconnections) uses it. A refused certificate is a
            configuration error, not an outage: `gateway serve` stops before
            listening, naming this variable (and `GATEWAY_REDIS_CA_FILE`); an
            unreachable Redis is not (limits fail open)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_REDIS_CA_FILE",
        default: r#"none (webpki-roots)"#,
        meaning: r#"a PEM file of the CA certificates a `rediss://` server's certificate must
            chain to (a private CA), instead of the public web's; read at start:
            unreadable, not PEM, no certificate in it, or a `GATEWAY_REDIS_URL` that
            is not `rediss://` stop start-up naming this variable"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_REDIS_PREFIX",
        default: r#"`gateway:`"#,
        meaning: r#"prefix of every Redis key and channel the gateway uses (gateways of
            different deployments on one Redis keep apart by it)"#,
        scope: Scope::Gateway,
    },
];
