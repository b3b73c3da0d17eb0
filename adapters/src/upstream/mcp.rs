//! Calls to MCP servers (`gateway_models::mcp`): a server's Streamable
//! HTTP endpoint with the headers its servers file entry names, each value
//! read from its environment variable once, at start-up. The values are
//! held here only, added to a call here only, and scrubbed from whatever
//! the server answers (the answer's body by the call's scrubber, each
//! relayed message by [`McpCredentials::scrub`]).

use std::sync::Arc;
use std::time::Duration;

use http::{header::HeaderName, HeaderValue};

use super::scrub::Key;
use super::{Call, Mapping, Upstream};
use gateway_base::spec::Base;

/// A server's credential headers. Its `Debug` shows no value.
#[derive(Clone, Default)]
pub struct McpCredentials(Arc<Vec<(HeaderName, HeaderValue, Arc<Key>)>>);

impl std::fmt::Debug for McpCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|(n, _, _)| n.as_str()).collect();
        write!(f, "McpCredentials({names:?}, <redacted>)")
    }
}

impl McpCredentials {
    /// The headers `pairs` names (header, variable), each value read from
    /// its variable; `Err` names the first variable unset or unusable.
    pub fn from_env(pairs: &[(String, String)]) -> Result<McpCredentials, String> {
        let mut out = Vec::with_capacity(pairs.len());
        for (name, var) in pairs {
            let value = std::env::var(var)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .ok_or_else(|| format!("headers_env: {name}: the variable {var} is not set"))?;
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("headers_env: {name:?} is not a header name"))?;
            let mut v = HeaderValue::from_str(value.trim()).map_err(|_| {
                format!("headers_env: {name}: {var} holds what no header can carry")
            })?;
            v.set_sensitive(true);
            // The secret is what follows a scheme ("Bearer x"): both the
            // whole value and its last word are scrubbed.
            if let Some((_, secret)) = value.trim().rsplit_once(' ') {
                if secret.trim().len() >= 8 {
                    out.push((header.clone(), v.clone(), Key::new(secret.trim())));
                }
            }
            out.push((header, v, Key::new(value.trim())));
        }
        Ok(McpCredentials(Arc::new(out)))
    }

    /// `s` without any credential value.
    pub fn scrub(&self, s: &str) -> String {
        let mut out = s.to_owned();
        for (_, _, key) in self.0.iter() {
            out = key.scrub_str(&out);
        }
        out
    }
}

impl Upstream {
    /// A call to the MCP server at `url` with its credential headers,
    /// answered within `timeout` (a call's or a stream's).
    pub fn mcp_call(
        &self,
        method: http::Method,
        url: &str,
        creds: &McpCredentials,
        timeout: Duration,
    ) -> Call {
        let mapping = Mapping {
            base: Base::Llm,
            timeout,
            // The answer's scrubber takes one secret (the first header's;
            // each relayed message is scrubbed of all of them).
            key: creds.0.first().map(|(_, _, k)| k.clone()),
            callers_key: false,
        };
        let mut call = Call::new(
            self,
            method,
            url.to_owned(),
            http::header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
            mapping,
        )
        .timeout(timeout);
        for (name, value, _) in creds.0.iter() {
            call = call.with_header(name.clone(), value.clone());
        }
        call
    }
}
