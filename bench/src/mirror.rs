//! The `mirror` scenario's set-up: an enhance job on an uploaded WAV,
//! completed at the simulator and GET once through the gateway (which
//! copies its result), so that the measured GETs read the mirrored copy.

use std::time::Duration;

use bytes::Bytes;
use http::Method;
use serde_json::json;

use crate::load::{self, Spec};
use crate::plan::Env;
use crate::upload::{self, FileContent};

/// Creates a completed enhance job and performs its first (copying) GET;
/// returns the job id.
pub async fn mirror_setup(env: &Env, timeout: Duration) -> Result<String, String> {
    let gw = env.gateway.0;
    let req = upload::upload_request(
        gw,
        "/api/v1/voice/uploads",
        &env.gateway_auth(),
        "noisy.wav",
        Some("audio_job_input"),
        &FileContent::Bytes(wav_1s()),
    );
    let (status, body, _) = upload::upload(gw, req, timeout).await?;
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
