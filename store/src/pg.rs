//! PostgreSQL (`GATEWAY_DATABASE_URL=postgres://...`): connections and the
//! pool's manager (the schema's migrations: `schema`).
//!
//! The driver is `tokio-postgres`. Its connections do their I/O on one
//! small runtime of their own ([`io_runtime`], thread `postgres-io`), so the
//! store's repositories, written once for both databases as plain functions
//! ([`super::sql`]), call it the same way from anywhere: the blocking pool,
//! the record writer's thread, the CLI, or a test's async body. A call
//! waits for its statement with `futures_executor::block_on`, which, unlike
//! a runtime's `block_on`, may run inside another runtime. Connections are
//! pooled by `r2d2` like SQLite's; each keeps its statements prepared.
//!
//! Pipelining: a statement whose answer nobody reads (an insert of the
//! record writer, a transaction's `BEGIN`) may be deferred
//! ([`PgConn::defer`]): it is sent with the connection's next statement,
//! all in one round trip, in order ([`in_order`]). A deferred statement's
//! error is the error of that next call (the transaction is aborted from
//! it on, as if it had failed at once).
//!
//! Every connection (the pool's, the record writer's, their reconnections,
//! the schema helpers') is made by [`Target::connect`], TLS included: see
//! [`pg_tls`](super::pg_tls) for `sslmode` and `sslrootcert`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::Poll;

use tokio_postgres::types::ToSql;
use tokio_postgres::Statement;

use super::params::{to_postgres, OwnedP, P};
use super::pg_tls::Target;
use super::{Failure, Result, StoreError};
/// The runtime doing every PostgreSQL connection's I/O (one thread).
fn io_runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("postgres-io")
            .enable_all()
            .build()
            .expect("postgres I/O runtime")
    })
}

/// Parameters as the driver takes them.
fn refs<'a>(params: &'a [P<'a>]) -> Vec<&'a (dyn tokio_postgres::types::ToSql + Sync)> {
    params
        .iter()
        .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
        .collect()
}

fn err(e: tokio_postgres::Error) -> StoreError {
    let failure = err_failure(&e);
    StoreError::driver(e).with_failure(failure)
}

fn err_failure(e: &tokio_postgres::Error) -> Failure {
    if unreachable(e) {
        Failure::Unavailable
    } else {
        Failure::Other
    }
}

/// Whether a driver error says the server cannot be reached now (rather
/// than that a statement failed): the connection is closed, broke, timed
/// out or was refused, or the server is shutting down, starting up or in
/// recovery (SQLSTATE class 08, 57P01–57P03).
fn unreachable(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        let c = code.code();
        return c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03");
    }
    let text = e.to_string();
    text.starts_with("error connecting")
        || text.starts_with("error communicating")
        || text.starts_with("timeout waiting")
}

/// How long a connection attempt may take when the URL sets no
/// `connect_timeout`: an unreachable server fails requests quickly (503)
/// instead of holding them.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// One PostgreSQL connection and its prepared statements.
pub struct PgConn {
    client: tokio_postgres::Client,
    statements: HashMap<String, Statement>,
    config: std::sync::Arc<Target>,
    sync_full: bool,
    /// Statements not sent yet: they go with the next one ([`PgConn::defer`]).
    deferred: Vec<Deferred>,
}

/// A statement whose sending waits for the connection's next one.
enum Deferred {
    Exec(Statement, Vec<OwnedP>),
    Batch(&'static str),
}

/// A statement's answer, boxed so that different statements queue together.
type Sent<'a> = Pin<Box<dyn Future<Output = std::result::Result<u64, tokio_postgres::Error>> + 'a>>;

impl PgConn {
    /// Connects; `sync_full: false` turns off waiting for the commit's
    /// flush (`synchronous_commit = off`), as `GATEWAY_DB_SYNC=normal` does
    /// for SQLite.
    pub fn connect(config: &Target, sync_full: bool) -> Result<PgConn> {
        let mut conn = PgConn {
            client: open(config)?,
            statements: HashMap::new(),
            config: std::sync::Arc::new(config.clone()),
            sync_full,
            deferred: Vec::new(),
        };
        if !sync_full {
            conn.batch("SET synchronous_commit = off")?;
        }
        Ok(conn)
    }

    /// Whether the connection is gone (the server closed it, restarted, or
    /// the network broke): it must be [`reopen`](Self::reopen)ed.
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Replaces a closed connection by a new one to the same server, with
    /// the same settings (prepared statements are prepared again).
    pub fn reopen(&mut self) -> Result<()> {
        let config = self.config.clone();
        *self = PgConn::connect(&config, self.sync_full)?;
        tracing::info!("postgres connection reopened");
        Ok(())
    }

    fn statement(&mut self, sql: &str) -> Result<Statement> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let translated = to_postgres(sql);
        let s = futures_executor::block_on(self.client.prepare(&translated)).map_err(err)?;
        self.statements.insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    /// Queues `sql` to be sent with the next statement of this connection
    /// (one round trip for both; see the module docs). Only inside a
    /// transaction, for a statement whose answer is not needed.
    pub(super) fn defer(&mut self, sql: &str, params: &[P<'_>]) -> Result<()> {
        let st = self.statement(sql)?;
        let owned = params.iter().map(OwnedP::from).collect();
        self.deferred.push(Deferred::Exec(st, owned));
        Ok(())
    }

    /// Queues a statement without parameters (`BEGIN`) the same way.
    pub(super) fn defer_batch(&mut self, sql: &'static str) {
        self.deferred.push(Deferred::Batch(sql));
    }

    pub(super) fn execute(&mut self, sql: &str, params: &[P<'_>]) -> Result<u64> {
        let st = self.statement(sql)?;
        let deferred = std::mem::take(&mut self.deferred);
        in_order(
            &self.client,
            &deferred,
            self.client.execute(&st, &refs(params)),
        )
    }

    pub(super) fn query(
        &mut self,
        sql: &str,
        params: &[P<'_>],
    ) -> Result<Vec<tokio_postgres::Row>> {
        let st = self.statement(sql)?;
        let deferred = std::mem::take(&mut self.deferred);
        in_order(
            &self.client,
            &deferred,
            self.client.query(&st, &refs(params)),
        )
    }

    pub(super) fn batch(&mut self, sql: &str) -> Result<()> {
        let deferred = std::mem::take(&mut self.deferred);
        in_order(&self.client, &deferred, self.client.batch_execute(sql))
    }
}

/// Sends the `deferred` statements, then `last`'s, in that order without
/// waiting between them (tokio-postgres sends a request when its future is
/// first polled, and they are first polled in order here), and waits for
/// every answer: one round trip. The first error wins: a deferred
/// statement's, else `last`'s.
fn in_order<T>(
    client: &tokio_postgres::Client,
    deferred: &[Deferred],
    last: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>,
) -> Result<T> {
    if deferred.is_empty() {
        return futures_executor::block_on(last).map_err(err);
    }
    let params: Vec<Vec<&(dyn ToSql + Sync)>> = deferred
        .iter()
        .map(|d| match d {
            Deferred::Exec(_, ps) => ps.iter().map(|p| p as &(dyn ToSql + Sync)).collect(),
            Deferred::Batch(_) => Vec::new(),
        })
        .collect();
    let mut sent: Vec<Sent<'_>> = deferred
        .iter()
        .zip(&params)
        .map(|(d, ps)| match d {
            Deferred::Exec(st, _) => Box::pin(client.execute(st, ps)) as Sent<'_>,
            Deferred::Batch(sql) => {
                Box::pin(async move { client.batch_execute(sql).await.map(|()| 0) })
            }
        })
        .collect();
    let mut answers: Vec<Option<std::result::Result<u64, tokio_postgres::Error>>> =
        std::iter::repeat_with(|| None).take(sent.len()).collect();
    let mut last = std::pin::pin!(last);
    let mut last_answer = None;
    futures_executor::block_on(std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (f, a) in sent.iter_mut().zip(answers.iter_mut()) {
            if a.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(r) => *a = Some(r),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if last_answer.is_none() {
            match last.as_mut().poll(cx) {
                Poll::Ready(r) => last_answer = Some(r),
                Poll::Pending => waiting = true,
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }));
    for a in answers.into_iter().flatten() {
        a.map_err(err)?;
    }
    last_answer.expect("polled to its end").map_err(err)
}

/// A new client, its connection driven on [`io_runtime`]. A failure names
/// `GATEWAY_DATABASE_URL` and its `sslmode` (never its password); a
/// refused server certificate says so.
fn open(target: &Target) -> Result<tokio_postgres::Client> {
    let mut target = target.clone();
    if target.config.get_connect_timeout().is_none() {
        target.config.connect_timeout(CONNECT_TIMEOUT);
    }
    let mode = target.mode;
    futures_executor::block_on(io_runtime().spawn(async move { target.connect().await }))
        .map_err(|e| StoreError::caused("postgres connect", e))?
        .map_err(|e| {
            let context = match gateway_base::tls::refused_certificate(&e) {
                Some(why) => format!(
                    "GATEWAY_DATABASE_URL (sslmode={mode}): the server's certificate was refused ({why})"
                ),
                None => format!("GATEWAY_DATABASE_URL (sslmode={mode}): connect"),
            };
            let failure = err_failure(&e);
            StoreError::caused(context, e).with_failure(failure)
        })
}

/// `r2d2`'s manager of PostgreSQL connections.
pub struct PgManager {
    pub config: Target,
    pub sync_full: bool,
}

impl r2d2::ManageConnection for PgManager {
    type Connection = PgConn;
    type Error = StoreError;

    fn connect(&self) -> Result<PgConn> {
        PgConn::connect(&self.config, self.sync_full)
    }

    /// Checked on every checkout: a connection the server closed (a
    /// restart) is dropped here and replaced, never handed out.
    fn is_valid(&self, conn: &mut PgConn) -> Result<()> {
        if conn.is_closed() {
            return Err(StoreError::msg("connection closed").with_failure(Failure::Unavailable));
        }
        conn.batch("")
    }

    fn has_broken(&self, conn: &mut PgConn) -> bool {
        conn.client.is_closed()
    }
}

/// Parses a `postgres://` URL: what `tokio-postgres` reads, and the TLS
/// settings ([`Target::parse`]).
pub fn parse_url(url: &str) -> Result<Target> {
    Target::parse(url)
}

/// A fresh schema of the PostgreSQL database at `base_url` (created now),
/// and the URL whose connections use it (`search_path`): tests give each
/// gateway they start a database of its own this way.
pub fn create_schema(base_url: &str, schema: &str) -> Result<String> {
    check_schema_name(schema)?;
    let mut conn = PgConn::connect(&parse_url(base_url)?, true)?;
    conn.batch(&format!("CREATE SCHEMA {schema}"))?;
    let sep = if base_url.contains('?') { '&' } else { '?' };
    Ok(format!(
        "{base_url}{sep}options=-c%20search_path%3D{schema}"
    ))
}

/// Drops a schema made by [`create_schema`] and everything in it; gives up
/// after two seconds if a connection still holds a lock in it.
pub fn drop_schema(base_url: &str, schema: &str) -> Result<()> {
    check_schema_name(schema)?;
    let mut conn = PgConn::connect(&parse_url(base_url)?, true)?;
    conn.batch(&format!(
        "SET lock_timeout = '2s'; DROP SCHEMA IF EXISTS {schema} CASCADE"
    ))
}

fn check_schema_name(schema: &str) -> Result<()> {
    let ok = !schema.is_empty()
        && schema.len() < 60
        && schema.starts_with(|c: char| c.is_ascii_lowercase())
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::msg(format!("schema name {schema:?}")))
    }
}
