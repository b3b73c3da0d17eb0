//! The general gateway's speech and transcription routes (area B, issue
//! #12): speech stored and billed in seconds, transcription and translation
//! of real audio streamed upstream and billed in seconds, non-audio refused,
//! and nothing charged for any failure.

use runtime::store::Assets;
use rust_decimal::Decimal;
use serde_json::json;

use crate::harness::*;

/// Posts a multipart form to `/api/v1/audio/stt/<which>`.
pub(crate) async fn stt(
    env: &Env,
    which: &str,
    file: (&str, Vec<u8>),
    fields: &[(&str, &str)],
) -> Answer {
    let mut form = reqwest::multipart::Form::new();
    for (k, v) in fields {
        form = form.text(k.to_string(), v.to_string());
    }
    form = form.part(
        "file",
        reqwest::multipart::Part::bytes(file.1).file_name(file.0.to_owned()),
    );
    let r = env
        .client
        .post(env.url(&format!("/api/v1/audio/stt/{which}")))
        .bearer_auth(&env.key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    Answer::from(r).await
}

pub(crate) fn spool_is_empty(env: &Env) -> bool {
    // This instance's own spool directory (`runtime::spool`).
    let dir = env.gw.gateway.spool.path();
    std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none())
}

#[tokio::test]
async fn speech_is_stored_fetchable_and_billed_by_its_seconds() {
    let env = media_env().await;
    env.grant("1");
    // 11 characters at the simulator's 0.06 s each: 0.66 s of WAV.
    let a = env
        .api(
            "/audio/tts/generations",
            json!({"model": "sim/sim-tts", "input": "hello world", "voice": "alloy",
                   "response_format": "wav"}),
        )
        .await;
    a.expect(200);
    assert_eq!(a.json["audio_duration"], json!(0.66));
    assert_eq!(a.json["billing"]["unit"], "audio_seconds");
    assert_eq!(a.json["billing"]["quantity"], "0.66");
    // 0.66 s at 0.01 USD, +20 %.
    assert_eq!(a.json["billing"]["charged"], "0.00792");
    let url = a.json["audio_url"].as_str().unwrap();
    assert!(url.starts_with(&env.gw.url()), "{url}");
    let r = env.client.get(url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(&r.bytes().await.unwrap()[..4], b"RIFF");
    let assets = env.store().assets().unwrap();
    assert_eq!(assets.len(), 1);
    assert_eq!(assets[0].class, "speech");
    assert!(assets[0].expires_at.is_some(), "stored 7 days");
    assert!(
        assets[0].pack.is_some() && env.packed_keys().len() == 1,
        "packed in a segment of the local store"
    );
    let u = env.usage();
    assert_eq!(u.len(), 1);
    assert_eq!(
        (u[0].unit.as_str(), u[0].quantity, u[0].charged),
        ("audio_seconds", d("0.66"), d("0.00792"))
    );
    assert_eq!(env.balance(), d("0.99208"));
    // The default format is MP3, measured by decoding it.
    let a = env
        .api("/audio/tts/generations", json!({"input": "hello world"}))
        .await;
    a.expect(200);
    let secs = a.json["audio_duration"].as_f64().unwrap();
    assert!((0.6..0.8).contains(&secs), "{secs}");
    let r = env
        .client
        .get(a.json["audio_url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // The speed range is enforced before any upstream call.
    env.clear_sim_log().await;
    let before = env.balance();
    for speed in [0.1, 0.24, 4.01, 10.0] {
        let a = env
            .api(
                "/audio/tts/generations",
                json!({"input": "hello", "speed": speed}),
            )
            .await;
        envelope(&a, 400);
    }
    for bad in [
        json!({"voice": "alloy"}),
        json!({"input": "hello", "response_format": "opus"}),
        json!({"input": "hello", "model": "sim/sim-gpt"}),
    ] {
        envelope(&env.api("/audio/tts/generations", bad).await, 400);
    }
    env.assert_no_upstream_call().await;
    assert_eq!(env.balance(), before);
    // Both ends of the range are accepted; faster speech is shorter.
    let slow = env
        .api(
            "/audio/tts/generations",
            json!({"input": "hello world", "speed": 0.25, "response_format": "wav"}),
        )
        .await;
    slow.expect(200);
    assert_eq!(slow.json["audio_duration"], json!(2.64));
    let fast = env
        .api(
            "/audio/tts/generations",
            json!({"input": "hello world", "speed": 4.0, "response_format": "wav"}),
        )
        .await;
    fast.expect(200);
    assert_eq!(fast.json["audio_duration"], json!(0.165));
}

#[tokio::test]
async fn failed_speech_charges_nothing_and_stores_nothing() {
    let env = media_env().await;
    env.grant("1");
    env.fault(json!({"path": "/v1/audio/speech", "fault": {"status": 500}}))
        .await;
    let a = env
        .api("/audio/tts/generations", json!({"input": "hello world"}))
        .await;
    assert!(a.status >= 500, "{} {}", a.status, a.text);
    envelope(&a, a.status);
    // A provider answering something that is not audio.
    env.fault(json!({"path": "/v1/audio/speech", "fault": {"status": 200, "body": "garbage"}}))
        .await;
    let a = env
        .api("/audio/tts/generations", json!({"input": "hello world"}))
        .await;
    envelope(&a, 500);
    // Too little credit for the hold: 402 with no upstream call.
    let env2 = media_env().await;
    env2.clear_sim_log().await;
    envelope(
        &env2
            .api("/audio/tts/generations", json!({"input": "hello world"}))
            .await,
        402,
    );
    env2.assert_no_upstream_call().await;
    nothing_charged(&env, d("1")).await;
    assert!(env.object_keys().is_empty());
    assert!(env.store().assets().unwrap().is_empty());
}

#[tokio::test]
async fn transcription_and_translation_of_a_real_wav_are_billed_in_seconds() {
    let env = media_env().await;
    env.grant("1");
    let a = stt(
        &env,
        "transcriptions",
        ("talk.wav", wav(2.5)),
        &[("model", "sim/sim-whisper"), ("language", "en")],
    )
    .await;
    a.expect(200);
    assert!(a.json["text"].as_str().unwrap().contains("quick brown fox"));
    assert_eq!(a.json["billing"]["quantity"], "2.5");
    // 2.5 s at 0.006 USD, +20 %.
    assert_eq!(a.json["billing"]["charged"], "0.018");
    // The file reached the provider as a multipart upload.
    let reqs = env.sim_requests().await;
    let up = reqs
        .iter()
        .find(|r| r["path"] == "/v1/audio/transcriptions")
        .unwrap_or_else(|| panic!("{reqs:#?}"));
    let parts = up["parts"].as_array().unwrap();
    let part = |n: &str| parts.iter().find(|p| p["name"] == n).unwrap();
    assert_eq!(part("model")["value"], "sim-whisper");
    assert_eq!(part("language")["value"], "en");
    assert_eq!(part("file")["size"], json!(wav(2.5).len()));
    assert_eq!(part("file")["filename"], "talk.wav");
    let a = stt(
        &env,
        "translations",
        ("talk.wav", wav(1.0)),
        &[("response_format", "verbose_json")],
    )
    .await;
    a.expect(200);
    assert_eq!(a.json["task"], "translate");
    assert_eq!(a.json["language"], "english");
    assert_eq!(a.json["billing"]["quantity"], "1");
    // A text answer stays text.
    let a = stt(
        &env,
        "transcriptions",
        ("talk.wav", wav(0.5)),
        &[("response_format", "text")],
    )
    .await;
    a.expect(200);
    assert!(a.text.starts_with("The quick brown fox"), "{}", a.text);
    assert_eq!(a.header("x-billed-audio-seconds"), Some("0.5"));
    let u = env.usage();
    let got: Vec<(&str, Decimal, Decimal)> = u
        .iter()
        .map(|u| (u.unit.as_str(), u.quantity, u.charged))
        .collect();
    assert_eq!(
        got,
        vec![
            ("audio_seconds", d("2.5"), d("0.018")),
            ("audio_seconds", d("1"), d("0.0072")),
            ("audio_seconds", d("0.5"), d("0.0036")),
        ]
    );
    assert_eq!(env.balance(), d("0.9712"));
    assert!(spool_is_empty(&env), "the spool file is removed");
}

#[tokio::test]
async fn a_file_that_is_not_audio_is_refused_and_nothing_is_charged() {
    let env = media_env().await;
    env.grant("1");
    env.clear_sim_log().await;
    for (name, bytes) in [
        ("doc.pdf", b"%PDF-1.7 not audio at all".to_vec()),
        ("fake.wav", b"this is plain text pretending".to_vec()),
        // RIFF/WAVE magic but no decodable audio.
        ("broken.wav", b"RIFF\x10\x00\x00\x00WAVEjunkjunk".to_vec()),
    ] {
        let a = stt(&env, "transcriptions", (name, bytes), &[]).await;
        envelope(&a, 400);
    }
    // No file at all, a bad response_format, a non-multipart body.
    let a = env
        .client
        .post(env.url("/api/v1/audio/stt/transcriptions"))
        .bearer_auth(&env.key)
        .multipart(reqwest::multipart::Form::new().text("model", "sim/sim-whisper"))
        .send()
        .await
        .unwrap();
    envelope(&Answer::from(a).await, 400);
    let a = stt(
        &env,
        "translations",
        ("a.wav", wav(0.5)),
        &[("response_format", "xml")],
    )
    .await;
    envelope(&a, 400);
    envelope(
        &env.api("/audio/stt/transcriptions", json!({"file": "x"}))
            .await,
        400,
    );
    env.assert_no_upstream_call().await;
    nothing_charged(&env, d("1")).await;
    assert!(env.usage().is_empty());
    assert!(spool_is_empty(&env));
}

#[tokio::test]
async fn failed_transcriptions_charge_nothing_and_large_files_are_413() {
    let env = media_env().await;
    env.grant("1");
    env.fault(json!({"path": "/v1/audio/transcriptions", "fault": {"status": 503}}))
        .await;
    let a = stt(&env, "transcriptions", ("a.wav", wav(1.0)), &[]).await;
    assert!(a.status >= 500, "{} {}", a.status, a.text);
    envelope(&a, a.status);
    env.fault(json!({"path": "/v1/audio/translations", "fault": "reset"}))
        .await;
    let a = stt(&env, "translations", ("a.wav", wav(1.0)), &[]).await;
    assert!(a.status >= 500, "{} {}", a.status, a.text);
    // Over the documented 25 MiB: 413 while streaming, nothing sent upstream.
    env.clear_sim_log().await;
    let mut big = wav(1.0);
    big.resize((25 << 20) + 1024, 0);
    let a = stt(&env, "transcriptions", ("big.wav", big), &[]).await;
    envelope(&a, 413);
    env.assert_no_upstream_call().await;
    nothing_charged(&env, d("1")).await;
    assert!(env.usage().is_empty());
    assert!(spool_is_empty(&env));
}
