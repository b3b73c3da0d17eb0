//! The migrations, in order ([`MIGRATIONS`]), each written once for both
//! databases ([`Sql`]); how they are rendered and run is `schema.rs`.

use Sql::{Both, Each};

/// A piece of a migration.
pub(crate) enum Sql {
    /// Read alike by both databases once `schema::WORDS` are put in.
    Both(&'static str),
    /// Statements each database writes its own way, in full.
    Each {
        sqlite: &'static str,
        postgres: &'static str,
    },
}

/// Migrations, applied in order. Append only: never edit a migration that
/// has shipped (existing databases record how many they ran).
pub(crate) const MIGRATIONS: &[&[Sql]] = &[
    // 1: users, API keys, audit.
    &[Both(r#"
    CREATE TABLE users (
        id          {id},
        email       TEXT NOT NULL UNIQUE,
        is_admin    INTEGER NOT NULL DEFAULT 0,
        disabled    INTEGER NOT NULL DEFAULT 0,
        created_at  TEXT NOT NULL
    );
    CREATE TABLE api_keys (
        id          {id},
        user_id     INTEGER NOT NULL REFERENCES users(id),
        key_hash    TEXT NOT NULL UNIQUE,
        created_at  TEXT NOT NULL,
        revoked_at  TEXT
    );
    CREATE TABLE audit (
        id              {id},
        request_id      TEXT NOT NULL,
        user_id         INTEGER REFERENCES users(id),
        route_id        TEXT NOT NULL,
        method          TEXT NOT NULL,
        path            TEXT NOT NULL,
        status          INTEGER NOT NULL,
        upstream_status INTEGER,
        latency_ms      INTEGER NOT NULL,
        created_at      TEXT NOT NULL
    );
    CREATE INDEX audit_by_user ON audit(user_id, created_at);
    "#)],
    // 2: money and media: usage, credit ledger, assets, jobs, voice builds, reconciliation.
    &[Both(r#"
    CREATE TABLE usage (
        id          {id},
        request_id  TEXT NOT NULL,
        user_id     INTEGER REFERENCES users(id),
        route_id    TEXT NOT NULL,
        capability  TEXT NOT NULL,
        product     TEXT NOT NULL,
        unit        TEXT NOT NULL,
        quantity    TEXT NOT NULL,
        unit_price  TEXT,
        markup_pct  TEXT NOT NULL,
        charged     TEXT NOT NULL,
        unpriced    INTEGER NOT NULL,
        once_key    TEXT UNIQUE,
        created_at  TEXT NOT NULL
    );
    CREATE INDEX usage_by_time ON usage(created_at);
    CREATE INDEX usage_by_user ON usage(user_id, created_at);
    CREATE TABLE credit_balances (
        user_id     INTEGER PRIMARY KEY REFERENCES users(id),
        balance     TEXT NOT NULL,
        updated_at  TEXT NOT NULL
    );
    CREATE TABLE credit_ledger (
        id            {id},
        user_id       INTEGER NOT NULL REFERENCES users(id),
        amount        TEXT NOT NULL,
        balance_after TEXT NOT NULL,
        kind          TEXT NOT NULL,
        usage_id      INTEGER REFERENCES usage(id),
        note          TEXT,
        created_at    TEXT NOT NULL
    );
    CREATE INDEX ledger_by_user ON credit_ledger(user_id, id);
    CREATE TABLE assets (
        id            {id},
        owner_id      INTEGER REFERENCES users(id),
        object_key    TEXT NOT NULL UNIQUE,
        class         TEXT NOT NULL,
        purpose       TEXT,
        size_bytes    INTEGER NOT NULL,
        content_type  TEXT NOT NULL,
        file_name     TEXT,
        source        TEXT,
        created_at    TEXT NOT NULL,
        expires_at    TEXT,
        deleted_at    TEXT
    );
    CREATE INDEX assets_live_expiry ON assets(expires_at) WHERE deleted_at IS NULL AND expires_at IS NOT NULL;
    CREATE TABLE jobs (
        id                {id},
        job_id            TEXT NOT NULL,
        kind              TEXT NOT NULL,
        upstream_id       TEXT NOT NULL,
        user_id           INTEGER NOT NULL REFERENCES users(id),
        submit_route      TEXT NOT NULL,
        status            TEXT NOT NULL,
        media_type        TEXT,
        result            TEXT,
        billed            INTEGER NOT NULL DEFAULT 0,
        mirror_asset_id   INTEGER REFERENCES assets(id),
        mirror_state      TEXT,
        mirror_claimed_at TEXT,
        callback_uri      TEXT,
        created_at        TEXT NOT NULL,
        updated_at        TEXT NOT NULL,
        UNIQUE (kind, job_id),
        UNIQUE (kind, upstream_id)
    );
    CREATE INDEX jobs_by_user ON jobs(user_id, kind, id);
    CREATE TABLE reconciliation_runs (
        id             {id},
        day            TEXT NOT NULL,
        product        TEXT NOT NULL,
        gateway_total  TEXT NOT NULL,
        upstream_total TEXT,
        drift_pct      TEXT,
        status         TEXT NOT NULL,
        created_at     TEXT NOT NULL
    );
    "#)],
    // 3: tenant isolation, inbound webhook events, callbacks.
    &[Both(r#"
    CREATE TABLE resources (
        kind         TEXT NOT NULL,
        upstream_id  TEXT NOT NULL,
        owner_id     INTEGER NOT NULL REFERENCES users(id),
        status       TEXT,
        created_at   TEXT NOT NULL,
        updated_at   TEXT NOT NULL,
        PRIMARY KEY (kind, upstream_id)
    );
    CREATE INDEX resources_by_owner ON resources(owner_id, kind);
    CREATE TABLE webhook_events (
        id           {id},
        body_sha256  TEXT NOT NULL UNIQUE,
        body         BLOB NOT NULL,
        event        TEXT,
        kind         TEXT,
        upstream_id  TEXT,
        signed       INTEGER NOT NULL,
        outcome      TEXT NOT NULL,
        received_at  TEXT NOT NULL
    );
    ALTER TABLE users ADD COLUMN callback_secret TEXT;
    ALTER TABLE jobs ADD COLUMN callback_state TEXT;
    ALTER TABLE jobs ADD COLUMN callback_attempts INTEGER NOT NULL DEFAULT 0;
    "#)],
    // 4: the parent of an owned resource (an agent tool's agent), recorded at creation.
    &[Both(r#"
    ALTER TABLE resources ADD COLUMN parent TEXT;
    "#)],
    // 5: the background job follower: when a pending job is polled next, the
    //    lease of the instance polling it, and how many polls it has had.
    &[Both(r#"
    ALTER TABLE jobs ADD COLUMN follow_next_at TEXT;
    ALTER TABLE jobs ADD COLUMN follow_lease_until TEXT;
    ALTER TABLE jobs ADD COLUMN follow_attempts INTEGER NOT NULL DEFAULT 0;
    UPDATE jobs SET follow_next_at = updated_at WHERE status NOT IN ('completed', 'failed');
    CREATE INDEX jobs_follow_due ON jobs(follow_next_at) WHERE follow_next_at IS NOT NULL;
    "#)],
    // 6: accounts: username, password hash, confirmation, soft deletion;
    //    key names and display prefixes; revoked token ids until their
    //    expiry; confirmation and reset tokens (hashed, with expiry).
    &[Both(r#"
    ALTER TABLE users ADD COLUMN username TEXT;
    ALTER TABLE users ADD COLUMN password_hash TEXT;
    ALTER TABLE users ADD COLUMN confirmed INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE users ADD COLUMN deleted_at TEXT;
    "#),
    Each {
        sqlite: "CREATE UNIQUE INDEX users_by_username ON users(username COLLATE NOCASE) WHERE username IS NOT NULL;",
        // Case-blind by `lower()`, and e-mail addresses too (found by
        // `lower(email)` at sign-in).
        postgres: "CREATE UNIQUE INDEX users_by_username ON users (lower(username)) WHERE username IS NOT NULL;
                   CREATE INDEX users_by_email ON users (lower(email));",
    },
    Both(r#"
    ALTER TABLE api_keys ADD COLUMN name TEXT;
    ALTER TABLE api_keys ADD COLUMN prefix TEXT;
    CREATE INDEX api_keys_by_user ON api_keys(user_id, id);
    CREATE TABLE revoked_tokens (
        jti         TEXT PRIMARY KEY,
        user_id     INTEGER NOT NULL REFERENCES users(id),
        expires_at  TEXT NOT NULL,
        revoked_at  TEXT NOT NULL
    );
    CREATE INDEX revoked_tokens_expiry ON revoked_tokens(expires_at);
    CREATE TABLE account_tokens (
        token_hash  TEXT PRIMARY KEY,
        user_id     INTEGER NOT NULL REFERENCES users(id),
        purpose     TEXT NOT NULL,
        expires_at  TEXT NOT NULL,
        used_at     TEXT,
        created_at  TEXT NOT NULL
    );
    "#)],
    // 7: the general gateway: credit holds (a request's reserved maximum
    //    cost until it settles) and the token detail of model usage.
    &[Both(r#"
    CREATE TABLE credit_holds (
        request_id  TEXT PRIMARY KEY,
        user_id     INTEGER NOT NULL REFERENCES users(id),
        amount      TEXT NOT NULL,
        created_at  TEXT NOT NULL
    );
    CREATE INDEX holds_by_user ON credit_holds(user_id);
    CREATE TABLE model_usage (
        id             {id},
        request_id     TEXT NOT NULL,
        user_id        INTEGER REFERENCES users(id),
        route_id       TEXT NOT NULL,
        model          TEXT NOT NULL,
        input_tokens   INTEGER NOT NULL,
        output_tokens  INTEGER NOT NULL,
        counted        INTEGER NOT NULL,
        byok           INTEGER NOT NULL,
        ended          TEXT NOT NULL,
        created_at     TEXT NOT NULL
    );
    CREATE INDEX model_usage_by_time ON model_usage(created_at);
    ALTER TABLE api_keys ADD COLUMN models TEXT;
    "#)],
    // 8: the general gateway's video generation jobs (listed newest first,
    //    ties broken by the row id: `{rowid}`).
    &[Both(r#"
    CREATE TABLE video_jobs ({rowid}
        job_id          TEXT PRIMARY KEY,
        user_id         INTEGER NOT NULL REFERENCES users(id),
        provider        TEXT NOT NULL,
        model           TEXT NOT NULL,
        hold_id         TEXT NOT NULL,
        seconds         TEXT NOT NULL,
        size            TEXT,
        prompt          TEXT NOT NULL,
        status          TEXT NOT NULL,
        object_key      TEXT,
        expires_at      TEXT,
        copy_claimed_at TEXT,
        follow_next_at  TEXT,
        created_at      TEXT NOT NULL,
        updated_at      TEXT NOT NULL
    );
    CREATE INDEX video_jobs_by_user ON video_jobs(user_id, created_at);
    CREATE INDEX video_jobs_due ON video_jobs(follow_next_at);
    "#)],
    // 9: once-only claims of scheduled work shared by several instances
    //    (the nightly reconciliation of a day).
    &[Both(r#"
    CREATE TABLE claims (
        name        TEXT PRIMARY KEY,
        claimed_at  TEXT NOT NULL
    );
    "#)],
    // 10: one index fewer on the hot path. Every request writes an audit
    //     row; nothing the gateway runs reads the audit by user (users are
    //     deleted softly, so no foreign-key check needs it either).
    &[Both(r#"
    DROP INDEX IF EXISTS audit_by_user;
    "#)],
    // 11: packed objects (objects::pack): the segment holding an asset's
    //     bytes and the offset of its body; NULL for an object of its own.
    &[Both(r#"
    ALTER TABLE assets ADD COLUMN pack TEXT;
    ALTER TABLE assets ADD COLUMN pack_offset INTEGER;
    "#)],
    // 12: instances and their leases (store::instances): each credit hold
    //     names the instance whose request took it; a hold of an instance
    //     whose lease lapsed counts no more.
    &[Both(r#"
    CREATE TABLE instances (
        id          TEXT PRIMARY KEY,
        lease_until TEXT NOT NULL,
        started_at  TEXT NOT NULL
    );
    ALTER TABLE credit_holds ADD COLUMN instance TEXT;
    CREATE INDEX holds_by_instance ON credit_holds (instance);
    "#)],
    // 13 (sign-in with OpenID Connect): the accounts linked to a provider's
    //    subject, and the sign-ins under way (one-time `state`, kept hashed,
    //    with its nonce and PKCE verifier until the callback or expiry).
    &[Both(r#"
    CREATE TABLE oauth_links (
        provider    TEXT NOT NULL,
        subject     TEXT NOT NULL,
        user_id     INTEGER NOT NULL REFERENCES users(id),
        created_at  TEXT NOT NULL,
        PRIMARY KEY (provider, subject)
    );
    CREATE INDEX oauth_links_by_user ON oauth_links (user_id);
    CREATE TABLE oauth_states (
        state_hash     TEXT PRIMARY KEY,
        provider       TEXT NOT NULL,
        nonce          TEXT NOT NULL,
        pkce_verifier  TEXT NOT NULL,
        expires_at     TEXT NOT NULL,
        created_at     TEXT NOT NULL
    );
    CREATE INDEX oauth_states_expiry ON oauth_states (expires_at);
    "#)],
    // 14 (buying credits through Stripe Checkout, store::purchases): one purchase per
    //     Checkout Session, pending until Stripe says it is paid; the amount
    //     recorded at checkout is the one credited.
    &[Both(r#"
    CREATE TABLE purchases (
        id          {id},
        user_id     INTEGER NOT NULL REFERENCES users(id),
        session_id  TEXT NOT NULL UNIQUE,
        amount_usd  TEXT NOT NULL,
        status      TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        expires_at  TEXT,
        paid_at     TEXT,
        paid_event  TEXT
    );
    CREATE INDEX purchases_by_user ON purchases (user_id, id);
    "#)],
    // 15 (budgets per key, store::budgets): a key's budget and its period;
    //     the key of a hold; what each key was charged per period (`day`:
    //     `YYYY-MM-DD`, `month`: `YYYY-MM`, `total`), UTC.
    &[Both(r#"
    ALTER TABLE api_keys ADD COLUMN budget_usd TEXT;
    ALTER TABLE api_keys ADD COLUMN budget_period TEXT;
    ALTER TABLE credit_holds ADD COLUMN key_id INTEGER;
    CREATE INDEX holds_by_key ON credit_holds (key_id) WHERE key_id IS NOT NULL;
    CREATE TABLE key_spend (
        key_id  INTEGER NOT NULL REFERENCES api_keys(id),
        period  TEXT NOT NULL,
        spent   TEXT NOT NULL,
        PRIMARY KEY (key_id, period)
    );
    "#)],
    // 16 (usage and credit history over HTTP, modes::history): a model
    //     request's generation says whether it streamed and its latency
    //     (to its settlement: a stream's end); a billed request's usage and
    //     token detail are found by request id (the usage rows of free
    //     requests, most of all rows, stay out of the index: no cost to them).
    &[Both(r#"
    ALTER TABLE model_usage ADD COLUMN streamed INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE model_usage ADD COLUMN latency_ms INTEGER;
    CREATE INDEX usage_by_request ON usage (request_id) WHERE unit != 'free';
    CREATE INDEX model_usage_by_request ON model_usage (request_id);
    "#)],
    // 17 (usage by key, modes::history `group_by=key`): the API key a usage
    //     record's request came with (`NULL`: an access token, or a charge
    //     made later by a job's observer). No index: read only within a
    //     user's range of `usage_by_user`.
    &[Both(r#"
    ALTER TABLE usage ADD COLUMN api_key_id INTEGER;
    "#)],
    // 18 (native providers, providers::usage): a model request's prompt
    //     tokens read from and written to the provider's cache, billed at
    //     their own prices and not again as input.
    &[Both(r#"
    ALTER TABLE model_usage ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE model_usage ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
    "#)],
    // 19 (routing, gateway_models::routing): a model request's upstream attempts
    //     and the route it was named by (`model` is the deployment that
    //     served it).
    &[Both(r#"
    ALTER TABLE model_usage ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE model_usage ADD COLUMN route TEXT;
    "#)],
    // 20 (budgets per key, voice jobs): the budgeted key a job was
    //     submitted with, whose spend its charge counts in when the job
    //     completes (`NULL`: no key, or a key without a budget).
    &[Both(r#"
    ALTER TABLE jobs ADD COLUMN key_id INTEGER;
    "#)],
    // 21 (the Responses API, store::responses): a stored response, its
    //     turn's input items and the response object (JSON text), its
    //     owner and key, the response it continues, the deployment that
    //     served it (and that provider's own id of it, when it stored the
    //     turn itself), swept after `expires_at`.
    &[Both(r#"
    CREATE TABLE responses (
        id           TEXT PRIMARY KEY,
        user_id      INTEGER NOT NULL REFERENCES users(id),
        key_id       INTEGER,
        previous_id  TEXT,
        model        TEXT NOT NULL,
        served       TEXT,
        upstream_id  TEXT,
        status       TEXT NOT NULL,
        background   INTEGER NOT NULL DEFAULT 0,
        request_id   TEXT NOT NULL,
        input        TEXT NOT NULL,
        body         TEXT NOT NULL,
        created_at   TEXT NOT NULL,
        updated_at   TEXT NOT NULL,
        expires_at   TEXT NOT NULL
    );
    CREATE INDEX responses_by_expiry ON responses (expires_at);
    "#)],
    // 22 (background responses, store::responses): the instance running a
    //     background response (a restart of it marks the run failed) and
    //     its stream's id (what a cancel stops); its events as they came,
    //     for a client to re-attach from a sequence number.
    &[Both(r#"
    ALTER TABLE responses ADD COLUMN instance TEXT;
    ALTER TABLE responses ADD COLUMN stream_id TEXT;
    CREATE INDEX responses_running ON responses (instance) WHERE instance IS NOT NULL;
    CREATE TABLE response_events (
        response_id  TEXT NOT NULL,
        seq          INTEGER NOT NULL,
        event        TEXT NOT NULL,
        PRIMARY KEY (response_id, seq)
    );
    "#)],
    // 23 (speech, runtime::modes::speech): a request's stored speech, found
    //     by its request id (`GET /generations/{request_id}` names its
    //     URL); only speech pays for the index.
    &[Both(r#"
    CREATE INDEX assets_speech_source ON assets (source) WHERE class = 'speech';
    "#)],
    // 24 (batches, store::batches): a batch, its caller's rights as they
    //     were when it was made, its status and times; each of its lines
    //     with its body, its state (`waiting`, `claimed` by an instance,
    //     `done`, `failed`) and its result, written with its charge.
    &[Both(r#"
    CREATE TABLE batches (
        id TEXT PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), key_id INTEGER,
        budget_key INTEGER, models TEXT, endpoint TEXT NOT NULL, route_id TEXT NOT NULL,
        input_file_id TEXT NOT NULL, completion_window TEXT NOT NULL, metadata TEXT,
        status TEXT NOT NULL, ending TEXT, owner TEXT, errors TEXT, total INTEGER NOT NULL,
        output_file_id TEXT, error_file_id TEXT, created_at TEXT NOT NULL, expires_at TEXT NOT NULL,
        in_progress_at TEXT, finalizing_at TEXT, ended_at TEXT, cancelling_at TEXT
    );
    CREATE INDEX batches_by_user ON batches (user_id, id);
    CREATE INDEX batches_running ON batches (status) WHERE status IN ('in_progress', 'cancelling', 'finalizing');
    CREATE TABLE batch_lines (
        batch_id TEXT NOT NULL, line INTEGER NOT NULL, custom_id TEXT NOT NULL, body TEXT NOT NULL,
        state TEXT NOT NULL, owner TEXT, request_id TEXT, status_code INTEGER, result TEXT,
        PRIMARY KEY (batch_id, line)
    );
    CREATE INDEX batch_lines_by_state ON batch_lines (batch_id, state, line);
    CREATE INDEX batch_lines_claimed ON batch_lines (owner) WHERE state = 'claimed';
    "#)],
    // 25 (the MCP gateway, store::mcp): an API key's MCP allow-list
    //     (`server/tool` or `server/*`, comma-separated); a caller's MCP
    //     session (the gateway's id, its user and key, the server or ""
    //     for the virtual one, the servers' own session ids as JSON); each
    //     tool call's record (arguments and results only when logged).
    &[Both(r#"
    ALTER TABLE api_keys ADD COLUMN mcp_tools TEXT;
    CREATE TABLE mcp_sessions (
        id TEXT PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), key_id INTEGER,
        server TEXT NOT NULL, upstream TEXT NOT NULL, created_at TEXT NOT NULL, ended_at TEXT
    );
    CREATE INDEX mcp_sessions_open ON mcp_sessions (user_id) WHERE ended_at IS NULL;
    CREATE TABLE mcp_calls (
        request_id TEXT PRIMARY KEY, user_id INTEGER NOT NULL, session_id TEXT, server TEXT NOT NULL,
        tool TEXT NOT NULL, duration_ms INTEGER NOT NULL, outcome TEXT NOT NULL, charged TEXT,
        arguments TEXT, result TEXT, created_at TEXT NOT NULL
    );
    CREATE INDEX mcp_calls_by_user ON mcp_calls (user_id, created_at);
    "#)],
    // 26 (token limits, adapters::ratelimit::windows): an API key's
    //     requests and tokens per window (`rpm`, `tpm`; NULL: none).
    &[Both(r#"
    ALTER TABLE api_keys ADD COLUMN rpm INTEGER;
    ALTER TABLE api_keys ADD COLUMN tpm INTEGER;
    "#)],
    // 27 (spend alerts, store::alerts): a user's alert settings (budget
    //     thresholds in percent, comma-separated, a balance floor, mail, a webhook
    //     and its secret; whether the floor's alert has fired since the
    //     balance was last above it); each alert sent, once by its once-key,
    //     with its body and the state of its deliveries.
    &[Both(r#"
    CREATE TABLE alert_settings (
        user_id INTEGER PRIMARY KEY REFERENCES users(id), budget_thresholds TEXT NOT NULL,
        balance_floor TEXT, email INTEGER NOT NULL, webhook_url TEXT, webhook_secret TEXT,
        floor_alerted INTEGER NOT NULL DEFAULT 0, updated_at TEXT NOT NULL
    );
    CREATE TABLE alerts (
        id {id}, user_id INTEGER NOT NULL, once_key TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,
        threshold TEXT NOT NULL, body TEXT NOT NULL, email_state TEXT NOT NULL,
        webhook_state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX alerts_by_user ON alerts (user_id, id);
    CREATE INDEX alerts_due ON alerts (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
    "#)],
    // 28 (organizations, store::orgs): an organization is an account (a
    //     `users` row: its balance, holds, ledger, keys and resources are
    //     an account's) with a name; its members and their roles; the
    //     invitations mailed (a token's hash, until accepted or expired);
    //     the member an organization's key belongs to.
    &[Both(r#"
    CREATE TABLE organizations (
        id INTEGER PRIMARY KEY REFERENCES users(id), name TEXT NOT NULL,
        created_by INTEGER NOT NULL, created_at TEXT NOT NULL
    );
    CREATE TABLE org_members (
        org_id INTEGER NOT NULL, user_id INTEGER NOT NULL, role TEXT NOT NULL,
        created_at TEXT NOT NULL, PRIMARY KEY (org_id, user_id)
    );
    CREATE INDEX org_members_by_user ON org_members (user_id);
    CREATE TABLE org_invitations (
        token_hash TEXT PRIMARY KEY, org_id INTEGER NOT NULL, email TEXT NOT NULL,
        role TEXT NOT NULL, invited_by INTEGER NOT NULL, created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL, accepted_at TEXT
    );
    ALTER TABLE api_keys ADD COLUMN member_id INTEGER;
    "#)],
    // 29 (price versions, store::prices): the catalogue's prices under
    //     their version (a digest of them), kept as long as records name
    //     it; the version that priced each usage record.
    &[Both(r#"
    CREATE TABLE price_versions (
        version TEXT PRIMARY KEY, prices TEXT NOT NULL, created_at TEXT NOT NULL
    );
    ALTER TABLE usage ADD COLUMN price_version TEXT;
    "#)],
    // 30 (one record per request, store::writes): a request's usage
    //     record that charges nothing (a free request's, most of all
    //     requests) is written into its audit row, not as a usage row of
    //     its own; `usage_records` reads both tables as one. Rows written
    //     before stay where they are (no history is rewritten: an upgrade
    //     costs no time however large the database). Only the folded rows
    //     that are not `free` (a BYOK or unpriced model call's) are found
    //     by request id; the others are read by user and time through
    //     `audit_by_user`.
    &[Both(r#"
    ALTER TABLE audit ADD COLUMN capability TEXT;
    ALTER TABLE audit ADD COLUMN product TEXT;
    ALTER TABLE audit ADD COLUMN unit TEXT;
    ALTER TABLE audit ADD COLUMN quantity TEXT;
    ALTER TABLE audit ADD COLUMN unit_price TEXT;
    ALTER TABLE audit ADD COLUMN markup_pct TEXT;
    ALTER TABLE audit ADD COLUMN unpriced INTEGER;
    ALTER TABLE audit ADD COLUMN api_key_id INTEGER;
    ALTER TABLE audit ADD COLUMN price_version TEXT;
    CREATE INDEX audit_usage_by_request ON audit (request_id) WHERE unit != 'free';
    CREATE VIEW usage_records AS
        SELECT id, request_id, user_id, route_id, capability, product, unit, quantity, unit_price,
               markup_pct, charged, unpriced, once_key, created_at, api_key_id, price_version
        FROM usage
        UNION ALL
        SELECT -id, request_id, user_id, route_id, capability, product, unit, quantity, unit_price,
               markup_pct, '0.00000000', unpriced, NULL, created_at, api_key_id, price_version
        FROM audit WHERE unit IS NOT NULL;
    "#)],
];
