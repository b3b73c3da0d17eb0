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
//! A request names a model `provider/model` (or an alias of one, or a
//! route: [`routes`], several deployments under one name); each
//! provider speaks through an [`Adapter`] chosen by its `kind`:
//! [`openai::OpenAi`] (`openai`: the body passes through),
//! [`anthropic::Anthropic`] (`anthropic`: Anthropic's Messages API) and
//! [`gemini::Gemini`] (`gemini`: Google's Gemini API). The gateway speaks
//! OpenAI's shapes; a native adapter translates the request into its
//! provider's ([`Adapter::native`]), the answer back ([`Adapter::answer`])
//! and a stream event by event ([`Adapter::stream`], on the shared
//! [`stream`] translator). The provider's key is read from its
//! environment variable at start-up into an
//! [`crate::upstream::llm::ProviderKey`], which only `upstream` presents,
//! in the form the adapter names ([`Adapter::key_form`]).
//!
//! Prices: `input_per_mtok`, `output_per_mtok`, and for providers that
//! report prompt-cache tokens `cache_read_per_mtok` and
//! `cache_write_per_mtok` (each defaulting to `input_per_mtok`); the four
//! counts ([`usage::Tokens`]) are each billed once at their own price.

pub mod anthropic;
pub mod convert;
pub mod file;
pub mod gemini;
pub mod openai;
pub mod routes;
pub mod stream;
pub mod usage;

use std::path::Path;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use crate::errors::ApiError;
use crate::upstream::llm::{KeyForm, ProviderKey};
pub use file::ProvidersError;
pub use routes::{Deployment, Route, Strategy, Target};
pub use stream::StreamTranslator;
pub use usage::Tokens;

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
    /// The path of `op` relative to the provider's `base_url` (OpenAI's;
    /// a native adapter's own path comes with [`Adapter::native`]).
    fn path(&self, op: Op) -> &'static str;
    /// Whether models of type `t` can be called through this adapter (the
    /// providers file is refused otherwise).
    fn supports(&self, t: ModelType) -> bool {
        let _ = t;
        true
    }
    /// How the provider's key is presented.
    fn key_form(&self) -> KeyForm {
        KeyForm::Bearer
    }
    /// The API its chat bodies speak, which says where an image can be
    /// in them (their bound, [`crate::bounds::chat`]).
    fn shape(&self) -> crate::bounds::Shape {
        crate::bounds::Shape::OpenAi
    }
    /// The call actually sent for `op` on `m`: the path (relative to
    /// `base_url`, per operation and per stream) and the provider's body,
    /// from [`openai::request`]'s body. 400 for what the provider cannot
    /// take. OpenAI's: the path of `op` and the body unchanged.
    fn native(&self, op: Op, m: &Model, body: Map<String, Value>) -> Result<Native, ApiError> {
        let _ = m;
        Ok(Native {
            path: self.path(op).to_owned(),
            body,
        })
    }
    /// The provider's (successful, whole) answer of `op` as OpenAI's
    /// (`model`: the provider's model id). 502 when it is not the
    /// provider's shape.
    fn answer(&self, op: Op, model: &str, v: Value) -> Result<Value, ApiError> {
        let _ = (op, model);
        Ok(v)
    }
    /// The translator of a streamed answer of `op` into OpenAI chunks
    /// (`include_usage`: the caller asked for a usage chunk); `None`: the
    /// provider streams OpenAI's chunks itself.
    fn stream(
        &self,
        op: Op,
        model: &str,
        include_usage: bool,
    ) -> Option<Box<dyn StreamTranslator>> {
        let _ = (op, model, include_usage);
        None
    }
}

/// The call a native adapter makes: path and body in its provider's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Native {
    /// Relative to the provider's `base_url`, query included.
    pub path: String,
    pub body: Map<String, Value>,
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
    /// Prompt tokens read from the provider's cache (default: the input price).
    pub cache_read_per_mtok: Option<Decimal>,
    /// Prompt tokens written to the provider's cache (default: the input price).
    pub cache_write_per_mtok: Option<Decimal>,
    pub per_image: Option<Decimal>,
    pub per_second: Option<Decimal>,
    /// The reply's length when the caller gives none and the provider needs
    /// one (Anthropic's required `max_tokens`); default
    /// [`crate::bounds::DEFAULT_MAX_OUTPUT`].
    pub max_output_tokens: Option<u64>,
    /// Answers are cached this long unless a request says otherwise
    /// (`cache_ttl_secs`; `None`: only when a request asks, [`crate::cache`]).
    pub cache_ttl_secs: Option<u64>,
    /// A cache hit costs this percentage of the original's charge
    /// (`cache_hit_price_pct`, default 0).
    pub cache_hit_price_pct: Decimal,
}

impl Model {
    /// The price of cache reads: `cache_read_per_mtok`, else the input price.
    pub fn cache_read_price(&self) -> Option<Decimal> {
        self.cache_read_per_mtok.or(self.input_per_mtok)
    }

    /// The price of cache writes: `cache_write_per_mtok`, else the input price.
    pub fn cache_write_price(&self) -> Option<Decimal> {
        self.cache_write_per_mtok.or(self.input_per_mtok)
    }
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
    /// The file's `[[route]]`s ([`routes`]).
    pub routes: Vec<Route>,
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

    /// The route named `name`.
    pub fn route(&self, name: &str) -> Option<&Route> {
        self.routes.iter().find(|r| r.name == name.trim())
    }

    /// The provider and model of a deployment.
    pub fn deployment(&self, d: Deployment) -> (&Provider, &Model) {
        let p = &self.providers[d.provider];
        (p, &p.models[d.model])
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
                    .or_else(|| {
                        let r = self.route(name)?;
                        Some(self.deployment(r.targets[0].deployment))
                    })
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
        ("cache_read_per_mtok", m.cache_read_per_mtok),
        ("cache_write_per_mtok", m.cache_write_per_mtok),
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

/// The catalogue's view of a route: a model object named as callers send
/// it, its type, strategy, targets (with weights) and fallbacks.
pub fn route_json(providers: &Providers, r: &Route) -> Value {
    let name = |d: Deployment| {
        let (p, m) = providers.deployment(d);
        format!("{}/{}", p.id, m.id)
    };
    let strategy = match r.strategy {
        Strategy::Weighted => "weighted",
        Strategy::LeastLatency => "least-latency",
        Strategy::Priority => "priority",
    };
    json!({
        "id": r.name,
        "object": "model",
        "created": 0,
        "owned_by": "gateway",
        "type": r.kind.as_str(),
        "route": {
            "strategy": strategy,
            "targets": r.targets.iter().map(|t| json!({"model": name(t.deployment), "weight": t.weight})).collect::<Vec<_>>(),
            "fallbacks": r.fallbacks.iter().map(|d| name(*d)).collect::<Vec<_>>(),
        },
    })
}
