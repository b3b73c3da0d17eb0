//! Logs (their filter, format and the access log) and OpenTelemetry traces.

use super::row::{Scope, Variable};

/// In the page's order.
pub(super) const VARIABLES: &[Variable] = &[
    Variable {
        name: "RUST_LOG",
        default: r#"`info`"#,
        meaning: r#"log filter (logs go to stderr)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_LOG_FORMAT",
        default: r#"`text`"#,
        meaning: r#"`text`, or `json`: one JSON object per line, with the request's `span`
            (`request_id`, `route`) on every line logged while serving it; any other
            value stops start-up"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_ENDPOINT",
        default: r#"none"#,
        meaning: r#"OpenTelemetry traces over OTLP/HTTP (protobuf) to this collector
            (`/v1/traces` added); unset (and `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
            unset): no traces, nothing of them runs. The SDK's usual variables apply:
            `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL),
            `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`,
            `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` /
            `OTEL_TRACES_SAMPLER_ARG`, `OTEL_BSP_SCHEDULE_DELAY` and the other
            `OTEL_BSP_*`. See [Traces](operations.md#traces)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        default: r#"none"#,
        meaning: r#"the full URL traces are sent to, used as is (instead of
            `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`); either turns traces on. See
            [Traces](operations.md#traces)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "OTEL_SERVICE_NAME",
        default: r#"`gateway`"#,
        meaning: r#"the traces' service name (`service.name`); read by the OpenTelemetry SDK,
            the gateway only gives its default"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_ACCESS_LOG",
        default: r#"`on`"#,
        meaning: r#"`off`: no access log (see [Observability](operations.md#observability));
            `RUST_LOG=info,access=off` filters it too"#,
        scope: Scope::Gateway,
    },
];
