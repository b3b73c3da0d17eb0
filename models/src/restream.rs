//! A chat completion stream (OpenAI's chunks) turned into the events of
//! another API, chunk by chunk as it arrives (never buffered whole): the
//! shared loop of the doors of other APIs ([`crate::messages_api::events`],
//! [`crate::gemini_api::events`]), each of which says only what a chunk
//! becomes ([`Rechunk`]).

use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::BodyExt;

use gateway_base::body::Body;

/// What a door's stream translation does with OpenAI's bytes.
pub trait Rechunk: Send + Sync + 'static {
    /// The door's bytes for one upstream chunk (possibly none yet).
    fn feed(&mut self, chunk: &[u8]) -> String;
    /// The door's last bytes once the upstream ended.
    fn finish(&mut self) -> String;
}

/// `body` (OpenAI's chunks) translated by `t`, as a body: each chunk's
/// bytes as they come, the translation's last ones at the end; an upstream
/// error ends it.
pub fn restream(body: Body, t: impl Rechunk) -> Body {
    let state = (body.into_data_stream(), t, false);
    let events = futures_util::stream::unfold(state, |(mut up, mut t, done)| async move {
        if done {
            return None;
        }
        loop {
            match up.next().await {
                Some(Ok(b)) => {
                    let out = t.feed(&b);
                    if !out.is_empty() {
                        return Some((Ok(Bytes::from(out)), (up, t, false)));
                    }
                }
                Some(Err(e)) => return Some((Err(e), (up, t, true))),
                None => {
                    let out = t.finish();
                    return (!out.is_empty()).then(|| (Ok(Bytes::from(out)), (up, t, true)));
                }
            }
        }
    });
    let frames = events.map(|r| r.map(hyper::body::Frame::data));
    BodyExt::boxed(http_body_util::StreamBody::new(frames))
}
