//! One provider of the providers file: its API, key, markup and models.

use std::sync::Arc;

use rust_decimal::Decimal;

use super::adapter::Adapter;
use super::model::Model;
use gateway_adapters::upstream::llm::ProviderKey;

/// One provider of the providers file.
#[derive(Debug, Clone)]
pub struct Provider {
    pub id: String,
    pub kind: String,
    pub base_url: String,
    /// `None` when its environment variable is unset: only BYOK calls work.
    pub key: Option<ProviderKey>,
    pub api_key_env: String,
    pub markup_pct: Decimal,
    /// It serves OpenAI's Responses API itself (`responses = true`, an
    /// `openai` provider): `/responses` requests go to it as sent.
    pub responses: bool,
    pub models: Vec<Model>,
    pub adapter: Arc<dyn Adapter>,
}
