//! The request pipeline every generated handler calls.
//!
//! Phases, in order (pingora style: each documented, the last always runs):
//!
//! 1. **authenticate** — API key or access token, admin key on admin rows
//!    ([`gateway_adapters::auth`], one call); `none` and `signature` rows skip it (the
//!    webhook verifies its own signature).
//! 2. **gate** — business-plan rows answer 503 while the gate is closed.
//! 3. **rate-limit** — per user and capability ([`gateway_adapters::ratelimit`]): 429
//!    with `Retry-After`, before any upstream call. A body whose declared
//!    length is over the row's limit is refused (413) just before, so it
//!    does not count against the limit.
//! 4. **configured** — voice rows need `PROVIDER_API_KEY` (else 503).
//! 5. **validate** — the row's query rules here; body rules in the mode, as
//!    the body is read. Then **tenant isolation** ([`crate::owners`]): owned
//!    parameters must name the caller's resources (else 404, no upstream call);
//!    a row's `from_parent` variables are filled from the addressed
//!    resource's recorded parent. A billed voice row's request made with a
//!    key that has a budget holds its charge against it, or is refused
//!    when that does not fit (402, [`crate::budgets`]; a measured row's
//!    mode holds, once it read what bounds it).
//! 6. **forward** — the row's mode ([`crate::modes`]).
//! 7. **record** — on success, the audit record, the usage record (what the
//!    mode metered, or quantity 0) and the mode's own records are committed
//!    by group commit *before* the answer is sent (a stream's without the
//!    flush to disk: its settlement at its end flushes both); a failed request writes
//!    nothing and is charged nothing. Side effects that must follow the
//!    commit happen here, after it: the owner cache learns created and
//!    deleted resources, deferred work (job callbacks) starts.
//! 8. **answer** — the mode's response, or the error in the row's wire format,
//!    with an `X-Request-Id` header either way; a billed row's answer whose
//!    usage record was committed here says its charge in `X-Gateway-Cost`
//!    ([`gateway_models::cost`]).

use std::time::Instant;

use http::HeaderValue;
use rust_decimal::Decimal;
use tracing::Instrument;

use crate::ctx::{charge_of, new_request_id, Ctx, Metered};
use crate::money::{self, Bill};
use crate::services::Gateway;
use crate::{modes, owners};
use gateway_base::body::{Request, Response};
use gateway_base::errors::ApiError;
use gateway_base::spec::{Area, EndpointSpec, Gate, PathParams};
use gateway_base::{telemetry, validate};
use gateway_store::{AuditRecord, Record};

/// Entry point of every generated handler.
pub async fn handle(
    spec: &'static EndpointSpec,
    gw: Gateway,
    req: Request,
    params: PathParams,
) -> Response {
    let request_id = new_request_id();
    // Every line logged while serving the request carries its id and route
    // (the JSON log format prints the current span's fields on each line).
    let span = tracing::info_span!("request", request_id = %request_id, route = spec.id);
    let path = req.uri().path().to_owned();
    let query = validate::parse_query(req.uri().query());
    let trace = match &gw.traces {
        Some(t) => t.request(
            spec.method.as_str(),
            spec.path,
            spec.id,
            &request_id,
            req.headers(),
        ),
        None => gateway_base::traces::Span::default(),
    };
    let mut ctx = Ctx {
        spec,
        catalogue: gw.catalogue(),
        gw,
        request_id,
        user: None,
        started: Instant::now(),
        query,
        metered: None,
        trace,
        line: None,
    };
    let result = run(&mut ctx, &path, req, params)
        .instrument(span.clone())
        .await;
    let _entered = span.enter();
    let mut response = match result {
        Ok(r) => r,
        Err(e) => {
            match &e {
                ApiError::Internal(m) => {
                    tracing::error!(route = spec.id, request_id = %ctx.request_id, error = %m, "request failed")
                }
                ApiError::DatabaseUnavailable(m) => {
                    tracing::warn!(route = spec.id, request_id = %ctx.request_id, error = %m, "database unavailable")
                }
                ApiError::StorageUnavailable(m) => {
                    tracing::warn!(route = spec.id, request_id = %ctx.request_id, error = %m, "object store unavailable")
                }
                other => {
                    tracing::debug!(route = spec.id, request_id = %ctx.request_id, error = %other, "request refused")
                }
            }
            e.in_mode(spec.mode)
                .into_response(spec.errors, &ctx.request_id)
        }
    };
    if let Ok(v) = HeaderValue::from_str(&ctx.request_id) {
        // Anthropic's clients read the id from `request-id` (an SDK's
        // `_request_id`, its errors' `request_id`).
        if spec.errors == gateway_base::spec::ErrorFormat::Anthropic {
            response.headers_mut().insert("request-id", v.clone());
        }
        response.headers_mut().insert("x-request-id", v);
    }
    response
        .extensions_mut()
        .insert(gateway_base::access::Served {
            route: spec.id,
            user_id: ctx.user_id(),
        });
    telemetry::request(spec.id, response.status().as_u16(), ctx.started.elapsed());
    // A stream's span was handed to its relay, which ends it.
    ctx.trace.end(response.status().as_u16());
    response
}

async fn run(
    ctx: &mut Ctx,
    path: &str,
    req: Request,
    params: PathParams,
) -> Result<Response, ApiError> {
    // 1–5: authenticate, gate, rate-limit, configured, validate.
    let (params, hold) = admit(ctx, &req, params).await?;
    // 6. forward
    let mut outcome = modes::run(ctx, req, &params)
        .await
        .map_err(|e| owners::upstream_not_found(ctx.spec, &params, e))?;
    if let Some(h) = hold {
        // Ends with the usage record; dropped (released) on any other end.
        outcome.records.push(h.into_release());
    }
    // 7. record
    if outcome.response.status().is_success() {
        commit_phase(ctx, path, &mut outcome).await?;
    }
    // 8. answer
    Ok(outcome.response)
}

/// A batch's line to run as a request of its own ([`run_line`]).
pub(crate) struct Line {
    pub batch_id: String,
    /// Its number in the batch's input file (from 1).
    pub line: i64,
    /// Its request body (JSON).
    pub body: bytes::Bytes,
    /// The rate-limit capability its lines count against (the batch
    /// creation row's).
    pub capability: &'static str,
}

/// How a line's request ended.
pub(crate) enum LineRun {
    /// Answered 2xx: its result committed with its usage and debit.
    Done,
    /// Answered with an error, nothing charged: the request that ran it,
    /// its status and body (in `spec`'s error format), for the line's
    /// result; `no_credit` when the balance or the key's budget could not
    /// hold it (402).
    Failed {
        request_id: String,
        status: u16,
        body: String,
        no_credit: bool,
    },
    /// Over its rate limit: to be tried again after this many seconds.
    Wait(u64),
}

/// Runs a batch's line as `user`'s request of `spec` (a model row): the
/// rate limit of the batch's capability, the row's mode on the line's body
/// (priced at the batch price, charged once under the line's once-key:
/// [`Ctx::line`]), then phase 7, whose commit holds the line's result
/// beside its usage and debit. The pipeline's phases 1 to 5 are the
/// batch's: its caller was authenticated, and its lines validated, when
/// it was made.
pub(crate) async fn run_line(
    gw: Gateway,
    spec: &'static EndpointSpec,
    user: gateway_store::User,
    line: Line,
) -> LineRun {
    if let Err(ApiError::RateLimited { retry_after, .. }) =
        gw.limiter.enforce(user.id, line.capability).await
    {
        return LineRun::Wait(retry_after.max(1));
    }
    let request_id = new_request_id();
    let span = tracing::info_span!("request", request_id = %request_id, route = spec.id, batch = %line.batch_id);
    let mut ctx = Ctx {
        spec,
        catalogue: gw.catalogue(),
        gw,
        request_id,
        user: Some(user),
        started: Instant::now(),
        query: Vec::new(),
        metered: None,
        trace: Default::default(),
        line: Some(format!("{}#{}", line.batch_id, line.line)),
    };
    let ran = run_line_mode(&mut ctx, &line).instrument(span).await;
    let (status, body) = match ran {
        Ok(()) => return LineRun::Done,
        Err(Ok(response)) => {
            let status = response.status().as_u16();
            (status, gateway_base::body::collect_text(response).await)
        }
        Err(Err(e)) => {
            let response = e
                .in_mode(spec.mode)
                .into_response(spec.errors, &ctx.request_id);
            let status = response.status().as_u16();
            (status, gateway_base::body::collect_text(response).await)
        }
    };
    LineRun::Failed {
        request_id: ctx.request_id,
        no_credit: status == 402,
        status,
        body,
    }
}

/// The line's mode and record phase; `Err(Ok(answer))`: a non-2xx answer.
async fn run_line_mode(ctx: &mut Ctx, line: &Line) -> Result<(), Result<Response, ApiError>> {
    let spec = ctx.spec;
    let mut req = http::Request::new(gateway_base::body::ReqBody::whole(line.body.clone()));
    *req.method_mut() = http::Method::POST;
    req.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let mut outcome = modes::run(ctx, req, &PathParams::default())
        .await
        .map_err(Err)?;
    if !outcome.response.status().is_success() {
        return Err(Ok(outcome.response));
    }
    let status = outcome.response.status().as_u16();
    let body = std::mem::replace(outcome.response.body_mut(), gateway_base::body::empty());
    let text = gateway_base::body::collect_text(http::Response::new(body)).await;
    outcome
        .records
        .push(Record::BatchLine(gateway_store::LineEnd {
            batch_id: line.batch_id.clone(),
            line: line.line,
            state: "done",
            request_id: Some(ctx.request_id.clone()),
            status_code: Some(status),
            result: text,
        }));
    commit_phase(ctx, spec.path, &mut outcome)
        .await
        .map_err(Err)?;
    Ok(())
}

/// Phase 7 of a successful outcome: its audit record (of `path`), its
/// usage record when the pipeline settles it, and the mode's records, in
/// one commit ([`record`]); then its deferred work.
async fn commit_phase(
    ctx: &mut Ctx,
    path: &str,
    outcome: &mut crate::ctx::Outcome,
) -> Result<(), ApiError> {
    let spec = ctx.spec;
    let user = ctx.user.as_ref();
    let audit = AuditRecord {
        request_id: ctx.request_id.clone(),
        user_id: user.map(|u| u.id),
        route_id: spec.id.to_owned(),
        method: spec.method.as_str().to_owned(),
        path: path.to_owned(),
        status: outcome.response.status().as_u16(),
        upstream_status: outcome.upstream_status,
        latency_ms: ctx.started.elapsed().as_millis() as u64,
        created_at: gateway_store::now_rfc3339(),
    };
    let usage = match outcome.settlement.by_pipeline() {
        true => usage_records(&ctx.gw, spec, user, &ctx.request_id, ctx.metered.take()),
        false => Vec::new(),
    };
    record(&ctx.gw, spec, &ctx.trace, audit, usage, outcome).await?;
    for d in std::mem::take(&mut outcome.deferred) {
        d.start(ctx.gw.clone());
    }
    Ok(())
}

/// Phases 1 to 5, up to the row's mode: the caller authenticated, the
/// gate, the rate limit, the row configured, the query and the tenant
/// checked; the parameters with their parents filled in, and a billed
/// voice row's budget hold.
async fn admit(
    ctx: &mut Ctx,
    req: &Request,
    params: PathParams,
) -> Result<(PathParams, Option<crate::money::Hold>), ApiError> {
    let spec = ctx.spec;
    // 1. authenticate
    ctx.user = ctx.gw.auth.authenticate(req.headers(), spec.auth).await?;
    if ctx.user.is_some() {
        // The connection is no longer anonymous: at the connection cap it
        // is not closed for a slow body (`watchdog`).
        req.body().authenticated();
    }
    // 2. gate
    if spec.gate == Some(Gate::BusinessPlan) && !ctx.gw.config.business_plan_active {
        return Err(ApiError::Unavailable(
            "this capability needs the provider's business plan, which is not active (PROVIDER_BUSINESS_PLAN_ACTIVE=false)".into(),
        ));
    }
    // 3. rate-limit (a body declared over the row's limit is refused first:
    //    it does not count)
    modes::refuse_declared_over(spec.mode, &ctx.gw, req)?;
    let user = ctx.user.as_ref().map(|u| u.id);
    if let Some(user) = user {
        ctx.gw
            .limiter
            .enforce(user, spec.capability)
            .await
            .inspect_err(|_| telemetry::rate_limited(spec.capability))?;
    }
    // 4. configured
    if spec.area == Area::Voice && spec.upstream.is_some() && !ctx.gw.upstream.configured() {
        return Err(ApiError::Unavailable(
            "upstream integration not configured".into(),
        ));
    }
    // 5. validate (query; bodies are validated by the mode as they are read),
    //    then tenant isolation: owned parameters must be the caller's.
    validate::query(spec.query, &ctx.query)?;
    let asked = owners::Asked {
        gw: &ctx.gw,
        spec,
        user,
        query: &ctx.query,
    };
    owners::check(asked, &params).await?;
    let mut params = params;
    owners::fill_parents(&ctx.gw, spec, &mut params).await?;
    // A billed voice row's key budget (model rows hold in their modes).
    let hold = voice_budget(ctx).await?;
    Ok((params, hold))
}

/// A billed voice row's request made with a key that has a budget: a
/// per-request or first-build row holds one unit's charge, its most
/// (`money::hold_voice`, atomic with the budget's check); a measured row
/// holds in its mode, once it read what bounds it: synthesis its text
/// (`modes::synthesis`), a job's submit its input, measured when it is the
/// caller's own upload, else its kind's ceiling (`modes::jobs`,
/// `job_bound`), kept by the job until it ends.
async fn voice_budget(ctx: &Ctx) -> Result<Option<crate::money::Hold>, ApiError> {
    use gateway_base::spec::{Billing, Metering};
    let spec = ctx.spec;
    if spec.area != Area::Voice || spec.billing == Billing::Free {
        return Ok(None);
    }
    match spec.metering {
        Metering::PerRequest | Metering::FirstBuild => {
            crate::money::hold_voice(&ctx.caller(), async {
                Ok(ctx.row_charge(Decimal::ONE).charged)
            })
            .await
        }
        Metering::None | Metering::Measured => Ok(None),
    }
}

/// Phase 7: commits the audit record, the usage record `usage` (when the
/// outcome's [`Settlement`](crate::ctx::Settlement) is the pipeline's) and
/// the mode's records in one group commit, then updates the owner cache
/// from what was committed (and tells the other instances, with Redis).
async fn record(
    gw: &Gateway,
    spec: &EndpointSpec,
    trace: &gateway_base::traces::Span,
    audit: AuditRecord,
    usage: Vec<Record>,
    outcome: &mut crate::ctx::Outcome,
) -> Result<(), ApiError> {
    let mode_records = std::mem::take(&mut outcome.records);
    let mut records = Vec::with_capacity(2 + mode_records.len());
    records.push(Record::Audit(audit));
    records.extend(usage);
    let cost = gateway_models::cost::Cost::of(&records)
        .or_else(|| gateway_models::cost::Cost::of(&mode_records));
    debug_assert!(
        outcome.settlement != crate::ctx::Settlement::ByModeRecords
            || mode_records.iter().any(|r| matches!(r, Record::Usage(_))),
        "a request settled by its mode's records brings its usage record"
    );
    let cache_changes: Vec<_> = mode_records
        .iter()
        .filter_map(owners::cache_change)
        .collect();
    records.extend(mode_records);
    let stored = stored_objects(&records);
    let committed = if outcome.settlement.flush_record_phase() {
        gw.store.commit(records).await
    } else {
        gw.store.commit_unflushed(records).await
    };
    if let Err(e) = committed {
        if e.failure != gateway_store::Failure::InDoubt {
            forget_stored(gw, stored);
        }
        return Err(ApiError::internal("committing the request's records", e));
    }
    gw.owners_changed(cache_changes).await;
    if let Some(c) = &cost {
        trace.cost(|| c.text());
    }
    if let Some(c) = cost.filter(|_| spec.billing != gateway_base::spec::Billing::Free) {
        if let Ok(v) = HeaderValue::from_str(&c.text()) {
            outcome
                .response
                .headers_mut()
                .insert(gateway_models::cost::HEADER, v);
        }
    }
    Ok(())
}

/// The keys of the objects a request stored whole under their own key
/// (its asset records that are not packed).
fn stored_objects(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Asset(a) if a.pack.is_none() => Some(a.object_key.clone()),
            _ => None,
        })
        .collect()
}

/// Deletes the objects of a request whose records were not committed
/// (the database was down): no asset record names them, so nothing else
/// would (retention sweeps by asset record); see [`crate::generated::forget`].
/// A packed object needs nothing: its segment is collected once no live
/// asset points into it.
fn forget_stored(gw: &Gateway, keys: Vec<String>) {
    for key in keys {
        crate::generated::forget(gw, key);
    }
}

/// The usage record of a successful request (`user`'s, as `request_id`):
/// what the mode metered, or quantity 0 of the row's unit, settled through
/// the money door.
fn usage_records(
    gw: &Gateway,
    spec: &'static EndpointSpec,
    user: Option<&gateway_store::User>,
    request_id: &str,
    metered: Option<(Metered, gateway_base::billing::Charge)>,
) -> Vec<Record> {
    let (m, charge) = match metered {
        Some(mc) => mc,
        None => {
            let m = Metered {
                product: gw.table.product_of(spec).to_owned(),
                unit: spec.billing.as_str(),
                quantity: Decimal::ZERO,
                once_key: None,
                user_id: None,
                route_id: None,
                capability: None,
                key_id: None,
            };
            let charge = charge_of(gw, &m);
            (m, charge)
        }
    };
    // The caller's own charge counts against its key's budget (a job's
    // charge, naming its user, against the key it was submitted with).
    let caller = user.map(|u| u.id);
    let own = m.user_id.is_none();
    let payer_is_caller = m.user_id.or(caller) == caller;
    let key_id = if own {
        user.and_then(|u| u.budget_key)
    } else {
        m.key_id
    };
    let api_key_id = user.filter(|_| payer_is_caller).and_then(|u| u.key_id);
    money::settle(Bill::Metered {
        metered: m,
        charge,
        request_id: request_id.to_owned(),
        markup_pct: gw.config.prices.markup_pct,
        user_id: caller,
        route_id: spec.id,
        capability: spec.capability,
        key_id,
        api_key_id,
    })
}
