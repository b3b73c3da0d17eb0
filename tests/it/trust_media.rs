//! Issue #37 ("Trust, round 2"), findings 8, 10 and 11, one test each or
//! more, over HTTP, each checking what was (not) written:
//!
//! * 8 — a deleted media file's presigned URLs, answered before the
//!   delete (by the upload, `GET /media/{id}`, the list), answer 404 right
//!   after it, on the local store and on S3; the object is gone at once.
//! * 10 — seconds come from a WAV's samples: a header whose fields
//!   disagree with each other or with the bytes is a 400 (the caller's
//!   upload) or a provider failure (a provider's audio), nothing charged or
//!   stored; a
//!   consistent one is billed its frames ÷ rate to the 8th decimal.
//! * 11 — under umask 000, the spool (its directory, the instance's
//!   directory, its lock file, an upload in flight) and every other file
//!   the gateway makes in its data directory are 0700 / 0600.

use std::time::{Duration, Instant};

use base64::Engine;
use runtime::store::Assets;
use rust_decimal::Decimal;
use serde_json::json;

use crate::harness::*;
use crate::media_files::{file, format1, media, png, post_media, text};
use crate::probe_accounts::{gateway, mail_a_reset, not_private, serve};
use crate::speech_transcription::spool_is_empty;

// ---------------------------------------------------------------------------
// 8: a delete stops every URL at once
// ---------------------------------------------------------------------------

/// A gateway whose object store is the in-process S3 server (kept alive
/// by the first element).
async fn s3_env() -> (runtime::objects::testing::S3TestServer, Env) {
    let s3 = runtime::objects::testing::S3TestServer::start().unwrap();
    s3.store("gateway").await.unwrap(); // creates the bucket
    let vars = s3.env("gateway");
    let config = runtime::objects::ObjectConfig::from_lookup(|name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    })
    .unwrap();
    (s3, Env::with(move |c| c.objects = config).await)
}

/// `GET url` (with `Range: bytes=0-3` when `ranged`, or `HEAD`): the status
/// and the body.
async fn fetch(env: &Env, method: &str, url: &str, ranged: bool) -> (u16, Vec<u8>) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut rb = env.client.request(method, url);
    if ranged {
        rb = rb.header("range", "bytes=0-3");
    }
    let r = rb.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.bytes().await.unwrap().to_vec())
}

/// Whether the gateway's object store holds `key`.
async fn stored(env: &Env, key: &str) -> bool {
    env.gw.gateway.objects.exists(key).await.unwrap()
}

/// Uploads an image and an audio file, takes the image's URL from every
/// answer that gives one (the upload, `GET /media/{id}`, the list), deletes
/// the image, and checks that every one of those URLs answers 404 at once
/// (`HEAD` too where the URL allows it), the audio file's still 200; the
/// object is gone from the store, the record marked deleted.
async fn a_delete_stops_every_url(env: &Env, head: bool) {
    let image = png();
    let a = post_media(
        env,
        &env.key,
        vec![
            ("file_type", text("image")),
            ("file", file(image.clone(), "a.png")),
        ],
    )
    .await;
    a.expect(200);
    let id = a.json["id"].as_i64().unwrap();
    let b = post_media(
        env,
        &env.key,
        vec![
            ("file_type", text("audio")),
            ("file", file(wav(0.5), "b.wav")),
        ],
    )
    .await;
    b.expect(200);
    let other = b.json["url"].as_str().unwrap().to_owned();
    let g = media(env, &env.key, "GET", &format!("/{id}")).await;
    g.expect(200);
    let l = media(env, &env.key, "GET", "").await;
    l.expect(200);
    let listed = l.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"].as_i64() == Some(id))
        .unwrap()["url"]
        .clone();
    let urls: Vec<String> = [&a.json["url"], &g.json["url"], &listed]
        .iter()
        .map(|u| u.as_str().unwrap().to_owned())
        .collect();
    let methods: &[&str] = if head { &["GET", "HEAD"] } else { &["GET"] };
    for url in &urls {
        assert_eq!(fetch(env, "GET", url, false).await, (200, image.clone()));
        assert_eq!(
            fetch(env, "GET", url, true).await,
            (206, image[..4].to_vec())
        );
        for m in methods {
            assert_eq!(fetch(env, m, url, false).await.0 / 100, 2, "{m} {url}");
        }
    }
    let row = env.store().asset(id).unwrap().unwrap();
    assert!(stored(env, &row.object_key).await);

    let d = media(env, &env.key, "DELETE", &format!("/{id}")).await;
    d.expect(200);
    assert_eq!(d.json, json!({"id": id, "deleted": true}));
    // At once: every URL answered before is refused, whatever the request.
    for url in &urls {
        for ranged in [false, true] {
            let (status, _) = fetch(env, "GET", url, ranged).await;
            assert!(matches!(status, 404 | 410), "GET {url}: {status}");
        }
        for m in methods {
            let (status, _) = fetch(env, m, url, false).await;
            assert!(matches!(status, 404 | 410), "{m} {url}: {status}");
        }
    }
    assert_eq!(fetch(env, "GET", &other, false).await.0, 200);
    // Written: the object is gone, the record kept and marked deleted; the
    // API answers 404; the other file is untouched.
    assert!(!stored(env, &row.object_key).await);
    let gone = env.store().asset(id).unwrap().unwrap();
    assert!(gone.deleted_at.is_some(), "{gone:?}");
    assert_eq!(
        format1(&media(env, &env.key, "GET", &format!("/{id}")).await, 404),
        "media file not found or soft-deleted"
    );
    let l = media(env, &env.key, "GET", "").await;
    assert_eq!(l.json["total"], json!(1));
    let kept = env.store().asset(b.json["id"].as_i64().unwrap()).unwrap();
    let kept = kept.unwrap();
    assert!(kept.deleted_at.is_none() && stored(env, &kept.object_key).await);
    // Nothing was left for the sweeper; media files are free.
    let report = runtime::retention::sweep_once(&env.gw.gateway).await;
    assert_eq!(report.deleted, 0, "{report:?}");
    assert!(env.usage().iter().all(|u| u.charged == Decimal::ZERO));
}

/// Finding 8 on the local store: its own `/objects/...` URLs (GET, ranged
/// GET, HEAD) answer 404 right after the delete.
#[tokio::test]
async fn f8_a_deleted_media_files_local_urls_answer_404_at_once() {
    let env = Env::start().await;
    a_delete_stops_every_url(&env, true).await;
}

/// Finding 8 on S3: its presigned URLs (signed by S3 itself, GET only)
/// answer 404 right after the delete.
#[tokio::test]
async fn f8_a_deleted_media_files_s3_urls_answer_404_at_once() {
    let (s3, env) = s3_env().await;
    a_delete_stops_every_url(&env, false).await;
    drop(env);
    drop(s3);
}

// ---------------------------------------------------------------------------
// 10: seconds from the samples
// ---------------------------------------------------------------------------

/// A WAV written by `hound`: `frames` frames of `channels` × `bits` (a
/// float format when `float`) at `rate` Hz.
fn wav_of(rate: u32, channels: u16, bits: u16, float: bool, frames: u32) -> Vec<u8> {
    let mut buf = std::io::Cursor::new(Vec::new());
    let spec = hound::WavSpec {
        channels,
        sample_rate: rate,
        bits_per_sample: bits,
        sample_format: if float {
            hound::SampleFormat::Float
        } else {
            hound::SampleFormat::Int
        },
    };
    let mut w = hound::WavWriter::new(&mut buf, spec).unwrap();
    for i in 0..frames * u32::from(channels) {
        if float {
            w.write_sample((i % 50) as f32 / 100.0).unwrap();
        } else {
            w.write_sample((i % 50) as i32 + 1).unwrap();
        }
    }
    w.finalize().unwrap();
    buf.into_inner()
}

/// `w` (a 44-byte-header WAV: `fmt ` at 12, `data` at 36) with the 2 or 4
/// bytes at `at` set to `v`: 20 the format, 22 channels, 24 rate, 28 byte
/// rate, 32 block_align, 34 bits, 40 the data size.
fn set(mut w: Vec<u8>, at: usize, v: u32) -> Vec<u8> {
    if matches!(at, 20 | 22 | 32 | 34) {
        w[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
    } else {
        w[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    w
}

/// Posts `file` to `/api/v1/audio/stt/<which>` with `sim/sim-whisper`.
async fn stt(env: &Env, which: &str, file: Vec<u8>) -> Answer {
    crate::speech_transcription::stt(
        env,
        which,
        ("talk.wav", file),
        &[("model", "sim/sim-whisper")],
    )
    .await
}

/// Finding 10: a transcription (or translation) of a WAV whose header
/// disagrees with itself or with its bytes is a 400 in the route's format
/// naming what disagrees: no upstream call, no charge, no hold, no usage,
/// nothing left in the spool. (The probe's two: a minute billed 0.12 s.)
#[tokio::test]
async fn f10_transcribing_a_wav_with_an_inconsistent_header_is_400_and_charges_nothing() {
    let env = media_env().await;
    env.grant("1");
    let minute = || wav(60.0);
    let cases = [
        // block_align 1000 for 16-bit mono, the byte rate made to match.
        (
            set(set(minute(), 32, 1000), 28, 16_000_000),
            "block_align 1000",
        ),
        // A sample rate of 8 MHz, the byte rate made to match.
        (
            set(set(minute(), 24, 8_000_000), 28, 16_000_000),
            "sample rate of 8000000",
        ),
        (set(minute(), 24, 500), "sample rate of 500"),
        // A byte rate that is not rate × block_align.
        (set(minute(), 28, 16_000), "byte rate of 16000"),
        // Two channels in frames of one channel's size.
        (set(minute(), 22, 2), "block_align 2 is not channels (2)"),
        // Bits that are no sample size; no channel.
        (set(set(minute(), 34, 12), 28, 32_000), "12 bits"),
        (set(minute(), 22, 0), "0 channels"),
        // A data size smaller than the samples that follow it.
        (set(minute(), 40, 16_000), "followed by"),
    ];
    // Samples that are not whole frames (a byte more than a second).
    let mut odd = wav(1.0);
    odd.push(7);
    let size = (odd.len() - 44) as u32;
    let cases = cases
        .into_iter()
        .chain([(set(odd, 40, size), "not whole frames")]);
    for (i, (file, what)) in cases.enumerate() {
        let which = if i % 2 == 0 {
            "transcriptions"
        } else {
            "translations"
        };
        let a = stt(&env, which, file).await;
        let message = envelope(&a, 400);
        assert!(
            message.contains("inconsistent WAV header") && message.contains(what),
            "{i}: {message}"
        );
    }
    env.assert_no_upstream_call().await;
    nothing_charged(&env, d("1")).await;
    assert!(env.usage().is_empty(), "{:?}", env.usage());
    assert!(spool_is_empty(&env));
}

/// Finding 10: consistent WAVs are billed the seconds of their samples,
/// frames ÷ rate to the 8th decimal (half away from zero), whatever their
/// layout (16/24-bit, 8-bit, float, stereo), their data size unknown
/// (`0xFFFFFFFF`, a WAV written as a stream) or followed by a `LIST`
/// chunk; the charge is those seconds × 0.006 USD + 20 %, to the 8th
/// decimal, in the answer and in the usage record. A compressed WAV is
/// billed as containers the gateway cannot measure are.
#[tokio::test]
async fn f10_consistent_wavs_are_billed_the_seconds_of_their_samples_to_the_8th_decimal() {
    let env = media_env().await;
    env.grant("1");
    let mut streamed = wav(2.5);
    streamed[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    let streamed = set(streamed, 40, u32::MAX);
    let mut listed = wav_of(16_000, 1, 16, false, 16_001);
    listed.extend_from_slice(b"LIST\x04\0\0\0INFO");
    let cases = [
        (
            wav_of(44_100, 2, 16, false, 44_101),
            "1.00002268",
            "0.00720016",
        ),
        (
            wav_of(48_000, 1, 24, false, 24_001),
            "0.50002083",
            "0.00360015",
        ),
        (wav_of(8_000, 1, 8, false, 8_000), "1", "0.0072"),
        (
            wav_of(22_050, 1, 32, true, 22_051),
            "1.00004535",
            "0.00720033",
        ),
        (streamed, "2.5", "0.018"),
        (listed, "1.0000625", "0.00720045"),
    ];
    let mut spent = Decimal::ZERO;
    for (i, (file, seconds, charged)) in cases.into_iter().enumerate() {
        let size = file.len();
        let a = stt(&env, "transcriptions", file).await;
        a.expect(200);
        assert_eq!(
            (
                &a.json["billing"]["quantity"],
                &a.json["billing"]["charged"]
            ),
            (&json!(seconds), &json!(charged)),
            "{i}"
        );
        let u = env.usage();
        assert_eq!(
            (u[i].unit.as_str(), u[i].quantity, u[i].charged),
            ("audio_seconds", d(seconds), d(charged)),
            "{i}"
        );
        spent += d(charged);
        // The file went upstream whole, as received.
        let reqs = env.sim_requests().await;
        let part = reqs.last().unwrap()["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "file")
            .cloned()
            .unwrap();
        assert_eq!(part["size"], json!(size), "{i}");
    }
    // A compressed WAV (IMA ADPCM) is not counted from its bytes: it is
    // billed as an unmeasured container, the provider's seconds (1) at most
    // the bound of its size (9 s for 8 236 bytes).
    let adpcm = [(20, 0x0011), (28, 4_055), (32, 256), (34, 4)]
        .into_iter()
        .fold(wav(0.256), |w, (at, v)| set(w, at, v));
    let a = stt(&env, "transcriptions", adpcm).await;
    a.expect(200);
    assert_eq!(a.json["billing"]["quantity"], "1");
    let u = env.usage();
    assert_eq!(
        (u.len(), u[6].quantity, u[6].charged),
        (7, d("1"), d("0.0072"))
    );
    spent += d("0.0072");
    assert_eq!(env.balance(), d("1") - spent);
    env.wait_no_holds().await;
    assert!(spool_is_empty(&env));
}

/// Finding 10 on what providers answer: synthesis audio (voice API) or
/// speech audio (general gateway) in a WAV whose header disagrees is a
/// provider failure (502; 500 in the envelope format), nothing charged or
/// stored; a consistent synthesis WAV is billed its
/// samples' seconds to the 8th decimal (0.0005 USD a second + 20 %).
#[tokio::test]
async fn f10_provider_wavs_with_an_inconsistent_header_are_a_provider_failure_charging_nothing() {
    let b64 = |w: Vec<u8>| base64::engine::general_purpose::STANDARD.encode(w);
    let env = Env::start().await;
    env.grant("10");
    // A minute with block_align 1000: 0.12 s before.
    let bad = set(set(wav(60.0), 32, 1000), 28, 16_000_000);
    env.fault(
        json!({"path": "/synthesize", "fault": {"status": 200, "body": {
        "success": true, "audio_content": b64(bad), "duration": 60, "output_format": "wav"}}}),
    )
    .await;
    let a = env.post("/tts/synthesize", synth_body("Hello there")).await;
    a.expect(502);
    nothing_charged(&env, d("10")).await;
    assert!(env.usage().is_empty(), "{:?}", env.usage());
    assert!(env.store().assets().unwrap().is_empty());
    // A consistent one: 44 101 frames at 44.1 kHz.
    env.fault(
        json!({"path": "/synthesize", "fault": {"status": 200, "body": {
        "success": true, "audio_content": b64(wav_of(44_100, 1, 16, false, 44_101)),
        "output_format": "wav"}}}),
    )
    .await;
    let a = env.post("/tts/synthesize", synth_body("Hello there")).await;
    a.expect(200);
    assert_eq!(a.json["billing"]["quantity"], json!(1.00002268));
    assert_eq!(a.json["billing"]["charged"], "0.00060001");
    let u = env.usage();
    assert_eq!(
        (u.len(), u[0].quantity, u[0].charged),
        (1, d("1.00002268"), d("0.00060001"))
    );
    assert_eq!(env.balance(), d("9.99939999"));
    assert_eq!(env.store().assets().unwrap().len(), 1);

    // Speech: a provider's WAV (ASCII bytes, so the simulator can answer it
    // as text) whose block_align is 100 for 16-bit mono at 8 kHz.
    let env = media_env().await;
    env.grant("1");
    let mut bad = b"RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0\x40\x1f\0\0\0\x35\x0c\0\x64\0\x10\0data\x20\x03\0\0"
        .to_vec();
    bad.extend_from_slice(&[b'A'; 800]);
    let bad = String::from_utf8(bad).unwrap();
    env.fault(json!({"path": "/v1/audio/speech", "fault": {"status": 200, "body": bad}}))
        .await;
    let a = env
        .api(
            "/audio/tts/generations",
            json!({"model": "sim/sim-tts", "input": "hello world", "response_format": "wav"}),
        )
        .await;
    // A provider failure: 500 in this route's format (spec §7 format 2).
    assert!(envelope(&a, 500).contains("not wav audio"), "{}", a.text);
    nothing_charged(&env, d("1")).await;
    assert!(env.usage().is_empty(), "{:?}", env.usage());
    assert!(env.store().assets().unwrap().is_empty());
}

// ---------------------------------------------------------------------------
// 11: private files whatever the umask
// ---------------------------------------------------------------------------

/// The mode bits of `p`.
fn mode(p: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// The spooled upload under `spool/<instance>/` of `data`, once there.
async fn spooled_file(data: &std::path::Path) -> std::path::PathBuf {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = std::fs::read_dir(data.join("spool"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
            .map(|e| e.path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("stt-"));
        if let Some(p) = found {
            return p;
        }
        assert!(Instant::now() < deadline, "no upload was spooled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Finding 11: a gateway started under umask 000 on a fresh data
/// directory keeps everything it makes there private: the spool's
/// directory, its instance's directory and lock file, and an upload in
/// flight (looked at while its body is still arriving) are 0700 / 0600;
/// so are the data directory, the database, `jwt.key`, `signing.key`,
/// `instance-id`, stored objects, packed segments and outbox mails, every
/// file and directory of the tree.
#[tokio::test]
async fn f11_under_umask_000_the_spool_and_every_file_of_the_data_directory_are_private() {
    let dir = TempDir::new("f11");
    let data = dir.0.join("data");
    let data_var = data.to_str().unwrap().to_owned();
    let sim = start_sim().await;
    let providers = dir.0.join("providers.toml");
    std::fs::write(&providers, media_toml(&sim.llm_url())).unwrap();
    let (base, synth) = (sim.base_url(), sim.synth_url());
    let vars = [
        ("GATEWAY_DATA_DIR", data_var.as_str()),
        ("GATEWAY_PROVIDERS", providers.to_str().unwrap()),
        (LLM_KEY_VAR, PROVIDER_KEY),
        ("PROVIDER_API_KEY", PROVIDER_KEY),
        ("PROVIDER_BASE_URL", &base),
        ("PROVIDER_SYNTH_URL", &synth),
    ];
    let cli = |args: &str| {
        let out = gateway(&dir, "umask 000 &&", args, &vars).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let id = cli("users create --email ops@example.com");
    let key = cli(&format!("keys create --user {id}"));
    let gw = serve(&dir, "umask 000 &&", &vars);
    let client = reqwest::Client::new();

    // A transcription whose file is still arriving.
    let audio = wav(1.0);
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(4);
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::io::Error>(b), rx))
    });
    let form = reqwest::multipart::Form::new()
        .text("model", "sim/sim-whisper")
        .text("byok_api_key", PROVIDER_KEY)
        .part(
            "file",
            reqwest::multipart::Part::stream(reqwest::Body::wrap_stream(body))
                .file_name("talk.wav"),
        );
    let request = client
        .post(gw.url("/api/v1/audio/stt/transcriptions"))
        .bearer_auth(&key)
        .multipart(form)
        .send();
    let request = tokio::spawn(request);
    tx.send(bytes::Bytes::copy_from_slice(&audio[..1000]))
        .await
        .unwrap();
    let spooled = spooled_file(&data).await;
    let instance = spooled.parent().unwrap().to_owned();
    let spool = data.join("spool");
    let modes = [
        &spool,
        &instance,
        &instance.with_extension("lock"),
        &spooled,
    ]
    .map(|p| format!("{:o}", mode(p)));
    assert_eq!(
        modes,
        ["700", "700", "600", "600"],
        "spool/, {}/, its lock, the upload in flight",
        instance.display()
    );
    tx.send(bytes::Bytes::copy_from_slice(&audio[1000..]))
        .await
        .unwrap();
    drop(tx);
    let a = Answer::from(request.await.unwrap().unwrap()).await;
    a.expect(200);
    assert_eq!(a.json["billing"]["quantity"], "1");
    assert!(!spooled.exists(), "the spool file is removed");

    // A media file (an object), speech (a packed segment), a reset mail.
    let form = reqwest::multipart::Form::new()
        .text("file_type", "image")
        .part("file", file(png(), "a.png"));
    let r = client
        .post(gw.url("/api/v1/media"))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    Answer::from(r).await.expect(200);
    let r = client
        .post(gw.url("/api/v1/audio/tts/generations"))
        .bearer_auth(&key)
        .json(
            &json!({"model": "sim/sim-tts", "input": "hello world", "response_format": "wav",
                      "byok_api_key": PROVIDER_KEY}),
        )
        .send()
        .await
        .unwrap();
    Answer::from(r).await.expect(200);
    mail_a_reset(&gw, &data).await;

    // What the gateway made, each there, and every entry of the tree private.
    let mut made = vec![
        data.join("jwt.key"),
        data.join("signing.key"),
        data.join("instance-id"),
        data.join("objects").join(".packs"),
        data.join("outbox"),
    ];
    if dir.database_url().is_none() {
        made.push(data.join("gateway.db"));
    }
    for p in &made {
        assert!(p.exists(), "{} was not made", p.display());
    }
    let packs = std::fs::read_dir(data.join("objects").join(".packs")).unwrap();
    assert!(packs.count() > 0, "the speech audio was packed");
    let open = not_private(&data);
    assert!(open.is_empty(), "{open:#?}");
    drop(gw);
}
