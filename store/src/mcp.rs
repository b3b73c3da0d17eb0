//! The MCP gateway's state (migration 25): callers' sessions, each the
//! gateway's own id bound to its user, with the servers' own session ids
//! (never shown to a caller); and each tool call's record, written by the
//! writer ([`super::Record::McpCall`]) with its charge when it has one.

use super::sql::{p, Db, Row};
use super::{Result, Store};

/// A caller's MCP session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpSessionRow {
    /// The gateway's id (what the caller sends in `Mcp-Session-Id`).
    pub id: String,
    pub user_id: i64,
    pub key_id: Option<i64>,
    /// The server it speaks to (`""`: the virtual server, every server).
    pub server: String,
    /// JSON text: each server's own session id, by server.
    pub upstream: String,
    pub created_at: String,
    pub ended_at: Option<String>,
}

/// One tool call, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpCallRecord {
    pub request_id: String,
    pub user_id: i64,
    pub session_id: Option<String>,
    pub server: String,
    pub tool: String,
    pub duration_ms: u64,
    /// `ok`, `tool_error` (the tool answered `isError`), `error` (a JSON-RPC
    /// error or no answer), `refused` (not allowed, no credit: never sent).
    pub outcome: String,
    /// What it was charged (a priced call that succeeded), 8 places.
    pub charged: Option<String>,
    /// JSON text, only with `GATEWAY_MCP_LOG_ARGUMENTS`.
    pub arguments: Option<String>,
    pub result: Option<String>,
    pub created_at: String,
}

macro_rules! cols {
    () => {
        "id, user_id, key_id, server, upstream, created_at, ended_at"
    };
}

fn row(r: &Row<'_>) -> Result<McpSessionRow> {
    Ok(McpSessionRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        key_id: r.get(2)?,
        server: r.get(3)?,
        upstream: r.get(4)?,
        created_at: r.get(5)?,
        ended_at: r.get(6)?,
    })
}

/// Writes a tool call's record (inside the writer's transaction).
pub(super) fn insert_call(tx: &mut Db<'_>, c: &McpCallRecord) -> Result<()> {
    tx.defer(
        "INSERT INTO mcp_calls (request_id, user_id, session_id, server, tool, duration_ms, outcome, charged, arguments, result, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT (request_id) DO NOTHING",
        p![c.request_id, c.user_id, c.session_id, c.server, c.tool, c.duration_ms, c.outcome, c.charged, c.arguments, c.result, c.created_at],
    )
}

/// MCP sessions and tool-call records. Another user's session is never found.
pub trait McpSessions {
    /// Opens a session, unless the user holds `max` open ones already
    /// (`false`).
    fn open_mcp_session(&self, s: &McpSessionRow, max: usize) -> Result<bool>;

    /// The user's open session `id`.
    fn mcp_session(&self, user_id: i64, id: &str) -> Result<Option<McpSessionRow>>;

    /// Records the servers' own session ids of session `id` (JSON text).
    fn set_mcp_upstream(&self, id: &str, upstream: &str) -> Result<()>;

    /// Ends the user's session `id`; `false` when it was not open.
    fn end_mcp_session(&self, user_id: i64, id: &str, now: &str) -> Result<bool>;

    /// The tool calls recorded, oldest first (the tests', and an export's).
    fn mcp_calls(&self) -> Result<Vec<McpCallRecord>>;
}

impl McpSessions for Store {
    fn open_mcp_session(&self, s: &McpSessionRow, max: usize) -> Result<bool> {
        self.transaction(|db| {
            let open: i64 = db
                .row(
                    "SELECT COUNT(*) FROM mcp_sessions WHERE user_id = ?1 AND ended_at IS NULL",
                    p![s.user_id],
                    |r| r.get(0),
                )?
                .unwrap_or(0);
            if open as usize >= max {
                return Ok(false);
            }
            db.exec(
                concat!(
                    "INSERT INTO mcp_sessions (",
                    cols!(),
                    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                ),
                p![
                    s.id,
                    s.user_id,
                    s.key_id,
                    s.server,
                    s.upstream,
                    s.created_at,
                    s.ended_at
                ],
            )?;
            Ok(true)
        })
    }

    fn mcp_session(&self, user_id: i64, id: &str) -> Result<Option<McpSessionRow>> {
        let sql = concat!(
            "SELECT ",
            cols!(),
            " FROM mcp_sessions WHERE id = ?1 AND user_id = ?2 AND ended_at IS NULL"
        );
        self.with(|db| db.row(sql, p![id, user_id], row))
    }

    fn set_mcp_upstream(&self, id: &str, upstream: &str) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE mcp_sessions SET upstream = ?2 WHERE id = ?1",
                p![id, upstream],
            )
            .map(drop)
        })
    }

    fn end_mcp_session(&self, user_id: i64, id: &str, now: &str) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "UPDATE mcp_sessions SET ended_at = ?3 WHERE id = ?1 AND user_id = ?2 AND ended_at IS NULL",
                p![id, user_id, now],
            )
            .map(|n| n == 1)
        })
    }

    fn mcp_calls(&self) -> Result<Vec<McpCallRecord>> {
        self.with(|db| {
            db.rows(
                "SELECT request_id, user_id, session_id, server, tool, duration_ms, outcome, charged, arguments, result, created_at
                 FROM mcp_calls ORDER BY created_at, request_id",
                &[],
                |r| {
                    Ok(McpCallRecord {
                        request_id: r.get(0)?,
                        user_id: r.get(1)?,
                        session_id: r.get(2)?,
                        server: r.get(3)?,
                        tool: r.get(4)?,
                        duration_ms: r.get::<i64>(5)?.max(0) as u64,
                        outcome: r.get(6)?,
                        charged: r.get(7)?,
                        arguments: r.get(8)?,
                        result: r.get(9)?,
                        created_at: r.get(10)?,
                    })
                },
            )
        })
    }
}

/// The user's tool calls sent between `from` and `to` (refused ones left
/// out), totalled by `server/tool`: how many, and what they were charged.
pub(super) fn call_totals(
    store: &Store,
    user_id: i64,
    from: &str,
    to: &str,
) -> Result<std::collections::BTreeMap<String, super::UsageTotals>> {
    let rows: Vec<(String, String, Option<String>)> = store.with(|db| {
        db.rows(
            "SELECT server, tool, charged FROM mcp_calls
             WHERE user_id = ?1 AND created_at >= ?2 AND created_at < ?3 AND outcome != 'refused'",
            p![user_id, from, to],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
    })?;
    let mut groups: std::collections::BTreeMap<String, super::UsageTotals> = Default::default();
    for (server, tool, charged) in rows {
        let t = groups.entry(format!("{server}/{tool}")).or_default();
        t.requests += 1;
        if let Some(c) = charged {
            t.cost += super::sql::parse_dec(&c)?;
        }
    }
    Ok(groups)
}
