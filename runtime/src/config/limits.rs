//! The limits of live sessions and of batches.

use std::time::Duration;

/// The limits of live WebSocket sessions (`modes::realtime`,
/// `modes::stt_stream`); each ends a session with a close code naming it.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// Longest session (`GATEWAY_REALTIME_MAX_SECS`, 3600 s).
    pub max_duration: Duration,
    /// Longest silence from the caller (`GATEWAY_REALTIME_IDLE_SECS`, 300 s).
    pub idle: Duration,
    /// Largest message either way (`GATEWAY_REALTIME_MAX_FRAME_BYTES`, 4 MiB).
    pub max_frame: usize,
    /// Sessions one user holds open on an instance
    /// (`GATEWAY_REALTIME_MAX_SESSIONS`, 8).
    pub per_user: usize,
    /// Seconds of live audio held and committed at a time
    /// (`GATEWAY_STREAM_BILLING_SECS`, 10).
    pub billing_period: u32,
}

impl Default for SessionLimits {
    fn default() -> SessionLimits {
        SessionLimits {
            max_duration: Duration::from_secs(3600),
            idle: Duration::from_secs(300),
            max_frame: 4 << 20,
            per_user: 8,
            billing_period: 10,
        }
    }
}

/// How batches run (`runtime::batches`).
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    /// Most lines of a batch's input file (`GATEWAY_BATCH_MAX_LINES`, 50,000).
    pub max_lines: usize,
    /// Lines of one batch in flight on an instance (`GATEWAY_BATCH_CONCURRENCY`, 8).
    pub concurrency: usize,
    /// Lines of all batches in flight on an instance
    /// (`GATEWAY_BATCH_INSTANCE_CONCURRENCY`, 16), fewer while interactive
    /// requests are in flight.
    pub per_instance: usize,
    /// Every batch's window instead of its `completion_window`
    /// (`GATEWAY_BATCH_WINDOW_SECS`; `None`: 24 hours).
    pub window: Option<Duration>,
}

impl Default for BatchLimits {
    fn default() -> BatchLimits {
        BatchLimits {
            max_lines: 50_000,
            concurrency: 8,
            per_instance: 16,
            window: None,
        }
    }
}
