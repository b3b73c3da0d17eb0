//! The Cartesia adapter (`kind = "cartesia"`): text to speech
//! (`POST /tts/bytes`: `model_id`, `transcript`, `voice` by id,
//! `output_format`), the key in `X-API-Key` with the API version in
//! `Cartesia-Version` ([`VERSION`]). Cartesia's speech streams its bytes
//! as it makes them on the one path.
//!
//! Formats: `mp3` → `{"container": "mp3", "sample_rate": 44100,
//! "bit_rate": 128000}`, `wav` → `{"container": "wav", "encoding":
//! "pcm_s16le", "sample_rate": 24000}`, `pcm` → the same with `"container":
//! "raw"`. `speed` is `generation_config.speed` (0.6 to 1.5).

use serde_json::{json, Map, Value};

use super::adapter::{Adapter, Native, Op};
use super::model::{Model, ModelType};
use super::speech::{self, Speak, VoiceList, VoiceUse};
use gateway_adapters::upstream::llm::KeyForm;
use gateway_base::errors::ApiError;

/// The API version the gateway speaks (`Cartesia-Version`).
pub const VERSION: &str = "2025-04-16";
/// The speeds `generation_config.speed` takes.
const SPEED: (f64, f64) = (0.6, 1.5);

#[derive(Debug)]
pub struct Cartesia;

impl Adapter for Cartesia {
    fn path(&self, _op: Op) -> &'static str {
        "/tts/bytes"
    }

    fn supports(&self, t: ModelType) -> bool {
        t == ModelType::Tts
    }

    fn models_path(&self) -> &'static str {
        "/voices"
    }
    fn key_form(&self) -> KeyForm {
        KeyForm::Cartesia { version: VERSION }
    }

    fn voice_use(&self) -> VoiceUse {
        VoiceUse::Required
    }

    /// `GET /voices`: `{"data": [{"id", "name"}], "has_more"}` (the first
    /// page).
    fn voice_list(&self) -> VoiceList {
        VoiceList::Fetched {
            path: "/voices",
            read: |v| speech::voices_of(v.get("data"), "id"),
        }
    }

    fn speech(
        &self,
        m: &Model,
        s: &Speak<'_>,
        _body: Map<String, Value>,
    ) -> Result<Native, ApiError> {
        let voice = s.needed_voice("cartesia")?;
        let format = match s.format {
            "wav" => {
                json!({"container": "wav", "encoding": "pcm_s16le", "sample_rate": speech::PCM_RATE})
            }
            "pcm" => {
                json!({"container": "raw", "encoding": "pcm_s16le", "sample_rate": speech::PCM_RATE})
            }
            _ => json!({"container": "mp3", "sample_rate": 44100, "bit_rate": 128000}),
        };
        let mut body = Map::new();
        body.insert("model_id".into(), json!(m.id));
        body.insert("transcript".into(), json!(s.text));
        body.insert("voice".into(), json!({"mode": "id", "id": voice}));
        body.insert("output_format".into(), format);
        if let Some(config) = s.speed_in("generation_config", SPEED, "cartesia")? {
            body.insert("generation_config".into(), config);
        }
        speech::merge_extra(&mut body, &s.extra);
        Ok(Native {
            path: self.path(Op::Speech).to_owned(),
            body,
        })
    }
}
