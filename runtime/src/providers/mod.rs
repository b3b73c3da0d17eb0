//! The general gateway's model providers: the providers file
//! (`GATEWAY_PROVIDERS`, TOML), its typed configuration, model lookup and
//! the catalogue's view of it.
//!
//! ```toml
//! [[provider]]
//! id = "sim"                      # the part before "/" in a model id
//! kind = "openai"                 # adapter: OpenAI-compatible API
//! base_url = "http://127.0.0.1:9100/v1"
//! api_key_env = "SIM_LLM_KEY"     # environment variable holding the key
//! markup_pct = "20.0"             # optional; default PROVIDER_MARKUP_PCT
//! [[provider.model]]
//! id = "sim-gpt"
//! type = "chat"                   # chat | completion | embedding | image | video | tts | stt
//! context_window = 8192
//! input_per_mtok = "2.00"         # USD per million tokens, decimal strings
//! output_per_mtok = "8.00"
//! ```
//!
//! A request names a model `provider/model` (or an alias of one); each
//! provider speaks through an [`Adapter`] chosen by its `kind`
//! ([`openai::OpenAi`] today). The provider's key is read from its
//! environment variable at start-up into an
//! [`crate::upstream::llm::ProviderKey`], which only `upstream` presents.

pub mod file;
pub mod openai;

use std::path::Path;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use crate::errors::ApiError;
use crate::upstream::llm::ProviderKey;
pub use file::ProvidersError;

/// What a model does (`type` in the providers file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelType {
    Chat,
    Completion,
    Embedding,
    Image,
    Video,
    Tts,
    Stt,
}

impl ModelType {
    pub const ALL: [ModelType; 7] = [
        ModelType::Chat,
        ModelType::Completion,
        ModelType::Embedding,
        ModelType::Image,
        ModelType::Video,
        ModelType::Tts,
        ModelType::Stt,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ModelType::Chat => "chat",
            ModelType::Completion => "completion",
            ModelType::Embedding => "embedding",
            ModelType::Image => "image",
            ModelType::Video => "video",
            ModelType::Tts => "tts",
            ModelType::Stt => "stt",
        }
    }

    pub fn parse(s: &str) -> Option<ModelType> {
        ModelType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// The operations an adapter knows how to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Chat,
    Completion,
    Embedding,
    Image,
    Speech,
    Transcription,
    Translation,
    Video,
}

/// How the gateway speaks to one kind of provider API. The request and
/// answer shapes of the gateway are OpenAI's; an adapter maps them to and
/// from its provider's.
pub trait Adapter: Send + Sync + std::fmt::Debug {
    /// The path of `op` relative to the provider's `base_url`.
    fn path(&self, op: Op) -> &'static str;
    /// The upstream body of `op` for `model` (the provider's own model id)
    /// from the caller's (validated) body: gateway-only fields removed,
    /// `additional_params` merged in.
    fn request(&self, op: Op, model: &str, body: Map<String, Value>) -> Map<String, Value>;
}

/// One model of a provider.
#[derive(Debug, Clone)]
pub struct Model {
    /// The provider's own id (`sim-gpt`).
    pub id: String,
    pub kind: ModelType,
    pub context_window: Option<u64>,
    pub aliases: Vec<String>,
    pub input_per_mtok: Option<Decimal>,
    pub output_per_mtok: Option<Decimal>,
    pub per_image: Option<Decimal>,
    pub per_second: Option<Decimal>,
    /// Answers are cached this long unless a request says otherwise
    /// (`cache_ttl_secs`; `None`: only when a request asks, [`crate::cache`]).
    pub cache_ttl_secs: Option<u64>,
    /// A cache hit costs this percentage of the original's charge
    /// (`cache_hit_price_pct`, default 0).
    pub cache_hit_price_pct: Decimal,
}

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
    pub models: Vec<Model>,
    pub adapter: Arc<dyn Adapter>,
}

/// Every configured provider (empty without a providers file).
#[derive(Debug, Clone, Default)]
pub struct Providers {
    pub providers: Vec<Provider>,
}

impl Providers {
    /// Reads the providers file at `path`; `default_markup` is
    /// `PROVIDER_MARKUP_PCT`. Errors name the file and the line or key.
    pub fn load(path: &Path, default_markup: Decimal) -> Result<Providers, ProvidersError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ProvidersError(format!("{}: {e}", path.display())))?;
        file::parse(&text, &path.display().to_string(), default_markup)
    }

    /// Every (provider, model), in file order.
    pub fn models(&self) -> impl Iterator<Item = (&Provider, &Model)> {
        self.providers
            .iter()
            .flat_map(|p| p.models.iter().map(move |m| (p, m)))
    }

    /// One model by provider and model id.
    pub fn get(&self, provider: &str, model: &str) -> Option<(&Provider, &Model)> {
        let p = self.providers.iter().find(|p| p.id == provider)?;
        Some((p, p.models.iter().find(|m| m.id == model)?))
    }

    /// The model a request names (`provider/model` or an alias; absent:
    /// the first model of type `want`). Unknown → 404; another type → 400.
    pub fn resolve(
        &self,
        name: Option<&str>,
        want: ModelType,
    ) -> Result<(&Provider, &Model), ApiError> {
        let found = match name.map(str::trim) {
            None | Some("") => self.models().find(|(_, m)| m.kind == want).ok_or_else(|| {
                ApiError::NotFound(format!("no {} model is configured", want.as_str()))
            })?,
            Some(name) => match name.split_once('/') {
                Some((p, m)) => {
                    if !self.providers.iter().any(|x| x.id == p) {
                        return Err(ApiError::NotFound(format!("provider {p:?} not found")));
                    }
                    self.get(p, m)
                        .ok_or_else(|| ApiError::NotFound(format!("model {name:?} not found")))?
                }
                None => self
                    .models()
                    .find(|(_, m)| m.aliases.iter().any(|a| a == name))
                    .ok_or_else(|| {
                        ApiError::NotFound(format!(
                            "model {name:?} not found (models are named provider/model)"
                        ))
                    })?,
            },
        };
        if found.1.kind != want {
            return Err(ApiError::BadRequest(format!(
                "model {}/{} is a {} model, not {}",
                found.0.id,
                found.1.id,
                found.1.kind.as_str(),
                want.as_str()
            )));
        }
        Ok(found)
    }
}

fn money(d: Option<Decimal>) -> Value {
    d.map_or(Value::Null, |d| Value::String(d.normalize().to_string()))
}

/// A provider whose key variable is unset: 404 "provider config missing"
/// (spec §7, both formats of the general gateway); which variable is
/// logged, never answered.
pub fn config_missing(p: &Provider) -> ApiError {
    tracing::warn!(provider = %p.id, variable = %p.api_key_env, "provider config missing: its key variable is unset");
    ApiError::NotFound("provider config missing".into())
}

/// The catalogue's view of a model: OpenAI's model object plus its type,
/// context window and prices (decimal strings, USD, before markup).
pub fn model_json(p: &Provider, m: &Model) -> Value {
    let mut pricing = Map::new();
    for (k, v) in [
        ("input_per_mtok", m.input_per_mtok),
        ("output_per_mtok", m.output_per_mtok),
        ("per_image", m.per_image),
        ("per_second", m.per_second),
    ] {
        if v.is_some() {
            pricing.insert(k.into(), money(v));
        }
    }
    pricing.insert("markup_pct".into(), money(Some(p.markup_pct)));
    json!({
        "id": format!("{}/{}", p.id, m.id),
        "object": "model",
        "created": 0,
        "owned_by": p.id,
        "provider": p.id,
        "type": m.kind.as_str(),
        "context_window": m.context_window,
        "aliases": m.aliases,
        "pricing": pricing,
    })
}
