//! The OpenAI-style video job record ([`Video`]) kept in the
//! [store](crate::resources::store): its clock, status and rendering. Pure
//! data, so the store does not depend on the `/v1` handlers.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

/// A video generation job.
#[derive(Clone, Debug)]
pub struct Video {
    /// Clock start.
    pub(super) started: Instant,
    /// Time to completion.
    pub(super) duration: Duration,
    /// Terminal status set by cancel or the control plane.
    pub(super) forced: Option<&'static str>,
    /// Creation order.
    pub(super) seq: u64,
    /// Static fields of the OpenAI video object.
    pub(super) item: Map<String, Value>,
}

impl Video {
    /// Current status: forced, else from the job clock.
    pub(super) fn status(&self) -> &'static str {
        if let Some(s) = self.forced {
            return s;
        }
        let e = self.started.elapsed();
        if e >= self.duration {
            "completed"
        } else if e >= self.duration / 3 {
            "in_progress"
        } else {
            "queued"
        }
    }

    /// The OpenAI video object with its current status and progress.
    pub(super) fn render(&self) -> Value {
        let mut item = self.item.clone();
        let status = self.status();
        let progress = match status {
            "completed" => 100,
            "queued" => 0,
            _ => (self.started.elapsed().as_secs_f64() / self.duration.as_secs_f64().max(1e-9)
                * 100.0)
                .min(99.0) as u64,
        };
        item.insert("status".into(), json!(status));
        item.insert("progress".into(), json!(progress));
        if status == "completed" {
            item.insert("completed_at".into(), json!(unix_now()));
        }
        Value::Object(item)
    }
}

/// Seconds since the Unix epoch.
pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The bytes served as a finished video: an MP4 `ftyp` box and an `mdat`
/// box of 1 KiB (recognisable as MP4 by its first bytes; not playable).
pub fn mp4_bytes() -> Vec<u8> {
    let mut out = Vec::with_capacity(1056);
    out.extend_from_slice(&[0, 0, 0, 0x18]);
    out.extend_from_slice(b"ftypmp42");
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(b"mp42isom");
    out.extend_from_slice(&(8u32 + 1024).to_be_bytes());
    out.extend_from_slice(b"mdat");
    out.extend(std::iter::repeat_n(0u8, 1024));
    out
}
