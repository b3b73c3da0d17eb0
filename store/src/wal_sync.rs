//! SQLite's flush to disk, off the write lock (`GATEWAY_DB_SYNC=full`).
//!
//! The record writer commits every group with `synchronous=NORMAL`: the
//! commit appends the group's frames to the write-ahead log and releases
//! the database at once, with no fsync under the lock. A group that must be
//! durable before it is acknowledged is then handed here, and this thread
//! fdatasyncs the log (one call for every group handed meanwhile) before it
//! tells their requests. So the next group is written while the last one's
//! flush runs, and what needs no flush (a hold, a stream's audit record
//! before its first byte) waits for nobody's fsync. The guarantee is
//! `synchronous=FULL`'s in WAL mode: an acknowledged commit's frames are on
//! disk. A checkpoint under NORMAL flushes the log before it copies it and
//! the database file after, so frames it moves stay durable too.

use std::sync::mpsc;

/// What to do once the log is on disk (or the flush failed).
pub(super) type AfterFlush = Box<dyn FnOnce(std::io::Result<()>) + Send>;

/// Handle to the flushing thread.
pub(super) struct WalSync {
    tx: mpsc::Sender<AfterFlush>,
}

impl WalSync {
    /// The thread flushing the log of the database at `db_path`
    /// (`<db_path>-wal`); `None` (logged) when the log cannot be opened,
    /// and the writer then flushes in its commits.
    pub(super) fn start(db_path: &str) -> Option<WalSync> {
        let path = format!("{db_path}-wal");
        let wal = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, path, "the write-ahead log could not be opened; commits flush it themselves");
                return None;
            }
        };
        let (tx, rx) = mpsc::channel::<AfterFlush>();
        std::thread::Builder::new()
            .name("wal-sync".into())
            .spawn(move || flush_loop(&wal, &rx))
            .expect("spawn the log's flushing thread");
        Some(WalSync { tx })
    }

    /// Runs `then` once every commit made before this call is on disk.
    pub(super) fn after_flush(&self, then: AfterFlush) {
        if let Err(mpsc::SendError(then)) = self.tx.send(then) {
            then(Err(std::io::Error::other(
                "the log's flushing thread stopped",
            )));
        }
    }
}

/// Flushes the log for whatever has been handed over, then tells each.
fn flush_loop(wal: &std::fs::File, rx: &mpsc::Receiver<AfterFlush>) {
    while let Ok(first) = rx.recv() {
        let mut waiting = vec![first];
        waiting.extend(rx.try_iter());
        let flushed = wal.sync_data();
        if let Err(e) = &flushed {
            tracing::error!(error = %e, "flushing the write-ahead log failed");
        }
        for then in waiting {
            then(match &flushed {
                Ok(()) => Ok(()),
                Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
            });
        }
    }
}
