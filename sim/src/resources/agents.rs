//! Agents: the fixed capability and system-tool catalogs, and the names of
//! nested tools / webhooks (agents, their tools and webhooks, and knowledge
//! items are otherwise generic CRUD, routed in the parent module).

use serde_json::json;

use super::store::STOCK_VOICES;
use crate::response::{ok, ok_item, Resp};

/// `GET /agents/capabilities`.
pub(super) fn capabilities() -> Resp {
    ok_item(json!({
        "languages": ["en-US", "en-GB", "es-ES", "fr-FR", "de-DE"],
        "llm_models": ["gpt-4o-mini", "claude-3-5-haiku"],
        "tts_voices": STOCK_VOICES,
        "stt_providers": ["resemble"],
        "max_tools": 32,
    }))
}

/// `GET /agents/system-tools`.
pub(super) fn system_tools() -> Resp {
    ok(json!({
        "success": true,
        "items": [
            {"name": "end_call", "description": "End the conversation"},
            {"name": "transfer_call", "description": "Transfer to a phone number"},
            {"name": "knowledge_search", "description": "Search the knowledge base"},
        ],
        "count": 3,
    }))
}

/// What an agent `tools` / `webhooks` record is called in 404 messages.
pub(super) fn singular(sub: &str) -> &'static str {
    if sub == "tools" {
        "agent tool"
    } else {
        "agent webhook"
    }
}
