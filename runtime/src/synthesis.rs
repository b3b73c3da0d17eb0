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
//!
//! Seams for the money-and-media work: storing the decoded audio
//! (`audio_url`, `expires_at`), the `billing` object, and `resemble_url`
//! when the upstream supplied a URL are added in [`synthesize`] after the
//! upstream answer is parsed.

use http::StatusCode;
use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::forward::json_response;
use crate::pipeline::{Ctx, Outcome};
use crate::router::Request;
use crate::spec::{Base, PathParams};
use crate::{shape, validate};

/// Default output format of the gateway (spec A1).
pub const DEFAULT_OUTPUT_FORMAT: &str = "mp3";

pub async fn synthesize(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let spec = ctx.spec;
    let mut body = shape::read_json_object(req.into_body(), ctx.gw.config.max_json_bytes).await?;
    validate::body(spec.body, &body)?;
    let voice_uuid = body.get("voice_uuid").and_then(Value::as_str).unwrap_or_default().to_owned();
    body.entry("output_format").or_insert_with(|| Value::from(DEFAULT_OUTPUT_FORMAT));
    let up = spec.upstream.ok_or_else(|| ApiError::Internal(format!("row {} has no upstream", spec.id)))?;
    let mut query = Vec::new();
    let path = shape::upstream_path(spec, up.path, params, &mut query, Some(&mut body))?;
    shape::shape_body(spec, &mut body)?;
    let rb = ctx.gw.upstream.request(&up, &path, &query)?.json(&body);
    let resp = ctx.gw.upstream.send(up.base, rb).await?;
    let upstream_status = resp.status().as_u16();
    let bytes = resp.bytes().await.map_err(|e| ctx.gw.upstream.network_error(up.base, &e))?;
    let mut raw: Value = serde_json::from_slice(&bytes)
        .map_err(|_| ApiError::BadGateway(format!("{} answered synthesis with a body that is not JSON", crate::upstream::provider_name(Base::Synth))))?;
    let audio_content = match raw.as_object_mut().and_then(|m| m.remove("audio_content")) {
        Some(Value::String(s)) if !s.is_empty() => s,
        _ => return Err(ApiError::BadGateway("the voice provider answered synthesis without audio".into())),
    };
    let duration = raw.get("duration").and_then(Value::as_f64);
    let answer = json!({
        "request_id": ctx.request_id,
        "voice_uuid": voice_uuid,
        "audio_content": audio_content,
        "audio_duration": duration,
        "raw_response": raw,
    });
    Ok(Outcome::new(json_response(StatusCode::OK, &answer), Some(upstream_status)))
}
