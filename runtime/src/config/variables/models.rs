//! The providers files (the general gateway's models, the sign-in providers)
//! and how a model call is retried, cooled down and timed out.

use super::row::{Scope, Variable};

/// In the page's order.
pub(super) const VARIABLES: &[Variable] = &[
    Variable {
        name: "GATEWAY_PROVIDERS",
        default: r#"none"#,
        meaning: r#"the general gateway's providers file (TOML, see [General
            gateway](models.md#general-gateway)); unset: no models (model routes
            answer 404)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_MCP_SERVERS",
        default: r#"none"#,
        meaning: r#"the MCP servers file (TOML, see [The MCP gateway](models.md#the-mcp-gateway));
            unset: no MCP servers (`/api/v1/mcp` answers 404)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_MCP_LOG_ARGUMENTS",
        default: r#"`false`"#,
        meaning: r#"keep each MCP tool call's arguments and result in its record (off: the
            record says server, tool, duration and outcome only)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_MCP_CALL_TIMEOUT_SECS",
        default: r#"`120`"#,
        meaning: r#"longest an MCP server may take to answer a request (its stream included);
            past it the caller gets a JSON-RPC error and a priced call is not charged"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_MCP_MAX_SESSIONS",
        default: r#"`32`"#,
        meaning: r#"open MCP sessions one user may hold; one more `initialize` is refused with
            429"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_OAUTH_PROVIDERS",
        default: r#"none"#,
        meaning: r#"the sign-in providers file (OpenID Connect; TOML, see [Sign-in with OpenID
            Connect](accounts.md#sign-in-with-openid-connect)); a mistake in it (or an
            unset `client_secret_env` variable) stops start-up naming the file, the
            provider and the key; unset: no providers (the sign-in routes answer 404)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_RESPONSES_RETENTION_DAYS",
        default: r#"`30`"#,
        meaning: r#"days a stored response of the Responses API (`POST /responses` with
            `store`) is kept for `previous_response_id`, retrieval and its input items,
            then swept with the objects (see [The Responses API](models.md#the-responses-api))"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_RESPONSES_SCOPE",
        default: r#"`user`"#,
        meaning: r#"whose stored responses a caller may continue, read and delete: `user` (any
            of the user's keys) or `key` (only responses made with the presented API key;
            another key's id is a 404)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_REALTIME_MAX_SECS",
        default: r#"`3600`"#,
        meaning: r#"longest live WebSocket session (`/realtime`, `/audio/stt/stream`); then it is
            settled and closed with code 1008 (see [Realtime sessions](models.md#realtime-sessions))"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_REALTIME_IDLE_SECS",
        default: r#"`300`"#,
        meaning: r#"seconds a live session may go without a message from its caller before it is
            closed (code 1000, the reason naming the time-out)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_REALTIME_MAX_FRAME_BYTES",
        default: r#"`4194304`"#,
        meaning: r#"largest WebSocket message of a live session, either way; a larger one closes
            the session with code 1009"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_REALTIME_MAX_SESSIONS",
        default: r#"`8`"#,
        meaning: r#"live sessions one user may hold open on an instance at once; one more is
            refused with 429 before the upgrade"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_STREAM_BILLING_SECS",
        default: r#"`10`"#,
        meaning: r#"seconds of a live transcription's audio held before they are relayed and
            committed once received; a period that cannot be held closes the session"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_RETRY_MAX",
        default: r#"`2`"#,
        meaning: r#"retries of a model call after its first attempt, before any byte went to
            the caller (see [Routing and resilience](models.md))"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_RETRY_BASE_MS",
        default: r#"`100`"#,
        meaning: r#"base of the back-off (full jitter) before trying the same deployment again"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_COOLDOWN_FAILS",
        default: r#"`3`"#,
        meaning: r#"failures of a deployment within 30 s that start its cool-down"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_COOLDOWN_SECS",
        default: r#"`30`"#,
        meaning: r#"how long a cooling deployment is skipped before one probe request"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_STREAM_TIMEOUT_SECS",
        default: r#"`30`"#,
        meaning: r#"a model stream idle this long ends: 504 before its first byte, an error
            event once streaming (spec §8)"#,
        scope: Scope::Gateway,
    },
];
