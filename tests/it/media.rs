//! Object storage through the gateway (spec §2, A1, A10, §8): synthesis
//! audio stored behind presigned URLs, uploads streamed into the store,
//! tampered or expired URLs refused, Range reads, and the S3 backend.

use base64::Engine;
use futures_util::StreamExt;
use runtime::store::Assets;
use serde_json::json;

use crate::harness::*;

#[tokio::test]
async fn synthesis_audio_is_stored_behind_a_presigned_url() {
    let env = Env::start().await;
    let a = env
        .post(
            "/tts/synthesize",
            json!({"voice_uuid": "stock-voice-1", "text": "Stored audio", "output_format": "wav"}),
        )
        .await;
    a.expect(200);
    let url = a.json["audio_url"].as_str().unwrap();
    let request_id = a.json["request_id"].as_str().unwrap();
    let now = chrono::Utc::now();
    // Key: user id, YYYY/MM/DD, HHMMSS, request id, extension.
    let keys = env.object_keys();
    assert_eq!(keys.len(), 1);
    let key = &keys[0];
    assert!(
        key.starts_with(&format!(
            "synthesis/{}/{}/",
            env.user_id,
            now.format("%Y/%m/%d")
        )),
        "{key}"
    );
    assert!(key.ends_with(&format!("-{request_id}.wav")), "{key}");
    let hhmmss = key.rsplit('/').next().unwrap().split('-').next().unwrap();
    assert_eq!(hhmmss.len(), 6);
    assert!(url.contains(key.as_str()), "{url}");
    // expires_at: 7 days.
    let expires =
        chrono::DateTime::parse_from_rfc3339(a.json["expires_at"].as_str().unwrap()).unwrap();
    let days = (expires.with_timezone(&chrono::Utc) - now).num_hours();
    assert!((167..=168).contains(&days), "{days} hours");
    assert!(
        a.json.get("resemble_url").is_none(),
        "the simulator gives no URL, so there is none"
    );
    // The URL serves the same bytes with the right content type, no credentials needed.
    let r = reqwest::get(url).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    let body = r.bytes().await.unwrap();
    let expected = base64::engine::general_purpose::STANDARD
        .decode(a.json["audio_content"].as_str().unwrap())
        .unwrap();
    assert_eq!(body.as_ref(), expected.as_slice());
    // Asset record.
    let assets = env.store().assets().unwrap();
    assert_eq!(assets.len(), 1);
    assert_eq!(
        (
            assets[0].class.as_str(),
            assets[0].size_bytes,
            assets[0].owner_id
        ),
        ("synthesis", expected.len() as u64, Some(env.user_id))
    );
    assert_eq!(
        assets[0].expires_at.as_deref().map(|s| &s[..16]),
        a.json["expires_at"].as_str().map(|s| &s[..16])
    );
}

#[tokio::test]
async fn presigned_urls_refuse_tampering_and_expiry_and_serve_ranges() {
    let env = Env::start().await;
    let up = env.upload("clip.wav", wav(1.0), None).await;
    up.expect(200);
    let url = up.json["url"].as_str().unwrap().to_owned();
    let size = up.json["size_bytes"].as_u64().unwrap();

    let r = env
        .client
        .get(&url)
        .header("range", "bytes=10-19")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 206);
    assert_eq!(
        r.headers()["content-range"],
        format!("bytes 10-19/{size}").as_str()
    );
    assert_eq!(r.bytes().await.unwrap().len(), 10);
    let r = env
        .client
        .get(&url)
        .header("range", format!("bytes={}-", size + 5))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 416);

    let tampered = [
        url.replace("signature=", "signature=0"),
        url.replace("expires=", "expires=9"),
        url.replace(".wav", ".mp3"),
        url.split('?').next().unwrap().to_owned(),
    ];
    for t in tampered {
        let r = env.client.get(&t).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 403, "{t}");
        let v: serde_json::Value = r.json().await.unwrap();
        assert!(v["detail"].is_string());
    }
    // An expired URL, signed with the gateway's own key.
    let key_hex = std::fs::read_to_string(env.dir.0.join("signing.key")).unwrap();
    let signing_key = hex::decode(key_hex.trim()).unwrap();
    let object_key = env.object_keys().pop().unwrap();
    let past = chrono::Utc::now().timestamp() as u64 - 10;
    let sig = runtime::objects::signing::sign(&signing_key, &object_key, past);
    let expired = format!(
        "{}/objects/{}?expires={past}&signature={sig}",
        env.gw.url(),
        object_key
    );
    let r = env.client.get(&expired).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let fresh = runtime::objects::signing::sign(&signing_key, &object_key, past + 3600);
    let ok = format!(
        "{}/objects/{}?expires={}&signature={fresh}",
        env.gw.url(),
        object_key,
        past + 3600
    );
    assert_eq!(
        env.client.get(&ok).send().await.unwrap().status().as_u16(),
        200,
        "the same key, signed correctly, is served"
    );
}

#[tokio::test]
async fn upload_answers_the_spec_shape_and_stores_the_file() {
    let env = Env::start().await;
    let bytes = wav(0.25);
    let a = env
        .upload("Take 1.WAV", bytes.clone(), Some("voice_clone"))
        .await;
    a.expect(200);
    let v = &a.json;
    let mut fields: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "asset_class",
            "asset_id",
            "expires_at",
            "expires_in",
            "extension",
            "file_name",
            "file_type",
            "purpose",
            "size_bytes",
            "url"
        ]
    );
    assert_eq!(v["asset_class"], json!("voice_recordings"));
    assert_eq!(v["purpose"], json!("voice_clone"));
    assert_eq!(
        v["expires_at"],
        json!(null),
        "voice_clone uploads are permanent"
    );
    assert_eq!(v["expires_in"], json!(3600));
    assert_eq!(
        (
            v["file_name"].as_str(),
            v["file_type"].as_str(),
            v["extension"].as_str()
        ),
        (Some("Take 1.WAV"), Some("audio"), Some("wav"))
    );
    assert_eq!(v["size_bytes"], json!(bytes.len()));
    let asset = env
        .store()
        .asset(v["asset_id"].as_i64().unwrap())
        .unwrap()
        .unwrap();
    assert!(
        asset
            .object_key
            .starts_with(&format!("voice-recordings/{}/", env.user_id)),
        "{}",
        asset.object_key
    );
    assert_eq!(asset.expires_at, None);
    let got = reqwest::get(v["url"].as_str().unwrap())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(got.as_ref(), bytes.as_slice());

    for (purpose, prefix, days) in [
        ("stt_input", "stt-input/", Some(30)),
        ("watermark_input", "watermark/", Some(7)),
        ("audio_job_input", "audio-jobs/", Some(7)),
    ] {
        let a = env
            .upload("x.mp3", vec![0xFF, 0xFB, 0x90, 0x00], Some(purpose))
            .await;
        a.expect(200);
        let asset = env
            .store()
            .asset(a.json["asset_id"].as_i64().unwrap())
            .unwrap()
            .unwrap();
        assert!(
            asset.object_key.starts_with(prefix),
            "{purpose}: {}",
            asset.object_key
        );
        let exp =
            chrono::DateTime::parse_from_rfc3339(a.json["expires_at"].as_str().unwrap()).unwrap();
        let d = (exp.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_hours();
        assert!(
            d > days.unwrap() * 24 - 2 && d <= days.unwrap() * 24,
            "{purpose}: {d}"
        );
    }
    let a = env.upload("y.png", vec![1, 2, 3], None).await;
    a.expect(200);
    assert_eq!(
        (
            a.json["asset_class"].as_str(),
            a.json["purpose"].as_str(),
            a.json["file_type"].as_str()
        ),
        (Some("uploads"), Some("uploads"), Some("image"))
    );
    assert!(env
        .store()
        .asset(a.json["asset_id"].as_i64().unwrap())
        .unwrap()
        .unwrap()
        .object_key
        .starts_with("uploads/"));
    // Free: quantity 0 usage records, audit rows.
    assert!(env
        .usage()
        .iter()
        .all(|u| u.charged.is_zero() && u.route_id == "uploads.create"));
}

#[tokio::test]
async fn purpose_after_file_still_chooses_the_prefix() {
    let env = Env::start().await;
    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(wav(0.1)).file_name("late.wav"),
        )
        .text("purpose", "stt_input");
    let r = env
        .client
        .post(env.voice("/uploads"))
        .bearer_auth(&env.key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let a = Answer::from(r).await;
    a.expect(200);
    let keys = env.object_keys();
    assert_eq!(keys.len(), 1);
    assert!(keys[0].starts_with("stt-input/"), "{keys:?}");
}

#[tokio::test]
async fn bad_uploads_are_refused_and_store_nothing() {
    let env = Env::start().await;
    let a = env.upload("run.exe", vec![1, 2, 3], None).await;
    a.expect(400);
    assert!(a.detail().contains("extension"), "{}", a.text);
    let a = env.upload("a.wav", vec![1], Some("backup")).await;
    a.expect(400);
    assert!(a.detail().contains("purpose"), "{}", a.text);
    let form = reqwest::multipart::Form::new().text("purpose", "stt_input");
    let r = env
        .client
        .post(env.voice("/uploads"))
        .bearer_auth(&env.key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let a = Answer::from(r).await;
    a.expect(400);
    assert!(a.detail().contains("file is required"));
    let r = env
        .client
        .post(env.voice("/uploads"))
        .bearer_auth(&env.key)
        .body("plain")
        .send()
        .await
        .unwrap();
    Answer::from(r).await.expect(400);
    assert!(env.object_keys().is_empty());
    assert!(env.store().assets().unwrap().is_empty());
    assert!(env.usage().is_empty());
}

/// A multipart body whose file part is `size` bytes, generated as a stream.
fn streamed_multipart(size: u64, boundary: &'static str) -> reqwest::Body {
    const CHUNK: usize = 1 << 20;
    let head = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.wav\"\r\nContent-Type: audio/wav\r\n\r\n");
    let tail = format!("\r\n--{boundary}--\r\n");
    let chunks = (0..size.div_ceil(CHUNK as u64)).map(move |i| {
        let n = (size - i * CHUNK as u64).min(CHUNK as u64) as usize;
        Ok::<_, std::io::Error>(bytes::Bytes::from(vec![0x55u8; n]))
    });
    let stream = futures_util::stream::iter(
        std::iter::once(Ok(bytes::Bytes::from(head)))
            .chain(chunks)
            .chain(std::iter::once(Ok(bytes::Bytes::from(tail)))),
    );
    reqwest::Body::wrap_stream(stream.boxed())
}

#[tokio::test]
async fn a_501_mib_upload_is_refused_with_nothing_stored() {
    let env = Env::start().await;
    let boundary = "gateway-test-boundary";
    let r = env
        .client
        .post(env.voice("/uploads"))
        .bearer_auth(&env.key)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(streamed_multipart(501 << 20, boundary))
        .send()
        .await;
    // The gateway may answer before the client finished sending; either way no 2xx.
    if let Ok(r) = r {
        let a = Answer::from(r).await;
        a.expect(413);
        assert!(a.detail().contains("500 MiB"), "{}", a.text);
    }
    assert!(env.object_keys().is_empty(), "nothing left stored");
    let tmp = env.objects_dir().join(".tmp");
    let leftovers = std::fs::read_dir(&tmp).map(|d| d.count()).unwrap_or(0);
    assert_eq!(leftovers, 0, "no temporary file left");
    assert!(env.store().assets().unwrap().is_empty());
    assert!(env.usage().is_empty() && env.audit().is_empty());
}

#[tokio::test]
async fn an_upload_url_works_as_audio_url() {
    let env = Env::start().await;
    let bytes = wav(1.5);
    let up = env
        .upload("speech.wav", bytes.clone(), Some("stt_input"))
        .await;
    up.expect(200);
    let job = env.post("/stt", json!({"audio_url": up.json["url"]})).await;
    assert!(job.status == 200 || job.status == 202, "{}", job.text);
    let reqs = env.sim_requests().await;
    let stt = reqs
        .iter()
        .find(|r| r["path"] == json!("/api/v2/speech-to-text"))
        .unwrap();
    let file = stt["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == json!("file"))
        .unwrap();
    assert_eq!(
        file["size"].as_u64(),
        Some(bytes.len() as u64),
        "the stored bytes were sent upstream"
    );
    assert!(
        reqs.iter()
            .all(|r| !r["path"].as_str().unwrap().starts_with("/objects")),
        "read from the store, not over HTTP"
    );

    // Another user cannot use it.
    let (_, bob) = env.new_user("bob@example.com");
    let a = env
        .call_as(
            &bob,
            "POST",
            &env.voice("/stt"),
            Some(json!({"audio_url": up.json["url"]})),
        )
        .await;
    a.expect(400);
    assert!(a.detail().contains("not yours"), "{}", a.text);
}

#[tokio::test]
async fn s3_backend_stores_synthesis_and_uploads() {
    let s3 = runtime::objects::testing::S3TestServer::start().unwrap();
    s3.store("gateway").await.unwrap(); // creates the bucket
    let config = runtime::objects::ObjectConfig::from_lookup(|name| {
        s3.env("gateway")
            .into_iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    })
    .unwrap();
    let env = Env::with(move |c| c.objects = config).await;
    let a = env.post("/tts/synthesize", synth_body("Hello S3")).await;
    a.expect(200);
    let url = a.json["audio_url"].as_str().unwrap();
    assert!(
        url.starts_with(&s3.endpoint()),
        "a real S3 presigned URL: {url}"
    );
    assert!(url.contains("X-Amz-Signature"), "{url}");
    let r = reqwest::get(url).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let expected = base64::engine::general_purpose::STANDARD
        .decode(a.json["audio_content"].as_str().unwrap())
        .unwrap();
    assert_eq!(r.bytes().await.unwrap().as_ref(), expected.as_slice());
    // Tampered → refused by the S3 server itself.
    let sig_at = url.find("X-Amz-Signature=").unwrap() + "X-Amz-Signature=".len();
    let flipped = if &url[sig_at..sig_at + 1] == "0" {
        "1"
    } else {
        "0"
    };
    let bad = format!("{}{flipped}{}", &url[..sig_at], &url[sig_at + 1..]);
    assert_eq!(reqwest::get(&bad).await.unwrap().status().as_u16(), 403);

    let up = env.upload("in.wav", wav(0.5), Some("stt_input")).await;
    up.expect(200);
    let job = env.post("/stt", json!({"audio_url": up.json["url"]})).await;
    assert!(
        job.status == 200 || job.status == 202,
        "an S3 upload URL works as audio_url: {}",
        job.text
    );
    assert!(env.object_keys().is_empty(), "nothing on the local disk");
}

/// A small deterministic generator (xorshift64*), so that a failing case
/// can be replayed from its printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A valid multipart upload body and one of many ways to break it.
fn mangled_upload(rng: &mut Rng, boundary: &str) -> Vec<u8> {
    let names = ["a.wav", "b.mp3", "x.exe", "", "..\\..\\c.wav", "d.WAV"];
    let purposes = ["", "uploads", "voice_clone", "backup", "stt_input"];
    let mut body = Vec::new();
    if rng.below(2) == 0 {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n{}\r\n",
                purposes[rng.below(purposes.len())]
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{}\"\r\nContent-Type: audio/wav\r\n\r\n",
            names[rng.below(names.len())]
        )
        .as_bytes(),
    );
    body.extend((0..rng.below(4096)).map(|_| rng.next() as u8));
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    match rng.below(6) {
        0 => body.truncate(rng.below(body.len())), // cut anywhere
        1 => {
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(body.len());
                body[i] = rng.next() as u8; // flip bytes, headers included
            }
        }
        2 => {
            let at = rng.below(body.len());
            let dup = body[..at].to_vec();
            body.splice(at..at, dup); // repeat a prefix: parts and boundaries twice
        }
        3 => body = body.replace_crlf(), // bare LF line ends
        4 => body.extend_from_slice(&body.clone()), // a second, trailing copy
        _ => {}                          // valid (sometimes a refused name or purpose)
    }
    body
}

trait ReplaceCrlf {
    fn replace_crlf(self) -> Vec<u8>;
}

impl ReplaceCrlf for Vec<u8> {
    fn replace_crlf(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        let mut i = 0;
        while i < self.len() {
            if self[i] == b'\r' && self.get(i + 1) == Some(&b'\n') {
                i += 1;
            }
            out.push(self[i]);
            i += 1;
        }
        out
    }
}

#[tokio::test]
async fn malformed_multipart_uploads_never_fail_the_gateway_nor_leave_anything() {
    let env = Env::start().await;
    let boundary = "XyZzY-boundary-0123";
    let (mut stored, mut refused) = (0, 0);
    for seed in 1..=150u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let body = mangled_upload(&mut rng, boundary);
        let objects_before = env.object_keys().len();
        let r = env
            .client
            .post(env.voice("/uploads"))
            .bearer_auth(&env.key)
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body)
            .send()
            .await
            .unwrap();
        let a = Answer::from(r).await;
        assert!(a.status < 500, "seed {seed}: {} {}", a.status, a.text);
        if a.status == 200 {
            stored += 1;
        } else {
            refused += 1;
            assert!(a.json.get("detail").is_some(), "seed {seed}: {}", a.text);
            assert_eq!(
                env.object_keys().len(),
                objects_before,
                "seed {seed}: a refused upload left an object"
            );
        }
    }
    // The cases reach both sides: some parse and are stored, most are refused.
    assert!(
        stored > 0 && refused > 0,
        "stored {stored}, refused {refused}"
    );
}
