//! The `synthesize` mode: text-to-speech in the gateway's response shape (spec §2).
//!
//! The gateway's request (`text`, `voice_uuid`, ...) becomes the synthesis
//! cluster's (`data`, ...) through the row's `rename`; `output_format`
//! defaults to `mp3` (spec A1) when the caller leaves it out. The answer:
//!
//! | field | from |
//! |---|---|
//! | `request_id` | this request's id (`res_` + 24 hex) |
//! | `voice_uuid` | the request |
//! | `audio_content` | the upstream's base64 audio |
//! | `audio_duration` | upstream `duration` (seconds) |
//! | `raw_response` | the upstream's answer, without its `audio_content` (already above) |
//! | `audio_url` | presigned URL (1 hour) of the decoded audio, stored under `synthesis/<user>/YYYY/MM/DD/HHMMSS-<request_id>.<ext>` |
//! | `expires_at` | when the stored audio is deleted (the row's `retention_days`, 7) |
//! | `billing` | `{"unit": "audio_seconds", "quantity": <seconds>, "charged": "<8 places>"}` |
//! | `resemble_url` | the upstream's own URL of the audio, only when it gave one |
//!
//! The billed seconds are measured from the audio itself ([`gateway_base::audio`]);
//! the upstream's `duration` is billed when it is at most that (a negative
//! or non-finite one is rejected and logged by
//! [`gateway_base::billing::quantity_from_upstream`], never billed as a credit; a
//! longer one is billed at the measured length and logged at error level,
//! [`gateway_models::bounds::measured_at_most`]); when the audio cannot be measured,
//! the answer is 502 and nothing is billed.
//!
//! A request made with a key that has a budget holds, before the upstream
//! call, the charge of the audio its text is expected to make at most
//! ([`bound_seconds`]: [`BOUND_SECONDS_PER_CHAR`] a character, at least
//! [`BOUND_MIN_SECONDS`]); the hold ends with the usage record
//! ([`crate::money::hold_voice`]). It is billed the measured seconds like
//! any request, even beyond the bound (SSML pauses, a slow voice): what is
//! measured is what is billed, and the key's spend then goes past its
//! budget by this one request (logged), which refuses the next.

use base64::Engine;
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

use crate::ctx::{Ctx, Outcome};
use crate::generated::Stored;
use crate::shape;
use gateway_base::billing::{quantity_from_upstream, Charge};
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::PathParams;

/// The audio a character of text is held for, with a budgeted key: 5
/// characters a second, half the pace of slow speech.
pub const BOUND_SECONDS_PER_CHAR: Decimal = Decimal::from_parts(2, 0, 0, false, 1);
/// The least a budgeted synthesis is held for, however short its text.
pub const BOUND_MIN_SECONDS: Decimal = Decimal::from_parts(2, 0, 0, false, 0);

/// The seconds of audio `text` is held for, with a budgeted key.
pub fn bound_seconds(text: &str) -> Decimal {
    (Decimal::from(text.chars().count()) * BOUND_SECONDS_PER_CHAR).max(BOUND_MIN_SECONDS)
}

/// Default output format of the gateway (spec A1).
pub const DEFAULT_OUTPUT_FORMAT: &str = "mp3";
/// Retention of synthesis output when the row gives none (spec §8).
pub const DEFAULT_RETENTION_DAYS: u32 = 7;

/// `synthesize`: the text's bound held, the text synthesized, the audio
/// measured and billed, stored, and answered in the gateway's shape.
pub async fn synthesize(
    ctx: &mut Ctx,
    req: Request,
    params: &PathParams,
) -> Result<Outcome, ApiError> {
    let spec = ctx.spec;
    let mut body = super::common::read_body(ctx, req).await?;
    let voice_uuid = body
        .get("voice_uuid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    body.entry("output_format")
        .or_insert_with(|| Value::from(DEFAULT_OUTPUT_FORMAT));
    let bound = bound_seconds(body.get("text").and_then(Value::as_str).unwrap_or_default());
    let hold = crate::money::hold_voice(&ctx.caller(), async { Ok(ctx.row_charge(bound).charged) })
        .await?;
    let call = super::common::call(ctx, params, Some(&mut body))?;
    shape::shape_body(spec, &mut body)?;
    let answer = call.json(&body).send().await?;
    let upstream_status = answer.status();
    let mut raw = answer.json("synthesis with a body").await?;
    let (audio_content, audio) = take_audio(&mut raw)?;
    let ext = container(&raw, &body, &audio);
    let duration = billed_seconds(&raw, &audio, ext).await?;
    if hold.is_some() && duration > bound {
        tracing::warn!(%duration, %bound, "synthesis longer than its text's bound; billed as measured, past the hold");
    }
    let charge = ctx.meter_row(duration, None);
    let stored = store_audio(ctx, ext, audio).await?;
    let answer = answer_json(ctx, &voice_uuid, &stored, duration, &charge, raw);
    let response = splice_audio(&answer, &audio_content);
    let mut outcome = Outcome::new(response, Some(upstream_status));
    outcome.records.extend(stored.records);
    outcome
        .records
        .extend(hold.map(crate::money::Hold::into_release));
    Ok(outcome)
}

/// The audio's file extension: the format the upstream says it made, else
/// the one asked for, else what its bytes look like (mp3 when unknown).
fn container(raw: &Value, body: &Map<String, Value>, audio: &[u8]) -> &'static str {
    let format = raw
        .get("output_format")
        .and_then(Value::as_str)
        .or(body.get("output_format").and_then(Value::as_str));
    match format {
        Some("wav") => "wav",
        Some("mp3") => "mp3",
        _ => gateway_base::audio::sniff_container(audio).unwrap_or("mp3"),
    }
}

/// Stores the audio for the caller under the row's retention; its record
/// is committed with the audit and usage records.
async fn store_audio(ctx: &Ctx, ext: &'static str, audio: Vec<u8>) -> Result<Stored, ApiError> {
    let user_id = ctx.require_user("synthesis")?;
    let content_type = gateway_base::media::by_ext(ext).map_or("audio/mpeg", |t| t.content_type);
    crate::generated::Media {
        owner: user_id,
        prefix: "synthesis",
        class: "synthesis",
        purpose: "synthesis",
        source: &ctx.request_id,
        suffix: String::new(),
        ext,
        content_type,
        retention_days: ctx.spec.retention_days.unwrap_or(DEFAULT_RETENTION_DAYS) as i64,
        now: chrono::Utc::now(),
    }
    .store_bytes(&ctx.gw, bytes::Bytes::from(audio))
    .await
}

/// The answer in the gateway's shape (the module's table), without its
/// `audio_content`, which [`splice_audio`] puts in.
fn answer_json(
    ctx: &Ctx,
    voice_uuid: &str,
    stored: &Stored,
    duration: Decimal,
    charge: &Charge,
    raw: Value,
) -> Value {
    let resemble_url = ["url", "audio_url", "audio_src"]
        .iter()
        .find_map(|k| raw.get(*k).and_then(Value::as_str))
        .map(str::to_owned);
    let quantity: Value =
        serde_json::from_str(&duration.normalize().to_string()).unwrap_or(Value::Null);
    let mut answer = json!({
        "request_id": ctx.request_id,
        "voice_uuid": voice_uuid,
        "audio_url": stored.url,
        "audio_duration": quantity,
        "expires_at": stored.expires_at,
        "billing": { "unit": ctx.spec.billing.as_str(), "quantity": quantity, "charged": charge.charged_str() },
        "raw_response": raw,
    });
    if let (Some(url), Value::Object(m)) = (resemble_url, &mut answer) {
        m.insert("resemble_url".into(), Value::String(url));
    }
    answer
}

/// The upstream's `audio_content` (taken out of `raw`) and its decoded
/// bytes: 502 when missing or not base64.
fn take_audio(raw: &mut Value) -> Result<(String, Vec<u8>), ApiError> {
    let audio_content = match raw.as_object_mut().and_then(|m| m.remove("audio_content")) {
        Some(Value::String(s)) if !s.is_empty() => s,
        _ => {
            return Err(ApiError::BadGateway(
                "the voice provider answered synthesis without audio".into(),
            ))
        }
    };
    let audio = base64::engine::general_purpose::STANDARD
        .decode(audio_content.as_bytes())
        .map_err(|_| {
            ApiError::BadGateway(
                "the voice provider answered synthesis with audio that is not base64".into(),
            )
        })?;
    Ok((audio_content, audio))
}

/// The seconds billed: the audio measured; the upstream's `duration` is
/// believed only up to it ([`gateway_models::bounds::measured_at_most`]: a longer
/// one is billed at the measured length and logged at error). A negative
/// or non-finite `duration` is rejected (logged), as when there is none.
/// Audio that cannot be measured: 502, nothing billed.
async fn billed_seconds(
    raw: &Value,
    audio: &[u8],
    ext: &str,
) -> Result<rust_decimal::Decimal, ApiError> {
    let reported = quantity_from_upstream("duration", raw.get("duration")).valid();
    let measured = gateway_base::audio::measure(audio, ext).await;
    gateway_models::bounds::measured_at_most(reported, measured).ok_or_else(|| {
        ApiError::BadGateway(
            "the voice provider answered synthesis with audio that could not be measured".into(),
        )
    })
}

/// The answer's JSON with `audio_content` first. It is spliced in as it
/// came: it decoded as standard base64, so it holds only [A-Za-z0-9+/=] and
/// needs no JSON escaping (re-escaping tens of kilobytes per answer was a
/// measured cost).
fn splice_audio(answer: &Value, audio_content: &str) -> gateway_base::body::Response {
    let rest = answer.to_string();
    let mut body = String::with_capacity(rest.len() + audio_content.len() + 20);
    body.push_str("{\"audio_content\":\"");
    body.push_str(audio_content);
    body.push_str("\",");
    body.push_str(&rest[1..]);
    let mut response = http::Response::new(gateway_base::body::full(body));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
