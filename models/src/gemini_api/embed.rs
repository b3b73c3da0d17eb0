//! Gemini's embeddings ↔ OpenAI's `/embeddings`.
//!
//! `embedContent` (`content`'s text parts, joined) → `input` (a string);
//! `batchEmbedContents` (`requests[]`, each such a request) → `input` (a
//! list); `outputDimensionality` → `dimensions` (one value for the whole
//! batch); `model` and the gateway's own fields pass; `taskType`, `title`
//! or any other field is a 400 naming it. The answer's vectors go back as
//! `{"embedding": {"values"}}` or `{"embeddings": [{"values"}]}`.

use serde_json::{json, Map, Value};

use super::{camel, field, must_be, untranslatable};
use gateway_base::errors::ApiError;

/// Fields copied unchanged: the gateway's own.
const SAME: [&str; 4] = ["model", "byok_api_key", "additional_params", "models"];

/// The text of one embed request `r` (at `at`) and its dimensions.
fn one(r: &Map<String, Value>, at: &str) -> Result<(String, Option<Value>), ApiError> {
    for k in r.keys() {
        let k = camel(k);
        if !matches!(k.as_str(), "content" | "outputDimensionality" | "model") {
            return Err(untranslatable(&format!("{at}{k}")));
        }
    }
    let parts = field(r, "content")
        .and_then(Value::as_object)
        .and_then(|c| field(c, "parts"))
        .and_then(Value::as_array)
        .ok_or_else(|| must_be(&format!("{at}content"), "a content with parts"))?;
    let mut text = String::new();
    for (j, p) in parts.iter().enumerate() {
        match p.get("text").and_then(Value::as_str) {
            Some(t) => text.push_str(t),
            None => return Err(untranslatable(&format!("{at}content.parts[{j}]"))),
        }
    }
    Ok((text, field(r, "outputDimensionality").cloned()))
}

/// OpenAI's embeddings body of a Gemini one (`batch`: of
/// `batchEmbedContents`).
pub fn to_openai(body: &Map<String, Value>, batch: bool) -> Result<Map<String, Value>, ApiError> {
    let mut out = Map::new();
    let mut rest = Map::new();
    for (k, v) in body {
        match SAME.contains(&k.as_str()) {
            true => out.insert(k.clone(), v.clone()),
            false => rest.insert(k.clone(), v.clone()),
        };
    }
    let (input, dims) = if batch {
        let reqs = field(&rest, "requests")
            .and_then(Value::as_array)
            .filter(|r| !r.is_empty())
            .ok_or_else(|| must_be("requests", "a non-empty list of requests"))?;
        if let Some(k) = rest.keys().find(|k| camel(k) != "requests") {
            return Err(untranslatable(&camel(k)));
        }
        let mut texts = Vec::new();
        let mut dims = None;
        for (i, r) in reqs.iter().enumerate() {
            let at = format!("requests[{i}].");
            let r = r.as_object().ok_or_else(|| must_be(&at, "an object"))?;
            let (t, d) = one(r, &at)?;
            if i > 0 && d != dims {
                return Err(must_be(
                    &format!("{at}outputDimensionality"),
                    "the same in every request of the batch",
                ));
            }
            dims = d;
            texts.push(Value::String(t));
        }
        (Value::Array(texts), dims)
    } else {
        let (t, d) = one(&rest, "")?;
        (Value::String(t), d)
    };
    out.insert("input".into(), input);
    if let Some(d) = dims {
        out.insert("dimensions".into(), d);
    }
    Ok(out)
}

/// The Gemini answer of OpenAI's embeddings list `v`.
pub fn from_openai(v: &Value, batch: bool) -> Value {
    let mut vectors: Vec<Value> = v
        .get("data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|d| json!({"values": d.get("embedding").cloned().unwrap_or(Value::Null)}))
        .collect();
    match (batch, vectors.is_empty()) {
        (true, _) => json!({"embeddings": vectors}),
        (false, false) => json!({"embedding": vectors.swap_remove(0)}),
        (false, true) => json!({"embedding": {"values": []}}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn one_and_a_batch_both_ways() {
        let one = obj(
            json!({"model": "p/e", "content": {"parts": [{"text": "a"}, {"text": "b"}]},
            "outputDimensionality": 8}),
        );
        assert_eq!(
            Value::Object(to_openai(&one, false).unwrap()),
            json!({"model": "p/e", "input": "ab", "dimensions": 8})
        );
        let batch = obj(json!({"model": "p/e", "requests": [
            {"model": "models/p/e", "content": {"parts": [{"text": "x"}]}},
            {"model": "models/p/e", "content": {"parts": [{"text": "y"}]}}]}));
        assert_eq!(
            Value::Object(to_openai(&batch, true).unwrap()),
            json!({"model": "p/e", "input": ["x", "y"]})
        );
        let answer = json!({"data": [{"embedding": [0.5]}, {"embedding": [0.25]}]});
        assert_eq!(
            from_openai(&answer, true),
            json!({"embeddings": [{"values": [0.5]}, {"values": [0.25]}]})
        );
        assert_eq!(
            from_openai(&answer, false),
            json!({"embedding": {"values": [0.5]}})
        );
    }

    #[test]
    fn a_task_type_is_refused_by_name() {
        let b = obj(json!({"content": {"parts": [{"text": "a"}]}, "task_type": "retrieval"}));
        assert!(to_openai(&b, false)
            .unwrap_err()
            .to_string()
            .contains("taskType"));
    }
}
