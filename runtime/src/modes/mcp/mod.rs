//! `mcp`: the Model Context Protocol's Streamable HTTP transport (issue
//! #44), relayed to the servers of `GATEWAY_MCP_SERVERS` with the caller's
//! gateway key: `POST /mcp/{server}` (JSON-RPC messages; the server's JSON
//! or SSE answer relayed as it comes), `GET` (the server's own stream),
//! `DELETE` (the session's end) ([`single`]); `/mcp`, every server the key
//! may use as one, tools named `{server}__{tool}` ([`virtual_server`]).
//!
//! * **Sessions.** `initialize` opens a session of the gateway's own (its
//!   id answered in `Mcp-Session-Id`, bound to the caller's user; at most
//!   `GATEWAY_MCP_MAX_SESSIONS` open, 429 past them); the server's own id
//!   is kept with it and never shown. Any other message needs the
//!   session: missing is a 400, another user's or an ended one a 404.
//! * **Tool calls** ([`calls`]): a tool the server does not expose or the
//!   key's `mcp_tools` does not name, a call over the server's rate limit,
//!   or a priced call the balance cannot hold is answered with a JSON-RPC
//!   error and never sent. A priced call is held before it goes and
//!   charged once its answer came without an error; every call writes its
//!   record (arguments and results only with `GATEWAY_MCP_LOG_ARGUMENTS`).
//! * **Answers** ([`relay`]): scrubbed of the server's credentials,
//!   `tools/list` filtered to what the key may call, progress and other
//!   notifications passed on as they come.
//! * **A server that fails** (down, an error status, a time-out of
//!   `GATEWAY_MCP_CALL_TIMEOUT_SECS`): each request of the message gets a
//!   JSON-RPC error naming the server; nothing is charged.

mod calls;
mod door;
mod relay;
mod single;
mod virtual_server;

use crate::ctx::{Ctx, Outcome};
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;

/// A request of the door: to the server named by `{server}`, or to the
/// virtual server (`/mcp`).
pub async fn serve(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    match params.get("server") {
        Some(_) => single::serve(ctx, req, params).await,
        None => virtual_server::serve(ctx, req).await,
    }
}
