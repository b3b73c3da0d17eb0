//! A model of the providers file: what it does ([`ModelType`]) and its
//! prices and limits ([`Model`]).

use rust_decimal::Decimal;

/// What a model does (`type` in the providers file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelType {
    Chat,
    Completion,
    Embedding,
    Image,
    Video,
    Tts,
    Stt,
    /// A speech-to-speech session over a WebSocket (OpenAI's Realtime API).
    Realtime,
}

impl ModelType {
    pub const ALL: [ModelType; 8] = [
        ModelType::Chat,
        ModelType::Completion,
        ModelType::Embedding,
        ModelType::Image,
        ModelType::Video,
        ModelType::Tts,
        ModelType::Stt,
        ModelType::Realtime,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ModelType::Chat => "chat",
            ModelType::Completion => "completion",
            ModelType::Embedding => "embedding",
            ModelType::Image => "image",
            ModelType::Video => "video",
            ModelType::Tts => "tts",
            ModelType::Stt => "stt",
            ModelType::Realtime => "realtime",
        }
    }

    pub fn parse(s: &str) -> Option<ModelType> {
        ModelType::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// One model of a provider.
#[derive(Debug, Clone)]
pub struct Model {
    /// The provider's own id (`sim-gpt`).
    pub id: String,
    pub kind: ModelType,
    pub context_window: Option<u64>,
    pub aliases: Vec<String>,
    pub input_per_mtok: Option<Decimal>,
    pub output_per_mtok: Option<Decimal>,
    /// Prompt tokens read from the provider's cache (default: the input price).
    pub cache_read_per_mtok: Option<Decimal>,
    /// Prompt tokens written to the provider's cache (default: the input price).
    pub cache_write_per_mtok: Option<Decimal>,
    /// Audio tokens of a realtime session's input and output (beside the
    /// text prices; `None`: the text price).
    pub input_audio_per_mtok: Option<Decimal>,
    pub output_audio_per_mtok: Option<Decimal>,
    pub per_image: Option<Decimal>,
    /// USD per second of audio or video.
    pub per_second: Option<Decimal>,
    /// USD per minute of audio (a transcription's, as voice vendors price
    /// it; billed per second, [`Model::seconds_cost`]).
    pub per_minute: Option<Decimal>,
    /// USD per 1,000 characters of a speech request's input (Unicode
    /// characters, markup included, as voice vendors count them).
    pub per_1k_chars: Option<Decimal>,
    /// The reply's length when the caller gives none and the provider needs
    /// one (Anthropic's required `max_tokens`); default
    /// [`crate::bounds::DEFAULT_MAX_OUTPUT`].
    pub max_output_tokens: Option<u64>,
    /// Answers are cached this long unless a request says otherwise
    /// (`cache_ttl_secs`; `None`: only when a request asks, [`crate::cache`]).
    pub cache_ttl_secs: Option<u64>,
    /// A cache hit costs this percentage of the original's charge
    /// (`cache_hit_price_pct`, default 0).
    pub cache_hit_price_pct: Decimal,
    /// A batch's line costs this percentage of the list price
    /// (`batch_price_pct`, default [`DEFAULT_BATCH_PRICE_PCT`]).
    pub batch_price_pct: Decimal,
    /// Limits per user of the model (`rpm`, `tpm`).
    pub limits: UserLimits,
}

/// A model's or a route's limits per user, in the providers file: `rpm`
/// requests and `tpm` tokens per window (a minute); a key's own `rpm` and
/// `tpm` apply beside them ([`gateway_adapters::ratelimit::windows`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserLimits {
    pub rpm: Option<u64>,
    pub tpm: Option<u64>,
}

impl UserLimits {
    /// `rpm` and `tpm` as read from the providers file: each at least 1.
    pub fn read(rpm: Option<u64>, tpm: Option<u64>) -> Result<UserLimits, String> {
        for (name, v) in [("rpm", rpm), ("tpm", tpm)] {
            if v == Some(0) {
                return Err(format!("{name} must be at least 1"));
            }
        }
        Ok(UserLimits { rpm, tpm })
    }
}

/// A batch line's price when the providers file sets none: half the list price.
pub const DEFAULT_BATCH_PRICE_PCT: Decimal = Decimal::from_parts(50, 0, 0, false, 0);

impl Model {
    /// This model at its batch price: every price times
    /// `batch_price_pct` / 100, so that a batch line's bound, hold and
    /// charge are all priced alike (one rounding, at the charge).
    pub fn at_batch_price(&self) -> Model {
        let f = self.batch_price_pct / Decimal::ONE_HUNDRED;
        let at = |p: Option<Decimal>| p.map(|p| p * f);
        Model {
            input_per_mtok: at(self.input_per_mtok),
            output_per_mtok: at(self.output_per_mtok),
            cache_read_per_mtok: at(self.cache_read_per_mtok),
            cache_write_per_mtok: at(self.cache_write_per_mtok),
            input_audio_per_mtok: at(self.input_audio_per_mtok),
            output_audio_per_mtok: at(self.output_audio_per_mtok),
            per_image: at(self.per_image),
            per_second: at(self.per_second),
            per_minute: at(self.per_minute),
            per_1k_chars: at(self.per_1k_chars),
            ..self.clone()
        }
    }

    /// The price of cache reads: `cache_read_per_mtok`, else the input price.
    pub fn cache_read_price(&self) -> Option<Decimal> {
        self.cache_read_per_mtok.or(self.input_per_mtok)
    }

    /// What `seconds` of audio cost before markup: at `per_second`, else
    /// at `per_minute` (multiplied before it is divided, so that no
    /// rounding comes in before the charge's); `None`: unpriced.
    pub fn seconds_cost(&self, seconds: Decimal) -> Option<Decimal> {
        match (self.per_second, self.per_minute) {
            (Some(p), _) => p.checked_mul(seconds),
            (None, Some(p)) => p.checked_mul(seconds).map(|c| c / Decimal::from(60)),
            (None, None) => None,
        }
    }

    /// What `chars` characters of speech input cost before markup, at
    /// `per_1k_chars`; `None`: not priced by the character.
    pub fn chars_cost(&self, chars: u64) -> Option<Decimal> {
        self.per_1k_chars
            .and_then(|p| p.checked_mul(Decimal::from(chars)))
            .map(|c| c / Decimal::from(1000))
    }

    /// The price of cache writes: `cache_write_per_mtok`, else the input price.
    pub fn cache_write_price(&self) -> Option<Decimal> {
        self.cache_write_per_mtok.or(self.input_per_mtok)
    }
}
