//! The gateway's Batch API as the `batch` scenario drives it, as the bench
//! user: a JSONL file uploaded, a batch made, its progress and its end
//! read, a batch cancelled.
//!
//! While a batch is timed, its progress comes from the gateway's
//! `/metrics` (`gateway_batch_lines_total`: lines ended, by state, less
//! their values when the batch was made — one batch runs at a time) and
//! its end from its result files appearing in `GET
//! /api/v1/files?purpose=batch_output` (`{batch id}_output.jsonl`,
//! `_error.jsonl`, published with the end), not from `GET
//! /api/v1/batches/{id}`: that read sums the charges of the batch's lines,
//! and at `dd0926e` (the `batch_cost` join cannot use the partial index
//! `usage_by_request`) costs the gateway a scan of the usage table per
//! line done — polled, it would be most of what the gateway does. The
//! batch object is read once, after the timing, and how long that took
//! reported. A gateway without the metric (no
//! `gateway_batch_lines_waiting` gauge) is read through the batch object.

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};

use crate::load::{self, Spec};
use crate::plan::Env;
use crate::upload::{self, FileContent};

/// How often a running batch is looked at.
pub const POLL: Duration = Duration::from_millis(100);
/// The batch endpoint of the lines.
const ENDPOINT: &str = "/v1/chat/completions";
/// The gauge the gateway's batch executor sets every round.
const WAITING_GAUGE: &str = "gateway_batch_lines_waiting";

/// The gateway's Batch API.
pub struct Client<'a> {
    pub env: &'a Env,
    /// Every line's body (the `chat` scenario's).
    pub body: Value,
    /// Longest time one call may take.
    pub timeout: Duration,
    /// Longest time a batch may take to end, and the reads and cancels
    /// whose cost grows with it.
    pub limit: Duration,
}

/// A batch made.
pub struct Made {
    pub id: String,
    /// Its lines.
    pub lines: u64,
    /// When its create was sent.
    pub at: Instant,
    /// The gateway's lines ended (done, failed) before it; `None`: no
    /// metric, its progress is read from the batch object.
    base: Option<(u64, u64)>,
}

/// How far a batch got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Lines answered 2xx.
    pub done: u64,
    /// Lines ended otherwise (refused, cancelled, not run).
    pub failed: u64,
    /// Its result files are published: nothing more runs.
    pub ended: bool,
}

/// A line of the gateway's `/metrics` (`name{labels} value`) as a count.
fn metric(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .filter(|rest| rest.starts_with(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// Lines ended on the gateway, (done, failed); `None` without the metric.
fn lines_ended(text: &str) -> Option<(u64, u64)> {
    text.contains(WAITING_GAUGE).then(|| {
        let key = |s: &str| format!("gateway_batch_lines_total{{state=\"{s}\"}}");
        (metric(text, &key("done")), metric(text, &key("failed")))
    })
}

impl Client<'_> {
    /// The JSONL of `n` lines.
    pub fn jsonl(&self, n: usize) -> Bytes {
        let mut out = Vec::with_capacity(n * 200);
        for i in 0..n {
            let line = json!({"custom_id": format!("req-{i}"), "method": "POST",
                "url": ENDPOINT, "body": self.body});
            out.extend_from_slice(line.to_string().as_bytes());
            out.push(b'\n');
        }
        out.into()
    }

    /// A GET as the bench user: its JSON answer.
    async fn get(&self, path: String, timeout: Duration) -> Result<Value, String> {
        let spec = Spec::get(path, self.env.gateway_auth());
        load::call_json(self.env.gateway.0, &spec, timeout).await
    }

    /// Uploads `n` lines as a file of purpose `batch`: its id.
    pub async fn upload(&self, n: usize) -> Result<String, String> {
        let gw = self.env.gateway.0;
        let req = upload::upload_request(
            gw,
            "/api/v1/files",
            &self.env.gateway_auth(),
            "bench.jsonl",
            Some("batch"),
            &FileContent::Bytes(self.jsonl(n)),
        );
        let (status, body, _) = upload::upload(gw, req, self.timeout).await?;
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            return Err(format!("POST /api/v1/files -> {status}: {text}"));
        }
        let v: Value = serde_json::from_slice(&body).map_err(|e| format!("{e}: {text}"))?;
        v["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("the file has no id: {text}"))
    }

    /// The gateway's lines ended so far (`None`: no metric).
    async fn ended_so_far(&self) -> Result<Option<(u64, u64)>, String> {
        let spec = Spec::get("/metrics", Vec::new());
        let (status, body) = load::call(self.env.gateway.0, &spec, self.timeout).await?;
        Ok(status
            .is_success()
            .then(|| lines_ended(&String::from_utf8_lossy(&body)))
            .flatten())
    }

    /// Makes a batch of `file` (`lines` lines; one failed at once is an
    /// error).
    pub async fn create(&self, file: &str, lines: usize) -> Result<Made, String> {
        let base = self.ended_so_far().await?;
        let spec = Spec::post_json(
            "/api/v1/batches",
            self.env.gateway_auth(),
            &json!({"input_file_id": file, "endpoint": ENDPOINT, "completion_window": "24h"}),
        );
        let at = Instant::now();
        let v = load::call_json(self.env.gateway.0, &spec, self.timeout).await?;
        match (v["id"].as_str(), v["status"].as_str()) {
            (Some(id), Some(s)) if s != "failed" => Ok(Made {
                id: id.to_owned(),
                lines: lines as u64,
                at,
                base,
            }),
            _ => Err(format!("POST /api/v1/batches: {v}")),
        }
    }

    /// The result files published for batch `id`: (file id, name).
    async fn result_files(&self, id: &str) -> Result<Vec<(String, String)>, String> {
        let v = self
            .get(
                "/api/v1/files?purpose=batch_output&limit=100".into(),
                self.timeout,
            )
            .await?;
        let prefix = format!("{id}_");
        let files = v["data"].as_array().map(Vec::as_slice).unwrap_or_default();
        Ok(files
            .iter()
            .filter_map(|f| Some((f["id"].as_str()?, f["filename"].as_str()?)))
            .filter(|(_, name)| name.starts_with(&prefix))
            .map(|(i, n)| (i.to_owned(), n.to_owned()))
            .collect())
    }

    /// How far batch `b` got.
    pub async fn progress(&self, b: &Made) -> Result<Progress, String> {
        let Some((done0, failed0)) = b.base else {
            let (v, _) = self.read(&b.id).await?;
            let count = |k: &str| v["request_counts"][k].as_u64().unwrap_or(0);
            let status = v["status"].as_str().unwrap_or_default();
            let ended = matches!(status, "completed" | "failed" | "expired" | "cancelled");
            return Ok(Progress {
                done: count("completed"),
                failed: count("failed"),
                ended,
            });
        };
        // The files first: once they are there, every line's count is too.
        let ended = !self.result_files(&b.id).await?.is_empty();
        let (done, failed) = self.ended_so_far().await?.unwrap_or_default();
        Ok(Progress {
            done: done.saturating_sub(done0),
            failed: failed.saturating_sub(failed0),
            ended,
        })
    }

    /// Looks at batch `b` every [`POLL`] until `until` says so; past the
    /// limit, why not and how far it got.
    pub async fn wait(
        &self,
        b: &Made,
        until: impl Fn(&Progress) -> bool,
    ) -> Result<Progress, (String, Progress)> {
        let started = Instant::now();
        loop {
            let p = self
                .progress(b)
                .await
                .map_err(|e| (e, Progress::default()))?;
            if until(&p) {
                return Ok(p);
            }
            if started.elapsed() > self.limit {
                let why = format!(
                    "batch {} not there after {:.0} s: {} of {} lines done, {} failed",
                    b.id,
                    self.limit.as_secs_f64(),
                    p.done,
                    b.lines,
                    p.failed
                );
                return Err((why, p));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// `GET /api/v1/batches/{id}`, and how long it took.
    pub async fn read(&self, id: &str) -> Result<(Value, Duration), String> {
        let started = Instant::now();
        let v = self
            .get(format!("/api/v1/batches/{id}"), self.limit)
            .await?;
        Ok((v, started.elapsed()))
    }

    /// Cancels batch `b` and waits for its end. The cancel's answer is the
    /// batch object, as slow to make as a read of it: a refusal or no
    /// answer is an error only when the batch does not end.
    pub async fn stop(&self, b: &Made) -> Result<(), String> {
        let spec = Spec::post_json(
            format!("/api/v1/batches/{}/cancel", b.id),
            self.env.gateway_auth(),
            &json!({}),
        );
        let trouble = match load::call(self.env.gateway.0, &spec, self.limit).await {
            Ok((status, _)) if status.is_success() => None,
            Ok((status, body)) => Some(format!(
                "cancel of {} -> {status}: {}",
                b.id,
                String::from_utf8_lossy(&body)
            )),
            Err(e) => Some(e),
        };
        match self.wait(b, |p| p.ended).await {
            Ok(_) => Ok(()),
            Err((why, _)) => Err(trouble.map_or(why.clone(), |t| format!("{t}; {why}"))),
        }
    }

    /// The first lines of batch `id`'s error file, when `failed` lines
    /// failed.
    pub async fn error_samples(&self, id: &str, failed: u64) -> Vec<String> {
        if failed == 0 {
            return Vec::new();
        }
        let files = self.result_files(id).await.unwrap_or_default();
        let Some((file, _)) = files.iter().find(|(_, n)| n.ends_with("_error.jsonl")) else {
            return vec![format!("{failed} lines failed (no error file found)")];
        };
        let spec = Spec::get(
            format!("/api/v1/files/{file}/content"),
            self.env.gateway_auth(),
        );
        match load::call(self.env.gateway.0, &spec, self.timeout).await {
            Ok((_, body)) => String::from_utf8_lossy(&body)
                .lines()
                .take(3)
                .map(|l| l.chars().take(300).collect())
                .collect(),
            Err(e) => vec![format!("{failed} lines failed; error file: {e}")],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_lines_ended_from_the_metrics() {
        let text = "# TYPE gateway_batch_lines_total counter\n\
            gateway_batch_lines_total{state=\"done\"} 1200\n\
            gateway_batch_lines_total{state=\"failed\"} 3\n\
            gateway_batch_lines_waiting 0\n";
        assert_eq!(lines_ended(text), Some((1200, 3)));
        assert_eq!(
            lines_ended("gateway_batch_lines_waiting 17\n"),
            Some((0, 0))
        );
        assert_eq!(lines_ended("gateway_requests_total 5\n"), None);
    }

    #[test]
    fn every_line_is_the_chat_body() {
        let env = Env {
            sim: ("127.0.0.1:1".parse().unwrap(), 0),
            forwarder: ("127.0.0.1:2".parse().unwrap(), 0),
            gateway: ("127.0.0.1:3".parse().unwrap(), 0),
            key: "gk_test".into(),
        };
        let body = json!({"model": "sim/sim-gpt", "max_tokens": 16});
        let c = Client {
            env: &env,
            body: body.clone(),
            timeout: Duration::from_secs(1),
            limit: Duration::from_secs(1),
        };
        let text = c.jsonl(3);
        let lines: Vec<Value> = String::from_utf8_lossy(&text)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[2]["custom_id"], "req-2");
        assert_eq!(lines[0]["url"], ENDPOINT);
        assert!(lines.iter().all(|l| l["body"] == body));
    }
}
