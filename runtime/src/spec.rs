//! The row type that generated code refers to.
//!
//! Every route of the gateway is one row of `endpoints.toml`. The `codegen`
//! crate turns each row into one `static EndpointSpec` (this type), and the
//! runtime reads nothing else about a route: the runtime never opens the
//! table itself.
//!
//! All fields are `'static` data so that a row is a plain constant: no
//! allocation, no lazy initialisation, nothing to get wrong at start-up.

/// HTTP method of a route or of its upstream call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }

    pub fn to_http(self) -> http::Method {
        match self {
            Method::Get => http::Method::GET,
            Method::Post => http::Method::POST,
            Method::Put => http::Method::PUT,
            Method::Patch => http::Method::PATCH,
            Method::Delete => http::Method::DELETE,
        }
    }
}

/// Which part of the spec a route belongs to; decides the URL prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    /// `/api/v1/voice/...`: the voice provider in its own request shape.
    Voice,
    /// `/api/v1/...`: the general AI gateway.
    Gateway,
}

/// How the runtime handles a route. A new behaviour is a new mode (a runtime
/// function), never a special case in generated code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward the request as is (JSON body, query) and answer with the upstream's body.
    Proxy,
    /// Body is `{"fields": {...}}`; the `fields` object is forwarded unchanged.
    Fields,
    /// Text-to-speech synthesis: answer in the gateway's synthesis shape.
    Synthesize,
    /// Submit an asynchronous job.
    JobSubmit,
    /// Read one asynchronous job.
    JobGet,
    /// List asynchronous jobs.
    JobList,
    /// Gateway-local multipart upload into the object store.
    Upload,
    /// Inbound, signature-verified webhook from the upstream provider.
    Webhook,
    /// A search over the row's `resource` kind (identity search): only the
    /// caller's own resources are answered.
    OwnedSearch,
    // ---- general gateway (area B) ----
    Chat,
    Completion,
    StopStream,
    Embedding,
    Image,
    VideoSubmit,
    VideoGet,
    VideoList,
    VideoCancel,
    Speech,
    Transcription,
    Catalogue,
    CatalogueTrending,
    CatalogueModel,
    // ---- accounts, tokens, keys and admin (served from the database) ----
    /// `POST /auth/register`: a new account.
    Register,
    /// `POST /auth/login`: access and refresh tokens for a password.
    Login,
    /// `POST /auth/refresh`: a new access token (refresh token rotated).
    TokenRefresh,
    /// `POST /auth/logout`: revokes the presented access token (and a refresh token).
    Logout,
    /// `POST /auth/confirm`: confirms an e-mail address with a mailed token.
    ConfirmEmail,
    /// `POST /auth/reset-password`: requests or completes a password reset.
    ResetPassword,
    /// `GET /auth/me`: the caller and their balance.
    Me,
    /// The caller's API keys (never the keys themselves).
    KeyList,
    /// A new API key, answered once.
    KeyCreate,
    /// Revokes one of the caller's API keys.
    KeyRevoke,
    /// Admin: every user.
    AdminUsers,
    /// Admin: disables a user.
    AdminDisable,
    /// Admin: enables a user.
    AdminEnable,
    /// Admin: deletes a user (soft).
    AdminDelete,
    /// Admin: grants credit to a user.
    AdminCredits,
    /// Admin: a user's usage records.
    AdminUsage,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Proxy => "proxy",
            Mode::Fields => "fields",
            Mode::Synthesize => "synthesize",
            Mode::JobSubmit => "job_submit",
            Mode::JobGet => "job_get",
            Mode::JobList => "job_list",
            Mode::Upload => "upload",
            Mode::Webhook => "webhook",
            Mode::OwnedSearch => "owned_search",
            Mode::Chat => "chat",
            Mode::Completion => "completion",
            Mode::StopStream => "stop_stream",
            Mode::Embedding => "embedding",
            Mode::Image => "image",
            Mode::VideoSubmit => "video_submit",
            Mode::VideoGet => "video_get",
            Mode::VideoList => "video_list",
            Mode::VideoCancel => "video_cancel",
            Mode::Speech => "speech",
            Mode::Transcription => "transcription",
            Mode::Catalogue => "catalogue",
            Mode::CatalogueTrending => "catalogue_trending",
            Mode::CatalogueModel => "catalogue_model",
            Mode::Register => "register",
            Mode::Login => "login",
            Mode::TokenRefresh => "token_refresh",
            Mode::Logout => "logout",
            Mode::ConfirmEmail => "confirm_email",
            Mode::ResetPassword => "reset_password",
            Mode::Me => "me",
            Mode::KeyList => "key_list",
            Mode::KeyCreate => "key_create",
            Mode::KeyRevoke => "key_revoke",
            Mode::AdminUsers => "admin_users",
            Mode::AdminDisable => "admin_disable",
            Mode::AdminEnable => "admin_enable",
            Mode::AdminDelete => "admin_delete",
            Mode::AdminCredits => "admin_credits",
            Mode::AdminUsage => "admin_usage",
        }
    }
}

/// What a successful request is billed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Billing {
    /// Nothing is charged (a usage record with quantity 0 is still written).
    Free,
    AudioSeconds,
    VideoSeconds,
    Images,
    /// Audio seconds, video seconds or images, picked from the job's media type.
    MediaSeconds,
    Searches,
    Enrollments,
    Generations,
    VoiceSubscription,
    /// General gateway: tokens of a language model.
    Tokens,
}

impl Billing {
    pub fn as_str(self) -> &'static str {
        match self {
            Billing::Free => "free",
            Billing::AudioSeconds => "audio_seconds",
            Billing::VideoSeconds => "video_seconds",
            Billing::Images => "images",
            Billing::MediaSeconds => "media_seconds",
            Billing::Searches => "searches",
            Billing::Enrollments => "enrollments",
            Billing::Generations => "generations",
            Billing::VoiceSubscription => "voice_subscription",
            Billing::Tokens => "tokens",
        }
    }
}

/// How the quantity billed for one successful request is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metering {
    /// Nothing is billed (a usage record with quantity 0 is still written).
    None,
    /// One unit per successful request (identity search, design generation).
    PerRequest,
    /// One unit per voice, the first time it is built (voice subscription).
    FirstBuild,
    /// Measured: audio seconds of the produced audio, or what the upstream
    /// reports for a job when it completes.
    Measured,
}

impl Metering {
    pub fn as_str(self) -> &'static str {
        match self {
            Metering::None => "none",
            Metering::PerRequest => "per_request",
            Metering::FirstBuild => "first_build",
            Metering::Measured => "measured",
        }
    }
}

/// A configuration switch that must be on for the route to be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// `PROVIDER_BUSINESS_PLAN_ACTIVE`.
    BusinessPlan,
}

impl Gate {
    pub fn as_str(self) -> &'static str {
        match self {
            Gate::BusinessPlan => "business_plan",
        }
    }
}

/// How the caller proves who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer <gateway API key or access token>`.
    Bearer,
    /// No authentication (model catalogue).
    None,
    /// HMAC signature of the body (inbound webhook).
    Signature,
    /// An admin: a user with the admin role (API key or access token), or
    /// the `X-Admin-Key` header equal to `GATEWAY_ADMIN_KEY`.
    Admin,
    /// An access token (JWT) only: an API key is refused.
    AccessToken,
}

impl Auth {
    pub fn as_str(self) -> &'static str {
        match self {
            Auth::Bearer => "bearer",
            Auth::None => "none",
            Auth::Signature => "signature",
            Auth::Admin => "admin",
            Auth::AccessToken => "access_token",
        }
    }
}

/// Wire format of error bodies (DESIGN.md, "one type, three wire formats").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorFormat {
    /// Voice API: `{"detail": "..."}`.
    Detail,
    /// General gateway format 1: `{"error","message","status_code","details"}`.
    Error,
    /// General gateway format 2: `{"request_id","success":false,"message","data":""}`.
    Envelope,
}

impl ErrorFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorFormat::Detail => "detail",
            ErrorFormat::Error => "error",
            ErrorFormat::Envelope => "envelope",
        }
    }
}

/// Which upstream base URL a call goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// The provider's main REST API (`PROVIDER_BASE_URL`).
    Main,
    /// The provider's synthesis cluster (`PROVIDER_SYNTH_URL`).
    Synth,
    /// The general gateway's model provider (OpenAI-compatible).
    Llm,
}

impl Base {
    pub fn as_str(self) -> &'static str {
        match self {
            Base::Main => "main",
            Base::Synth => "synth",
            Base::Llm => "llm",
        }
    }
}

/// The upstream call a route makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Upstream {
    pub base: Base,
    pub method: Method,
    /// Path template relative to the base, e.g. `/voices/{voice_uuid}/build`.
    /// Each `{name}` is filled from the route's path parameter of that name,
    /// or (when listed in `from_query`) from the request's query string.
    pub path: &'static str,
    /// Template variables taken from the query string rather than the path
    /// (e.g. the owning agent of an agent tool). They are removed from the
    /// query forwarded upstream.
    pub from_query: &'static [&'static str],
    /// Template variables taken from the JSON body (e.g. a design's
    /// `candidate_index`; in `fields` mode a field of the `fields` object).
    /// They are removed from the body forwarded upstream.
    pub from_body: &'static [&'static str],
    /// Template variables taken from the parent recorded with the row's own
    /// addressed resource at its creation (an agent tool's agent): the
    /// caller names the parent once, when creating.
    pub from_parent: &'static [&'static str],
    /// How the gateway presents `PROVIDER_API_KEY` to this base.
    pub auth: UpstreamAuth,
}

/// Credential header forms the upstream accepts (`upstream.md`, Authentication).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamAuth {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// `Authorization: Token token=<key>` (legacy main API).
    Token,
    /// `x-access-token: <key>` (legacy synthesis cluster).
    AccessToken,
}

impl UpstreamAuth {
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamAuth::Bearer => "bearer",
            UpstreamAuth::Token => "token",
            UpstreamAuth::AccessToken => "access_token",
        }
    }
}

/// JSON type a field must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    String,
    Integer,
    Number,
    Boolean,
    Object,
    Array,
    /// Any JSON value (e.g. `text` that is a string or a list of strings).
    Any,
}

impl FieldType {
    pub fn as_str(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Integer => "integer",
            FieldType::Number => "number",
            FieldType::Boolean => "boolean",
            FieldType::Object => "object",
            FieldType::Array => "array",
            FieldType::Any => "any",
        }
    }
}

/// One constraint on a body field or query parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FieldRule {
    pub name: &'static str,
    pub ty: FieldType,
    pub required: bool,
    /// Maximum length in characters (strings).
    pub max_len: Option<u32>,
    /// Inclusive lower bound (numbers).
    pub min: Option<f64>,
    /// Inclusive upper bound (numbers).
    pub max: Option<f64>,
    /// Allowed values (strings); empty means any.
    pub one_of: &'static [&'static str],
}

/// A path or query parameter that names a user-owned resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerCheck {
    pub param: &'static str,
    /// Resource kind (`voice`, `project`, ...).
    pub kind: &'static str,
}

/// A field renamed on the way upstream (`text` → `data`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rename {
    pub from: &'static str,
    pub to: &'static str,
}

/// One route: a row of `endpoints.toml`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EndpointSpec {
    /// Unique id of the row, e.g. `tts.synthesize`; used in audit records.
    pub id: &'static str,
    pub area: Area,
    pub method: Method,
    /// Full path as served, prefix included, e.g. `/api/v1/voice/tts/voices/{voice_uuid}`.
    pub path: &'static str,
    /// Names of the `{param}` segments of `path`, in order.
    pub params: &'static [&'static str],
    pub mode: Mode,
    /// Rate-limit bucket and audit label, e.g. `tts`.
    pub capability: &'static str,
    pub billing: Billing,
    /// How the billed quantity is found.
    pub metering: Metering,
    /// Kind of user-owned resource the row creates (POST), lists (GET of a
    /// collection) or addresses (its last path parameter).
    pub resource: Option<&'static str>,
    /// Parameters naming user-owned resources: the caller must own them.
    pub owner_checks: &'static [OwnerCheck],
    pub gate: Option<Gate>,
    pub auth: Auth,
    pub errors: ErrorFormat,
    pub upstream: Option<Upstream>,
    /// Constraints on the JSON body's fields.
    pub body: &'static [FieldRule],
    /// Constraints on query parameters.
    pub query: &'static [FieldRule],
    /// Fields renamed from the gateway's shape to the upstream's.
    pub rename: &'static [Rename],
    /// Body fields the gateway consumes itself and does not forward upstream.
    pub drop: &'static [&'static str],
    /// JSON object (as text) whose keys are set on the upstream body, e.g. `{"fill":false}`.
    pub set: Option<&'static str>,
    /// When set, the body's `audio_url` is fetched and sent upstream as a
    /// multipart file field of this name (the other fields become text parts).
    pub file_field: Option<&'static str>,
    /// Job kind for the job modes (`stt`, `enhance`, `watermark_apply`, ...).
    pub job: Option<&'static str>,
    /// Dotted path of the result-audio URL in the upstream's job answer, for
    /// result mirroring (`enhanced_audio_url`, `item.watermarked_media`).
    pub mirror: Option<&'static str>,
    /// Retention of objects stored for this route, in days.
    pub retention_days: Option<u32>,
    /// One line for listings and documentation.
    pub summary: &'static str,
}

impl EndpointSpec {
    /// One line of `gateway routes`: method, path, mode, billing, gate.
    pub fn listing_line(&self) -> String {
        format!(
            "{:<6} {:<62} {:<18} {:<18} {}",
            self.method.as_str(),
            self.path,
            self.mode.as_str(),
            self.billing.as_str(),
            self.gate.map(Gate::as_str).unwrap_or("-"),
        )
    }
}

/// Everything the generator knows about the whole table, as data
/// (`routes::TABLE`): the rows, and the facts that span rows so that the
/// runtime never rebuilds them by scanning [`Table::routes`].
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// Every row, in table order.
    pub routes: &'static [&'static EndpointSpec],
    /// `[capabilities]`: every capability a row names, with its default quota.
    pub capabilities: &'static [Capability],
    /// One entry per job kind named by a row (`job = "..."`).
    pub job_kinds: &'static [JobKind],
    /// `[bases.*]`: how the upstream key is presented to each base.
    pub bases: &'static [BaseSpec],
    /// The OpenAPI 3.1 document of the table (JSON text), served at `/openapi.json`.
    pub openapi: &'static str,
    /// The `/docs` page (HTML rendered from the OpenAPI document).
    pub docs: &'static str,
}

impl Table {
    /// The job kind named `kind`.
    pub fn job_kind(&self, kind: &str) -> Option<&'static JobKind> {
        self.job_kinds.iter().find(|k| k.kind == kind)
    }

    /// How the upstream key is presented to `base` (bearer when the table says nothing).
    pub fn base_auth(&self, base: Base) -> UpstreamAuth {
        self.bases
            .iter()
            .find(|b| b.base == base)
            .map(|b| b.auth)
            .unwrap_or(UpstreamAuth::Bearer)
    }

    /// The capability named `name`.
    pub fn capability(&self, name: &str) -> Option<&'static Capability> {
        self.capabilities.iter().find(|c| c.name == name)
    }
}

/// One capability of `[capabilities]`: a rate-limit bucket and its default quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    pub name: &'static str,
    /// Default quota; `None` is `off` (not limited).
    pub quota: Option<QuotaSpec>,
}

/// A quota as the table writes it (`"60/m"`): `count` requests per `per_secs` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaSpec {
    pub count: u32,
    pub per_secs: u64,
}

/// A job kind (`stt`, `enhance`, `watermark_apply`, ...) and the rows that serve it.
#[derive(Debug, Clone, Copy)]
pub struct JobKind {
    pub kind: &'static str,
    /// The row that submits jobs of this kind (its billing and capability bill the job).
    pub submit: &'static EndpointSpec,
    /// The row that reads one job, when there is one.
    pub get: Option<&'static EndpointSpec>,
    /// Dotted path of the result URL to mirror (the `get` row's `mirror`).
    pub mirror: Option<&'static str>,
}

/// One `[bases.*]` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseSpec {
    pub base: Base,
    pub auth: UpstreamAuth,
}

/// Path parameters captured by the generated matcher, still percent-encoded
/// as they arrived. At most [`MAX_PARAMS`] per route.
#[derive(Debug, Clone, Default)]
pub struct PathParams {
    items: Vec<(&'static str, String)>,
}

/// The generator refuses routes with more path parameters than this.
pub const MAX_PARAMS: usize = 4;

impl PathParams {
    pub fn new() -> Self {
        PathParams { items: Vec::new() }
    }

    pub fn push(&mut self, name: &'static str, raw: &str) {
        self.items.push((name, raw.to_owned()));
    }

    /// The decoded value of a parameter.
    pub fn get(&self, name: &str) -> Option<std::borrow::Cow<'_, str>> {
        self.items
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| percent_encoding::percent_decode_str(v).decode_utf8_lossy())
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.items.iter().map(|(n, v)| (*n, v.as_str()))
    }
}
