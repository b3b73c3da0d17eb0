//! The request pipeline every generated handler calls.
//!
//! Phases, in order (pingora style: each documented, the last always runs):
//!
//! 1. **authenticate** — bearer API key ([`crate::auth`]); `none` and
//!    `signature` rows skip it (the webhook verifies its own signature).
//! 2. **gate** — business-plan rows answer 503 while the gate is closed.
//! 3. **rate-limit** — per user and capability ([`crate::ratelimit`]): 429
//!    with `Retry-After`, before any upstream call.
//! 4. **configured** — voice rows need `PROVIDER_API_KEY` (else 503).
//! 5. **validate** — the row's query rules here; body rules in the mode, as
//!    the body is read. Then **tenant isolation** ([`crate::owners`]): owned
//!    parameters must name the caller's resources (else 404, no upstream call).
//! 6. **forward** — the row's mode ([`crate::forward`], [`crate::synthesis`]).
//! 7. **record** — on success, the audit record, the usage record (what the
//!    mode metered, or quantity 0) and the mode's own records are committed
//!    by group commit *before* the answer is sent; a failed request writes
//!    nothing and is charged nothing.
//! 8. **answer** — the mode's response, or the error in the row's wire format,
//!    with an `X-Request-Id` header either way.

use std::time::Instant;

use http::HeaderValue;
use rand::RngCore;

use crate::errors::ApiError;
use crate::router::{Request, Response};
use crate::spec::{Area, Auth, EndpointSpec, Gate, Mode, PathParams};
use rust_decimal::Decimal;

use crate::store::{AuditRecord, Record, UsageRecord, User};
use crate::{forward, jobs, owners, synthesis, uploads, validate, webhook, Gateway};

/// `res_` + 24 hex characters: the id of every request (spec §2's `request_id`).
pub fn new_request_id() -> String {
    let mut b = [0u8; 12];
    rand::thread_rng().fill_bytes(&mut b);
    format!("res_{}", hex::encode(b))
}

/// The billed quantity of a request, decided by its mode.
#[derive(Debug, Clone)]
pub struct Metered {
    /// Price-key product (`tts`, `watermark_apply`, ...).
    pub product: String,
    /// Billing unit (`audio_seconds`, ...).
    pub unit: &'static str,
    pub quantity: rust_decimal::Decimal,
    /// At most one charge per key (a job, a voice's first build).
    pub once_key: Option<String>,
    /// Whose credit is charged, when not the caller (inbound webhooks).
    pub user_id: Option<i64>,
    /// The route the charge belongs to, when not this one (a job's submit route).
    pub route_id: Option<&'static str>,
    pub capability: Option<&'static str>,
}

/// What a request carries through the phases.
pub struct Ctx {
    pub spec: &'static EndpointSpec,
    pub gw: Gateway,
    pub request_id: String,
    /// The authenticated caller (`None` on unauthenticated rows).
    pub user: Option<User>,
    pub started: Instant,
    /// Decoded query parameters, in order.
    pub query: Vec<(String, String)>,
    /// What this request bills (set by the mode through [`Ctx::meter`]);
    /// `None` writes a usage record with quantity 0.
    pub metered: Option<(Metered, crate::billing::Charge)>,
}

impl Ctx {
    /// The caller's id (authenticated rows).
    pub fn user_id(&self) -> Option<i64> {
        self.user.as_ref().map(|u| u.id)
    }

    /// Records what this request bills and returns its charge (for answers
    /// that show it, like synthesis's `billing`).
    pub fn meter(&mut self, m: Metered) -> crate::billing::Charge {
        let charge = self
            .gw
            .config
            .prices
            .charge(&format!("{}.{}", m.product, m.unit), m.quantity);
        self.metered = Some((m, charge.clone()));
        charge
    }

    /// The price-key product of this row: its job kind, else its capability.
    pub fn product(&self) -> &'static str {
        self.spec.job.unwrap_or(self.spec.capability)
    }
}

/// What a mode hands back: the answer, the upstream status it saw, any
/// records that must be committed with the audit record, and work to start
/// once they are committed.
pub struct Outcome {
    pub response: Response,
    pub upstream_status: Option<u16>,
    pub records: Vec<Record>,
    pub deferred: Vec<Deferred>,
}

/// Work started in the background after a request's records are committed.
#[derive(Debug, Clone)]
pub enum Deferred {
    /// Deliver a finished job's record to the caller's `callback_uri`.
    Callback {
        kind: String,
        job_id: String,
        user_id: i64,
        uri: String,
        body: serde_json::Value,
    },
}

impl Outcome {
    pub fn new(response: Response, upstream_status: Option<u16>) -> Outcome {
        Outcome {
            response,
            upstream_status,
            records: Vec::new(),
            deferred: Vec::new(),
        }
    }
}

/// Entry point of every generated handler.
pub async fn handle(
    spec: &'static EndpointSpec,
    gw: Gateway,
    req: Request,
    params: PathParams,
) -> Response {
    let request_id = new_request_id();
    let path = req.uri().path().to_owned();
    let query = validate::parse_query(req.uri().query());
    let mut ctx = Ctx {
        spec,
        gw,
        request_id,
        user: None,
        started: Instant::now(),
        query,
        metered: None,
    };
    let mut response = match run(&mut ctx, &path, req, params).await {
        Ok(r) => r,
        Err(e) => {
            match &e {
                ApiError::Internal(m) => {
                    tracing::error!(route = spec.id, request_id = %ctx.request_id, error = %m, "request failed")
                }
                other => {
                    tracing::debug!(route = spec.id, request_id = %ctx.request_id, error = %other, "request refused")
                }
            }
            e.into_response(spec.errors, &ctx.request_id)
        }
    };
    if let Ok(v) = HeaderValue::from_str(&ctx.request_id) {
        response.headers_mut().insert("x-request-id", v);
    }
    response
}

async fn run(
    ctx: &mut Ctx,
    path: &str,
    req: Request,
    params: PathParams,
) -> Result<Response, ApiError> {
    let spec = ctx.spec;
    // 1. authenticate
    match spec.auth {
        Auth::Bearer | Auth::Admin => {
            let user = ctx.gw.auth.authenticate(req.headers()).await?;
            if spec.auth == Auth::Admin && !user.is_admin {
                return Err(ApiError::Forbidden(
                    "Insufficient privileges. Admin access required.".into(),
                ));
            }
            ctx.user = Some(user);
        }
        Auth::None | Auth::Signature => {}
    }
    // 2. gate
    if let Some(gate) = spec.gate {
        match gate {
            Gate::BusinessPlan if !ctx.gw.config.business_plan_active => {
                return Err(ApiError::Unavailable(
                    "this capability needs the provider's business plan, which is not active (PROVIDER_BUSINESS_PLAN_ACTIVE=false)".into(),
                ));
            }
            Gate::BusinessPlan => {}
        }
    }
    // 3. rate-limit
    if let Some(user) = &ctx.user {
        ctx.gw.limiter.enforce(user.id, spec.capability)?;
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
    owners::check(ctx, &params).await?;
    // 6. forward
    let outcome = forward_by_mode(ctx, req, &params)
        .await
        .map_err(|e| owners::upstream_not_found(ctx, &params, e))?;
    // 7. record
    let status = outcome.response.status();
    if status.is_success() {
        let mut records = Vec::with_capacity(1 + outcome.records.len());
        records.push(Record::Audit(AuditRecord {
            request_id: ctx.request_id.clone(),
            user_id: ctx.user.as_ref().map(|u| u.id),
            route_id: spec.id.to_owned(),
            method: spec.method.as_str().to_owned(),
            path: path.to_owned(),
            status: status.as_u16(),
            upstream_status: outcome.upstream_status,
            latency_ms: ctx.started.elapsed().as_millis() as u64,
            created_at: crate::store::now_rfc3339(),
        }));
        records.push(Record::Usage(usage_record(ctx)));
        records.extend(outcome.records);
        ctx.gw
            .store
            .commit(records)
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        for d in outcome.deferred {
            match d {
                Deferred::Callback {
                    kind,
                    job_id,
                    user_id,
                    uri,
                    body,
                } => {
                    tokio::spawn(crate::callbacks::deliver(
                        ctx.gw.clone(),
                        kind,
                        job_id,
                        user_id,
                        uri,
                        body,
                    ));
                }
            }
        }
    }
    // 8. answer
    Ok(outcome.response)
}

/// Phase 6: the row's mode.
async fn forward_by_mode(
    ctx: &mut Ctx,
    req: Request,
    params: &PathParams,
) -> Result<Outcome, ApiError> {
    let spec = ctx.spec;
    Ok(match spec.mode {
        Mode::Proxy => forward::proxy(ctx, req, params).await?,
        Mode::JobList => jobs::list(ctx).await?,
        Mode::Fields => forward::fields(ctx, req, params).await?,
        Mode::JobSubmit => jobs::submit(ctx, req, params).await?,
        Mode::JobGet => jobs::get(ctx, req, params).await?,
        Mode::Synthesize => synthesis::synthesize(ctx, req, params).await?,
        Mode::Upload => uploads::upload(ctx, req).await?,
        Mode::Webhook => webhook::receive(ctx, req).await?,
        Mode::Chat
        | Mode::Completion
        | Mode::StopStream
        | Mode::Embedding
        | Mode::Image
        | Mode::VideoSubmit
        | Mode::VideoGet
        | Mode::VideoList
        | Mode::VideoCancel
        | Mode::Speech
        | Mode::Transcription
        | Mode::Catalogue
        | Mode::CatalogueTrending
        | Mode::CatalogueModel => {
            return Err(ApiError::NotImplemented(format!(
                "{} ({}) is not implemented yet in this gateway",
                spec.path,
                spec.mode.as_str()
            )))
        }
    })
}

/// The usage record of a successful request: what the mode metered, or
/// quantity 0 of the row's unit.
fn usage_record(ctx: &mut Ctx) -> UsageRecord {
    let spec = ctx.spec;
    let (m, charge) = match ctx.metered.take() {
        Some(mc) => mc,
        None => {
            let m = Metered {
                product: ctx.product().to_owned(),
                unit: spec.billing.as_str(),
                quantity: Decimal::ZERO,
                once_key: None,
                user_id: None,
                route_id: None,
                capability: None,
            };
            let charge = ctx
                .gw
                .config
                .prices
                .charge(&format!("{}.{}", m.product, m.unit), Decimal::ZERO);
            (m, charge)
        }
    };
    UsageRecord {
        request_id: ctx.request_id.clone(),
        user_id: m.user_id.or(ctx.user_id()),
        route_id: m.route_id.unwrap_or(spec.id).to_owned(),
        capability: m.capability.unwrap_or(spec.capability).to_owned(),
        product: m.product,
        unit: m.unit.to_owned(),
        quantity: m.quantity,
        unit_price: charge.unit_price,
        markup_pct: ctx.gw.config.prices.markup_pct,
        charged: charge.charged,
        once_key: m.once_key,
        created_at: crate::store::now_rfc3339(),
    }
}
