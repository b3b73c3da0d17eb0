//! The configuration files a reload reads again, read and checked (at
//! start, by a reload, by `check-config`): the MCP servers file against
//! the route table, the sign-in providers file into its client.

use crate::config;
use gateway_adapters::oidc;
use gateway_base::spec;

/// The sign-in providers' client for `providers` (callbacks under the
/// gateway's public URL). Discovery waits for each provider's first use.
pub(crate) fn sign_in(config: &config::Config, providers: &[oidc::ProviderConfig]) -> oidc::Oidc {
    let public_url = config.public_base();
    let base = format!(
        "{}{}",
        public_url.trim_end_matches('/'),
        oidc::CALLBACK_PREFIX
    );
    oidc::Oidc::new(providers, base)
}

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
