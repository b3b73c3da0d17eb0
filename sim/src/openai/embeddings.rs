//! `POST /v1/embeddings`: deterministic unit vectors of each input text
//! (`dimensions`, default 16), with prompt tokens counted as for chat.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Value};

use super::errors::{fields, invalid, missing};
use super::tokens::Tokenizer;
use crate::request::Req;
use crate::response::{json_response, Resp};
use crate::shared::Shared;

/// `POST /v1/embeddings`.
pub(super) fn embeddings(sh: &Arc<Shared>, req: &Req) -> Result<Resp, Resp> {
    let f = fields(req)?;
    let input = f
        .get("input")
        .or_else(|| f.get("text"))
        .ok_or_else(|| missing("input"))?;
    let texts: Vec<String> = match input {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect(),
        _ => {
            return Err(invalid(
                "input",
                "'input' must be a non-empty string or array",
            ))
        }
    };
    let dims = match f.get("dimensions").and_then(Value::as_u64) {
        None => 16,
        Some(d) if (1..=4096).contains(&d) => d as usize,
        Some(_) => {
            return Err(invalid(
                "dimensions",
                "dimensions must be between 1 and 4096",
            ))
        }
    };
    let model = f
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("sim-embed");
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": unit_vector(t, dims)}))
        .collect();
    let tokens = Tokenizer {
        strict: sh.strict_tokens.load(Ordering::Relaxed),
    }
    .texts(input);
    Ok(json_response(
        StatusCode::OK,
        &json!({"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}),
    ))
}

/// The deterministic unit vector of a text (6 decimal places), also used
/// by [`crate::gemini`].
pub fn unit_vector(t: &str, dims: usize) -> Vec<f64> {
    let raw: Vec<f64> = (0..dims)
        .map(|d| crate::jobs::fnv(&format!("{d}|{t}")) * 2.0 - 1.0)
        .collect();
    let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
    raw.iter()
        .map(|x| ((x / norm) * 1e6).round() / 1e6)
        .collect()
}
