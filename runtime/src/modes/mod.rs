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
//! * [`files`] — `file_upload`, `file_list`, `file_get`, `file_content`,
//!   `file_delete`: OpenAI's Files API, the caller's files (a batch's
//!   input among them).
//! * [`batches`] — `batch_create`, `batch_list`, `batch_get`,
//!   `batch_cancel`: OpenAI's Batch API; the lines are run by
//!   [`crate::batches`].
//! * [`mcp`] — `mcp`: the Model Context Protocol's Streamable HTTP
//!   transport relayed to the MCP servers, with per-key tool permissions,
//!   holds and records.
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
//!   API through the same chat path; [`chat::responses`] — `responses`,
//!   `response_get`, `response_delete`, `response_input_items`,
//!   `response_cancel`: OpenAI's Responses API, its conversations stored.
//! * [`catalogue`] — `catalogue`, `catalogue_model`, `catalogue_trending`.
//! * [`embeddings`] — `embedding`: the spec's or OpenAI's shape.
//! * [`gemini`] — `gemini`: Gemini's API (generate, stream, count tokens,
//!   embed) for any model, passed through to a `gemini` provider.
//! * [`images`] — `image`: generated images copied into the object store.
//! * [`speech`] — `speech`: text to speech on any voice vendor, the audio
//!   stored (or streamed), billed by the character or the second;
//!   `speech_voices`: the voices to ask for.
//! * [`transcription`] — `transcription`: speech to text (and translation
//!   to English), the upload spooled to disk, probed and streamed upstream,
//!   billed in seconds.
//! * [`realtime`] — `realtime`: OpenAI's Realtime API over a WebSocket,
//!   each response held and billed as it ends ([`crate::sessions`]).
//! * [`stt_stream`] — `stt_stream`: live transcription over a WebSocket,
//!   billed per period of audio received.
//! * [`payments`] — `stripe_checkout`, `stripe_webhook`,
//!   `stripe_purchases`: buying credits through Stripe Checkout.
//! * [`videos`] — `video_submit`, `video_get`, `video_list`,
//!   `video_cancel`: caller-owned video jobs (observation shared with the
//!   follower in [`crate::videos`]).
//!
//! This file is the dispatch only: which mode handles a row ([`run`]), and
//! how large a body that mode reads ([`refuse_declared_over`]). What the
//! modes share lives in [`common`] (reading the body, the row's upstream
//! call, the user's JSON, the multipart opener, query numbers), the one
//! file a mode may import beside the crate's own modules; a model call's
//! pipeline is [`crate::model_call`]; the rest is in modules of its own at
//! the crate root ([`crate::ctx`], [`crate::shape`],
//! [`gateway_adapters::upstream`], [`crate::progress`], [`crate::owners`],
//! [`gateway_base::media`]). A mode takes nothing from this file: it
//! imports [`common`] (as `super::common`) and the crate's modules by
//! `crate::` paths, and never a sibling mode.

pub mod account;
pub mod admin;
pub mod alerts;
pub mod batches;
pub mod catalogue;
pub mod chat;
pub mod common;
pub mod embeddings;
pub mod files;
pub mod gemini;
pub mod history;
pub mod images;
pub mod jobs;
pub mod keys;
pub mod lists;
pub mod mcp;
pub mod media_files;
pub mod orgs;
pub mod payments;
pub mod proxy;
pub mod realtime;
pub mod search;
pub mod speech;
pub mod stt_stream;
pub mod synthesis;
pub mod transcription;
pub mod uploads;
pub mod videos;
pub mod webhook;

use crate::ctx::{Ctx, Outcome};
use crate::services::Gateway;
use crate::{owners, shape};
use gateway_base::body::Request;
use gateway_base::errors::ApiError;
use gateway_base::spec::{Mode, PathParams};

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
        m if m.is_account() => account_mode(ctx, req, params).await,
        Mode::Generation => history::generation(ctx, params).await,
        Mode::UsageTotals => history::usage(ctx, params).await,
        Mode::CreditBalance => history::credits(ctx, params).await,
        Mode::CreditLedger => history::ledger(ctx, params).await,
        Mode::Chat => chat::complete(ctx, req, true).await,
        Mode::Completion => chat::complete(ctx, req, false).await,
        Mode::StopStream => chat::stop(ctx, params).await,
        Mode::Messages => chat::messages::messages(ctx, req).await,
        Mode::CountTokens => chat::messages::count_tokens(ctx, req).await,
        Mode::Gemini => gemini::gemini(ctx, req, params).await,
        Mode::Responses => chat::responses::create(ctx, req).await,
        Mode::ResponseGet => chat::responses::stored::get(ctx, params).await,
        Mode::ResponseDelete => chat::responses::stored::delete(ctx, params).await,
        Mode::ResponseInputItems => chat::responses::stored::input_items(ctx, params).await,
        Mode::ResponseCancel => chat::responses::stored::cancel(ctx, params).await,
        Mode::Catalogue => catalogue::list(ctx).await,
        Mode::CatalogueModel => catalogue::model(ctx, params).await,
        Mode::CatalogueTrending => catalogue::trending(ctx).await,
        Mode::Embedding => embeddings::embed(ctx, req).await,
        Mode::Image => images::generate(ctx, req).await,
        Mode::Speech => speech::speak(ctx, req).await,
        Mode::SpeechVoices => speech::voices::list(ctx).await,
        Mode::Transcription => transcription::transcribe(ctx, req).await,
        Mode::Realtime => realtime::open(ctx, req).await,
        Mode::SttStream => stt_stream::open(ctx, req).await,
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
        Mode::FileUpload => files::upload(ctx, req).await,
        Mode::FileList => files::list(ctx).await,
        Mode::FileGet => files::get(ctx, params).await,
        Mode::FileContent => files::content(ctx, params).await,
        Mode::FileDelete => files::delete(ctx, params).await,
        Mode::BatchCreate => batches::create(ctx, req).await,
        Mode::BatchList => batches::list(ctx).await,
        Mode::BatchGet => batches::get(ctx, params).await,
        Mode::BatchCancel => batches::cancel(ctx, params).await,
        Mode::Mcp => mcp::serve(ctx, req, params).await,
        _ => Err(ApiError::bug("a mode without a handler")),
    }
}

/// The account modes ([`Mode::is_account`]): accounts, tokens, keys,
/// alerts, admin, served from the gateway's database.
async fn account_mode(
    ctx: &mut Ctx,
    req: Request,
    params: &PathParams,
) -> Result<Outcome, ApiError> {
    match ctx.spec.mode {
        Mode::Register => account::register(ctx, req).await,
        Mode::Login => account::login(ctx, req).await,
        Mode::TokenRefresh => account::refresh(ctx, req).await,
        Mode::Logout => account::logout(ctx, req).await,
        Mode::ConfirmEmail => account::confirm(ctx, req).await,
        Mode::ResetPassword => account::reset_password(ctx, req).await,
        Mode::Me => account::me(ctx).await,
        Mode::AccountDelete => account::delete::delete_me(ctx, req).await,
        Mode::OauthAuthorize => account::oauth_authorize(ctx, req, params).await,
        Mode::OauthCallback => account::oauth_callback(ctx, req, params).await,
        Mode::KeyList => keys::list(ctx, params).await,
        Mode::KeyCreate => keys::create(ctx, req, params).await,
        Mode::KeyRevoke => keys::revoke(ctx, params).await,
        Mode::KeyUpdate => keys::update(ctx, req, params).await,
        Mode::AdminUsers => admin::users(ctx).await,
        Mode::AdminDisable => admin::set_disabled(ctx, params, true).await,
        Mode::AdminEnable => admin::set_disabled(ctx, params, false).await,
        Mode::AdminDelete => admin::delete(ctx, params).await,
        Mode::AdminCredits => admin::credits(ctx, req, params).await,
        Mode::AdminReload => admin::reload(ctx).await,
        Mode::AdminPrices => admin::prices(ctx, params).await,
        Mode::AlertSettingsGet => alerts::get(ctx).await,
        Mode::AlertSettingsSet => alerts::set(ctx, req).await,
        Mode::AlertList => alerts::list(ctx).await,
        Mode::OrgCreate => orgs::create(ctx, req).await,
        Mode::OrgList => orgs::list(ctx).await,
        Mode::OrgInvite => orgs::invite(ctx, req, params).await,
        Mode::OrgAccept => orgs::accept(ctx, req).await,
        Mode::OrgMembers => orgs::members(ctx, params).await,
        Mode::OrgMemberRemove => orgs::remove(ctx, params).await,
        _ => Err(ApiError::bug("an account mode without a handler")),
    }
}

/// 413 when the body's declared length is over what the row's mode reads
/// (a multipart file's limit and its framing, a webhook's, or a JSON
/// body's): the pipeline asks before the rate limit, so a body refused for
/// its size does not count against it. Each mode still bounds what it
/// reads (a body without `Content-Length` is counted as it arrives).
pub fn refuse_declared_over(mode: Mode, gw: &Gateway, req: &Request) -> Result<(), ApiError> {
    let body = req.body();
    match mode {
        Mode::Upload | Mode::Transcription | Mode::MediaUpload => {
            let max_file = gw.table.limit(mode);
            shape::refuse_declared_over(body, max_file + common::MULTIPART_FRAMING)
                .map_err(|_| common::file_too_large(max_file))
        }
        Mode::FileUpload => {
            let max_file = gw.config.max_file_bytes;
            shape::refuse_declared_over(body, max_file + common::MULTIPART_FRAMING)
                .map_err(|_| common::file_too_large(max_file))
        }
        Mode::Webhook => shape::refuse_declared_over(body, webhook::MAX_BODY as u64),
        Mode::StripeWebhook => shape::refuse_declared_over(body, payments::MAX_WEBHOOK_BODY as u64),
        _ => shape::refuse_declared_over(body, gw.config.max_json_bytes as u64),
    }
}
