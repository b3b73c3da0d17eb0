//! Scrubbing the upstream key out of successful answers (error answers are
//! scrubbed by [`super::errors`]). An upstream that echoes the key in a 200
//! answer must not hand it to a caller.
//!
//! Streamed answers stay streams: [`Scrubber`] is fed chunk by chunk and
//! holds back at most `key.len() - 1` bytes — only when a chunk ends with
//! what could be the start of the key — so a key split across chunks is
//! still caught. The common chunk (no key, no possible start of one at its
//! end) passes through without a copy.

use bytes::{Bytes, BytesMut};
use memchr::memmem;

/// What the key is replaced with.
pub const REDACTED: &[u8] = b"[redacted]";

/// Scrubs one streamed answer.
pub struct Scrubber {
    key: std::sync::Arc<str>,
    /// Bytes held back: a possible start of the key at the end of the last chunk.
    tail: BytesMut,
}

impl Scrubber {
    pub fn new(key: std::sync::Arc<str>) -> Scrubber {
        Scrubber {
            key,
            tail: BytesMut::new(),
        }
    }

    /// Takes the next chunk; returns what may be sent now (possibly empty).
    pub fn feed(&mut self, chunk: Bytes) -> Bytes {
        let key = self.key.as_bytes();
        if key.is_empty() {
            return chunk;
        }
        if self.tail.is_empty() && memmem::find(&chunk, key).is_none() {
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
        let mut out = replace_all(&joined, key);
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
pub fn scrub_all(body: Bytes, key: &str) -> Bytes {
    let key = key.as_bytes();
    if key.is_empty() || memmem::find(&body, key).is_none() {
        return body;
    }
    replace_all(&body, key).freeze()
}

fn replace_all(hay: &[u8], key: &[u8]) -> BytesMut {
    let mut out = BytesMut::with_capacity(hay.len());
    let mut at = 0;
    for i in memmem::find_iter(hay, key) {
        out.extend_from_slice(&hay[at..i]);
        out.extend_from_slice(REDACTED);
        at = i + key.len();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&[u8]], key: &str) -> Vec<u8> {
        let mut s = Scrubber::new(key.into());
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
            scrub_all(Bytes::from_static(b"x sk-secret y"), key),
            "x [redacted] y"
        );
    }
}
