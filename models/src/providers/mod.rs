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
//! [`gemini::Gemini`] (`gemini`: Google's Gemini API), and the voice
//! vendors' [`elevenlabs::ElevenLabs`], [`deepgram::Deepgram`] and
//! [`cartesia::Cartesia`] (speech and transcription only, [`speech`];
//! `[[voice]]` aliases, [`voices`]). The gateway speaks
//! OpenAI's shapes; a native adapter translates the request into its
//! provider's ([`Adapter::native`]), the answer back ([`Adapter::answer`])
//! and a stream event by event ([`Adapter::stream`], on the shared
//! [`stream`] translator). The provider's key is read from its
//! environment variable at start-up into an
//! [`gateway_adapters::upstream::llm::ProviderKey`], which only `upstream` presents,
//! in the form the adapter names ([`Adapter::key_form`]).
//!
//! Prices: `input_per_mtok`, `output_per_mtok`, and for providers that
//! report prompt-cache tokens `cache_read_per_mtok` and
//! `cache_write_per_mtok` (each defaulting to `input_per_mtok`); the four
//! counts ([`usage::Tokens`]) are each billed once at their own price.
//! Speech: `per_1k_chars` (the input's Unicode characters) or
//! `per_second`; transcription: `per_second` or `per_minute` of the audio
//! the gateway measured ([`Model::seconds_cost`], [`Model::chars_cost`]).

mod adapter;
pub mod anthropic;
pub mod cartesia;
pub mod convert;
pub mod deepgram;
pub mod elevenlabs;
pub mod file;
pub mod gemini;
mod model;
pub mod openai;
mod provider;
mod registry;
pub mod routes;
pub mod speech;
pub mod stream;
pub mod usage;
pub mod voices;

use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

pub use adapter::{Adapter, Native, Op};
pub use file::ProvidersError;
use gateway_base::errors::ApiError;
pub use model::{Model, ModelType, UserLimits};
pub use provider::Provider;
pub use registry::Providers;
pub use routes::{Deployment, Route, Strategy, Target};
pub use stream::StreamTranslator;
pub use usage::Tokens;
pub use voices::Voice;

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
        ("per_minute", m.per_minute),
        ("per_1k_chars", m.per_1k_chars),
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
