//! How the gateway speaks to one kind of provider API: the operations
//! ([`Op`]), the [`Adapter`] trait and a native call ([`Native`]).

use serde_json::{Map, Value};

use super::model::{Model, ModelType};
use super::speech::{Speak, Transcript, Upload, VoiceList, VoiceUse};
use super::stream::StreamTranslator;
use gateway_adapters::upstream::llm::KeyForm;
use gateway_base::errors::ApiError;

/// The operations an adapter knows how to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Chat,
    Completion,
    Embedding,
    Image,
    Speech,
    Transcription,
    Translation,
    Video,
}

/// How the gateway speaks to one kind of provider API. The request and
/// answer shapes of the gateway are OpenAI's; an adapter maps them to and
/// from its provider's.
pub trait Adapter: Send + Sync + std::fmt::Debug {
    /// The path of `op` relative to the provider's `base_url` (OpenAI's;
    /// a native adapter's own path comes with [`Adapter::native`]).
    fn path(&self, op: Op) -> &'static str;
    /// Whether models of type `t` can be called through this adapter (the
    /// providers file is refused otherwise).
    fn supports(&self, t: ModelType) -> bool {
        let _ = t;
        true
    }
    /// The path of the provider's WebSocket for models of type `t` (a
    /// realtime session, a live transcription), under its base URL;
    /// `None`: it has none.
    fn live_path(&self, t: ModelType) -> Option<&'static str> {
        let _ = t;
        None
    }
    /// How the provider's key is presented.
    fn key_form(&self) -> KeyForm {
        KeyForm::Bearer
    }
    /// Where its API lists its models (`gateway check-config --connect`
    /// asks it), under `base_url`.
    fn models_path(&self) -> &'static str {
        "/models"
    }
    /// The API its chat bodies speak, which says where an image can be
    /// in them (their bound, [`crate::bounds::chat`]).
    fn shape(&self) -> crate::bounds::Shape {
        crate::bounds::Shape::OpenAi
    }
    /// The call actually sent for `op` on `m`: the path (relative to
    /// `base_url`, per operation and per stream) and the provider's body,
    /// from [`super::openai::request`]'s body. 400 for what the provider cannot
    /// take. OpenAI's: the path of `op` and the body unchanged.
    fn native(&self, op: Op, m: &Model, body: Map<String, Value>) -> Result<Native, ApiError> {
        let _ = m;
        Ok(Native {
            path: self.path(op).to_owned(),
            body,
        })
    }
    /// The path of a body in the provider's own API (the one its
    /// [`Adapter::shape`] names), passed through from a door of that API:
    /// `method` is the door's operation in that API's words (`messages`,
    /// `messages/count_tokens`; `generateContent`,
    /// `streamGenerateContent?alt=sse`, `countTokens`, `embedContent`,
    /// `batchEmbedContents`), `model` the provider's model id. OpenAI's:
    /// `/{method}`.
    fn own_path(&self, model: &str, method: &str) -> String {
        let _ = model;
        format!("/{method}")
    }
    /// A body of the provider's own API as it is sent, from
    /// [`super::openai::request`]'s (gateway fields gone, `model` the
    /// provider's id): unchanged, unless the API names its model elsewhere.
    fn own_body(&self, body: Map<String, Value>) -> Map<String, Value> {
        body
    }
    /// The provider's (successful, whole) answer of `op` as OpenAI's
    /// (`model`: the provider's model id). 502 when it is not the
    /// provider's shape.
    fn answer(&self, op: Op, model: &str, v: Value) -> Result<Value, ApiError> {
        let _ = (op, model);
        Ok(v)
    }
    /// How its speech takes a voice. OpenAI's: optionally.
    fn voice_use(&self) -> VoiceUse {
        VoiceUse::Optional
    }
    /// Where its voices are listed. OpenAI's: its fixed voices.
    fn voice_list(&self) -> VoiceList {
        VoiceList::Fixed(&super::speech::OPENAI_VOICES)
    }
    /// The speech call of `s` on `m`: path (query included) and body;
    /// `body` is the caller's as [`super::openai::request`] left it.
    /// OpenAI's: that body at the speech path, with the deployment's voice.
    fn speech(
        &self,
        m: &Model,
        s: &Speak<'_>,
        body: Map<String, Value>,
    ) -> Result<Native, ApiError> {
        let _ = m;
        let mut body = body;
        if let Some(v) = s.voice {
            body.insert("voice".into(), Value::String(v.to_owned()));
        }
        Ok(Native {
            path: self.path(Op::Speech).to_owned(),
            body,
        })
    }
    /// How a transcription (`op`: [`Op::Transcription`] or
    /// [`Op::Translation`]) of the form's text `fields` goes to `m` (400
    /// for a field the provider has no equivalent of); `fields` are as
    /// [`super::openai::request`] left them (the provider's model id in
    /// `model`). OpenAI's: those fields as a form.
    fn transcription(
        &self,
        op: Op,
        m: &Model,
        fields: Map<String, Value>,
    ) -> Result<Upload, ApiError> {
        let _ = m;
        let fields = fields
            .into_iter()
            .map(|(k, v)| (k, super::speech::text_of(v)))
            .collect();
        Ok(Upload::Multipart {
            path: self.path(op).to_owned(),
            fields,
        })
    }
    /// A transcription's (JSON) answer read as a [`Transcript`]; `None`:
    /// it is OpenAI's already, answered as the provider sent it.
    fn transcript(&self, v: &Value) -> Result<Option<Transcript>, ApiError> {
        let _ = v;
        Ok(None)
    }
    /// The translator of a streamed answer of `op` into OpenAI chunks
    /// (`include_usage`: the caller asked for a usage chunk); `None`: the
    /// provider streams OpenAI's chunks itself.
    fn stream(
        &self,
        op: Op,
        model: &str,
        include_usage: bool,
    ) -> Option<Box<dyn StreamTranslator>> {
        let _ = (op, model, include_usage);
        None
    }
}

/// The call a native adapter makes: path and body in its provider's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Native {
    /// Relative to the provider's `base_url`, query included.
    pub path: String,
    pub body: Map<String, Value>,
}
