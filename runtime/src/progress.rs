//! Job progress: what one observation of an upstream job changes.
//!
//! A job is observed by a caller's GET ([`crate::modes::jobs`]), by the
//! provider's webhook ([`crate::modes::webhook`]) and (later) by a background
//! follower. All of them go through [`observe`], so that a job is billed
//! once, its callback is delivered once and its record is written only when
//! it changed, however many observers see it finish:
//!
//! 1. **status** — the upstream item's status, normalised ([`item_status`]);
//! 2. **meter** — a completed job not yet billed is billed its quantity
//!    (audio/video seconds or images, [`job_quantity`]) under the once-key
//!    `job:<kind>:<job_id>` ([`once_key`]), on the submit row's route and
//!    capability, charged to the job's owner;
//! 3. **callback** — a finished job with a `callback_uri` gets one deferred
//!    delivery ([`crate::callbacks`] claims it once in the database);
//! 4. **record** — the job's new state, when it changed; with it, when the
//!    job was submitted with a budgeted key and has now finished, the
//!    release of the credit hold its submit took
//!    ([`gateway_store::job_hold_id`]): committed with the job's charge, so
//!    the key's spend moves from held to charged in one step (a failed job
//!    is charged nothing). A release is idempotent: a second observer's
//!    finds nothing.

use rust_decimal::Decimal;
use serde_json::Value;

use crate::ctx::{Ctx, Deferred, Metered, Outcome};
use crate::shape;
use gateway_base::billing::{quantity_from_upstream, UpstreamQuantity};
use gateway_base::spec::{Billing, EndpointSpec, JobKind};
use gateway_store::{JobRow, JobUpdate, Record};

/// Job status values as the gateway records them.
pub mod status {
    pub const PENDING: &str = "pending";
    pub const PROCESSING: &str = "processing";
    pub const COMPLETED: &str = "completed";
    pub const FAILED: &str = "failed";
}

/// The status of an upstream job item, normalised. An item without a status
/// field is complete once its result (`mirror` field) is present (the edit
/// API answers that way).
pub fn item_status(item: &Value, mirror: Option<&str>) -> &'static str {
    let raw = item
        .get("status")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    match raw.as_deref() {
        Some("completed" | "complete" | "succeeded" | "success" | "done" | "finished") => {
            status::COMPLETED
        }
        Some("failed" | "error" | "errored" | "cancelled" | "canceled") => status::FAILED,
        Some("processing" | "running" | "in_progress" | "started") => status::PROCESSING,
        Some(_) => status::PENDING,
        None => {
            let wrapped = wrap(item);
            match mirror.and_then(|m| shape::dotted(&wrapped, m)) {
                Some(Value::String(s)) if !s.is_empty() => status::COMPLETED,
                _ => status::PENDING,
            }
        }
    }
}

/// `{"item": item}`, so that dotted `item.x` paths work on a bare item.
fn wrap(item: &Value) -> Value {
    serde_json::json!({ "item": item })
}

/// The job item of an upstream answer: `item` when present, else the body.
pub fn item_of(answer: &Value) -> &Value {
    answer
        .get("item")
        .filter(|v| v.is_object())
        .unwrap_or(answer)
}

/// What a completed job bills: unit and quantity, from the submit row's
/// billing unit and what the upstream reports (`media_type`, seconds, images).
pub fn job_quantity(
    billing: Billing,
    item: &Value,
    media_type: Option<&str>,
) -> (&'static str, Decimal) {
    // The first field present decides; a rejected figure bills 0 (never a
    // credit, see `billing::quantity_from_upstream`).
    let first = |keys: &[&str], absent: Decimal| {
        keys.iter()
            .map(|k| quantity_from_upstream(k, item.get(*k)))
            .find(|q| *q != UpstreamQuantity::Absent)
            .map(|q| q.valid().unwrap_or(Decimal::ZERO))
            .unwrap_or(absent)
    };
    let seconds = first(
        &[
            "duration_seconds",
            "duration",
            "audio_duration",
            "media_duration",
        ],
        Decimal::ZERO,
    );
    let images = first(&["image_count", "images"], Decimal::ONE);
    let media = item
        .get("media_type")
        .and_then(Value::as_str)
        .or(media_type)
        .unwrap_or("audio");
    match billing {
        Billing::MediaSeconds => match media {
            "video" => ("video_seconds", seconds),
            "image" => ("images", images),
            _ => ("audio_seconds", seconds),
        },
        Billing::VideoSeconds => ("video_seconds", seconds),
        Billing::Images => ("images", images),
        Billing::Free => ("free", Decimal::ZERO),
        other => (other.as_str(), seconds),
    }
}

/// The once-key of a job's charge.
pub fn once_key(kind: &str, job_id: &str) -> String {
    format!("job:{kind}:{job_id}")
}

/// The job's new state; when it is complete and not yet billed, the
/// metering of its charge (billed once by its once-key).
fn complete(
    job: &JobRow,
    submit: &'static EndpointSpec,
    item: &Value,
    st: &'static str,
) -> (JobUpdate, Option<Metered>) {
    let media_type = item
        .get("media_type")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut update = JobUpdate {
        kind: job.kind.clone(),
        job_id: job.job_id.clone(),
        status: st.to_owned(),
        media_type: media_type.clone(),
        result: (st == status::COMPLETED || st == status::FAILED).then(|| item.to_string()),
        billed: false,
        updated_at: gateway_store::now_rfc3339(),
    };
    let mut metered = None;
    if st == status::COMPLETED && !job.billed && submit.billing != Billing::Free {
        let (unit, quantity) = job_quantity(
            submit.billing,
            item,
            media_type.as_deref().or(job.media_type.as_deref()),
        );
        update.billed = true;
        metered = Some(Metered {
            product: job.kind.clone(),
            unit,
            quantity,
            once_key: Some(once_key(&job.kind, &job.job_id)),
            user_id: Some(job.user_id),
            route_id: Some(submit.id),
            capability: Some(submit.capability),
            key_id: job.key_id,
        });
    }
    (update, metered)
}

/// What one observation of a job changes (see the module docs).
pub struct Progress {
    /// The job's normalised status after this observation.
    pub status: &'static str,
    /// The job's charge, when it completed now and was not billed before.
    pub metered: Option<Metered>,
    /// The job's new state, when it changed, and the release of its hold
    /// when it finished now.
    pub records: Vec<Record>,
    /// The callback to deliver, when the job is finished and has a `callback_uri`.
    pub callback: Option<Deferred>,
}

impl Progress {
    pub fn completed(&self) -> bool {
        self.status == status::COMPLETED
    }

    pub fn finished(&self) -> bool {
        self.status == status::COMPLETED || self.status == status::FAILED
    }

    /// Hands the progress to a request: its charge is metered on `ctx`, its
    /// record and callback go with the request's records.
    pub fn apply(self, ctx: &mut Ctx, outcome: &mut Outcome) {
        if let Some(m) = self.metered {
            ctx.meter(m);
        }
        outcome.records.extend(self.records);
        outcome.deferred.extend(self.callback);
    }
}

/// Observes `job` (of `kind`) as the upstream's `item` shows it.
pub fn observe(kind: &JobKind, job: &JobRow, item: &Value) -> Progress {
    let st = item_status(item, kind.mirror);
    let (update, metered) = complete(job, kind.submit, item, st);
    let finished = st == status::COMPLETED || st == status::FAILED;
    let callback = match (&job.callback_uri, finished) {
        (Some(uri), true) => Some(Deferred::Callback {
            kind: job.kind.clone(),
            job_id: job.job_id.clone(),
            user_id: job.user_id,
            uri: uri.clone(),
            body: answer_for(job, item, st),
        }),
        _ => None,
    };
    // A finished job seen again changes nothing: its record is written only on a change.
    let changed =
        update.status != job.status || update.billed || (finished && job.result.is_none());
    let mut records = Vec::new();
    if changed {
        records.push(Record::JobUpdate(update));
        // Only a budgeted key's submit held (`modes::jobs`).
        if finished && job.key_id.is_some() {
            records.push(crate::money::hold_release(gateway_store::job_hold_id(
                &job.kind,
                &job.job_id,
            )));
        }
    }
    Progress {
        status: st,
        metered,
        records,
        callback,
    }
}

/// The JSON of a job as `GET /<kind>/{job_id}` shows it (without mirroring):
/// what callbacks deliver.
pub fn answer_for(job: &JobRow, item: &Value, status: &str) -> Value {
    serde_json::json!({
        "success": true,
        "job_id": job.job_id,
        "status": status,
        "item": item,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::str::FromStr;

    #[test]
    fn statuses() {
        assert_eq!(
            item_status(&json!({"status": "completed"}), None),
            status::COMPLETED
        );
        assert_eq!(
            item_status(&json!({"status": "pending"}), None),
            status::PENDING
        );
        assert_eq!(
            item_status(&json!({"status": "failed"}), None),
            status::FAILED
        );
        assert_eq!(
            item_status(&json!({"uuid": "e"}), Some("item.result_audio_url")),
            status::PENDING
        );
        assert_eq!(
            item_status(
                &json!({"result_audio_url": "http://x"}),
                Some("item.result_audio_url")
            ),
            status::COMPLETED
        );
    }

    #[test]
    fn quantities_follow_the_media_type() {
        let d = |s: &str| Decimal::from_str(s).unwrap();
        let item = json!({"duration_seconds": 12.5, "media_type": "video"});
        assert_eq!(
            job_quantity(Billing::MediaSeconds, &item, None),
            ("video_seconds", d("12.5"))
        );
        let item = json!({"media_type": "image", "image_count": 3});
        assert_eq!(
            job_quantity(Billing::MediaSeconds, &item, None),
            ("images", d("3"))
        );
        let item = json!({"duration_seconds": 4.25});
        assert_eq!(
            job_quantity(Billing::MediaSeconds, &item, None),
            ("audio_seconds", d("4.25"))
        );
        assert_eq!(
            job_quantity(Billing::AudioSeconds, &item, None),
            ("audio_seconds", d("4.25"))
        );
    }

    #[test]
    fn negative_or_non_finite_figures_bill_nothing() {
        for item in [
            json!({"duration_seconds": -1000}),
            json!({"duration_seconds": "NaN", "duration": 5}),
            json!({"duration": "-Infinity"}),
        ] {
            assert_eq!(
                job_quantity(Billing::AudioSeconds, &item, None),
                ("audio_seconds", Decimal::ZERO),
                "{item}"
            );
        }
        let item = json!({"media_type": "image", "image_count": -3});
        assert_eq!(
            job_quantity(Billing::MediaSeconds, &item, None),
            ("images", Decimal::ZERO)
        );
    }
}
