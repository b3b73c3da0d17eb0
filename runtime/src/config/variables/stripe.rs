//! Stripe, for buying credits: its keys and its API.

use super::row::{Scope, Variable};

/// In the page's order.
pub(super) const VARIABLES: &[Variable] = &[
    Variable {
        name: "STRIPE_SECRET_KEY",
        default: r#"none"#,
        meaning: r#"Stripe's secret API key, for buying credits (see [Buying
            credits](credits.md#buying-credits-stripe-checkout)); unset: the three
            `/api/v1/stripe/...` routes answer 503 saying so. Sent to Stripe only,
            never answered or logged"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "STRIPE_WEBHOOK_SECRET",
        default: r#"none"#,
        meaning: r#"the signing secret of the Stripe webhook endpoint (`whsec_...`); unset:
            the webhook answers 503 (Stripe retries)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "STRIPE_API_BASE",
        default: r#"`https://api.stripe.com`"#,
        meaning: r#"Stripe's API (the simulator in tests and the demo)"#,
        scope: Scope::Gateway,
    },
];
