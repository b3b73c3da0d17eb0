//! Phases 1 and 4 of a speech request, resolve and hold, and the plan
//! phase 5 tries: the deployments the body names (a route over TTS
//! deployments, `models: [...]` or one `model`), each with the voice it
//! speaks the caller's `voice` in ([`gateway_models::providers::voices::voice_for`]:
//! a deployment that cannot is skipped; none left is a 400 naming the
//! voice) and its own call ([`gateway_models::providers::Adapter::speech`]:
//! a deployment whose vendor cannot take the request, a speed out of its
//! range, is skipped too; none left is that vendor's 400), and the hold of
//! the dearest candidate's most.
//!
//! A candidate's most: `per_1k_chars` of the input's characters (known
//! before the call: exactly the charge), else `per_second` of
//! [`hold_seconds`] (a bound of the audio's length).

use rust_decimal::Decimal;
use serde_json::{Map, Value};

use crate::ctx::Caller;
use crate::model_call::{self, Built};
use crate::money::{self, Settle};
use gateway_adapters::upstream::llm::ProviderKey;
use gateway_base::errors::ApiError;
use gateway_models::bounds::Bound;
use gateway_models::providers::speech::Speak;
use gateway_models::providers::voices::voice_for;
use gateway_models::providers::{Model, ModelType, Op, Provider};
use gateway_models::routing::Plan;

/// Seconds of audio held per character of input (a generous bound: speech
/// runs at about 0.07 s a character).
pub const HOLD_SECONDS_PER_CHAR: Decimal = Decimal::from_parts(25, 0, 0, false, 2);
/// Smallest hold, in seconds of audio.
pub const HOLD_MIN_SECONDS: Decimal = Decimal::from_parts(5, 0, 0, false, 0);

/// The hold's seconds for `chars` characters at `speed`.
pub fn hold_seconds(chars: usize, speed: f64) -> Decimal {
    let speed = Decimal::try_from(speed.clamp(0.25, 4.0)).unwrap_or(Decimal::ONE);
    ((Decimal::from(chars as u64) * HOLD_SECONDS_PER_CHAR).max(HOLD_MIN_SECONDS) / speed)
        .round_dp(3)
}

/// The most a speech of `chars` characters at `speed` can cost on `m`.
fn most(p: &Provider, m: &Model, chars: usize, speed: f64) -> Result<Decimal, ApiError> {
    match m.per_1k_chars {
        Some(_) => money::chars_cost(p, m, chars as u64),
        None => money::seconds_cost(p, m, hold_seconds(chars, speed)),
    }
}

/// A speech request ready to be sent: the plan, its bill (held) and the
/// key of its first candidate.
pub struct Ready {
    pub plan: Plan,
    pub settle: Settle,
}

/// Resolves `body` (the caller's, read and checked) for `ask`, builds
/// each candidate's call and holds the dearest's most.
pub async fn prepare(
    c: &Caller<'_>,
    body: &Map<String, Value>,
    ask: &Speak<'_>,
) -> Result<Ready, ApiError> {
    let r = model_call::resolve(c, body, ModelType::Tts, Op::Speech)?;
    let asked = body.get("voice").and_then(Value::as_str);
    let voices = &c.catalogue.voices;
    let chars = ask.text.chars().count();
    let speed = ask.speed.unwrap_or(1.0);
    let mut built = Vec::with_capacity(r.list.len());
    let mut max_cost = Decimal::ZERO;
    let mut first: Option<(&Provider, &Model)> = None;
    let mut refused: Option<ApiError> = None;
    for &(p, m) in &r.list {
        let Some(voice) = voice_for(voices, asked, p, m, p.adapter.voice_use()) else {
            continue;
        };
        let speak = Speak {
            voice,
            ..ask.clone()
        };
        let request = gateway_models::providers::openai::request(Op::Speech, &m.id, body.clone());
        // A deployment that cannot take the request (a speed its vendor
        // has not) is skipped; when none can, the first refusal is the
        // answer.
        let native = match p.adapter.speech(m, &speak, request) {
            Ok(native) => native,
            Err(e) => {
                refused.get_or_insert(e);
                continue;
            }
        };
        max_cost = max_cost.max(most(p, m, chars, speed)?);
        first.get_or_insert((p, m));
        built.push(Built {
            name: format!("{}/{}", p.id, m.id),
            p,
            m,
            bound: Bound::default(),
            native,
            own: false,
        });
    }
    let Some((p0, m0)) = first else {
        return Err(refused.unwrap_or_else(|| no_voice(asked, body)));
    };
    let route = r.route.map(|r| r.name.as_str());
    let byok = r.byok.as_deref();
    let (settle, key): (Settle, ProviderKey) =
        model_call::hold_for(c, p0, m0, route, byok, max_cost).await?;
    let plan = model_call::plan(r.route, built, &settle, key, &[]);
    Ok(Ready { plan, settle })
}

/// No deployment of the request's model speaks its voice: 400 naming it.
fn no_voice(asked: Option<&str>, body: &Map<String, Value>) -> ApiError {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("the default tts model");
    ApiError::BadRequest(match asked {
        Some(v) => format!("voice: no deployment of {model} has the voice {v:?}"),
        None => format!("voice: {model} needs a voice"),
    })
}
