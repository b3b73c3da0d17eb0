//! Background responses (`background: true`): the request is answered at
//! once with the `queued` response, stored; the model call then runs
//! inside the gateway as a stream of its own, whose events are kept in the
//! database as they come (`response_events`), so that any instance can
//! answer a later `GET` and a client can re-attach from a sequence number
//! ([`resume`]). Its end stores the response as any stream's does; a
//! cancel stops its stream, which bills what was produced; a run that ends
//! otherwise (an error before or during its stream) is marked `failed`,
//! and a restart of the instance running it marks it `failed` too (its
//! hold released with the instance's, nothing billed).
//!
//! The run is the request's own model call: the same request id, hold,
//! routing, usage record and debit; it bills when its stream ends.

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::{json, Map, Value};

use crate::ctx::{Ctx, Later, Outcome, Settlement};
use crate::model_call::Operation;
use gateway_base::body;
use gateway_base::errors::ApiError;
use gateway_store::{OutsideRecordPhase, Record, ResponseRow, Responses, Store};

/// How often a re-attached client's stream looks for new events.
const POLL: Duration = Duration::from_millis(100);

/// Events read per round trip.
const PAGE: usize = 256;

/// How long a re-attached stream waits for the last events of a run
/// already marked ended (its end is stored just before they are).
const GRACE: Duration = Duration::from_secs(1);

/// The statuses a run ends in.
pub(super) fn ended(status: &str) -> bool {
    matches!(status, "completed" | "incomplete" | "failed" | "cancelled")
}

/// Answers `queued` (the response `queued`, its record `record`, committed
/// first so that the run's own writes follow it) and runs `op` on `body`
/// (streamed) in a task of its own.
pub(super) async fn start<O: Operation + Send + 'static>(
    ctx: &mut Ctx,
    op: O,
    body: Map<String, Value>,
    queued: Value,
    record: Record,
) -> Result<Outcome, ApiError> {
    let why = OutsideRecordPhase::StoredResponse;
    ctx.gw
        .store
        .commit_outside_record_phase(why, vec![record])
        .await?;
    let id = queued["id"].as_str().unwrap_or_default().to_owned();
    let run = Ctx {
        spec: ctx.spec,
        gw: ctx.gw.clone(),
        request_id: ctx.request_id.clone(),
        user: ctx.user.clone(),
        started: Instant::now(),
        query: Vec::new(),
        metered: None,
        trace: Default::default(),
        line: None,
        catalogue: ctx.catalogue.clone(),
    };
    tokio::spawn(run_to_end(run, op, body, id, queued.clone()));
    // The run settles the request when its stream ends (a run that fails
    // first settles nothing: its end commits the `failed` mark, flushed).
    Ok(Outcome::new(body::json(StatusCode::OK, &queued), None)
        .settled(Settlement::Later(Later::Stream)))
}

/// The run: the model call, its events kept as they come; whatever ends
/// it short of its stored end marks it failed.
async fn run_to_end<O: Operation>(
    mut ctx: Ctx,
    op: O,
    body: Map<String, Value>,
    id: String,
    queued: Value,
) {
    let store = ctx.gw.store.clone();
    let now = gateway_store::now_rfc3339();
    let (key, at) = (id.clone(), now.clone());
    if store
        .blocking(move |s| s.start_response(&key, &at))
        .await
        .is_err()
    {
        return;
    }
    match crate::model_call::run(&mut ctx, &op, body, None).await {
        Ok(out) => relay(&ctx, &store, &id, out).await,
        Err(e) => tracing::debug!(error = %e, response = %id, "a background response failed"),
    }
    let key = id.clone();
    let row = store
        .blocking(move |s| s.response_by_id(&key))
        .await
        .ok()
        .flatten();
    if let Some(row) = row.filter(|r| !ended(&r.status)) {
        fail(&store, row, &queued).await;
    }
}

/// Drains the run's stream, keeping each event; a cancel that came before
/// the stream was named stops it now.
async fn relay(ctx: &Ctx, store: &Store, id: &str, out: Outcome) {
    let response = out.response;
    let stream_id = response
        .headers()
        .get("x-stream-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(sid) = &stream_id {
        let (key, s) = (id.to_owned(), sid.clone());
        let _ = store
            .blocking(move |st| st.set_response_stream(&key, &s))
            .await;
        let key = id.to_owned();
        let row = store.blocking(move |st| st.response_by_id(&key)).await;
        if row.ok().flatten().is_some_and(|r| r.status == "cancelled") {
            ctx.gw.streams.stop(sid, ctx.user_id()).await;
        }
    }
    let mut events = Events::default();
    let mut data = response.into_body().into_data_stream();
    while let Some(chunk) = data.next().await {
        let Ok(chunk) = chunk else { break };
        let kept = events.feed(&chunk);
        if kept.is_empty() {
            continue;
        }
        let key = id.to_owned();
        if let Err(e) = store
            .blocking(move |s| s.append_response_events(&key, &kept))
            .await
        {
            tracing::warn!(error = %e, response = %id, "a background response's events were not kept");
        }
    }
}

/// A run that ended short of its stored end: `failed`, with the error
/// OpenAI gives a failed response.
async fn fail(store: &Store, row: ResponseRow, queued: &Value) {
    let mut v = queued.clone();
    v["status"] = json!("failed");
    v["error"] = json!({"code": "server_error", "message": "the response could not be completed"});
    let failed = ResponseRow {
        status: "failed".into(),
        body: v.to_string(),
        updated_at: gateway_store::now_rfc3339(),
        ..row
    };
    let why = OutsideRecordPhase::StoredResponse;
    let record = Record::ResponseSave(Box::new(failed));
    if let Err(e) = store.commit_outside_record_phase(why, vec![record]).await {
        tracing::warn!(error = %e, "a failed background response could not be marked");
    }
}

/// The server-sent events of a stream, cut whole as they come (each kept
/// with its `sequence_number`).
#[derive(Default)]
struct Events {
    partial: Vec<u8>,
}

impl Events {
    /// The whole events `chunk` completes.
    fn feed(&mut self, chunk: &[u8]) -> Vec<(i64, String)> {
        self.partial.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(end) = self.partial.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.partial.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&event).into_owned();
            let seq = text
                .lines()
                .find_map(|l| l.strip_prefix("data:"))
                .and_then(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .and_then(|v| v.get("sequence_number").and_then(Value::as_i64));
            if let Some(seq) = seq {
                out.push((seq, text));
            }
        }
        out
    }
}

/// Whether an event is a run's last (`response.completed`, `.incomplete`
/// or `.failed`).
fn last_event(text: &str) -> bool {
    text.lines().any(|l| {
        matches!(
            l.trim_end(),
            "event: response.completed" | "event: response.incomplete" | "event: response.failed"
        )
    })
}

/// `GET /responses/{id}?stream=true&starting_after=N`: the run's events
/// after sequence number `after` as a server-sent event stream, those
/// kept so far and then the new ones as they are kept, until its last
/// event was sent (or the run ended without one: failed before its
/// stream, or its instance restarted; then once [`GRACE`] passed with no
/// new event).
pub(super) fn resume(store: Store, id: String, after: i64) -> Outcome {
    let state = (store, id, after, false);
    let events = futures_util::stream::unfold(state, |(store, id, after, done)| async move {
        if done {
            return None;
        }
        let mut quiet_since: Option<Instant> = None;
        loop {
            let (key, a) = (id.clone(), after);
            let page = store
                .blocking(move |s| s.response_events(&key, a, PAGE))
                .await
                .unwrap_or_default();
            if let Some(&(last, _)) = page.last() {
                let end = page.iter().any(|(_, e)| last_event(e));
                let text: String = page.into_iter().map(|(_, e)| e).collect();
                return Some((Ok(Bytes::from(text)), (store, id, last, end)));
            }
            let key = id.clone();
            let row = store.blocking(move |s| s.response_by_id(&key)).await;
            match row {
                Ok(Some(r)) if !ended(&r.status) => {}
                Ok(Some(_)) if quiet_since.get_or_insert_with(Instant::now).elapsed() < GRACE => {}
                _ => return None,
            }
            tokio::time::sleep(POLL).await;
        }
    });
    let frames = events.map(|r: Result<Bytes, std::io::Error>| r.map(hyper::body::Frame::data));
    let body = http_body_util::StreamBody::new(frames)
        .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
        .boxed();
    let mut resp = http::Response::new(body);
    crate::model_call::event_stream_headers(resp.headers_mut());
    Outcome::new(resp, None)
}
