//! The route table's vocabulary, declared once for both sides: the
//! generator (`codegen-impl`) reads `endpoints.toml` into these keywords,
//! and the code it generates is made of these types, which the runtime
//! reads (re-exported as `runtime::spec`).
//!
//! Every route of the gateway is one row of `endpoints.toml`. The `codegen`
//! crate turns each row into one `static EndpointSpec`, and the whole table
//! into one `static Table`; the runtime reads nothing else about a route:
//! it never opens the table itself.
//!
//! All fields are `'static` data so that a row is a plain constant: no
//! allocation, no lazy initialisation, nothing to get wrong at start-up.
//!
//! Feature `serde` (the generator's only): `Deserialize` for the keywords.

mod keywords;
mod mode_kinds;
mod table;

pub use keywords::*;
pub use table::*;

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
    /// `translate = true` (mode `transcription`): the row translates.
    pub translate: bool,
    /// One line for listings and documentation.
    pub summary: &'static str,
}

impl EndpointSpec {
    /// One line of `gateway routes`: method, path, mode, billing, gate.
    pub fn listing_line(&self) -> String {
        format!(
            "{:<6} {:<62} {:<20} {:<18} {}",
            self.method.as_str(),
            self.path,
            self.mode.as_str(),
            self.billing.as_str(),
            self.gate.map(Gate::as_str).unwrap_or("-"),
        )
    }
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

    /// A tail parameter (`{name*}`): the raw segments joined by `/`.
    pub fn push_joined(&mut self, name: &'static str, raw: &[&str]) {
        self.items.push((name, raw.join("/")));
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
