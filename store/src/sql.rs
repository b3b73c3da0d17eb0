//! One body of SQL for two databases: SQLite (the embedded default) and
//! PostgreSQL (`GATEWAY_DATABASE_URL`).
//!
//! Repositories are written once, against [`Db`]: statements in SQLite's
//! syntax with numbered parameters (`?1`, `?2`, …), in the subset both
//! databases read alike (`ON CONFLICT … DO NOTHING/UPDATE`, `RETURNING`,
//! `COALESCE`, `CASE`). On PostgreSQL each statement is translated once per
//! connection (`?N` → `$N`) and kept prepared. The few statements that cannot
//! be common pick theirs by [`Db::dialect`].
//!
//! Values cross as four kinds ([`P`]: null, integer, text, bytes); the
//! PostgreSQL side converts each to the column's declared type (an integer
//! to `BIGINT`, `INTEGER` or `BOOLEAN`), and [`Row::get`] reads a column of
//! either database into the Rust type asked for. Flags are integers (0/1) in
//! both schemas, money and times are text, so the SQL is the same.

use std::str::FromStr;

use rust_decimal::Decimal;
use tokio_postgres::types::Type;

pub(crate) use super::params::p;
pub use super::params::P;
use super::pg::PgConn;
use super::{Result, StoreError};

/// Which database a [`Db`] speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// One result row of either database.
pub enum Row<'r> {
    Lite(&'r rusqlite::Row<'r>),
    Pg(&'r tokio_postgres::Row),
}

impl Row<'_> {
    /// Column `i` (from 0) as `T`.
    pub fn get<T: Col>(&self, i: usize) -> Result<T> {
        match self {
            Row::Lite(r) => T::lite(r, i).map_err(StoreError::driver),
            Row::Pg(r) => T::pg(r, i),
        }
    }

    /// Column `i`, decimal text, as a [`Decimal`].
    pub fn dec(&self, i: usize) -> Result<Decimal> {
        parse_dec(&self.get::<String>(i)?)
    }

    /// Column `i`, decimal text or null.
    pub fn opt_dec(&self, i: usize) -> Result<Option<Decimal>> {
        self.get::<Option<String>>(i)?
            .map(|s| parse_dec(&s))
            .transpose()
    }
}

pub(super) fn parse_dec(s: &str) -> Result<Decimal> {
    Decimal::from_str(s).map_err(|e| StoreError::caused(format!("stored decimal {s:?}"), e))
}

/// A Rust type a column of either database reads into.
pub trait Col: Sized {
    fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self>;
    fn pg(r: &tokio_postgres::Row, i: usize) -> Result<Self>;
}

/// The PostgreSQL side of a non-null column type: reads it as `Option`.
trait PgCol: Sized {
    fn pg_opt(r: &tokio_postgres::Row, i: usize) -> Result<Option<Self>>;
}

fn pg_err(e: tokio_postgres::Error) -> StoreError {
    StoreError::driver(e)
}

fn pg_int(r: &tokio_postgres::Row, i: usize) -> Result<Option<i64>> {
    let ty = r.columns()[i].type_().clone();
    match ty {
        Type::INT8 => r.try_get::<_, Option<i64>>(i).map_err(pg_err),
        Type::INT4 => Ok(r
            .try_get::<_, Option<i32>>(i)
            .map_err(pg_err)?
            .map(i64::from)),
        Type::INT2 => Ok(r
            .try_get::<_, Option<i16>>(i)
            .map_err(pg_err)?
            .map(i64::from)),
        Type::BOOL => Ok(r
            .try_get::<_, Option<bool>>(i)
            .map_err(pg_err)?
            .map(i64::from)),
        _ => Err(StoreError::msg(format!(
            "column {i}: {ty} read as an integer"
        ))),
    }
}

impl PgCol for i64 {
    fn pg_opt(r: &tokio_postgres::Row, i: usize) -> Result<Option<Self>> {
        pg_int(r, i)
    }
}
impl PgCol for u32 {
    fn pg_opt(r: &tokio_postgres::Row, i: usize) -> Result<Option<Self>> {
        pg_int(r, i)?
            .map(|v| u32::try_from(v).map_err(|e| StoreError::caused(format!("column {i}"), e)))
            .transpose()
    }
}
impl PgCol for u16 {
    fn pg_opt(r: &tokio_postgres::Row, i: usize) -> Result<Option<Self>> {
        pg_int(r, i)?
            .map(|v| u16::try_from(v).map_err(|e| StoreError::caused(format!("column {i}"), e)))
            .transpose()
    }
}
impl PgCol for bool {
    fn pg_opt(r: &tokio_postgres::Row, i: usize) -> Result<Option<Self>> {
        Ok(pg_int(r, i)?.map(|v| v != 0))
    }
}
impl PgCol for String {
    fn pg_opt(r: &tokio_postgres::Row, i: usize) -> Result<Option<Self>> {
        r.try_get::<_, Option<String>>(i).map_err(pg_err)
    }
}
impl PgCol for Vec<u8> {
    fn pg_opt(r: &tokio_postgres::Row, i: usize) -> Result<Option<Self>> {
        r.try_get::<_, Option<Vec<u8>>>(i).map_err(pg_err)
    }
}

macro_rules! col {
    ($($t:ty),*) => {$(
        impl Col for $t {
            fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
                r.get(i)
            }
            fn pg(r: &tokio_postgres::Row, i: usize) -> Result<Self> {
                <$t as PgCol>::pg_opt(r, i)?
                    .ok_or_else(|| StoreError::msg(format!("column {i} is null")))
            }
        }
        impl Col for Option<$t> {
            fn lite(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
                r.get(i)
            }
            fn pg(r: &tokio_postgres::Row, i: usize) -> Result<Self> {
                <$t as PgCol>::pg_opt(r, i)
            }
        }
    )*};
}
col!(i64, u32, u16, bool, String, Vec<u8>);

/// A connection of either database, borrowed for a few statements.
pub struct Db<'c> {
    inner: Inner<'c>,
}

enum Inner<'c> {
    Lite(&'c rusqlite::Connection),
    Pg(&'c mut PgConn),
}

impl PgConn {
    /// This connection as a [`Db`].
    pub fn db(&mut self) -> Db<'_> {
        Db::pg(self)
    }
}

impl<'c> Db<'c> {
    pub(super) fn lite(conn: &'c rusqlite::Connection) -> Db<'c> {
        Db {
            inner: Inner::Lite(conn),
        }
    }

    pub(super) fn pg(conn: &'c mut PgConn) -> Db<'c> {
        Db {
            inner: Inner::Pg(conn),
        }
    }

    pub fn dialect(&self) -> Dialect {
        match self.inner {
            Inner::Lite(_) => Dialect::Sqlite,
            Inner::Pg(_) => Dialect::Postgres,
        }
    }

    /// Runs one statement; returns how many rows it changed.
    pub fn exec(&mut self, sql: &str, params: &[P<'_>]) -> Result<u64> {
        match &mut self.inner {
            Inner::Lite(c) => Ok(c
                .prepare_cached(sql)
                .map_err(StoreError::driver)?
                .execute(rusqlite::params_from_iter(params.iter()))
                .map_err(StoreError::driver)? as u64),
            Inner::Pg(c) => c.execute(sql, params),
        }
    }

    /// Runs a statement whose answer is not needed: on PostgreSQL it is
    /// sent with the next statement, in one round trip (pipelined: see
    /// `pg`'s docs; its error is the next statement's); on SQLite now.
    /// Inside [`Db::transaction`] only (its `COMMIT` sends what is left).
    pub fn defer(&mut self, sql: &str, params: &[P<'_>]) -> Result<()> {
        match &mut self.inner {
            Inner::Lite(_) => self.exec(sql, params).map(drop),
            Inner::Pg(c) => c.defer(sql, params),
        }
    }

    /// The first row of a query, mapped by `f`.
    pub fn row<T>(
        &mut self,
        sql: &str,
        params: &[P<'_>],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        match &mut self.inner {
            Inner::Lite(c) => {
                let mut stmt = c.prepare_cached(sql).map_err(StoreError::driver)?;
                let mut rows = stmt
                    .query(rusqlite::params_from_iter(params.iter()))
                    .map_err(StoreError::driver)?;
                match rows.next().map_err(StoreError::driver)? {
                    Some(r) => f(&Row::Lite(r)).map(Some),
                    None => Ok(None),
                }
            }
            Inner::Pg(c) => match c.query(sql, params)?.first() {
                Some(r) => f(&Row::Pg(r)).map(Some),
                None => Ok(None),
            },
        }
    }

    /// Every row of a query, mapped by `f`.
    pub fn rows<T>(
        &mut self,
        sql: &str,
        params: &[P<'_>],
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        match &mut self.inner {
            Inner::Lite(c) => {
                let mut stmt = c.prepare_cached(sql).map_err(StoreError::driver)?;
                let mut rows = stmt
                    .query(rusqlite::params_from_iter(params.iter()))
                    .map_err(StoreError::driver)?;
                let mut out = Vec::new();
                while let Some(r) = rows.next().map_err(StoreError::driver)? {
                    out.push(f(&Row::Lite(r))?);
                }
                Ok(out)
            }
            Inner::Pg(c) => c
                .query(sql, params)?
                .iter()
                .map(|r| f(&Row::Pg(r)))
                .collect(),
        }
    }

    /// Whether a query has a row.
    pub fn exists(&mut self, sql: &str, params: &[P<'_>]) -> Result<bool> {
        Ok(self.row(sql, params, |_| Ok(()))?.is_some())
    }

    /// Runs statements without parameters (`BEGIN`, DDL).
    pub fn batch(&mut self, sql: &str) -> Result<()> {
        match &mut self.inner {
            Inner::Lite(c) => Ok(c.execute_batch(sql).map_err(StoreError::driver)?),
            Inner::Pg(c) => c.batch(sql),
        }
    }

    /// Runs `f` in a write transaction: committed when it returns `Ok`,
    /// rolled back otherwise. SQLite takes the write lock at the start
    /// (`BEGIN IMMEDIATE`); PostgreSQL runs at READ COMMITTED, so what must
    /// not race locks its rows (see `balances::Balances::balance`) or is one
    /// conditional statement.
    pub fn transaction<T>(&mut self, f: impl FnOnce(&mut Db<'_>) -> Result<T>) -> Result<T> {
        // PostgreSQL's `BEGIN` goes with the transaction's first statement.
        match &mut self.inner {
            Inner::Lite(c) => c
                .execute_batch("BEGIN IMMEDIATE")
                .map_err(StoreError::driver)?,
            Inner::Pg(c) => c.defer_batch("BEGIN"),
        }
        // A panic inside the transaction must not leave it open on this
        // (pooled or writer) connection, locking the database for everyone:
        // it is rolled back and becomes this transaction's error.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self)))
            .unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(panic = %what, "a panic inside a database transaction; rolled back");
                Err(super::StoreError::msg(format!(
                    "a panic inside the transaction: {what}"
                )))
            });
        match outcome {
            Ok(v) => {
                // A connection lost with the COMMIT in flight leaves the
                // outcome unknown: never to be retried as if nothing was written.
                self.batch("COMMIT").map_err(|e| match e.failure {
                    super::Failure::Unavailable => e.with_failure(super::Failure::InDoubt),
                    _ => e,
                })?;
                Ok(v)
            }
            Err(e) => {
                if let Err(rollback) = self.batch("ROLLBACK") {
                    tracing::warn!(error = %rollback, "rollback failed");
                }
                Err(e)
            }
        }
    }
}
