//! Speech across voice vendors: what a text-to-speech request asks
//! ([`Speak`], in the gateway's words: OpenAI's `input`, `voice`, `speed`,
//! `response_format`), which voice each deployment speaks it in
//! ([`super::voices::voice_for`], the providers file's `[[voice]]`
//! aliases), and what a transcription answers in OpenAI's
//! shape ([`Transcript`]). Each kind's adapter turns a [`Speak`] into its
//! own call ([`super::Adapter::speech`]) and its transcription answer
//! into a [`Transcript`] ([`super::Adapter::transcript`]).
//!
//! Audio formats are the gateway's three ([`FORMATS`]): `mp3`, `wav`
//! (16-bit PCM) and `pcm` (raw 16-bit little-endian mono at 24 kHz, as
//! OpenAI's `pcm`); each kind is asked for the one it names so, so that
//! the gateway measures what it stores.

use serde_json::{Map, Value};

use gateway_base::errors::ApiError;

/// The audio formats a speech request may ask for (`response_format`).
pub const FORMATS: [&str; 3] = ["mp3", "wav", "pcm"];
/// The sample rate of `pcm` (and of the WAV the gateway asks for).
pub const PCM_RATE: u32 = 24_000;

/// Seconds of `bytes` of the gateway's `pcm` (16-bit mono at
/// [`PCM_RATE`]).
pub fn pcm_seconds(bytes: u64) -> rust_decimal::Decimal {
    gateway_base::audio::seconds_of(bytes / 2, PCM_RATE)
}

/// A text-to-speech request, as the gateway reads it.
#[derive(Debug, Clone)]
pub struct Speak<'a> {
    /// The text to speak (`input`).
    pub text: &'a str,
    /// The voice in the deployment's own id ([`super::voices::voice_for`]); `None`: the
    /// deployment's default (OpenAI's) or its model's own (Deepgram's).
    pub voice: Option<&'a str>,
    /// `speed`, when the caller set one.
    pub speed: Option<f64>,
    /// One of [`FORMATS`].
    pub format: &'static str,
    /// The audio is relayed as it comes (a kind with a streaming path
    /// takes it).
    pub stream: bool,
    /// The caller's `additional_params`: fields of the provider's own API,
    /// added to its body (never over a field the gateway sets).
    pub extra: Map<String, Value>,
}

impl Speak<'_> {
    /// The voice, which a `kind` model needs (400 without one).
    pub fn needed_voice(&self, kind: &str) -> Result<&str, ApiError> {
        self.voice
            .ok_or_else(|| ApiError::BadRequest(format!("voice: a {kind} model needs one")))
    }

    /// The object `field` of the provider's body (the caller's own from
    /// `additional_params`, if any) with the caller's `speed` in it, when
    /// one was asked: within `range`, else 400 naming `speed`.
    pub fn speed_in(
        &self,
        field: &str,
        range: (f64, f64),
        kind: &str,
    ) -> Result<Option<Value>, ApiError> {
        let Some(speed) = self.speed else {
            return Ok(None);
        };
        if !(range.0..=range.1).contains(&speed) {
            return Err(speed_refused(kind, range));
        }
        let mut object = match self.extra.get(field) {
            Some(Value::Object(o)) => o.clone(),
            _ => Map::new(),
        };
        object.insert("speed".into(), Value::from(speed));
        Ok(Some(Value::Object(object)))
    }
}

/// Where a kind's voices are listed (`GET /audio/voices`).
#[derive(Debug, Clone, Copy)]
pub enum VoiceList {
    /// A fixed list of voice ids (OpenAI's).
    Fixed(&'static [&'static str]),
    /// Each speech model is a voice (Deepgram's Aura models).
    Models,
    /// Read from the provider: `GET {base_url}{path}`, its answer read
    /// into `[{"id", "name"}]` by `read`.
    Fetched {
        path: &'static str,
        read: fn(&Value) -> Vec<Value>,
    },
}

/// OpenAI's speech voices.
pub const OPENAI_VOICES: [&str; 11] = [
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse",
];

/// The `{"id", "name"}` of each object of `list` (a provider's voice
/// list), its id and name under `id_key` and `name`.
pub fn voices_of(list: Option<&Value>, id_key: &str) -> Vec<Value> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let id = v.get(id_key)?.as_str()?;
            let mut out = Map::new();
            out.insert("id".into(), Value::String(id.to_owned()));
            out.insert("name".into(), v.get("name").cloned().unwrap_or(Value::Null));
            Some(Value::Object(out))
        })
        .collect()
}

/// How a kind's speech takes a voice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoiceUse {
    /// A voice may be named; none: the provider's default (OpenAI).
    Optional,
    /// Every call names one (ElevenLabs, Cartesia).
    Required,
    /// The model is the voice (Deepgram's Aura models): a voice asked is
    /// served only by the model of that id.
    Model,
}

/// Adds `extra` (the caller's `additional_params`) to `body`, never over
/// a field the gateway set.
pub fn merge_extra(body: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (k, v) in extra {
        body.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

/// A speed a kind cannot take: 400 naming `speed` and the range it takes.
pub fn speed_refused(kind: &str, range: (f64, f64)) -> ApiError {
    ApiError::BadRequest(format!(
        "speed: a {kind} voice takes a speed from {} to {}",
        range.0, range.1
    ))
}

/// A transcription's answer in OpenAI's shape: its `text`, the language
/// when the provider names it, and the seconds the provider claims (only
/// ever a bound's second opinion: the gateway bills what it measured).
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub text: String,
    pub language: Option<String>,
    pub claimed_seconds: Option<Value>,
    /// Words with their times, when the provider gives them.
    pub words: Vec<Value>,
}

impl Transcript {
    /// OpenAI's `json` answer (`{"text"}`), or `verbose_json`
    /// (`language`, `duration`, `words` too) when `verbose`.
    pub fn to_json(&self, verbose: bool) -> Value {
        let mut v = Map::new();
        v.insert("text".into(), Value::String(self.text.clone()));
        if verbose {
            v.insert("task".into(), Value::String("transcribe".into()));
            v.insert(
                "language".into(),
                self.language.clone().map_or(Value::Null, Value::String),
            );
            v.insert(
                "duration".into(),
                self.claimed_seconds.clone().unwrap_or(Value::Null),
            );
            v.insert("words".into(), Value::Array(self.words.clone()));
        }
        Value::Object(v)
    }
}

/// A provider answer that is not its transcription's shape.
pub fn not_a_transcript(kind: &str) -> ApiError {
    ApiError::BadGateway(format!(
        "the model provider ({kind}) answered a transcription not in its shape"
    ))
}

/// How a transcription's audio goes to the provider.
#[derive(Debug, Clone, PartialEq)]
pub enum Upload {
    /// A `multipart/form-data` form: these text fields, then the audio as
    /// its `file` part.
    Multipart {
        path: String,
        fields: Vec<(String, String)>,
    },
    /// The audio as the request's body (its own content type), the
    /// options in the path's query.
    Raw { path: String },
}

/// A kind that transcribes but does not translate to English: 400 for a
/// translation (`translating`).
pub fn transcribes_only(translating: bool, kind: &str) -> Result<(), ApiError> {
    match translating {
        true => Err(ApiError::BadRequest(format!(
            "model: a {kind} model transcribes; it does not translate"
        ))),
        false => Ok(()),
    }
}

/// 400 naming the first of `fields` the form has, which a `kind`
/// provider has no equivalent of.
pub fn refuse_fields(
    form: &Map<String, Value>,
    fields: &[&str],
    kind: &str,
) -> Result<(), ApiError> {
    match fields.iter().find(|f| form.contains_key(**f)) {
        Some(f) => Err(ApiError::BadRequest(format!(
            "{f}: a {kind} model does not take it"
        ))),
        None => Ok(()),
    }
}

/// A voice vendor's transcript is answered in OpenAI's `json`,
/// `verbose_json` or `text`; subtitles (`srt`, `vtt`) are 400.
pub fn plain_formats(form: &Map<String, Value>, kind: &str) -> Result<(), ApiError> {
    match form.get("response_format").and_then(Value::as_str) {
        None | Some("json" | "verbose_json" | "text") => Ok(()),
        Some(_) => Err(ApiError::BadRequest(format!(
            "response_format: a {kind} model answers json, verbose_json or text"
        ))),
    }
}

/// A field's value as form or query text (a string as it is).
pub fn text_of(v: Value) -> String {
    match v {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

/// How long a voice list read from a provider is kept.
pub const VOICE_LIST_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// The voice lists read from providers (`GET /audio/voices`), each kept
/// [`VOICE_LIST_TTL`], by provider id and base URL.
#[derive(Debug, Default)]
pub struct VoiceLists(
    std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, Vec<Value>)>>,
);

impl VoiceLists {
    /// The list kept under `key`, while fresh.
    pub fn get(&self, key: &str) -> Option<Vec<Value>> {
        let lists = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lists
            .get(key)
            .filter(|(at, _)| at.elapsed() < VOICE_LIST_TTL)
            .map(|(_, list)| list.clone())
    }

    /// Keeps `list` under `key`.
    pub fn put(&self, key: String, list: Vec<Value>) {
        let mut lists = self.0.lock().unwrap_or_else(|e| e.into_inner());
        lists.insert(key, (std::time::Instant::now(), list));
    }
}
