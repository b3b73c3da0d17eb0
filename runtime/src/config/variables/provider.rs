//! The provider's settings, under the names of the spec's configuration
//! reference (`PROVIDER_*`): its key, its two bases, the markup, the inbound
//! webhook's secret and the business plan's gate.

use super::row::{Scope, Variable};

/// In the page's order.
pub(super) const VARIABLES: &[Variable] = &[
    Variable {
        name: "PROVIDER_API_KEY",
        default: r#"none"#,
        meaning: r#"upstream key; without it voice routes answer 503 "upstream integration not
            configured""#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "PROVIDER_BASE_URL",
        default: r#"`https://app.resemble.ai/api/v2`"#,
        meaning: r#"main upstream API"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "PROVIDER_SYNTH_URL",
        default: r#"`https://f.cluster.resemble.ai`"#,
        meaning: r#"synthesis cluster"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "PROVIDER_MARKUP_PCT",
        default: r#"`20.0`"#,
        meaning: r#"percent added to upstream cost"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "PROVIDER_WEBHOOK_SECRET",
        default: r#"none"#,
        meaning: r#"HMAC secret of the inbound webhook (unset: every inbound webhook is
            refused with 503 and nothing is stored, warned at start-up; the job
            follower still polls)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "PROVIDER_BUSINESS_PLAN_ACTIVE",
        default: r#"`false`"#,
        meaning: r#"gate of voice cloning and voice design (closed: those five routes answer
            503 without any upstream call)"#,
        scope: Scope::Gateway,
    },
];
