//! The OpenAI-compatible model provider behind the general gateway area
//! (`base = "llm"` rows of `endpoints.toml`), under `/v1` on the same port
//! ([`crate::Sim::llm_url`]). Same pipeline as the voice provider: logged,
//! faultable, and credential-checked when `api_key` is configured.
//!
//! | Method | Path | Notes |
//! |---|---|---|
//! | POST | `/v1/chat/completions` | `messages` required; `stream: true` answers server-sent events, one word per chunk ([`stream_delay_ms`](crate::shared::Shared::stream_delay_ms) apart), `stream_options.include_usage` adds a usage chunk; `max_tokens` sets the reply length (finish `length`); `n` choices (completions: `best_of` generated and billed); `usage.prompt_tokens` counts every field a provider counts ([`tokens`]) |
//! | | | `tools` given: a tool call when the last user text names one ([`tools`]) |
//! | POST | `/v1/completions` | `prompt` required; same streaming rules |
//! | POST | `/v1/embeddings` | `input` (or `text`): string or list; `dimensions` (default 16); deterministic unit vectors |
//! | POST | `/v1/images/generations` | `prompt` required; `n` (1..10), `size`, `response_format` `url` (PNG under `/__sim/media`) or `b64_json` |
//! | POST / GET | `/v1/videos`, `/v1/videos/{id}` | `queued` → `in_progress` → `completed` on the job clock |
//! | POST | `/v1/videos/{id}/cancel` | `cancelled` unless already finished (then 400) |
//! | GET | `/v1/videos/{id}/content` | the finished video (`video/mp4`, a small fixed MP4 header and payload: [`video::mp4_bytes`]); 400 `video_not_ready` before `completed` |
//! | POST | `/v1/audio/speech` | `input` required; `response_format` mp3 (default), wav or pcm; real audio, `x-sim-audio-duration` header |
//! | POST | `/v1/audio/transcriptions`, `/v1/audio/translations` | multipart `file` required; `response_format` json (default, with `usage.seconds`), text, verbose_json, srt, vtt |
//! | GET | `/v1/models`, `/v1/models/{id}` | a small fixed list |
//!
//! Errors use OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.
//!
//! The video job record lives in [`video`] (the store holds it); the routes
//! and handlers are here.

pub mod tokens;
pub mod tools;
pub mod video;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use base64::Engine as _;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, StatusCode};
use serde_json::{json, Map, Value};

use crate::audio;
use crate::request::Req;
use crate::response::{full, json_response, Resp};
use crate::shared::Shared;

use video::unix_now;
pub use video::Video;

type R = Result<Resp, Resp>;

/// Models listed by `GET /v1/models`.
pub const MODELS: [&str; 6] = [
    "sim-gpt",
    "sim-embed",
    "sim-image",
    "sim-video",
    "sim-tts",
    "sim-whisper",
];

/// A 1×1 PNG served for generated images.
pub const PNG_1X1: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

/// Forces a video to `completed` or `failed`; false when unknown.
pub fn force_video(sh: &Shared, id: &str, status: &'static str) -> Option<Value> {
    let mut store = sh.store.lock().unwrap();
    let v = store.videos.get_mut(id)?;
    if !matches!(v.status(), "completed" | "failed" | "cancelled") {
        v.forced = Some(status);
    }
    Some(v.render())
}

fn short_id(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..24]
    )
}

/// `{"error": {"message", "type", "param", "code"}}`.
pub fn oai_error(
    status: StatusCode,
    message: &str,
    param: Option<&str>,
    code: Option<&str>,
) -> Resp {
    json_response(status, &error_body(status, message, param, code))
}

/// The body of [`oai_error`].
pub fn error_body(
    status: StatusCode,
    message: &str,
    param: Option<&str>,
    code: Option<&str>,
) -> Value {
    let kind = match status.as_u16() {
        401 => "authentication_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        500.. => "server_error",
        _ => "invalid_request_error",
    };
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
}

fn missing(param: &str) -> Resp {
    oai_error(
        StatusCode::BAD_REQUEST,
        &format!("Missing required parameter: '{param}'."),
        Some(param),
        Some("missing_required_parameter"),
    )
}

fn invalid(param: &str, message: &str) -> Resp {
    oai_error(
        StatusCode::BAD_REQUEST,
        message,
        Some(param),
        Some("invalid_value"),
    )
}

fn fields(req: &Req) -> Result<Map<String, Value>, Resp> {
    req.fields().map_err(|_| {
        oai_error(
            StatusCode::BAD_REQUEST,
            "We could not parse the JSON body of your request.",
            None,
            None,
        )
    })
}

/// Routes one `/v1/...` request.
pub fn route(sh: &Arc<Shared>, req: &Req) -> Resp {
    route_inner(sh, req).unwrap_or_else(|e| e)
}

fn route_inner(sh: &Arc<Shared>, req: &Req) -> R {
    let path = req.path.trim_end_matches('/');
    let segs: Vec<&str> = path.trim_start_matches("/v1/").split('/').collect();
    match (req.method.as_str(), segs.as_slice()) {
        ("POST", ["chat", "completions"]) => chat(sh, req, true),
        ("POST", ["completions"]) => chat(sh, req, false),
        ("POST", ["embeddings"]) => embeddings(sh, req),
        ("POST", ["images", "generations"]) => images(sh, req),
        ("POST", ["videos"]) => video_create(sh, req),
        ("GET", ["videos"]) => {
            let store = sh.store.lock().unwrap();
            let mut list: Vec<&Video> = store.videos.values().collect();
            list.sort_by_key(|v| v.seq);
            let data: Vec<Value> = list.iter().map(|v| v.render()).collect();
            Ok(json_response(
                StatusCode::OK,
                &json!({"object": "list", "data": data, "has_more": false}),
            ))
        }
        ("GET", ["videos", id]) => {
            let store = sh.store.lock().unwrap();
            store
                .videos
                .get(*id)
                .map(|v| json_response(StatusCode::OK, &v.render()))
                .ok_or_else(|| video_404(id))
        }
        ("GET", ["videos", id, "content"]) => {
            let store = sh.store.lock().unwrap();
            let v = store.videos.get(*id).ok_or_else(|| video_404(id))?;
            if v.status() != "completed" {
                return Err(oai_error(
                    StatusCode::BAD_REQUEST,
                    "Video is not ready: its job has not completed.",
                    None,
                    Some("video_not_ready"),
                ));
            }
            let mut r = full(video::mp4_bytes());
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("video/mp4"));
            Ok(r)
        }
        ("POST", ["videos", id, "cancel"]) | ("DELETE", ["videos", id]) => {
            let mut store = sh.store.lock().unwrap();
            let v = store.videos.get_mut(*id).ok_or_else(|| video_404(id))?;
            if matches!(v.status(), "completed" | "failed" | "cancelled") {
                return Err(oai_error(
                    StatusCode::BAD_REQUEST,
                    "Video job is already finished.",
                    None,
                    Some("invalid_state"),
                ));
            }
            v.forced = Some("cancelled");
            Ok(json_response(StatusCode::OK, &v.render()))
        }
        ("POST", ["audio", "speech"]) => speech(sh, req),
        ("POST", ["audio", "transcriptions"]) => transcription(req, false),
        ("POST", ["audio", "translations"]) => transcription(req, true),
        ("GET", ["models"]) => {
            let data: Vec<Value> = MODELS.iter().map(|m| model(m)).collect();
            Ok(json_response(
                StatusCode::OK,
                &json!({"object": "list", "data": data}),
            ))
        }
        ("GET", ["models", id]) if MODELS.contains(id) => {
            Ok(json_response(StatusCode::OK, &model(id)))
        }
        ("GET", ["models", id]) => Err(oai_error(
            StatusCode::NOT_FOUND,
            &format!("The model '{id}' does not exist"),
            Some("model"),
            Some("model_not_found"),
        )),
        _ => Err(oai_error(
            StatusCode::NOT_FOUND,
            &format!("Unknown request URL: {} {}", req.method, req.path),
            None,
            Some("unknown_url"),
        )),
    }
}

fn model(id: &str) -> Value {
    json!({"id": id, "object": "model", "created": 1_700_000_000, "owned_by": "provider-sim"})
}

fn video_404(id: &str) -> Resp {
    oai_error(
        StatusCode::NOT_FOUND,
        &format!("Video '{id}' not found"),
        None,
        Some("not_found"),
    )
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// The simulated reply: `n` words.
fn reply_words(prompt: &str, n: usize) -> Vec<String> {
    let base = format!(
        "This is a simulated reply to: {}",
        prompt
            .split_whitespace()
            .take(8)
            .collect::<Vec<_>>()
            .join(" ")
    );
    base.split_whitespace()
        .map(str::to_owned)
        .cycle()
        .take(n)
        .collect()
}

/// Chat (`chat = true`) and text completions.
fn chat(sh: &Arc<Shared>, req: &Req, chat: bool) -> R {
    let f = fields(req)?;
    let prompt = if chat {
        let msgs = f
            .get("messages")
            .and_then(Value::as_array)
            .ok_or_else(|| missing("messages"))?;
        if msgs.is_empty() {
            return Err(invalid(
                "messages",
                "'messages' must contain at least one message.",
            ));
        }
        msgs.iter()
            .map(|m| text_of(m.get("content").unwrap_or(&Value::Null)))
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        match f.get("prompt") {
            Some(p @ (Value::String(_) | Value::Array(_))) => text_of(p),
            _ => return Err(missing("prompt")),
        }
    };
    let model = f
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("sim-gpt")
        .to_owned();
    let max_tokens = f
        .get("max_tokens")
        .or_else(|| f.get("max_completion_tokens"))
        .and_then(Value::as_u64);
    if max_tokens == Some(0) {
        return Err(invalid("max_tokens", "max_tokens must be at least 1"));
    }
    let n = max_tokens.map_or(12, |m| m.min(4096) as usize);
    let finish = if max_tokens.is_some() {
        "length"
    } else {
        "stop"
    };
    let reply = reply_words(&prompt, n);
    // `n` choices are answered; completions generate `best_of` upstream
    // (billed, not all answered).
    let choices = f
        .get("n")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .clamp(1, 128);
    let generated = if chat {
        choices
    } else {
        choices.max(
            f.get("best_of")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .clamp(1, 128),
        )
    };
    let tok = tokens::Tokenizer {
        strict: sh.strict_tokens.load(Ordering::Relaxed),
    };
    let prompt_tokens = if chat {
        tok.chat(&Value::Object(f.clone()))
    } else {
        tok.texts(f.get("prompt").unwrap_or(&Value::Null))
    };
    let completion_tokens = n as u64 * generated;
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens});
    let (id, created) = (
        short_id(if chat { "chatcmpl-" } else { "cmpl-" }),
        unix_now(),
    );
    if let Some(call) = tools::call(&f).filter(|_| chat) {
        return Ok(tools::answer(
            sh,
            &f,
            call,
            prompt_tokens,
            (&id, created, &model),
        ));
    }
    let object = if chat {
        "chat.completion"
    } else {
        "text_completion"
    };
    if f.get("stream").and_then(Value::as_bool) != Some(true) {
        let text = reply.join(" ");
        let all: Vec<Value> = (0..choices)
            .map(|i| {
                if chat {
                    json!({"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": finish, "logprobs": null})
                } else {
                    json!({"index": i, "text": text, "finish_reason": finish, "logprobs": null})
                }
            })
            .collect();
        return Ok(json_response(
            StatusCode::OK,
            &json!({"id": id, "object": object, "created": created, "model": model, "choices": all, "usage": usage}),
        ));
    }
    let chunk_object = if chat {
        "chat.completion.chunk"
    } else {
        "text_completion"
    };
    let chunk = |choice: Value| json!({"id": id, "object": chunk_object, "created": created, "model": model, "choices": [choice]});
    let mut events = Vec::new();
    if chat {
        events.push(chunk(json!({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null})));
    }
    for (i, w) in reply.iter().enumerate() {
        let piece = if i == 0 { w.clone() } else { format!(" {w}") };
        events.push(chunk(if chat {
            json!({"index": 0, "delta": {"content": piece}, "finish_reason": null})
        } else {
            json!({"index": 0, "text": piece, "finish_reason": null})
        }));
    }
    events.push(chunk(if chat {
        json!({"index": 0, "delta": {}, "finish_reason": finish})
    } else {
        json!({"index": 0, "text": "", "finish_reason": finish})
    }));
    if f.get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        == Some(true)
    {
        events.push(json!({"id": id, "object": chunk_object, "created": created, "model": model, "choices": [], "usage": usage}));
    }
    let mut frames: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    frames.push("data: [DONE]\n\n".to_owned());
    Ok(crate::llm::sse_cut(sh, frames, req.break_after))
}

/// Server-sent events, one `data:` line per event, then `data: [DONE]`.
fn sse(sh: &Arc<Shared>, events: Vec<Value>) -> Resp {
    let mut frames: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    frames.push("data: [DONE]\n\n".to_owned());
    crate::llm::sse(sh, frames)
}

fn embeddings(sh: &Arc<Shared>, req: &Req) -> R {
    let f = fields(req)?;
    let input = f
        .get("input")
        .or_else(|| f.get("text"))
        .ok_or_else(|| missing("input"))?;
    let texts: Vec<String> = match input {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect(),
        _ => {
            return Err(invalid(
                "input",
                "'input' must be a non-empty string or array",
            ))
        }
    };
    let dims = match f.get("dimensions").and_then(Value::as_u64) {
        None => 16,
        Some(d) if (1..=4096).contains(&d) => d as usize,
        Some(_) => {
            return Err(invalid(
                "dimensions",
                "dimensions must be between 1 and 4096",
            ))
        }
    };
    let model = f
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("sim-embed");
    let data: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": unit_vector(t, dims)}))
        .collect();
    let tokens = tokens::Tokenizer {
        strict: sh.strict_tokens.load(Ordering::Relaxed),
    }
    .texts(input);
    Ok(json_response(
        StatusCode::OK,
        &json!({"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}),
    ))
}

/// The deterministic unit vector of a text (6 decimal places), also used
/// by [`crate::gemini`].
pub fn unit_vector(t: &str, dims: usize) -> Vec<f64> {
    let raw: Vec<f64> = (0..dims)
        .map(|d| crate::jobs::fnv(&format!("{d}|{t}")) * 2.0 - 1.0)
        .collect();
    let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
    raw.iter()
        .map(|x| ((x / norm) * 1e6).round() / 1e6)
        .collect()
}

fn images(sh: &Arc<Shared>, req: &Req) -> R {
    let f = fields(req)?;
    let prompt = f
        .get("prompt")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| missing("prompt"))?;
    let n = match f.get("n").and_then(Value::as_u64) {
        None => 1,
        Some(n) if (1..=10).contains(&n) => n,
        Some(_) => return Err(invalid("n", "n must be between 1 and 10")),
    };
    if let Some(size) = f.get("size").and_then(Value::as_str) {
        let ok = size
            .split_once('x')
            .is_some_and(|(w, h)| w.parse::<u32>().is_ok() && h.parse::<u32>().is_ok());
        if !ok {
            return Err(invalid("size", "size must look like 1024x1024"));
        }
    }
    let b64 = f.get("response_format").and_then(Value::as_str) == Some("b64_json");
    let mut store = sh.store.lock().unwrap();
    let data: Vec<Value> = (0..n)
        .map(|_| {
            if b64 {
                json!({"b64_json": PNG_1X1, "revised_prompt": prompt})
            } else {
                let id = uuid::Uuid::new_v4().to_string();
                store.images.insert(id.clone());
                json!({"url": format!("{}/__sim/media/{id}.png", sh.root), "revised_prompt": prompt})
            }
        })
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"created": unix_now(), "data": data}),
    ))
}

fn video_create(sh: &Arc<Shared>, req: &Req) -> R {
    let f = fields(req)?;
    let prompt = f
        .get("prompt")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| missing("prompt"))?;
    let seconds = match f.get("seconds") {
        None => "4".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    let id = short_id("video_");
    let mut item = Map::new();
    for (k, v) in [
        ("id", json!(id)),
        ("object", json!("video")),
        (
            "model",
            json!(f
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("sim-video")),
        ),
        ("prompt", json!(prompt)),
        ("created_at", json!(unix_now())),
        (
            "size",
            json!(f.get("size").and_then(Value::as_str).unwrap_or("720x1280")),
        ),
        ("seconds", json!(seconds)),
        ("quality", json!("standard")),
    ] {
        item.insert(k.into(), v);
    }
    let duration = sh.config.read().unwrap().job_duration;
    let mut store = sh.store.lock().unwrap();
    store.seq += 1;
    let video = Video {
        started: Instant::now(),
        duration,
        forced: None,
        seq: store.seq,
        item,
    };
    let out = video.render();
    store.videos.insert(id, video);
    Ok(json_response(StatusCode::OK, &out))
}

fn speech(sh: &Arc<Shared>, req: &Req) -> R {
    let f = fields(req)?;
    let input = f
        .get("input")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| missing("input"))?;
    let speed = f.get("speed").and_then(Value::as_f64).unwrap_or(1.0);
    if !(0.25..=4.0).contains(&speed) {
        return Err(invalid("speed", "speed must be between 0.25 and 4.0"));
    }
    let format = f
        .get("response_format")
        .and_then(Value::as_str)
        .unwrap_or("mp3");
    let spc = sh.config.read().unwrap().seconds_per_char;
    let ms = ((audio::synth_duration_ms(input.chars().count(), spc) as f64 / speed).round() as u64)
        .max(1);
    let (bytes, secs, ctype): (Vec<u8>, f64, &'static str) = match format {
        "mp3" => {
            let (b, secs, _) = audio::mp3_silence(ms, 24000);
            (b, audio::round_ms(secs), "audio/mpeg")
        }
        "wav" => (
            audio::wav_tone(ms, 24000, 16),
            ms as f64 / 1000.0,
            "audio/wav",
        ),
        "pcm" => {
            let wav = audio::wav_tone(ms, 24000, 16);
            (wav[44..].to_vec(), ms as f64 / 1000.0, "audio/pcm")
        }
        other => {
            return Err(invalid(
                "response_format",
                &format!(
                    "response_format '{other}' is not supported by the simulator (mp3, wav, pcm)"
                ),
            ))
        }
    };
    let mut r = full(bytes);
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    r.headers_mut().insert(
        "x-sim-audio-duration",
        HeaderValue::from_str(&secs.to_string()).expect("number"),
    );
    Ok(r)
}

fn transcription(req: &Req, translate: bool) -> R {
    let file = req
        .parts
        .as_ref()
        .and_then(|ps| ps.iter().find(|p| p.name == "file"))
        .ok_or_else(|| missing("file"))?;
    let f = fields(req)?;
    let secs = audio::probe_duration(&file.data);
    let text = "The quick brown fox jumps over the lazy dog.";
    let format = f
        .get("response_format")
        .and_then(Value::as_str)
        .unwrap_or("json");
    let text_resp = |body: String, ctype: &'static str| {
        let mut r = full(body);
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
        r
    };
    let end = format!("00:00:{:06.3}", secs.min(59.999));
    Ok(match format {
        "json" => json_response(
            StatusCode::OK,
            &json!({"text": text, "usage": {"type": "duration", "seconds": secs.ceil()}}),
        ),
        "verbose_json" => json_response(
            StatusCode::OK,
            &json!({
                "task": if translate { "translate" } else { "transcribe" },
                "language": if translate { "english" } else { f.get("language").and_then(Value::as_str).unwrap_or("english") },
                "duration": secs,
                "text": text,
                "segments": [{"id": 0, "seek": 0, "start": 0.0, "end": secs, "text": text}],
                "usage": {"type": "duration", "seconds": secs.ceil()},
            }),
        ),
        "text" => text_resp(format!("{text}\n"), "text/plain"),
        "srt" => text_resp(
            format!("1\n00:00:00,000 --> {}\n{text}\n", end.replace('.', ",")),
            "text/plain",
        ),
        "vtt" => text_resp(
            format!("WEBVTT\n\n00:00:00.000 --> {end}\n{text}\n"),
            "text/vtt",
        ),
        other => {
            return Err(invalid(
                "response_format",
                &format!("unsupported response_format '{other}'"),
            ))
        }
    })
}

/// Decoded [`PNG_1X1`].
pub fn png_bytes() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(PNG_1X1)
        .expect("valid base64")
}
