//! Voices of the providers file: one name callers send, mapped to each
//! provider's own voice id, so that a voice survives a fallback from one
//! voice vendor to another.
//!
//! ```toml
//! [[voice]]
//! name = "narrator"                     # what callers send as `voice`
//! elevenlabs = "21m00Tcm4TlvDq8ikWAM"   # a [[provider]] id = its voice id
//! cartesia = "694f9389-aac1-45b6-b726-9d9369183238"
//! openai = "alloy"
//! ```
//!
//! A Deepgram model is its own voice (`aura-2-thalia-en`): mapping a
//! Deepgram provider names the model that speaks the alias. Checked once
//! at start-up ([`build`]): a name given once; every other key a
//! provider of the file that has speech models, its value a non-empty
//! string. A mistake names the file, the voice's line and the key.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::model::{Model, ModelType};
use super::provider::Provider;
use super::speech::VoiceUse;

/// One `[[voice]]`: its name and, per provider id, that provider's voice.
#[derive(Debug, Clone, PartialEq)]
pub struct Voice {
    pub name: String,
    /// `(provider id, voice id)`, by provider id.
    pub ids: Vec<(String, String)>,
}

impl Voice {
    /// The voice id of provider `provider`, when mapped.
    pub fn id_for(&self, provider: &str) -> Option<&str> {
        self.ids
            .iter()
            .find(|(p, _)| p == provider)
            .map(|(_, v)| v.as_str())
    }
}

/// The voice deployment `p`/`m` speaks for the caller's `asked` (an
/// alias of `voices`, or a provider's own id), in that provider's id:
/// `Some(None)`: the deployment's own voice; `None`: it cannot speak it
/// (no mapping for an alias, no voice for a kind that needs one), and is
/// skipped.
pub fn voice_for<'a>(
    voices: &'a [Voice],
    asked: Option<&'a str>,
    p: &Provider,
    m: &Model,
    use_: VoiceUse,
) -> Option<Option<&'a str>> {
    let mapped = match asked {
        None => None,
        Some(name) => match voices.iter().find(|v| v.name == name) {
            Some(alias) => Some(alias.id_for(&p.id)?),
            None => Some(name),
        },
    };
    match (use_, mapped) {
        (VoiceUse::Model, None) => Some(None),
        (VoiceUse::Model, Some(v)) => (v == m.id).then_some(None),
        (VoiceUse::Required, None) => None,
        (_, v) => Some(v),
    }
}

/// A `[[voice]]` as written.
#[derive(Deserialize)]
pub(super) struct VoiceDoc {
    name: Spanned<String>,
    #[serde(flatten)]
    ids: BTreeMap<String, toml::Value>,
}

/// The file's voices, checked against its providers (`file`: its name,
/// `text`: its text, for line numbers; `taken`: names of models and
/// routes a voice may not have).
pub(super) fn build(
    docs: Vec<VoiceDoc>,
    providers: &[Provider],
    file: &str,
    text: &str,
) -> Result<Vec<Voice>, String> {
    let mut out: Vec<Voice> = Vec::with_capacity(docs.len());
    for doc in docs {
        let line = text[..doc.name.span().start.min(text.len())]
            .matches('\n')
            .count()
            + 1;
        let name = doc.name.into_inner();
        let at = format!("{file}: line {line}: voice {name:?}");
        if name.trim().is_empty() {
            return Err(format!("{at}: name must be non-empty"));
        }
        if out.iter().any(|v| v.name == name) {
            return Err(format!("{at}: duplicate voice name"));
        }
        let mut ids = Vec::with_capacity(doc.ids.len());
        for (key, value) in doc.ids {
            let Some(p) = providers.iter().find(|p| p.id == key) else {
                return Err(format!(
                    "{at}: {key}: not a provider of this file (a voice maps provider ids to their voices)"
                ));
            };
            if !p.models.iter().any(|m| m.kind == ModelType::Tts) {
                return Err(format!("{at}: {key}: that provider has no tts models"));
            }
            match value {
                toml::Value::String(v) if !v.trim().is_empty() => ids.push((key, v)),
                _ => return Err(format!("{at}: {key}: must be a non-empty voice id")),
            }
        }
        if ids.is_empty() {
            return Err(format!("{at}: maps no provider"));
        }
        out.push(Voice { name, ids });
    }
    Ok(out)
}
