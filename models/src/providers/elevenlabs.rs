//! The ElevenLabs adapter (`kind = "elevenlabs"`): text to speech
//! (`POST /v1/text-to-speech/{voice_id}`, and its `/stream` form when the
//! caller streams; `text`, `model_id`, `voice_settings`, the format in the
//! `output_format` query) and speech to text (`POST /v1/speech-to-text`,
//! multipart `model_id` and `file`), the key in `xi-api-key`.
//!
//! Formats: `mp3` → `mp3_44100_128`, `wav` → `wav_24000`, `pcm` →
//! `pcm_24000` (16-bit mono, as OpenAI's `pcm`). `speed` is
//! `voice_settings.speed` (0.7 to 1.2). A transcription's `language` is
//! `language_code`; `prompt` has no ElevenLabs equivalent (400).

use serde_json::{json, Map, Value};

use super::adapter::{Adapter, Native, Op};
use super::model::{Model, ModelType};
use super::speech::{self, Speak, Transcript, Upload, VoiceList, VoiceUse};
use gateway_adapters::upstream::encode_segment;
use gateway_adapters::upstream::llm::KeyForm;
use gateway_base::errors::ApiError;

/// The speeds ElevenLabs' `voice_settings.speed` takes.
const SPEED: (f64, f64) = (0.7, 1.2);

#[derive(Debug)]
pub struct ElevenLabs;

impl Adapter for ElevenLabs {
    fn path(&self, op: Op) -> &'static str {
        match op {
            Op::Transcription => "/v1/speech-to-text",
            _ => "/v1/text-to-speech",
        }
    }

    fn supports(&self, t: ModelType) -> bool {
        matches!(t, ModelType::Tts | ModelType::Stt)
    }

    fn models_path(&self) -> &'static str {
        "/v1/models"
    }
    fn key_form(&self) -> KeyForm {
        KeyForm::XiApiKey
    }

    fn voice_use(&self) -> VoiceUse {
        VoiceUse::Required
    }

    /// `GET /v1/voices`: `{"voices": [{"voice_id", "name"}]}`.
    fn voice_list(&self) -> VoiceList {
        VoiceList::Fetched {
            path: "/v1/voices",
            read: |v| speech::voices_of(v.get("voices"), "voice_id"),
        }
    }

    fn speech(
        &self,
        m: &Model,
        s: &Speak<'_>,
        _body: Map<String, Value>,
    ) -> Result<Native, ApiError> {
        let voice = s.needed_voice("elevenlabs")?;
        let format = match s.format {
            "wav" => "wav_24000",
            "pcm" => "pcm_24000",
            _ => "mp3_44100_128",
        };
        let mut body = Map::new();
        body.insert("text".into(), json!(s.text));
        body.insert("model_id".into(), json!(m.id));
        if let Some(settings) = s.speed_in("voice_settings", SPEED, "elevenlabs")? {
            body.insert("voice_settings".into(), settings);
        }
        speech::merge_extra(&mut body, &s.extra);
        let stream = if s.stream { "/stream" } else { "" };
        Ok(Native {
            path: format!(
                "{}/{}{stream}?output_format={format}",
                self.path(Op::Speech),
                encode_segment(voice)
            ),
            body,
        })
    }

    fn transcription(
        &self,
        op: Op,
        m: &Model,
        mut fields: Map<String, Value>,
    ) -> Result<Upload, ApiError> {
        speech::transcribes_only(op == Op::Translation, "elevenlabs")?;
        speech::plain_formats(&fields, "elevenlabs")?;
        speech::refuse_fields(&fields, &["prompt"], "elevenlabs")?;
        let mut out = vec![("model_id".to_owned(), m.id.clone())];
        if let Some(l) = fields.remove("language") {
            out.push(("language_code".into(), speech::text_of(l)));
        }
        if let Some(t) = fields.remove("temperature") {
            out.push(("temperature".into(), speech::text_of(t)));
        }
        Ok(Upload::Multipart {
            path: self.path(Op::Transcription).to_owned(),
            fields: out,
        })
    }

    /// `{"text", "language_code", "words": [{"text", "start", "end",
    /// "type"}]}`: the words (not spacing or audio events) in OpenAI's
    /// `{"word", "start", "end"}`; the last word's end is its claim of
    /// the audio's length.
    fn transcript(&self, v: &Value) -> Result<Option<Transcript>, ApiError> {
        let text = v
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| speech::not_a_transcript("elevenlabs"))?;
        let words: Vec<Value> = v
            .get("words")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|w| w.get("type").and_then(Value::as_str).unwrap_or("word") == "word")
            .map(|w| json!({"word": w.get("text"), "start": w.get("start"), "end": w.get("end")}))
            .collect();
        Ok(Some(Transcript {
            text: text.to_owned(),
            language: v
                .get("language_code")
                .and_then(Value::as_str)
                .map(str::to_owned),
            claimed_seconds: words.last().and_then(|w| w.get("end")).cloned(),
            words,
        }))
    }
}
