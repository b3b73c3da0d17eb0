//! The response cache (who shares its entries, its bound) and what
//! `/models/trending` shows of the other tenants' traffic.

use super::row::{Scope, Variable};

/// In the page's order.
pub(super) const VARIABLES: &[Variable] = &[
    Variable {
        name: "GATEWAY_CACHE_SCOPE",
        default: r#"`user`"#,
        meaning: r#"who shares response-cache entries: `user` (any of the user's keys), `key`
            (the presented API key; a session token falls back to its user) or
            `global` (every caller: only for a gateway whose tenants may see each
            other's answers). See [Response cache](models.md)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_CACHE_MAX_MB",
        default: r#"`64`"#,
        meaning: r#"the in-process response cache's bound, MiB (not used with
            `GATEWAY_REDIS_URL`: entries then live in Redis)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_TRENDING_GLOBAL_COUNTS",
        default: r#"`false`"#,
        meaning: r#"`true`: `/models/trending` shows each model's request count over all
            tenants' traffic; by default it shows ranks only, since the counts are
            other tenants' business"#,
        scope: Scope::Gateway,
    },
];
