//! Group commit: the writer threads that write the records that must not be lost.
//!
//! Requests hand their records ([`Record`], in [`super::records`]) to
//! [`RecordWriter::commit`] and wait. A writer thread takes whatever has
//! queued up (up to [`MAX_GROUP`] batches; under load it waits up to
//! [`GATHER`] for more), writes it in one `BEGIN IMMEDIATE` transaction,
//! commits, then wakes every waiting request. If the group fails, each
//! batch is retried alone, so one bad batch cannot fail its neighbours.
//! Under `GATEWAY_DB_SYNC=full` a group is acknowledged once it is on disk:
//! SQLite commits without an fsync under its write lock and
//! [`super::wal_sync`]'s thread flushes the log (one fsync for every group
//! committed meanwhile) while the writer goes on with the next group;
//! PostgreSQL's commit flushes. What of a group needs no flush (holds, a
//! stream's audit record before its first byte) is committed first, in a
//! transaction of its own, and acknowledged at once: it never waits for
//! another request's fsync. SQLite has one writer; PostgreSQL
//! [`PG_WRITERS`], each on its own connection and queue, so that several
//! groups are in flight at once (a user's money always on one of them).
//!
//! Batching adapts to load: a commit alone in flight that needs no fsync,
//! while no other request is in flight, is written by its caller directly
//! ([`RecordWriter::commit`]); with other requests in flight it goes to the
//! writer, whose groups share one transaction (writing each inline costs
//! a transaction per request and halved c=64 under `GATEWAY_DB_SYNC=normal`,
//! issue 29); a group of
//! credit holds alone is committed without the fsync ([`needs_flush`]);
//! packed objects of the group are fdatasynced once, before the commit.
//!
//! Money rules enforced here, inside the transaction:
//! * a usage record and the debit of its charge from the user's credit
//!   balance are written together or not at all (each user's balance is
//!   read once and written once per group: [`Balances`]);
//! * a usage record with a `once_key` (a job's completion, a voice's first
//!   build) is written at most once: a second one with the same key is
//!   skipped, with no debit.

use std::sync::mpsc;

use rust_decimal::Decimal;

use super::records::*;
use super::sql::{p, Db};
pub(super) use super::writer_conn::Conn;
use super::writes::write_in;
use super::{Result, StoreError};

struct Batch {
    records: Vec<Record>,
    /// Must be on disk before it is acknowledged (see [`needs_flush`]).
    flush: bool,
    done: tokio::sync::oneshot::Sender<Result<Committed>>,
}

/// Handle to the writer thread. Cloning shares the thread.
#[derive(Clone)]
pub struct RecordWriter {
    /// Each writer thread's queue ([`writer_for`] picks one).
    tx: Vec<mpsc::Sender<Batch>>,
    shared: std::sync::Arc<Shared>,
}

/// What the writer thread and the callers share.
struct Shared {
    /// The one write connection: the writer thread's, lent to a caller
    /// that commits alone (see [`RecordWriter::commit`]).
    conn: std::sync::Mutex<Conn>,
    /// Commits asked for and not yet answered, inline or queued.
    in_flight: std::sync::atomic::AtomicUsize,
    sync_full: bool,
    /// Credit holds (by request id) whose end could not be written: the
    /// hold or release of a batch that failed, or a release that failed
    /// outside the writer ([`RecordWriter::owe_release`]). Their requests
    /// ended with an error, so each hold is deleted as soon as the
    /// database answers again ([`release_owed`]); until then it counts.
    owed: std::sync::Mutex<Vec<String>>,
    /// This instance's id, named by the holds it takes (set once at start,
    /// `super::instances`; `None` for a store that serves no requests).
    instance: std::sync::OnceLock<String>,
    /// Told, after each commit, every user a usage record of it charged
    /// (set once at start: spend alerts, [`RecordWriter::on_charge`]).
    on_charge: std::sync::OnceLock<ChargeListener>,
    /// SQLite under `sync_full`: the thread that flushes the log after a
    /// commit, before it is acknowledged (`None`: PostgreSQL, whose commit
    /// flushes; SQLite under NORMAL; or SQLite whose connection is FULL).
    wal: Option<super::wal_sync::WalSync>,
    /// The writer the next batch without money goes to ([`writer_for`]).
    next: std::sync::atomic::AtomicUsize,
}

/// What the writer tells of a committed charge: the user charged. Called
/// on the writer's thread: it must not block.
pub type ChargeListener = std::sync::Arc<dyn Fn(i64) + Send + Sync>;

impl Shared {
    fn instance(&self) -> Option<&str> {
        self.instance.get().map(String::as_str)
    }
}

/// Counts a commit in flight while it lives.
struct InFlight<'a>(&'a Shared);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Most batches folded into one transaction.
pub const MAX_GROUP: usize = 512;

impl RecordWriter {
    /// `sync_full`: the database is flushed at each commit
    /// (`GATEWAY_DB_SYNC=full`); groups of holds alone are committed
    /// without the flush even then (see [`needs_flush`]).
    pub(super) fn start(conn: Conn, sync_full: bool) -> RecordWriter {
        RecordWriter::start_many(vec![conn], sync_full)
    }

    /// A writer thread per connection of `conns` (the first is the one
    /// lent to a lone caller, see [`RecordWriter::commit`]), each with its
    /// queue ([`writer_for`]): while one group waits for its commit, others
    /// are written on the other connections (PostgreSQL, [`PG_WRITERS`]).
    pub(super) fn start_many(conns: Vec<Conn>, sync_full: bool) -> RecordWriter {
        let mut conns = conns.into_iter();
        let first = conns.next().expect("a writer needs a connection");
        let wal = match &first {
            Conn::Sqlite(c) if sync_full => wal_sync_of(c),
            _ => None,
        };
        let shared = std::sync::Arc::new(Shared {
            conn: std::sync::Mutex::new(first),
            in_flight: Default::default(),
            sync_full,
            owed: Default::default(),
            instance: Default::default(),
            on_charge: Default::default(),
            wal,
            next: Default::default(),
        });
        let mut tx = Vec::new();
        let mut spawn = |conn: Option<Conn>| {
            let (sender, rx) = mpsc::channel::<Batch>();
            tx.push(sender);
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("record-writer".into())
                .spawn(move || {
                    let own = conn.map(std::sync::Mutex::new);
                    writer_loop(&shared, &rx, own.as_ref().unwrap_or(&shared.conn))
                })
                .expect("spawn record writer");
        };
        spawn(None);
        conns.for_each(|c| spawn(Some(c)));
        RecordWriter { tx, shared }
    }

    /// Names `id` as the instance taking the holds written from now on
    /// (once; a second call is ignored).
    pub(super) fn set_instance(&self, id: &str) {
        let _ = self.shared.instance.set(id.to_owned());
    }

    /// Tells `f` of every user charged by a commit, once it is committed
    /// (once; a second call is ignored).
    pub fn on_charge(&self, f: ChargeListener) {
        let _ = self.shared.on_charge.set(f);
    }

    /// Owes the release of the hold of `request_id`, whose delete failed
    /// (the database was unreachable): the writer deletes it as soon as the
    /// database answers again.
    pub fn owe_release(&self, request_id: String) {
        lock(&self.shared.owed).push(request_id);
    }

    /// Whether the release of the hold of `request_id` is owed (see
    /// [`Shared::owed`]): a commit or delete of it failed and the database
    /// has not answered since.
    pub fn owes_release(&self, request_id: &str) -> bool {
        lock(&self.shared.owed).iter().any(|id| id == request_id)
    }

    /// Queues `records` for the next group commit and waits until durable.
    pub async fn commit(&self, records: Vec<Record>) -> Result<Committed> {
        self.queue(records, true).await
    }

    /// Queues `records` for the next group commit and waits until
    /// committed, without asking for the flush to disk: for records that a
    /// later flushed commit of the same request makes durable (a stream's
    /// audit record, before its first byte; its settlement, at its end,
    /// flushes both).
    pub async fn commit_unflushed(&self, records: Vec<Record>) -> Result<Committed> {
        self.queue(records, false).await
    }

    /// Batching adapts to load: a commit that is the only one in flight,
    /// of the only request in flight ([`gateway_base::watchdog::requests_in_flight`]),
    /// on SQLite, and that will not be flushed to disk
    /// (`GATEWAY_DB_SYNC=normal`, or a batch that needs no flush) is
    /// written by the caller itself, on its own thread, instead of handing
    /// it to the writer thread and back (two thread switches, a measured
    /// part of a lone request's latency). It holds the write connection for
    /// one short transaction without I/O waits (no fsync); under load,
    /// batches queue for the group commit as before.
    async fn queue(&self, records: Vec<Record>, flush: bool) -> Result<Committed> {
        use std::sync::atomic::Ordering;
        if records.is_empty() {
            return Ok(Committed::default());
        }
        let (done, wait) = tokio::sync::oneshot::channel();
        let batch = Batch {
            records,
            flush,
            done,
        };
        let shared = &*self.shared;
        let first = shared.in_flight.fetch_add(1, Ordering::AcqRel) == 0;
        let _in_flight = InFlight(shared);
        // Alone: no other commit in flight, and no other request in flight
        // that will commit soon. With one runtime thread every commit finds
        // no other in flight (each runs to its end before the next task),
        // so the requests in flight are what tells c=1 from c=64.
        let alone = first && gateway_base::watchdog::requests_in_flight() <= 1;
        if alone && !(shared.sync_full && needs_flush(&batch)) {
            if let Ok(mut conn) = shared.conn.try_lock() {
                if matches!(*conn, Conn::Sqlite(_)) {
                    let started = std::time::Instant::now();
                    let written = commit_group(&mut conn, shared, std::slice::from_ref(&batch));
                    drop(conn);
                    gateway_base::telemetry::record_commit(started.elapsed());
                    return match written {
                        Ok(mut results) => {
                            let r = results.pop().unwrap_or_default();
                            count_charges(&batch.records, &r);
                            Ok(r)
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "commit failed");
                            owe_holds(shared, &batch);
                            Err(e)
                        }
                    };
                }
            }
        }
        self.tx[writer_for(&batch.records, self.tx.len(), &shared.next)]
            .send(batch)
            .map_err(|_| StoreError::msg("record writer stopped"))?;
        gateway_base::telemetry::record_queue(1.0);
        wait.await
            .map_err(|_| StoreError::msg("record writer stopped"))?
    }
}

/// Under load (the previous group held more than one batch), how long the
/// writer waits for more batches before committing: a bigger group costs
/// the same one fsync. Alone (one request at a time) it never waits.
pub const GATHER: std::time::Duration = std::time::Duration::from_micros(200);

/// How often an idle writer retries the holds it owes ([`Shared::owed`]).
const OWED_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How many writers (connections) a PostgreSQL store commits with: groups
/// of different requests in flight at once, each waiting for its own
/// commit. A user's holds and charges go to one writer ([`writer_for`]);
/// every writer of a balance or its holds locks the user's balance row
/// first, in the order of user ids ([`Balances::lock_in_order`]), so two
/// groups that share users wait for each other and never deadlock. SQLite
/// has one: it writes one transaction at a time anyway.
pub const PG_WRITERS: usize = 4;

/// Which writer's queue takes a batch: a batch that holds or charges goes
/// to its user's writer, so one user's money is written one group at a
/// time, in groups as big as one writer's, and the user's balance row is
/// not fought over; the others go to each writer in turn.
fn writer_for(records: &[Record], writers: usize, next: &std::sync::atomic::AtomicUsize) -> usize {
    if writers <= 1 {
        return 0;
    }
    let user = records.iter().find_map(|r| match r {
        Record::Hold { user_id, .. } => Some(*user_id),
        Record::Usage(u) if !u.charged.is_zero() => u.user_id,
        _ => None,
    });
    match user {
        Some(u) => u.rem_euclid(writers as i64) as usize,
        None => next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % writers,
    }
}

/// A writer thread: takes a group from its queue `rx` and commits it on
/// `conn`, until every sender is gone.
fn writer_loop(shared: &Shared, rx: &mpsc::Receiver<Batch>, conn: &std::sync::Mutex<Conn>) {
    let mut last_group = 1;
    loop {
        let Some(group) = gather(shared, rx, conn, &mut last_group) else {
            break;
        };
        gateway_base::telemetry::record_queue(-(group.len() as f64));
        let group = sync_files(group);
        let mut conn = lock(conn);
        release_owed(shared, &mut conn);
        // What needs no flush is committed first, on its own, and answered
        // at once: a hold (its request calls the provider meanwhile) or a
        // stream's audit record (before its first byte) waits for neither
        // the group's other writes nor another request's fsync. Under
        // either mode: without the split a hold waits for the settlements
        // beside it (measured: chat c=64 under `normal` 22 % below `full`).
        let (quick, flushed): (Vec<Batch>, Vec<Batch>) =
            group.into_iter().partition(|b| !needs_flush(b));
        for group in [quick, flushed] {
            if group.is_empty() {
                continue;
            }
            let started = std::time::Instant::now();
            let written = commit_group(&mut conn, shared, &group);
            gateway_base::telemetry::record_commit(started.elapsed());
            match (written, &shared.wal) {
                (Ok(results), Some(wal)) if group.iter().any(needs_flush) => {
                    wal.after_flush(Box::new(move |flushed| {
                        acknowledge(group, results, flushed)
                    }))
                }
                (written, _) => answer(shared, &mut conn, group, written),
            }
        }
    }
}

/// A SQLite writer's log flusher ([`super::wal_sync`]); without one, the
/// connection flushes in its commits (`synchronous=FULL`).
fn wal_sync_of(c: &rusqlite::Connection) -> Option<super::wal_sync::WalSync> {
    let wal = c.path().and_then(super::wal_sync::WalSync::start);
    if wal.is_none() {
        if let Err(e) = c.pragma_update(None, "synchronous", "FULL") {
            tracing::error!(error = %e, "setting synchronous=FULL");
        }
    }
    wal
}

/// Tells a committed group's batches, once the log is on disk: committed,
/// or in doubt when the flush failed (committed, perhaps not durable).
fn acknowledge(group: Vec<Batch>, results: Vec<Committed>, flushed: std::io::Result<()>) {
    match flushed {
        Ok(()) => {
            for (b, r) in group.into_iter().zip(results) {
                count_charges(&b.records, &r);
                let _ = b.done.send(Ok(r));
            }
        }
        Err(e) => {
            let e = StoreError::caused("flushing the write-ahead log", e)
                .with_failure(super::Failure::InDoubt);
            for b in group {
                let _ = b.done.send(Err(e.clone()));
            }
        }
    }
}

/// The next group from the queue (waiting for work, retrying owed
/// releases meanwhile); `None` when every sender is gone.
fn gather(
    shared: &Shared,
    rx: &mpsc::Receiver<Batch>,
    conn: &std::sync::Mutex<Conn>,
    last_group: &mut usize,
) -> Option<Vec<Batch>> {
    loop {
        let first = match rx.recv_timeout(OWED_RETRY) {
            Ok(b) => b,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // The connection is taken only when something is owed: an
                // idle writer holding it would push requests' inline
                // commits onto the queue.
                if !lock(&shared.owed).is_empty() {
                    release_owed(shared, &mut lock(conn));
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return None,
        };
        let mut group = vec![first];
        let deadline = std::time::Instant::now() + GATHER;
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(b) => group.push(b),
                Err(mpsc::TryRecvError::Empty) if *last_group > 1 => {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    match rx.recv_timeout(left) {
                        Ok(b) => group.push(b),
                        Err(_) => break,
                    }
                }
                Err(_) => break,
            }
        }
        *last_group = group.len();
        return Some(group);
    }
}

/// Tells each batch of a written group its outcome; a failed group of
/// several batches is written again batch by batch, so that one bad batch
/// fails alone.
fn answer(shared: &Shared, conn: &mut Conn, group: Vec<Batch>, written: Result<Vec<Committed>>) {
    match written {
        Ok(results) => {
            for (b, r) in group.into_iter().zip(results) {
                count_charges(&b.records, &r);
                let _ = b.done.send(Ok(r));
            }
        }
        Err(e) if group.len() == 1 || e.is_unavailable() => {
            tracing::error!(error = %e, batches = group.len(), "commit failed");
            for b in group {
                owe_holds(shared, &b);
                let _ = b.done.send(Err(e.clone()));
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, batches = group.len(), "group commit failed; retrying batches one by one");
            for b in group {
                let r = write_group(&mut conn.db(), shared.instance(), std::slice::from_ref(&b))
                    .map(|mut v| v.pop().unwrap_or_default());
                match &r {
                    Ok(c) => count_charges(&b.records, c),
                    Err(e) => {
                        tracing::error!(error = %e, "commit failed");
                        owe_holds(shared, &b);
                    }
                }
                let _ = b.done.send(r);
            }
        }
    }
}

/// Whether a batch must be on disk before it is acknowledged. Every record
/// must, but a credit hold and what was queued with
/// [`RecordWriter::commit_unflushed`]. A hold is a reservation, not money:
/// it guards against overdraft while its request runs and expires by
/// itself; losing the last holds in a power cut loses nothing billable
/// (their requests were cut off too, and a charge is always committed with
/// the flush). A group of such batches alone skips the flush, so a
/// streamed chat's first byte waits for no flush at all.
fn needs_flush(batch: &Batch) -> bool {
    batch.flush
        && batch
            .records
            .iter()
            .any(|r| !matches!(r, Record::Hold { .. }))
}

/// The holds a failed batch took, ended or handed to a job: owed releases
/// (a failed request keeps no hold; a hold whose commit is in doubt is
/// deleted too).
fn owe_holds(shared: &Shared, batch: &Batch) {
    let ids = batch.records.iter().filter_map(|r| match r {
        Record::Hold { request_id, .. } | Record::HoldRelease { request_id } => {
            Some(request_id.clone())
        }
        Record::JobCreate(j) => j.hold.clone(),
        _ => None,
    });
    lock(&shared.owed).extend(ids);
}

/// Deletes the holds owed ([`Shared::owed`]) in one transaction; kept
/// owed if the database is still unreachable.
fn release_owed(shared: &Shared, conn: &mut Conn) {
    let owed = std::mem::take(&mut *lock(&shared.owed));
    if owed.is_empty() {
        return;
    }
    let released = conn.revive().and_then(|()| {
        conn.db().transaction(|tx| {
            for id in &owed {
                tx.exec("DELETE FROM credit_holds WHERE request_id = ?1", p![id])?;
            }
            Ok(())
        })
    });
    match released {
        Ok(()) => tracing::info!(holds = owed.len(), "owed credit holds released"),
        Err(e) => {
            tracing::debug!(error = %e, holds = owed.len(), "owed credit holds not released yet");
            lock(&shared.owed).extend(owed);
        }
    }
}

/// Writes a group in one transaction, flushed to disk when `sync_full`
/// and any batch needs it. A PostgreSQL connection the server closed is
/// reopened first; if it breaks while the group is written (before its
/// `COMMIT`: nothing was committed), the group is written once more on a
/// new connection. A `COMMIT` in doubt is never retried.
fn commit_group(conn: &mut Conn, shared: &Shared, group: &[Batch]) -> Result<Vec<Committed>> {
    conn.revive()?;
    let written = match commit_group_once(conn, shared, group) {
        Err(e) if e.failure == super::Failure::Unavailable && conn.is_closed() => {
            tracing::warn!(error = %e, "the database connection broke; retrying the group on a new one");
            conn.revive()?;
            commit_group_once(conn, shared, group)
        }
        written => written,
    };
    if let (Ok(_), Some(tell)) = (&written, shared.on_charge.get()) {
        let charged = group
            .iter()
            .flat_map(|b| &b.records)
            .filter_map(|r| match r {
                Record::Usage(u) if u.charged > Decimal::ZERO => u.user_id,
                _ => None,
            });
        charged.for_each(|u| tell(u));
    }
    written
}

fn commit_group_once(conn: &mut Conn, shared: &Shared, group: &[Batch]) -> Result<Vec<Committed>> {
    let flushed_by_commit = shared.sync_full && shared.wal.is_none();
    if flushed_by_commit && !group.iter().any(needs_flush) {
        conn.write_unflushed(shared.instance(), &records_of(group))
    } else {
        write_group(&mut conn.db(), shared.instance(), group)
    }
}

/// Fdatasyncs each distinct file of the group's [`Record::SyncFile`]s once,
/// before the group commits (an answered packed object must be on disk
/// before its asset record). If any fails, every batch carrying a
/// `SyncFile` is failed (nothing of it committed); the others are returned
/// to be written.
fn sync_files(group: Vec<Batch>) -> Vec<Batch> {
    let mut files: Vec<&std::sync::Arc<std::fs::File>> = Vec::new();
    for r in group.iter().flat_map(|b| &b.records) {
        if let Record::SyncFile(f) = r {
            if !files.iter().any(|g| std::sync::Arc::ptr_eq(g, f)) {
                files.push(f);
            }
        }
    }
    let Some(e) = files.into_iter().find_map(|f| f.sync_data().err()) else {
        return group;
    };
    tracing::error!(error = %e, "syncing a packed segment failed; failing its batches");
    let e = StoreError::caused("syncing a packed segment", e);
    let carries = |b: &Batch| b.records.iter().any(|r| matches!(r, Record::SyncFile(_)));
    let (failed, rest): (Vec<Batch>, Vec<Batch>) = group.into_iter().partition(carries);
    for b in failed {
        let _ = b.done.send(Err(e.clone()));
    }
    rest
}

/// Counts the charges of a committed batch's usage records (those written).
fn count_charges(records: &[Record], committed: &Committed) {
    use rust_decimal::prelude::ToPrimitive;
    let usages = records.iter().filter_map(|r| match r {
        Record::Usage(u) => Some(u),
        _ => None,
    });
    for (u, written) in usages.zip(&committed.usage_written) {
        if *written && u.charged > Decimal::ZERO {
            let micro = (u.charged * Decimal::from(1_000_000u32))
                .round()
                .to_u64()
                .unwrap_or(0);
            gateway_base::telemetry::charged(gateway_base::telemetry::intern(&u.capability), micro);
        }
    }
}

/// Writes a group in one transaction ([`write_in`]).
fn write_group(db: &mut Db<'_>, instance: Option<&str>, group: &[Batch]) -> Result<Vec<Committed>> {
    db.transaction(|tx| write_in(tx, instance, &records_of(group)))
}

/// Each batch's records.
fn records_of(group: &[Batch]) -> Vec<&[Record]> {
    group.iter().map(|b| &b.records[..]).collect()
}
