//! The data model of `endpoints.toml`, in two layers.
//!
//! * The *raw* layer (`Raw*` types) is what serde reads: every struct is
//!   `#[serde(deny_unknown_fields)]`, every keyword is an enum, and every key of
//!   a row is optional at this level so that one row can be read key by key
//!   (see [`crate::validate`]) and a bad key never hides the others.
//! * The *resolved* layer ([`Table`], [`Row`], ...) is what the validator
//!   produces once every check passed: area defaults applied, full paths
//!   built, path parameters extracted, upstream credentials looked up. The
//!   expansion ([`mod@crate::expand`]) and [`Table::listing`] read only this
//!   layer.
//!
//! The keyword enums ([`crate::keywords`], re-exported here) are those of
//! `gateway-spec` (`runtime::spec`) themselves.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

pub use crate::keywords::*;

/// A TOML table read as a list of `(key, value)` pairs in the order written.
///
/// Errors in a value name its key, so `[endpoint.body]` problems point at
/// the field.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderedMap<V>(pub Vec<(String, V)>);

impl<V> Default for OrderedMap<V> {
    fn default() -> Self {
        OrderedMap(Vec::new())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MapVisitor<V>(std::marker::PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = OrderedMap<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value = map.next_value::<V>()?;
                    items.push((key, value));
                }
                Ok(OrderedMap(items))
            }
        }

        deserializer.deserialize_map(MapVisitor(std::marker::PhantomData))
    }
}

/// `[areas.<name>]`: the URL prefix and the defaults of an area.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawArea {
    /// URL prefix of every row of the area, e.g. `/api/v1/voice`.
    pub prefix: String,
    /// Default `auth` of the area's rows.
    pub auth: Option<Auth>,
    /// Default `errors` of the area's rows.
    pub errors: Option<ErrorFormat>,
}

/// `[bases.<name>]`: how the provider key is presented to a base.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBase {
    /// Credential header form.
    pub auth: UpstreamAuth,
}

/// A row's `upstream = { ... }`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    /// Which base URL (a key of `[bases]`).
    pub base: BaseName,
    /// Method of the upstream call.
    pub method: Method,
    /// Path template relative to the base, with `{name}` placeholders.
    pub path: String,
    /// Placeholders filled from the query string.
    #[serde(default)]
    pub from_query: Vec<String>,
    /// Placeholders filled from the JSON body (in `fields` mode: from the
    /// `fields` object).
    #[serde(default)]
    pub from_body: Vec<String>,
    /// Placeholders filled from the parent recorded with the row's own
    /// addressed resource when it was created (an agent tool's agent).
    #[serde(default)]
    pub from_parent: Vec<String>,
}

/// One entry of `[endpoint.body]` or `[endpoint.query]`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawField {
    /// JSON type of the field.
    #[serde(rename = "type")]
    pub ty: FieldType,
    /// Whether the field must be present.
    #[serde(default)]
    pub required: bool,
    /// Maximum length in characters (strings only).
    pub max_len: Option<u32>,
    /// Inclusive lower bound (numbers only).
    pub min: Option<f64>,
    /// Inclusive upper bound (numbers only).
    pub max: Option<f64>,
    /// Allowed values (strings only).
    pub one_of: Option<Vec<String>>,
}

/// One `[[endpoint]]` row as written. Every key is optional here; the
/// validator reports the missing required ones.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEndpoint {
    pub id: Option<String>,
    pub area: Option<AreaName>,
    pub method: Option<Method>,
    pub path: Option<String>,
    pub mode: Option<Mode>,
    pub capability: Option<String>,
    pub billing: Option<Billing>,
    pub metering: Option<Metering>,
    pub resource: Option<String>,
    pub gate: Option<Gate>,
    pub auth: Option<Auth>,
    pub errors: Option<ErrorFormat>,
    pub job: Option<String>,
    pub file_field: Option<String>,
    pub mirror: Option<String>,
    pub retention_days: Option<u32>,
    pub summary: Option<String>,
    pub translate: Option<bool>,
    pub upstream: Option<RawUpstream>,
    pub rename: Option<OrderedMap<String>>,
    pub drop: Option<Vec<String>>,
    pub set: Option<toml::Table>,
    pub body: Option<OrderedMap<RawField>>,
    pub query: Option<OrderedMap<RawField>>,
    /// `example`: a request body, shown as the example of the operation's
    /// JSON body in the OpenAPI document.
    pub example: Option<toml::Table>,
}

/// `[kinds.<kind>]`: what a resource kind does beyond ownership.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKind {
    /// Unowned ones (the account's stock) may be read and used by everyone.
    #[serde(default)]
    pub shared_stock: bool,
    /// The field naming one: in the upstream's answer creating it (before
    /// `id`/`uuid`), and the path parameter naming the one a first build bills.
    pub id_field: Option<String>,
}

/// `[purposes.<name>]`: where an upload of this purpose is stored.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPurpose {
    /// Object key prefix, ending in `/`.
    pub prefix: String,
    /// Storage class of the asset record.
    pub class: String,
    /// Days kept; absent: permanent.
    pub retention_days: Option<u32>,
    /// The purpose of a form without one.
    #[serde(default)]
    pub default: bool,
}

/// A validated table: what the generated code is made of.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// `[areas]`, in the order written.
    pub areas: Vec<AreaDef>,
    /// `[bases]`, in the order written.
    pub bases: Vec<BaseDef>,
    /// The rows, in table order (the order of `ROUTES`).
    pub rows: Vec<Row>,
    /// `[resources]`: parameter name → kind of user-owned resource it names.
    pub resources: Vec<(String, String)>,
    /// `[capabilities]`, in the order written: every rate-limit bucket a
    /// row names, with its default quota.
    pub capabilities: Vec<CapabilityDef>,
    /// `[unmatched] errors`: the error format of a path under no area's
    /// prefix (`None`: `detail`).
    pub unmatched_errors: Option<ErrorFormat>,
    /// `[kinds.*]`, in the order written.
    pub kinds: Vec<KindDef>,
    /// `[limits]`: mode → largest media body, in bytes.
    pub limits: Vec<(Mode, u64)>,
    /// `[purposes.*]`, in the order written.
    pub purposes: Vec<PurposeDef>,
    /// `[prices]`: `<product>.<unit>` → USD per unit (decimal text).
    pub prices: Vec<(String, String)>,
    /// `[reconcile.<product>]`: (product, unit) → upstream billing product.
    pub upstream_products: Vec<(String, Billing, String)>,
    /// `[products]`: billing unit → the price-key product of its rows.
    pub unit_products: Vec<(Billing, String)>,
    /// `[job_ceilings]`: job kind → the units of its submit row's billing
    /// unit a submit holds when its input cannot be measured.
    pub job_ceilings: Vec<(String, u32)>,
}

/// A resolved `[kinds.<kind>]`.
#[derive(Debug, Clone, PartialEq)]
pub struct KindDef {
    pub kind: String,
    pub shared_stock: bool,
    pub id_field: Option<String>,
}

/// A resolved `[purposes.<name>]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PurposeDef {
    pub name: String,
    pub prefix: String,
    pub class: String,
    pub retention_days: Option<u32>,
    pub default: bool,
}

impl Table {
    /// One line per row, exactly as `runtime::spec::EndpointSpec::listing_line`
    /// prints the generated row (the `gateway routes` listing).
    pub fn listing(&self) -> Vec<String> {
        self.rows.iter().map(Row::listing_line).collect()
    }

    /// The row with this id.
    pub fn row(&self, id: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.id == id)
    }

    /// The `[job_ceilings]` entry of job kind `kind`.
    pub fn job_ceiling(&self, kind: &str) -> Option<u32> {
        self.job_ceilings
            .iter()
            .find(|(k, _)| k == kind)
            .map(|(_, units)| *units)
    }

    /// One entry per distinct `job` kind, in the order the kinds first
    /// appear. Validation makes sure each kind has exactly one
    /// `job_submit` row and at most one `job_get` row.
    pub fn job_kinds(&self) -> Vec<JobKindDef<'_>> {
        let mut kinds: Vec<&str> = Vec::new();
        for job in self.rows.iter().filter_map(|r| r.job.as_deref()) {
            if !kinds.contains(&job) {
                kinds.push(job);
            }
        }
        kinds
            .into_iter()
            .filter_map(|kind| {
                let with = |mode: Mode| {
                    self.rows
                        .iter()
                        .find(|r| r.mode == mode && r.job.as_deref() == Some(kind))
                };
                Some(JobKindDef {
                    kind,
                    submit: with(Mode::JobSubmit)?,
                    get: with(Mode::JobGet),
                })
            })
            .collect()
    }
}

/// A resolved `[capabilities]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityDef {
    pub name: String,
    /// `None` is `"off"`: not rate-limited.
    pub quota: Option<Quota>,
}

/// A quota as the table writes it (`"60/m"`): `count` requests per
/// `per_secs` seconds (`runtime::spec::QuotaSpec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    pub count: u32,
    pub per_secs: u64,
}

impl Quota {
    /// Reads a `[capabilities]` value: `"off"` (`None`) or
    /// `"<count>/<unit>"`, count a whole number ≥ 1, unit `s`, `m`, `h`
    /// or `d`. The error says what is wrong, for the table's messages.
    pub fn parse(text: &str) -> Result<Option<Quota>, String> {
        if text == "off" {
            return Ok(None);
        }
        let Some((count, unit)) = text.split_once('/') else {
            return Err(format!(
                "quota `{text}` must be `off` or `<count>/<unit>`, e.g. `60/m`"
            ));
        };
        let count = count
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| count.parse::<u32>().ok())
            .flatten()
            .filter(|&c| c >= 1)
            .ok_or_else(|| {
                format!(
                    "quota `{text}`: the count `{count}` must be a whole number from 1 to {}",
                    u32::MAX
                )
            })?;
        let per_secs = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            _ => {
                return Err(format!(
                    "quota `{text}`: unknown unit `{unit}` (expected s, m, h or d)"
                ))
            }
        };
        Ok(Some(Quota { count, per_secs }))
    }
}

/// One job kind of the table: the rows that serve it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobKindDef<'a> {
    pub kind: &'a str,
    /// The `job_submit` row of this kind.
    pub submit: &'a Row,
    /// The `job_get` row of this kind, if any; its `mirror` is the kind's.
    pub get: Option<&'a Row>,
}

impl JobKindDef<'_> {
    /// Dotted path of the result URL to mirror (the `get` row's `mirror`).
    pub fn mirror(&self) -> Option<&str> {
        self.get.and_then(|g| g.mirror.as_deref())
    }
}

/// A resolved `[areas.<name>]`.
#[derive(Debug, Clone, PartialEq)]
pub struct AreaDef {
    pub name: AreaName,
    /// URL prefix (starts with `/`, no trailing `/`).
    pub prefix: String,
    pub auth: Option<Auth>,
    pub errors: Option<ErrorFormat>,
}

/// A resolved `[bases.<name>]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BaseDef {
    pub name: BaseName,
    pub auth: UpstreamAuth,
}

/// One validated row, every default applied. Field for field what the
/// generated `EndpointSpec` holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: String,
    /// 1-based line of the row's `[[endpoint]]` header.
    pub line: usize,
    pub area: AreaName,
    pub method: Method,
    /// Full path: area prefix + row path, e.g. `/api/v1/voice/tts/voices/{voice_uuid}`.
    pub path: String,
    /// Names of the `{param}` segments of `path`, in order (a `{name*}`
    /// tail's without its `*`).
    pub params: Vec<String>,
    pub mode: Mode,
    pub capability: String,
    pub billing: Billing,
    pub metering: Metering,
    /// Kind of user-owned resource this row creates, lists or addresses.
    pub resource: Option<String>,
    /// `(parameter, kind)`: path or query parameters naming a user-owned
    /// resource whose owner must be the caller.
    pub owner_checks: Vec<(String, String)>,
    pub gate: Option<Gate>,
    pub auth: Auth,
    pub errors: ErrorFormat,
    pub upstream: Option<Upstream>,
    pub body: Vec<FieldRule>,
    pub query: Vec<FieldRule>,
    /// `(from, to)` pairs in the order written.
    pub rename: Vec<(String, String)>,
    pub drop: Vec<String>,
    /// `set` as compact JSON text, keys in the order written.
    pub set: Option<String>,
    pub file_field: Option<String>,
    pub job: Option<String>,
    pub mirror: Option<String>,
    pub retention_days: Option<u32>,
    /// `translate = true` (mode `transcription`): the row translates.
    pub translate: bool,
    /// `""` when the row has none.
    pub summary: String,
    /// `example` as compact JSON text, keys in the order written.
    pub example: Option<String>,
}

impl Row {
    /// The `gateway routes` line of this row; the same format string as
    /// `runtime::spec::EndpointSpec::listing_line`.
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

    /// Name of the generated `static`: the id in upper case, every
    /// character that is not a letter or digit turned into `_`
    /// (`tts.synthesize` → `TTS_SYNTHESIZE`).
    pub fn static_name(&self) -> String {
        static_name(&self.id)
    }

    /// Name of the generated handler: `handle_` + the id in lower case.
    pub fn handler_name(&self) -> String {
        format!("handle_{}", self.static_name().to_ascii_lowercase())
    }

    /// The path's segments (prefix included, one trailing `/` ignored).
    pub fn segments(&self) -> Vec<Segment<'_>> {
        segments(&self.path)
    }
}

/// The generated `static` name for a row id.
pub fn static_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// One segment of a route path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Segment<'a> {
    /// A literal segment (sorts before `Param`: static segments win).
    Static(&'a str),
    /// A `{name}` segment.
    Param(&'a str),
    /// A `{name*}` segment, the path's last: the rest of the path, one
    /// segment or more joined by `/` (sorts last: the least specific).
    Tail(&'a str),
}

/// Splits a validated path into segments, ignoring one trailing `/`; the
/// same rule the generated matcher applies to request paths.
pub fn segments(path: &str) -> Vec<Segment<'_>> {
    let rest = path.strip_prefix('/').unwrap_or(path);
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Vec::new();
    }
    rest.split('/')
        .map(
            |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => match name.strip_suffix('*') {
                    Some(name) => Segment::Tail(name),
                    None => Segment::Param(name),
                },
                None => Segment::Static(s),
            },
        )
        .collect()
}

/// A resolved `upstream`, with the base's credential form.
#[derive(Debug, Clone, PartialEq)]
pub struct Upstream {
    pub base: BaseName,
    pub method: Method,
    pub path: String,
    pub from_query: Vec<String>,
    pub from_body: Vec<String>,
    pub from_parent: Vec<String>,
    pub auth: UpstreamAuth,
}

/// A validated body field or query parameter rule.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldRule {
    pub name: String,
    pub ty: FieldType,
    pub required: bool,
    pub max_len: Option<u32>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub one_of: Vec<String>,
}
