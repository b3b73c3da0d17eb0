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
    id: String,
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
    id: String,
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
    let hit_pct = price(file, at, "cache_hit_price_pct", hit_pct)?;
    if hit_pct.is_some_and(|p| p > Decimal::ONE_HUNDRED) {
        return Err(ProvidersError(format!(
            "{file}: {at}: cache_hit_price_pct must be from 0 to 100"
        )));
    }
    Ok((ttl, hit_pct.unwrap_or_default()))
}

/// Parses the text of a providers file named `file`: each provider with its
/// models, then the routes, which name them.
pub fn parse(text: &str, file: &str, default_markup: Decimal) -> Result<Providers, ProvidersError> {
    let doc: FileDoc = toml::from_str(text).map_err(|e| ProvidersError(format!("{file}: {e}")))?;
    let mut providers: Vec<Provider> = Vec::new();
    for p in doc.provider {
        let provider = provider(p, &providers, file, default_markup)?;
        providers.push(provider);
    }
    let routes = super::routes::build(doc.route, &providers, file, text).map_err(ProvidersError)?;
    let voices = super::voices::build(doc.voice, &providers, file, text).map_err(ProvidersError)?;
    Ok(Providers {
        providers,
        routes,
        voices,
    })
}

/// One `[[provider]]`, checked against those before it (`earlier`).
fn provider(
    p: ProviderDoc,
    earlier: &[Provider],
    file: &str,
    default_markup: Decimal,
) -> Result<Provider, ProvidersError> {
    let at = format!("provider {:?}", p.id);
    if p.id.is_empty() || p.id.contains('/') {
        return Err(ProvidersError(format!(
            "{file}: {at}: id must be non-empty, without '/'"
        )));
    }
    if earlier.iter().any(|x| x.id == p.id) {
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
        tracing::warn!(provider = %p.id, variable = %p.api_key_env, "the provider's key variable is unset: only BYOK calls can reach it");
    }
    let mut models: Vec<Model> = Vec::new();
    for m in p.model {
        let at = format!("provider {:?} model {:?}", p.id, m.id);
        let model = model(m, &models, &p.kind, adapter.as_ref(), file, &at)?;
        models.push(model);
    }
    Ok(Provider {
        id: p.id,
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
    if m.id.is_empty() {
        return Err(ProvidersError(format!(
            "{file}: {at}: id must be non-empty"
        )));
    }
    if earlier.iter().any(|x| x.id == m.id) {
        return Err(ProvidersError(format!("{file}: {at}: duplicate model id")));
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
    Ok(Model {
        cache_ttl_secs,
        cache_hit_price_pct,
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
        id: m.id,
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
mod speech_tests {
    use super::super::adapter::{Adapter, Op};
    use super::super::model::ModelType;
    use super::super::provider::Provider;
    use super::super::speech::{Speak, Upload};
    use super::super::voices::voice_for;
    use super::parse;
    use rust_decimal::Decimal;
    use serde_json::{json, Map, Value};

    const FILE: &str = r#"
[[provider]]
id = "eleven"
kind = "elevenlabs"
base_url = "http://127.0.0.1:1"
api_key_env = "GW_TEST_UNSET_KEY_VAR"
[[provider.model]]
id = "eleven_flash_v2_5"
type = "tts"
per_1k_chars = "0.30"
[[provider.model]]
id = "scribe_v1"
type = "stt"
per_minute = "0.0067"

[[provider]]
id = "dg"
kind = "deepgram"
base_url = "http://127.0.0.1:1"
api_key_env = "GW_TEST_UNSET_KEY_VAR"
[[provider.model]]
id = "aura-2-thalia-en"
type = "tts"
per_1k_chars = "0.030"

[[provider]]
id = "cart"
kind = "cartesia"
base_url = "http://127.0.0.1:1"
api_key_env = "GW_TEST_UNSET_KEY_VAR"
[[provider.model]]
id = "sonic-2"
type = "tts"
per_1k_chars = "0.05"

[[voice]]
name = "narrator"
eleven = "21m00Tcm4TlvDq8ikWAM"
cart = "694f9389-aac1-45b6-b726-9d9369183238"
dg = "aura-2-thalia-en"
"#;

    fn speak(format: &'static str) -> Speak<'static> {
        Speak {
            text: "héllo",
            voice: Some("v1"),
            speed: None,
            format,
            stream: false,
            extra: Map::new(),
        }
    }

    #[test]
    fn voices_map_per_provider_and_skip_what_cannot_speak() {
        let ps = parse(FILE, "p.toml", Decimal::ZERO).unwrap();
        let dep = |p: &str, m: &str| ps.get(p, m).unwrap();
        let (p, m) = dep("eleven", "eleven_flash_v2_5");
        let v = |asked, p: &Provider, m| voice_for(&ps.voices, asked, p, m, p.adapter.voice_use());
        assert_eq!(
            v(Some("narrator"), p, m),
            Some(Some("21m00Tcm4TlvDq8ikWAM"))
        );
        assert_eq!(v(Some("raw-id"), p, m), Some(Some("raw-id")));
        assert_eq!(v(None, p, m), None, "elevenlabs needs a voice");
        let (dp, dm) = dep("dg", "aura-2-thalia-en");
        assert_eq!(v(Some("narrator"), dp, dm), Some(None));
        assert_eq!(v(None, dp, dm), Some(None));
        assert_eq!(v(Some("other"), dp, dm), None);
        let no_cart = FILE.replace("cart = \"694f9389-aac1-45b6-b726-9d9369183238\"\n", "");
        let ps2 = parse(&no_cart, "p.toml", Decimal::ZERO).unwrap();
        let (cp, cm) = ps2.get("cart", "sonic-2").unwrap();
        assert_eq!(
            voice_for(
                &ps2.voices,
                Some("narrator"),
                cp,
                cm,
                cp.adapter.voice_use()
            ),
            None
        );
    }

    #[test]
    fn each_kind_builds_its_own_call() {
        let ps = parse(FILE, "p.toml", Decimal::ZERO).unwrap();
        let (p, m) = ps.get("eleven", "eleven_flash_v2_5").unwrap();
        let n = p.adapter.speech(m, &speak("wav"), Map::new()).unwrap();
        assert_eq!(n.path, "/v1/text-to-speech/v1?output_format=wav_24000");
        assert_eq!(
            Value::Object(n.body),
            json!({"text": "héllo", "model_id": "eleven_flash_v2_5"})
        );
        let (p, m) = ps.get("dg", "aura-2-thalia-en").unwrap();
        let n = p.adapter.speech(m, &speak("pcm"), Map::new()).unwrap();
        assert_eq!(
            n.path,
            "/v1/speak?model=aura-2-thalia-en&encoding=linear16&container=none&sample_rate=24000"
        );
        assert_eq!(Value::Object(n.body), json!({"text": "héllo"}));
        let (p, m) = ps.get("cart", "sonic-2").unwrap();
        let mut s = speak("mp3");
        s.speed = Some(1.2);
        let n = p.adapter.speech(m, &s, Map::new()).unwrap();
        assert_eq!(n.path, "/tts/bytes");
        assert_eq!(n.body["voice"], json!({"mode": "id", "id": "v1"}));
        assert_eq!(n.body["output_format"]["container"], "mp3");
        assert_eq!(n.body["generation_config"]["speed"], json!(1.2));
        s.speed = Some(3.0);
        let e = p.adapter.speech(m, &s, Map::new()).unwrap_err();
        assert!(e.to_string().contains("speed: a cartesia"), "{e}");
    }

    #[test]
    fn prices_and_kinds_are_checked() {
        let ps = parse(FILE, "p.toml", Decimal::ZERO).unwrap();
        let (_, m) = ps.get("eleven", "scribe_v1").unwrap();
        assert_eq!(
            m.seconds_cost(Decimal::from(90)),
            Some(Decimal::new(10050, 6))
        );
        let (_, m) = ps.get("eleven", "eleven_flash_v2_5").unwrap();
        assert_eq!(m.chars_cost(13), Some(Decimal::new(39, 4)));
        let bad = FILE.replace(
            "id = \"sonic-2\"\ntype = \"tts\"",
            "id = \"ink\"\ntype = \"stt\"",
        );
        let e = parse(&bad, "p.toml", Decimal::ZERO).unwrap_err();
        assert!(e.0.contains("a cartesia provider has no stt models"), "{e}");
        let bad = FILE.replace("eleven = \"21m", "nobody = \"x\"\neleven = \"21m");
        let e = parse(&bad, "p.toml", Decimal::ZERO).unwrap_err();
        assert!(e.0.contains("line 37") && e.0.contains("nobody"), "{e}");
        let bad = FILE.replace("per_minute = \"0.0067\"", "per_1k_chars = \"1\"");
        assert!(parse(&bad, "p.toml", Decimal::ZERO).is_err());
        let _ = (ModelType::Tts, Op::Speech);
    }

    #[test]
    fn vendors_transcripts_read_as_openai() {
        let ps = parse(FILE, "p.toml", Decimal::ZERO).unwrap();
        let (p, m) = ps.get("eleven", "scribe_v1").unwrap();
        let mut form = Map::new();
        form.insert("language".into(), json!("en"));
        assert_eq!(
            p.adapter
                .transcription(Op::Transcription, m, form.clone())
                .unwrap(),
            Upload::Multipart {
                path: "/v1/speech-to-text".into(),
                fields: vec![
                    ("model_id".into(), "scribe_v1".into()),
                    ("language_code".into(), "en".into())
                ]
            }
        );
        form.insert("prompt".into(), json!("x"));
        assert!(p.adapter.transcription(Op::Transcription, m, form).is_err());
        assert!(p
            .adapter
            .transcription(Op::Translation, m, Map::new())
            .is_err());
        let t = p
            .adapter
            .transcript(
                &json!({"text": "hi there", "language_code": "en", "words": [
                {"text": "hi", "start": 0.0, "end": 0.2, "type": "word"},
                {"text": " ", "start": 0.2, "end": 0.25, "type": "spacing"},
                {"text": "there", "start": 0.25, "end": 0.6, "type": "word"}]}),
            )
            .unwrap()
            .unwrap();
        assert_eq!(t.to_json(false), json!({"text": "hi there"}));
        assert_eq!(t.claimed_seconds, Some(json!(0.6)));
        let dg = super::super::deepgram::Deepgram;
        let t = dg
            .transcript(
                &json!({"metadata": {"duration": 3.5}, "results": {"channels": [
                {"alternatives": [{"transcript": "hello", "words": []}]}]}}),
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            (t.text.as_str(), t.claimed_seconds),
            ("hello", Some(json!(3.5)))
        );
    }
}
