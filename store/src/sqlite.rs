//! SQLite, the embedded default: opening the file (owner-only, WAL) and
//! running the schema's migrations ([`super::schema`]), counted by
//! `PRAGMA user_version`.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;

use super::schema::{render, MIGRATIONS};
use super::sql::Dialect;
use super::{create_private_dir, Result, StoreError};

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
    open_and_migrate_to(path, MIGRATIONS.len())
}

/// [`open_and_migrate`] running the first `n` migrations only.
pub(super) fn open_and_migrate_to(path: &Path, n: usize) -> Result<Connection> {
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
    for m in MIGRATIONS.iter().take(n).skip(version) {
        tx.execute_batch(&render(m, Dialect::Sqlite))
            .map_err(StoreError::driver)?;
    }
    if version < n {
        tx.pragma_update(None, "user_version", n as i64)
            .map_err(StoreError::driver)?;
    }
    tx.commit().map_err(StoreError::driver)?;
    Ok(conn)
}
