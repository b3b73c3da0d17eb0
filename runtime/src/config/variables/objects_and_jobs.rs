//! Where objects are kept (on disk or in S3), the hosts whose job results are
//! copied, the stock voices, and the work done besides requests: the
//! retention sweep, the job follower, instances and their leases, the nightly
//! reconciliation.

use super::row::{Scope, Variable};

/// In the page's order.
pub(super) const VARIABLES: &[Variable] = &[
    Variable {
        name: "GATEWAY_MAX_FILE_BYTES",
        default: r#"`209715200` (200 MiB)"#,
        meaning: r#"largest file of `POST /api/v1/files` (OpenAI's Files API), streamed into the
            object store; a larger one is refused with 413 and nothing is kept"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_BATCH_MAX_LINES",
        default: r#"`50000`"#,
        meaning: r#"most lines of a batch's input file (`POST /api/v1/batches`); a longer file
            fails the batch before anything runs"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_BATCH_CONCURRENCY",
        default: r#"`8`"#,
        meaning: r#"lines of one batch an instance runs at once"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_BATCH_INSTANCE_CONCURRENCY",
        default: r#"`16`"#,
        meaning: r#"lines of all batches an instance runs at once; a line starts only when no
            interactive request is in flight on the instance, or after waiting a second"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_BATCH_WINDOW_SECS",
        default: r#"the batch's `completion_window` (24 hours)"#,
        meaning: r#"how long a batch may run before it ends `expired` (its lines not run yet
            fail with `batch_expired`); for operators and tests"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_OBJECT_STORE",
        default: r#"`local`"#,
        meaning: r#"`local` (under `$GATEWAY_DATA_DIR/objects`) or `s3`"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_SIGNING_KEY",
        default: r#"`$GATEWAY_DATA_DIR/signing.key` (created)"#,
        meaning: r#"HMAC key of the local store's presigned URLs"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_ENDPOINT",
        default: r#"`https://s3.<region>.amazonaws.com`"#,
        meaning: r#"the S3-compatible store's endpoint (with `GATEWAY_OBJECT_STORE=s3`)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_REGION",
        default: r#"`us-east-1`"#,
        meaning: r#"the S3 store's signing region"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_BUCKET",
        default: r#"none"#,
        meaning: r#"the S3 bucket (required with `s3`)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_ACCESS_KEY",
        default: r#"none"#,
        meaning: r#"the S3 access key (required with `s3`)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_SECRET_KEY",
        default: r#"none"#,
        meaning: r#"the S3 secret key (required with `s3`; never logged)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_PATH_STYLE",
        default: r#"`true`"#,
        meaning: r#"path-style URLs (`https://endpoint/bucket/key`); `false`: virtual-hosted
            (`https://bucket.endpoint/key`)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_S3_TIMEOUT_SECS",
        default: r#"`60`"#,
        meaning: r#"seconds one S3 request (a put, a head, the start of a download) may take;
            a store that refuses, stalls past it or answers 5xx makes the request
            answer 503 with `Retry-After` (nothing stored, recorded or charged)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_MIRROR_HOSTS",
        default: r#"none"#,
        meaning: r#"extra hosts (besides the upstream bases) whose job-result URLs may be
            copied"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_STOCK_VOICES",
        default: r#"none"#,
        meaning: r#"voice ids (comma-separated) every user may read and use, besides the
            provider's `source: "stock"` voices"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_SWEEP_INTERVAL_SECS",
        default: r#"`3600`"#,
        meaning: r#"retention sweep interval; `0` disables the periodic sweep"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_JOB_FOLLOW_SECS",
        default: r#"`2`"#,
        meaning: r#"how often the job follower looks for pending jobs due a poll; `0` disables
            it (jobs are then finished only by a GET or a webhook)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_JOB_FOLLOW_CONCURRENCY",
        default: r#"`8`"#,
        meaning: r#"jobs the follower polls at once, per instance (at least 1)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_INSTANCE_ID",
        default: r#"the data directory's"#,
        meaning: r#"this instance's id (1–64 letters, digits, `.`, `_`, `-`), named by every
            credit hold it takes; by default the id kept in
            `$GATEWAY_DATA_DIR/instance-id` (made on first start, locked while the
            process runs; a second process on the same directory takes
            `instance-id.1`, …). See [Several
            instances](operations.md#several-instances)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_INSTANCE_LEASE_SECS",
        default: r#"`120`"#,
        meaning: r#"how long an instance's lease lasts (renewed every third of it); the credit
            holds of an instance that stopped renewing (crashed, cut off) count no
            more after it (at least 3)"#,
        scope: Scope::Gateway,
    },
    Variable {
        name: "GATEWAY_RECONCILE_AT",
        default: r#"`00:30`"#,
        meaning: r#"UTC time of the nightly reconciliation (previous day), or `off`"#,
        scope: Scope::Gateway,
    },
];
