//! The whole-table facts generated code is made of (`routes::TABLE`).

use crate::*;

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
    /// `[areas.*]`: each area's prefix and error format.
    pub areas: &'static [AreaSpec],
    /// `[unmatched] errors`: the error format of a path under no area's prefix.
    pub unmatched_errors: ErrorFormat,
    /// `[kinds.*]`: resource kinds with a behaviour beyond ownership.
    pub kinds: &'static [KindSpec],
    /// `[limits]`: the largest media body of each limited mode.
    pub limits: &'static [LimitSpec],
    /// `[purposes.*]`: upload purposes, where they store and for how long.
    pub purposes: &'static [PurposeSpec],
    /// `[prices]`: the known upstream prices (`GATEWAY_PRICES` overrides them).
    pub prices: &'static [PriceSpec],
    /// `[reconcile.*]`: (product, unit) → the upstream's billing product.
    pub upstream_products: &'static [UpstreamProduct],
    /// `[products]`: billing units whose rows share one price-key product.
    pub unit_products: &'static [UnitProduct],
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

    /// The error format of a path no row matched: that of the area with the
    /// longest prefix starting it, else `[unmatched]`'s.
    pub fn errors_for_path(&self, path: &str) -> ErrorFormat {
        self.areas
            .iter()
            .filter(|a| path.starts_with(a.prefix))
            .max_by_key(|a| a.prefix.len())
            .map_or(self.unmatched_errors, |a| a.errors)
    }

    /// What `[kinds]` says of a resource kind, if anything.
    pub fn kind(&self, kind: &str) -> Option<&'static KindSpec> {
        self.kinds.iter().find(|k| k.kind == kind)
    }

    /// Whether everyone may read and use the unowned resources (the
    /// account's stock) of `kind`.
    pub fn shared_stock(&self, kind: &str) -> bool {
        self.kind(kind).is_some_and(|k| k.shared_stock)
    }

    /// The largest media body of `mode`, in bytes (the generator makes sure
    /// every limited mode a row uses has one; 0 otherwise).
    pub fn limit(&self, mode: Mode) -> u64 {
        self.limits
            .iter()
            .find(|l| l.mode == mode)
            .map_or(0, |l| l.bytes)
    }

    /// The upload purpose named `name` (`None`, or blank: the default one).
    pub fn purpose(&self, name: Option<&str>) -> Option<&'static PurposeSpec> {
        PurposeSpec::find(self.purposes, name)
    }

    /// The price-key product of a row: its billing unit's `[products]`
    /// entry, else its job kind, else its capability.
    pub fn product_of(&self, spec: &EndpointSpec) -> &'static str {
        self.unit_products
            .iter()
            .find(|p| p.unit == spec.billing)
            .map_or_else(|| spec.job.unwrap_or(spec.capability), |p| p.product)
    }

    /// The upstream's billing product of a gateway (product, unit), if it has one.
    pub fn upstream_product(&self, product: &str, unit: &str) -> Option<&'static str> {
        self.upstream_products
            .iter()
            .find(|p| p.product == product && p.unit.as_str() == unit)
            .map(|p| p.upstream)
    }
}

/// One `[areas.*]` entry: its prefix and the error format of its paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AreaSpec {
    pub area: Area,
    pub prefix: &'static str,
    pub errors: ErrorFormat,
}

/// One `[kinds.*]` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindSpec {
    pub kind: &'static str,
    /// Unowned ones (the account's stock) may be read and used by everyone.
    pub shared_stock: bool,
    /// The field naming one: in the upstream's answer creating it (before
    /// `id`/`uuid`), and the path parameter naming the one a first build bills.
    pub id_field: Option<&'static str>,
}

/// One `[limits]` entry: the largest media body of a mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitSpec {
    pub mode: Mode,
    pub bytes: u64,
}

/// One `[purposes.*]` entry: where an upload of this purpose is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PurposeSpec {
    pub name: &'static str,
    /// Object key prefix (ends in `/`).
    pub prefix: &'static str,
    /// Storage class of the asset record.
    pub class: &'static str,
    /// `None`: permanent.
    pub retention_days: Option<u32>,
    /// The purpose of a form without one.
    pub default: bool,
}

impl PurposeSpec {
    /// The purpose named `name` among `purposes` (`None`, or blank: the default one).
    pub fn find(
        purposes: &'static [PurposeSpec],
        name: Option<&str>,
    ) -> Option<&'static PurposeSpec> {
        match name.map(str::trim).filter(|s| !s.is_empty()) {
            Some(name) => purposes.iter().find(|p| p.name == name),
            None => purposes.iter().find(|p| p.default),
        }
    }
}

/// One `[prices]` entry: `<product>.<unit>` and its USD price per unit (decimal text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriceSpec {
    pub key: &'static str,
    pub price: &'static str,
}

/// One `[reconcile.*]` entry: what the upstream bills a gateway (product, unit) under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamProduct {
    pub product: &'static str,
    pub unit: Billing,
    pub upstream: &'static str,
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
    /// `[job_ceilings]`: what a submit made with a budgeted key holds when
    /// the gateway cannot measure the job's input, in units of the submit
    /// row's billing unit (`None`: the kind is not billed).
    pub ceiling: Option<u32>,
}

/// One `[bases.*]` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseSpec {
    pub base: Base,
    pub auth: UpstreamAuth,
}

/// One `[products]` entry: every row billed by `unit` is priced under `product`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitProduct {
    pub unit: Billing,
    pub product: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    static TABLE: Table = Table {
        routes: &[],
        capabilities: &[],
        job_kinds: &[],
        bases: &[],
        openapi: "",
        docs: "",
        areas: &[
            AreaSpec {
                area: Area::Voice,
                prefix: "/api/v1/voice",
                errors: ErrorFormat::Detail,
            },
            AreaSpec {
                area: Area::Gateway,
                prefix: "/api/v1",
                errors: ErrorFormat::Envelope,
            },
        ],
        unmatched_errors: ErrorFormat::Detail,
        kinds: &[KindSpec {
            kind: "voice",
            shared_stock: true,
            id_field: Some("voice_uuid"),
        }],
        limits: &[LimitSpec {
            mode: Mode::Upload,
            bytes: 10,
        }],
        purposes: &[
            PurposeSpec {
                name: "a",
                prefix: "a/",
                class: "a",
                retention_days: None,
                default: false,
            },
            PurposeSpec {
                name: "b",
                prefix: "b/",
                class: "b",
                retention_days: Some(1),
                default: true,
            },
        ],
        prices: &[],
        upstream_products: &[UpstreamProduct {
            product: "detect",
            unit: Billing::Images,
            upstream: "detect_images",
        }],
        unit_products: &[],
    };

    #[test]
    fn errors_by_the_longest_area_prefix_else_unmatched() {
        assert_eq!(
            TABLE.errors_for_path("/api/v1/voice/x"),
            ErrorFormat::Detail
        );
        assert_eq!(TABLE.errors_for_path("/api/v1/chat"), ErrorFormat::Envelope);
        assert_eq!(TABLE.errors_for_path("/elsewhere"), ErrorFormat::Detail);
    }

    #[test]
    fn lookups() {
        assert!(TABLE.shared_stock("voice"));
        assert!(!TABLE.shared_stock("project"));
        assert_eq!(TABLE.limit(Mode::Upload), 10);
        assert_eq!(TABLE.limit(Mode::Speech), 0);
        assert_eq!(TABLE.purpose(None).unwrap().name, "b");
        assert_eq!(TABLE.purpose(Some(" a ")).unwrap().name, "a");
        assert!(TABLE.purpose(Some("c")).is_none());
        assert_eq!(
            TABLE.upstream_product("detect", "images"),
            Some("detect_images")
        );
        assert_eq!(TABLE.upstream_product("detect", "audio_seconds"), None);
        assert_eq!("voice_subscription".parse(), Ok(Billing::VoiceSubscription));
        assert!("prox"
            .parse::<Mode>()
            .unwrap_err()
            .contains("expected one of"));
    }
}
