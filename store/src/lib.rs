//! The database: migrations, repositories, and the group-commit record writer.
//!
//! Architecture invariant: only this module speaks SQL.
//!
//! Two databases behind one interface ([`Location`]): SQLite, the embedded
//! default (one file, WAL), and PostgreSQL (`GATEWAY_DATABASE_URL`), which
//! several gateway instances share. The repositories are written once, in
//! SQL both read alike ([`sql`]), and so is the schema: one list of
//! migrations with each database's spellings side by side ([`schema`]).
//!
//! * Reads go through an `r2d2` pool (WAL mode lets SQLite's run beside the
//!   writer) and are called from async code through [`Store::blocking`]
//!   (tokio's blocking pool).
//! * Records that must not be lost (audit, usage, ledger, assets, jobs) go
//!   through [`RecordWriter`]: one dedicated thread owns one connection and
//!   commits whatever has queued up in one transaction (group commit), then
//!   wakes every request whose records were in it. A request answers only
//!   after its records are durable, without one fsync per request and without
//!   blocking the async runtime.

use std::path::{Path, PathBuf};

use r2d2_sqlite::SqliteConnectionManager;

use sqlite::{configure, open_and_migrate};

mod accounts;
mod alerts;
mod assets;
mod balances;
mod batches;
mod budgets;
mod erasure;
mod history;
mod instances;
mod jobs;
mod keys;
mod mcp;
mod migrations;
mod money;
mod oauth;
mod orgs;
mod owners;
pub(crate) mod params;
mod pg;
pub mod pg_tls;
mod price_versions;
mod purchases;
mod reconciliations;
mod records;
mod responses;
mod schema;
pub(crate) mod sql;
mod sqlite;
mod videos;
mod wal_sync;
mod webhooks;
mod writer;
mod writer_conn;
mod writes;

pub use sql::Dialect;
use sql::{Db, Row};

pub use accounts::{Accounts, PasswordReset, Registration, UserRow};
pub use alerts::{AlertRow, AlertSettings, Alerts, NewAlert};
pub use assets::{AssetRow, Assets};
pub use batches::{
    BatchRow, Batches, ClaimedLine, LineCounts, LineEnd, LineRow, NewBatch, NewLine,
};
pub use budgets::{Budget, KeyBudget, Period};
pub use erasure::{Erased, Erasure};
pub use history::{
    Generation, GroupBy, History, LedgerLine, ModelDetail, ModelUsageRow, UsageRow, UsageTotals,
};
pub use instances::Instances;
pub use jobs::{JobRow, Jobs};
pub use keys::{KeyLimit, KeyOwner, KeyRow, Keys};
pub use mcp::{McpCallRecord, McpSessionRow, McpSessions};
pub use money::{Ledger, LedgerRow, Reserved};
pub use oauth::{OauthSignIn, OauthUser, ProviderSignIns};
pub use orgs::{Joined, MemberRow, OrgRow, Organizations, Removal};
pub use owners::Owners;
pub use price_versions::PriceVersions;
pub use purchases::{Credited, PurchaseRow, Purchases};
pub use reconciliations::{ReconciliationRow, Reconciliations};
pub use responses::{ResponseRow, Responses, Tenant};
pub use videos::{VideoJobRow, Videos};
pub use webhooks::{WebhookEventRow, Webhooks};

pub use records::{
    job_hold_id, AssetRecord, AuditRecord, Committed, JobRecord, JobUpdate, ModelUsageRecord,
    OutsideRecordPhase, Record, UsageRecord, WebhookEventRecord,
};
use writer::RecordWriter as Writer;
pub use writer::{ChargeListener, RecordWriter};

pub use gateway_base::store_error::{Failure, Result, StoreError};

/// Where the database is: a SQLite file (the embedded default) or a
/// PostgreSQL server (`postgres://...`), which several instances can share.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(String),
}

impl std::fmt::Debug for Location {
    /// Never prints a PostgreSQL URL's password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Sqlite(p) => f.debug_tuple("Sqlite").field(p).finish(),
            Location::Postgres(url) => f.debug_tuple("Postgres").field(&redact_url(url)).finish(),
        }
    }
}

pub use pg::{create_schema as create_pg_schema, drop_schema as drop_pg_schema};

/// Whether a PostgreSQL URL parses (for configuration errors at start).
pub fn check_url(url: &str) -> Result<()> {
    pg::parse_url(url).map(drop)
}

/// A database URL without its password (for logs).
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &creds[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// A user as authentication sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub email: String,
    pub is_admin: bool,
    pub disabled: bool,
    /// Soft-deleted (`DELETE /admin/users/{id}`): its credentials answer 401.
    pub deleted: bool,
    /// The models the presented API key may use (`provider/model` or
    /// `provider/*`); `None`: every model. Only set by a key lookup.
    pub models: Option<Vec<String>>,
    /// The presented API key's id when the key has a budget (`None`: no
    /// key, or one without a budget; its requests then skip every budget
    /// read). Only set by a key lookup.
    pub budget_key: Option<i64>,
    /// The presented API key's id (`None`: an access token or the admin
    /// key); usage records name it (`group_by=key`). Only set by a key
    /// lookup.
    pub key_id: Option<i64>,
    /// The presented API key's MCP allow-list (`server/tool`, `server/*`;
    /// `None`: every exposed tool). Only set by a key lookup.
    pub mcp_tools: Option<Vec<String>>,
    /// The presented API key's requests and tokens per window (`rpm`,
    /// `tpm`; `None`: no such limit). Only set by a key lookup.
    pub rpm: Option<u64>,
    pub tpm: Option<u64>,
}

/// Whether the database at `location` answers, without writing anything
/// (`gateway check-config --connect`): a SQLite file opened read-only (one
/// that does not exist yet is fine: start-up makes it), PostgreSQL
/// connected to; `SELECT 1` either way.
pub fn probe(location: &Location) -> Result<String> {
    match location {
        Location::Sqlite(path) if !path.exists() => Ok(format!(
            "{} does not exist yet (made at start-up)",
            path.display()
        )),
        Location::Sqlite(path) => {
            let c = rusqlite::Connection::open_with_flags(
                path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .map_err(StoreError::driver)?;
            let v: i64 = c
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .map_err(StoreError::driver)?;
            Ok(format!("SQLite {}: schema version {v}", path.display()))
        }
        Location::Postgres(url) => {
            let config = pg::parse_url(url)?;
            let mut conn = pg::PgConn::connect(&config, false)?;
            conn.db().exists("SELECT 1", &[])?;
            Ok("PostgreSQL answers".into())
        }
    }
}

/// A consistent copy of the SQLite database `from` at `to` (a new file),
/// taken while the gateway serves: SQLite's online backup, every page in
/// one step under one read transaction, so the copy is the database as one
/// moment saw it (in WAL mode the writer is not held up). The copy is the
/// owner's only.
pub fn backup_sqlite(from: &Path, to: &Path) -> Result<()> {
    use rusqlite::OpenFlags;
    let src = rusqlite::Connection::open_with_flags(from, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(StoreError::driver)?;
    let mut dst = rusqlite::Connection::open(to).map_err(StoreError::driver)?;
    {
        use rusqlite::backup::StepResult;
        let b = rusqlite::backup::Backup::new(&src, &mut dst).map_err(StoreError::driver)?;
        // -1: every page in one step (one read transaction, one moment).
        loop {
            match b.step(-1).map_err(StoreError::driver)? {
                StepResult::Done => break,
                StepResult::More => {}
                _ => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    }
    dst.pragma_update(None, "journal_mode", "DELETE")
        .map_err(StoreError::driver)?;
    drop(dst);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o600))
            .map_err(StoreError::driver)?;
    }
    Ok(())
}

/// Creates `dir` (and missing parents) readable by the owner only (0700 on
/// Unix); a directory that exists keeps its mode.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// Connects to PostgreSQL and runs pending migrations.
fn open_and_migrate_pg(url: &str, sync_full: bool) -> Result<(pg::PgConn, pg_tls::Target)> {
    let config = pg::parse_url(url)?;
    let mut conn = pg::PgConn::connect(&config, sync_full)?;
    schema::migrate_postgres_to(&mut conn.db(), schema::MIGRATIONS.len())?;
    Ok((conn, config))
}

/// How long a request waits for a pooled PostgreSQL connection before it is
/// answered 503: also bounds the pool's back-off between reconnection
/// attempts (half of it), so traffic resumes within seconds of the
/// server's return.
const PG_CHECKOUT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// The read pool of either database.
#[derive(Clone)]
enum Pool {
    Sqlite(r2d2::Pool<SqliteConnectionManager>),
    Postgres(r2d2::Pool<pg::PgManager>),
}

/// The database: a read pool and the record writer.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    writer: RecordWriter,
}

impl Store {
    /// Opens the SQLite database at `path`, migrates it, and starts the
    /// writer thread, with every commit fsynced.
    pub fn open(path: &Path) -> Result<Store> {
        Store::open_with(path, true)
    }

    /// Opens the database at `location` (see [`Store::open_at_with`]), with
    /// every commit made durable before it is acknowledged.
    pub fn open_at(location: &Location) -> Result<Store> {
        Store::open_at_with(location, true)
    }

    /// Creates and migrates the database, then closes it: what
    /// `gateway serve` does before it listens.
    pub fn migrate(location: &Location) -> Result<()> {
        Store::migrate_to(location, schema::MIGRATIONS.len())
    }

    /// Runs the first `n` migrations only: a database of an earlier shape,
    /// for the tests of the later migrations on data written before them.
    #[doc(hidden)]
    pub fn migrate_to(location: &Location, n: usize) -> Result<()> {
        match location {
            Location::Sqlite(path) => sqlite::open_and_migrate_to(path, n).map(drop),
            Location::Postgres(url) => {
                let config = pg::parse_url(url)?;
                let mut conn = pg::PgConn::connect(&config, true)?;
                schema::migrate_postgres_to(&mut conn.db(), n)
            }
        }
    }

    /// [`Store::open`], choosing whether commits are fsynced (`sync_full`).
    pub fn open_with(path: &Path, sync_full: bool) -> Result<Store> {
        Store::open_at_with(&Location::Sqlite(path.to_owned()), sync_full)
    }

    /// Opens the database at `location`, migrates it, and starts the writer
    /// thread. `sync_full`: every commit is flushed to disk before it is
    /// acknowledged (SQLite `synchronous=FULL`; PostgreSQL's default
    /// `synchronous_commit`); otherwise a crash of the machine (not of the
    /// gateway) may lose the last commits.
    pub fn open_at_with(location: &Location, sync_full: bool) -> Result<Store> {
        match location {
            Location::Sqlite(path) => {
                let writer_conn = open_and_migrate(path)?;
                // NORMAL (WAL): a commit survives a crash of the process.
                // `sync_full`: it survives a power cut too ("must not lose a
                // record"), the log flushed before a commit is acknowledged
                // (`wal_sync`, off the write lock; or FULL if that cannot run).
                writer_conn
                    .pragma_update(None, "synchronous", "NORMAL")
                    .map_err(StoreError::driver)?;
                let manager = SqliteConnectionManager::file(path).with_init(configure);
                let pool = r2d2::Pool::builder()
                    .max_size(8)
                    .build(manager)
                    .map_err(StoreError::driver)?;
                Ok(Store {
                    pool: Pool::Sqlite(pool),
                    writer: Writer::start(writer::Conn::Sqlite(writer_conn), sync_full),
                })
            }
            Location::Postgres(url) => {
                let (writer_conn, config) = open_and_migrate_pg(url, sync_full)?;
                // Several writers, each a connection: groups in flight at once.
                let mut conns = vec![writer::Conn::Postgres(writer_conn)];
                for _ in 1..writer::PG_WRITERS {
                    conns.push(writer::Conn::Postgres(pg::PgConn::connect(
                        &config, sync_full,
                    )?));
                }
                let manager = pg::PgManager { config, sync_full };
                let pool = r2d2::Pool::builder()
                    .max_size(8)
                    .min_idle(Some(1))
                    .connection_timeout(PG_CHECKOUT_TIMEOUT)
                    .build(manager)
                    .map_err(StoreError::driver)?;
                Ok(Store {
                    pool: Pool::Postgres(pool),
                    writer: Writer::start_many(conns, sync_full),
                })
            }
        }
    }

    /// Which database this is.
    pub fn dialect(&self) -> Dialect {
        match self.pool {
            Pool::Sqlite(_) => Dialect::Sqlite,
            Pool::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs `f` on a pooled connection.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Db<'_>) -> Result<T>) -> Result<T> {
        match &self.pool {
            Pool::Sqlite(pool) => {
                let conn = pool.get().map_err(StoreError::driver)?;
                f(&mut Db::lite(&conn))
            }
            Pool::Postgres(pool) => {
                // The pool checks each connection it hands out and replaces
                // the closed ones; none in time means the server is unreachable.
                let mut conn = pool
                    .get()
                    .map_err(|e| StoreError::driver(e).with_failure(Failure::Unavailable))?;
                f(&mut conn.db())
            }
        }
    }

    /// Runs `f` in one write transaction on a pooled connection.
    pub(crate) fn transaction<T>(&self, f: impl FnOnce(&mut Db<'_>) -> Result<T>) -> Result<T> {
        self.with(|db| db.transaction(f))
    }

    /// Runs `f` on this store in tokio's blocking pool (database calls block),
    /// so that async code never blocks its runtime on the database.
    pub async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| StoreError::caused("blocking task", e))?
    }

    /// Whether the database answers a query (a readiness probe).
    pub fn ping(&self) -> Result<()> {
        self.with(|db| db.exists("SELECT 1", &[]).map(drop))
    }

    /// Tells `f` of every user charged by a commit, as soon as it is
    /// committed (spend alerts; set once, at start).
    pub fn on_charge(&self, f: ChargeListener) {
        self.writer.on_charge(f);
    }

    /// Commits `records` (in the next group commit) and waits until they are
    /// durable. Returns the ids of the assets among them, in order.
    ///
    /// The pipeline's record phase only (`pipeline::record`); any other
    /// commit goes through [`Store::commit_outside_record_phase`]
    /// (`layout::records_commit_through_one_door` checks it).
    pub async fn commit(&self, records: Vec<Record>) -> Result<Committed> {
        self.writer.commit(records).await
    }

    /// [`RecordWriter::commit_unflushed`]: the record phase of a request
    /// settled later by its stream (`ctx::Later::Stream`), only.
    pub async fn commit_unflushed(&self, records: Vec<Record>) -> Result<Committed> {
        self.writer.commit_unflushed(records).await
    }

    /// The one door for records committed outside the pipeline's record
    /// phase, each for a named reason ([`OutsideRecordPhase`]): like
    /// [`Store::commit`] (the next group commit, durable when it returns,
    /// the money rules of the writer applied), for work that is not a
    /// request's answer. Its callers are listed by
    /// `layout::records_commit_through_one_door`: a new one is a decision,
    /// made there and in ARCHITECTURE.md.
    pub async fn commit_outside_record_phase(
        &self,
        why: OutsideRecordPhase,
        records: Vec<Record>,
    ) -> Result<Committed> {
        tracing::trace!(
            ?why,
            records = records.len(),
            "commit outside the record phase"
        );
        self.writer.commit(records).await
    }

    /// Every table's and view's columns, `(table, column)` sorted: the schema as the
    /// database sees it (both databases' migrations must describe the same).
    pub fn schema_columns(&self) -> Result<Vec<(String, String)>> {
        let mut cols = self.with(|db| match db.dialect() {
            Dialect::Sqlite => db.rows(
                "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p
                 WHERE m.type IN ('table', 'view') AND m.name NOT LIKE 'sqlite_%'",
                &[],
                |r| Ok((r.get(0)?, r.get(1)?)),
            ),
            Dialect::Postgres => db.rows(
                "SELECT table_name::text, column_name::text FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name <> 'gateway_schema'",
                &[],
                |r| Ok((r.get(0)?, r.get(1)?)),
            ),
        })?;
        cols.sort();
        Ok(cols)
    }
}

/// A user from `id, email, is_admin, disabled, deleted` (the key's models,
/// when a key was presented, are set by the key lookup).
fn row_to_user(r: &Row<'_>) -> Result<User> {
    Ok(User {
        id: r.get(0)?,
        email: r.get(1)?,
        is_admin: r.get(2)?,
        disabled: r.get(3)?,
        deleted: r.get(4)?,
        models: None,
        budget_key: None,
        key_id: None,
        mcp_tools: None,
        rpm: None,
        tpm: None,
    })
}

/// Current time as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    rfc3339(chrono::Utc::now())
}

/// A time as the database stores it: RFC 3339 UTC with milliseconds (so
/// that stored times compare as text).
pub fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::p;

    fn temp_db() -> (tempdir::Dir, Store) {
        let dir = tempdir::Dir::new();
        let store = Store::open(&dir.0.join("t.db")).unwrap();
        (dir, store)
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                let p = std::env::temp_dir().join(format!(
                    "rt-store-{}-{}",
                    std::process::id(),
                    rand::random::<u64>()
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn audit(i: usize) -> Record {
        Record::Audit(AuditRecord {
            request_id: format!("res_{i}"),
            user_id: None,
            route_id: "tts.synthesize".into(),
            method: "POST".into(),
            path: "/x".into(),
            status: 200,
            upstream_status: Some(200),
            latency_ms: 1,
            created_at: now_rfc3339(),
        })
    }

    /// N5: a panic inside a transaction rolls it back and is that
    /// transaction's error; the database is not left locked, and a grant
    /// that would overflow a balance fails cleanly (nothing written).
    #[test]
    fn a_panic_inside_a_transaction_leaves_no_lock_behind() {
        use rust_decimal::Decimal;
        let (_d, store) = temp_db();
        let user = store.create_user("a@example.com", false).unwrap();
        let r: Result<()> = store.transaction(|tx| {
            tx.exec(
                "UPDATE users SET email = 'x@example.com' WHERE id = ?1",
                p![user],
            )?;
            panic!("boom");
        });
        assert!(r.unwrap_err().to_string().contains("boom"));
        assert_eq!(store.user(user).unwrap().unwrap().email, "a@example.com");
        store.grant_credit(user, Decimal::ONE, None).unwrap();
        assert!(store.grant_credit(user, Decimal::MAX, None).is_err());
        assert_eq!(store.balance(user).unwrap(), Decimal::ONE);
        assert_eq!(store.ledger(user).unwrap().len(), 1);
        // Every pooled connection still writes.
        for _ in 0..8 {
            store.grant_credit(user, Decimal::ONE, None).unwrap();
        }
        assert_eq!(store.balance(user).unwrap(), Decimal::from(9));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_commits_all_land() {
        let (_d, store) = temp_db();
        let mut tasks = Vec::new();
        for i in 0..200 {
            let s = store.clone();
            tasks.push(tokio::spawn(async move { s.commit(vec![audit(i)]).await }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(store.audit_rows().unwrap().len(), 200);
    }

    #[cfg(unix)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_segment_sync_fails_its_batch_and_commits_nothing() {
        use std::sync::Arc;
        let (dir, store) = temp_db();
        // A pipe cannot be fdatasynced (EINVAL): the sync fails.
        let (reader, _writer) = std::io::pipe().unwrap();
        let pipe = Arc::new(std::fs::File::from(std::os::fd::OwnedFd::from(reader)));
        let failed = store.commit(vec![audit(1), Record::SyncFile(pipe)]).await;
        assert!(failed.is_err(), "{failed:?}");
        assert!(store.audit_rows().unwrap().is_empty(), "nothing committed");
        // A file that syncs (twice in one batch: synced once) commits.
        let seg = Arc::new(std::fs::File::create(dir.0.join("seg")).unwrap());
        store
            .commit(vec![
                audit(2),
                Record::SyncFile(seg.clone()),
                Record::SyncFile(seg),
            ])
            .await
            .unwrap();
        assert_eq!(store.audit_rows().unwrap().len(), 1);
    }

    /// The stt job `j1` of `user`, first polled at 00:00:02, keeping the
    /// hold `hold` took.
    fn stt_job(user: i64, hold: Option<&str>) -> JobRecord {
        JobRecord {
            job_id: "j1".into(),
            kind: "stt".into(),
            upstream_id: "j1".into(),
            user_id: user,
            submit_route: "stt.submit".into(),
            status: "pending".into(),
            media_type: None,
            callback_uri: None,
            created_at: "2026-01-01T00:00:00.000Z".into(),
            follow_at: Some("2026-01-01T00:00:02.000Z".into()),
            key_id: None,
            hold: hold.map(str::to_owned),
        }
    }

    /// A job record takes its submit's hold (renamed, no instance), and a
    /// job record that fails to be written leaves its submit's hold owed:
    /// released, the job's own kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_keeps_its_submits_hold_and_a_failed_job_record_releases_it() {
        use rust_decimal::Decimal;
        let (_d, store) = temp_db();
        let user = store.create_user("a@example.com", false).unwrap();
        store
            .start_instance("i1", std::time::Duration::from_secs(60))
            .unwrap();
        let hold = |id: &str| Record::Hold {
            request_id: id.into(),
            user_id: user,
            amount: Decimal::ONE,
            key_id: None,
            check_balance: false,
        };
        store.commit(vec![hold("res_1")]).await.unwrap();
        assert_eq!(store.holds_of(user).unwrap()[0].1.as_deref(), Some("i1"));
        let job = |submit: &str| Record::JobCreate(stt_job(user, Some(submit)));
        store.commit(vec![job("res_1")]).await.unwrap();
        let kept = vec![(job_hold_id("stt", "j1"), None)];
        assert_eq!(store.holds_of(user).unwrap(), kept);
        // The same job again: refused by the database, its hold owed.
        store.commit(vec![hold("res_2")]).await.unwrap();
        assert!(store.commit(vec![job("res_2")]).await.is_err());
        for _ in 0..100 {
            if store.holds_of(user).unwrap().len() == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(store.holds_of(user).unwrap(), kept);
        assert_eq!(store.held(user).unwrap(), Decimal::ONE);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_poll_is_claimed_by_one_and_taken_over_after_its_lease() {
        let (_d, store) = temp_db();
        let user = store.create_user("a@example.com", false).unwrap();
        let job = stt_job(user, None);
        store.commit(vec![Record::JobCreate(job)]).await.unwrap();
        let (t1, t2, t3) = (
            "2026-01-01T00:00:01.000Z",
            "2026-01-01T00:00:03.000Z",
            "2026-01-01T00:10:00.000Z",
        );
        assert!(store.due_jobs(t1, 10).unwrap().is_empty(), "not yet due");
        assert!(!store.claim_follow("stt", "j1", t1, t3).unwrap());
        assert_eq!(store.due_jobs(t2, 10).unwrap().len(), 1);
        assert!(store.claim_follow("stt", "j1", t2, t3).unwrap());
        assert!(!store.claim_follow("stt", "j1", t2, t3).unwrap(), "leased");
        assert!(store.due_jobs(t2, 10).unwrap().is_empty());
        // The holder died: after the lease, another instance takes it over.
        let later = "2026-01-01T00:10:00.001Z";
        assert!(store
            .claim_follow("stt", "j1", later, "2026-01-01T00:20:00.000Z")
            .unwrap());
        assert_eq!(store.job("stt", "j1").unwrap().unwrap().follow_attempts, 2);
        store.release_follow("stt", "j1", Some(t3)).unwrap();
        assert!(store.due_jobs(t2, 10).unwrap().is_empty(), "rescheduled");
        assert_eq!(store.due_jobs(later, 10).unwrap().len(), 1);
        // A finished job is no longer followed.
        store
            .commit(vec![Record::JobUpdate(JobUpdate {
                kind: "stt".into(),
                job_id: "j1".into(),
                status: "completed".into(),
                media_type: None,
                result: Some("{}".into()),
                billed: false,
                updated_at: t2.into(),
            })])
            .await
            .unwrap();
        assert_eq!(
            store.job("stt", "j1").unwrap().unwrap().follow_next_at,
            None
        );
        assert!(!store.claim_follow("stt", "j1", later, t3).unwrap());
    }

    #[test]
    fn migrations_are_idempotent() {
        let (d, store) = temp_db();
        drop(store);
        let again = Store::open(&d.0.join("t.db")).unwrap();
        let id = again.create_user("a@example.com", false).unwrap();
        assert_eq!(again.user(id).unwrap().unwrap().email, "a@example.com");
    }
}
