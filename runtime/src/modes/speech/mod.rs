//! `speech`: text to speech through a `tts` model of any kind (OpenAI's,
//! ElevenLabs', Deepgram's, Cartesia's), in OpenAI's request shape
//! (`input`, `voice`, `speed`, `response_format`, `model`, and the
//! provider's own fields in `additional_params`). A route over TTS
//! deployments fails over before the first byte with the caller's voice
//! mapped for the deployment that serves ([`plan`]). The produced audio
//! is stored in the object store (an asset record, 7-day retention) and
//! answered with a presigned URL.
//!
//! Billed at the serving model's `per_1k_chars` by the input's Unicode
//! characters (as voice vendors count them, markup included), else at its
//! `per_second` by the seconds measured here (never the provider's claim).
//! The credit hold is exactly the character charge, or a bound of the
//! audio's length ([`plan::hold_seconds`]). The voices a caller may ask
//! for are listed by [`voices`].

pub mod plan;
mod stream;
pub mod voices;

use http::StatusCode;
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use super::common::read_body;
use crate::ctx::{Ctx, Outcome, Settlement};
use crate::model_call;
use crate::money::Settle;
use gateway_base::body;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::Mode;
use gateway_models::cost::Cost;
use gateway_models::providers::speech::{Speak, FORMATS};
use gateway_store::Record;

pub use plan::{hold_seconds, HOLD_MIN_SECONDS, HOLD_SECONDS_PER_CHAR};

/// Retention of produced speech.
pub const SPEECH_RETENTION_DAYS: i64 = 7;

/// Seconds of `audio` in `format` (one of [`FORMATS`]; `pcm`: 24 kHz,
/// 16-bit, mono).
async fn measure(audio: &[u8], format: &'static str) -> Option<Decimal> {
    if format == "pcm" {
        return Some(gateway_models::providers::speech::pcm_seconds(
            audio.len() as u64
        ));
    }
    gateway_base::audio::measure(audio, format).await
}

/// `speech`.
pub async fn speak(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let (body, format, stream) = read_request(ctx, req).await?;
    let ask = Speak {
        text: body.get("input").and_then(Value::as_str).unwrap_or(""),
        voice: None,
        speed: body.get("speed").and_then(Value::as_f64),
        format,
        stream,
        extra: match body.get("additional_params") {
            Some(Value::Object(extra)) => extra.clone(),
            _ => Map::new(),
        },
    };
    let chars = ask.text.chars().count() as u64;
    let owner = ctx.require_user("speech")?;
    let c = ctx.caller();
    let ready = plan::prepare(&c, &body, &ask).await?;
    let mut settle = ready.settle;
    let started = match model_call::first_byte(&c, ready.plan, &mut settle).await {
        Ok(started) => started,
        Err(e) => {
            settle.abandon();
            return Err(in_callers_words(e));
        }
    };
    let served = model_call::served_headers(&settle);
    if started.2.is_none() {
        settle.abandon();
        return Err(ApiError::BadGateway(
            "the model provider answered speech without audio".into(),
        ));
    }
    if stream {
        let what = stream::Streamed {
            format,
            content_type: content_type(format),
            chars,
            owner,
            request_id: ctx.request_id.clone(),
            max: ctx.gw.table.limit(Mode::Speech),
            retention_days: SPEECH_RETENTION_DAYS,
        };
        return stream::answer(ctx, settle, started, what, served).await;
    }
    let audio = match read_whole(ctx, started).await {
        Ok(audio) => audio,
        Err(e) => {
            settle.abandon();
            return Err(e);
        }
    };
    let mut out = answer(ctx, settle, audio, format, chars).await?;
    out.response.headers_mut().extend(served);
    Ok(out)
}

/// A voice vendor's fields, as the caller named them.
const CALLERS_FIELDS: [(&str, &str); 6] = [
    ("text", "input"),
    ("transcript", "input"),
    ("model_id", "model"),
    ("voice_id", "voice"),
    ("output_format", "response_format"),
    ("voice_settings", "additional_params.voice_settings"),
];

/// A provider's refusal (`field: message; …`) naming each of its fields
/// as the caller named it (ElevenLabs' `text` is the caller's `input`).
fn in_callers_words(e: ApiError) -> ApiError {
    let ApiError::UpstreamRejected(message) = e else {
        return e;
    };
    let parts: Vec<String> = message
        .split("; ")
        .map(|part| match part.split_once(": ") {
            Some((field, rest)) => match CALLERS_FIELDS.iter().find(|(f, _)| *f == field) {
                Some((_, ours)) => format!("{ours}: {rest}"),
                None => part.to_owned(),
            },
            None => part.to_owned(),
        })
        .collect();
    ApiError::UpstreamRejected(parts.join("; "))
}

/// The content type of a speech `format`.
fn content_type(format: &str) -> &'static str {
    gateway_base::media::by_ext(format).map_or("audio/mpeg", |t| t.content_type)
}

/// The answer of the serving deployment's `audio` (its status and bytes):
/// measured, stored and billed.
async fn answer(
    ctx: &Ctx,
    settle: Settle,
    (status, audio): (u16, bytes::Bytes),
    format: &'static str,
    chars: u64,
) -> Result<Outcome, ApiError> {
    let seconds = measure(&audio, format).await.ok_or_else(|| {
        ApiError::BadGateway(format!(
            "the model provider answered speech that is not {format} audio"
        ))
    })?;
    let user_id = ctx.require_user("speech")?;
    let content_type = content_type(format);
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
    let (unit, quantity) = match settle.model.per_1k_chars {
        Some(_) => ("characters", Decimal::from(chars)),
        None => ("audio_seconds", seconds),
    };
    let mut records = stored.records;
    let settled: Vec<Record> = match unit {
        "characters" => settle.chars_records(chars),
        _ => settle.seconds_records("audio_seconds", seconds),
    };
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
            "unit": unit,
            "quantity": quantity.normalize().to_string(),
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
/// (one of [`FORMATS`], `mp3` when absent) set in it, and whether the
/// caller streams (`stream`, taken out of the body).
async fn read_request(
    ctx: &Ctx,
    req: Request,
) -> Result<(Map<String, Value>, &'static str, bool), ApiError> {
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
    let stream = body.remove("stream") == Some(Value::Bool(true));
    let input = body.get("input").and_then(Value::as_str).unwrap_or("");
    if input.trim().is_empty() {
        return Err(ApiError::BadRequest("input: must not be empty".into()));
    }
    gateway_models::bounds::check_additional_params(&body)?;
    Ok((body, format, stream))
}

/// The rest of the serving deployment's audio after its first chunk (the
/// table's `[limits] speech` at most; 502 when empty), with its status.
async fn read_whole(
    ctx: &Ctx,
    (status, mut upstream, first): (
        u16,
        gateway_adapters::upstream::ByteStream,
        Option<bytes::Bytes>,
    ),
) -> Result<(u16, bytes::Bytes), ApiError> {
    use futures_util::StreamExt;
    let max = usize::try_from(ctx.gw.table.limit(Mode::Speech)).unwrap_or(usize::MAX);
    let mut audio = bytes::BytesMut::new();
    let mut next = first;
    while let Some(chunk) = next {
        if audio.len() + chunk.len() > max {
            return Err(ApiError::BadGateway(format!(
                "the model provider answered more than {max} bytes of speech"
            )));
        }
        audio.extend_from_slice(&chunk);
        next = match upstream.next().await {
            Some(Ok(b)) => Some(b),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "speech broke off");
                return Err(ApiError::Network(
                    "network error contacting the model provider: connection closed while reading the answer".into(),
                ));
            }
            None => None,
        };
    }
    if audio.is_empty() {
        return Err(ApiError::BadGateway(
            "the model provider answered speech without audio".into(),
        ));
    }
    Ok((status, audio.freeze()))
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
