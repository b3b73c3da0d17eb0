//! Phases 2 to 4 of a model call: each candidate's upstream body and its
//! bound, the response cache's lookup, and the hold of the dearest
//! candidate's cost.

use serde_json::{Map, Value};

use super::operation::Operation;
use super::resolve::{self, hold_for, operation_name};
use crate::ctx::Caller;
use crate::money::{self, Settle};
use gateway_base::errors::ApiError;
use gateway_models::bounds::Bound;
use gateway_models::cache::{Ask, Begun, Entry, Key, Lookup, Miss};
use gateway_models::providers::{Model, Native, Op, Provider, Route};
use gateway_models::routing::{Candidate, Plan};
use rust_decimal::Decimal;

/// A model request ready to send: its candidate deployments (with our
/// key or the caller's BYOK key; one unless a route or `models: [...]`
/// named several), what settles it (with what the request can make the
/// provider do, [`gateway_models::bounds`]) and the response cache's part in it.
pub(super) struct Prepared {
    pub plan: Plan,
    pub settle: Settle,
    pub cache: Miss,
}

/// A model request answered from the response cache: the entry, and what
/// settles it (priced by the model's `cache_hit_price_pct`, held by
/// [`Hit::settle`]; the bound is never held).
pub(super) struct Hit {
    pub entry: Entry,
    pub settle: Settle,
}

impl Hit {
    /// The entry and the hit's records: usage and token detail ended
    /// `cache_hit`. The hit's charge is held first, as any model request's
    /// bound is, and the hold ends with the records: a balance (or a key's
    /// budget) that does not cover the hit answers 402, so a hit never
    /// overdraws a balance and never overshoots a budget.
    pub async fn settle(
        self,
        c: &Caller<'_>,
    ) -> Result<(Entry, Vec<gateway_store::Record>), ApiError> {
        let pct = self.settle.model.cache_hit_price_pct;
        let byok = self.settle.byok;
        let e = self.entry;
        let records = self
            .settle
            .token_records(e.tokens(), e.counted, "cache_hit");
        let mut records = gateway_models::cache::hit_records(records, pct);
        let charge = gateway_models::cost::Cost::of(&records).map_or(Decimal::ZERO, |c| c.charged);
        if charge > Decimal::ZERO {
            if let Some(hold) = money::reserve(c, charge, byok).await? {
                records.push(hold.into_release());
            }
        }
        Ok((e, records))
    }
}

/// One candidate deployment: its `provider/model` name, its bound, its
/// provider's own call, and whether that call is the caller's body in the
/// provider's own API ([`super::operation::Own`]).
pub(crate) struct Built<'a> {
    pub name: String,
    pub p: &'a Provider,
    pub m: &'a Model,
    pub bound: Bound,
    pub native: Native,
    pub own: bool,
}

/// Phases 1 to 4 of `op` for `body` ([`resolve::resolve`] first): each
/// candidate's upstream body of the operation (`additional_params` merged
/// in, never over a field the gateway prices: 400; in the provider's
/// shape, [`gateway_models::providers::Adapter::native`]) and its bound
/// ([`Operation::bound`]); the response cache's lookup when `cache` says
/// so (each candidate under its own `provider/model`, or all under the
/// route's name, with the OpenAI-shaped body; `Err(hit)`: answered from
/// the entry of a deployment that could have served it, at that
/// deployment's prices, held by [`Hit::settle`], not the bound); then the
/// key (the caller's `byok_api_key` for this call only, else the
/// provider's) and the hold of the most expensive candidate's cost
/// (nothing with BYOK: 402 when it does not fit).
pub(super) async fn prepare<O: Operation>(
    c: &Caller<'_>,
    op: &O,
    body: Map<String, Value>,
    cache: Option<(&Ask, bool)>,
) -> Result<Result<Prepared, Hit>, ApiError> {
    let r = resolve::resolve(c, &body, op.model_type(), op.op())?;
    let route = r.route;
    let byok = r.byok.as_deref();
    let (mut lookup, mut miss, route_key) =
        open_cache(c, cache, route, r.list[0].1, &body, op.op(), byok);
    // 2. bound
    let mut candidates = Vec::with_capacity(r.list.len());
    let mut max_cost = Decimal::ZERO;
    let last = r.list.len() - 1;
    let mut body = Some(body);
    for (i, (p, m)) in r.list.iter().enumerate() {
        let b = if i == last {
            body.take().unwrap_or_default()
        } else {
            body.clone().unwrap_or_default()
        };
        // The caller's own API when the provider speaks it, else OpenAI's.
        let own = op.own().filter(|o| o.spoken_by(p));
        let b = match own {
            Some(_) => b,
            None => op.translate(b)?,
        };
        let request = gateway_models::providers::openai::request(op.op(), &m.id, b);
        let name = format!("{}/{}", p.id, m.id);
        if let Some(l) = &mut lookup {
            let key = match &route_key {
                Some(k) => k.clone(),
                None => l.key(&name, &request),
            };
            l.source(name.clone(), key);
        }
        // The provider's own call (a native adapter's path and body).
        let native = match own {
            Some(o) => Native {
                path: p.adapter.own_path(&m.id, &o.method),
                body: p.adapter.own_body(op.own_body(request, p, &m.id)),
            },
            None => p.adapter.native(op.op(), m, request)?,
        };
        let shape = own.map_or(p.adapter.shape(), |o| o.shape);
        let bound = op.bound(m, &native.body, shape)?;
        max_cost = max_cost.max(bound_cost(c, p, m, &bound)?);
        candidates.push(Built {
            name,
            p,
            m,
            bound,
            native,
            own: own.is_some(),
        });
    }
    // 3. cache lookup
    if let Some(l) = lookup {
        match l.begin().await {
            Begun::Hit(entry) => return hit(c, entry, &candidates, byok, route).map(Err),
            Begun::Go(m) => miss = m,
        }
    }
    // 4. limits, then hold
    let (p0, m0) = r.list[0];
    let bounds = candidates.iter().map(|b| &b.bound);
    let admission = super::limits::admit(c, route, (p0, m0), bounds).await?;
    let allowed_as = route.map(|r| r.name.as_str());
    let (mut settle, key) = hold_for(c, p0, m0, allowed_as, byok, max_cost).await?;
    settle.admission = Some(admission);
    let headers = op.own().map(|o| o.headers.as_slice()).unwrap_or_default();
    let plan = plan(route, candidates, &settle, key, headers);
    Ok(Ok(Prepared {
        plan,
        settle,
        cache: miss,
    }))
}

/// What holding `bound` on `m` of `p` costs the caller `c` (a batch's
/// line: at the model's batch price).
fn bound_cost(c: &Caller<'_>, p: &Provider, m: &Model, bound: &Bound) -> Result<Decimal, ApiError> {
    match c.line {
        Some(_) => money::bound_cost(p, &m.at_batch_price(), bound),
        None => money::bound_cost(p, m, bound),
    }
}

/// A hit of `entry`, served by the candidate it names (through `route`,
/// if any): settled at that deployment's prices.
fn hit(
    c: &Caller<'_>,
    entry: Entry,
    candidates: &[Built<'_>],
    byok: Option<&str>,
    route: Option<&Route>,
) -> Result<Hit, ApiError> {
    let served = entry.served.as_deref();
    let b = candidates
        .iter()
        .find(|b| Some(b.name.as_str()) == served)
        .ok_or_else(|| ApiError::bug("a cache hit served by no candidate"))?;
    let mut settle = Settle::new(c, b.p, b.m, byok.is_some(), None);
    settle.served.route = route.map(|r| r.name.clone());
    Ok(Hit { entry, settle })
}

/// The routing loop's plan: each candidate with the key it is called
/// with (the caller's for all of them with BYOK, else its provider's; a
/// route's deployment without its key is skipped).
pub(crate) fn plan(
    route: Option<&Route>,
    candidates: Vec<Built<'_>>,
    settle: &Settle,
    key: gateway_adapters::upstream::llm::ProviderKey,
    headers: &[(http::HeaderName, http::HeaderValue)],
) -> Plan {
    let mut plan = Plan {
        route: route.map(|r| r.name.clone()),
        candidates: Vec::with_capacity(candidates.len()),
    };
    for (i, b) in candidates.into_iter().enumerate() {
        let p = b.p;
        let key = match (i, settle.byok) {
            // The caller's key: every candidate left is of its provider.
            (0, _) | (_, true) => key.clone(),
            _ => match &p.key {
                Some(k) => k.clone(),
                None => {
                    let _ = gateway_models::providers::config_missing(p);
                    continue;
                }
            },
        };
        plan.candidates.push(Candidate {
            name: b.name,
            provider: p.clone(),
            model: b.m.clone(),
            key,
            body: b.native.body,
            bound: Some(b.bound),
            path: b.native.path,
            headers: if b.own { headers.to_vec() } else { Vec::new() },
            own: b.own,
        });
    }
    plan
}

/// The response cache's part in a model request of `op`, as `cache` (the
/// request's headers, streamed or not) and the route's or first model's
/// `cache_ttl_secs` ask: the lookup to add the candidates to and, for a
/// route, the one key its answers are stored under (the route's name);
/// else the miss to answer with.
fn open_cache(
    c: &Caller<'_>,
    cache: Option<(&Ask, bool)>,
    route: Option<&Route>,
    first: &Model,
    body: &Map<String, Value>,
    op: Op,
    byok: Option<&str>,
) -> (Option<Lookup>, Miss, Option<Key>) {
    let Some((ask, stream)) = cache else {
        return (None, Miss::default(), None);
    };
    let r = gateway_models::cache::Request {
        op: operation_name(op),
        model_ttl: route.map_or(first.cache_ttl_secs, |r| r.cache_ttl_secs),
        body,
        user: c.user_id(),
        key: c.user.and_then(|u| u.key_id),
        byok,
        stream,
    };
    match c.gw.response_cache.lookup(ask, &r) {
        Ok(l) => {
            let route_key = route.map(|r| {
                let keyed = gateway_models::providers::openai::request(op, &r.name, body.clone());
                l.key(&r.name, &keyed)
            });
            (Some(l), Miss::default(), route_key)
        }
        Err(miss) => (None, miss, None),
    }
}
