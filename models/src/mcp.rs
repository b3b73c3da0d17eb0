//! The MCP servers file (`GATEWAY_MCP_SERVERS`): the Model Context
//! Protocol servers the gateway relays to, what each exposes, what a call
//! costs, and the names a caller sees them by.
//!
//! ```toml
//! [[server]]
//! id = "github"
//! url = "https://mcp.example.com/mcp"          # Streamable HTTP
//! headers_env = { Authorization = "GITHUB_MCP_AUTH" }   # header = variable holding its value
//! per_call = "0.0002"                          # every tool; or { create_issue = "0.01" }
//! capability = "mcp"                           # its rate-limit capability (default "mcp")
//! tools = ["*"]                                # or a list of tool names
//! ```
//!
//! A TOML mistake names the file and line (from `toml`); a check after
//! parsing names the file, the server and the key, as the providers file
//! does. Nothing here reads the environment or calls a server: the
//! credentials' variables are read by `gateway_adapters::upstream::mcp`.

use std::collections::BTreeMap;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde::Deserialize;

use gateway_adapters::upstream::mcp::McpCredentials;

/// Why the MCP servers file could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("MCP servers file {0}")]
pub struct McpError(pub String);

/// The separator of a virtual server's tool names (`{server}__{tool}`).
pub const VIRTUAL_SEPARATOR: &str = "__";

/// The capability a server's calls count against when it names none.
pub const DEFAULT_CAPABILITY: &str = "mcp";

/// Every server of the file, in its order.
#[derive(Debug, Clone, Default)]
pub struct McpServers {
    pub servers: Vec<McpServer>,
}

/// One MCP server.
#[derive(Debug, Clone)]
pub struct McpServer {
    pub id: String,
    /// Its Streamable HTTP endpoint.
    pub url: String,
    /// The headers the gateway adds: name and the variable holding its value.
    pub headers_env: Vec<(String, String)>,
    /// Those headers with their values, read from the environment.
    pub credentials: McpCredentials,
    /// What a call costs (USD, markup included).
    pub price: Price,
    /// The rate-limit capability of its calls.
    pub capability: String,
    /// The tools it exposes.
    pub tools: Exposed,
}

/// What a server's tool calls cost.
#[derive(Debug, Clone, PartialEq)]
pub enum Price {
    Free,
    /// Every tool.
    Each(Decimal),
    /// Per tool; a tool not named is free.
    PerTool(BTreeMap<String, Decimal>),
}

/// Which of a server's tools callers may see and call.
#[derive(Debug, Clone, PartialEq)]
pub enum Exposed {
    All,
    Only(Vec<String>),
}

impl McpServers {
    /// The server `id`.
    pub fn get(&self, id: &str) -> Option<&McpServer> {
        self.servers.iter().find(|s| s.id == id)
    }

    /// Reads the file at `path`.
    pub fn load(path: &std::path::Path) -> Result<McpServers, McpError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| McpError(format!("{}: {e}", path.display())))?;
        parse(&text, &path.display().to_string())
    }
}

impl McpServer {
    /// The price of a call of `tool` (`None`: free).
    pub fn price_of(&self, tool: &str) -> Option<Decimal> {
        match &self.price {
            Price::Free => None,
            Price::Each(p) => Some(*p),
            Price::PerTool(m) => m.get(tool).copied(),
        }
        .filter(|p| !p.is_zero())
    }

    /// Whether the server exposes `tool`.
    pub fn exposes(&self, tool: &str) -> bool {
        match &self.tools {
            Exposed::All => true,
            Exposed::Only(list) => list.iter().any(|t| t == tool),
        }
    }
}

/// Whether an API key's MCP allow-list (`server/tool` or `server/*`;
/// `None`: every exposed tool) lets it call `tool` of `server`.
pub fn key_allows(allow: Option<&[String]>, server: &str, tool: &str) -> bool {
    let Some(allow) = allow else {
        return true;
    };
    allow.iter().any(|a| match a.split_once('/') {
        Some((s, "*")) => s == server,
        Some((s, t)) => s == server && t == tool,
        None => false,
    })
}

/// Checks an allow-list entry a key is given (`server/tool` or
/// `server/*`); the message names what is wrong.
pub fn check_allow_entry(entry: &str) -> Result<(), String> {
    match entry.split_once('/') {
        Some((s, t)) if !s.is_empty() && !t.is_empty() && !t.contains('/') => Ok(()),
        _ => Err(format!("{entry:?} is not server/tool or server/*")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default)]
    server: Vec<ServerDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerDoc {
    id: String,
    url: String,
    #[serde(default)]
    headers_env: BTreeMap<String, String>,
    per_call: Option<toml::Value>,
    capability: Option<String>,
    tools: Option<Vec<String>>,
}

/// Parses the text of an MCP servers file named `file`.
pub fn parse(text: &str, file: &str) -> Result<McpServers, McpError> {
    let doc: FileDoc = toml::from_str(text).map_err(|e| McpError(format!("{file}: {e}")))?;
    let mut servers: Vec<McpServer> = Vec::new();
    for s in doc.server {
        let at = format!("server {:?}", s.id);
        let bad = |key: &str, why: String| McpError(format!("{file}: {at}: {key}: {why}"));
        let id_ok = !s.id.is_empty()
            && s.id.len() <= 64
            && s.id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !s.id.contains(VIRTUAL_SEPARATOR);
        if !id_ok {
            return Err(bad(
                "id",
                "letters, digits, - and _ (no __), 1 to 64 of them".into(),
            ));
        }
        if servers.iter().any(|x| x.id == s.id) {
            return Err(bad("id", "used by an earlier server".into()));
        }
        let url = s.url.trim().to_owned();
        let uri = url.parse::<http::Uri>().ok();
        let http_url = uri.as_ref().is_some_and(|u| {
            matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some()
        });
        if !http_url {
            return Err(bad("url", format!("{url:?} is not an http(s) URL")));
        }
        for (name, var) in &s.headers_env {
            if http::HeaderName::from_str(name).is_err() {
                return Err(bad("headers_env", format!("{name:?} is not a header name")));
            }
            if var.trim().is_empty() {
                return Err(bad(
                    "headers_env",
                    format!("{name}: the variable's name is empty"),
                ));
            }
        }
        let headers_env: Vec<(String, String)> = s.headers_env.into_iter().collect();
        let credentials = McpCredentials::from_env(&headers_env)
            .map_err(|why| McpError(format!("{file}: {at}: {why}")))?;
        let price = price(s.per_call).map_err(|why| bad("per_call", why))?;
        let tools = match s.tools {
            None => Exposed::All,
            Some(t) if t.iter().any(|x| x == "*") => Exposed::All,
            Some(t) if t.iter().any(|x| x.trim().is_empty()) => {
                return Err(bad("tools", "an empty tool name".into()))
            }
            Some(t) => Exposed::Only(t),
        };
        let capability = s
            .capability
            .unwrap_or_else(|| DEFAULT_CAPABILITY.to_owned());
        if capability.trim().is_empty() {
            return Err(bad("capability", "empty".into()));
        }
        servers.push(McpServer {
            id: s.id,
            url,
            headers_env,
            credentials,
            price,
            capability,
            tools,
        });
    }
    Ok(McpServers { servers })
}

/// `per_call`: a decimal string for every tool, or a table of them per tool.
fn price(v: Option<toml::Value>) -> Result<Price, String> {
    let one = |v: &toml::Value| -> Result<Decimal, String> {
        let s = v
            .as_str()
            .ok_or_else(|| "a price is a decimal string (\"0.01\")".to_owned())?;
        let d = Decimal::from_str(s.trim()).map_err(|e| format!("{s:?} is not a decimal: {e}"))?;
        if d.is_sign_negative() {
            return Err(format!("{s:?} is negative"));
        }
        Ok(d)
    };
    match v {
        None => Ok(Price::Free),
        Some(toml::Value::Table(t)) => t
            .iter()
            .map(|(k, v)| {
                one(v)
                    .map(|d| (k.clone(), d))
                    .map_err(|e| format!("{k}: {e}"))
            })
            .collect::<Result<_, _>>()
            .map(Price::PerTool),
        Some(v) => one(&v).map(Price::Each),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[server]]
id = "github"
url = "http://127.0.0.1:9/mcp"
headers_env = { Authorization = "GH_AUTH" }
per_call = { create_issue = "0.01" }
capability = "tools"
tools = ["create_issue", "search"]

[[server]]
id = "docs"
url = "https://docs.example.com/mcp"
per_call = "0.0002"
"#;

    #[test]
    fn a_good_file_parses() {
        std::env::set_var("GH_AUTH", "Bearer gh-secret-0123456789");
        let s = parse(GOOD, "m.toml").unwrap();
        let gh = s.get("github").unwrap();
        assert_eq!(
            gh.headers_env,
            vec![("Authorization".into(), "GH_AUTH".into())]
        );
        assert_eq!(
            gh.price_of("create_issue"),
            Some(Decimal::from_str("0.01").unwrap())
        );
        assert_eq!(gh.price_of("search"), None);
        assert!(gh.exposes("search") && !gh.exposes("delete_repo"));
        assert_eq!(gh.capability, "tools");
        let docs = s.get("docs").unwrap();
        assert_eq!(
            docs.price_of("anything"),
            Some(Decimal::from_str("0.0002").unwrap())
        );
        assert_eq!(docs.tools, Exposed::All);
        assert_eq!(docs.capability, DEFAULT_CAPABILITY);
    }

    #[test]
    fn mistakes_name_the_file_the_server_and_the_key() {
        std::env::set_var("GH_AUTH", "Bearer gh-secret-0123456789");
        let e = parse(&GOOD.replace("GH_AUTH", "GW_TEST_UNSET_MCP_VAR"), "m.toml").unwrap_err();
        assert!(
            e.0.contains("headers_env: Authorization") && e.0.contains("GW_TEST_UNSET_MCP_VAR"),
            "{e}"
        );
        let e = parse("[[server]]\nid = 3\n", "m.toml").unwrap_err();
        assert!(e.0.contains("m.toml") && e.0.contains("line 2"), "{e}");
        for (from, to, key) in [
            (
                "url = \"http://127.0.0.1:9/mcp\"",
                "url = \"ftp://x\"",
                "url",
            ),
            ("\"0.0002\"", "\"-1\"", "per_call"),
            ("\"0.01\"", "\"a lot\"", "per_call"),
            ("id = \"docs\"", "id = \"github\"", "id"),
            ("id = \"docs\"", "id = \"do__cs\"", "id"),
            ("Authorization = ", "\"Bad Header\" = ", "headers_env"),
        ] {
            let e = parse(&GOOD.replace(from, to), "m.toml").unwrap_err();
            assert!(
                e.0.contains("m.toml") && e.0.contains(&format!(": {key}:")),
                "{key}: {e}"
            );
        }
        let e = parse(&GOOD.replace("tools = [", "toolz = ["), "m.toml").unwrap_err();
        assert!(e.0.contains("toolz"), "{e}");
    }

    #[test]
    fn a_keys_allow_list_names_tools_or_whole_servers() {
        let allow = vec!["github/create_issue".to_owned(), "docs/*".to_owned()];
        assert!(key_allows(Some(&allow), "github", "create_issue"));
        assert!(!key_allows(Some(&allow), "github", "search"));
        assert!(key_allows(Some(&allow), "docs", "anything"));
        assert!(!key_allows(Some(&[]), "docs", "anything"));
        assert!(key_allows(None, "x", "y"));
        assert!(check_allow_entry("docs/*").is_ok());
        assert!(check_allow_entry("docs").is_err());
        assert!(check_allow_entry("/x").is_err());
    }
}
