//! The limits of live sessions, of batches and of the MCP gateway, and
//! their variables.

use std::path::PathBuf;
use std::time::Duration;

use super::names::*;
use super::parse::{parse_bool, parse_positive};
use super::vars::Vars;

/// Reads how batches run.
pub(super) fn read_batches(b: &mut BatchLimits, v: &mut Vars<impl Fn(&str) -> Option<String>>) {
    let count = |t: &str| parse_positive(t).map(|n| n as usize);
    v.set(&mut b.max_lines, GATEWAY_BATCH_MAX_LINES, count);
    v.set(&mut b.concurrency, GATEWAY_BATCH_CONCURRENCY, count);
    v.set(
        &mut b.per_instance,
        GATEWAY_BATCH_INSTANCE_CONCURRENCY,
        count,
    );
    v.set(&mut b.window, GATEWAY_BATCH_WINDOW_SECS, |t| {
        parse_positive(t).map(|n| Some(Duration::from_secs(n)))
    });
}

/// Reads the MCP gateway's variables.
pub(super) fn read_mcp(m: &mut McpConfig, v: &mut Vars<impl Fn(&str) -> Option<String>>) {
    m.servers_file = v.raw(GATEWAY_MCP_SERVERS).map(PathBuf::from);
    v.set(&mut m.log_arguments, GATEWAY_MCP_LOG_ARGUMENTS, parse_bool);
    v.set(&mut m.call_timeout, GATEWAY_MCP_CALL_TIMEOUT_SECS, |t| {
        parse_positive(t).map(Duration::from_secs)
    });
    v.set(&mut m.sessions_per_user, GATEWAY_MCP_MAX_SESSIONS, |t| {
        parse_positive(t).map(|n| n as usize)
    });
}

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
    /// (`GATEWAY_BATCH_INSTANCE_CONCURRENCY`, 16); a line yields to the
    /// interactive requests in flight (up to a second).
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

/// The MCP gateway (`modes::mcp`).
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// The MCP servers file (`GATEWAY_MCP_SERVERS`; `None`: no servers).
    pub servers_file: Option<PathBuf>,
    /// Tool calls' arguments and results kept in their records
    /// (`GATEWAY_MCP_LOG_ARGUMENTS`, off).
    pub log_arguments: bool,
    /// Longest a server may take to answer a request, its stream included
    /// (`GATEWAY_MCP_CALL_TIMEOUT_SECS`, 120 s).
    pub call_timeout: Duration,
    /// Open MCP sessions per user (`GATEWAY_MCP_MAX_SESSIONS`, 32).
    pub sessions_per_user: usize,
}

impl Default for McpConfig {
    fn default() -> McpConfig {
        McpConfig {
            servers_file: None,
            log_arguments: false,
            call_timeout: Duration::from_secs(120),
            sessions_per_user: 32,
        }
    }
}
