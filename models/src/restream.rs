//! A chat completion stream (OpenAI's chunks) turned into the events of
//! another API, chunk by chunk as it arrives (never buffered whole): the
//! shared loop of the doors of other APIs ([`crate::messages_api::events`],
//! [`crate::gemini_api::events`], [`crate::responses_api::events`]), each
//! of which says only what a chunk becomes ([`Rechunk`]).
//!
//! A door whose stream ends with an object the runtime keeps (the
//! Responses API's whole `response`) is relayed by [`restream_kept`]: the
//! object is handed over, and kept, before the last bytes leave.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, Stream, StreamExt};
use http_body_util::BodyExt;
use serde_json::Value;

use gateway_base::body::Body;

/// What a door's stream translation does with OpenAI's bytes.
pub trait Rechunk: Send + Sync + 'static {
    /// The door's bytes for one upstream chunk (possibly none yet).
    fn feed(&mut self, chunk: &[u8]) -> String;
    /// The door's last bytes once the upstream ended.
    fn finish(&mut self) -> String;
    /// The door's final object once finished, for the runtime to keep
    /// (`None`: the door keeps nothing).
    fn outcome(&mut self) -> Option<Value> {
        None
    }
}

/// What is done with the final object before the last bytes go.
type Keep = Box<dyn FnOnce(Value) -> BoxFuture<'static, ()> + Send>;

/// `body` (OpenAI's chunks) translated by `t`, as a body: each chunk's
/// bytes as they come, the translation's last ones at the end; an upstream
/// error ends it.
pub fn restream(body: Body, t: impl Rechunk) -> Body {
    relay(body, t, None)
}

/// [`restream`], and once the upstream ended and `t` finished, its
/// [`Rechunk::outcome`] (if any) handed to `keep`, awaited **before** the
/// last bytes are sent: what the caller sees last is already kept.
pub fn restream_kept<K, F>(body: Body, t: impl Rechunk, keep: K) -> Body
where
    K: FnOnce(Value) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    relay(body, t, Some(Box::new(move |v| keep(v).boxed())))
}

/// The one loop of [`restream`] and [`restream_kept`].
fn relay(body: Body, t: impl Rechunk, keep: Option<Keep>) -> Body {
    let state = (body.into_data_stream(), t, keep, false);
    let events =
        futures_util::stream::unfold(state, |(mut up, mut t, mut keep, done)| async move {
            if done {
                return None;
            }
            loop {
                match up.next().await {
                    Some(Ok(b)) => {
                        let out = t.feed(&b);
                        if !out.is_empty() {
                            return Some((Ok(Bytes::from(out)), (up, t, keep, false)));
                        }
                    }
                    Some(Err(e)) => return Some((Err(e), (up, t, keep, true))),
                    None => {
                        let out = t.finish();
                        if let (Some(k), Some(v)) = (keep.take(), t.outcome()) {
                            k(v).await;
                        }
                        return (!out.is_empty())
                            .then(|| (Ok(Bytes::from(out)), (up, t, keep, true)));
                    }
                }
            }
        });
    let frames = events.map(|r| r.map(hyper::body::Frame::data));
    BodyExt::boxed(http_body_util::StreamBody::new(Shared::new(frames)))
}

/// A stream that is `Send` made `Sync` (a body must be): it is only ever
/// polled through `&mut`, so the mutex is never locked.
struct Shared<S>(Mutex<Pin<Box<S>>>);

impl<S> Shared<S> {
    fn new(s: S) -> Shared<S> {
        Shared(Mutex::new(Box::pin(s)))
    }
}

impl<S: Stream> Stream for Shared<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let inner = self.get_mut().0.get_mut();
        let inner = inner.unwrap_or_else(std::sync::PoisonError::into_inner);
        inner.as_mut().poll_next(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Upper-cases each chunk; ends with "END", its outcome "done".
    struct Upper;

    impl Rechunk for Upper {
        fn feed(&mut self, chunk: &[u8]) -> String {
            String::from_utf8_lossy(chunk).to_uppercase()
        }
        fn finish(&mut self) -> String {
            "END".into()
        }
        fn outcome(&mut self) -> Option<Value> {
            Some("done".into())
        }
    }

    fn body(chunks: &[&'static str]) -> Body {
        let frames = chunks
            .iter()
            .map(|c| {
                Ok::<_, gateway_base::body::BoxError>(hyper::body::Frame::data(Bytes::from(*c)))
            })
            .collect::<Vec<_>>();
        BodyExt::boxed(http_body_util::StreamBody::new(futures_util::stream::iter(
            frames,
        )))
    }

    #[tokio::test]
    async fn the_outcome_is_kept_before_the_last_bytes_leave() {
        let kept = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = kept.clone();
        let b = restream_kept(body(&["a", "b"]), Upper, move |v| async move {
            log.lock().unwrap().push(format!("kept {v}"));
        });
        let mut frames = b.into_data_stream();
        let mut seen = Vec::new();
        while let Some(f) = frames.next().await {
            let f = String::from_utf8(f.unwrap().to_vec()).unwrap();
            if f == "END" {
                seen.push(format!("{:?}", kept.lock().unwrap()));
            }
            seen.push(f);
        }
        assert_eq!(seen, ["A", "B", "[\"kept \\\"done\\\"\"]", "END"]);
        let plain = restream(body(&["x"]), Upper)
            .collect()
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(&plain[..], b"XEND");
    }
}
