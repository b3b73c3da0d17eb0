//! Read by the provider simulator and by the tests and their tooling.

use super::row::{Scope, Variable};

/// In the page's order.
pub(super) const VARIABLES: &[Variable] = &[
    Variable {
        name: "SIM_API_KEY",
        default: r#"none"#,
        meaning: r#"the credential the simulator requires (`--api-key`; media needs none);
            unset: no credential is checked"#,
        scope: Scope::Simulator,
    },
    Variable {
        name: "SIM_WEBHOOK_URL",
        default: r#"none"#,
        meaning: r#"where the simulator POSTs its completion webhooks (`--webhook-url`)"#,
        scope: Scope::Simulator,
    },
    Variable {
        name: "SIM_WEBHOOK_SECRET",
        default: r#"none"#,
        meaning: r#"the HMAC key of the `X-Provider-Signature` header of those webhooks
            (`--webhook-secret`)"#,
        scope: Scope::Simulator,
    },
    Variable {
        name: "GATEWAY_TEST_DATABASE_URL",
        default: r#"none (SQLite)"#,
        meaning: r#"a PostgreSQL database (e.g.
            `postgres://postgres@127.0.0.1:5432/postgres`): the integration tests run
            on it, each test in a fresh schema dropped afterwards"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "GATEWAY_TEST_REQUIRE_POSTGRES",
        default: r#"unset"#,
        meaning: r#"`1`: a test that needs PostgreSQL (its binaries, or
            `GATEWAY_TEST_DATABASE_URL`) fails instead of skipping (`.ci/run` sets it)"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "GATEWAY_TEST_REDIS_URL",
        default: r#"`redis://127.0.0.1:6379`"#,
        meaning: r#"the Redis of the tests that need one; they skip, saying so, when it does
            not answer"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "GATEWAY_TEST_REQUIRE_REDIS",
        default: r#"unset"#,
        meaning: r#"`1`: a test whose Redis does not answer (or that finds no `redis-server`)
            fails instead of skipping (the test command sets it)"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "GATEWAY_TEST_REQUIRE_CHROMIUM",
        default: r#"unset"#,
        meaning: r#"set: the headless-browser tests fail instead of skipping when Chromium is
            missing (the test command sets it)"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "UPDATE_SNAPSHOTS",
        default: r#"unset"#,
        meaning: r#"set (`1` for codegen's expansion tests): the snapshot tests rewrite their
            reviewed files (`tests/snapshots/routes.txt`,
            `tests/snapshots/openapi.json`, the expansions) instead of comparing"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "UPDATE_DOCS",
        default: r#"unset"#,
        meaning: r#"set: the docs test rewrites `docs/configuration.md` from this list instead
            of comparing (see [CONTRIBUTING.md](../CONTRIBUTING.md#the-tests))"#,
        scope: Scope::Tests,
    },
    Variable {
        name: "PRINT_LINKS",
        default: r#"unset"#,
        meaning: r#"set: codegen's `real_table` test prints the OpenAPI links the table
            generates"#,
        scope: Scope::Tests,
    },
];
