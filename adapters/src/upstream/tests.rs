//! The upstream client against a raw local server: time-outs enforced while
//! the body is read, multipart bodies streamed with their length, query and
//! credential headers, the key scrubbed from streamed answers.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use gateway_base::spec::{Base, Method as M, Upstream as Row, UpstreamAuth};

const KEY: &str = "sk-test-upstream-key";

fn upstream(base: &str, timeout: Duration) -> Upstream {
    Upstream::new(Settings {
        api_key: Some(KEY),
        base_url: base,
        synth_url: base,
        timeout,
    })
}

fn row(method: M, auth: UpstreamAuth) -> &'static Row {
    Box::leak(Box::new(Row {
        base: Base::Main,
        method,
        path: "/x",
        from_query: &[],
        from_body: &[],
        from_parent: &[],
        auth,
    }))
}

/// A server answering one connection with `answer` after reading the
/// request head (and the body when the head declares one or is chunked);
/// the request's bytes come back through the channel.
async fn one_shot(
    answer: Vec<Vec<u8>>,
    pause: Duration,
) -> (String, tokio::sync::oneshot::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = sock.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
            let Some(end) = text.find("\r\n\r\n") else {
                continue;
            };
            let declared = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            let done = match declared {
                Some(len) => got.len() >= end + 4 + len,
                None if text.contains("transfer-encoding: chunked") => text.ends_with("0\r\n\r\n"),
                None => true,
            };
            if done || n == 0 {
                break;
            }
        }
        let _ = tx.send(got);
        for (i, part) in answer.iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(pause).await;
            }
            if sock.write_all(part).await.is_err() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    (base, rx)
}

#[tokio::test]
async fn the_time_out_holds_while_the_body_is_read() {
    // Headers at once, then the body stalls past the time-out.
    let head = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello".to_vec();
    let (base, _) = one_shot(vec![head, b"world".to_vec()], Duration::from_secs(3)).await;
    let up = upstream(&base, Duration::from_millis(300));
    let answer = up
        .call(row(M::Get, UpstreamAuth::Bearer), "/x", &[])
        .unwrap()
        .send()
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let e = answer.bytes(1 << 20).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the deadline cut the body"
    );
    let text = format!("{e:?}");
    assert!(
        text.contains("network error contacting the voice provider: timed out"),
        "{text}"
    );

    // No headers at all within the time-out.
    let (base, _) = one_shot(vec![], Duration::ZERO).await;
    let up = upstream(&base, Duration::from_millis(200));
    let e = match up
        .call(row(M::Get, UpstreamAuth::Bearer), "/x", &[])
        .unwrap()
        .send()
        .await
    {
        Err(e) => e,
        Ok(_) => panic!("an answer without headers"),
    };
    assert!(format!("{e:?}").contains("timed out"), "{e:?}");
}

#[tokio::test]
async fn query_credential_and_json_are_sent_and_the_key_scrubbed_from_a_stream() {
    let body = format!("{{\"echo\":\"{KEY}\"}}");
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let (base, got) = one_shot(
        vec![head.into_bytes(), body.into_bytes()],
        Duration::from_millis(20),
    )
    .await;
    let up = upstream(&base, Duration::from_secs(5));
    let query = [("a b".to_owned(), "c&d".to_owned())];
    let answer = up
        .call(row(M::Post, UpstreamAuth::Token), "/x", &query)
        .unwrap()
        .json(&serde_json::json!({"k": 1}))
        .send()
        .await
        .unwrap();
    let resp = answer.stream();
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
    let out = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(out, Bytes::from_static(b"{\"echo\":\"[redacted]\"}"));
    let req = String::from_utf8(got.await.unwrap()).unwrap();
    assert!(req.starts_with("POST /x?a+b=c%26d HTTP/1.1\r\n"), "{req}");
    assert!(
        req.contains(&format!("authorization: Token token={KEY}\r\n")),
        "{req}"
    );
    assert!(req.contains("content-type: application/json\r\n"), "{req}");
    assert!(req.ends_with("{\"k\":1}"), "{req}");
}

#[tokio::test]
async fn a_multipart_call_streams_its_file_part_with_a_length() {
    let (base, got) = one_shot(
        vec![b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}".to_vec()],
        Duration::ZERO,
    )
    .await;
    let up = upstream(&base, Duration::from_secs(5));
    // The file part is a stream of many chunks, never a buffer.
    let chunks =
        (0..64).map(|i| Ok::<_, std::io::Error>(Bytes::from(vec![b'a' + (i % 26) as u8; 1024])));
    let part = reqwest::multipart::Part::stream_with_length(
        reqwest::Body::wrap_stream(futures_util::stream::iter(chunks)),
        64 * 1024,
    )
    .file_name("a.wav");
    let form = reqwest::multipart::Form::new()
        .text("name", "x")
        .part("file", part);
    let answer = up
        .call(row(M::Post, UpstreamAuth::Bearer), "/x", &[])
        .unwrap()
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.json("a test").await.unwrap(), serde_json::json!({}));
    let req = got.await.unwrap();
    let text = String::from_utf8_lossy(&req);
    let lower = text.to_ascii_lowercase();
    assert!(
        lower.contains("content-type: multipart/form-data; boundary="),
        "{text}"
    );
    assert!(
        lower.contains("content-length: "),
        "the form's length is declared"
    );
    assert!(lower.contains(&format!(
        "authorization: bearer {}",
        KEY.to_ascii_lowercase()
    )));
    assert!(text.contains("filename=\"a.wav\""));
    assert!(text.contains(&format!("{}{}", "y".repeat(1024), "z".repeat(1024))));
}

/// The failure of one call to `base` (`what`: the failure expected).
async fn failed_at(base: &str, what: &str) -> Failed {
    let up = upstream(base, Duration::from_secs(5));
    let call = up.call(row(M::Get, UpstreamAuth::Bearer), "/x", &[]);
    call.unwrap().try_send().await.err().expect(what)
}

#[tokio::test]
async fn failed_calls_are_typed_by_what_failed_and_show_no_key() {
    // A refused connection: a port bound, then closed.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let f = failed_at(&base, "a refused connection").await;
    assert_eq!(f.kind, FailureKind::Connect);
    assert_eq!(
        (f.kind.side(), f.retryable(), f.status()),
        (Side::Network, true, None)
    );
    assert!(f.cause().is_some(), "the transport's error is kept");
    assert!(
        f.to_string().starts_with("network (network): connect: "),
        "{f}"
    );

    // A 503 whose message echoes the key.
    let body = format!("{{\"message\":\"busy for {KEY}\"}}");
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let (base, _) = one_shot(vec![head.into_bytes(), body.into_bytes()], Duration::ZERO).await;
    let f = failed_at(&base, "a 503").await;
    assert_eq!(f.kind, FailureKind::Status(503));
    assert_eq!(
        (f.kind.side(), f.retryable(), f.kind.as_str()),
        (Side::Provider, true, "status_5xx")
    );
    assert_eq!(
        f.to_string(),
        "status_5xx (503, provider): busy for [redacted]"
    );

    // The connection dropped before any answer.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let _ = sock.read(&mut buf).await;
    });
    let f = failed_at(&base, "a dropped connection").await;
    assert_eq!(f.kind, FailureKind::Transport);
    assert!(f.retryable());
    assert!(!f.to_string().contains(KEY), "{f}");
}
