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
//! | `chat_cached` | as `chat` (nothing to cache) | same, through the forwarder | `chat` with `X-Gateway-Cache: use`: after the first, every request a response-cache hit (no upstream call, no hold) |
//!
//! `chat_stream` sets the simulator's delay between events to
//! [`STREAM_DELAY_MS`] first, so that a run streams for real but quickly;
//! `tts_stream` its pace of audio chunks to [`TTS_CHUNK_MS`].
//!
//! `free` and `billed` run at every concurrency asked for; `mirror` at the
//! lowest (it measures latency); `upload` sends one file at a time for the
//! whole duration (at least one), after a 1 MiB warm-up upload.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION};
use http::Method;
use serde_json::json;

use crate::load::{self, Event, FileContent, Load, Spec};
use crate::measure::{Probe, ProbeResult};
use crate::row::{Row, Target};

/// The stock voice of the simulator.
const VOICE: &str = "stock-voice-1";
/// Text of the billed synthesis.
const TEXT: &str = "Hello world";
/// Output tokens of a chat answer.
const CHAT_TOKENS: u64 = 16;
/// The simulator's delay between streamed events in `chat_stream` (ms).
pub const STREAM_DELAY_MS: u64 = 2;
/// The ElevenLabs voice of `tts_stream` (one the simulator has).
const ELEVEN_VOICE: &str = "21m00Tcm4TlvDq8ikWAM";
/// The simulator's pace of streamed audio chunks in `tts_stream` (ms).
pub const TTS_CHUNK_MS: u64 = 2;

/// A scenario, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Free pass-through GET of one voice.
    Free,
    /// Billed synthesis (audio stored, audit and usage committed).
    Billed,
    /// Streamed upload of a large file.
    Upload,
    /// Later GETs of a completed, mirrored enhance job.
    Mirror,
    /// A chat completion (JSON answer).
    Chat,
    /// A streamed chat completion (time to first and to last byte).
    #[value(name = "chat_stream")]
    ChatStream,
    /// The `chat` through the `anthropic` adapter (translation both ways).
    #[value(name = "chat_anthropic")]
    ChatAnthropic,
    /// `chat` through a route whose second deployment fails half its
    /// requests before the first byte.
    #[value(name = "chat_failover")]
    ChatFailover,
    /// A chat completion answered from the gateway's response cache.
    #[value(name = "chat_cached")]
    ChatCached,
    /// `chat` through the Responses API (translated both ways, stored).
    Responses,
    /// Streamed speech from an ElevenLabs deployment (time to first and
    /// to last audio byte).
    #[value(name = "tts_stream")]
    TtsStream,
}

impl Scenario {
    /// Every scenario, in running order. The upload runs first, on the
    /// fresh gateway, so that its peak RSS is what the upload itself costs
    /// rather than the heap and idle connections the c=64 runs leave behind
    /// (those show in their own rows' peak RSS).
    pub const ALL: [Scenario; 11] = [
        Scenario::Upload,
        Scenario::Free,
        Scenario::Billed,
        Scenario::Mirror,
        Scenario::Chat,
        Scenario::ChatStream,
        Scenario::ChatAnthropic,
        Scenario::ChatFailover,
        Scenario::ChatCached,
        Scenario::Responses,
        Scenario::TtsStream,
    ];

    /// Its name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Free => "free",
            Scenario::Billed => "billed",
            Scenario::Upload => "upload",
            Scenario::Mirror => "mirror",
            Scenario::Chat => "chat",
            Scenario::ChatStream => "chat_stream",
            Scenario::ChatAnthropic => "chat_anthropic",
            Scenario::ChatFailover => "chat_failover",
            Scenario::ChatCached => "chat_cached",
            Scenario::Responses => "responses",
            Scenario::TtsStream => "tts_stream",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Scenarios, in order.
    pub scenarios: Vec<Scenario>,
    /// Concurrencies of `free` and `billed`.
    pub concurrency: Vec<usize>,
    /// Measured time per run.
    pub duration: Duration,
    /// Warm-up per run.
    pub warmup: Duration,
    /// Open-loop rate (requests/s), closed loop when `None`.
    pub rate: Option<f64>,
    /// Size of the uploaded file (bytes).
    pub upload_bytes: u64,
    /// Longest time one request may take.
    pub timeout: Duration,
    /// The targets each scenario runs at, in order (all three; the gateway
    /// alone for the second sync mode's runs).
    pub targets: Vec<Target>,
}

/// The running pieces.
pub struct Env {
    /// Simulator address and pid.
    pub sim: (SocketAddr, u32),
    /// Forwarder address and pid.
    pub forwarder: (SocketAddr, u32),
    /// Gateway address and pid.
    pub gateway: (SocketAddr, u32),
    /// API key of the gateway user.
    pub key: String,
}

impl Env {
    fn bearer(key: &str) -> Vec<(HeaderName, HeaderValue)> {
        vec![(
            AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {key}")).expect("key is a valid header value"),
        )]
    }

    /// Headers for the gateway.
    fn gateway_auth(&self) -> Vec<(HeaderName, HeaderValue)> {
        Env::bearer(&self.key)
    }

    /// Headers for the simulator (direct, or through the forwarder).
    fn sim_auth(&self) -> Vec<(HeaderName, HeaderValue)> {
        Env::bearer(crate::procs::SIM_KEY)
    }

    /// Anthropic's headers for the simulator.
    fn sim_anthropic_auth(&self) -> Vec<(HeaderName, HeaderValue)> {
        vec![
            (
                HeaderName::from_static("x-api-key"),
                HeaderValue::from_static(crate::procs::SIM_KEY),
            ),
            (
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static("2023-06-01"),
            ),
        ]
    }

    /// Address and pid of the process under test for `target` (the simulator for `direct`).
    fn endpoint(&self, target: Target) -> (SocketAddr, u32) {
        match target {
            Target::Direct => self.sim,
            Target::Forwarder => self.forwarder,
            Target::Gateway => self.gateway,
        }
    }
}

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
                match mirror_setup(env, plan.timeout).await {
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
fn request_spec(env: &Env, scenario: Scenario, target: Target, job_id: Option<&str>) -> Spec {
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
        (Scenario::Upload, _) => unreachable!("uploads are not repeated requests"),
    }
}

/// Empties the simulator's request log (bounded, but no need to fill it).
async fn clear_sim_log(env: &Env) {
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
        let req = load::upload_request(addr, path, &headers, "bench.wav", purpose, &content);
        async move { load::upload(addr, req, timeout).await }
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

/// Creates a completed enhance job and performs its first (copying) GET;
/// returns the job id.
async fn mirror_setup(env: &Env, timeout: Duration) -> Result<String, String> {
    let gw = env.gateway.0;
    let req = load::upload_request(
        gw,
        "/api/v1/voice/uploads",
        &env.gateway_auth(),
        "noisy.wav",
        Some("audio_job_input"),
        &FileContent::Bytes(wav_1s()),
    );
    let (status, body, _) = load::upload(gw, req, timeout).await?;
    if !status.is_success() {
        return Err(format!(
            "upload -> {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    let up: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| format!("upload answer: {e}"))?;
    let url = up["url"].as_str().ok_or("upload answer has no url")?;
    let job = load::call_json(
        gw,
        &Spec::post_json(
            "/api/v1/voice/enhance",
            env.gateway_auth(),
            &json!({"audio_url": url}),
        ),
        timeout,
    )
    .await?;
    let job_id = job["job_id"]
        .as_str()
        .ok_or_else(|| format!("enhance answer has no job_id: {job}"))?
        .to_owned();
    let complete = Spec {
        method: Method::POST,
        path: format!("/__sim/jobs/{job_id}/complete"),
        headers: Vec::new(),
        body: Bytes::new(),
    };
    load::call_json(env.sim.0, &complete, timeout).await?;
    let first = load::call_json(
        gw,
        &Spec::get(
            format!("/api/v1/voice/enhance/{job_id}"),
            env.gateway_auth(),
        ),
        timeout,
    )
    .await?;
    if first.get("audio_url").and_then(|v| v.as_str()).is_none() {
        return Err(format!("the first GET did not mirror the result: {first}"));
    }
    Ok(job_id)
}

/// One second of a 440 Hz tone, 16 kHz mono 16-bit PCM WAV.
fn wav_1s() -> Bytes {
    let rate: u32 = 16_000;
    let samples: Vec<i16> = (0..rate)
        .map(|i| ((i as f64 * 440.0 * std::f64::consts::TAU / rate as f64).sin() * 8000.0) as i16)
        .collect();
    let data_len = (samples.len() * 2) as u32;
    let mut w = Vec::with_capacity(44 + data_len as usize);
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + data_len).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&rate.to_le_bytes());
    w.extend_from_slice(&(rate * 2).to_le_bytes()); // byte rate
    w.extend_from_slice(&2u16.to_le_bytes()); // block align
    w.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    w.extend_from_slice(b"data");
    w.extend_from_slice(&data_len.to_le_bytes());
    for s in samples {
        w.extend_from_slice(&s.to_le_bytes());
    }
    w.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wav_header_is_consistent() {
        let w = wav_1s();
        assert_eq!(&w[..4], b"RIFF");
        assert_eq!(
            u32::from_le_bytes(w[4..8].try_into().unwrap()) as usize,
            w.len() - 8
        );
        assert_eq!(
            u32::from_le_bytes(w[40..44].try_into().unwrap()) as usize,
            w.len() - 44
        );
    }
}
