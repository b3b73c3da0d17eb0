//! OpenTelemetry traces over OTLP/HTTP (protobuf), off unless
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
//! set ([`Settings::from_env`]). Everything else is the SDK's own reading of
//! the usual variables: `OTEL_EXPORTER_OTLP_HEADERS` (and `_TRACES_HEADERS`),
//! `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_SERVICE_NAME` (default `gateway`),
//! `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` / `_ARG`, `OTEL_BSP_*`.
//!
//! Spans (the GenAI semantic conventions, with `gen_ai.provider.name`, the
//! name that replaced `gen_ai.system`):
//!
//! * one per request ([`Traces::request`], kind server; a child of the
//!   caller's span when the request carries a W3C `traceparent`): named after the row
//!   (`POST /api/v1/...`), renamed `{gen_ai.operation.name}
//!   {gen_ai.request.model}` (`chat smart`) on a model route ([`Span::model`]);
//!   `http.request.method`, `http.route`, `http.response.status_code`,
//!   `gateway.endpoint` (the row id), `gateway.request_id`; on model routes
//!   `gen_ai.operation.name`, `gen_ai.request.model`, `gateway.route` (a
//!   providers file's route), and, from the deployment that served,
//!   `gen_ai.provider.name`, `gen_ai.response.model`,
//!   `gen_ai.usage.input_tokens` / `output_tokens`,
//!   `gen_ai.response.finish_reasons`, `gateway.deployment`, and
//!   `gateway.cost` (the usage record's charge, a decimal string in USD);
//! * one child per upstream attempt ([`Span::attempt`], kind client):
//!   `gateway.attempt` (1-based), `gateway.deployment`,
//!   `gen_ai.provider.name`, `gen_ai.request.model` (the deployment's model),
//!   `gateway.outcome` (`ok`, or the failure's kind: `rate_limited`,
//!   `status_5xx`, `status_4xx`, `timeout`, `network`),
//!   `http.response.status_code`, `gateway.error` (a failed attempt's
//!   kind, status and side, with the transport's cause, scrubbed; a
//!   provider's own message is logged, never traced: it may quote the
//!   request); when none served, the request span carries
//!   `gateway.attempt_errors` (every attempt's); the attempt that served also carries the
//!   usage, finish reasons and cost, and ends with the request's answer (a
//!   stream's at its end).
//!
//! Never recorded: prompt or answer text, keys, headers, the caller's
//! identity beyond the request id.
//!
//! Off, nothing of this runs: [`Span`] is an `Option` that is `None`, every
//! method returns at once, and attribute values are built by closures
//! called only when a span is open.
//!
//! Exports are batched by the SDK's processor (its own thread), each one
//! sent on the gateway's tokio runtime by a reqwest client ([`Http`]);
//! [`Traces::shutdown`] flushes what is left (graceful shutdown).

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider,
};

/// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL (`/v1/traces` added).
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the traces URL, used as is.
pub const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";

/// Where traces go, when they are on.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The full URL spans are posted to (`.../v1/traces`).
    pub endpoint: String,
    /// The batch's schedule delay, overriding `OTEL_BSP_SCHEDULE_DELAY`
    /// (tests).
    pub schedule_delay: Option<Duration>,
}

impl Settings {
    /// From the variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as is, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`; `None` (off) when
    /// neither is set or both are empty.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Option<Settings> {
        let set = |k| {
            get(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let endpoint = match set(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) {
            Some(e) => e,
            None => format!(
                "{}/v1/traces",
                set(OTEL_EXPORTER_OTLP_ENDPOINT)?.trim_end_matches('/')
            ),
        };
        Some(Settings {
            endpoint,
            schedule_delay: None,
        })
    }
}

/// The exporter and tracer of a gateway whose traces are on.
pub struct Traces {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Traces")
    }
}

impl Traces {
    /// Builds the exporter (on the current tokio runtime).
    pub fn start(settings: &Settings) -> Result<Traces, String> {
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| "traces need a tokio runtime".to_owned())?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .no_proxy()
            .build()
            .map_err(|e| format!("the OTLP client: {e}"))?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(settings.endpoint.clone())
            .with_http_client(Http { client, rt })
            .build()
            .map_err(|e| format!("the OTLP exporter: {e}"))?;
        let mut batch = BatchConfigBuilder::default();
        if let Some(d) = settings.schedule_delay {
            batch = batch.with_scheduled_delay(d);
        }
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch.build())
            .build();
        let mut resource = opentelemetry_sdk::Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("gateway");
        }
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("gateway");
        Ok(Traces { provider, tracer })
    }

    /// Exports what is left and stops the exporter (blocks: call it from a
    /// blocking thread).
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "traces: the last spans were not exported");
        }
    }

    /// A request's span (see the module's docs): a child of the caller's
    /// span when its `headers` carry a W3C `traceparent`.
    pub fn request(
        &self,
        method: &'static str,
        path: &'static str,
        endpoint: &'static str,
        request_id: &str,
        headers: &http::HeaderMap,
    ) -> Span {
        use opentelemetry::propagation::TextMapPropagator as _;
        let parent = opentelemetry_sdk::propagation::TraceContextPropagator::new()
            .extract(&opentelemetry_http::HeaderExtractor(headers));
        let span = self
            .tracer
            .span_builder(format!("{method} {path}"))
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("http.request.method", method),
                KeyValue::new("http.route", path),
                KeyValue::new("gateway.endpoint", endpoint),
                KeyValue::new("gateway.request_id", request_id.to_owned()),
            ])
            .start_with_context(&self.tracer, &parent);
        Span(Some(Box::new(Open {
            tracer: self.tracer.clone(),
            request: parent.with_span(span),
            served: Mutex::new(None),
        })))
    }
}

/// A request's span, or nothing (traces off, or handed on with
/// [`Span::take`]).
#[derive(Default)]
pub struct Span(Option<Box<Open>>);

struct Open {
    tracer: SdkTracer,
    request: Context,
    /// The attempt that served, open until the request ends.
    served: Mutex<Option<Context>>,
}

/// What a model answer was, for the spans ([`Span::usage`]).
pub struct Usage<'a> {
    pub response_model: Option<&'a str>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub finish_reasons: Vec<String>,
}

/// One upstream attempt's span ([`Span::attempt`]), or nothing.
#[must_use]
pub struct Attempt(Option<Context>);

impl Span {
    /// Whether a span is open.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// The span, leaving nothing in its place (a stream's relay ends it).
    pub fn take(&mut self) -> Span {
        Span(self.0.take())
    }

    /// A model route: the operation (`chat`, `text_completion`,
    /// `embeddings`, ...), the model the caller asked for and the providers
    /// file's route it named, if any.
    pub fn model(&self, operation: &'static str, model: Option<&str>, route: Option<&str>) {
        let Some(o) = &self.0 else { return };
        let span = o.request.span();
        let model = model.unwrap_or("default");
        span.update_name(format!("{operation} {model}"));
        span.set_attribute(KeyValue::new("gen_ai.operation.name", operation));
        span.set_attribute(KeyValue::new("gen_ai.request.model", model.to_owned()));
        if let Some(r) = route {
            span.set_attribute(KeyValue::new("gateway.route", r.to_owned()));
        }
    }

    /// Starts attempt `n` (1-based) on `deployment` (`provider/model`) of a
    /// provider of `kind` (the providers file's), for model `model`.
    pub fn attempt(&self, n: u32, deployment: &str, kind: &str, model: &str) -> Attempt {
        let Some(o) = &self.0 else {
            return Attempt(None);
        };
        let span = o
            .tracer
            .span_builder(format!("attempt {deployment}"))
            .with_kind(SpanKind::Client)
            .with_attributes([
                KeyValue::new("gateway.attempt", i64::from(n)),
                KeyValue::new("gateway.deployment", deployment.to_owned()),
                KeyValue::new("gen_ai.provider.name", provider_name(kind)),
                KeyValue::new("gen_ai.request.model", model.to_owned()),
            ])
            .start_with_context(&o.tracer, &o.request);
        Attempt(Some(o.request.with_span(span)))
    }

    /// The attempt failed (`outcome`: the failure's kind), with the
    /// upstream's status when it answered one.
    /// `error` (`gateway.error`) says what failed and why, already
    /// scrubbed of keys.
    pub fn failed(&self, a: Attempt, outcome: &'static str, status: Option<u16>, error: &str) {
        let Some(cx) = a.0 else { return };
        let span = cx.span();
        span.set_attribute(KeyValue::new("gateway.outcome", outcome));
        span.set_attribute(KeyValue::new("gateway.error", error.to_owned()));
        if let Some(s) = status {
            span.set_attribute(KeyValue::new("http.response.status_code", i64::from(s)));
        }
        span.set_status(Status::error(outcome));
        span.end();
    }

    /// No attempt served the request: each attempt's error
    /// (`gateway.attempt_errors`: `#n deployment: kind (status, side):
    /// cause`, scrubbed of keys) on the request's span.
    pub fn attempt_errors(&self, errors: Vec<String>) {
        let Some(o) = &self.0 else { return };
        let values = errors.into_iter().map(StringValue::from).collect();
        o.request.span().set_attribute(KeyValue::new(
            "gateway.attempt_errors",
            Value::Array(Array::String(values)),
        ));
    }

    /// The attempt served the request: it stays open until the request
    /// ends; the request span learns the deployment.
    pub fn served(&self, a: Attempt, deployment: &str, kind: &str) {
        let (Some(o), Some(cx)) = (&self.0, a.0) else {
            return;
        };
        cx.span()
            .set_attribute(KeyValue::new("gateway.outcome", "ok"));
        let span = o.request.span();
        span.set_attribute(KeyValue::new("gateway.deployment", deployment.to_owned()));
        span.set_attribute(KeyValue::new("gen_ai.provider.name", provider_name(kind)));
        *o.served.lock().unwrap_or_else(|p| p.into_inner()) = Some(cx);
    }

    /// A live session's turn (`name`: `response 3`): a child span of the
    /// session's, ended by [`Span::turn_end`].
    pub fn turn(&self, name: String) -> Attempt {
        let Some(o) = &self.0 else {
            return Attempt(None);
        };
        let span = o
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .start_with_context(&o.tracer, &o.request);
        Attempt(Some(o.request.with_span(span)))
    }

    /// A turn ended (`outcome`: `complete`, `stopped`, `refused`, ...)
    /// with its tokens and charge (`None`: nothing billed).
    pub fn turn_end(&self, t: Attempt, outcome: &str, usage: Option<(u64, u64, String)>) {
        let Some(cx) = t.0 else { return };
        let span = cx.span();
        span.set_attribute(KeyValue::new("gateway.outcome", outcome.to_owned()));
        if let Some((input, output, cost)) = usage {
            span.set_attributes([
                KeyValue::new("gen_ai.usage.input_tokens", clamp(input)),
                KeyValue::new("gen_ai.usage.output_tokens", clamp(output)),
                KeyValue::new("gateway.cost", cost),
            ]);
        }
        span.end();
    }

    /// The upstream's status of the attempt that served.
    pub fn upstream_status(&self, status: u16) {
        self.on_served(|s| {
            s.set_attribute(KeyValue::new(
                "http.response.status_code",
                i64::from(status),
            ))
        });
    }

    /// The answer's model, tokens and finish reasons (`usage` is called
    /// only when a span is open), on the request and the serving attempt.
    pub fn usage<'a>(&self, usage: impl FnOnce() -> Usage<'a>) {
        let Some(o) = &self.0 else { return };
        let u = usage();
        let mut attrs = vec![
            KeyValue::new("gen_ai.usage.input_tokens", clamp(u.input_tokens)),
            KeyValue::new("gen_ai.usage.output_tokens", clamp(u.output_tokens)),
        ];
        if let Some(m) = u.response_model {
            attrs.push(KeyValue::new("gen_ai.response.model", m.to_owned()));
        }
        if !u.finish_reasons.is_empty() {
            let reasons: Vec<StringValue> = u
                .finish_reasons
                .into_iter()
                .map(StringValue::from)
                .collect();
            attrs.push(KeyValue::new(
                "gen_ai.response.finish_reasons",
                Value::Array(Array::String(reasons)),
            ));
        }
        o.request.span().set_attributes(attrs.clone());
        self.on_served(|s| s.set_attributes(attrs));
    }

    /// The charge of the request's usage record (`text`: called only when
    /// a span is open), on the request and the serving attempt.
    pub fn cost(&self, text: impl FnOnce() -> String) {
        let Some(o) = &self.0 else { return };
        let kv = KeyValue::new("gateway.cost", text());
        o.request.span().set_attribute(kv.clone());
        self.on_served(|s| s.set_attribute(kv));
    }

    /// Ends the request (answered `status`) and the attempt that served.
    pub fn end(&mut self, status: u16) {
        let Some(o) = self.0.take() else { return };
        if let Some(cx) = o.served.lock().unwrap_or_else(|p| p.into_inner()).take() {
            cx.span().end();
        }
        let span = o.request.span();
        span.set_attribute(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        if status >= 500 {
            span.set_status(Status::error(""));
        }
        span.end();
    }

    fn on_served(&self, f: impl FnOnce(opentelemetry::trace::SpanRef<'_>)) {
        let Some(o) = &self.0 else { return };
        if let Some(cx) = &*o.served.lock().unwrap_or_else(|p| p.into_inner()) {
            f(cx.span());
        }
    }
}

/// A count as the `int` OTLP carries.
fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The GenAI conventions' `gen_ai.provider.name` of a providers file's
/// `kind`.
fn provider_name(kind: &str) -> String {
    match kind {
        "gemini" => "gcp.gemini".to_owned(),
        other => other.to_owned(),
    }
}

/// The exporter's HTTP client: each export is sent by reqwest on the
/// gateway's tokio runtime (the SDK's batch thread waits for it).
#[derive(Debug)]
struct Http {
    client: reqwest::Client,
    rt: tokio::runtime::Handle,
}

/// Most bytes of a collector's answer read.
const MAX_ANSWER: usize = 64 * 1024;

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Http {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, opentelemetry_http::HttpError> {
        let client = self.client.clone();
        let sent = self.rt.spawn(async move {
            let (parts, body) = request.into_parts();
            let mut resp = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await?;
            let mut answer = http::Response::builder().status(resp.status());
            let mut read = Vec::new();
            while let Some(chunk) = resp.chunk().await? {
                if read.len() + chunk.len() > MAX_ANSWER {
                    break;
                }
                read.extend_from_slice(&chunk);
            }
            if let Some(h) = answer.headers_mut() {
                *h = std::mem::take(resp.headers_mut());
            }
            Ok::<_, opentelemetry_http::HttpError>(answer.body(Bytes::from(read))?)
        });
        sent.await?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_comes_from_either_variable() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert!(Settings::from_env(env(&[])).is_none());
        assert!(Settings::from_env(env(&[(OTEL_EXPORTER_OTLP_ENDPOINT, " ")])).is_none());
        let s = Settings::from_env(env(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://c:4318/")]));
        assert_eq!(s.unwrap().endpoint, "http://c:4318/v1/traces");
        let s = Settings::from_env(env(&[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://c:4318"),
            (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "http://t/x"),
        ]));
        assert_eq!(s.unwrap().endpoint, "http://t/x");
    }
}
