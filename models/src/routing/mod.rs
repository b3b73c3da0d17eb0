//! Routing and resilience of model calls: which deployments a request
//! tries, in which order, and how often.
//!
//! * [`Plan`]: a request's candidates (a route's targets ordered by its
//!   strategy, then its fallbacks; or the caller's own `models: [...]`;
//!   or the one model it named), each with its upstream body and bound;
//!   built by `modes::prepare_model_call`, which holds the cost of the
//!   most expensive candidate.
//! * [`Routing::run`]: the one loop around the upstream call. Each
//!   candidate is tried once, in order, skipping those in cool-down; the
//!   last is tried again while retries remain (`GATEWAY_RETRY_MAX`, 2).
//!   Only failures before any byte went to the caller are retried, and only
//!   those that another attempt may cure ([`gateway_adapters::upstream::Failed`]: a
//!   connect error, a time-out, 429, 500, 502, 503, 504, 529; a JSON
//!   answer is read whole inside its attempt, so one whose body breaks
//!   off after its headers is a network failure too). Moving to
//!   another deployment is immediate; trying the same one again waits an
//!   exponential back-off with full jitter (`GATEWAY_RETRY_BASE_MS`, 100:
//!   a uniform draw in `[0, base·2^n)`), or the upstream's `Retry-After`
//!   when it sent one and it is at most [`RETRY_AFTER_CAP`]; never past
//!   the request's deadline. The request is settled at the prices of the
//!   deployment that answered (the mode moves its settle to it);
//!   failed attempts cost nothing.
//!   Every failed attempt is kept (its number, deployment and typed
//!   [`gateway_adapters::upstream::Failed`]): when none served, all are logged on
//!   one line and put on the request's span, and the caller gets the last
//!   one's error, as before.
//! * [`cooldown`]: a deployment that failed `GATEWAY_COOLDOWN_FAILS` (3)
//!   times within [`Settings::cooldown_window`] (30 s) is skipped for
//!   `GATEWAY_COOLDOWN_SECS` (30), then admitted for one probe request;
//!   in Redis when `GATEWAY_REDIS_URL` is set (shared by the instances;
//!   this instance's own count when Redis fails), per instance otherwise.
//! * [`strategy`]: the order of a route's targets: weighted, least-latency
//!   (a moving average of time to first byte, with a little exploration),
//!   priority.
//! * [`byok_candidates`]: a caller's own key (BYOK) goes only to the
//!   provider of the model it was given with; the other candidates are
//!   skipped.

pub mod cooldown;
pub mod settings;
pub mod strategy;

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::bounds::Bound;
use crate::providers::{Model, Provider, Providers, Route};
use gateway_adapters::upstream::llm::ProviderKey;
use gateway_adapters::upstream::{Call, Failed, Upstream};
use gateway_base::errors::ApiError;
use gateway_base::spec::Method;
use gateway_base::traces::{Attempt, Span};
pub use settings::{
    Settings, GATEWAY_COOLDOWN_FAILS, GATEWAY_COOLDOWN_SECS, GATEWAY_RETRY_BASE_MS,
    GATEWAY_RETRY_MAX,
};

/// The longest `Retry-After` the gateway waits for before trying the same
/// deployment again; a longer one ends the request with the upstream's 429.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(10);

/// The candidates of `list` (the deployments a request names, in order,
/// through `route` if any) that a caller's own key (`byok_api_key`) may be
/// sent to: those of the provider of the model it was given with. That
/// provider is the first model's (the named `model`, else the first of
/// `models: [...]`), or a route's targets' one provider: a key is a
/// credential for one provider, so a route whose targets are on several is
/// a 400 rather than a guess; its fallbacks elsewhere are skipped.
pub fn byok_candidates<'a>(
    providers: &Providers,
    route: Option<&Route>,
    list: Vec<(&'a Provider, &'a Model)>,
) -> Result<Vec<(&'a Provider, &'a Model)>, ApiError> {
    let provider = match route {
        Some(r) => {
            let mut ids: Vec<&str> = Vec::new();
            for t in &r.targets {
                let id = providers.deployment(t.deployment).0.id.as_str();
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
            if ids.len() > 1 {
                return Err(ApiError::BadRequest(format!(
                    "byok_api_key: your key goes only to the provider of the model it is given with, \
                     and route {} is served by several providers ({}); name one of its models \
                     (provider/model) instead",
                    r.name,
                    ids.join(", ")
                )));
            }
            ids.first().map(|id| id.to_string())
        }
        None => list.first().map(|(p, _)| p.id.clone()),
    };
    // Never empty: the first model, or a route's targets, are on it.
    Ok(list
        .into_iter()
        .filter(|(p, _)| Some(&p.id) == provider.as_ref())
        .collect())
}

/// One deployment a request may be served by.
pub struct Candidate {
    pub provider: Provider,
    pub model: Model,
    /// `provider/model`: the label of metrics and cool-downs.
    pub name: String,
    pub key: ProviderKey,
    /// The upstream body for this deployment (its own model id).
    pub body: Map<String, Value>,
    pub bound: Option<Bound>,
    /// The upstream path of the operation (relative to the provider's
    /// `base_url`, query included: a native adapter's, `Adapter::native`).
    pub path: String,
    /// Headers of the caller's passed on (a door's own, such as
    /// `anthropic-beta`, to a provider of the door's API).
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// The body is the caller's, in the provider's own API: its answer
    /// goes back as the provider sent it.
    pub own: bool,
}

/// A request's candidates, in order, and the route it came through.
pub struct Plan {
    pub route: Option<String>,
    pub candidates: Vec<Candidate>,
}

/// Routing's state: cool-downs and latencies of the deployments.
pub struct Routing {
    pub settings: Settings,
    cooldown: cooldown::Cooldown,
    latency: strategy::Latency,
}

impl Routing {
    pub fn new(settings: Settings, cluster: Option<gateway_adapters::cluster::Cluster>) -> Routing {
        Routing {
            cooldown: cooldown::Cooldown::new(&settings, cluster),
            latency: strategy::Latency::default(),
            settings,
        }
    }

    /// A route's deployments for one request: targets in the strategy's
    /// order, then the fallbacks.
    pub fn order(&self, providers: &Providers, route: &Route) -> Vec<crate::providers::Deployment> {
        let mut out = strategy::order(providers, route, &self.latency);
        out.extend(route.fallbacks.iter().copied());
        out
    }

    /// Tries `plan`'s candidates (see the module's docs) with `attempt`,
    /// which sends the call and reads the answer up to its first byte.
    /// The attempt's value, the deployment that answered and the attempts
    /// made. Each attempt is a child span of `trace` ([`gateway_base::traces`]).
    pub async fn run<T, F, Fut>(
        &self,
        upstream: &Upstream,
        plan: Plan,
        deadline: Instant,
        trace: &Span,
        mut attempt: F,
    ) -> Result<(T, Candidate, u32), ApiError>
    where
        F: FnMut(Call) -> Fut,
        Fut: Future<Output = Result<T, Failed>>,
    {
        let Plan { candidates, .. } = plan;
        if candidates.is_empty() {
            return Err(ApiError::Unavailable(
                "no deployment of this model can be called".into(),
            ));
        }
        let mut tries = Tries::default();
        while let Some((idx, admit)) = self.pick(&candidates, &mut tries).await {
            if !self.wait_to_retry(&tries, idx, deadline).await {
                break;
            }
            let c = &candidates[idx];
            tries.attempts += 1;
            let span = trace.attempt(tries.attempts, &c.name, &c.provider.kind, &c.model.id);
            let started = Instant::now();
            match attempt(call_of(upstream, c)).await {
                Ok(v) => {
                    trace.served(span, &c.name, &c.provider.kind);
                    gateway_base::telemetry::route_attempt(&c.name, "ok");
                    self.latency.observe(&c.name, started.elapsed());
                    self.cooldown.success(&c.name, admit).await;
                    let c = candidates.into_iter().nth(idx).expect("a candidate");
                    return Ok((v, c, tries.attempts));
                }
                Err(f) => {
                    if !self.note_failure(trace, span, c, idx, &mut tries, f).await {
                        break;
                    }
                }
            }
        }
        Err(all_failed(trace, tries.failures))
    }

    /// The next candidate to try and whether its cool-down admits it: every
    /// candidate once, in order (skipping those cooling down: the last is
    /// tried anyway when all were); then the last again while retries
    /// remain and the last failure may be cured. `None`: no more tries.
    async fn pick(
        &self,
        candidates: &[Candidate],
        tries: &mut Tries,
    ) -> Option<(usize, cooldown::Admit)> {
        let n = candidates.len();
        while tries.next < n {
            let idx = tries.next;
            tries.next += 1;
            let admit = self.cooldown.admit(&candidates[idx].name).await;
            if admit == cooldown::Admit::No && !(tries.next == n && tries.attempts == 0) {
                gateway_base::telemetry::route_skipped(&candidates[idx].name);
                continue;
            }
            return Some((idx, admit));
        }
        let again = tries.attempts < 1 + self.settings.retry_max
            && tries.failures.last().is_some_and(|a| a.failed.retryable());
        again.then_some((n - 1, cooldown::Admit::Yes))
    }

    /// Before trying the deployment that just failed again, waits its
    /// `Retry-After` or a back-off; `false` when that wait is too long
    /// ([`RETRY_AFTER_CAP`]) or would pass the deadline. Another deployment
    /// is tried at once.
    async fn wait_to_retry(&self, tries: &Tries, idx: usize, deadline: Instant) -> bool {
        let Some(prev) = tries.failures.last().filter(|prev| prev.idx == idx) else {
            return true;
        };
        let wait = match prev.failed.retry_after {
            Some(ra) if ra > RETRY_AFTER_CAP => return false,
            Some(ra) => ra,
            None => self.backoff(tries.attempts),
        };
        if Instant::now() + wait >= deadline {
            return false;
        }
        tokio::time::sleep(wait).await;
        true
    }

    /// Records a failed attempt on its span, in the metrics and in `tries`;
    /// a failure another attempt may cure also counts towards the
    /// deployment's cool-down. `false`: no other attempt may cure it.
    async fn note_failure(
        &self,
        trace: &Span,
        span: Attempt,
        c: &Candidate,
        idx: usize,
        tries: &mut Tries,
        f: Failed,
    ) -> bool {
        let kind = f.kind.as_str();
        trace.failed(span, kind, f.status(), &f.for_trace());
        gateway_base::telemetry::route_attempt(&c.name, kind);
        let retryable = f.retryable();
        tries.failures.push(Attempted {
            idx,
            attempt: tries.attempts,
            deployment: c.name.clone(),
            failed: f,
        });
        if !retryable {
            return false;
        }
        tracing::info!(deployment = %c.name, kind, attempt = tries.attempts, "model call failed; trying the next candidate");
        if self.cooldown.failure(&c.name).await {
            gateway_base::telemetry::cooldown(&c.name);
            tracing::warn!(deployment = %c.name, "deployment cooling down");
        }
        true
    }

    /// Full jitter: uniform in `[0, base·2^(attempts-1))`.
    fn backoff(&self, attempts: u32) -> Duration {
        let ceiling = self
            .settings
            .retry_base
            .saturating_mul(1u32 << attempts.saturating_sub(1).min(16));
        ceiling.mul_f64(rand::random::<f64>())
    }
}

/// The upstream call of one attempt on candidate `c`.
fn call_of(upstream: &Upstream, c: &Candidate) -> Call {
    let mut call = upstream.llm_call_as(
        Method::Post,
        &c.provider.base_url,
        &c.path,
        &c.key,
        c.provider.adapter.key_form(),
    );
    for (name, value) in &c.headers {
        call = call.with_header(name.clone(), value.clone());
    }
    call.json(&c.body)
}

/// Where a request's tries stand.
#[derive(Default)]
struct Tries {
    /// The next candidate of the first pass.
    next: usize,
    /// Attempts made so far.
    attempts: u32,
    /// Every failed attempt, in order: logged and traced when none served.
    failures: Vec<Attempted>,
}

/// One failed attempt of a request: which candidate, its number, and what
/// failed.
struct Attempted {
    idx: usize,
    attempt: u32,
    deployment: String,
    failed: Failed,
}

/// No attempt served: every attempt's failure is logged (one line) and put
/// on the request's span; the caller gets the last one's error, as the
/// route's format says it.
fn all_failed(trace: &Span, mut failures: Vec<Attempted>) -> ApiError {
    let Some(last) = failures.pop() else {
        return ApiError::Unavailable("every deployment of this model is cooling down".into());
    };
    let all = || failures.iter().chain(std::iter::once(&last));
    let each = |show: fn(&Failed) -> String| -> Vec<String> {
        all()
            .map(|a| format!("#{} {}: {}", a.attempt, a.deployment, show(&a.failed)))
            .collect()
    };
    let logged = each(|f| f.to_string());
    tracing::warn!(attempts = %logged.join("; "), "model call failed on every attempt");
    trace.attempt_errors(each(Failed::for_trace));
    last.failed.error
}
