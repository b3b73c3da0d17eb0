//! Every environment variable the workspace reads: the one list
//! `docs/configuration.md` is generated from (`tests/it/docs.rs` compares
//! the page with it, and checks that the code reads every variable listed
//! and that the list names every variable the code reads). A new variable
//! is a row here; `UPDATE_DOCS=1 cargo test --workspace --exclude sim
//! --locked --test it -- docs` then rewrites the page (see CONTRIBUTING.md).
//!
//! Data only: names, defaults and meanings in Markdown, relative links from
//! `docs/`. A meaning may be wrapped over several lines: the page joins
//! every run of white space into one space.

/// Who reads a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// The `gateway` binary: `serve`, `demo` and every other subcommand.
    Gateway,
    /// The provider simulator, `provider-sim`.
    Simulator,
    /// The tests and the test tooling only.
    Tests,
}

/// One environment variable.
#[derive(Clone, Copy, Debug)]
pub struct Variable {
    pub name: &'static str,
    /// The value when unset, in Markdown.
    pub default: &'static str,
    /// What it does, in Markdown.
    pub meaning: &'static str,
    pub scope: Scope,
}

/// Every variable, in the page's order.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "PROVIDER_API_KEY",
        default: r#"none"#,
        meaning: r#"upstream key; without it voice routes answer 503 "upstream integration not
            configured""#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "PROVIDER_BASE_URL",
        default: r#"`https://app.resemble.ai/api/v2`"#,
        meaning: r#"main upstream API"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "PROVIDER_SYNTH_URL",
        default: r#"`https://f.cluster.resemble.ai`"#,
        meaning: r#"synthesis cluster"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "PROVIDER_MARKUP_PCT",
        default: r#"`20.0`"#,
        meaning: r#"percent added to upstream cost"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "PROVIDER_WEBHOOK_SECRET",
        default: r#"none"#,
        meaning: r#"HMAC secret of the inbound webhook (unset: every inbound webhook is
            refused with 503 and nothing is stored, warned at start-up; the job
            follower still polls)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "PROVIDER_BUSINESS_PLAN_ACTIVE",
        default: r#"`false`"#,
        meaning: r#"gate of voice cloning and voice design (closed: those five routes answer
            503 without any upstream call)"#,
        scope: Scope::Gateway,
    },
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
        name: "GATEWAY_OBJECT_STORE",
        default: r#"`local`"#,
        meaning: r#"`local` (under `$GATEWAY_DATA_DIR/objects`) or `s3`"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_SIGNING_KEY",
        default: r#"`$GATEWAY_DATA_DIR/signing.key` (created)"#,
        meaning: r#"HMAC key of the local store's presigned URLs"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_ENDPOINT",
        default: r#"`https://s3.<region>.amazonaws.com`"#,
        meaning: r#"the S3-compatible store's endpoint (with `GATEWAY_OBJECT_STORE=s3`)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_REGION",
        default: r#"`us-east-1`"#,
        meaning: r#"the S3 store's signing region"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_BUCKET",
        default: r#"none"#,
        meaning: r#"the S3 bucket (required with `s3`)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_ACCESS_KEY",
        default: r#"none"#,
        meaning: r#"the S3 access key (required with `s3`)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_SECRET_KEY",
        default: r#"none"#,
        meaning: r#"the S3 secret key (required with `s3`; never logged)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_PATH_STYLE",
        default: r#"`true`"#,
        meaning: r#"path-style URLs (`https://endpoint/bucket/key`); `false`: virtual-hosted
            (`https://bucket.endpoint/key`)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_TIMEOUT_SECS",
        default: r#"`60`"#,
        meaning: r#"seconds one S3 request (a put, a head, the start of a download) may take;
            a store that refuses, stalls past it or answers 5xx makes the request
            answer 503 with `Retry-After` (nothing stored, recorded or charged)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_MIRROR_HOSTS",
        default: r#"none"#,
        meaning: r#"extra hosts (besides the upstream bases) whose job-result URLs may be
            copied"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_STOCK_VOICES",
        default: r#"none"#,
        meaning: r#"voice ids (comma-separated) every user may read and use, besides the
            provider's `source: "stock"` voices"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_SWEEP_INTERVAL_SECS",
        default: r#"`3600`"#,
        meaning: r#"retention sweep interval; `0` disables the periodic sweep"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_JOB_FOLLOW_SECS",
        default: r#"`2`"#,
        meaning: r#"how often the job follower looks for pending jobs due a poll; `0` disables
            it (jobs are then finished only by a GET or a webhook)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_JOB_FOLLOW_CONCURRENCY",
        default: r#"`8`"#,
        meaning: r#"jobs the follower polls at once, per instance (at least 1)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_INSTANCE_ID",
        default: r#"the data directory's"#,
        meaning: r#"this instance's id (1–64 letters, digits, `.`, `_`, `-`), named by every
            credit hold it takes; by default the id kept in
            `$GATEWAY_DATA_DIR/instance-id` (made on first start, locked while the
            process runs; a second process on the same directory takes
            `instance-id.1`, …). See [Several
            instances](operations.md#several-instances)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_INSTANCE_LEASE_SECS",
        default: r#"`120`"#,
        meaning: r#"how long an instance's lease lasts (renewed every third of it); the credit
            holds of an instance that stopped renewing (crashed, cut off) count no
            more after it (at least 3)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_RECONCILE_AT",
        default: r#"`00:30`"#,
        meaning: r#"UTC time of the nightly reconciliation (previous day), or `off`"#,
        scope: Scope::Gateway,
    },
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
    Variable {
        name: "GATEWAY_PROVIDERS",
        default: r#"none"#,
        meaning: r#"the general gateway's providers file (TOML, see [General
            gateway](models.md#general-gateway)); unset: no models (model routes
            answer 404)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_OAUTH_PROVIDERS",
        default: r#"none"#,
        meaning: r#"the sign-in providers file (OpenID Connect; TOML, see [Sign-in with OpenID
            Connect](accounts.md#sign-in-with-openid-connect)); a mistake in it (or an
            unset `client_secret_env` variable) stops start-up naming the file, the
            provider and the key; unset: no providers (the sign-in routes answer 404)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_RETRY_MAX",
        default: r#"`2`"#,
        meaning: r#"retries of a model call after its first attempt, before any byte went to
            the caller (see [Routing and resilience](models.md))"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_RETRY_BASE_MS",
        default: r#"`100`"#,
        meaning: r#"base of the back-off (full jitter) before trying the same deployment again"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_COOLDOWN_FAILS",
        default: r#"`3`"#,
        meaning: r#"failures of a deployment within 30 s that start its cool-down"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_COOLDOWN_SECS",
        default: r#"`30`"#,
        meaning: r#"how long a cooling deployment is skipped before one probe request"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_STREAM_TIMEOUT_SECS",
        default: r#"`30`"#,
        meaning: r#"a model stream idle this long ends: 504 before its first byte, an error
            event once streaming (spec §8)"#,
        scope: Scope::Gateway,
    },
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
    Variable {
        name: "STRIPE_SECRET_KEY",
        default: r#"none"#,
        meaning: r#"Stripe's secret API key, for buying credits (see [Buying
            credits](credits.md#buying-credits-stripe-checkout)); unset: the three
            `/api/v1/stripe/...` routes answer 503 saying so. Sent to Stripe only,
            never answered or logged"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "STRIPE_WEBHOOK_SECRET",
        default: r#"none"#,
        meaning: r#"the signing secret of the Stripe webhook endpoint (`whsec_...`); unset:
            the webhook answers 503 (Stripe retries)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "STRIPE_API_BASE",
        default: r#"`https://api.stripe.com`"#,
        meaning: r#"Stripe's API (the simulator in tests and the demo)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "RUST_LOG",
        default: r#"`info`"#,
        meaning: r#"log filter (logs go to stderr)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_LOG_FORMAT",
        default: r#"`text`"#,
        meaning: r#"`text`, or `json`: one JSON object per line, with the request's `span`
            (`request_id`, `route`) on every line logged while serving it; any other
            value stops start-up"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_ENDPOINT",
        default: r#"none"#,
        meaning: r#"OpenTelemetry traces over OTLP/HTTP (protobuf) to this collector
            (`/v1/traces` added); unset (and `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
            unset): no traces, nothing of them runs. The SDK's usual variables apply:
            `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL),
            `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`,
            `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` /
            `OTEL_TRACES_SAMPLER_ARG`, `OTEL_BSP_SCHEDULE_DELAY` and the other
            `OTEL_BSP_*`. See [Traces](operations.md#traces)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        default: r#"none"#,
        meaning: r#"the full URL traces are sent to, used as is (instead of
            `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`); either turns traces on. See
            [Traces](operations.md#traces)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "OTEL_SERVICE_NAME",
        default: r#"`gateway`"#,
        meaning: r#"the traces' service name (`service.name`); read by the OpenTelemetry SDK,
            the gateway only gives its default"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_ACCESS_LOG",
        default: r#"`on`"#,
        meaning: r#"`off`: no access log (see [Observability](operations.md#observability));
            `RUST_LOG=info,access=off` filters it too"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_CACHE_SCOPE",
        default: r#"`user`"#,
        meaning: r#"who shares response-cache entries: `user` (any of the user's keys), `key`
            (the presented API key; a session token falls back to its user) or
            `global` (every caller: only for a gateway whose tenants may see each
            other's answers). See [Response cache](models.md)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_CACHE_MAX_MB",
        default: r#"`64`"#,
        meaning: r#"the in-process response cache's bound, MiB (not used with
            `GATEWAY_REDIS_URL`: entries then live in Redis)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_TRENDING_GLOBAL_COUNTS",
        default: r#"`false`"#,
        meaning: r#"`true`: `/models/trending` shows each model's request count over all
            tenants' traffic; by default it shows ranks only, since the counts are
            other tenants' business"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "SIM_API_KEY",
        default: r#"none"#,
        meaning: r#"the credential the simulator requires (`--api-key`; media needs none);
            unset: no credential is checked"#,
        scope: Scope::Simulator,
    },
    Variable {
        name: "SIM_WEBHOOK_URL",
        default: r#"none"#,
        meaning: r#"where the simulator POSTs its completion webhooks (`--webhook-url`)"#,
        scope: Scope::Simulator,
    },
    Variable {
        name: "SIM_WEBHOOK_SECRET",
        default: r#"none"#,
        meaning: r#"the HMAC key of the `X-Provider-Signature` header of those webhooks
            (`--webhook-secret`)"#,
        scope: Scope::Simulator,
    },
    Variable {
        name: "GATEWAY_TEST_DATABASE_URL",
        default: r#"none (SQLite)"#,
        meaning: r#"a PostgreSQL database (e.g.
            `postgres://postgres@127.0.0.1:5432/postgres`): the integration tests run
            on it, each test in a fresh schema dropped afterwards"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "GATEWAY_TEST_REQUIRE_POSTGRES",
        default: r#"unset"#,
        meaning: r#"`1`: a test that needs PostgreSQL (its binaries, or
            `GATEWAY_TEST_DATABASE_URL`) fails instead of skipping (`.ci/run` sets it)"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "GATEWAY_TEST_REDIS_URL",
        default: r#"`redis://127.0.0.1:6379`"#,
        meaning: r#"the Redis of the tests that need one; they skip, saying so, when it does
            not answer"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "GATEWAY_TEST_REQUIRE_REDIS",
        default: r#"unset"#,
        meaning: r#"`1`: a test whose Redis does not answer (or that finds no `redis-server`)
            fails instead of skipping (the test command sets it)"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "GATEWAY_TEST_REQUIRE_CHROMIUM",
        default: r#"unset"#,
        meaning: r#"set: the headless-browser tests fail instead of skipping when Chromium is
            missing (the test command sets it)"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "UPDATE_SNAPSHOTS",
        default: r#"unset"#,
        meaning: r#"set (`1` for codegen's expansion tests): the snapshot tests rewrite their
            reviewed files (`tests/snapshots/routes.txt`,
            `tests/snapshots/openapi.json`, the expansions) instead of comparing"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "UPDATE_DOCS",
        default: r#"unset"#,
        meaning: r#"set: the docs test rewrites `docs/configuration.md` from this list instead
            of comparing (see [CONTRIBUTING.md](../CONTRIBUTING.md#the-tests))"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "PRINT_LINKS",
        default: r#"unset"#,
        meaning: r#"set: codegen's `real_table` test prints the OpenAPI links the table
            generates"#,
        scope: Scope::Tests,
    },
];
