//! Streamed speech (`stream: true`): the provider's audio relayed to the
//! caller chunk by chunk as it comes (never held whole), and on the side
//! copied to the object store from the same bytes (and, when the model is
//! priced by the second, to a spool file it is measured from). The
//! object's presigned URL goes first, in `X-Audio-Url`.
//!
//! The last chunk waits for the bill: when the provider's audio ends, the
//! copy is finished, the audio measured (by the second) and the usage
//! record, its debit, the end of the hold and the asset record committed
//! ([`crate::relay::settle`]); only then does the last chunk leave, so a
//! caller that read the whole audio holds a billed, stored answer. A
//! provider that breaks off, or a caller that hangs up, is billed for what
//! was made (by the character: the whole input, which the provider
//! charges; by the second: the seconds received), and nothing is stored.

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderValue};
use rust_decimal::Decimal;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::ctx::{Ctx, Later, Outcome, Settlement};
use crate::generated::{Media, Stored};
use crate::money::Settle;
use crate::services::Gateway;
use gateway_adapters::upstream::ByteStream;
use gateway_base::body::BoxError;
use gateway_base::errors::ApiError;
use gateway_base::spool::SpoolFile;
use gateway_store::Record;

/// What a streamed speech is: its format, its input's characters, its
/// media (where the copy goes) and the caller's largest speech.
pub(super) struct Streamed {
    pub format: &'static str,
    pub content_type: &'static str,
    pub chars: u64,
    pub owner: i64,
    pub request_id: String,
    pub max: u64,
    pub retention_days: i64,
}

impl Streamed {
    fn media(&self, now: chrono::DateTime<chrono::Utc>) -> Media<'_> {
        Media {
            owner: self.owner,
            prefix: "speech",
            class: "speech",
            purpose: "tts",
            source: &self.request_id,
            suffix: String::new(),
            ext: self.format,
            content_type: self.content_type,
            retention_days: self.retention_days,
            now,
        }
    }
}

/// The caller's answer: the audio as it comes, `served` (the deployment's
/// headers) and `X-Audio-Url`; billed and stored before its last chunk.
pub(super) async fn answer(
    ctx: &Ctx,
    settle: Settle,
    (status, upstream, first): (u16, ByteStream, Option<Bytes>),
    what: Streamed,
    served: HeaderMap,
) -> Result<Outcome, ApiError> {
    let now = chrono::Utc::now();
    let url = what.media(now).presigned(&ctx.gw)?;
    let spool = match settle.model.per_1k_chars {
        Some(_) => None,
        None => Some(
            ctx.gw
                .spool
                .create_file(&format!("tts-{}", ctx.request_id))
                .await
                .map_err(|e| ApiError::internal("creating the spool file", e))?,
        ),
    };
    let (copy, copied) = mpsc::channel::<std::io::Result<Bytes>>(8);
    let (content_type, format, chars) = (what.content_type, what.format, what.chars);
    let gw = ctx.gw.clone();
    let store = tokio::spawn(async move {
        let stream = futures_util::stream::unfold(copied, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        let max = what.max;
        let r = what
            .media(now)
            .store_stream(&gw, Box::pin(stream), max)
            .await;
        (r, what)
    });
    let relay = Relay {
        gw: ctx.gw.clone(),
        upstream,
        next: first,
        held: None,
        copy: Some(copy),
        store: Some(store),
        billing: Some(Billing {
            bill: settle,
            spool: spool.map(|(path, file)| (SpoolFile { path }, file)),
            format,
            chars,
        }),
        done: false,
    };
    // The relay runs in a task of its own, one chunk ahead of the caller:
    // a caller that hangs up drops the receiver, and the relay with it.
    let (tx, rx) = mpsc::channel::<Result<Bytes, BoxError>>(1);
    tokio::spawn(tracing::Instrument::in_current_span(async move {
        let mut relay = relay;
        while let Some(item) = relay.step().await {
            if tx.send(item).await.is_err() {
                break;
            }
        }
    }));
    let body = Received(rx).map(|item| item.map(hyper::body::Frame::data));
    let mut resp = http::Response::new(http_body_util::BodyExt::boxed(
        http_body_util::StreamBody::new(body),
    ));
    let h = resp.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    if let Ok(v) = HeaderValue::from_str(&url) {
        h.insert("x-audio-url", v);
    }
    h.extend(served);
    Ok(Outcome::new(resp, Some(status)).settled(Settlement::Later(Later::Stream)))
}

/// The caller's side of the relay's channel.
struct Received(mpsc::Receiver<Result<Bytes, BoxError>>);

impl futures_util::Stream for Received {
    type Item = Result<Bytes, BoxError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// The copy to the object store, running beside the relay.
type Copying = tokio::task::JoinHandle<(Result<Stored, ApiError>, Streamed)>;

/// A streamed speech being relayed.
struct Relay {
    gw: Gateway,
    upstream: ByteStream,
    /// The first chunk, read by the attempt.
    next: Option<Bytes>,
    /// The audio's last byte so far: it leaves once the bill is committed.
    held: Option<Bytes>,
    copy: Option<mpsc::Sender<std::io::Result<Bytes>>>,
    store: Option<Copying>,
    /// Taken when billed.
    billing: Option<Billing>,
    done: bool,
}

/// What a streamed speech is billed on: its bill, the spool a per-second
/// model's audio is measured from, its format and its input's characters.
struct Billing {
    bill: Settle,
    spool: Option<(SpoolFile, tokio::fs::File)>,
    format: &'static str,
    chars: u64,
}

impl Billing {
    /// The records of what was made: by the character, the whole input;
    /// by the second, what the spool holds, measured.
    async fn records(self) -> Vec<Record> {
        let Billing {
            bill,
            spool,
            format,
            chars,
        } = self;
        if bill.model.per_1k_chars.is_some() {
            return bill.chars_records(chars);
        }
        let seconds = match spool {
            Some((spool, mut file)) => {
                let _ = file.flush().await;
                measured(spool, format).await
            }
            None => Decimal::ZERO,
        };
        bill.seconds_records("audio_seconds", seconds)
    }
}

impl Relay {
    /// The caller's next chunk: each of the provider's but its last byte,
    /// which is held back ([`Relay::held`]) and sent after the bill.
    async fn step(&mut self) -> Option<Result<Bytes, BoxError>> {
        while !self.done {
            let chunk = match self.next.take() {
                Some(c) => Some(Ok(c)),
                None => self.upstream.next().await,
            };
            match chunk {
                Some(Ok(c)) if c.is_empty() => continue,
                Some(Ok(mut c)) => {
                    self.copy_of(&c).await;
                    let last = c.split_off(c.len() - 1);
                    let mut out = self.held.replace(last).unwrap_or_default().to_vec();
                    out.extend_from_slice(&c);
                    if out.is_empty() {
                        continue;
                    }
                    return Some(Ok(Bytes::from(out)));
                }
                Some(Err(e)) => {
                    self.done = true;
                    tracing::warn!(error = %e, "a speech stream broke off");
                    self.cut();
                    return Some(Err(e));
                }
                None => {
                    self.done = true;
                    return match self.finish().await {
                        Ok(()) => self.held.take().map(Ok),
                        Err(e) => Some(Err(Box::new(e))),
                    };
                }
            }
        }
        None
    }

    /// Copies a chunk to the store and the spool (a failed copy is the
    /// store's to report at the end).
    async fn copy_of(&mut self, c: &Bytes) {
        if let Some(copy) = &self.copy {
            let _ = copy.send(Ok(c.clone())).await;
        }
        if let Some((_, file)) = self.billing.as_mut().and_then(|b| b.spool.as_mut()) {
            if let Err(e) = file.write_all(c).await {
                tracing::warn!(error = %e, "spooling speech failed");
            }
        }
    }

    /// The audio ended: the copy finished, the audio measured and
    /// everything committed (the caller's error when it could not be).
    async fn finish(&mut self) -> Result<(), ApiError> {
        self.copy = None;
        let (stored, _) = match self.store.take() {
            Some(store) => store
                .await
                .map_err(|e| ApiError::internal("storing speech", e))?,
            None => return Err(ApiError::bug("a speech stream without its copy")),
        };
        let stored = stored?;
        let mut records = stored.records;
        if let Some(billing) = self.billing.take() {
            records.extend(billing.records().await);
        }
        let committed = crate::relay::settle(self.gw.store.clone(), records).await;
        match committed {
            Ok(Ok(())) => Ok(()),
            _ => Err(ApiError::internal(
                "recording a speech stream",
                std::io::Error::other("the usage was not committed"),
            )),
        }
    }

    /// The audio was cut (the provider broke off, or the caller hung up):
    /// the copy is abandoned (an object that landed anyway is deleted:
    /// no record names it) and what was made is billed, in a task of its
    /// own.
    fn cut(&mut self) {
        let (copy, store) = (self.copy.take(), self.store.take());
        let Some(billing) = self.billing.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let gw = self.gw.clone();
        rt.spawn(async move {
            if let Some(copy) = copy {
                let _ = copy
                    .send(Err(std::io::Error::other("the speech stream was cut")))
                    .await;
            }
            if let Some(Ok((Ok(stored), _))) = match store {
                Some(store) => Some(store.await),
                None => None,
            } {
                crate::generated::forget(&gw, stored.key);
            }
            let records = billing.records().await;
            let _ = crate::relay::settle(gw.store.clone(), records).await;
        });
    }
}

/// Seconds of the spooled audio (0 when it does not decode: a cut file).
async fn measured(spool: SpoolFile, format: &'static str) -> Decimal {
    let path = spool.path.clone();
    let secs = tokio::task::spawn_blocking(move || {
        if format == "pcm" {
            let len = std::fs::metadata(&path).map_or(0, |m| m.len());
            return Some(gateway_models::providers::speech::pcm_seconds(len));
        }
        gateway_base::audio::file_seconds(&path, format)
            .ok()
            .flatten()
    })
    .await
    .ok()
    .flatten();
    drop(spool);
    secs.unwrap_or_default()
}

impl Drop for Relay {
    /// The caller hung up before the end: what was made is billed.
    fn drop(&mut self) {
        self.cut();
    }
}
