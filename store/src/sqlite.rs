//! SQLite, the embedded default: opening the file (owner-only, WAL) and
//! the schema's migrations.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use super::{create_private_dir, Result, StoreError};

/// Migrations, applied in order; `PRAGMA user_version` records how many ran.
/// Append only: never edit a migration that has shipped.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: users, API keys, audit.
    r#"
    CREATE TABLE users (
        id          INTEGER PRIMARY KEY,
        email       TEXT NOT NULL UNIQUE,
        is_admin    INTEGER NOT NULL DEFAULT 0,
        disabled    INTEGER NOT NULL DEFAULT 0,
        created_at  TEXT NOT NULL
    );
    CREATE TABLE api_keys (
        id          INTEGER PRIMARY KEY,
        user_id     INTEGER NOT NULL REFERENCES users(id),
        key_hash    TEXT NOT NULL UNIQUE,
        created_at  TEXT NOT NULL,
        revoked_at  TEXT
    );
    CREATE TABLE audit (
        id              INTEGER PRIMARY KEY,
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
    "#,
    // 2: money and media: usage, credit ledger, assets, jobs, voice builds, reconciliation.
    r#"
    CREATE TABLE usage (
        id          INTEGER PRIMARY KEY,
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
        id            INTEGER PRIMARY KEY,
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
        id            INTEGER PRIMARY KEY,
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
        id                INTEGER PRIMARY KEY,
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
        id             INTEGER PRIMARY KEY,
        day            TEXT NOT NULL,
        product        TEXT NOT NULL,
        gateway_total  TEXT NOT NULL,
        upstream_total TEXT,
        drift_pct      TEXT,
        status         TEXT NOT NULL,
        created_at     TEXT NOT NULL
    );
    "#,
    // 3: tenant isolation, inbound webhook events, callbacks.
    r#"
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
        id           INTEGER PRIMARY KEY,
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
    "#,
    // 4: the parent of an owned resource (an agent tool's agent), recorded at creation.
    r#"
    ALTER TABLE resources ADD COLUMN parent TEXT;
    "#,
    // 5: the background job follower: when a pending job is polled next, the
    //    lease of the instance polling it, and how many polls it has had.
    r#"
    ALTER TABLE jobs ADD COLUMN follow_next_at TEXT;
    ALTER TABLE jobs ADD COLUMN follow_lease_until TEXT;
    ALTER TABLE jobs ADD COLUMN follow_attempts INTEGER NOT NULL DEFAULT 0;
    UPDATE jobs SET follow_next_at = updated_at WHERE status NOT IN ('completed', 'failed');
    CREATE INDEX jobs_follow_due ON jobs(follow_next_at) WHERE follow_next_at IS NOT NULL;
    "#,
    // 6: accounts: username, password hash, confirmation, soft deletion;
    //    key names and display prefixes; revoked token ids until their
    //    expiry; confirmation and reset tokens (hashed, with expiry).
    r#"
    ALTER TABLE users ADD COLUMN username TEXT;
    ALTER TABLE users ADD COLUMN password_hash TEXT;
    ALTER TABLE users ADD COLUMN confirmed INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE users ADD COLUMN deleted_at TEXT;
    CREATE UNIQUE INDEX users_by_username ON users(username COLLATE NOCASE) WHERE username IS NOT NULL;
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
    "#,
    // 7: the general gateway: credit holds (a request's reserved maximum
    //    cost until it settles) and the token detail of model usage.
    r#"
    CREATE TABLE credit_holds (
        request_id  TEXT PRIMARY KEY,
        user_id     INTEGER NOT NULL REFERENCES users(id),
        amount      TEXT NOT NULL,
        created_at  TEXT NOT NULL
    );
    CREATE INDEX holds_by_user ON credit_holds(user_id);
    CREATE TABLE model_usage (
        id             INTEGER PRIMARY KEY,
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
    "#,
    // 8: the general gateway's video generation jobs.
    r#"
    CREATE TABLE video_jobs (
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
    "#,
    // 9: once-only claims of scheduled work shared by several instances
    //    (the nightly reconciliation of a day).
    r#"
    CREATE TABLE claims (
        name        TEXT PRIMARY KEY,
        claimed_at  TEXT NOT NULL
    );
    "#,
    // 10: one index fewer on the hot path. Every request writes an audit
    //     row; nothing the gateway runs reads the audit by user (users are
    //     deleted softly, so no foreign-key check needs it either).
    r#"
    DROP INDEX IF EXISTS audit_by_user;
    "#,
    // 11: packed objects (objects::pack): the segment holding an asset's
    //     bytes and the offset of its body; NULL for an object of its own.
    r#"
    ALTER TABLE assets ADD COLUMN pack TEXT;
    ALTER TABLE assets ADD COLUMN pack_offset INTEGER;
    "#,
    // 12: instances and their leases (store::instances): each credit hold
    //     names the instance whose request took it; a hold of an instance
    //     whose lease lapsed counts no more.
    r#"
    CREATE TABLE instances (
        id          TEXT PRIMARY KEY,
        lease_until TEXT NOT NULL,
        started_at  TEXT NOT NULL
    );
    ALTER TABLE credit_holds ADD COLUMN instance TEXT;
    CREATE INDEX holds_by_instance ON credit_holds (instance);
    "#,
    // 13 (sign-in with OpenID Connect): the accounts linked to a provider's
    //    subject, and the sign-ins under way (one-time `state`, kept hashed,
    //    with its nonce and PKCE verifier until the callback or expiry).
    r#"
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
    "#,
    // 14 (buying credits through Stripe Checkout, store::purchases): one purchase per
    //     Checkout Session, pending until Stripe says it is paid; the amount
    //     recorded at checkout is the one credited.
    r#"
    CREATE TABLE purchases (
        id          INTEGER PRIMARY KEY,
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
    "#,
    // 15 (budgets per key, store::budgets): a key's budget and its period;
    //     the key of a hold; what each key was charged per period (`day`:
    //     `YYYY-MM-DD`, `month`: `YYYY-MM`, `total`), UTC.
    r#"
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
    "#,
    // 16 (usage and credit history over HTTP, modes::history): a model
    //     request's generation says whether it streamed and its latency
    //     (to its settlement: a stream's end); a billed request's usage and
    //     token detail are found by request id (the usage rows of free
    //     requests, most of all rows, stay out of the index: no cost to them).
    r#"
    ALTER TABLE model_usage ADD COLUMN streamed INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE model_usage ADD COLUMN latency_ms INTEGER;
    CREATE INDEX usage_by_request ON usage (request_id) WHERE unit != 'free';
    CREATE INDEX model_usage_by_request ON model_usage (request_id);
    "#,
    // 17 (usage by key, modes::history `group_by=key`): the API key a usage
    //     record's request came with (`NULL`: an access token, or a charge
    //     made later by a job's observer). No index: read only within a
    //     user's range of `usage_by_user`.
    r#"
    ALTER TABLE usage ADD COLUMN api_key_id INTEGER;
    "#,
    // 18 (native providers, providers::usage): a model request's prompt
    //     tokens read from and written to the provider's cache, billed at
    //     their own prices and not again as input.
    r#"
    ALTER TABLE model_usage ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE model_usage ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
    "#,
    // 19 (routing, gateway_models::routing): a model request's upstream attempts
    //     and the route it was named by (`model` is the deployment that
    //     served it).
    r#"
    ALTER TABLE model_usage ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE model_usage ADD COLUMN route TEXT;
    "#,
    // 20 (budgets per key, voice jobs): the budgeted key a job was
    //     submitted with, whose spend its charge counts in when the job
    //     completes (`NULL`: no key, or a key without a budget).
    r#"
    ALTER TABLE jobs ADD COLUMN key_id INTEGER;
    "#,
];

/// How long a connection waits for another's lock before "database is locked".
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) fn configure(conn: &mut Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(())
}

/// Creates the database file, if missing, readable by the owner only (0600
/// on Unix). SQLite gives the `-wal` and `-shm` files the database file's mode.
fn create_private_file(path: &Path) -> std::io::Result<()> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o.open(path).map(drop)
}

/// Switches the database to WAL (persistent: a no-op once done). Changing
/// the journal mode answers "database is locked" at once, without the busy
/// handler, while another process holds a lock (two processes creating the
/// database together), so it is retried here for up to the busy time-out.
fn set_wal(conn: &Connection) -> Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    let mut wait = Duration::from_millis(5);
    loop {
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_millis(100));
            }
            Err(e) => return Err(StoreError::driver(e)),
        }
    }
}

/// Opens (creating if needed) the database file and runs pending migrations.
///
/// Safe when several processes start at once (`serve` beside a CLI
/// command): reading `user_version` and applying what is pending happen in
/// one `BEGIN IMMEDIATE` transaction, so a second process waits for the
/// first (busy time-out) and then finds nothing to do.
pub(super) fn open_and_migrate(path: &Path) -> Result<Connection> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        create_private_dir(dir)
            .map_err(|e| StoreError::caused(format!("creating {}", dir.display()), e))?;
    }
    create_private_file(path)
        .map_err(|e| StoreError::caused(format!("creating {}", path.display()), e))?;
    let mut conn = Connection::open(path).map_err(StoreError::driver)?;
    configure(&mut conn).map_err(StoreError::driver)?;
    set_wal(&conn)?;
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(StoreError::driver)?;
    let version: usize = tx
        .pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))
        .map_err(StoreError::driver)? as usize;
    for sql in MIGRATIONS.iter().skip(version) {
        tx.execute_batch(sql).map_err(StoreError::driver)?;
    }
    if version < MIGRATIONS.len() {
        tx.pragma_update(None, "user_version", MIGRATIONS.len() as i64)
            .map_err(StoreError::driver)?;
    }
    tx.commit().map_err(StoreError::driver)?;
    Ok(conn)
}
