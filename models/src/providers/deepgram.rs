//! The Deepgram adapter (`kind = "deepgram"`): text to speech
//! (`POST /v1/speak?model=…`, body `{"text"}`; the model is the voice, an
//! Aura voice such as `aura-2-thalia-en`) and pre-recorded speech to text
//! (`POST /v1/listen?model=…`, the audio as the body), the key as
//! `Authorization: Token …`.
//!
//! Formats: `mp3` is Deepgram's default, `wav` → `encoding=linear16&
//! container=wav&sample_rate=24000`, `pcm` → the same with
//! `container=none`. Deepgram's speech has no speed (a `speed` other than
//! 1 is 400); the caller's `additional_params` are its query parameters.
//! A transcription's `language` is the `language` parameter; `prompt` and
//! `temperature` have no Deepgram equivalent (400).

use serde_json::{json, Map, Value};

use super::adapter::{Adapter, Native, Op};
use super::model::{Model, ModelType};
use super::speech::{self, Speak, Transcript, Upload, VoiceList, VoiceUse};
use gateway_adapters::upstream::encode_segment;
use gateway_adapters::upstream::llm::KeyForm;
use gateway_base::errors::ApiError;

#[derive(Debug)]
pub struct Deepgram;

/// `path?model=…` and `params` (each value percent-encoded).
fn with_query(path: &str, model: &str, params: &[(String, String)]) -> String {
    let mut out = format!("{path}?model={}", encode_segment(model));
    for (k, v) in params {
        out.push('&');
        out.push_str(&encode_segment(k));
        out.push('=');
        out.push_str(&encode_segment(v));
    }
    out
}

impl Adapter for Deepgram {
    fn path(&self, op: Op) -> &'static str {
        match op {
            Op::Transcription => "/v1/listen",
            _ => "/v1/speak",
        }
    }

    fn supports(&self, t: ModelType) -> bool {
        matches!(t, ModelType::Tts | ModelType::Stt)
    }

    fn models_path(&self) -> &'static str {
        "/v1/models"
    }
    fn key_form(&self) -> KeyForm {
        KeyForm::Token
    }

    fn live_path(&self, t: ModelType) -> Option<&'static str> {
        (t == ModelType::Stt).then_some("/v1/listen")
    }

    fn voice_use(&self) -> VoiceUse {
        VoiceUse::Model
    }

    fn voice_list(&self) -> VoiceList {
        VoiceList::Models
    }

    fn speech(
        &self,
        m: &Model,
        s: &Speak<'_>,
        _body: Map<String, Value>,
    ) -> Result<Native, ApiError> {
        if s.speed.is_some_and(|x| x != 1.0) {
            return Err(speech::speed_refused("deepgram", (1.0, 1.0)));
        }
        let rate = speech::PCM_RATE.to_string();
        let mut params: Vec<(String, String)> = match s.format {
            "wav" => vec![
                ("encoding".into(), "linear16".into()),
                ("container".into(), "wav".into()),
                ("sample_rate".into(), rate),
            ],
            "pcm" => vec![
                ("encoding".into(), "linear16".into()),
                ("container".into(), "none".into()),
                ("sample_rate".into(), rate),
            ],
            _ => Vec::new(),
        };
        for (k, v) in &s.extra {
            if !params.iter().any(|(p, _)| p == k) && k != "model" {
                params.push((k.clone(), speech::text_of(v.clone())));
            }
        }
        let mut body = Map::new();
        body.insert("text".into(), json!(s.text));
        Ok(Native {
            path: with_query(self.path(Op::Speech), &m.id, &params),
            body,
        })
    }

    fn transcription(
        &self,
        op: Op,
        m: &Model,
        mut fields: Map<String, Value>,
    ) -> Result<Upload, ApiError> {
        speech::transcribes_only(op == Op::Translation, "deepgram")?;
        speech::plain_formats(&fields, "deepgram")?;
        speech::refuse_fields(&fields, &["prompt", "temperature"], "deepgram")?;
        let mut params = vec![("smart_format".to_owned(), "true".to_owned())];
        if let Some(l) = fields.remove("language") {
            params.push(("language".into(), speech::text_of(l)));
        }
        Ok(Upload::Raw {
            path: with_query(self.path(Op::Transcription), &m.id, &params),
        })
    }

    /// `{"metadata": {"duration"}, "results": {"channels": [{"alternatives":
    /// [{"transcript", "words"}]}]}}`: the first channel's first
    /// alternative; `metadata.duration` its claim of the audio's length.
    fn transcript(&self, v: &Value) -> Result<Option<Transcript>, ApiError> {
        let best = v
            .pointer("/results/channels/0/alternatives/0")
            .ok_or_else(|| speech::not_a_transcript("deepgram"))?;
        let text = best
            .get("transcript")
            .and_then(Value::as_str)
            .ok_or_else(|| speech::not_a_transcript("deepgram"))?;
        let words = best
            .get("words")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|w| {
                let word = w.get("punctuated_word").or_else(|| w.get("word"));
                json!({"word": word, "start": w.get("start"), "end": w.get("end")})
            })
            .collect();
        Ok(Some(Transcript {
            text: text.to_owned(),
            language: v
                .pointer("/results/channels/0/detected_language")
                .and_then(Value::as_str)
                .map(str::to_owned),
            claimed_seconds: v.pointer("/metadata/duration").cloned(),
            words,
        }))
    }
}
