//! The scenarios and how each is driven at the three targets.
//!
//! | scenario | direct (simulator) | forwarder | gateway |
//! |---|---|---|---|
//! | `free` | `GET /api/v2/voices/stock-voice-1` | same, through the forwarder | `GET /api/v1/voice/tts/voices/stock-voice-1` |
//! | `billed` | `POST /synthesize` (upstream shape, `data`) | same, through the forwarder | `POST /api/v1/voice/tts/synthesize` (`text`) |
//! | `upload` | — (the simulator has no upload route) | `POST /__bench/sink` (drained, no upstream) | `POST /api/v1/voice/uploads` |
//! | `mirror` | `GET /api/v2/audio_enhancements/{id}` | same, through the forwarder | `GET /api/v1/voice/enhance/{id}` after the first (copying) GET |
//! | `chat` | `POST /v1/chat/completions` (model `sim-gpt`) | same, through the forwarder | `POST /api/v1/chat/completions` (model `sim/sim-gpt`, credit held and settled) |
//! | `chat_stream` | the same with `stream: true`: time to first byte and to last byte | same, through the forwarder | same, relayed by the gateway |
//! | `chat_anthropic` | `POST /v1/messages` (Anthropic's shape, `x-api-key`) | same, through the forwarder | `POST /api/v1/chat/completions` (model `claude/claude-sim`: the same chat translated by the `anthropic` adapter both ways) |
//! | `chat_failover` | as `chat` | as `chat` | `chat` on the route `failover` (two deployments 1:1, `b` failing every other request with 503 before its first byte: those fail over to the other) |
//! | `responses` | as `chat` (the call the gateway makes) | same, through the forwarder | `POST /api/v1/responses` (model `sim/sim-gpt`, `input` a string: translated to `chat` and back, the response stored) |
//! | `tts_stream` | `POST /v1/text-to-speech/{voice}/stream` (ElevenLabs' shape, `xi-api-key`, paced audio): time to first and to last byte | same, through the forwarder | `POST /api/v1/audio/tts/generations` with `stream: true` (model `eleven/eleven_flash_v2_5`: relayed, copied to the store, billed per character before the last byte) |
//! | `realtime` | `GET /v1/realtime` (WebSocket): sessions × turns, a turn from `response.create` to `response.done` | — (the forwarder relays HTTP only) | `GET /api/v1/realtime` (model `sim/gpt-realtime`: each response held, then billed before its `response.done`; [`crate::realtime`]) |
//! | `chat_cached` | as `chat` (nothing to cache) | same, through the forwarder | `chat` with `X-Gateway-Cache: use`: after the first, every request a response-cache hit (no upstream call, no hold) |
//! | `batch` | — | — | `chat`'s body as the lines of a batch (`POST /api/v1/files`, `POST /api/v1/batches`, polled to `completed`) against the same lines in a closed loop at the batch concurrency, and `chat` at each concurrency alone and while a batch runs ([`crate::batch`]) |
//!
//! `chat_stream` sets the simulator's delay between events to
//! [`STREAM_DELAY_MS`] first, so that a run streams for real but quickly;
//! `tts_stream` its pace of audio chunks to [`TTS_CHUNK_MS`].
//!
//! `free` and `billed` run at every concurrency asked for; `mirror` at the
//! lowest (it measures latency); `upload` sends one file at a time for the
//! whole duration (at least one), after a 1 MiB warm-up upload.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::Method;
use serde_json::json;

use crate::load::{self, Event, Load, Spec};
use crate::measure::{Probe, ProbeResult};
use crate::plan::{Env, Plan, Scenario};
use crate::row::{Row, Target};
use crate::upload::{self, FileContent};

/// The stock voice of the simulator.
const VOICE: &str = "stock-voice-1";
/// Text of the billed synthesis.
const TEXT: &str = "Hello world";
/// Output tokens of a chat answer.
const CHAT_TOKENS: u64 = 16;
/// The simulator's delay between streamed events in `chat_stream` (ms).
pub const STREAM_DELAY_MS: u64 = 2;
/// The simulator's pace of a realtime reply's deltas in `realtime` (ms a word).
pub const REALTIME_DELTA_MS: u64 = 1;
/// The ElevenLabs voice of `tts_stream` (one the simulator has).
const ELEVEN_VOICE: &str = "21m00Tcm4TlvDq8ikWAM";
/// The simulator's pace of streamed audio chunks in `tts_stream` (ms).
pub const TTS_CHUNK_MS: u64 = 2;

/// Runs `plan`, printing progress to stderr; returns one row per run.
pub async fn run_all(env: &Env, plan: &Plan) -> Vec<Row> {
    let mut rows = Vec::new();
    for &scenario in &plan.scenarios {
        match scenario {
            Scenario::Free
            | Scenario::Billed
            | Scenario::Chat
            | Scenario::ChatStream
            | Scenario::ChatAnthropic
            | Scenario::ChatFailover
            | Scenario::ChatCached
            | Scenario::Responses
            | Scenario::TtsStream => {
                if scenario == Scenario::ChatStream {
                    set_sim_config(env, json!({"stream_delay_ms": STREAM_DELAY_MS})).await;
                }
                if scenario == Scenario::TtsStream {
                    set_sim_config(env, json!({"tts_chunk_ms": TTS_CHUNK_MS})).await;
                }
                if scenario == Scenario::ChatFailover {
                    sim_faults(env, Some(json!({"path": "/p/b/*", "fault": {"status": 503}, "count": 0, "every": 2}))).await;
                }
                for &c in &plan.concurrency {
                    for &target in &plan.targets {
                        let spec = request_spec(env, scenario, target, None);
                        rows.push(measure(env, plan, scenario, target, c, &spec).await);
                    }
                }
                if scenario == Scenario::ChatFailover {
                    sim_faults(env, None).await;
                }
            }
            Scenario::Mirror => {
                let c = plan.concurrency.iter().copied().min().unwrap_or(1);
                match crate::mirror::mirror_setup(env, plan.timeout).await {
                    Ok(job_id) => {
                        for &target in &plan.targets {
                            let spec = request_spec(env, scenario, target, Some(&job_id));
                            rows.push(measure(env, plan, scenario, target, c, &spec).await);
                        }
                    }
                    Err(e) => rows.push(Row::failed(
                        scenario.name(),
                        Target::Gateway,
                        c,
                        format!("set-up failed: {e}"),
                    )),
                }
            }
            Scenario::Realtime => {
                set_sim_config(env, json!({"realtime_delta_ms": REALTIME_DELTA_MS})).await;
                rows.extend(crate::realtime::rows(env, plan).await);
            }
            Scenario::Batch if plan.targets.contains(&Target::Gateway) => {
                clear_sim_log(env).await;
                let chat = request_spec(env, Scenario::Chat, Target::Gateway, None);
                rows.extend(crate::batch::rows(env, plan, &chat).await);
            }
            Scenario::Batch => {}
            Scenario::Upload => {
                for &target in plan.targets.iter().filter(|t| **t != Target::Direct) {
                    rows.push(upload_row(env, plan, target).await);
                }
            }
        }
    }
    rows
}

/// The repeated request of `scenario` at `target` (`job_id` for `mirror`).
pub(crate) fn request_spec(
    env: &Env,
    scenario: Scenario,
    target: Target,
    job_id: Option<&str>,
) -> Spec {
    let job_id = job_id.unwrap_or("");
    match (scenario, target) {
        (Scenario::Free, Target::Gateway) => Spec::get(
            format!("/api/v1/voice/tts/voices/{VOICE}"),
            env.gateway_auth(),
        ),
        (Scenario::Free, _) => Spec::get(format!("/api/v2/voices/{VOICE}"), env.sim_auth()),
        (Scenario::Billed, Target::Gateway) => Spec::post_json(
            "/api/v1/voice/tts/synthesize",
            env.gateway_auth(),
            &json!({"voice_uuid": VOICE, "text": TEXT, "output_format": "wav"}),
        ),
        (Scenario::Billed, _) => Spec::post_json(
            "/synthesize",
            env.sim_auth(),
            &json!({"voice_uuid": VOICE, "data": TEXT, "output_format": "wav"}),
        ),
        (Scenario::Mirror, Target::Gateway) => Spec::get(
            format!("/api/v1/voice/enhance/{job_id}"),
            env.gateway_auth(),
        ),
        (Scenario::Mirror, _) => Spec::get(
            format!("/api/v2/audio_enhancements/{job_id}"),
            env.sim_auth(),
        ),
        (Scenario::Responses, Target::Gateway) => Spec::post_json(
            "/api/v1/responses",
            env.gateway_auth(),
            &json!({"model": "sim/sim-gpt", "max_output_tokens": CHAT_TOKENS, "input": TEXT}),
        ),
        (
            Scenario::Chat
            | Scenario::ChatStream
            | Scenario::ChatFailover
            | Scenario::ChatCached
            | Scenario::Responses,
            target,
        ) => {
            let stream = scenario == Scenario::ChatStream;
            let (path, model, mut auth) = match target {
                Target::Gateway if scenario == Scenario::ChatFailover => (
                    "/api/v1/chat/completions",
                    crate::procs::FAILOVER_ROUTE,
                    env.gateway_auth(),
                ),
                Target::Gateway => (
                    "/api/v1/chat/completions",
                    "sim/sim-gpt",
                    env.gateway_auth(),
                ),
                _ => ("/v1/chat/completions", "sim-gpt", env.sim_auth()),
            };
            if scenario == Scenario::ChatCached && target == Target::Gateway {
                auth.push((
                    HeaderName::from_static("x-gateway-cache"),
                    HeaderValue::from_static("use"),
                ));
            }
            Spec::post_json(
                path,
                auth,
                &json!({"model": model, "stream": stream, "max_tokens": CHAT_TOKENS,
                    "messages": [{"role": "user", "content": TEXT}]}),
            )
        }
        (Scenario::ChatAnthropic, Target::Gateway) => Spec::post_json(
            "/api/v1/chat/completions",
            env.gateway_auth(),
            &json!({"model": "claude/claude-sim", "max_tokens": CHAT_TOKENS,
                "messages": [{"role": "user", "content": TEXT}]}),
        ),
        (Scenario::ChatAnthropic, _) => Spec::post_json(
            "/v1/messages",
            env.sim_anthropic_auth(),
            &json!({"model": "claude-sim", "max_tokens": CHAT_TOKENS,
                "messages": [{"role": "user", "content": TEXT}]}),
        ),
        (Scenario::TtsStream, Target::Gateway) => Spec::post_json(
            "/api/v1/audio/tts/generations",
            env.gateway_auth(),
            &json!({"model": "eleven/eleven_flash_v2_5", "input": TEXT, "voice": ELEVEN_VOICE,
                "stream": true}),
        ),
        (Scenario::TtsStream, _) => Spec::post_json(
            format!("/v1/text-to-speech/{ELEVEN_VOICE}/stream?output_format=mp3_44100_128"),
            vec![(
                HeaderName::from_static("xi-api-key"),
                HeaderValue::from_static(crate::procs::SIM_KEY),
            )],
            &json!({"text": TEXT, "model_id": "eleven_flash_v2_5"}),
        ),
        (Scenario::Upload | Scenario::Realtime | Scenario::Batch, _) => {
            unreachable!("uploads, realtime sessions and batches are not repeated requests")
        }
    }
}

/// Empties the simulator's request log (bounded, but no need to fill it).
pub(crate) async fn clear_sim_log(env: &Env) {
    let spec = Spec {
        method: Method::DELETE,
        path: "/__sim/requests".into(),
        headers: Vec::new(),
        body: Bytes::new(),
    };
    let _ = load::call(env.sim.0, &spec, Duration::from_secs(10)).await;
}

/// Adds a fault rule to the simulator (`None`: removes them all).
async fn sim_faults(env: &Env, rule: Option<serde_json::Value>) {
    let spec = match &rule {
        Some(rule) => Spec::post_json("/__sim/faults", Vec::new(), rule),
        None => Spec {
            method: Method::DELETE,
            path: "/__sim/faults".into(),
            headers: Vec::new(),
            body: Bytes::new(),
        },
    };
    if let Err(e) = load::call_json(env.sim.0, &spec, Duration::from_secs(10)).await {
        eprintln!("note: setting the simulator's faults failed: {e}");
    }
}

/// Sets the simulator's delay between streamed events.
async fn set_sim_config(env: &Env, config: serde_json::Value) {
    let spec = Spec::post_json("/__sim/config", Vec::new(), &config);
    if let Err(e) = load::call_json(env.sim.0, &spec, Duration::from_secs(10)).await {
        eprintln!("note: setting the simulator's {config} failed: {e}");
    }
}

/// One load run of `spec` at `target`, with the process measurements.
async fn measure(
    env: &Env,
    plan: &Plan,
    scenario: Scenario,
    target: Target,
    concurrency: usize,
    spec: &Spec,
) -> Row {
    clear_sim_log(env).await;
    let (addr, pid) = env.endpoint(target);
    let sim_pid = env.sim.1;
    let load = Load {
        addr,
        concurrency,
        warmup: plan.warmup,
        duration: plan.duration,
        rate: plan.rate,
        timeout: plan.timeout,
    };
    let mut probes: Option<(Probe, Probe)> = None;
    let mut measured: Option<(ProbeResult, ProbeResult)> = None;
    let outcome = load::run(&load, spec, |ev| match ev {
        Event::MeasureStart => probes = Some((Probe::start(pid), Probe::start(sim_pid))),
        Event::MeasureEnd => measured = probes.take().map(|(p, s)| (p.finish(), s.finish())),
        Event::WindowEnd(_) => {}
    })
    .await;
    let (proc_m, sim_m) = measured.unwrap_or_default();
    let row = Row::from_outcome(
        scenario.name(),
        target,
        concurrency,
        &outcome,
        (target != Target::Direct).then_some(proc_m),
        sim_m,
    );
    eprintln!("  {}", row.progress_line());
    row
}

/// The `upload` scenario at one target (gateway, or the forwarder's sink).
async fn upload_row(env: &Env, plan: &Plan, target: Target) -> Row {
    let (addr, pid) = env.endpoint(target);
    let (path, headers, purpose) = match target {
        Target::Gateway => ("/api/v1/voice/uploads", env.gateway_auth(), None),
        _ => (crate::forwarder::SINK_PATH, Vec::new(), None),
    };
    let timeout = plan.timeout.max(Duration::from_secs(600));
    let send = |content: FileContent| {
        let req = upload::upload_request(addr, path, &headers, "bench.wav", purpose, &content);
        async move { upload::upload(addr, req, timeout).await }
    };
    // Warm-up: one small upload.
    if let Err(e) = check_upload(target, send(FileContent::Generated(1 << 20)).await, 1 << 20) {
        return Row::failed("upload", target, 1, format!("warm-up upload: {e}"));
    }
    let probe = Probe::start(pid);
    let started = Instant::now();
    let mut hist = load::new_histogram();
    let (mut ok, mut errors, mut samples) = (0u64, 0u64, Vec::new());
    loop {
        match check_upload(
            target,
            send(FileContent::Generated(plan.upload_bytes)).await,
            plan.upload_bytes,
        ) {
            Ok(took) => {
                hist.saturating_record(took.as_nanos() as u64);
                ok += 1;
            }
            Err(e) => {
                errors += 1;
                samples.push(e);
            }
        }
        if started.elapsed() >= plan.duration || errors > 0 {
            break;
        }
    }
    let elapsed = started.elapsed();
    let m = probe.finish();
    let row = Row::from_upload(
        target,
        ok,
        errors,
        samples,
        hist,
        elapsed,
        plan.upload_bytes,
        m,
    );
    eprintln!("  {}", row.progress_line());
    row
}

/// Checks an upload's answer: 2xx and the whole file received.
fn check_upload(
    target: Target,
    result: Result<(http::StatusCode, Vec<u8>, Duration), String>,
    file_len: u64,
) -> Result<Duration, String> {
    let (status, body, took) = result?;
    let text = String::from_utf8_lossy(&body);
    if !status.is_success() {
        return Err(format!("upload answered {status}: {text}"));
    }
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| format!("upload answer is not JSON ({e}): {text}"))?;
    let complete = match target {
        Target::Gateway => v["size_bytes"].as_u64() == Some(file_len),
        // The sink counts the whole multipart body, a little more than the file.
        _ => v["bytes"].as_u64().is_some_and(|n| n >= file_len),
    };
    if !complete {
        return Err(format!(
            "upload of {file_len} bytes was not received whole: {text}"
        ));
    }
    Ok(took)
}
