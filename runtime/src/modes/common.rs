//! What several modes share and no other part of the gateway needs: the
//! request's body read and validated ([`read_body`]), the row's upstream
//! call ([`call`]), the user's JSON, the answer carrying a secret
//! (no-store), the multipart opener and its errors, query numbers for
//! paging, a caller's stored file recorded and deleted (media, files), who
//! pays for a live session's turns ([`LivePayer`]: realtime, live
//! transcription). A mode may import this file (the one exception to "a mode never
//! imports a sibling"); it imports no mode, so that the dispatcher
//! (`modes/mod.rs`) stays the only file that names the modes.

use http::{header, HeaderValue, StatusCode};
use serde_json::{json, Map, Value};

use crate::ctx::{Ctx, Outcome};
use crate::{owners, shape};
use gateway_adapters::objects::ObjectError;
use gateway_adapters::upstream::Call;
use gateway_base::body::{self, Request};
use gateway_base::errors::ApiError;
use gateway_base::spec::{Method, PathParams};
use gateway_base::validate;
use gateway_store::{Accounts, AssetRecord, AssetRow, Assets, OutsideRecordPhase, Record, UserRow};

/// Whether the row's method carries a request body.
pub(crate) fn has_body(m: Method) -> bool {
    matches!(m, Method::Post | Method::Put | Method::Patch)
}

/// Reads and validates the JSON body of a row (empty for GET, and for a
/// DELETE whose row declares no body field):
/// field rules, then owned fields, then, on a row whose upstream fetches
/// `audio_url` itself (no `file_field`), that URL's policy
/// ([`crate::fetch::check_own`]: the caller's own object, or an http(s) URL
/// that reaches no private address). Every mode that takes a body reads it here.
pub(crate) async fn read_body(ctx: &Ctx, req: Request) -> Result<Map<String, Value>, ApiError> {
    if !has_body(ctx.spec.method) && ctx.spec.body.is_empty() {
        return Ok(Map::new());
    }
    let asked = asked(ctx);
    let obj = shape::read_json_object(req.into_body(), ctx.gw.config.max_json_bytes).await?;
    validate::body(ctx.spec.body, &obj)?;
    owners::check_body(asked, &obj).await?;
    if ctx.spec.file_field.is_none() {
        if let Some(url) = obj.get("audio_url") {
            let url = url
                .as_str()
                .ok_or_else(|| ApiError::BadRequest("audio_url must be a string".into()))?;
            crate::fetch::check_own(&ctx.gw, asked.user, Some(url)).await?;
        }
    }
    Ok(obj)
}

/// What the tenant checks read of the request ([`owners::Asked`]).
pub(crate) fn asked(ctx: &Ctx) -> owners::Asked<'_> {
    owners::Asked {
        gw: &ctx.gw,
        spec: ctx.spec,
        user: ctx.user.as_ref().map(|u| u.id),
        query: &ctx.query,
    }
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

/// A user as the account and admin routes answer it.
pub(crate) fn user_json(u: &UserRow) -> Value {
    json!({
        "id": u.id,
        "username": u.username,
        "email": u.email,
        "role": if u.is_admin { "admin" } else { "user" },
        "confirmed": u.confirmed,
        "disabled": u.disabled,
        "deleted": u.deleted_at.is_some(),
        "created_at": u.created_at,
    })
}

/// A JSON answer carrying a secret (an access or refresh token, an API
/// key): `Cache-Control: no-store` and `Pragma: no-cache` (RFC 6749 §5.1),
/// so that no cache on the way keeps it.
pub(crate) fn secret_answer(status: StatusCode, v: &Value) -> Outcome {
    let mut resp = body::json(status, v);
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    Outcome::new(resp, None)
}

/// 24 random hex characters: the id of an upload or a media file.
pub(crate) fn random_hex_id() -> String {
    use rand::RngCore;
    let mut b = [0u8; 12];
    rand::thread_rng().fill_bytes(&mut b);
    hex::encode(b)
}

/// 413 for a file over `max_file` bytes.
pub(crate) fn file_too_large(max_file: u64) -> ApiError {
    ApiError::PayloadTooLarge(format!("file is larger than {} MiB", max_file >> 20))
}

/// A streamed file's put that failed while `context`: 413 past `max_file`,
/// 408 for a body that arrived too slowly, 400 for one cut off, 503 when
/// the store cannot take it now (`generated::stored_failed`), else 500.
pub(crate) fn put_failed(e: ObjectError, max_file: u64, context: &str) -> ApiError {
    match e {
        ObjectError::TooLarge { .. } => file_too_large(max_file),
        ObjectError::Body(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            crate::shape::body_timed_out()
        }
        ObjectError::Body(e) => ApiError::BadRequest(format!("upload interrupted: {e}")),
        e => crate::generated::stored_failed(context.to_owned(), e),
    }
}

/// A multipart error: 413 past a size limit, else 400.
pub(crate) fn multipart_error(e: multer::Error, max_file: u64) -> ApiError {
    match e {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            file_too_large(max_file)
        }
        multer::Error::StreamReadFailed(e) if gateway_base::body::ReqBody::timed_out(&*e) => {
            crate::shape::body_timed_out()
        }
        other => ApiError::BadRequest(format!("malformed multipart body: {other}")),
    }
}

/// A multipart field's error as the I/O error of the stream a file is
/// stored from: kind `TimedOut` when the request body arrived too slowly
/// (so the store's `ObjectError::Body` still says so), else `Other`.
pub(crate) fn field_io_error(e: multer::Error) -> std::io::Error {
    let kind = match &e {
        multer::Error::StreamReadFailed(inner)
            if gateway_base::body::ReqBody::timed_out(&**inner) =>
        {
            std::io::ErrorKind::TimedOut
        }
        _ => std::io::ErrorKind::Other,
    };
    std::io::Error::new(kind, e)
}

/// Room above a multipart file's limit for the form's framing and text fields.
pub(crate) const MULTIPART_FRAMING: u64 = 1 << 20;

/// The request's `multipart/form-data` body as a stream of fields, with
/// `limits` per field and the whole stream bounded a little above
/// `max_file` (room for headers and text fields). A declared
/// `Content-Length` past that bound is 413 before anything is read.
pub(crate) fn open_multipart(
    req: Request,
    max_file: u64,
    limits: multer::SizeLimit,
) -> Result<multer::Multipart<'static>, ApiError> {
    let content_type = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let boundary = multer::parse_boundary(content_type).map_err(|_| {
        ApiError::BadRequest("request must be multipart/form-data with a boundary".into())
    })?;
    let max_stream = max_file + MULTIPART_FRAMING;
    crate::shape::refuse_declared_over(req.body(), max_stream)
        .map_err(|_| file_too_large(max_file))?;
    use http_body_util::BodyExt;
    Ok(multer::Multipart::with_constraints(
        req.into_body().into_data_stream(),
        boundary,
        multer::Constraints::new().size_limit(limits.whole_stream(max_stream)),
    ))
}

/// A whole number of the query (`page`, `limit`...), `default` when absent
/// or not a number.
pub(crate) fn query_u32(ctx: &Ctx, name: &str, default: u32) -> u32 {
    ctx.query
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.trim().parse::<u32>().ok())
        .unwrap_or(default)
}

/// The user addressed by the row's `{user_id}` (an admin row), which must
/// exist: else 404.
pub(crate) async fn addressed_user(ctx: &Ctx, params: &PathParams) -> Result<UserRow, ApiError> {
    let not_found = || ApiError::NotFound("no such user".into());
    let id: i64 = params
        .get("user_id")
        .and_then(|v| v.parse().ok())
        .ok_or_else(not_found)?;
    ctx.gw
        .store
        .blocking(move |s| s.user_row(id))
        .await?
        .ok_or_else(not_found)
}

/// The query parameter `name`, when present.
pub(crate) fn query_str<'a>(ctx: &'a Ctx, name: &str) -> Option<&'a str> {
    ctx.query
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The asset class of the Files API's files (`modes::files`), a batch's
/// input and results among them.
pub const FILE_CLASS: &str = "file";

/// Commits the asset record of a caller's file whose object is stored
/// (`/media`, `/files`) and reads it back.
pub(crate) async fn commit_owned_asset(
    ctx: &Ctx,
    record: AssetRecord,
) -> Result<AssetRow, ApiError> {
    let committed = ctx
        .gw
        .store
        .commit_outside_record_phase(
            OutsideRecordPhase::UploadedAsset,
            vec![Record::Asset(record)],
        )
        .await?;
    let id = committed
        .asset_ids
        .first()
        .copied()
        .ok_or_else(|| ApiError::bug("asset id missing"))?;
    ctx.gw
        .store
        .blocking(move |st| st.asset(id))
        .await?
        .ok_or_else(|| ApiError::bug("a file missing after its commit"))
}

/// Deletes a caller's file: its object at once (so that no URL answered
/// before serves it), then its record marked deleted; `false` when a
/// concurrent delete marked it first.
pub(crate) async fn delete_owned_asset(
    ctx: &Ctx,
    user: i64,
    class: &'static str,
    row: &AssetRow,
) -> Result<bool, ApiError> {
    if let Err(e) = ctx.gw.objects.delete(&row.object_key).await {
        return Err(crate::generated::stored_failed(
            format!("deleting a {class} object"),
            e,
        ));
    }
    let now = gateway_store::now_rfc3339();
    let id = row.id;
    Ok(ctx
        .gw
        .store
        .blocking(move |s| s.delete_owned_asset(user, class, id, &now))
        .await?)
}

/// Who pays for a live session's turns (a realtime response, a period of
/// live audio), and for what: each turn is a request of its own, under
/// the session's request id and its number (`res_….3`), held before it
/// starts and settled with an audit record of its own.
pub(crate) struct LivePayer {
    pub gw: crate::services::Gateway,
    pub user: gateway_store::User,
    pub route_id: &'static str,
    pub capability: &'static str,
    pub path: String,
    pub provider: gateway_models::providers::Provider,
    pub model: gateway_models::providers::Model,
    /// The session's request id (the upgrade's).
    pub session_id: String,
    /// The session's span (taken from the upgrade's request).
    pub trace: gateway_base::traces::Span,
    /// The catalogue the session started with (its prices to its end).
    pub catalogue: std::sync::Arc<gateway_models::providers::Providers>,
}

impl LivePayer {
    /// The session of `ctx`'s caller on `model` of its query (resolved as
    /// a model of type `want`, allowed to the key, its provider keyed).
    pub(crate) fn of(
        ctx: &mut Ctx,
        path: &str,
        want: gateway_models::providers::ModelType,
    ) -> Result<LivePayer, ApiError> {
        let user = ctx
            .user
            .clone()
            .ok_or_else(|| ApiError::bug("a live session without a user"))?;
        let name = query_str(ctx, "model").map(str::to_owned);
        let (p, m) = ctx.catalogue.resolve(name.as_deref(), want)?;
        crate::model_call::allowed(&ctx.caller(), p, m, None)?;
        p.key
            .as_ref()
            .ok_or_else(|| gateway_models::providers::config_missing(p))?;
        Ok(LivePayer {
            gw: ctx.gw.clone(),
            user,
            route_id: ctx.spec.id,
            capability: ctx.spec.capability,
            path: path.to_owned(),
            provider: p.clone(),
            model: m.clone(),
            session_id: ctx.request_id.clone(),
            trace: ctx.trace.take(),
            catalogue: ctx.catalogue.clone(),
        })
    }

    /// Opens the provider's socket at `path` (under its base URL) with the
    /// provider's key; messages at most `max_frame` bytes.
    pub(crate) async fn socket(
        &self,
        path: &str,
        max_frame: usize,
    ) -> Result<gateway_adapters::upstream::socket::UpSocket, ApiError> {
        let p = &self.provider;
        let key = p
            .key
            .as_ref()
            .ok_or_else(|| gateway_models::providers::config_missing(p))?;
        self.gw
            .upstream
            .socket(&p.base_url, path, key, p.adapter.key_form(), max_frame)
            .await
    }

    /// The request id of the session's turn `n`.
    pub(crate) fn turn_id(&self, n: u64) -> String {
        format!("{}.{n}", self.session_id)
    }

    /// Holds `amount` for the turn `request_id` (402 when the balance or
    /// the key's budget cannot cover it): its bill, to be settled when
    /// the turn ends.
    pub(crate) async fn hold(
        &self,
        request_id: &str,
        amount: rust_decimal::Decimal,
    ) -> Result<crate::money::Settle, ApiError> {
        let c = crate::ctx::Caller {
            gw: &self.gw,
            user: Some(&self.user),
            request_id,
            route_id: self.route_id,
            capability: self.capability,
            started: std::time::Instant::now(),
            trace: &self.trace,
            line: None,
            catalogue: &self.catalogue,
        };
        let hold = crate::money::reserve(&c, amount, false).await?;
        let mut settle = crate::money::Settle::new(&c, &self.provider, &self.model, false, hold);
        settle.streamed = true;
        Ok(settle)
    }

    /// The audit record of the turn `request_id`, ended now after `started`.
    pub(crate) fn audit(
        &self,
        request_id: String,
        started: std::time::Instant,
    ) -> gateway_store::AuditRecord {
        gateway_store::AuditRecord {
            request_id,
            user_id: Some(self.user.id),
            route_id: self.route_id.to_owned(),
            method: "GET".to_owned(),
            path: self.path.clone(),
            status: 200,
            upstream_status: Some(101),
            latency_ms: started.elapsed().as_millis() as u64,
            created_at: gateway_store::now_rfc3339(),
        }
    }
}

/// What a member of an organization may do there, by role
/// ([`OrgRight::allowed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OrgRight {
    /// Every key of the organization, their budgets and limits, and its
    /// members: `owner`, `admin`.
    Manage,
    /// Keys of one's own against the organization's balance: `owner`,
    /// `admin`, `member`.
    OwnKeys,
    /// Purchases and history (usage, credits, ledger): `owner`, `admin`,
    /// `billing`.
    Billing,
    /// The organization and its members, read: every member.
    Read,
}

impl OrgRight {
    /// Whether `role` has this right.
    pub(crate) fn allowed(self, role: &str) -> bool {
        match self {
            OrgRight::Manage => matches!(role, "owner" | "admin"),
            OrgRight::OwnKeys => matches!(role, "owner" | "admin" | "member"),
            OrgRight::Billing => matches!(role, "owner" | "admin" | "billing"),
            OrgRight::Read => true,
        }
    }

    fn roles(self) -> &'static str {
        match self {
            OrgRight::Manage => "owner or admin",
            OrgRight::OwnKeys => "owner, admin or member",
            OrgRight::Billing => "owner, admin or billing",
            OrgRight::Read => "any",
        }
    }
}

/// The account a row acts on, and who asks.
#[derive(Debug, Clone)]
pub(crate) struct Account {
    /// The caller's own, or the organization's (`{org_id}`).
    pub id: i64,
    /// The caller.
    pub caller: i64,
    /// The caller's role when the account is an organization's.
    pub role: Option<String>,
}

impl Account {
    /// Whether the caller may act on every key of the account (their own
    /// account, or an organization's they manage).
    pub(crate) fn manages(&self) -> bool {
        self.role
            .as_deref()
            .is_none_or(|r| OrgRight::Manage.allowed(r))
    }
}

/// The account of a row: the caller's own; on a row with `{org_id}`, that
/// organization's, when the caller is a member whose role has `right`
/// (not a member, or no such organization: 404, as another user's
/// resource; a member without the right: 403 naming the roles that have it).
pub(crate) async fn account_for(
    ctx: &Ctx,
    params: &PathParams,
    right: OrgRight,
) -> Result<Account, ApiError> {
    account_of(ctx, params.get("org_id").as_deref(), right).await
}

/// [`account_for`] of the organization `org` (`None`: the caller's own).
pub(crate) async fn account_of(
    ctx: &Ctx,
    org: Option<&str>,
    right: OrgRight,
) -> Result<Account, ApiError> {
    let caller = ctx.require_user("an account's resources")?;
    let Some(org) = org else {
        return Ok(Account {
            id: caller,
            caller,
            role: None,
        });
    };
    let none = || ApiError::NotFound("no such organization".into());
    let org: i64 = org.parse().map_err(|_| none())?;
    let role = ctx
        .gw
        .store
        .blocking(move |s| gateway_store::Organizations::org_role(s, org, caller))
        .await?
        .ok_or_else(none)?;
    if !right.allowed(&role) {
        return Err(ApiError::Forbidden(format!(
            "your role in this organization is {role}; this needs {}",
            right.roles()
        )));
    }
    Ok(Account {
        id: org,
        caller,
        role: Some(role),
    })
}
