//! A batch's end: its output file (one line per request answered 2xx)
//! and its error file (one per other line), each a file of the caller's
//! (`purpose` `batch_output`, kept 30 days), in input order, as OpenAI
//! writes them:
//!
//! ```text
//! {"id": "batch_req_…", "custom_id": "…", "response": {"status_code": 200, "request_id": "res_…", "body": {…}}, "error": null}
//! {"id": "batch_req_…", "custom_id": "…", "response": null, "error": {"code": "insufficient_credits", "message": "…"}}
//! ```
//!
//! Each line's result was committed with its charge as it ended; the
//! files are written from those results, streamed page by page into the
//! object store (never held whole), then published with the batch's end.

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::services::Gateway;
use gateway_store::{
    AssetRecord, BatchRow, Batches, LineRow, OutsideRecordPhase, Record, StoreError,
};

/// Lines read from the database at a time.
const PAGE: usize = 500;
/// How long result files are kept (OpenAI's 30 days).
const KEPT_DAYS: i64 = 30;

/// Writes the files of `row` and ends it: `cancelled` when it was
/// cancelling, `expired` when its window passed, else `completed`.
pub(super) async fn finish(gw: &Gateway, row: &BatchRow) -> Result<(), StoreError> {
    let id = row.id.clone();
    let counts = gw.store.blocking(move |s| s.line_counts(&id)).await?;
    let output = match counts.done {
        0 => None,
        _ => Some(write(gw, row, "done", "output").await?),
    };
    let errors = match counts.failed {
        0 => None,
        _ => Some(write(gw, row, "failed", "error").await?),
    };
    let records: Vec<Record> = output
        .iter()
        .chain(&errors)
        .cloned()
        .map(Record::Asset)
        .collect();
    let committed = gw
        .store
        .commit_outside_record_phase(OutsideRecordPhase::BatchResults, records)
        .await?;
    let mut ids = committed.asset_ids.iter().map(|n| format!("file-{n}"));
    let output_id = output.as_ref().and_then(|_| ids.next());
    let error_id = errors.as_ref().and_then(|_| ids.next());
    let status = match (row.status.as_str(), row.ending.as_deref()) {
        ("cancelling", _) => "cancelled",
        (_, Some("expired")) => "expired",
        _ => "completed",
    };
    let (id, now) = (row.id.clone(), gateway_store::now_rfc3339());
    gw.store
        .blocking(move |s| {
            s.end_batch(&id, status, output_id.as_deref(), error_id.as_deref(), &now)
        })
        .await?;
    tracing::info!(batch = %row.id, status, done = counts.done, failed = counts.failed, "batch ended");
    Ok(())
}

/// Streams the lines in `state` into a new object; its asset record.
async fn write(
    gw: &Gateway,
    row: &BatchRow,
    state: &'static str,
    kind: &str,
) -> Result<AssetRecord, StoreError> {
    let now = chrono::Utc::now();
    let key = format!(
        "files/{}/{}/{}_{kind}.jsonl",
        row.user_id,
        now.format("%Y/%m/%d"),
        row.id
    );
    let pages = futures_util::stream::unfold(Some(0i64), {
        let (store, id) = (gw.store.clone(), row.id.clone());
        move |after| {
            let (store, id) = (store.clone(), id.clone());
            async move {
                let after = after?;
                let page = store
                    .blocking(move |s| s.line_results(&id, after, PAGE))
                    .await;
                match page {
                    Ok(rows) if rows.is_empty() => None,
                    Ok(rows) => {
                        let next = rows.last().map(|r| r.line);
                        let text: String = rows
                            .iter()
                            .filter(|r| r.state == state)
                            .map(|r| line_json(r).to_string() + "\n")
                            .collect();
                        Some((Ok(bytes::Bytes::from(text)), next))
                    }
                    Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
                }
            }
        }
    });
    let size = gw
        .objects
        .put(&key, "application/jsonl", Box::pin(pages.boxed()), None)
        .await
        .map_err(|e| StoreError::caused("writing a batch's results", e))?;
    Ok(AssetRecord {
        owner_id: Some(row.user_id),
        object_key: key,
        class: crate::modes::common::FILE_CLASS.into(),
        purpose: Some("batch_output".into()),
        size_bytes: size,
        content_type: "application/jsonl".into(),
        file_name: Some(format!("{}_{kind}.jsonl", row.id)),
        source: Some(row.id.clone()),
        created_at: gateway_store::rfc3339(now),
        expires_at: Some(gateway_store::rfc3339(
            now + chrono::Duration::days(KEPT_DAYS),
        )),
        pack: None,
        pack_offset: None,
    })
}

/// One line of a result file.
fn line_json(r: &LineRow) -> Value {
    let body = r
        .result
        .as_deref()
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .unwrap_or(Value::Null);
    let id = format!(
        "batch_req_{}",
        r.request_id
            .as_deref()
            .and_then(|q| q.strip_prefix("res_"))
            .map_or_else(|| format!("line{}", r.line), str::to_owned)
    );
    match (r.status_code, &r.request_id) {
        (Some(code), Some(request_id)) => json!({
            "id": id,
            "custom_id": r.custom_id,
            "response": {"status_code": code, "request_id": request_id, "body": body},
            "error": null,
        }),
        _ => json!({"id": id, "custom_id": r.custom_id, "response": null, "error": body}),
    }
}
