//! Phases 2, 3 and 5 of a model call: each candidate's upstream body and
//! its bound, the response cache's lookup, and the attempt through the
//! routing loop.

use serde_json::{Map, Value};

use super::resolve::{allowed, deployments, hold_for, operation_name};
use crate::credits::{self, Settle};
use crate::ctx::Ctx;
use gateway_adapters::upstream::Call;
use gateway_base::errors::ApiError;
use gateway_models::bounds::{Bound, Shape};
use gateway_models::providers::{Model, ModelType, Op, Provider, Route};
use gateway_models::routing::{Candidate, Plan};

/// A model request ready to send: its candidate deployments (with our
/// key or the caller's BYOK key; one unless a route or `models: [...]`
/// named several), what settles it (with what the request can make the
/// provider do, [`gateway_models::bounds`]) and the response cache's part in it.
/// [`Prepared::run`] sends it.
pub(crate) struct Prepared {
    pub plan: Plan,
    pub settle: Settle,
    pub cache: gateway_models::cache::Miss,
}

impl Prepared {
    /// Sends the request through [`gateway_models::routing`]'s loop: `attempt`
    /// sends one deployment's call and reads up to the answer's first byte
    /// (what may be retried elsewhere). The settle is the serving
    /// deployment's.
    pub async fn run<T, F, Fut>(self, ctx: &Ctx, attempt: F) -> Result<(T, Settle), ApiError>
    where
        F: FnMut(Call) -> Fut,
        Fut: std::future::Future<Output = Result<T, gateway_adapters::upstream::Failed>>,
    {
        let deadline = ctx.started + ctx.gw.config.upstream_timeout;
        let gw = &ctx.gw;
        let Prepared {
            plan, mut settle, ..
        } = self;
        let route = plan.route.clone();
        let (v, served, attempts) = gw
            .routing
            .run(&gw.upstream, plan, deadline, &ctx.trace, attempt)
            .await?;
        settle.provider = served.provider;
        settle.model = served.model;
        settle.bound = served.bound;
        settle.served = credits::Served { attempts, route };
        Ok((v, settle))
    }

    /// [`Prepared::run`] of a JSON answer (`what` names it in errors),
    /// read whole inside the attempt: nothing has gone to the caller yet,
    /// so an answer broken off after its headers is retried elsewhere like
    /// a connect error. The upstream's status and the answer; the span's
    /// serving attempt learns the status.
    pub async fn send(self, ctx: &Ctx, what: &str) -> Result<((u16, Value), Settle), ApiError> {
        let (answer, settle) = self.run(ctx, |call| read_json(call, what)).await?;
        ctx.trace.upstream_status(answer.0);
        Ok((answer, settle))
    }
}

/// One attempt of a JSON answer: sent, then read whole; a read that broke
/// off (the connection, the deadline) is retryable.
async fn read_json(
    call: Call,
    what: &str,
) -> Result<(u16, Value), gateway_adapters::upstream::Failed> {
    let answer = call.try_send().await?;
    let status = answer.status();
    match answer.json(what).await {
        Ok(v) => Ok((status, v)),
        Err(e @ ApiError::Network(_)) => {
            let kind = gateway_adapters::upstream::FailureKind::BodyBroken;
            gateway_base::telemetry::upstream_error(kind.as_str());
            Err(gateway_adapters::upstream::Failed::new(kind, e))
        }
        Err(e) => Err(gateway_adapters::upstream::Failed::new(
            gateway_adapters::upstream::FailureKind::InvalidAnswer(status),
            e,
        )),
    }
}

/// A model request answered from the response cache: the entry, and what
/// settles it (priced by the model's `cache_hit_price_pct`, held by
/// [`Hit::settle`]; the bound is never held).
pub(crate) struct Hit {
    pub entry: gateway_models::cache::Entry,
    pub settle: Settle,
}

impl Hit {
    /// A hit of `entry`, served by model `m` of provider `p` (through
    /// `route`, if any): settled at that deployment's prices.
    fn new(
        ctx: &Ctx,
        entry: gateway_models::cache::Entry,
        p: &Provider,
        m: &Model,
        byok: bool,
        route: Option<&Route>,
    ) -> Hit {
        let mut settle = Settle::new(ctx, p, m, byok, None);
        settle.served.route = route.map(|r| r.name.clone());
        Hit { entry, settle }
    }

    /// The entry and the hit's records: usage and token detail ended
    /// `cache_hit`. The hit's charge is held first, as any model request's
    /// bound is, and the hold ends with the records: a balance (or a key's
    /// budget) that does not cover the hit answers 402, so a hit never
    /// overdraws a balance and never overshoots a budget.
    pub async fn settle(
        self,
        ctx: &Ctx,
    ) -> Result<(gateway_models::cache::Entry, Vec<gateway_store::Record>), ApiError> {
        let pct = self.settle.model.cache_hit_price_pct;
        let byok = self.settle.byok;
        let e = self.entry;
        let records = self
            .settle
            .token_records(e.tokens(), e.counted, "cache_hit");
        let mut records = gateway_models::cache::hit_records(records, pct);
        let charge = gateway_models::cost::Cost::of(&records)
            .map_or(rust_decimal::Decimal::ZERO, |c| c.charged);
        if charge > rust_decimal::Decimal::ZERO {
            if let Some(hold) = credits::reserve(ctx, charge, byok).await? {
                records.push(hold.into_release());
            }
        }
        Ok((e, records))
    }
}

/// [`prepare_cached`] without the cache (images).
pub(crate) async fn prepare_model_call(
    ctx: &Ctx,
    body: Map<String, Value>,
    want: ModelType,
    op: Op,
    bound: impl Fn(&Model, &Map<String, Value>, Shape) -> Result<Bound, ApiError>,
) -> Result<Prepared, ApiError> {
    match prepare_cached(ctx, body, want, op, None, bound).await? {
        Ok(p) => Ok(p),
        Err(_) => Err(ApiError::bug("a cache hit without a cache")),
    }
}

/// The response cache's part in a model request of `op`, as `cache` (the
/// request's headers, streamed or not) and the route's or first model's
/// `cache_ttl_secs` ask: the lookup to add the candidates to and, for a
/// route, the one key its answers are stored under (the route's name);
/// else the miss to answer with.
fn open_cache(
    ctx: &Ctx,
    cache: Option<(&gateway_models::cache::Ask, bool)>,
    route: Option<&Route>,
    first: &Model,
    body: &Map<String, Value>,
    op: Op,
    byok: Option<&str>,
) -> (
    Option<gateway_models::cache::Lookup>,
    gateway_models::cache::Miss,
    Option<gateway_models::cache::Key>,
) {
    let Some((ask, stream)) = cache else {
        return (None, gateway_models::cache::Miss::default(), None);
    };
    let r = gateway_models::cache::Request {
        op: operation_name(op),
        model_ttl: route.map_or(first.cache_ttl_secs, |r| r.cache_ttl_secs),
        body,
        user: ctx.user_id(),
        key: ctx.user.as_ref().and_then(|u| u.key_id),
        byok,
        stream,
    };
    match ctx.gw.response_cache.lookup(ask, &r) {
        Ok(l) => {
            let route_key = route.map(|r| {
                let keyed = gateway_models::providers::openai::request(op, &r.name, body.clone());
                l.key(&r.name, &keyed)
            });
            (Some(l), gateway_models::cache::Miss::default(), route_key)
        }
        Err(miss) => (None, miss, None),
    }
}

/// Resolves the body's `model` (of type `want`; a route or `models: [...]`
/// give several candidates; with the caller's `byok_api_key`, only those
/// of the provider it was given with, [`gateway_models::routing::byok_candidates`]),
/// checks the API key's model list (403), builds each candidate's upstream
/// body of `op` (`additional_params` merged in, never over a field the
/// gateway prices: 400; in the provider's shape,
/// [`gateway_models::providers::Adapter::native`]), computes its bound from that
/// body (`bound`; 400 naming a field that would raise the work past it),
/// looks the request up in the response cache when `cache` says so (each
/// candidate under its own `provider/model`, or all under the route's
/// name, with the OpenAI-shaped body; `Err(hit)`: answered from the entry
/// of a deployment that could have served it, at that deployment's
/// prices, held by [`Hit::settle`], not the bound), chooses the key (the
/// caller's `byok_api_key` for this call only, else the provider's) and
/// holds the most expensive candidate's cost (nothing with BYOK: 402 when
/// it does not fit).
pub(crate) async fn prepare_cached(
    ctx: &Ctx,
    body: Map<String, Value>,
    want: ModelType,
    op: Op,
    cache: Option<(&gateway_models::cache::Ask, bool)>,
    bound: impl Fn(&Model, &Map<String, Value>, Shape) -> Result<Bound, ApiError>,
) -> Result<Result<Prepared, Hit>, ApiError> {
    gateway_models::bounds::check_additional_params(&body)?;
    let (route, list) = deployments(ctx, &body, want)?;
    if ctx.trace.is_on() {
        ctx.trace.model(
            operation_name(op),
            body.get("model").and_then(Value::as_str),
            route.map(|r| r.name.as_str()),
        );
    }
    let byok = body
        .get("byok_api_key")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned);
    let list = match byok {
        Some(_) => gateway_models::routing::byok_candidates(&ctx.gw.providers, route, list)?,
        None => list,
    };
    // The API key's model list: the route's name, or every model the
    // request may go to.
    for (p, m) in &list {
        allowed(ctx, p, m, route.map(|r| r.name.as_str()))?;
    }
    let (mut lookup, mut miss, route_key) =
        open_cache(ctx, cache, route, list[0].1, &body, op, byok.as_deref());
    let mut candidates = Vec::with_capacity(list.len());
    let mut max_cost = rust_decimal::Decimal::ZERO;
    let last = list.len() - 1;
    let mut body = Some(body);
    for (i, (p, m)) in list.iter().enumerate() {
        let b = if i == last {
            body.take().unwrap_or_default()
        } else {
            body.clone().unwrap_or_default()
        };
        let request = gateway_models::providers::openai::request(op, &m.id, b);
        let name = format!("{}/{}", p.id, m.id);
        if let Some(l) = &mut lookup {
            let key = match &route_key {
                Some(k) => k.clone(),
                None => l.key(&name, &request),
            };
            l.source(name.clone(), key);
        }
        // The provider's own call (a native adapter's path and body).
        let native = p.adapter.native(op, m, request)?;
        let bound = bound(m, &native.body, p.adapter.shape())?;
        max_cost = max_cost.max(credits::bound_cost(p, m, &bound)?);
        candidates.push((name, *p, *m, bound, native));
    }
    if let Some(l) = lookup {
        match l.begin().await {
            gateway_models::cache::Begun::Hit(entry) => {
                let served = entry.served.as_deref();
                let (_, p, m, ..) = candidates
                    .iter()
                    .find(|c| Some(c.0.as_str()) == served)
                    .ok_or_else(|| ApiError::bug("a cache hit served by no candidate"))?;
                return Ok(Err(Hit::new(ctx, entry, p, m, byok.is_some(), route)));
            }
            gateway_models::cache::Begun::Go(m) => miss = m,
        }
    }
    let (p0, m0) = list[0];
    let allowed_as = route.map(|r| r.name.as_str());
    let (settle, key) = hold_for(ctx, p0, m0, allowed_as, byok.as_deref(), max_cost).await?;
    let mut plan = Plan {
        route: route.map(|r| r.name.clone()),
        candidates: Vec::with_capacity(candidates.len()),
    };
    for (i, (name, p, m, bound, native)) in candidates.into_iter().enumerate() {
        let key = match (i, settle.byok) {
            // The caller's key: every candidate left is of its provider.
            (0, _) | (_, true) => key.clone(),
            _ => match &p.key {
                Some(k) => k.clone(),
                // A route's deployment without its key is skipped.
                None => {
                    let _ = gateway_models::providers::config_missing(p);
                    continue;
                }
            },
        };
        plan.candidates.push(Candidate {
            name,
            provider: p.clone(),
            model: m.clone(),
            key,
            body: native.body,
            bound: Some(bound),
            path: native.path,
        });
    }
    Ok(Ok(Prepared {
        plan,
        settle,
        cache: miss,
    }))
}
