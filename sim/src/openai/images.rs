//! `POST /v1/images/generations`: `n` copies of a 1×1 PNG, as URLs under
//! `/__sim/media` or inline as `b64_json`.

use std::sync::Arc;

use base64::Engine as _;
use http::StatusCode;
use serde_json::{json, Value};

use super::errors::{fields, invalid, missing};
use super::video::unix_now;
use crate::request::Req;
use crate::response::{json_response, Resp};
use crate::shared::Shared;

/// A 1×1 PNG served for generated images.
pub const PNG_1X1: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

/// `POST /v1/images/generations`.
pub(super) fn images(sh: &Arc<Shared>, req: &Req) -> Result<Resp, Resp> {
    let f = fields(req)?;
    let prompt = f
        .get("prompt")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| missing("prompt"))?;
    let n = match f.get("n").and_then(Value::as_u64) {
        None => 1,
        Some(n) if (1..=10).contains(&n) => n,
        Some(_) => return Err(invalid("n", "n must be between 1 and 10")),
    };
    if let Some(size) = f.get("size").and_then(Value::as_str) {
        let ok = size
            .split_once('x')
            .is_some_and(|(w, h)| w.parse::<u32>().is_ok() && h.parse::<u32>().is_ok());
        if !ok {
            return Err(invalid("size", "size must look like 1024x1024"));
        }
    }
    let b64 = f.get("response_format").and_then(Value::as_str) == Some("b64_json");
    let mut store = sh.store.lock().unwrap();
    let data: Vec<Value> = (0..n)
        .map(|_| {
            if b64 {
                json!({"b64_json": PNG_1X1, "revised_prompt": prompt})
            } else {
                let id = uuid::Uuid::new_v4().to_string();
                store.images.insert(id.clone());
                json!({"url": format!("{}/__sim/media/{id}.png", sh.root), "revised_prompt": prompt})
            }
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"created": unix_now(), "data": data}),
    ))
}

/// Decoded [`PNG_1X1`].
pub fn png_bytes() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(PNG_1X1)
        .expect("valid base64")
}
