//! Parsing the providers file into [`Providers`]: TOML errors carry the
//! file and line (from `toml`), checks after parsing name the file and the
//! provider/model key at fault.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde::Deserialize;

use super::adapter::Adapter;
use super::model::{Model, ModelType};
use super::provider::Provider;
use super::registry::Providers;
use super::{anthropic, cartesia, deepgram, elevenlabs, gemini, openai};
use gateway_adapters::upstream::llm::ProviderKey;

impl Providers {
    /// Reads the providers file at `path`; `default_markup` is
    /// `PROVIDER_MARKUP_PCT`. Errors name the file and the line or key.
    pub fn load(path: &Path, default_markup: Decimal) -> Result<Providers, ProvidersError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ProvidersError(format!("{}: {e}", path.display())))?;
        parse(&text, &path.display().to_string(), default_markup)
    }
}

/// Why the providers file could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("providers file {0}")]
pub struct ProvidersError(pub String);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default)]
    provider: Vec<ProviderDoc>,
    #[serde(default)]
    route: Vec<super::routes::RouteDoc>,
    #[serde(default)]
    voice: Vec<super::voices::VoiceDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderDoc {
    id: toml::Spanned<String>,
    kind: String,
    base_url: String,
    api_key_env: String,
    markup_pct: Option<toml::Value>,
    /// The provider serves OpenAI's Responses API itself (`/responses`).
    #[serde(default)]
    responses: bool,
    #[serde(default)]
    model: Vec<ModelDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelDoc {
    id: toml::Spanned<String>,
    #[serde(rename = "type")]
    kind: String,
    context_window: Option<u64>,
    #[serde(default)]
    aliases: Vec<String>,
    input_per_mtok: Option<String>,
    output_per_mtok: Option<String>,
    cache_read_per_mtok: Option<String>,
    cache_write_per_mtok: Option<String>,
    per_image: Option<String>,
    per_second: Option<String>,
    per_minute: Option<String>,
    per_1k_chars: Option<String>,
    input_audio_per_mtok: Option<String>,
    output_audio_per_mtok: Option<String>,
    max_output_tokens: Option<u64>,
    cache_ttl_secs: Option<u64>,
    cache_hit_price_pct: Option<String>,
    batch_price_pct: Option<String>,
    rpm: Option<u64>,
    tpm: Option<u64>,
}

fn price(
    file: &str,
    at: &str,
    key: &str,
    v: Option<String>,
) -> Result<Option<Decimal>, ProvidersError> {
    let Some(v) = v else { return Ok(None) };
    let d = Decimal::from_str(v.trim())
        .map_err(|e| ProvidersError(format!("{file}: {at}: {key} {v:?} is not a decimal: {e}")))?;
    if d.is_sign_negative() {
        return Err(ProvidersError(format!(
            "{file}: {at}: {key} {v:?} is negative"
        )));
    }
    Ok(Some(d))
}

/// The adapter of a provider's `kind`.
fn adapter_of(kind: &str, file: &str, at: &str) -> Result<Arc<dyn Adapter>, ProvidersError> {
    Ok(match kind {
        "openai" => Arc::new(openai::OpenAi),
        "anthropic" => Arc::new(anthropic::Anthropic),
        "gemini" => Arc::new(gemini::Gemini),
        "elevenlabs" => Arc::new(elevenlabs::ElevenLabs),
        "deepgram" => Arc::new(deepgram::Deepgram),
        "cartesia" => Arc::new(cartesia::Cartesia),
        other => {
            return Err(ProvidersError(format!(
            "{file}: {at}: kind {other:?} is not supported (supported: openai, anthropic, gemini, elevenlabs, deepgram, cartesia)"
        )))
        }
    })
}

/// A model's response-cache keys ([`crate::cache`]): `cache_ttl_secs`
/// (1 to the cache's longest), `cache_hit_price_pct` (0 to 100, default 0).
fn cache_keys(
    file: &str,
    at: &str,
    ttl: Option<u64>,
    hit_pct: Option<String>,
) -> Result<(Option<u64>, Decimal), ProvidersError> {
    if ttl.is_some_and(|t| t == 0 || t > crate::cache::MAX_TTL.as_secs()) {
        return Err(ProvidersError(format!(
            "{file}: {at}: cache_ttl_secs must be from 1 to {}",
            crate::cache::MAX_TTL.as_secs()
        )));
    }
    Ok((
        ttl,
        pct(file, at, "cache_hit_price_pct", hit_pct)?.unwrap_or_default(),
    ))
}

/// A percentage of a price (0 to 100).
fn pct(
    file: &str,
    at: &str,
    key: &str,
    v: Option<String>,
) -> Result<Option<Decimal>, ProvidersError> {
    let p = price(file, at, key, v)?;
    if p.is_some_and(|p| p > Decimal::ONE_HUNDRED) {
        return Err(ProvidersError(format!(
            "{file}: {at}: {key} must be from 0 to 100"
        )));
    }
    Ok(p)
}

/// The line of a span's start in `text` (from 1).
fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// Parses the text of a providers file named `file`: each provider with its
/// models, then the routes, which name them. Every mistake of the
/// providers and their models is found at once (the error holds one line
/// per mistake, each naming the file, the line and the key); a route or a
/// voice is checked only when the providers are sound (it names them).
pub fn parse(text: &str, file: &str, default_markup: Decimal) -> Result<Providers, ProvidersError> {
    let doc: FileDoc = toml::from_str(text).map_err(|e| ProvidersError(format!("{file}: {e}")))?;
    let mut providers: Vec<Provider> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    for p in doc.provider {
        let here = format!("{file}: line {}", line_of(text, p.id.span().start));
        match provider(p, &providers, &here, default_markup, text, &mut errors) {
            Ok(provider) => providers.push(provider),
            Err(e) => errors.push(e.0),
        }
    }
    if !errors.is_empty() {
        return Err(ProvidersError(errors.join("\n")));
    }
    let routes = super::routes::build(doc.route, &providers, file, text).map_err(ProvidersError)?;
    let voices = super::voices::build(doc.voice, &providers, file, text).map_err(ProvidersError)?;
    let mut catalogue = Providers {
        providers,
        routes,
        voices,
        version: String::new(),
    };
    catalogue.version = catalogue.digest();
    Ok(catalogue)
}

/// One `[[provider]]`, checked against those before it (`earlier`).
fn provider(
    p: ProviderDoc,
    earlier: &[Provider],
    file: &str,
    default_markup: Decimal,
    text: &str,
    errors: &mut Vec<String>,
) -> Result<Provider, ProvidersError> {
    let id = p.id.into_inner();
    let at = format!("provider {id:?}");
    if id.is_empty() || id.contains('/') {
        return Err(ProvidersError(format!(
            "{file}: {at}: id must be non-empty, without '/'"
        )));
    }
    if earlier.iter().any(|x| x.id == id) {
        return Err(ProvidersError(format!(
            "{file}: {at}: duplicate provider id"
        )));
    }
    let adapter = adapter_of(&p.kind, file, &at)?;
    let base_url = p.base_url.trim().trim_end_matches('/').to_owned();
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(ProvidersError(format!(
            "{file}: {at}: base_url {base_url:?} is not an http(s) URL"
        )));
    }
    let markup_pct = match p.markup_pct {
        None => default_markup,
        Some(v) => markup(&v, file, &at)?,
    };
    if p.responses && p.kind != "openai" {
        return Err(ProvidersError(format!(
            "{file}: {at}: responses: only an `openai` provider serves OpenAI's Responses API (the others are translated)"
        )));
    }
    let key = ProviderKey::from_env(&p.api_key_env);
    if key.is_none() {
        tracing::warn!(provider = %id, variable = %p.api_key_env, "the provider's key variable is unset: only BYOK calls can reach it");
    }
    let mut models: Vec<Model> = Vec::new();
    // A model's mistake is its own line of `errors`; the provider stays
    // (with its sound models) so that the next providers are checked
    // against it.
    let base = file.split(": line ").next().unwrap_or(file);
    for m in p.model {
        let here = format!("{base}: line {}", line_of(text, m.id.span().start));
        let at = format!("provider {id:?} model {:?}", m.id.get_ref());
        match model(m, &models, &p.kind, adapter.as_ref(), &here, &at) {
            Ok(model) => models.push(model),
            Err(e) => errors.push(e.0),
        }
    }
    Ok(Provider {
        id,
        kind: p.kind,
        base_url,
        key,
        api_key_env: p.api_key_env,
        markup_pct,
        responses: p.responses,
        models,
        adapter,
    })
}

/// A provider's `markup_pct`, written as a string or a number.
fn markup(v: &toml::Value, file: &str, at: &str) -> Result<Decimal, ProvidersError> {
    let text = match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Float(_) | toml::Value::Integer(_) => v.to_string(),
        _ => String::new(),
    };
    gateway_base::billing::parse_markup(&text)
        .map_err(|e| ProvidersError(format!("{file}: {at}: markup_pct: {e}")))
}

/// One `[[provider.model]]` of a provider of `kind` served by `adapter`,
/// checked against the provider's models before it (`earlier`).
fn model(
    mut m: ModelDoc,
    earlier: &[Model],
    provider_kind: &str,
    adapter: &dyn Adapter,
    file: &str,
    at: &str,
) -> Result<Model, ProvidersError> {
    let id = m.id.into_inner();
    if id.is_empty() || earlier.iter().any(|x| x.id == id) {
        let why = match id.is_empty() {
            true => "id must be non-empty",
            false => "duplicate model id",
        };
        return Err(ProvidersError(format!("{file}: {at}: {why}")));
    }
    let kind = ModelType::parse(&m.kind).ok_or_else(|| {
        ProvidersError(format!(
            "{file}: {at}: type {:?} is not one of chat, completion, embedding, image, video, tts, stt, realtime",
            m.kind
        ))
    })?;
    if !adapter.supports(kind) || (kind == ModelType::Realtime && adapter.live_path(kind).is_none())
    {
        return Err(ProvidersError(format!(
            "{file}: {at}: a {provider_kind} provider has no {} models",
            kind.as_str()
        )));
    }
    if m.max_output_tokens == Some(0) {
        return Err(ProvidersError(format!(
            "{file}: {at}: max_output_tokens must be at least 1"
        )));
    }
    let (cache_ttl_secs, cache_hit_price_pct) =
        cache_keys(file, at, m.cache_ttl_secs, m.cache_hit_price_pct.take())?;
    if m.per_second.is_some() && m.per_minute.is_some() {
        return Err(ProvidersError(format!(
            "{file}: {at}: per_second and per_minute: give one price of the audio's length"
        )));
    }
    if (m.input_audio_per_mtok.is_some() || m.output_audio_per_mtok.is_some())
        && kind != ModelType::Realtime
    {
        return Err(ProvidersError(format!(
            "{file}: {at}: input_audio_per_mtok and output_audio_per_mtok price a realtime model's audio; this is a {} model",
            kind.as_str()
        )));
    }
    if m.per_1k_chars.is_some() && kind != ModelType::Tts {
        return Err(ProvidersError(format!(
            "{file}: {at}: per_1k_chars prices a tts model's input; this is a {} model",
            kind.as_str()
        )));
    }
    let limits = super::model::UserLimits::read(m.rpm, m.tpm)
        .map_err(|e| ProvidersError(format!("{file}: {at}: {e}")))?;
    Ok(Model {
        limits,
        cache_ttl_secs,
        cache_hit_price_pct,
        batch_price_pct: pct(file, at, "batch_price_pct", m.batch_price_pct)?
            .unwrap_or(super::model::DEFAULT_BATCH_PRICE_PCT),
        input_per_mtok: price(file, at, "input_per_mtok", m.input_per_mtok)?,
        output_per_mtok: price(file, at, "output_per_mtok", m.output_per_mtok)?,
        cache_read_per_mtok: price(file, at, "cache_read_per_mtok", m.cache_read_per_mtok)?,
        cache_write_per_mtok: price(file, at, "cache_write_per_mtok", m.cache_write_per_mtok)?,
        max_output_tokens: m.max_output_tokens,
        per_image: price(file, at, "per_image", m.per_image)?,
        per_second: price(file, at, "per_second", m.per_second)?,
        per_minute: price(file, at, "per_minute", m.per_minute)?,
        per_1k_chars: price(file, at, "per_1k_chars", m.per_1k_chars)?,
        input_audio_per_mtok: price(file, at, "input_audio_per_mtok", m.input_audio_per_mtok)?,
        output_audio_per_mtok: price(file, at, "output_audio_per_mtok", m.output_audio_per_mtok)?,
        id,
        kind,
        context_window: m.context_window,
        aliases: m.aliases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[provider]]
id = "sim"
kind = "openai"
base_url = "http://127.0.0.1:9100/v1/"
api_key_env = "GW_TEST_UNSET_KEY_VAR"
markup_pct = 10.0
[[provider.model]]
id = "sim-gpt"
type = "chat"
context_window = 8192
aliases = ["gpt"]
input_per_mtok = "2.00"
output_per_mtok = "8.00"
[[provider.model]]
id = "sim-embed"
type = "embedding"
input_per_mtok = "0.10"
"#;

    #[test]
    fn a_good_file_parses() {
        let p = parse(GOOD, "p.toml", Decimal::from(20)).unwrap();
        let sim = &p.providers[0];
        assert_eq!(sim.base_url, "http://127.0.0.1:9100/v1");
        assert_eq!(sim.markup_pct, Decimal::from_str("10.0").unwrap());
        assert!(sim.key.is_none());
        let (_, m) = p.resolve(Some("sim/sim-gpt"), ModelType::Chat).unwrap();
        assert_eq!(m.input_per_mtok, Some(Decimal::from_str("2.00").unwrap()));
        assert_eq!(
            p.resolve(Some("gpt"), ModelType::Chat).unwrap().1.id,
            "sim-gpt"
        );
        assert_eq!(
            p.resolve(None, ModelType::Embedding).unwrap().1.id,
            "sim-embed"
        );
        assert_eq!(
            p.resolve(Some("sim/none"), ModelType::Chat)
                .unwrap_err()
                .status(),
            404
        );
        assert_eq!(
            p.resolve(Some("x/sim-gpt"), ModelType::Chat)
                .unwrap_err()
                .status(),
            404
        );
        assert_eq!(
            p.resolve(Some("sim/sim-embed"), ModelType::Chat)
                .unwrap_err()
                .status(),
            400
        );
    }

    #[test]
    fn a_batch_price_is_half_the_list_price_unless_the_file_says() {
        let p = parse(GOOD, "p.toml", Decimal::ZERO).unwrap();
        let (_, m) = p.resolve(Some("sim/sim-gpt"), ModelType::Chat).unwrap();
        assert_eq!(m.batch_price_pct, Decimal::from(50));
        let half = m.at_batch_price();
        assert_eq!(half.input_per_mtok, Some(Decimal::from(1)));
        assert_eq!(half.output_per_mtok, Some(Decimal::from(4)));
        let set = GOOD.replace(
            "output_per_mtok = \"8.00\"",
            "output_per_mtok = \"8.00\"\nbatch_price_pct = \"25\"",
        );
        let p = parse(&set, "p.toml", Decimal::ZERO).unwrap();
        let (_, m) = p.resolve(Some("sim/sim-gpt"), ModelType::Chat).unwrap();
        assert_eq!(m.at_batch_price().output_per_mtok, Some(Decimal::from(2)));
        let over = GOOD.replace(
            "output_per_mtok = \"8.00\"",
            "output_per_mtok = \"8.00\"\nbatch_price_pct = \"101\"",
        );
        let e = parse(&over, "p.toml", Decimal::ZERO).unwrap_err();
        assert!(
            e.0.contains("batch_price_pct must be from 0 to 100") && e.0.contains("sim-gpt"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        let e = parse("[[provider]]\nid = 3\n", "p.toml", Decimal::ZERO).unwrap_err();
        assert!(e.0.contains("p.toml") && e.0.contains("line 2"), "{e}");
        let bad = GOOD.replace("\"8.00\"", "\"eight\"");
        let e = parse(&bad, "p.toml", Decimal::ZERO).unwrap_err();
        assert!(
            e.0.contains("model \"sim-gpt\"") && e.0.contains("output_per_mtok"),
            "{e}"
        );
        let bad = GOOD.replace("type = \"chat\"", "type = \"chatty\"");
        assert!(parse(&bad, "p.toml", Decimal::ZERO)
            .unwrap_err()
            .0
            .contains("chatty"));
        let bad = GOOD.replace("kind = \"openai\"", "kind = \"anthropic\"");
        let e = parse(&bad, "p.toml", Decimal::ZERO).unwrap_err();
        assert!(e.0.contains("has no embedding models"), "{e}");
        assert!(parse(
            &GOOD.replace("kind = \"openai\"", "kind = \"gemini\""),
            "p.toml",
            Decimal::ZERO
        )
        .is_ok());
        let bad = GOOD.replace("kind = \"openai\"", "kind = \"other\"");
        assert!(parse(&bad, "p.toml", Decimal::ZERO)
            .unwrap_err()
            .0
            .contains("other"));
    }
}

#[cfg(test)]
mod speech_tests;
