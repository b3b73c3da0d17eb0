//! The OpenAI-compatible adapter: the gateway's request shape is OpenAI's,
//! so the body passes through with the provider's model id, the gateway's
//! own fields removed and `additional_params` merged in (its keys win
//! over none of the gateway's: `model` stays the resolved one).

use serde_json::{Map, Value};

use super::adapter::{Adapter, Op};
use super::model::ModelType;

/// Fields the gateway consumes and never sends upstream.
const GATEWAY_FIELDS: [&str; 3] = ["byok_api_key", "additional_params", "models"];

#[derive(Debug)]
pub struct OpenAi;

impl Adapter for OpenAi {
    fn path(&self, op: Op) -> &'static str {
        match op {
            Op::Chat => "/chat/completions",
            Op::Completion => "/completions",
            Op::Embedding => "/embeddings",
            Op::Image => "/images/generations",
            Op::Speech => "/audio/speech",
            Op::Transcription => "/audio/transcriptions",
            Op::Translation => "/audio/translations",
            Op::Video => "/videos",
        }
    }

    fn live_path(&self, t: ModelType) -> Option<&'static str> {
        (t == ModelType::Realtime).then_some("/realtime")
    }
}

/// The OpenAI-shaped body of `op` for `model` (the provider's own model
/// id) from the caller's (validated) body: gateway-only fields removed,
/// `additional_params` merged in (never over a field the body has). Every
/// adapter starts from it; a native one translates it in
/// [`Adapter::native`].
pub fn request(op: Op, model: &str, mut body: Map<String, Value>) -> Map<String, Value> {
    if op == Op::Embedding {
        // The spec's `text` is OpenAI's `input`.
        if let Some(text) = body.remove("text") {
            body.entry("input").or_insert(text);
        }
    }
    let extra = body.remove("additional_params");
    for f in GATEWAY_FIELDS {
        body.remove(f);
    }
    if let Some(Value::Object(extra)) = extra {
        for (k, v) in extra {
            if !body.contains_key(&k) {
                body.insert(k, v);
            }
        }
    }
    body.insert("model".into(), Value::String(model.to_owned()));
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gateway_fields_go_and_additional_params_merge() {
        let body = json!({"messages": [], "model": "sim/sim-gpt", "byok_api_key": "k",
            "temperature": 0.5, "additional_params": {"seed": 7, "temperature": 2}});
        let out = request(Op::Chat, "sim-gpt", body.as_object().unwrap().clone());
        assert_eq!(
            Value::Object(out),
            json!({"messages": [], "model": "sim-gpt", "temperature": 0.5, "seed": 7})
        );
    }
}
