//! The modes: how a row's request is forwarded upstream and answered.
//!
//! Each row names a `mode`; [`run`] dispatches to its function. One file per
//! mode family:
//!
//! * [`proxy`] — `proxy` and `fields`: pass-through, answers streamed back;
//!   per-request and first-build metering; ownership records of creates and
//!   deletes.
//! * [`lists`] — `proxy` on a collection of an owned resource: the caller's
//!   own items, paginated by the gateway.
//! * [`search`] — `owned_search`: a search answered with the caller's own
//!   resources only.
//! * [`synthesis`] — `synthesize`: the spec §2 synthesis answer, stored audio.
//! * [`jobs`] — `job_submit`, `job_get`, `job_list`.
//! * [`uploads`] — `upload`: multipart streamed into the object store.
//! * [`media_files`] — `media_upload`, `media_get`, `media_list`,
//!   `media_delete`: the caller's image and audio files (`/media`).
//! * [`webhook`] — `webhook`: the provider's signed notifications.
//! * [`account`] — `register`, `login`, `token_refresh`, `logout`,
//!   `confirm_email`, `reset_password`, `me`, `oauth_authorize`,
//!   `oauth_callback` (sign-in with OpenID Connect, through [`gateway_adapters::oidc`]).
//! * [`keys`] — `key_list`, `key_create`, `key_revoke`, `key_update`.
//! * [`admin`] — `admin_users`, `admin_disable`, `admin_enable`,
//!   `admin_delete`, `admin_credits`.
//! * [`history`] — `generation`, `usage_totals`, `credit_balance`,
//!   `credit_ledger`: the caller's (or, on admin rows, a user's) history.
//! * [`chat`] — `chat`, `completion`, `stop_stream`: model calls with
//!   credits held and settled, streams relayed and stoppable; its
//!   [`chat::messages`] — `messages`, `count_tokens`: Anthropic's Messages
//!   API through the same chat path.
//! * [`catalogue`] — `catalogue`, `catalogue_model`, `catalogue_trending`.
//! * [`embeddings`] — `embedding`: the spec's or OpenAI's shape.
//! * [`images`] — `image`: generated images copied into the object store.
//! * [`speech`] — `speech`: text to speech, the audio stored, billed in
//!   seconds.
//! * [`transcription`] — `transcription`: speech to text (and translation
//!   to English), the upload spooled to disk, probed and streamed upstream,
//!   billed in seconds.
//! * [`payments`] — `stripe_checkout`, `stripe_webhook`,
//!   `stripe_purchases`: buying credits through Stripe Checkout.
//! * [`videos`] — `video_submit`, `video_get`, `video_list`,
//!   `video_cancel`: caller-owned video jobs (observation shared with the
//!   follower in [`crate::videos`]).
//!
//! What every mode shares lives here ([`read_body`], [`call`]); what
//! several modes share lives in [`common`] (the user's JSON, the multipart
//! opener, query numbers, the charged amount), the one file a mode may
//! import beside this one; the rest is in modules of its own at the crate
//! root ([`crate::ctx`], [`crate::shape`], [`gateway_adapters::upstream`],
//! [`crate::progress`], [`crate::owners`], [`gateway_base::media`]). A mode never
//! imports a sibling mode.

pub mod account;
pub mod admin;
pub mod catalogue;
pub mod chat;
pub mod common;
pub mod embeddings;
pub mod history;
pub mod images;
pub mod jobs;
pub mod keys;
pub mod lists;
pub mod media_files;
pub mod payments;
pub mod proxy;
pub mod search;
pub mod speech;
pub mod synthesis;
pub mod transcription;
pub mod uploads;
pub mod videos;
pub mod webhook;

use serde_json::{Map, Value};

use crate::credits::{self, Settle};
use crate::ctx::{Ctx, Outcome};
use crate::{owners, shape};
use gateway_adapters::upstream::llm::ProviderKey;
use gateway_adapters::upstream::Call;
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::{Method, Mode, PathParams};
use gateway_base::validate;
use gateway_models::bounds::{Bound, Shape};
use gateway_models::providers::{Model, ModelType, Op, Provider, Route};
use gateway_models::routing::{Candidate, Plan};

/// Phase 6 of the pipeline: the row's mode.
pub async fn run(ctx: &mut Ctx, req: Request, params: &PathParams) -> Result<Outcome, ApiError> {
    let spec = ctx.spec;
    match spec.mode {
        Mode::Proxy if owners::lists(spec) => lists::list(ctx, params).await,
        Mode::Proxy => proxy::proxy(ctx, req, params).await,
        Mode::Fields => proxy::fields(ctx, req, params).await,
        Mode::OwnedSearch => search::search(ctx, req, params).await,
        Mode::JobSubmit => jobs::submit(ctx, req, params).await,
        Mode::JobGet => jobs::get(ctx, req, params).await,
        Mode::JobList => jobs::list(ctx).await,
        Mode::Synthesize => synthesis::synthesize(ctx, req, params).await,
        Mode::Upload => uploads::upload(ctx, req).await,
        Mode::Webhook => webhook::receive(ctx, req).await,
        Mode::Register => account::register(ctx, req).await,
        Mode::Login => account::login(ctx, req).await,
        Mode::TokenRefresh => account::refresh(ctx, req).await,
        Mode::Logout => account::logout(ctx, req).await,
        Mode::ConfirmEmail => account::confirm(ctx, req).await,
        Mode::ResetPassword => account::reset_password(ctx, req).await,
        Mode::Me => account::me(ctx).await,
        Mode::OauthAuthorize => account::oauth_authorize(ctx, req, params).await,
        Mode::OauthCallback => account::oauth_callback(ctx, req, params).await,
        Mode::KeyList => keys::list(ctx).await,
        Mode::KeyCreate => keys::create(ctx, req).await,
        Mode::KeyRevoke => keys::revoke(ctx, params).await,
        Mode::KeyUpdate => keys::update(ctx, req, params).await,
        Mode::AdminUsers => admin::users(ctx).await,
        Mode::AdminDisable => admin::set_disabled(ctx, params, true).await,
        Mode::AdminEnable => admin::set_disabled(ctx, params, false).await,
        Mode::AdminDelete => admin::delete(ctx, params).await,
        Mode::AdminCredits => admin::credits(ctx, req, params).await,
        Mode::Generation => history::generation(ctx, params).await,
        Mode::UsageTotals => history::usage(ctx, params).await,
        Mode::CreditBalance => history::credits(ctx, params).await,
        Mode::CreditLedger => history::ledger(ctx, params).await,
        Mode::Chat => chat::complete(ctx, req, true).await,
        Mode::Completion => chat::complete(ctx, req, false).await,
        Mode::StopStream => chat::stop(ctx, params).await,
        Mode::Messages => chat::messages::messages(ctx, req).await,
        Mode::CountTokens => chat::messages::count_tokens(ctx, req).await,
        Mode::Catalogue => catalogue::list(ctx).await,
        Mode::CatalogueModel => catalogue::model(ctx, params).await,
        Mode::CatalogueTrending => catalogue::trending(ctx).await,
        Mode::Embedding => embeddings::embed(ctx, req).await,
        Mode::Image => images::generate(ctx, req).await,
        Mode::Speech => speech::speak(ctx, req).await,
        Mode::Transcription => transcription::transcribe(ctx, req).await,
        Mode::VideoSubmit => videos::submit(ctx, req).await,
        Mode::VideoGet => videos::get(ctx, params).await,
        Mode::VideoList => videos::list(ctx).await,
        Mode::VideoCancel => videos::cancel(ctx, params).await,
        Mode::StripeCheckout => payments::checkout(ctx, req).await,
        Mode::StripeWebhook => payments::webhook(ctx, req).await,
        Mode::StripePurchases => payments::purchases(ctx).await,
        Mode::MediaUpload => media_files::upload(ctx, req).await,
        Mode::MediaGet => media_files::get(ctx, params).await,
        Mode::MediaList => media_files::list(ctx).await,
        Mode::MediaDelete => media_files::delete(ctx, params).await,
    }
}

/// 413 when the body's declared length is over what the row's mode reads
/// (a multipart file's limit and its framing, a webhook's, or a JSON
/// body's): the pipeline asks before the rate limit, so a body refused for
/// its size does not count against it. Each mode still bounds what it
/// reads (a body without `Content-Length` is counted as it arrives).
pub fn refuse_declared_over(ctx: &Ctx, req: &Request) -> Result<(), ApiError> {
    let body = req.body();
    match ctx.spec.mode {
        Mode::Upload | Mode::Transcription | Mode::MediaUpload => {
            let max_file = ctx.gw.table.limit(ctx.spec.mode);
            shape::refuse_declared_over(body, max_file + common::MULTIPART_FRAMING)
                .map_err(|_| common::file_too_large(max_file))
        }
        Mode::Webhook => shape::refuse_declared_over(body, webhook::MAX_BODY as u64),
        Mode::StripeWebhook => shape::refuse_declared_over(body, payments::MAX_WEBHOOK_BODY as u64),
        _ => shape::refuse_declared_over(body, ctx.gw.config.max_json_bytes as u64),
    }
}

/// Whether the row's method carries a request body.
pub(crate) fn has_body(m: Method) -> bool {
    matches!(m, Method::Post | Method::Put | Method::Patch)
}

/// Reads and validates the JSON body of a row (empty for GET/DELETE):
/// field rules, then owned fields, then, on a row whose upstream fetches
/// `audio_url` itself (no `file_field`), that URL's policy
/// ([`crate::fetch::check_own`]: the caller's own object, or an http(s) URL
/// that reaches no private address). Every mode that takes a body reads it here.
pub(crate) async fn read_body(ctx: &Ctx, req: Request) -> Result<Map<String, Value>, ApiError> {
    if !has_body(ctx.spec.method) {
        return Ok(Map::new());
    }
    let obj = shape::read_json_object(req.into_body(), ctx.gw.config.max_json_bytes).await?;
    validate::body(ctx.spec.body, &obj)?;
    owners::check_body(ctx, &obj).await?;
    if ctx.spec.file_field.is_none() {
        if let Some(url) = obj.get("audio_url") {
            let url = url
                .as_str()
                .ok_or_else(|| ApiError::BadRequest("audio_url must be a string".into()))?;
            crate::fetch::check_own(&ctx.gw, ctx.user_id(), Some(url)).await?;
        }
    }
    Ok(obj)
}

/// The row's upstream call: path template filled from `params` (and the
/// query or `body` where the row says), query shaped, credential added.
/// Template variables taken from the body are removed from it.
pub(crate) fn call(
    ctx: &Ctx,
    params: &PathParams,
    body: Option<&mut Map<String, Value>>,
) -> Result<Call, ApiError> {
    let up = ctx.upstream()?;
    let mut query = ctx.query.clone();
    let path = shape::upstream_path(ctx.spec, up.path, params, &mut query, body)?;
    shape::shape_query(ctx.spec, &mut query);
    ctx.gw.upstream.call(up, &path, &query)
}

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

/// The deployments a body names, in the order to try them: its route's
/// (by the route's strategy, then its fallbacks), its `models: [...]`
/// (OpenRouter's field: each a model or a route's first target), or its
/// one `model`. The route's name, and the names to check against the API
/// key's model list (the caller's: a route's name, or each model).
fn deployments<'a>(
    ctx: &'a Ctx,
    body: &Map<String, Value>,
    want: ModelType,
) -> Result<(Option<&'a Route>, Vec<(&'a Provider, &'a Model)>), ApiError> {
    let providers = &ctx.gw.providers;
    let name = body.get("model").and_then(Value::as_str);
    if let Some(r) = name.and_then(|n| providers.route(n)) {
        if r.kind != want {
            return Err(ApiError::BadRequest(format!(
                "model {} is a route of {} models, not {}",
                r.name,
                r.kind.as_str(),
                want.as_str()
            )));
        }
        let order = ctx.gw.routing.order(providers, r);
        return Ok((
            Some(r),
            order.into_iter().map(|d| providers.deployment(d)).collect(),
        ));
    }
    let mut list = vec![providers.resolve(name, want)?];
    if let Some(models) = body.get("models") {
        let names = models
            .as_array()
            .filter(|a| a.len() <= MAX_MODELS && a.iter().all(Value::is_string))
            .ok_or_else(|| {
                ApiError::BadRequest(format!(
                    "models: must be a list of at most {MAX_MODELS} model names"
                ))
            })?;
        if name.is_none() {
            list.clear();
        }
        for n in names {
            let found = providers.resolve(n.as_str(), want)?;
            if !list
                .iter()
                .any(|(p, m)| p.id == found.0.id && m.id == found.1.id)
            {
                list.push(found);
            }
        }
        if list.is_empty() {
            list.push(providers.resolve(None, want)?);
        }
    }
    Ok((None, list))
}

/// The GenAI conventions' `gen_ai.operation.name` of an operation.
fn operation_name(op: Op) -> &'static str {
    match op {
        Op::Chat => "chat",
        Op::Completion => "text_completion",
        Op::Embedding => "embeddings",
        Op::Image => "image_generation",
        Op::Speech => "speech",
        Op::Transcription => "transcription",
        Op::Translation => "translation",
        Op::Video => "video_generation",
    }
}

/// Most models a request's `models: [...]` may name.
const MAX_MODELS: usize = 8;

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

/// Resolves the model `name` (of type `want`), checks the API key's model
/// allow-list, chooses the key (`byok`, the caller's own, for this call
/// only, else the provider's) and holds `max_cost` (nothing with BYOK; 402
/// when it does not fit). The settle (with the provider and the model) and
/// the key to call with.
pub(crate) async fn pick_model(
    ctx: &Ctx,
    name: Option<&str>,
    byok: Option<&str>,
    want: ModelType,
    max_cost: impl FnOnce(&Provider, &Model) -> Result<rust_decimal::Decimal, ApiError>,
) -> Result<(Settle, ProviderKey), ApiError> {
    let gw = ctx.gw.clone();
    let (p, m) = gw.providers.resolve(name, want)?;
    hold_for(ctx, p, m, None, byok, max_cost(p, m)?).await
}

/// The API key's model allow-list (403): the route's name the caller sent
/// (`route`), else the model `p/m` (or `p/*`).
fn allowed(ctx: &Ctx, p: &Provider, m: &Model, route: Option<&str>) -> Result<(), ApiError> {
    if let Some(allowed) = ctx.user.as_ref().and_then(|u| u.models.as_ref()) {
        let wildcard = format!("{}/*", p.id);
        let name = match route {
            Some(r) => r.to_owned(),
            None => format!("{}/{}", p.id, m.id),
        };
        if !allowed
            .iter()
            .any(|a| *a == name || (route.is_none() && *a == wildcard))
        {
            return Err(ApiError::Forbidden(format!(
                "this API key has no access to model {name}"
            )));
        }
    }
    Ok(())
}

/// For the resolved model `m` of provider `p` (named by the route
/// `route`, if any): checks the API key's model allow-list (403), chooses
/// the key (`byok`, else the provider's) and holds `max_cost` (nothing
/// with BYOK; 402 when it does not fit).
async fn hold_for(
    ctx: &Ctx,
    p: &Provider,
    m: &Model,
    route: Option<&str>,
    byok: Option<&str>,
    max_cost: rust_decimal::Decimal,
) -> Result<(Settle, ProviderKey), ApiError> {
    allowed(ctx, p, m, route)?;
    let byok = byok.map(str::trim).filter(|k| !k.is_empty());
    // A key no header can carry (control characters) is the caller's
    // mistake: 400, never a failed upstream call (found by schemathesis).
    if byok.is_some_and(|k| http::HeaderValue::from_str(k).is_err()) {
        return Err(ApiError::BadRequest(
            "byok_api_key: not a usable API key (it holds characters an HTTP header cannot carry)"
                .into(),
        ));
    }
    let byok = byok.map(ProviderKey::byok);
    let key = match &byok {
        Some(k) => k.clone(),
        None => p
            .key
            .clone()
            .ok_or_else(|| gateway_models::providers::config_missing(p))?,
    };
    let hold = credits::reserve(ctx, max_cost, byok.is_some()).await?;
    Ok((Settle::new(ctx, p, m, byok.is_some(), hold), key))
}
