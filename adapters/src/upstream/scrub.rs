//! Scrubbing the upstream key out of successful answers (error answers are
//! scrubbed by [`super::errors`]). An upstream that echoes the key in a 200
//! answer must not hand it to a caller.
//!
//! The key's searcher is built once per key ([`Key`]: a precomputed
//! `memmem::Finder`), not once per chunk. Streamed answers stay streams:
//! [`Scrubbed`] is a hand-written body and stream over the upstream's body
//! (no boxed stream of its own, no `unfold` state machine) that feeds each
//! chunk to a [`Scrubber`]; the scrubber holds back at most `key.len() - 1`
//! bytes — only when a chunk ends with what could be the start of the key —
//! so a key split across chunks is still caught. The common chunk (no key,
//! no possible start of one at its end) passes through without a copy.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use memchr::memmem::Finder;

/// What the key is replaced with.
pub const REDACTED: &[u8] = b"[redacted]";

/// An upstream key with its searcher, built once and shared by every answer
/// made with that key.
pub struct Key {
    text: Box<str>,
    finder: Finder<'static>,
}

impl Key {
    pub fn new(key: &str) -> Arc<Key> {
        Arc::new(Key {
            text: key.into(),
            finder: Finder::new(key.as_bytes()).into_owned(),
        })
    }

    /// The key itself.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    fn find(&self, hay: &[u8]) -> Option<usize> {
        if self.text.is_empty() {
            return None;
        }
        self.finder.find(hay)
    }

    /// Removes the key from a text (error messages, log lines).
    pub fn scrub_str(&self, s: &str) -> String {
        if self.find(s.as_bytes()).is_none() {
            return s.to_owned();
        }
        s.replace(&*self.text, "[redacted]")
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(<redacted>)")
    }
}

/// Scrubs one streamed answer.
pub struct Scrubber {
    key: Arc<Key>,
    /// Bytes held back: a possible start of the key at the end of the last chunk.
    tail: BytesMut,
}

impl Scrubber {
    pub fn new(key: Arc<Key>) -> Scrubber {
        Scrubber {
            key,
            tail: BytesMut::new(),
        }
    }

    /// Takes the next chunk; returns what may be sent now (possibly empty).
    pub fn feed(&mut self, chunk: Bytes) -> Bytes {
        let key = self.key.bytes();
        if key.is_empty() {
            return chunk;
        }
        if self.tail.is_empty() && self.key.find(&chunk).is_none() {
            let keep = partial_suffix(&chunk, key);
            if keep == 0 {
                return chunk;
            }
            let mut chunk = chunk;
            let held = chunk.split_off(chunk.len() - keep);
            self.tail.extend_from_slice(&held);
            return chunk;
        }
        let mut joined = std::mem::take(&mut self.tail);
        joined.extend_from_slice(&chunk);
        let mut out = replace_all(&joined, &self.key);
        let keep = partial_suffix(&out, key);
        self.tail = out.split_off(out.len() - keep);
        out.freeze()
    }

    /// What is left at the end of the answer.
    pub fn finish(&mut self) -> Bytes {
        std::mem::take(&mut self.tail).freeze()
    }
}

/// Scrubs a whole answer read into memory.
pub fn scrub_all(body: Bytes, key: &Key) -> Bytes {
    if key.find(&body).is_none() {
        return body;
    }
    replace_all(&body, key).freeze()
}

fn replace_all(hay: &[u8], key: &Key) -> BytesMut {
    let mut out = BytesMut::with_capacity(hay.len());
    let mut at = 0;
    for i in key.finder.find_iter(hay) {
        out.extend_from_slice(&hay[at..i]);
        out.extend_from_slice(REDACTED);
        at = i + key.bytes().len();
    }
    out.extend_from_slice(&hay[at..]);
    out
}

/// The length of the longest proper prefix of `key` that `buf` ends with.
fn partial_suffix(buf: &[u8], key: &[u8]) -> usize {
    let longest = (key.len() - 1).min(buf.len());
    let start = buf.len() - longest;
    (start..buf.len())
        .find(|&p| buf[p] == key[0] && key.starts_with(&buf[p..]))
        .map_or(0, |p| buf.len() - p)
}

/// A body (`B`) with the key scrubbed out of its data as it streams; also a
/// [`futures_util::Stream`] of its data chunks. Without a key, chunks pass
/// as they are.
pub struct Scrubbed<B> {
    inner: B,
    scrubber: Option<Scrubber>,
    /// The inner body ended; only the scrubber's tail is left to send.
    ended: bool,
}

impl<B> Scrubbed<B> {
    pub fn new(inner: B, key: Option<Arc<Key>>) -> Scrubbed<B> {
        Scrubbed {
            inner,
            scrubber: key.map(Scrubber::new),
            ended: false,
        }
    }
}

impl<B> Body for Scrubbed<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        loop {
            if this.ended {
                let rest = this.scrubber.as_mut().map(Scrubber::finish);
                this.scrubber = None;
                return Poll::Ready(rest.filter(|r| !r.is_empty()).map(|r| Ok(Frame::data(r))));
            }
            let frame = match std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                None => {
                    this.ended = true;
                    continue;
                }
                Some(Err(e)) => {
                    this.ended = true;
                    this.scrubber = None;
                    return Poll::Ready(Some(Err(e)));
                }
                Some(Ok(frame)) => frame,
            };
            let Some(scrubber) = this.scrubber.as_mut() else {
                return Poll::Ready(Some(Ok(frame)));
            };
            match frame.into_data() {
                Ok(chunk) => {
                    let out = scrubber.feed(chunk);
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
                Err(other) => return Poll::Ready(Some(Ok(other))),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.scrubber {
            None => self.ended || self.inner.is_end_stream(),
            Some(_) => false,
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        if self.scrubber.is_none() && !self.ended {
            // Nothing is replaced without a key: the inner size holds.
            return self.inner.size_hint();
        }
        http_body::SizeHint::default()
    }
}

impl<B> futures_util::Stream for Scrubbed<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Item = Result<Bytes, B::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            return match std::task::ready!(self.as_mut().poll_frame(cx)) {
                None => Poll::Ready(None),
                Some(Err(e)) => Poll::Ready(Some(Err(e))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(chunk) => Poll::Ready(Some(Ok(chunk))),
                    Err(_) => continue, // trailers: not part of the bytes
                },
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    fn run(chunks: &[&[u8]], key: &str) -> Vec<u8> {
        let mut s = Scrubber::new(Key::new(key));
        let mut out = Vec::new();
        for c in chunks {
            out.extend_from_slice(&s.feed(Bytes::copy_from_slice(c)));
        }
        out.extend_from_slice(&s.finish());
        out
    }

    #[test]
    fn the_key_is_caught_at_every_split_point() {
        let key = "sk-secret-key-123";
        let body = format!(r#"{{"a":"{key}","b":"x{key}{key}y","c":"sk-secret-no"}}"#);
        let want = body.replace(key, "[redacted]");
        for i in 0..=body.len() {
            for j in i..=body.len() {
                let b = body.as_bytes();
                let got = run(&[&b[..i], &b[i..j], &b[j..]], key);
                assert_eq!(String::from_utf8(got).unwrap(), want, "split at {i}, {j}");
            }
        }
    }

    #[test]
    fn clean_chunks_pass_untouched_and_partial_starts_are_released() {
        let key = "sk-secret";
        assert_eq!(run(&[b"hello", b" world"], key), b"hello world");
        // A chunk ending in a possible start of the key that turns out not to be one.
        assert_eq!(run(&[b"value sk-se", b"cond"], key), b"value sk-second");
        assert_eq!(run(&[b"ends with sk-"], key), b"ends with sk-");
        assert_eq!(
            scrub_all(Bytes::from_static(b"x sk-secret y"), &Key::new(key)),
            "x [redacted] y"
        );
        assert_eq!(Key::new(key).scrub_str("a sk-secret b"), "a [redacted] b");
    }

    #[tokio::test]
    async fn the_body_scrubs_across_frames_and_sends_the_held_tail_last() {
        let chunks: Vec<Result<Frame<Bytes>, std::convert::Infallible>> =
            [&b"one sk-se"[..], b"cret two sk-", b"secre"]
                .iter()
                .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
                .collect();
        let inner = http_body_util::StreamBody::new(futures_util::stream::iter(chunks));
        let got: Vec<Bytes> = Scrubbed::new(inner, Some(Key::new("sk-secret")))
            .map(Result::unwrap)
            .collect()
            .await;
        assert_eq!(got.concat(), b"one [redacted] two sk-secre");
    }
}
