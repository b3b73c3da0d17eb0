//! The records the group-commit writer ([`super::writer`]) commits: what a
//! request leaves behind (audit, usage, assets, jobs, ownership, webhook
//! events, model usage, credit holds), and what a commit answers.

use rust_decimal::Decimal;

/// One audit row: who called which route, and how it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub request_id: String,
    pub user_id: Option<i64>,
    pub route_id: String,
    pub method: String,
    pub path: String,
    pub status: u16,
    pub upstream_status: Option<u16>,
    pub latency_ms: u64,
    /// RFC 3339, UTC.
    pub created_at: String,
}

/// One billing-usage row, and the debit of its charge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRecord {
    pub request_id: String,
    pub user_id: Option<i64>,
    pub route_id: String,
    pub capability: String,
    /// Price-key product (`tts`, `watermark_apply`, ...).
    pub product: String,
    /// Billing unit (`audio_seconds`, ...).
    pub unit: String,
    pub quantity: Decimal,
    /// `None` when unpriced.
    pub unit_price: Option<Decimal>,
    pub markup_pct: Decimal,
    /// 8 decimal places.
    pub charged: Decimal,
    /// When set, at most one usage record with this key carries a charge;
    /// a later one is written with quantity 0 and no charge instead.
    pub once_key: Option<String>,
    pub created_at: String,
    /// The API key the request came with, when its charge counts against
    /// the key's budget without a hold (the voice API); `None`: the key of
    /// the request's hold, if any (`store::budgets`).
    pub key_id: Option<i64>,
    /// The API key the request came with, budget or not (`None`: an access
    /// token, the admin key, or a charge made later by a job's observer):
    /// what `group_by=key` groups by. Counts against nothing.
    pub api_key_id: Option<i64>,
    /// The catalogue's price version that priced it (a model's request;
    /// `None`: priced by the route table's prices).
    pub price_version: Option<String>,
}

/// A stored object's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssetRecord {
    pub owner_id: Option<i64>,
    pub object_key: String,
    /// `synthesis`, `voice_recordings`, `mirror`, ...
    pub class: String,
    pub purpose: Option<String>,
    pub size_bytes: u64,
    pub content_type: String,
    pub file_name: Option<String>,
    /// Where it came from (request id, upstream URL).
    pub source: Option<String>,
    pub created_at: String,
    /// `None`: permanent, never swept.
    pub expires_at: Option<String>,
    /// The segment holding the object when it is packed (`objects::pack`).
    pub pack: Option<String>,
    /// Offset of the packed object's body in its segment.
    pub pack_offset: Option<u64>,
}

/// A new asynchronous job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    pub job_id: String,
    pub kind: String,
    pub upstream_id: String,
    pub user_id: i64,
    pub submit_route: String,
    pub status: String,
    pub media_type: Option<String>,
    pub callback_uri: Option<String>,
    pub created_at: String,
    /// When the background follower first polls the job (`None`: never).
    pub follow_at: Option<String>,
    /// The caller's key, when it has a budget: the job's charge counts in
    /// its spend.
    pub key_id: Option<i64>,
    /// The credit hold its submit took (under the submit's request id),
    /// which the job keeps: written with the job, it is renamed
    /// [`job_hold_id`] and names no instance, so that it outlives the
    /// instance's restarts and lease; the job's end releases it. A batch
    /// that fails owes its release, as it does a hold's.
    pub hold: Option<String>,
}

/// The name of the credit hold a job keeps (`credit_holds.request_id`,
/// `job:<kind>:<job_id>`): what its end releases.
pub fn job_hold_id(kind: &str, job_id: &str) -> String {
    format!("job:{kind}:{job_id}")
}

/// A change to a job's status or result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobUpdate {
    pub kind: String,
    pub job_id: String,
    pub status: String,
    pub media_type: Option<String>,
    /// JSON text of the result summary.
    pub result: Option<String>,
    /// Mark the job billed (together with its once-keyed usage record).
    pub billed: bool,
    pub updated_at: String,
}

/// An inbound webhook event, stored whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEventRecord {
    /// SHA-256 (hex) of the raw body: the same delivery twice is one event.
    pub body_sha256: String,
    pub body: Vec<u8>,
    pub event: Option<String>,
    pub kind: Option<String>,
    pub upstream_id: Option<String>,
    pub signed: bool,
    /// What the gateway did with it (`job_updated`, `unknown_job`, `malformed`, ...).
    pub outcome: String,
    pub received_at: String,
}

/// A record committed by the group-commit writer.
#[derive(Debug, Clone)]
pub enum Record {
    Audit(AuditRecord),
    Usage(UsageRecord),
    Asset(AssetRecord),
    JobCreate(JobRecord),
    JobUpdate(JobUpdate),
    /// A user-owned resource was created upstream through the gateway.
    OwnerAdd {
        kind: String,
        upstream_id: String,
        owner_id: i64,
        /// The resource it belongs to upstream (an agent tool's agent), if any.
        parent: Option<String>,
        at: String,
    },
    /// A user-owned resource was deleted.
    OwnerRemove {
        kind: String,
        upstream_id: String,
    },
    /// A resource's status changed (a voice finished training).
    OwnerStatus {
        kind: String,
        upstream_id: String,
        status: String,
        at: String,
    },
    WebhookEvent(WebhookEventRecord),
    /// A model request's token detail (the general gateway).
    ModelUsage(ModelUsageRecord),
    /// A request's credit hold ends (it settled, with its usage record in
    /// the same transaction).
    HoldRelease {
        request_id: String,
    },
    /// Hold `amount` of a user's credit for a request, if the balance minus
    /// the user's other holds covers it; the outcome is in
    /// [`Committed::holds`]. Through the writer so that holds are group
    /// committed and never wait for the database lock.
    Hold {
        request_id: String,
        user_id: i64,
        amount: Decimal,
        /// The API key the request came with: its budget, if it has one,
        /// must cover the amount too (`store::budgets`).
        key_id: Option<i64>,
        /// The balance must cover the amount (a model call's hold); `false`:
        /// only the key's budget (a voice request's, which never answers
        /// 402 for the balance).
        check_balance: bool,
    },
    /// A stored response of the Responses API, made or brought up to date
    /// (a background run's status and answer): with its request's usage
    /// and debit when it settles with them.
    ResponseSave(Box<super::responses::ResponseRow>),
    /// A batch made, its lines with it (the create request's record).
    BatchCreate(Box<super::batches::NewBatch>),
    /// A batch line ended: its result, committed with its request's usage
    /// and debit when it answered.
    BatchLine(super::batches::LineEnd),
    /// An MCP tool call's record (with its usage and debit when priced).
    McpCall(super::mcp::McpCallRecord),
    /// A file (a packed object's segment) to fdatasync before the group
    /// holding this record commits; written nothing. See [`sync_files`].
    SyncFile(std::sync::Arc<std::fs::File>),
}

/// The token detail of one model request, beside its usage record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelUsageRecord {
    pub request_id: String,
    pub user_id: Option<i64>,
    pub route_id: String,
    /// `provider/model`.
    pub model: String,
    /// Prompt tokens billed as input (the cache's not among them).
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write_tokens: u64,
    /// Counted by the gateway (a stream without the upstream's `usage`).
    pub counted: bool,
    /// The caller's own key went upstream: recorded, charged nothing.
    pub byok: bool,
    /// How the request ended: `complete`, `stopped`, `disconnected`, `timeout`, `error`.
    pub ended: String,
    /// Answered as a stream.
    pub streamed: bool,
    /// From the request's arrival to its settlement (a stream's end);
    /// `None` for a job's.
    pub latency_ms: Option<u64>,
    /// Upstream attempts (1 without a retry; [`gateway_models::routing`]).
    pub attempts: u32,
    /// The route the caller named, when `model` (the deployment that
    /// served) was one of its targets.
    pub route: Option<String>,
    pub created_at: String,
}

/// What a commit produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    /// Ids of the batch's [`Record::Asset`]s, in order.
    pub asset_ids: Vec<i64>,
    /// For each [`Record::Usage`] in order: whether it was written (false
    /// when its `once_key` had been used already).
    pub usage_written: Vec<bool>,
    /// For each [`Record::Hold`] in order: whether it was held.
    pub holds: Vec<super::Reserved>,
}

/// Why records are committed outside the pipeline's record phase, through
/// [`super::Store::commit_outside_record_phase`] (the one door for them):
/// each is work that must be durable at a moment of its own, not with a
/// request's answer. Everything else a request leaves behind rides in the
/// record phase's one group commit (`pipeline::record`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutsideRecordPhase {
    /// A credit hold, before the model call (`runtime::money::reserve`): its
    /// outcome (held, or 402) must be known before the upstream is called.
    Hold,
    /// The end of a hold whose request settled nothing (it failed): its
    /// release alone (`runtime::money::Hold::release`).
    HoldEnd,
    /// A model stream's settlement (usage, debit, token detail, release of
    /// the hold), when the stream ends or the caller hangs up (`relay`).
    StreamSettlement,
    /// A video job's end: billed once (usage with its once-key, debit,
    /// release of the hold kept since the submit, the copy's asset), or
    /// failed or cancelled and its hold released (`videos`).
    VideoJobEnd,
    /// An uploaded file's asset record, after its object is stored
    /// (`modes::uploads`, `modes::media_files`), so that a failed store
    /// leaves no record.
    UploadedAsset,
    /// A job result's mirrored copy, after its object is stored (`mirror`).
    MirroredCopy,
    /// What the background job follower saw of a job: its charge (once
    /// keyed) and its record (`follower`).
    FollowedJob,
    /// A stored response of the Responses API, written when its stream
    /// ends, before its last event (`modes::responses`), or by its
    /// background run.
    StoredResponse,
    /// A live session's turn: a realtime response's, or a period of a live
    /// transcription's audio (usage, debit, release of its hold, audit
    /// record), before the event that reports it (`sessions`).
    SessionTurn,
    /// A batch line that ended without a charge (an error answer, or not
    /// run: cancelled, expired, no credit), by the batch executor
    /// (`batches`).
    BatchLine,
    /// A batch's output and error files, at its end (`batches`).
    BatchResults,
    /// An MCP tool call answered in a stream: its record, usage and debit
    /// before the event carrying its result (`modes::mcp`).
    ToolCall,
}
