//! The URL policy (issue #9): an `audio_url` the upstream fetches itself and
//! a job's `callback_uri` follow the same rules as URLs the gateway fetches
//! (http(s) only, no private, loopback or link-local address, IPv6 forms
//! embedding one included, unless `GATEWAY_ALLOW_PRIVATE_FETCH`): 400 in the
//! row's format, nothing sent upstream, nothing written. A fetched
//! `audio_url` body is capped at the upload limit while it streams.

use runtime::store::Jobs;
use serde_json::{json, Value};

use crate::harness::*;

/// The rows whose upstream fetches `audio_url` itself, with a valid body
/// around the URL.
fn url_forwarding_routes(url: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("/detect", json!({"audio_url": url})),
        ("/intelligence", json!({"audio_url": url})),
        ("/tracing", json!({"audio_url": url})),
        ("/watermark/apply", json!({"audio_url": url})),
        ("/watermark/detect", json!({"audio_url": url})),
        ("/identity/search", json!({"audio_url": url})),
        ("/identity/enroll", json!({"audio_url": url, "name": "Ann"})),
    ]
}

const REFUSED: &[&str] = &[
    "file:///etc/passwd",
    "ftp://example.com/a.wav",
    "http://127.0.0.1:9/a.wav",
    "http://localhost:9/a.wav",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]/a.wav",
    "http://[::127.0.0.1]/a.wav",
    "http://[::ffff:127.0.0.1]/a.wav",
    "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
    "http://[2002:7f00:1::]/a.wav",
    "http://10.0.0.8/a.wav",
];

#[tokio::test]
async fn forwarded_audio_urls_follow_the_fetch_policy() {
    let env = Env::with(|c| c.allow_private_fetch = false).await;
    for url in REFUSED {
        for (path, body) in url_forwarding_routes(url) {
            let a = env.post(path, body).await;
            a.expect(400);
            let detail = a.detail();
            assert!(
                detail.starts_with("audio_url ")
                    && (detail.contains("http") || detail.contains("private")),
                "{path} {url}: {detail}"
            );
        }
    }
    env.assert_no_upstream_call().await;
    assert!(env.usage().is_empty());
    assert!(env.audit().is_empty());
    assert!(env
        .store()
        .jobs_of(env.user_id, "detect", 1, 10)
        .unwrap()
        .0
        .is_empty());
    // A public address passes the policy and is forwarded as is.
    env.post("/detect", json!({"audio_url": "https://8.8.8.8/a.wav"}))
        .await
        .expect(200);
    let reqs = env.sim_requests().await;
    assert_eq!(reqs.len(), 1, "{reqs:#?}");
}

#[tokio::test]
async fn private_forwarded_urls_pass_when_allowed_but_other_schemes_never() {
    let env = Env::start().await; // GATEWAY_ALLOW_PRIVATE_FETCH on
    env.post("/detect", json!({"audio_url": "http://127.0.0.1:9/a.wav"}))
        .await
        .expect(200);
    env.clear_sim_log().await;
    let a = env
        .post("/detect", json!({"audio_url": "file:///etc/passwd"}))
        .await;
    a.expect(400);
    assert!(a.detail().contains("http"), "{}", a.text);
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn undeliverable_callback_uris_are_refused_at_submit() {
    let env = Env::with(|c| c.allow_private_fetch = false).await;
    let up = env.upload("in.wav", wav(0.5), Some("stt_input")).await;
    up.expect(200);
    env.clear_sim_log().await;
    for uri in [
        "file:///tmp/hook",
        "ftp://example.com/hook",
        "not a url",
        "http://127.0.0.1:9/hook",
        "http://[::ffff:10.0.0.1]/hook",
        "http://169.254.169.254/hook",
    ] {
        let a = env
            .post(
                "/stt",
                json!({"audio_url": up.json["url"], "callback_uri": uri}),
            )
            .await;
        a.expect(400);
        assert!(a.detail().starts_with("callback_uri "), "{uri}: {}", a.text);
    }
    env.assert_no_upstream_call().await;
    assert!(env
        .store()
        .jobs_of(env.user_id, "stt", 1, 10)
        .unwrap()
        .0
        .is_empty());
    // A public callback is accepted.
    env.post(
        "/stt",
        json!({"audio_url": up.json["url"], "callback_uri": "https://8.8.8.8/hook"}),
    )
    .await
    .expect(200);
}

/// A one-shot origin serving `body` (chunked when `length` is false).
async fn origin(body: Vec<u8>, length: bool) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/big.wav", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let head = if length {
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: audio/wav\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    )
                } else {
                    "HTTP/1.1 200 OK\r\ncontent-type: audio/wav\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n".to_owned()
                };
                let _ = s.write_all(head.as_bytes()).await;
                if length {
                    let _ = s.write_all(&body).await;
                } else {
                    for c in body.chunks(4096) {
                        let _ = s.write_all(format!("{:x}\r\n", c.len()).as_bytes()).await;
                        let _ = s.write_all(c).await;
                        let _ = s.write_all(b"\r\n").await;
                    }
                    let _ = s.write_all(b"0\r\n\r\n").await;
                }
                let _ = s.shutdown().await;
            });
        }
    });
    url
}

#[tokio::test]
async fn fetched_audio_urls_are_capped_at_the_upload_limit() {
    assert_eq!(
        runtime::config::Config::with_data_dir(std::path::Path::new("/tmp")).max_fetch_bytes,
        server::routes::TABLE.limit(runtime::spec::Mode::Upload),
        "the fetch cap is the upload limit"
    );
    let env = Env::with(|c| c.max_fetch_bytes = 32 * 1024).await;
    let big = wav(3.0); // ~96 KB
                        // Declared too large: refused before anything is sent upstream.
    let url = origin(big.clone(), true).await;
    let a = env.post("/stt", json!({"audio_url": url})).await;
    a.expect(413);
    assert!(a.detail().contains("audio_url is larger"), "{}", a.text);
    env.assert_no_upstream_call().await;
    // Undeclared (chunked): cut off while streaming, 413, no job.
    let url = origin(big, false).await;
    let a = env.post("/stt", json!({"audio_url": url})).await;
    a.expect(413);
    assert!(env
        .store()
        .jobs_of(env.user_id, "stt", 1, 10)
        .unwrap()
        .0
        .is_empty());
    assert!(env.usage().is_empty());
    // Under the cap: fetched and forwarded.
    let url = origin(wav(0.5), false).await;
    env.post("/stt", json!({"audio_url": url}))
        .await
        .expect(200);
}
