//! The MCP servers file read and checked against the route table (at
//! start, by a reload, by `check-config`).

use crate::config;
use gateway_base::spec;

/// The MCP servers file (`GATEWAY_MCP_SERVERS`), each server's
/// capability one of the table's (else start-up stops naming it).
pub(crate) fn mcp_servers(
    config: &config::Config,
    table: &spec::Table,
) -> Result<gateway_models::mcp::McpServers, gateway_models::mcp::McpError> {
    use gateway_models::mcp::{McpError, McpServers};
    let Some(path) = &config.mcp.servers_file else {
        return Ok(McpServers::default());
    };
    let servers = McpServers::load(path)?;
    for s in &servers.servers {
        if !table.capabilities.iter().any(|c| c.name == s.capability) {
            return Err(McpError(format!(
                "{}: server {:?}: capability: {:?} is not a rate-limit capability of the route table",
                path.display(),
                s.id,
                s.capability
            )));
        }
    }
    Ok(servers)
}
