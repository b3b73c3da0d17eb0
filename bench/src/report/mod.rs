//! Results: one [`Row`] per run (in [`crate::row`]), the markdown tables printed to stdout, the
//! targets of the issue checked against the rows, and the JSON file.
//!
//! Overhead is the target's latency minus the direct run's at the same
//! scenario, concurrency and percentile. Times are in milliseconds, CPU time
//! in microseconds of the process under test (gateway or forwarder; the
//! simulator's own is reported beside it), RSS in MiB, upload throughput in
//! MB/s (10^6 bytes).
//!
//! [`run`] holds the [`Report`] and the figures read across its rows; the
//! checks ([`checks`]), the markdown ([`markdown`]) and the JSON ([`json`])
//! are each written from it by a module of their own, with the number
//! formats in [`format`]; the `batch` scenario's figures (its table, JSON
//! and reported checks) in [`batch`].

mod batch;
mod checks;
mod format;
mod json;
mod markdown;
mod run;

pub use run::{object, Context, EqualLoad, Report, SyncRun};

pub use crate::row::Target;
