//! `image`: image generation through the model named `provider/model`.
//! Providers' image URLs expire within the hour, so each generated image is
//! copied into the object store (an asset record, 7-day retention) and
//! answered with the gateway's own presigned URL. Billed per image. The
//! model call (hold, routing, settlement) is [`crate::model_call`]'s; this
//! file is the translation ([`Images`]).

use futures_util::TryStreamExt;
use serde_json::{Map, Value};

use crate::ctx::{Caller, Ctx, Outcome};
use crate::model_call::{self, Operation, Used};
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::Mode;
use gateway_models::bounds::{Bound, Shape};
use gateway_models::providers::{Model, ModelType, Op, Provider};
use gateway_store::Record;

/// Retention of generated images.
pub const IMAGE_RETENTION_DAYS: i64 = 7;
/// Largest side of `size`.
pub const MAX_SIDE: u32 = 8192;

/// `<width>x<height>`, both 1..=[`MAX_SIDE`].
fn check_size(size: &str) -> Result<(), ApiError> {
    let ok = size.split_once('x').is_some_and(|(w, h)| {
        [w, h].iter().all(|s| {
            !s.is_empty()
                && s.bytes().all(|b| b.is_ascii_digit())
                && s.parse::<u32>().is_ok_and(|n| (1..=MAX_SIDE).contains(&n))
        })
    });
    if ok {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!(
            "size: must be <width>x<height> with sides from 1 to {MAX_SIDE}, like 1024x1024"
        )))
    }
}

/// Whether `url` is on the provider's own host (never fetch elsewhere).
fn on_host(url: &str, base_url: &str) -> bool {
    match (reqwest::Url::parse(url), reqwest::Url::parse(base_url)) {
        (Ok(u), Ok(b)) => {
            matches!(u.scheme(), "http" | "https")
                && u.host_str() == b.host_str()
                && u.port_or_known_default() == b.port_or_known_default()
        }
        _ => false,
    }
}

/// `image`.
pub async fn generate(ctx: &mut Ctx, req: Request) -> Result<Outcome, ApiError> {
    let body = super::common::read_body(ctx, req).await?;
    if let Some(size) = body.get("size").and_then(Value::as_str) {
        check_size(size)?;
    }
    model_call::run(ctx, &Images, body, None).await
}

/// An image generation, as the model call asks it.
struct Images;

impl Operation for Images {
    fn model_type(&self) -> ModelType {
        ModelType::Image
    }

    fn op(&self) -> Op {
        Op::Image
    }

    fn what(&self) -> &'static str {
        "images"
    }

    fn bound(&self, _: &Model, up: &Map<String, Value>, _: Shape) -> Result<Bound, ApiError> {
        gateway_models::bounds::image(up)
    }

    fn used(&self, v: &Value) -> Result<Used, ApiError> {
        let items = v.get("data").and_then(Value::as_array).ok_or_else(|| {
            ApiError::BadGateway("the model provider answered images without data".into())
        })?;
        Ok(Used::Images(items.len() as u64))
    }

    /// Each image the provider answered by URL, copied into the object
    /// store and answered with the gateway's own URL: their asset records.
    async fn keep(
        &self,
        c: &Caller<'_>,
        v: &mut Value,
        p: &Provider,
    ) -> Result<Vec<Record>, ApiError> {
        let user_id = c.require_user("image generation")?;
        let now = chrono::Utc::now();
        let mut records = Vec::new();
        let items = v.get_mut("data").and_then(Value::as_array_mut);
        for (i, item) in items.into_iter().flatten().enumerate() {
            let Some(url) = item.get("url").and_then(Value::as_str).map(str::to_owned) else {
                continue; // b64_json: already the caller's
            };
            if !on_host(&url, &p.base_url) {
                return Err(ApiError::BadGateway(
                    "the model provider answered an image URL on another host".into(),
                ));
            }
            let stored = copy(c, &url, user_id, i, now).await?;
            item["url"] = Value::String(stored.url);
            item["expires_at"] = Value::String(stored.expires_at);
            records.extend(stored.records);
        }
        Ok(records)
    }

    /// OpenAI's image usage, when the provider sent none (clients typed
    /// on it need its token fields): billed per image, no token counted.
    /// The answer's `usage` may hold only its cost so far.
    fn answer(&self, mut v: Value, _: &str) -> Result<Value, ApiError> {
        let usage = v
            .as_object_mut()
            .map(|o| o.entry("usage").or_insert_with(|| serde_json::json!({})));
        if let Some(u) = usage
            .and_then(Value::as_object_mut)
            .filter(|u| !u.contains_key("total_tokens"))
        {
            let none = serde_json::json!({"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                "input_tokens_details": {"text_tokens": 0, "image_tokens": 0}});
            for (k, d) in none.as_object().into_iter().flatten() {
                u.entry(k.clone()).or_insert_with(|| d.clone());
            }
        }
        Ok(v)
    }
}

/// The `i`th generated image, fetched from the provider's `url` and
/// stored as the caller's.
async fn copy(
    c: &Caller<'_>,
    url: &str,
    user_id: i64,
    i: usize,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<crate::generated::Stored, ApiError> {
    let resp = c
        .gw
        .upstream
        .client()
        .get(url)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|_| {
            ApiError::BadGateway("fetching a generated image from the model provider failed".into())
        })?;
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .filter(|t| t.starts_with("image/"))
        .unwrap_or("image/png")
        .to_owned();
    let ext = gateway_base::media::by_content_type(&content_type).map_or("png", |t| t.ext);
    let stream: gateway_adapters::objects::ByteStream = Box::pin(
        resp.bytes_stream()
            .map_err(|e| std::io::Error::other(e.without_url())),
    );
    crate::generated::Media {
        owner: user_id,
        prefix: "images",
        class: "image",
        purpose: "image_generation",
        source: c.request_id,
        suffix: format!("-{i}"),
        ext,
        content_type: &content_type,
        retention_days: IMAGE_RETENTION_DAYS,
        now,
    }
    .store_stream(c.gw, stream, c.gw.table.limit(Mode::Image))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        for ok in ["1024x1024", "1x8192", "256x512"] {
            assert!(check_size(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "1024",
            "x1024",
            "1024x",
            "0x10",
            "10x9000",
            "1024X1024",
            "-1x2",
            "1e3x10",
        ] {
            assert!(check_size(bad).is_err(), "{bad}");
        }
    }
}
