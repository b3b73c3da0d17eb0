//! Prometheus metrics (`/metrics`), through the `metrics` facade and
//! `metrics-exporter-prometheus`'s recorder (installed once per process by
//! [`install`]; the gateway serves its rendering itself).
//!
//! Every label value is a `&'static str` (a row id, a capability, a status
//! from [`status_label`], an error kind), so recording a sample never
//! formats or copies a label string; the per-request metrics keep their
//! handles in a per-thread cache ([`request`]), so a request builds no label
//! list and does no registry lookup once its (route, status) was seen. Names:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `gateway_requests_total` | counter | `route` (row id, `unmatched` for 404/405), `status` |
//! | `gateway_request_duration_seconds` | histogram | `route` |
//! | `gateway_upstream_duration_seconds` | histogram | — (time to the upstream's headers) |
//! | `gateway_upstream_errors_total` | counter | `kind`: `network`, `timeout`, `rate_limited`, `status_4xx`, `status_5xx` |
//! | `gateway_rate_limited_total` | counter | `capability` |
//! | `gateway_charged_microusd_total` | counter | `capability` (millionths of a USD, rounded) |
//! | `gateway_record_queue_depth` | gauge | — (batches waiting for the group-commit writer) |
//! | `gateway_record_commit_duration_seconds` | histogram | — (one group commit) |
//! | `gateway_mirror_copies_total` | counter | — (job results copied into the object store) |
//! | `gateway_open_streams` | gauge | — (model streams being relayed) |
//! | `gateway_open_sessions` | gauge | — (live WebSocket sessions: realtime, live transcription) |
//! | `gateway_session_frames_total` | counter | `direction`: `up` (caller to provider), `down` |
//! | `gateway_session_seconds_billed_total` | counter | — (seconds of live audio committed) |
//! | `gateway_route_attempts_total` | counter | `deployment` (`provider/model` of the providers file), `outcome` (`ok` or the failure's kind as above) |
//! | `gateway_route_skipped_total` | counter | `deployment` (skipped while cooling down) |
//! | `gateway_route_cooldowns_total` | counter | `deployment` (cool-downs started) |
//! | `gateway_cache_hits_total`, `_misses_total`, `_bypasses_total` | counter | — (response cache look-ups, [`gateway_models::cache`]) |
//! | `gateway_cache_stores_total` | counter | — (entries stored) |
//! | `gateway_cache_stored_bytes_total` | counter | — (bytes of the entries stored) |
//! | `gateway_cache_evictions_total` | counter | — (in-process entries evicted for room) |
//! | `gateway_cache_bytes` | gauge | — (bytes held by the in-process cache) |

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Histogram buckets, seconds.
const BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// How often the recorder's upkeep runs ([`install`]).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Installs the process's recorder (once; later calls are free). `None`
/// when another recorder was installed first (then `/metrics` is empty).
///
/// The recorder keeps each histogram sample until its upkeep folds it into
/// the buckets: without upkeep, samples pile up between two scrapes of
/// `/metrics` (8 bytes and more per sample, two a request and one a group
/// commit: a gateway nobody scraped grew by about 6 MiB a minute under
/// load, #47). So
/// installing it also starts the thread `metrics-upkeep`, which runs the
/// upkeep every [`UPKEEP_EVERY`], as the crate's own exporter does.
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(BUCKETS)
                .expect("non-empty buckets")
                .build_recorder();
            let handle = recorder.handle();
            match metrics::set_global_recorder(recorder) {
                Ok(()) => {
                    start_upkeep(handle.clone());
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics recorder not installed");
                    None
                }
            }
        })
        .as_ref()
}

/// Runs `handle`'s upkeep every [`UPKEEP_EVERY`] on a thread of its own
/// (the recorder may be installed before, or without, an async runtime).
fn start_upkeep(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || loop {
            std::thread::sleep(UPKEEP_EVERY);
            handle.run_upkeep();
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "metrics upkeep not started: histograms grow until scraped");
    }
}

/// The Prometheus text exposition of every metric so far.
pub fn render() -> String {
    install().map(|h| h.render()).unwrap_or_default()
}

/// `"100"` … `"999"` as `&'static str`, built once.
pub fn status_label(status: u16) -> &'static str {
    static LABELS: OnceLock<Vec<&'static str>> = OnceLock::new();
    let labels = LABELS.get_or_init(|| {
        (100u16..1000)
            .map(|s| &*Box::leak(s.to_string().into_boxed_str()))
            .collect()
    });
    status
        .checked_sub(100)
        .and_then(|i| labels.get(usize::from(i)))
        .copied()
        .unwrap_or("other")
}

/// A `&'static str` equal to `s`: each distinct value is leaked once (used
/// for capability names read back from records: a bounded set, the table's).
pub fn intern(s: &str) -> &'static str {
    static SET: OnceLock<std::sync::Mutex<std::collections::HashSet<&'static str>>> =
        OnceLock::new();
    let mut set = SET
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(v) = set.get(s) {
        return v;
    }
    let v: &'static str = Box::leak(s.into());
    set.insert(v);
    v
}

/// One answered request. The handles of a (route, status) are registered
/// once per thread and kept (only once the recorder is installed: a handle
/// taken before would be a no-op forever).
pub fn request(route: &'static str, status: u16, elapsed: Duration) {
    type Handles = (metrics::Counter, metrics::Histogram);
    thread_local! {
        static CACHE: std::cell::RefCell<std::collections::HashMap<(usize, u16), Handles>> =
            Default::default();
    }
    let make = || -> Handles {
        (
            metrics::counter!("gateway_requests_total", "route" => route, "status" => status_label(status)),
            metrics::histogram!("gateway_request_duration_seconds", "route" => route),
        )
    };
    if !matches!(HANDLE.get(), Some(Some(_))) {
        let (c, h) = make();
        c.increment(1);
        h.record(elapsed.as_secs_f64());
        return;
    }
    // The row id's address names it: every row's id is one static string.
    let key = (
        route.as_ptr() as usize ^ route.len().rotate_left(48),
        status,
    );
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        let (c, h) = cache.entry(key).or_insert_with(make);
        c.increment(1);
        h.record(elapsed.as_secs_f64());
    });
}

/// A request no row matched (404, 405): counted under route `unmatched`.
pub fn unmatched(status: u16) {
    metrics::counter!("gateway_requests_total", "route" => "unmatched", "status" => status_label(status))
        .increment(1);
}

/// Time from sending an upstream request to its headers (or failure).
pub fn upstream_latency(elapsed: Duration) {
    static H: OnceLock<metrics::Histogram> = OnceLock::new();
    if matches!(HANDLE.get(), Some(Some(_))) {
        H.get_or_init(|| metrics::histogram!("gateway_upstream_duration_seconds"))
            .record(elapsed.as_secs_f64());
    } else {
        metrics::histogram!("gateway_upstream_duration_seconds").record(elapsed.as_secs_f64());
    }
}

/// An upstream call that failed: `kind` as in the table above.
pub fn upstream_error(kind: &'static str) {
    metrics::counter!("gateway_upstream_errors_total", "kind" => kind).increment(1);
}

/// A request refused by the rate limiter.
pub fn rate_limited(capability: &'static str) {
    metrics::counter!("gateway_rate_limited_total", "capability" => capability).increment(1);
}

/// An amount charged to a capability, in millionths of a USD.
pub fn charged(capability: &'static str, micro_usd: u64) {
    if micro_usd > 0 {
        metrics::counter!("gateway_charged_microusd_total", "capability" => capability)
            .increment(micro_usd);
    }
}

/// A batch entered (`+1.0`) or left (`-1.0`) the record writer's queue.
pub fn record_queue(delta: f64) {
    metrics::gauge!("gateway_record_queue_depth").increment(delta);
}

/// One group commit took `elapsed`.
pub fn record_commit(elapsed: Duration) {
    metrics::histogram!("gateway_record_commit_duration_seconds").record(elapsed.as_secs_f64());
}

/// A job result copied into the object store.
pub fn mirror_copy() {
    metrics::counter!("gateway_mirror_copies_total").increment(1);
}

/// A model stream opened (`+1.0`) or ended (`-1.0`).
pub fn open_streams(delta: f64) {
    metrics::gauge!("gateway_open_streams").increment(delta);
}

/// A batch's line ended on this instance: `done` (answered 2xx) or
/// `failed` (an error answer, or not run).
pub fn batch_line(state: &'static str, n: u64) {
    metrics::counter!("gateway_batch_lines_total", "state" => state).increment(n);
}

/// The lines of the batches in progress that no instance runs yet.
pub fn batch_lines_waiting(n: u64) {
    metrics::gauge!("gateway_batch_lines_waiting").set(n as f64);
}

/// An MCP tool call ended (`outcome`: `ok`, `tool_error`, `error`,
/// `refused`) after `elapsed` (refused calls: none).
pub fn mcp_call(server: &str, outcome: &'static str, elapsed: Duration) {
    let server = intern(server);
    metrics::counter!("gateway_mcp_calls_total", "server" => server, "outcome" => outcome)
        .increment(1);
    if outcome != "refused" {
        metrics::histogram!("gateway_mcp_call_duration_seconds", "server" => server)
            .record(elapsed.as_secs_f64());
    }
}

/// A live session opened (`+1.0`) or ended (`-1.0`).
pub fn open_sessions(delta: f64) {
    metrics::gauge!("gateway_open_sessions").increment(delta);
}

/// `n` WebSocket messages of live sessions relayed, toward the provider
/// (`up`) or the caller.
pub fn session_frames(up: bool, n: u64) {
    let direction = if up { "up" } else { "down" };
    metrics::counter!("gateway_session_frames_total", "direction" => direction).increment(n);
}

/// Seconds of live audio committed.
pub fn session_seconds_billed(seconds: f64) {
    metrics::counter!("gateway_session_seconds_billed_total").increment(seconds.max(0.0) as u64);
}

/// A response cache look-up: `what` is `hits`, `misses` or `bypasses`.
pub fn cache_event(what: &'static str) {
    match what {
        "hits" => metrics::counter!("gateway_cache_hits_total").increment(1),
        "misses" => metrics::counter!("gateway_cache_misses_total").increment(1),
        _ => metrics::counter!("gateway_cache_bypasses_total").increment(1),
    }
}

/// A response cache entry of `bytes` stored.
pub fn cache_stored(bytes: u64) {
    metrics::counter!("gateway_cache_stores_total").increment(1);
    metrics::counter!("gateway_cache_stored_bytes_total").increment(bytes);
}

/// An in-process cache entry evicted; `bytes` held now.
pub fn cache_evicted(bytes: f64) {
    metrics::counter!("gateway_cache_evictions_total").increment(1);
    cache_bytes(bytes);
}

/// Bytes held by the in-process response cache.
pub fn cache_bytes(bytes: f64) {
    metrics::gauge!("gateway_cache_bytes").set(bytes);
}

/// An upstream attempt of a model call on `deployment` (a name of the
/// providers file: a bounded set), with its `outcome`.
pub fn route_attempt(deployment: &str, outcome: &'static str) {
    metrics::counter!("gateway_route_attempts_total", "deployment" => intern(deployment), "outcome" => outcome)
        .increment(1);
}

/// A deployment skipped because it is cooling down.
pub fn route_skipped(deployment: &str) {
    metrics::counter!("gateway_route_skipped_total", "deployment" => intern(deployment))
        .increment(1);
}

/// A cool-down of `deployment` started.
pub fn cooldown(deployment: &str) {
    metrics::counter!("gateway_route_cooldowns_total", "deployment" => intern(deployment))
        .increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_labels_are_the_numbers() {
        assert_eq!(status_label(200), "200");
        assert_eq!(status_label(404), "404");
        assert_eq!(status_label(999), "999");
        assert_eq!(status_label(42), "other");
        assert_eq!(status_label(1000), "other");
    }

    /// The recorder's upkeep runs on its own (histogram samples folded into
    /// the buckets, not kept until a scrape) and loses no sample.
    #[test]
    fn histograms_are_kept_up_without_a_scrape() {
        let handle = install().expect("the test binary's only recorder");
        // A new thread names itself once it runs: wait for it (up to 5 s).
        #[cfg(target_os = "linux")]
        {
            let names = || -> Vec<String> {
                std::fs::read_dir("/proc/self/task")
                    .unwrap()
                    .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                    .map(|n| n.trim().to_owned())
                    .collect()
            };
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while !names().iter().any(|n| n == "metrics-upkeep") {
                assert!(std::time::Instant::now() < deadline, "{:?}", names());
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        for _ in 0..1000 {
            metrics::histogram!("gateway_test_upkeep_seconds").record(0.002);
        }
        handle.run_upkeep();
        metrics::histogram!("gateway_test_upkeep_seconds").record(0.002);
        let text = render();
        assert!(
            text.contains("gateway_test_upkeep_seconds_count 1001"),
            "{text}"
        );
        assert!(
            text.contains("gateway_test_upkeep_seconds_bucket{le=\"0.005\"} 1001"),
            "{text}"
        );
    }
}
