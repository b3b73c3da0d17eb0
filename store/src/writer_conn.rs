//! The record writer's own connection ([`super::writer`]): SQLite's or
//! PostgreSQL's, reopened when the server closed it, and its commits
//! without the flush.

use super::records::{Committed, Record};
use super::sql::Db;
use super::writes::write_in;
use super::{Result, StoreError};

/// The writer's own connection.
pub(super) enum Conn {
    Sqlite(rusqlite::Connection),
    Postgres(super::pg::PgConn),
}

impl Conn {
    pub(super) fn db(&mut self) -> Db<'_> {
        match self {
            Conn::Sqlite(c) => Db::lite(c),
            Conn::Postgres(c) => c.db(),
        }
    }

    /// Reopens a PostgreSQL connection the server closed (a restart, a
    /// failover); fails, as unavailable, while the server is down.
    pub(super) fn revive(&mut self) -> Result<()> {
        match self {
            Conn::Postgres(c) if c.is_closed() => c.reopen(),
            _ => Ok(()),
        }
    }

    pub(super) fn is_closed(&self) -> bool {
        matches!(self, Conn::Postgres(c) if c.is_closed())
    }

    /// Writes `group` in one transaction without flushing the commit to
    /// disk: SQLite's `synchronous` is NORMAL for that one transaction (a
    /// later flushed commit flushes its WAL frames too), PostgreSQL's
    /// `synchronous_commit` is off for it. The database itself stays
    /// consistent either way.
    pub(super) fn write_unflushed(
        &mut self,
        instance: Option<&str>,
        group: &[&[Record]],
    ) -> Result<Vec<Committed>> {
        match self {
            Conn::Sqlite(c) => {
                c.pragma_update(None, "synchronous", "NORMAL")
                    .map_err(StoreError::driver)?;
                let written = Db::lite(c).transaction(|tx| write_in(tx, instance, group));
                c.pragma_update(None, "synchronous", "FULL")
                    .map_err(StoreError::driver)?;
                written
            }
            Conn::Postgres(c) => {
                let mut db = c.db();
                db.transaction(|tx| {
                    tx.batch("SET LOCAL synchronous_commit TO OFF")?;
                    write_in(tx, instance, group)
                })
            }
        }
    }
}
