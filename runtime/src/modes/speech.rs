//! `speech`: text to speech through a `tts` model. The produced audio is
//! stored in the object store (an asset record, 7-day retention) and
//! answered with a presigned URL; billed by its seconds at the model's
//! `per_second` price, measured here (OpenAI-style providers do not report
//! a duration). The credit hold is an upper bound of the audio's length:
//! [`HOLD_SECONDS_PER_CHAR`] per character of `input` (at least
//! [`HOLD_MIN_SECONDS`]) divided by `speed`.

use http::StatusCode;
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use super::common::read_body;
use crate::ctx::{Ctx, Outcome, Settlement};
use crate::model_call::pick_model;
use crate::money;
use gateway_base::body;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::Mode;
use gateway_models::cost::Cost;
use gateway_models::providers::{ModelType, Op};

/// Retention of produced speech.
pub const SPEECH_RETENTION_DAYS: i64 = 7;
/// Seconds of audio held per character of input (a generous bound: speech
/// runs at about 0.07 s a character).
pub const HOLD_SECONDS_PER_CHAR: Decimal = Decimal::from_parts(25, 0, 0, false, 2);
/// Smallest hold, in seconds of audio.
pub const HOLD_MIN_SECONDS: Decimal = Decimal::from_parts(5, 0, 0, false, 0);
/// Formats whose length the gateway can measure (OpenAI's `pcm`: 24 kHz,
/// 16-bit, mono).
pub const FORMATS: [&str; 3] = ["mp3", "wav", "pcm"];

/// The hold's seconds for `chars` characters at `speed`.
pub fn hold_seconds(chars: usize, speed: f64) -> Decimal {
    let speed = Decimal::try_from(speed.clamp(0.25, 4.0)).unwrap_or(Decimal::ONE);
    ((Decimal::from(chars as u64) * HOLD_SECONDS_PER_CHAR).max(HOLD_MIN_SECONDS) / speed)
        .round_dp(3)
}

/// Seconds of `audio` in `format` (one of [`FORMATS`]).
async fn measure(audio: &[u8], format: &'static str) -> Option<Decimal> {
    if format == "pcm" {
        return Some(gateway_base::audio::seconds_of(
            audio.len() as u64 / 2,
            24_000,
        ));
    }
    gateway_base::audio::measure(audio, format).await
}

/// `speech`.
pub async fn speak(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let (body, format) = read_request(ctx, req).await?;
    let input = body.get("input").and_then(Value::as_str).unwrap_or("");
    let chars = input.chars().count();
    let speed = body.get("speed").and_then(Value::as_f64).unwrap_or(1.0);
    let (settle, key) = pick_model(
        &ctx.caller(),
        body.get("model").and_then(Value::as_str),
        body.get("byok_api_key").and_then(Value::as_str),
        ModelType::Tts,
        |p, m| money::seconds_cost(p, m, hold_seconds(chars, speed)),
    )
    .await?;
    let (status, audio) = fetch_audio(ctx, &settle, &key, body).await?;
    let seconds = measure(&audio, format).await.ok_or_else(|| {
        ApiError::BadGateway(format!(
            "the model provider answered speech that is not {format} audio"
        ))
    })?;
    let user_id = ctx.require_user("speech")?;
    let content_type = gateway_base::media::by_ext(format).map_or("audio/mpeg", |t| t.content_type);
    let size = audio.len() as u64;
    let stored = crate::generated::Media {
        owner: user_id,
        prefix: "speech",
        class: "speech",
        purpose: "tts",
        source: &ctx.request_id,
        suffix: String::new(),
        ext: format,
        content_type,
        retention_days: SPEECH_RETENTION_DAYS,
        now: chrono::Utc::now(),
    }
    .store_bytes(&ctx.gw, audio)
    .await?;
    let model = format!("{}/{}", settle.provider.id, settle.model.id);
    let byok = settle.byok;
    let mut records = stored.records;
    let settled = settle.seconds_records("audio_seconds", seconds);
    let cost = Cost::of(&settled);
    let charged = cost.map(|c| c.charged).unwrap_or_default();
    records.extend(settled);
    let mut v = json!({
        "audio_url": stored.url,
        "audio_duration": seconds.normalize().to_string().parse::<f64>().unwrap_or(0.0),
        "format": format,
        "content_type": content_type,
        "size_bytes": size,
        "model": model,
        "expires_at": stored.expires_at,
        "billing": {
            "unit": "audio_seconds",
            "quantity": seconds.normalize().to_string(),
            "charged": charged.normalize().to_string(),
            "byok": byok,
        },
    });
    if let Some(c) = cost {
        c.annotate(&mut v);
    }
    let mut out = Outcome::new(body::json(StatusCode::OK, &v), Some(status))
        .settled(Settlement::ByModeRecords);
    out.records = records;
    Ok(out)
}

/// The request's body, checked (a non-empty `input`, no
/// `additional_params` over a priced field), with its `response_format`
/// (one of [`FORMATS`], `mp3` when absent) set in it.
async fn read_request(
    ctx: &Ctx,
    req: Request,
) -> Result<(Map<String, Value>, &'static str), ApiError> {
    let mut body = read_body(ctx, req).await?;
    let format: &'static str = match body.get("response_format").and_then(Value::as_str) {
        None => "mp3",
        Some(f) => FORMATS.into_iter().find(|x| *x == f).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "response_format: must be one of {}",
                FORMATS.join(", ")
            ))
        })?,
    };
    body.insert("response_format".into(), json!(format));
    let input = body.get("input").and_then(Value::as_str).unwrap_or("");
    if input.trim().is_empty() {
        return Err(ApiError::BadRequest("input: must not be empty".into()));
    }
    gateway_models::bounds::check_additional_params(&body)?;
    Ok((body, format))
}

/// The provider's audio for `body` on the picked model (the table's
/// `[limits] speech` at most; 502 when empty), with its status.
async fn fetch_audio(
    ctx: &Ctx,
    settle: &money::Settle,
    key: &gateway_adapters::upstream::llm::ProviderKey,
    body: Map<String, Value>,
) -> Result<(u16, bytes::Bytes), ApiError> {
    let p = &settle.provider;
    let upstream_body =
        gateway_models::providers::openai::request(Op::Speech, &settle.model.id, body);
    let answer = ctx
        .gw
        .upstream
        .llm_call(
            gateway_base::spec::Method::Post,
            &p.base_url,
            p.adapter.path(Op::Speech),
            key,
        )
        .json(&upstream_body)
        .send()
        .await?;
    let status = answer.status();
    let max = usize::try_from(ctx.gw.table.limit(Mode::Speech)).unwrap_or(usize::MAX);
    let audio = answer.bytes(max).await?;
    if audio.is_empty() {
        return Err(ApiError::BadGateway(
            "the model provider answered speech without audio".into(),
        ));
    }
    Ok((status, audio))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_bounds() {
        assert_eq!(hold_seconds(4, 1.0), Decimal::from(5));
        assert_eq!(hold_seconds(100, 1.0), Decimal::from(25));
        assert_eq!(hold_seconds(100, 0.25), Decimal::from(100));
        assert_eq!(hold_seconds(100, 4.0), Decimal::new(625, 2));
    }
}
