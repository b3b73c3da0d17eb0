//! The control plane under `/__sim` (no credentials, never faulted, never
//! logged) and result media.
//!
//! | Method | Path | Body → answer |
//! |---|---|---|
//! | GET | `/__sim/health` | `{"ok": true}` |
//! | GET / DELETE | `/__sim/requests` | `{"requests": [entry...]}` / clears (see [`crate::log`]) |
//! | POST | `/__sim/faults` | a rule (see [`crate::faults`]) → `{"success": true, "id": N}` |
//! | GET / DELETE | `/__sim/faults` | `{"faults": [{id, rule, remaining}]}` / clears |
//! | GET | `/__sim/jobs` | `{"jobs": [{kind, uuid, status, notified}]}` |
//! | POST | `/__sim/jobs/{uuid}/complete`, `/__sim/jobs/{uuid}/fail` | → `{"success": true, "items": [...]}`, 404 unknown (also OpenAI video ids) |
//! | GET / POST | `/__sim/config` | `{"job_duration_ms"?, "webhook_url"?, "webhook_secret"?, "api_key"?, "seconds_per_char"?, "stream_delay_ms"?, "stream_linger_ms"?, "background_ms"?, "strict_tokens"?, "tts_chunk_ms"?, "stt_duration_factor"?, "realtime_delta_ms"?, "realtime_usage_factor"?}` (null clears) → the current config |
//! | GET / DELETE | `/__sim/realtime/events` | `{"events": [{at, api, session_id, kind, event, bytes}]}`: every message WebSocket clients sent (OpenAI Realtime, Deepgram live), in order (see [`crate::log::ClientEvents`]) / clears |
//! | GET / DELETE | `/__sim/webhooks` | `{"webhooks": [{url, event, kind, id, signature, attempts, status, error, body}]}` / clears |
//! | POST | `/__sim/billing_usage` | `{"date": "YYYY-MM-DD", "items": {"synth": "8450", ...}}` replaces that day |
//! | POST | `/__sim/reset` | forgets all resources, jobs, usage, log, client events, faults and webhook records (and stored OpenAI responses, Anthropic prompt-cache prefixes, Gemini cached contents) |
//! | GET | `/__sim/media/{id}.wav` / `.mp3` / `.png` | result audio, generated images (logged and faultable like provider calls) |

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, StatusCode};
use serde_json::{json, Value};

use crate::jobs::{self, Status};
use crate::request::Req;
use crate::resources::{render_audio, Store};
use crate::response::{bad_field, error, full, not_found, ok, Resp};
use crate::shared::Shared;

/// Handles a `/__sim/...` control request.
pub fn handle(sh: &Arc<Shared>, req: &Req) -> Resp {
    let path = req.path.trim_end_matches('/');
    let segs: Vec<&str> = path
        .trim_start_matches("/__sim")
        .trim_start_matches('/')
        .split('/')
        .collect();
    let done = || ok(json!({"success": true}));
    match (req.method.as_str(), segs.as_slice()) {
        ("GET", ["health"]) => ok(json!({"ok": true})),
        ("GET", ["requests"]) => ok(json!({"requests": sh.log.render()})),
        ("DELETE", ["requests"]) => {
            sh.log.clear();
            done()
        }
        ("POST", ["faults"]) => match body_json(req) {
            Ok(rule) => match sh.faults.add(&rule) {
                Ok(id) => ok(json!({"success": true, "id": id})),
                Err(e) => error(StatusCode::BAD_REQUEST, &e, None),
            },
            Err(r) => r,
        },
        ("GET", ["faults"]) => ok(json!({"faults": sh.faults.list()})),
        ("DELETE", ["faults"]) => {
            sh.faults.clear();
            done()
        }
        ("GET", ["jobs"]) => ok(jobs_json(sh)),
        ("POST", ["jobs", id, action @ ("complete" | "fail")]) => {
            force_job(sh, id, *action == "complete")
        }
        ("GET", ["config"]) => ok(config_json(sh)),
        ("POST", ["config"]) => match body_json(req) {
            Ok(v) => match set_config(sh, &v) {
                Ok(()) => ok(config_json(sh)),
                Err(r) => r,
            },
            Err(r) => r,
        },
        ("GET", ["realtime", "events"]) => ok(json!({"events": sh.ws_events.render()})),
        ("DELETE", ["realtime", "events"]) => {
            sh.ws_events.clear();
            done()
        }
        ("GET", ["webhooks"]) => ok(json!({"webhooks": sh.webhook_log()})),
        ("DELETE", ["webhooks"]) => {
            sh.clear_webhooks();
            done()
        }
        ("POST", ["billing_usage"]) => set_billing_usage(sh, req),
        ("POST", ["reset"]) => {
            *sh.store.lock().unwrap() = Store::new();
            sh.log.clear();
            sh.ws_events.clear();
            sh.faults.clear();
            sh.clear_webhooks();
            done()
        }
        _ => not_found("control route"),
    }
}

/// `GET /__sim/jobs`: every job, oldest first, with its status now.
fn jobs_json(sh: &Shared) -> Value {
    let store = sh.store.lock().unwrap();
    let mut list: Vec<&jobs::Job> = store.jobs.values().collect();
    list.sort_by_key(|j| j.seq);
    let jobs: Vec<Value> = list
            .iter()
            .map(|j| json!({"kind": j.kind.as_str(), "uuid": j.uuid, "status": j.status().as_str(), "notified": j.notified}))
            .collect();
    json!({"jobs": jobs})
}

/// `POST /__sim/jobs/{id}/complete` or `/fail`: a voice-provider job, else
/// an OpenAI video with that id, ends now.
fn force_job(sh: &Arc<Shared>, id: &str, complete: bool) -> Resp {
    let status = if complete {
        Status::Completed
    } else {
        Status::Failed
    };
    if let Some(items) = jobs::force(sh, id, status) {
        return ok(json!({"success": true, "items": items}));
    }
    let video_status = if complete { "completed" } else { "failed" };
    match crate::openai::force_video(sh, id, video_status) {
        Some(item) => ok(json!({"success": true, "items": [item]})),
        None => not_found("job"),
    }
}

/// `POST /__sim/billing_usage`: replaces one day of the usage counters.
fn set_billing_usage(sh: &Shared, req: &Req) -> Resp {
    let v = match body_json(req) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let Some(date) = v.get("date").and_then(Value::as_str) else {
        return bad_field("date", "is required");
    };
    let Ok(day) = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d") else {
        return bad_field("date", "must be YYYY-MM-DD");
    };
    let Some(items) = v.get("items").and_then(Value::as_object) else {
        return bad_field("items", "must be an object");
    };
    match sh.store.lock().unwrap().billing.set_day(day, items) {
        Ok(()) => ok(json!({"success": true})),
        Err(e) => error(StatusCode::BAD_REQUEST, &e, None),
    }
}

fn body_json(req: &Req) -> Result<Value, Resp> {
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    serde_json::from_slice(&req.body)
        .map_err(|e| error(StatusCode::BAD_REQUEST, &format!("invalid JSON: {e}"), None))
}

fn config_json(sh: &Shared) -> Value {
    let c = sh.config.read().unwrap();
    json!({
        "job_duration_ms": c.job_duration.as_millis() as u64,
        "webhook_url": c.webhook_url,
        "webhook_secret": c.webhook_secret,
        "api_key": c.api_key,
        "seconds_per_char": c.seconds_per_char,
        "tts_chunk_ms": c.tts_chunk_ms,
        "stt_duration_factor": c.stt_duration_factor,
        "realtime_delta_ms": c.realtime_delta_ms,
        "realtime_usage_factor": c.realtime_usage_factor,
        "stream_delay_ms": sh.stream_delay_ms.load(std::sync::atomic::Ordering::Relaxed),
        "stream_linger_ms": sh.stream_linger_ms.load(std::sync::atomic::Ordering::Relaxed),
        "background_ms": sh.background_ms.load(std::sync::atomic::Ordering::Relaxed),
        "strict_tokens": sh.strict_tokens.load(std::sync::atomic::Ordering::Relaxed),
    })
}

fn set_config(sh: &Shared, v: &Value) -> Result<(), Resp> {
    let opt_string = |key: &str| -> Result<Option<Option<String>>, Resp> {
        match v.get(key) {
            None => Ok(None),
            Some(Value::Null) => Ok(Some(None)),
            Some(Value::String(s)) => Ok(Some(Some(s.clone()))),
            Some(_) => Err(bad_field(key, "must be a string or null")),
        }
    };
    let duration = non_negative_int(v, "job_duration_ms")?.map(Duration::from_millis);
    let spc = non_negative(v, "seconds_per_char")?;
    let factor = non_negative(v, "stt_duration_factor")?;
    let chunk_ms = non_negative_int(v, "tts_chunk_ms")?;
    let delta_ms = non_negative_int(v, "realtime_delta_ms")?;
    let usage_factor = non_negative(v, "realtime_usage_factor")?;
    let (url, secret, key) = (
        opt_string("webhook_url")?,
        opt_string("webhook_secret")?,
        opt_string("api_key")?,
    );
    for (key, ms) in [
        ("stream_delay_ms", &sh.stream_delay_ms),
        ("stream_linger_ms", &sh.stream_linger_ms),
        ("background_ms", &sh.background_ms),
    ] {
        if let Some(d) = v.get(key) {
            let d = d
                .as_u64()
                .ok_or_else(|| bad_field(key, "must be a non-negative integer"))?;
            ms.store(d, std::sync::atomic::Ordering::Relaxed);
        }
    }
    if let Some(s) = v.get("strict_tokens") {
        let s = s
            .as_bool()
            .ok_or_else(|| bad_field("strict_tokens", "must be true or false"))?;
        sh.strict_tokens
            .store(s, std::sync::atomic::Ordering::Relaxed);
    }
    let mut c = sh.config.write().unwrap();
    if let Some(d) = duration {
        c.job_duration = d;
    }
    if let Some(s) = spc {
        c.seconds_per_char = s;
    }
    if let Some(f) = factor {
        c.stt_duration_factor = f;
    }
    if let Some(ms) = chunk_ms {
        c.tts_chunk_ms = ms;
    }
    if let Some(ms) = delta_ms {
        c.realtime_delta_ms = ms;
    }
    if let Some(f) = usage_factor {
        c.realtime_usage_factor = f;
    }
    if let Some(u) = url {
        c.webhook_url = u;
    }
    if let Some(s) = secret {
        c.webhook_secret = s;
    }
    if let Some(k) = key {
        c.api_key = k;
    }
    Ok(())
}

/// `v[key]` when present: a non-negative integer, else a 400.
fn non_negative_int(v: &Value, key: &str) -> Result<Option<u64>, Resp> {
    match v.get(key) {
        None => Ok(None),
        Some(d) => d
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad_field(key, "must be a non-negative integer")),
    }
}

/// `v[key]` when present: a non-negative number, else a 400.
fn non_negative(v: &Value, key: &str) -> Result<Option<f64>, Resp> {
    match v.get(key) {
        None => Ok(None),
        Some(s) => s
            .as_f64()
            .filter(|x| *x >= 0.0)
            .map(Some)
            .ok_or_else(|| bad_field(key, "must be a non-negative number")),
    }
}

/// Serves `/__sim/media/{id}.wav` or `.mp3` (22.05 kHz).
pub fn media(sh: &Arc<Shared>, req: &Req) -> Resp {
    if req.method != http::Method::GET && req.method != http::Method::HEAD {
        return error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed", None);
    }
    let name = req.path.trim_start_matches("/__sim/media/");
    let Some((id, ext)) = name.rsplit_once('.') else {
        return not_found("media");
    };
    let mp3 = match ext {
        "wav" => false,
        "mp3" => true,
        "png" if sh.store.lock().unwrap().images.contains(id) => {
            let mut r = full(crate::openai::png_bytes());
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("image/png"));
            return r;
        }
        _ => return not_found("media"),
    };
    let Some(secs) = sh.store.lock().unwrap().media_duration(id) else {
        return not_found("media");
    };
    let ms = ((secs * 1000.0).round() as u64).max(1);
    let audio = render_audio(sh, mp3, 22050, 16, ms);
    let mut r = full(if req.method == http::Method::HEAD {
        Bytes::new()
    } else {
        audio.bytes.clone()
    });
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(if mp3 { "audio/mpeg" } else { "audio/wav" }),
    );
    r.headers_mut().insert(
        http::header::CONTENT_LENGTH,
        HeaderValue::from(audio.bytes.len()),
    );
    r
}
