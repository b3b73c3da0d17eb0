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
//! * [`webhook`] — `webhook`: the provider's signed notifications.
//! * [`account`] — `register`, `login`, `token_refresh`, `logout`,
//!   `confirm_email`, `reset_password`, `me`.
//! * [`keys`] — `key_list`, `key_create`, `key_revoke`.
//! * [`admin`] — `admin_users`, `admin_disable`, `admin_enable`,
//!   `admin_delete`, `admin_credits`, `admin_usage`.
//!
//! What every mode shares lives here ([`read_body`], [`call`]) or in a
//! module of its own at the crate root ([`crate::ctx`], [`crate::shape`],
//! [`crate::upstream`], [`crate::progress`], [`crate::owners`]); a mode never
//! imports a sibling mode.

pub mod account;
pub mod admin;
pub mod jobs;
pub mod keys;
pub mod lists;
pub mod proxy;
pub mod search;
pub mod synthesis;
pub mod uploads;
pub mod webhook;

use serde_json::{Map, Value};

use crate::ctx::{Ctx, Outcome};
use crate::errors::ApiError;
use crate::router::Request;
use crate::spec::{Method, Mode, PathParams};
use crate::upstream::Call;
use crate::{owners, shape, validate};

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
        Mode::KeyList => keys::list(ctx).await,
        Mode::KeyCreate => keys::create(ctx, req).await,
        Mode::KeyRevoke => keys::revoke(ctx, params).await,
        Mode::AdminUsers => admin::users(ctx).await,
        Mode::AdminDisable => admin::set_disabled(ctx, params, true).await,
        Mode::AdminEnable => admin::set_disabled(ctx, params, false).await,
        Mode::AdminDelete => admin::delete(ctx, params).await,
        Mode::AdminCredits => admin::credits(ctx, req, params).await,
        Mode::AdminUsage => admin::usage(ctx, params).await,
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
        | Mode::CatalogueModel => Err(ApiError::NotImplemented(format!(
            "{} ({}) is not implemented yet in this gateway",
            spec.path,
            spec.mode.as_str()
        ))),
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
