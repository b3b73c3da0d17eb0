//! Relaying a model's server-sent events to the caller, chunk by chunk
//! (never buffered whole), while reading what passes:
//!
//! * the upstream's `usage` when it sends one (its four counts,
//!   [`Tokens`]), else the content events counted (one token per event
//!   with content or a tool call's delta);
//! * a native provider's events translated into OpenAI chunks as they
//!   pass ([`gateway_models::providers::StreamTranslator`]), whose usage is the
//!   provider's (input and cache counts from the stream's start, output at
//!   its end: a stream stopped before the end bills the reported input and
//!   the counted output);
//! * a stop request ([`gateway_adapters::streams`]): `data: [DONE]` and a clean end;
//! * idleness past the stream time-out: an error event, then `[DONE]`;
//! * the end, however it comes (the upstream's `[DONE]` or its end,
//!   stopped, timed out, upstream error, or the client hanging up, which
//!   drops the body): what was streamed is settled once
//!   ([`crate::money::Settle`]) — before the stream's last event on
//!   every end the caller sees, spawned on a drop;
//! * the last event ([`gateway_models::usage_tail`]): the upstream's `[DONE]` (and,
//!   when the caller asked for usage, its usage event) is held back as it
//!   passes and sent only once the settlement is committed, the usage
//!   event with the cost.
//!
//! # The last event waits for the settlement
//!
//! A caller that has read `[DONE]` (or `/messages`' `message_stop`) holds a
//! complete, successful answer: by then its usage record, the debit and
//! the end of its hold are committed (`GET /generations/{id}` answers), so
//! a gateway that dies at any moment never leaves a stream its caller saw
//! succeed unbilled (one that dies before the commit never sent the last
//! event: the caller saw a cut stream, and the hold expires with its
//! instance's lease). The stream ends as soon as the upstream's `[DONE]`
//! passes, whether or not the upstream closes its connection then (what
//! it still sends is read and dropped in the background, so that its
//! connection can be reused). Only that last event waits; every other
//! chunk passes as it comes.
//!
//! When the settlement cannot be committed (the database unreachable), its
//! commit is retried (backing off from 200 ms to 5 s) and the last event
//! waits for it up to the stream's idle time-out
//! (`GATEWAY_STREAM_TIMEOUT_SECS`, the longest the gateway lets a stream
//! be silent): a database restart or failover only delays `[DONE]`. Past
//! that, or when the commit fails otherwise, the stream ends with an error
//! event (503 naming the database; 500 for any other failure) instead of
//! the usage event and `[DONE]`, so the caller never reads a success that
//! is not recorded; the commit goes on being retried in the background
//! for [`SETTLEMENT_RETRY_FOR`], so what was streamed is still billed when
//! the database answers. A caller that hangs up meanwhile changes nothing:
//! the settlement runs in a task of its own.

use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde_json::Value;

use crate::money::Settle;
use crate::services::Gateway;
use gateway_adapters::streams::Registration;
use gateway_base::body::BoxError;
use gateway_models::cost::Cost;
use gateway_models::providers::{StreamTranslator, Tokens};
use gateway_models::usage_tail::UsageTail;
use gateway_store::{Failure, OutsideRecordPhase};

type Upstream = Pin<Box<dyn Stream<Item = Result<Bytes, BoxError>> + Send>>;

/// Most bytes of one unfinished SSE line kept for counting.
const MAX_LINE: usize = 1 << 20;

/// What the relay has seen of the events.
#[derive(Debug, Default)]
pub struct Counter {
    line: Vec<u8>,
    /// `usage` of the upstream.
    pub usage: Option<Tokens>,
    /// Events that carried content.
    pub content_events: u64,
    pub done: bool,
    /// The choices' `finish_reason`s, collected only when the stream is
    /// traced (`Some`).
    pub finish_reasons: Option<Vec<String>>,
}

impl Counter {
    /// Feeds a chunk of the event stream.
    pub fn feed(&mut self, chunk: &[u8]) {
        for &b in chunk {
            if b == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.line_done(&line);
            } else if self.line.len() < MAX_LINE {
                self.line.push(b);
            }
        }
    }

    fn line_done(&mut self, line: &[u8]) {
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let data = data.trim_ascii();
        if data == b"[DONE]" {
            self.done = true;
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        if let Some(t) = v.get("usage").and_then(Tokens::from_openai) {
            self.usage = Some(t);
        }
        for c in v
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let text = c
                .get("delta")
                .and_then(|d| d.get("content"))
                .or_else(|| c.get("text"))
                .and_then(Value::as_str);
            let call = c
                .get("delta")
                .and_then(|d| d.get("tool_calls"))
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            if call || text.is_some_and(|t| !t.is_empty()) {
                self.content_events += 1;
            }
            if let (Some(reasons), Some(r)) = (
                &mut self.finish_reasons,
                c.get("finish_reason").and_then(Value::as_str),
            ) {
                reasons.push(r.to_owned());
            }
        }
    }
}

/// One relayed stream.
pub struct Relay {
    pub gw: Gateway,
    pub upstream: Upstream,
    /// The first chunk, read before the answer started (for the time-out).
    pub first: Option<Bytes>,
    pub idle: Duration,
    pub registration: Registration,
    pub settle: Option<Settle>,
    /// Prompt tokens billed when the upstream sends no `usage`.
    pub prompt_tokens: u64,
    pub counter: Counter,
    /// The last event held back: `[DONE]`, and the usage event with the
    /// cost when the caller asked for usage.
    pub tail: UsageTail,
    /// A native provider's stream translated into OpenAI's ([`Relay::translate`]).
    translator: Option<Box<dyn StreamTranslator>>,
    /// The response cache's capture of a miss: stored only when the stream
    /// completes ([`gateway_models::cache`]).
    pub capture: Option<gateway_models::cache::StreamCapture>,
    /// The request's span, ended when the stream settles ([`Relay::trace`]).
    span: gateway_base::traces::Span,
    finished: bool,
}

impl Relay {
    pub fn new(
        gw: Gateway,
        upstream: Upstream,
        first: Option<Bytes>,
        idle: Duration,
        registration: Registration,
        settle: Settle,
        prompt_tokens: u64,
    ) -> Relay {
        let mut counter = Counter::default();
        if let Some(b) = &first {
            counter.feed(b);
        }
        Relay {
            gw,
            upstream,
            first,
            idle,
            registration,
            settle: Some(settle),
            prompt_tokens,
            counter,
            tail: UsageTail::default(),
            translator: None,
            capture: None,
            span: gateway_base::traces::Span::default(),
            finished: false,
        }
    }

    /// Translates the provider's stream with `t` (the first chunk, already
    /// read, too); `None`: the stream is OpenAI's already.
    pub fn translate(&mut self, t: Option<Box<dyn StreamTranslator>>) {
        let Some(t) = t else { return };
        self.translator = Some(t);
        self.counter = Counter::default();
        if let Some(b) = self.first.take() {
            let out = self.translated(&b);
            self.counter.feed(&out);
            self.first = Some(out);
        }
    }

    /// Ends the request's span `span` when the stream settles, with its
    /// tokens, finish reasons and cost (nothing when traces are off).
    pub fn trace(&mut self, span: gateway_base::traces::Span) {
        if span.is_on() {
            let mut reasons = Vec::new();
            // The first chunk was counted already.
            if let Some(b) = &self.first {
                let mut c = Counter {
                    finish_reasons: Some(Vec::new()),
                    ..Counter::default()
                };
                c.feed(b);
                reasons = c.finish_reasons.unwrap_or_default();
            }
            self.counter.finish_reasons = Some(reasons);
        }
        self.span = span;
    }

    /// `b` through the translator, if any.
    fn translated(&mut self, b: &Bytes) -> Bytes {
        match &mut self.translator {
            Some(t) => {
                let mut out = Vec::with_capacity(b.len() + 256);
                t.feed(b, &mut out);
                Bytes::from(out)
            }
            None => b.clone(),
        }
    }

    /// The tokens billed: the upstream's `usage`, else those counted
    /// (and whether they were counted).
    fn tokens(&self) -> (Tokens, bool) {
        match (
            self.translator.as_ref().and_then(|t| t.usage()),
            self.counter.usage,
        ) {
            (Some((t, true)), _) => (t, false),
            // The input reported at the start; the output not yet.
            (Some((t, false)), _) => (
                Tokens {
                    output: self.counter.content_events,
                    ..t
                },
                true,
            ),
            (None, Some(t)) => (t, false),
            (None, None) => (
                Tokens::new(self.prompt_tokens, self.counter.content_events),
                true,
            ),
        }
    }

    fn settle_records(&mut self, ended: &str) -> Option<Vec<gateway_store::Record>> {
        let settle = self.settle.take()?;
        let (t, counted) = self.tokens();
        let model = self.span.is_on().then(|| settle.model.id.clone());
        let records = settle.token_records(t, counted, ended);
        if let Some(model) = model {
            let reasons = self.counter.finish_reasons.take().unwrap_or_default();
            self.span.usage(|| gateway_base::traces::Usage {
                response_model: Some(&model),
                input_tokens: t.prompt(),
                output_tokens: t.output,
                finish_reasons: reasons,
            });
            if let Some(c) = Cost::of(&records) {
                self.span.cost(|| c.text());
            }
            self.span.end(200);
        }
        Some(records)
    }

    /// Commits what was streamed (once), waiting for the commit (retried
    /// while the database is unreachable) at most the idle time-out. The
    /// commit runs in a task of its own, so that cancelling this (the
    /// caller hung up) cannot lose it. The charge committed, or why it is
    /// not committed (yet).
    async fn finish(&mut self, ended: &str) -> Result<Option<Cost>, Failure> {
        let Some(records) = self.settle_records(ended) else {
            return Ok(None);
        };
        let cost = Cost::of(&records);
        let committed = settle(self.gw.store.clone(), records);
        match tokio::time::timeout(self.idle, committed).await {
            Ok(Ok(Ok(()))) => Ok(cost),
            Ok(Ok(Err(failure))) => Err(failure),
            // The settling task panicked (it logged why).
            Ok(Err(_)) => Err(Failure::Other),
            Err(_) => {
                tracing::warn!(
                    "a stream's usage is not recorded within the idle time-out; it ends with an error event, the commit goes on in the background"
                );
                Err(Failure::Unavailable)
            }
        }
    }

    /// The stream's last bytes, once it ended as `ended` (after the error
    /// event `error`, if any): settled, the usage event (when asked for)
    /// and `[DONE]`; not settled, an error event instead.
    async fn end(&mut self, ended: &str, error: Option<(u16, &str)>) -> Bytes {
        let settled = self.finish(ended).await;
        let mut out = self.tail.rest().to_vec();
        if let Some((status, message)) = error {
            out.extend_from_slice(&self.tail.error_event(status, message));
        }
        match settled {
            Ok(cost) => {
                let (t, _) = self.tokens();
                out.extend_from_slice(&self.tail.close(cost, t));
            }
            Err(Failure::Other) => {
                out.extend_from_slice(&self.tail.error_event(500, "recording this stream's usage failed"));
            }
            Err(_) => out.extend_from_slice(&self.tail.error_event(
                503,
                "the database is unavailable: this stream's usage is not recorded yet (it is once the database answers)",
            )),
        }
        Bytes::from(out)
    }

    /// A chunk of the stream (translated, counted and captured already):
    /// what of it goes to the caller now. Once the upstream's `[DONE]` has
    /// passed, the stream is complete, whatever the upstream still sends
    /// or however long it keeps its connection open: it ends here.
    async fn pass(&mut self, b: Bytes) -> Bytes {
        if self.counter.done {
            self.drain_upstream();
            return self.complete(b).await;
        }
        self.tail.filter(&b)
    }

    /// Reads what the upstream still sends after its `[DONE]` (its body's
    /// end, normally at once) in a task of its own, for at most the idle
    /// time-out, so that its connection can serve another request.
    fn drain_upstream(&mut self) {
        let mut upstream: Upstream =
            std::mem::replace(&mut self.upstream, Box::pin(futures_util::stream::empty()));
        let idle = self.idle;
        tokio::spawn(async move {
            let drained = async { while let Some(Ok(_)) = upstream.next().await {} };
            let _ = tokio::time::timeout(idle, drained).await;
        });
    }

    /// The stream's end once the upstream finished, `last` its last chunk
    /// (translated, counted and captured): the translator's last chunks,
    /// the response cache's entry stored, then [`Relay::end`].
    async fn complete(&mut self, last: Bytes) -> Bytes {
        self.finished = true;
        // A translated stream's last chunks ([DONE] among them), unless sent.
        let mut more = Vec::new();
        if let Some(t) = &mut self.translator {
            t.finish(&mut more);
        }
        self.counter.feed(&more);
        if let Some(c) = &mut self.capture {
            c.feed(&more);
        }
        let mut out = self.tail.filter(&last).to_vec();
        out.extend_from_slice(&self.tail.filter(&more));
        if let Some(c) = self.capture.take() {
            let (tokens, counted) = self.tokens();
            c.complete(tokens, counted);
        }
        out.extend_from_slice(&self.end("complete", None).await);
        Bytes::from(out)
    }

    /// The next chunk for the caller.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.finished {
            return None;
        }
        if let Some(b) = self.first.take() {
            // Counted (and translated) already.
            if let Some(c) = &mut self.capture {
                c.feed(&b);
            }
            return Some(self.pass(b).await);
        }
        let mut stop = self.registration.stop.clone();
        let next = tokio::select! {
            biased;
            _ = async { stop.wait_for(|s| *s).await.is_ok() } => None,
            r = tokio::time::timeout(self.idle, self.upstream.next()) => Some(r),
        };
        let Some(next) = next else {
            self.finished = true;
            return Some(self.end("stopped", None).await);
        };
        match next {
            Ok(Some(Ok(b))) => {
                let b = self.translated(&b);
                self.counter.feed(&b);
                if let Some(c) = &mut self.capture {
                    c.feed(&b);
                }
                Some(self.pass(b).await)
            }
            Ok(None) => Some(self.complete(Bytes::new()).await),
            Ok(Some(Err(e))) => {
                self.finished = true;
                tracing::warn!(error = %e, "model stream broke off");
                let message = "the model provider's stream broke off";
                Some(self.end("error", Some((502, message))).await)
            }
            Err(_) => {
                self.finished = true;
                let message = format!("stream idle for more than {} s", self.idle.as_secs());
                Some(self.end("timeout", Some((504, &message))).await)
            }
        }
    }

    /// The relay as a body stream: a task drives the relay (so that it
    /// settles even when nobody polls the body any more) and hands each
    /// chunk over a one-slot channel; when the caller hangs up the channel
    /// closes, the task ends at once (even while the upstream is silent) and
    /// the relay, dropped, bills what was streamed. A body dropped before
    /// it was ever read was never sent (the request failed after the relay
    /// was made: its record phase could not commit, and an error was
    /// answered instead): nothing is billed and the hold is released.
    pub fn into_stream(self) -> ChannelStream {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        let read = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let was_read = read.clone();
        // In the request's span: its log lines carry the request id.
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            let mut relay = self;
            loop {
                // A hang-up is noticed even while the upstream is silent;
                // every step of `next_chunk` may be cancelled safely.
                let next = tokio::select! {
                    biased;
                    _ = tx.closed() => break,
                    b = relay.next_chunk() => b,
                };
                let Some(b) = next else { return };
                if tx.send(b).await.is_err() {
                    break;
                }
            }
            if !was_read.load(std::sync::atomic::Ordering::Acquire) {
                tracing::debug!(
                    "a stream's answer was never sent; its hold released, nothing billed"
                );
                relay.settle = None;
            }
        }));
        ChannelStream { rx, read }
    }
}

/// The caller's side of a relay.
pub struct ChannelStream {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    /// Set once the body is first read (the answer is being sent).
    read: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Stream for ChannelStream {
    type Item = Result<Bytes, BoxError>;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.read.store(true, std::sync::atomic::Ordering::Release);
        self.rx.poll_recv(cx).map(|o| o.map(Ok))
    }
}

/// Longest a stream's settlement is retried while the database is
/// unreachable.
pub const SETTLEMENT_RETRY_FOR: Duration = Duration::from_secs(600);

/// Commits a stream's settlement (its usage record, debit and the end of
/// its hold) in a task of its own; the receiver learns that it committed,
/// or why it did not. The stream's content was sent, so its usage must
/// not be lost to a database that is briefly down (a restart, a failover):
/// when the commit fails as unavailable (nothing of it was committed), it
/// is retried, backing off from 200 ms up to 5 s, for
/// [`SETTLEMENT_RETRY_FOR`], whether or not anyone still waits for it.
/// Meanwhile the record writer may release the hold it owes (see
/// `store::writer`); the retried commit then ends no hold but still
/// writes the usage and its debit. A commit in doubt is never retried.
pub(crate) fn settle(
    store: gateway_store::Store,
    records: Vec<gateway_store::Record>,
) -> tokio::sync::oneshot::Receiver<Result<(), Failure>> {
    let (done, committed) = tokio::sync::oneshot::channel();
    let why = OutsideRecordPhase::StreamSettlement;
    // In the request's span: its log lines carry the request id.
    tokio::spawn(tracing::Instrument::in_current_span(async move {
        let started = std::time::Instant::now();
        let mut wait = Duration::from_millis(200);
        let mut tries = 0u32;
        let outcome = loop {
            tries += 1;
            let e = match store
                .commit_outside_record_phase(why, records.clone())
                .await
            {
                Ok(_) if tries == 1 => break Ok(()),
                Ok(_) => {
                    tracing::info!(after = ?started.elapsed(), "a stream's usage recorded on retry");
                    break Ok(());
                }
                Err(e) => e,
            };
            if e.failure != Failure::Unavailable || started.elapsed() >= SETTLEMENT_RETRY_FOR {
                tracing::error!(error = %e, "recording a stream's usage failed");
                break Err(e.failure);
            }
            if tries == 1 {
                tracing::warn!(error = %e, "recording a stream's usage failed; retrying until the database answers");
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(5));
        };
        let _ = done.send(outcome);
    }));
    committed
}

impl Drop for Relay {
    /// The caller hung up (the body is dropped before its end): what was
    /// streamed is billed, in a task of its own; after [`Relay::finish`]
    /// there is nothing left to bill (see `money`'s settlement contract).
    fn drop(&mut self) {
        if let Some(records) = self.settle_records("disconnected") {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = settle(self.gw.store.clone(), records);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_content_events_and_reads_usage_across_chunks() {
        let mut c = Counter::default();
        c.feed(
            b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\nda",
        );
        c.feed(b"ta: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n");
        c.feed(b"data: {\"choices\":[{\"text\":\" there\"}]}\n\n");
        assert_eq!((c.content_events, c.usage, c.done), (2, None, false));
        c.feed(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n");
        assert_eq!((c.usage, c.done), (Some(Tokens::new(3, 2)), true));
    }
}
