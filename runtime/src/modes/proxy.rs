//! Pass-through modes: `proxy` and `fields`.
//!
//! Bodies are read (bounded) only where the gateway must validate or change
//! them; answers are streamed back as they arrive, except the small JSON
//! answers the gateway must read (a create's new id, a first build's voice).

use http::{header, HeaderValue, StatusCode};
use rust_decimal::Decimal;
use serde_json::Value;

use crate::ctx::{Ctx, Outcome};
use crate::{owners, shape};
use gateway_adapters::upstream::Answer;
use gateway_base::body;
use gateway_base::body::{Request, Response};
use gateway_base::errors::ApiError;
use gateway_base::spec::{Metering, PathParams};

/// Largest answer read whole to find a created id or a built voice.
const MAX_READ_ANSWER: usize = 1 << 20;

/// `proxy`: forward as is (JSON body shaped by the row), answer the upstream's body.
pub async fn proxy(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let carries = super::common::has_body(ctx.spec.method);
    let mut body = super::common::read_body(ctx, req).await?;
    let mut call = super::common::call(ctx, params, Some(&mut body))?;
    if carries {
        shape::shape_body(ctx.spec, &mut body)?;
        call = call.json(&body);
    }
    let answer = call.send().await?;
    finish(ctx, answer, params, None).await
}

/// `fields`: the body is `{"fields": {...}}`; the object is forwarded
/// unchanged as JSON. On a row with `file_field` (recordings, which the
/// upstream takes as multipart), `fields.audio_url`, when present, is fetched
/// (or read from the gateway's own store) and sent as that file part, the
/// other fields as text parts. The row's `from_body` template variables are
/// fields of the envelope: required, owner-checked, recorded as the created
/// resource's parent, and not forwarded.
pub async fn fields(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let mut body = super::common::read_body(ctx, req).await?;
    let mut fields = match body.remove("fields") {
        Some(Value::Object(f)) => f,
        _ => return Err(ApiError::BadRequest("fields is required".into())),
    };
    // Template variables from the body are fields of the envelope (an agent
    // tool names its agent as `fields.agent_uuid`): required, owner-checked,
    // and not forwarded.
    if let Some(up) = ctx.spec.upstream.as_ref() {
        if let Some(missing) = up.from_body.iter().find(|v| !fields.contains_key(**v)) {
            return Err(ApiError::BadRequest(format!(
                "fields.{missing} is required"
            )));
        }
    }
    owners::check_body(super::common::asked(ctx), &fields).await?;
    let parent = owners::parent_of_create(ctx, &fields);
    let call = super::common::call(ctx, params, Some(&mut fields))?;
    let mut guard = crate::fetch::SizeGuard::default();
    let call = match (ctx.spec.file_field, fields.remove("audio_url")) {
        (Some(field), Some(Value::String(url))) => {
            let (part, g) = crate::fetch::open_as_part(&ctx.gw, ctx.user_id(), &url).await?;
            guard = g;
            call.multipart(shape::text_parts(fields).part(field, part))
        }
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest(
                "fields.audio_url must be a string".into(),
            ))
        }
        (_, url) => {
            if let Some(url) = url {
                fields.insert("audio_url".into(), url);
            }
            call.json(&fields)
        }
    };
    let answer = call.send().await.map_err(|e| guard.explain(e))?;
    finish(ctx, answer, params, parent).await
}

/// The answer of a pass-through row: streamed back as it arrives, unless the
/// gateway must read it (a create records the new id's owner; a first build
/// needs the voice's id to bill it once). Also meters per-request units and
/// forgets deleted resources.
async fn finish(
    ctx: &mut Ctx,
    answer: Answer,
    params: &PathParams,
    parent: Option<String>,
) -> Result<Outcome, ApiError> {
    let status = answer.status();
    let must_read = owners::creates(ctx.spec) || ctx.spec.metering == Metering::FirstBuild;
    let mut records = Vec::new();
    if owners::deletes(ctx.spec) {
        records.extend(owners::deleted(ctx, params));
    }
    if ctx.spec.metering == Metering::PerRequest {
        ctx.meter_row(Decimal::ONE, None);
    }
    if !must_read {
        let mut outcome = Outcome::new(answer.stream(), Some(status));
        outcome.records = records;
        return Ok(outcome);
    }
    let bytes = answer.bytes(MAX_READ_ANSWER).await?;
    let parsed: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if owners::creates(ctx.spec) {
        records.push(owners::created(ctx, &parsed, parent)?);
    }
    if ctx.spec.metering == Metering::FirstBuild {
        let (kind, id) = first_built(ctx, params, &parsed)?;
        ctx.meter_row(Decimal::ONE, Some(format!("{kind}:{id}")));
    }
    let mut outcome = Outcome::new(json_bytes(status, bytes), Some(status));
    outcome.records = records;
    Ok(outcome)
}

/// The resource a first build bills once (its kind and id): the kind is the
/// row's `resource`, else that of its last owned parameter; the id is named
/// by the path (build) or by the answer (promote), through the kind's
/// `id_field` (`[kinds]`), else the answer's `id`/`uuid`.
fn first_built(
    ctx: &Ctx,
    params: &PathParams,
    parsed: &Value,
) -> Result<(&'static str, String), ApiError> {
    let spec = ctx.spec;
    let kind = spec
        .resource
        .or_else(|| spec.owner_checks.last().map(|c| c.kind))
        .unwrap_or_default();
    let id_field = ctx.gw.table.kind(kind).and_then(|k| k.id_field);
    let id = id_field
        .and_then(|f| params.get(f).map(|v| v.into_owned()))
        .or_else(|| {
            id_field
                .and_then(|f| parsed.get(f))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .or_else(|| shape::upstream_id(parsed))
        .ok_or_else(|| {
            ApiError::BadGateway(format!("the voice provider's answer names no {kind}"))
        })?;
    Ok((kind, id))
}

/// The upstream's JSON answer, as it came.
fn json_bytes(status: u16, bytes: bytes::Bytes) -> Response {
    let mut out = http::Response::new(body::full(bytes));
    *out.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    out
}
