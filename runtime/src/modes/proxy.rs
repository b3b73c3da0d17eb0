//! Pass-through modes: `proxy` and `fields`.
//!
//! Bodies are read (bounded) only where the gateway must validate or change
//! them; answers are streamed back as they arrive, except the small JSON
//! answers the gateway must read (a create's new id, a first build's voice).

use bytes::Bytes;
use futures_util::TryStreamExt;
use http::{header, HeaderValue, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Map, Value};

use crate::body;
use crate::errors::ApiError;
use crate::pipeline::{Ctx, Metered, Outcome};
use crate::router::{Request, Response};
use crate::spec::{Metering, Method, PathParams};
use crate::{owners, shape, validate};
use rust_decimal::Decimal;

/// Whether the row's method carries a request body.
fn has_body(m: Method) -> bool {
    matches!(m, Method::Post | Method::Put | Method::Patch)
}

/// Streams an upstream answer back: status and content type kept, body as a stream.
pub fn stream_back(resp: reqwest::Response) -> Response {
    let status = StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::OK);
    let content_type = resp.headers().get(header::CONTENT_TYPE).cloned();
    let stream = resp
        .bytes_stream()
        .map_ok(Frame::data)
        .map_err(|e| -> crate::body::BoxError { Box::new(e.without_url()) });
    let mut out = http::Response::new(BodyExt::boxed(StreamBody::new(stream)));
    *out.status_mut() = status;
    if let Some(ct) = content_type {
        out.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    out
}

/// A JSON answer with a status.
pub fn json_response(status: StatusCode, v: &Value) -> Response {
    let mut out = http::Response::new(body::full(Bytes::from(v.to_string())));
    *out.status_mut() = status;
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    out
}

/// Reads and validates the JSON body of a row (empty for GET/DELETE):
/// field rules, then owned fields. Every mode that takes a body reads it here.
pub(crate) async fn read_body(ctx: &Ctx, req: Request) -> Result<Map<String, Value>, ApiError> {
    if !has_body(ctx.spec.method) {
        return Ok(Map::new());
    }
    let obj = shape::read_json_object(req.into_body(), ctx.gw.config.max_json_bytes).await?;
    validate::body(ctx.spec.body, &obj)?;
    owners::check_body(ctx, &obj).await?;
    Ok(obj)
}

/// Builds the upstream request for a row: filled path, shaped query, the
/// credential in the base's form.
pub(crate) fn upstream_request(
    ctx: &Ctx,
    params: &PathParams,
    body: Option<&mut Map<String, Value>>,
) -> Result<reqwest::RequestBuilder, ApiError> {
    let up = ctx
        .spec
        .upstream
        .as_ref()
        .ok_or_else(|| ApiError::Internal(format!("row {} has no upstream", ctx.spec.id)))?;
    let mut query = ctx.query.clone();
    let path = shape::upstream_path(ctx.spec, up.path, params, &mut query, body)?;
    shape::shape_query(ctx.spec, &mut query);
    ctx.gw.upstream.request(up, &path, &query)
}

/// `proxy`: forward as is (JSON body shaped by the row), answer the upstream's body.
pub async fn proxy(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    if owners::lists(ctx.spec) {
        return owners::list(ctx, params).await;
    }
    let base = ctx
        .spec
        .upstream
        .map(|u| u.base)
        .unwrap_or(crate::spec::Base::Main);
    let carries = has_body(ctx.spec.method);
    let mut body = read_body(ctx, req).await?;
    let mut rb = upstream_request(ctx, params, Some(&mut body))?;
    if carries {
        shape::shape_body(ctx.spec, &mut body)?;
        rb = rb.json(&body);
    }
    let resp = ctx.gw.upstream.send(base, rb).await?;
    finish(ctx, resp, params).await
}

/// `fields`: the body is `{"fields": {...}}`; the object is forwarded
/// unchanged as JSON. On a row with `file_field` (recordings, which the
/// upstream takes as multipart), `fields.audio_url`, when present, is fetched
/// (or read from the gateway's own store) and sent as that file part, the
/// other fields as text parts.
pub async fn fields(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let base = ctx
        .spec
        .upstream
        .map(|u| u.base)
        .unwrap_or(crate::spec::Base::Main);
    let mut body = read_body(ctx, req).await?;
    let mut fields = match body.remove("fields") {
        Some(Value::Object(f)) => f,
        _ => return Err(ApiError::BadRequest("fields is required".into())),
    };
    let rb = upstream_request(ctx, params, Some(&mut body))?;
    let rb = match (ctx.spec.file_field, fields.remove("audio_url")) {
        (Some(field), Some(Value::String(url))) => {
            let part = crate::fetch::open_as_part(&ctx.gw, ctx.user_id(), &url).await?;
            rb.multipart(shape::text_parts(fields).part(field, part))
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
            rb.json(&fields)
        }
    };
    let resp = ctx.gw.upstream.send(base, rb).await?;
    finish(ctx, resp, params).await
}

/// The answer of a pass-through row: streamed back as it arrives, unless the
/// gateway must read it (a create records the new id's owner; a first build
/// needs the voice's id to bill it once). Also meters per-request units and
/// forgets deleted resources.
async fn finish(
    ctx: &mut Ctx,
    resp: reqwest::Response,
    params: &PathParams,
) -> Result<Outcome, ApiError> {
    let status = resp.status().as_u16();
    let must_read = owners::creates(ctx.spec) || ctx.spec.metering == Metering::FirstBuild;
    let mut records = Vec::new();
    if owners::deletes(ctx.spec) {
        records.extend(owners::deleted(ctx, params));
    }
    if ctx.spec.metering == Metering::PerRequest {
        meter_one(ctx, None);
    }
    if !must_read {
        let mut outcome = Outcome::new(stream_back(resp), Some(status));
        outcome.records = records;
        return Ok(outcome);
    }
    let bytes = crate::upstream::read_bounded(resp, 1 << 20).await;
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if owners::creates(ctx.spec) {
        records.push(owners::created(ctx, &answer)?);
    }
    if ctx.spec.metering == Metering::FirstBuild {
        // The voice is named by the path (build) or by the answer (promote).
        let voice = params
            .get("voice_uuid")
            .map(|v| v.into_owned())
            .or_else(|| {
                answer
                    .get("voice_uuid")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .or_else(|| shape::upstream_id(&answer))
            .ok_or_else(|| {
                ApiError::BadGateway("the voice provider's answer names no voice".into())
            })?;
        meter_one(ctx, Some(format!("voice:{voice}")));
    }
    let mut out = http::Response::new(body::full(bytes));
    *out.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let mut outcome = Outcome::new(out, Some(status));
    outcome.records = records;
    Ok(outcome)
}

/// Meters one unit of the row's billing (once per `once_key` when given).
fn meter_one(ctx: &mut Ctx, once_key: Option<String>) {
    ctx.meter(Metered {
        product: ctx.product().to_owned(),
        unit: ctx.spec.billing.as_str(),
        quantity: Decimal::ONE,
        once_key,
        user_id: None,
        route_id: None,
        capability: None,
    });
}
