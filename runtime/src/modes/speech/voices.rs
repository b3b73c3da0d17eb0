//! `speech_voices`: `GET /audio/voices`, the voices a caller can ask for
//! (free): the providers file's `[[voice]]` aliases with each provider's
//! id of them, then each speech provider's own voices — read from the
//! provider where it lists them (ElevenLabs' `/v1/voices`, Cartesia's
//! `/voices`, kept [`VOICE_LIST_TTL`]), OpenAI's fixed list, a Deepgram
//! provider's speech models (each is a voice). A provider that cannot be
//! read is listed with its `error` and no voices; the others still are.
//!
//! [`VOICE_LIST_TTL`]: gateway_models::providers::speech::VOICE_LIST_TTL

use http::StatusCode;
use serde_json::{json, Value};

use crate::ctx::{Ctx, Outcome};
use gateway_base::body;
use gateway_base::errors::ApiError;
use gateway_base::spec::Method;
use gateway_models::providers::speech::VoiceList;
use gateway_models::providers::{ModelType, Provider};

/// `speech_voices`.
pub async fn list(ctx: &mut Ctx) -> Result<Outcome, ApiError> {
    let providers = &ctx.catalogue;
    let aliases: Vec<Value> = providers
        .voices
        .iter()
        .map(|v| {
            let ids: serde_json::Map<String, Value> = v
                .ids
                .iter()
                .map(|(p, id)| (p.clone(), Value::String(id.clone())))
                .collect();
            json!({"name": v.name, "voices": ids})
        })
        .collect();
    let mut out = Vec::new();
    for p in &providers.providers {
        let models: Vec<&str> = p
            .models
            .iter()
            .filter(|m| m.kind == ModelType::Tts)
            .map(|m| m.id.as_str())
            .collect();
        if models.is_empty() {
            continue;
        }
        let mut entry = json!({"provider": p.id, "kind": p.kind, "models": models});
        match voices_of(ctx, p, &models).await {
            Ok(voices) => entry["voices"] = Value::Array(voices),
            Err(e) => {
                entry["voices"] = json!([]);
                entry["error"] = Value::String(e.to_string());
            }
        }
        out.push(entry);
    }
    let v = json!({"object": "list", "aliases": aliases, "providers": out});
    Ok(Outcome::new(body::json(StatusCode::OK, &v), None))
}

/// Provider `p`'s voices (`models`: its speech models).
async fn voices_of(ctx: &Ctx, p: &Provider, models: &[&str]) -> Result<Vec<Value>, ApiError> {
    let named = |id: &str| json!({"id": id, "name": id});
    let (path, read) = match p.adapter.voice_list() {
        VoiceList::Fixed(ids) => return Ok(ids.iter().map(|id| named(id)).collect()),
        VoiceList::Models => return Ok(models.iter().map(|id| named(id)).collect()),
        VoiceList::Fetched { path, read } => (path, read),
    };
    let cached = format!("{} {}", p.id, p.base_url);
    if let Some(list) = ctx.gw.speech_voices.get(&cached) {
        return Ok(list);
    }
    let key = p
        .key
        .as_ref()
        .ok_or_else(|| gateway_models::providers::config_missing(p))?;
    let answer = ctx
        .gw
        .upstream
        .llm_call_as(Method::Get, &p.base_url, path, key, p.adapter.key_form())
        .send()
        .await?;
    let list = read(&answer.json("a voice list").await?);
    ctx.gw.speech_voices.put(cached, list.clone());
    Ok(list)
}
