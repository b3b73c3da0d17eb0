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
