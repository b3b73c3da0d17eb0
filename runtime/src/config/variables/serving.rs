//! How the gateway serves: its address, its data directory and database,
//! upstream calls' time-out and fetches, the limits of a request and a
//! connection, its public URL, prices, durability and rate limits.

use super::row::{Scope, Variable};

/// In the page's order.
pub(super) const VARIABLES: &[Variable] = &[
    Variable {
        name: "GATEWAY_ADDR",
        default: r#"`127.0.0.1:8080`"#,
        meaning: r#"listen address"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_DATA_DIR",
        default: r#"`./data`"#,
        meaning: r#"database and local objects (created 0700; the database 0600)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_DB",
        default: r#"`$GATEWAY_DATA_DIR/gateway.db`"#,
        meaning: r#"SQLite file"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_DATABASE_URL",
        default: r#"none"#,
        meaning: r#"`postgres://user:password@host:5432/db`: PostgreSQL instead of the SQLite
            file (several instances share it; see [Several
            instances](operations.md#several-instances)); migrated at start; the
            password is never logged. TLS as libpq reads it, over rustls: `?sslmode=`
            `disable` (plain), `prefer` (the default: TLS when the server offers it,
            else plain; the certificate checked only with `sslrootcert`), `require`
            (TLS, the certificate not checked, unless `sslrootcert` is given: then its
            chain is, as in libpq), `verify-ca` (the chain up to `sslrootcert`'s CAs,
            not the host name), `verify-full` (the chain and the URL's host name or IP
            address); `&sslrootcert=/path/ca.pem` names a PEM file of CA certificates
            (read at start: an unreadable or non-PEM file stops start-up naming this
            variable), `sslrootcert=system` the public web's CAs (webpki-roots;
            `verify-full` only, its default). `verify-ca` and `verify-full` need
            `sslrootcert` (no `~/.postgresql/root.crt` is read). Every connection (the
            pool, the record writer, reconnections after a restart) uses it; a refused
            certificate (a wrong CA or host name) is an error naming this variable,
            and `gateway serve` stops before listening"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_UPSTREAM_TIMEOUT_MS",
        default: r#"`120000`"#,
        meaning: r#"time-out of every upstream call (spec §8)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_ALLOW_PRIVATE_FETCH",
        default: r#"`false`"#,
        meaning: r#"allow fetching `audio_url`s on loopback/private addresses (tests, demo)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_MAX_JSON_BYTES",
        default: r#"`1048576`"#,
        meaning: r#"largest JSON request body (413 beyond; a larger `Content-Length` is
            refused before the body is read, without `100 Continue`, and before the
            rate limit counts the request: the same for a multipart file's or a
            webhook's limit)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_HEADER_TIMEOUT_SECS",
        default: r#"`10`"#,
        meaning: r#"a request's headers must arrive within this many seconds (from the
            connection's start, or from the first byte of the next request on a
            keep-alive connection); then the connection is closed"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_IDLE_TIMEOUT_SECS",
        default: r#"`75`"#,
        meaning: r#"a keep-alive connection with no request in flight for this long is closed"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_MAX_CONNECTIONS",
        default: r#"`10000`, or half the open-file limit (`ulimit -n`) if lower"#,
        meaning: r#"client connections open at once; at the cap the gateway stops accepting,
            so new clients wait in the kernel's listen backlog until a connection
            closes. At the cap, connections with no request in flight that are idle,
            or have been sending their headers for over a second (slow clients, not
            yet authenticated), are closed first to make room, and so are connections
            that never authenticated (no valid key or token on any of their requests)
            whose request body has been arriving for over a second (a login form sent
            a byte at a time); a connection that authenticated is never closed while a
            request is in flight, however slowly its body arrives"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_BODY_TIMEOUT_SECS",
        default: r#"`30`"#,
        meaning: r#"a request body must arrive within this many seconds of its headers, plus
            one second per 16 KiB it has delivered (so, past the time-out, at an
            average of at least 16 KiB/s: a 100 MiB upload may take up to ~1 h 47
            min); a slower body is cut with 408 in the route's error format, nothing
            forwarded or recorded"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_MAX_STREAMS_PER_CONNECTION",
        default: r#"`32`"#,
        meaning: r#"concurrent requests (streams) one HTTP/2 connection may open (h2c, prior
            knowledge); the client is told in the connection's settings"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_PUBLIC_URL",
        default: r#"`http://<GATEWAY_ADDR>`"#,
        meaning: r#"how callers reach the gateway (its own presigned object URLs start with
            it)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_PRICES",
        default: r#"the spec's known prices"#,
        meaning: r#"upstream cost per unit, `product.unit=usd,...` (see
            [Billing](credits.md#billing))"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_DB_SYNC",
        default: r#"`full`"#,
        meaning: r#"`full`: every commit is fsynced before the answer (records survive a power
            cut; two exceptions that lose no money: a credit hold, and a model
            stream's audit record, which its settlement's fsync covers when the stream
            ends); `normal`: no fsync on the request path (records survive a gateway
            crash, the last ones may be lost with the machine). On PostgreSQL,
            `normal` sets `synchronous_commit = off` for the gateway's sessions"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_RATE_LIMITS",
        default: r#"see [Rate limits](operations.md#rate-limits)"#,
        meaning: r#"per-capability quotas, e.g. `tts=60/m,stt=30/m,detect=600/h,webhook=off`"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_SHUTDOWN_DELAY_SECS",
        default: r#"`0`"#,
        meaning: r#"on SIGTERM, how long the instance serves on with `/readyz` answering 503
            before it stops accepting and drains (see [Readiness](operations.md#readiness));
            set it above the load balancer's probe interval"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_LIMIT_WINDOW_SECS",
        default: r#"`60`"#,
        meaning: r#"the window of keys' and models' `rpm` and `tpm` limits, in seconds (see
            [Token limits](operations.md#token-limits)); other than 60 only for tests"#,
        scope: Scope::Gateway,
    },
];
