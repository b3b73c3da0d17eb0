//! The job model: kinds, statuses, the status clock and the items jobs render
//! (transcripts, detection scores, result media URLs). Pure data: no shared
//! state, so the [store](crate::resources::store) can hold jobs without
//! depending on the runtime in [`crate::jobs`].

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

/// `duration_seconds` of URL-based jobs whose media could not be read.
pub const DEFAULT_MEDIA_SECONDS: f64 = 5.0;

/// Job kinds (the webhook's `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `POST /speech-to-text`.
    Stt,
    /// `POST /audio_enhancements`.
    Enhance,
    /// `POST /edit`.
    Edit,
    /// `POST /detect`.
    Detect,
    /// `POST /intelligence`.
    Intelligence,
    /// `POST /detect` with `audio_source_tracing: true`.
    Tracing,
    /// `POST /watermark/apply`.
    WatermarkApply,
    /// `POST /watermark/detect`.
    WatermarkDetect,
    /// `POST /voices/{uuid}/build`.
    Voice,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 9] = [
        Kind::Stt,
        Kind::Enhance,
        Kind::Edit,
        Kind::Detect,
        Kind::Intelligence,
        Kind::Tracing,
        Kind::WatermarkApply,
        Kind::WatermarkDetect,
        Kind::Voice,
    ];

    /// The name used in webhooks and billing.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Stt => "stt",
            Kind::Enhance => "enhance",
            Kind::Edit => "edit",
            Kind::Detect => "detect",
            Kind::Intelligence => "intelligence",
            Kind::Tracing => "tracing",
            Kind::WatermarkApply => "watermark_apply",
            Kind::WatermarkDetect => "watermark_detect",
            Kind::Voice => "voice",
        }
    }
}

/// Job status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// First third of the job duration.
    Pending,
    /// Until the job duration has passed.
    Processing,
    /// Done.
    Completed,
    /// Forced failure.
    Failed,
}

impl Status {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Processing => "processing",
            Status::Completed => "completed",
            Status::Failed => "failed",
        }
    }

    /// Completed or failed.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed)
    }
}

/// One job.
#[derive(Clone, Debug)]
pub struct Job {
    /// Kind.
    pub kind: Kind,
    /// Id (detect and its tracing job share one).
    pub uuid: String,
    /// Creation order.
    pub seq: u64,
    /// Clock start.
    pub started: Instant,
    /// Creation timestamp.
    pub created_at: DateTime<Utc>,
    /// Time to completion.
    pub duration: Duration,
    /// Status forced by the control plane, and when.
    pub forced: Option<(Status, DateTime<Utc>)>,
    /// Completion has been handled (webhook sent, usage booked).
    pub notified: bool,
    /// Request fields and measured values shown in the item.
    pub data: Map<String, Value>,
    /// The request's own callback URL.
    pub callback: Option<String>,
}

impl Job {
    /// A new job starting now.
    pub fn new(kind: Kind, uuid: String, duration: Duration, data: Map<String, Value>) -> Job {
        Job {
            kind,
            uuid,
            seq: 0,
            started: Instant::now(),
            created_at: Utc::now(),
            duration,
            forced: None,
            notified: false,
            data,
            callback: None,
        }
    }

    /// Current status.
    pub fn status(&self) -> Status {
        if let Some((s, _)) = self.forced {
            return s;
        }
        let elapsed = self.started.elapsed();
        if elapsed >= self.duration {
            Status::Completed
        } else if elapsed >= self.duration / 3 {
            Status::Processing
        } else {
            Status::Pending
        }
    }

    /// When the job finished (or creation time while running).
    pub fn updated_at(&self) -> DateTime<Utc> {
        match self.forced {
            Some((_, at)) => at,
            None if self.status().is_terminal() => {
                self.created_at + chrono::Duration::from_std(self.duration).unwrap_or_default()
            }
            None => self.created_at,
        }
    }

    pub(super) fn num(&self, key: &str) -> f64 {
        self.data.get(key).and_then(Value::as_f64).unwrap_or(0.0)
    }

    pub(super) fn text(&self, key: &str) -> &str {
        self.data.get(key).and_then(Value::as_str).unwrap_or("")
    }

    /// The item GET returns (voice builds are rendered by the store instead).
    pub fn item(&self, root: &str) -> Value {
        let status = self.status();
        let mut item = Map::new();
        item.insert("uuid".into(), json!(self.uuid));
        if self.kind != Kind::Edit {
            item.insert("status".into(), json!(status.as_str()));
        }
        for (k, v) in &self.data {
            if !k.starts_with('_') {
                item.insert(k.clone(), v.clone());
            }
        }
        item.insert("created_at".into(), json!(timestamp(self.created_at)));
        item.insert("updated_at".into(), json!(timestamp(self.updated_at())));
        if status == Status::Failed {
            item.insert("error_message".into(), json!("simulated failure"));
        }
        self.result(status, root, &mut item);
        Value::Object(item)
    }

    /// The fields of the job's result, by its kind: absent or null until it
    /// completes (a tracing job's label, an intelligence description).
    fn result(&self, status: Status, root: &str, item: &mut Map<String, Value>) {
        let done = status == Status::Completed;
        let media = |ext: &str| json!(format!("{root}/__sim/media/{}.{ext}", self.uuid));
        match self.kind {
            Kind::Stt => {
                if done {
                    let (text, words) = transcript(self.num("duration_seconds"));
                    item.insert("text".into(), json!(text));
                    item.insert("words".into(), words);
                } else {
                    item.insert("text".into(), Value::Null);
                    item.insert("words".into(), json!([]));
                }
            }
            Kind::Enhance => {
                if done {
                    item.insert("enhanced_audio_url".into(), media("wav"));
                }
            }
            Kind::Edit => {
                if done {
                    item.insert("result_audio_url".into(), media("wav"));
                }
            }
            Kind::WatermarkApply => {
                if done {
                    item.insert("watermarked_media".into(), media("wav"));
                }
            }
            Kind::Detect => self.detection(done, item),
            Kind::Intelligence => {
                item.insert(
                    "description".into(),
                    if done {
                        intelligence(self.text("media_type"))
                    } else {
                        Value::Null
                    },
                );
            }
            Kind::Tracing => {
                let fake = self.url().contains("fake");
                let label = done.then_some(if fake { "resemble_ai" } else { "real" });
                item.insert("label".into(), json!(label));
                if status != Status::Failed {
                    item.insert("error_message".into(), Value::Null);
                }
            }
            Kind::WatermarkDetect => self.watermark_detection(done, item),
            Kind::Voice => {}
        }
    }

    /// The job's `url`, lower-cased: its words (`fake`, `watermark`,
    /// `inconclusive`) steer the simulated verdicts.
    fn url(&self) -> String {
        self.text("url").to_ascii_lowercase()
    }

    /// A deterministic number in [0, 1) of the job and its URL, so that
    /// scores vary between jobs but not between reads.
    fn seed(&self) -> f64 {
        fnv(&format!("{}{}", self.uuid, self.url()))
    }

    /// A deepfake detection's metrics (and the intelligence and source
    /// tracing asked for with it): `fake` in the URL scores high.
    fn detection(&self, done: bool, item: &mut Map<String, Value>) {
        if !done {
            item.insert("metrics".into(), Value::Null);
            return;
        }
        let fake = self.url().contains("fake");
        let seed = self.seed();
        let score = if fake { 0.9 + seed * 0.09 } else { seed * 0.1 };
        let score = (score * 1000.0).round() / 1000.0;
        item.insert(
            "metrics".into(),
            json!({
                "label": if fake { "fake" } else { "real" },
                "score": score,
                "aggregated_score": score,
                "consistency": if fake { "high" } else { "low" },
            }),
        );
        if self.data.get("intelligence").is_some_and(truthy) {
            item.insert("intelligence".into(), intelligence(self.text("media_type")));
        }
        if self.data.get("audio_source_tracing").is_some_and(truthy) {
            item.insert(
                "audio_source_tracing".into(),
                json!({"label": if fake { "resemble_ai" } else { "real" }, "error_message": null}),
            );
        }
    }

    /// A watermark detection's metrics: present for the simulator's own
    /// media or a URL naming a watermark, inconclusive or absent otherwise.
    fn watermark_detection(&self, done: bool, item: &mut Map<String, Value>) {
        if !done {
            item.insert("metrics".into(), Value::Null);
            return;
        }
        let url = self.url();
        let seed = self.seed();
        let (overall, confidence) = if url.contains("inconclusive") {
            ("inconclusive", 0.5)
        } else if url.contains("/__sim/media/") || url.contains("watermark") {
            ("present", 0.95 + seed * 0.04)
        } else {
            ("absent", 0.02 + seed * 0.05)
        };
        let confidence = (confidence * 1000.0).round() / 1000.0;
        item.insert(
            "metrics".into(),
            json!({"overall_status": overall, "confidence": confidence}),
        );
    }
}

/// RFC 3339 UTC timestamp with milliseconds.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Current time as [`timestamp`].
pub fn now() -> String {
    timestamp(Utc::now())
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => matches!(s.as_str(), "true" | "1" | "yes"),
        Value::Number(n) => n.as_f64().unwrap_or(0.0) != 0.0,
        _ => false,
    }
}

/// A deterministic number in `[0, 1)` derived from `s`.
pub fn fnv(s: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn intelligence(media_type: &str) -> Value {
    json!({
        "media_type": media_type,
        "summary": "A single speaker talks calmly in a quiet room.",
        "speakers": 1,
        "language": "en",
        "emotion": "neutral",
        "transcription": "The quick brown fox jumps over the lazy dog.",
    })
}

/// A transcript spread over `duration` seconds: the text and its timed words.
fn transcript(duration: f64) -> (String, Value) {
    const WORDS: [&str; 9] = [
        "The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog.",
    ];
    let step = duration.max(0.001) / WORDS.len() as f64;
    let words: Vec<Value> = WORDS
        .iter()
        .enumerate()
        .map(|(i, w)| {
            json!({
                "text": w,
                "start_time": crate::audio::round_ms(i as f64 * step),
                "end_time": crate::audio::round_ms((i + 1) as f64 * step),
                "speaker_id": "speaker_0",
            })
        })
        .collect();
    (WORDS.join(" "), Value::Array(words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_clock() {
        let mut j = Job::new(Kind::Stt, "x".into(), Duration::from_secs(60), Map::new());
        let ago = |secs| {
            Instant::now()
                .checked_sub(Duration::from_secs(secs))
                .unwrap()
        };
        assert_eq!(j.status(), Status::Pending);
        j.started = ago(25);
        assert_eq!(j.status(), Status::Processing);
        j.started = ago(61);
        assert_eq!(j.status(), Status::Completed);
        j.forced = Some((Status::Failed, Utc::now()));
        assert_eq!(j.status(), Status::Failed);
    }

    #[test]
    fn edit_items_have_no_status() {
        let j = Job::new(Kind::Edit, "e".into(), Duration::ZERO, Map::new());
        let item = j.item("http://h");
        assert!(item.get("status").is_none());
        assert_eq!(item["result_audio_url"], "http://h/__sim/media/e.wav");
    }

    #[test]
    fn transcript_words_span_duration() {
        let (text, words) = transcript(4.5);
        assert!(text.starts_with("The quick"));
        let w = words.as_array().unwrap();
        assert_eq!(w.last().unwrap()["end_time"], 4.5);
    }
}
