//! The object-store conformance suite, run against both backends, plus the
//! local store's own HTTP serving.
//!
//! Bodies are generated as streams (a position-dependent byte pattern in
//! odd-sized chunks) and checked as streams: no test holds an object whole.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;

use super::local::LocalStore;
use super::testing::S3TestServer;
use super::*;

const MIB: u64 = 1024 * 1024;

/// A directory removed when dropped.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new() -> TempDir {
        let path = std::env::temp_dir().join(format!(
            "gateway-objects-test-{}",
            hex::encode(rand::random::<[u8; 8]>())
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The byte at offset `i` of every generated body (not periodic at any
/// chunk size, so a range served from the wrong offset shows).
fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 11) as u8 ^ (i >> 20) as u8
}

/// `len` bytes of the pattern starting at offset `from`.
fn pattern_bytes(from: u64, len: usize) -> Bytes {
    (from..from + len as u64)
        .map(pattern)
        .collect::<Vec<u8>>()
        .into()
}

/// A body of `len` pattern bytes in chunks of an odd size; with
/// `fail_after`, the stream errors once that many bytes have been sent.
fn pattern_stream(len: u64, fail_after: Option<u64>) -> ByteStream {
    const CHUNK: u64 = 64 * 1024 + 7;
    let stream = futures_util::stream::unfold(0u64, move |sent| async move {
        if let Some(limit) = fail_after {
            if sent >= limit {
                if sent == u64::MAX {
                    return None;
                }
                return Some((Err(std::io::Error::other("client went away")), u64::MAX));
            }
        }
        if sent >= len {
            return None;
        }
        let n = CHUNK.min(len - sent);
        Some((Ok(pattern_bytes(sent, n as usize)), sent + n))
    });
    Box::pin(stream)
}

fn bytes_stream(data: &'static [u8]) -> ByteStream {
    Box::pin(futures_util::stream::iter([Ok(Bytes::from_static(data))]))
}

/// Reads `stream` to its end, checking that it is exactly the pattern from
/// `from` for `len` bytes.
async fn check_pattern(mut stream: ByteStream, from: u64, len: u64) {
    let mut at = from;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.expect("stream error");
        for (i, b) in chunk.iter().enumerate() {
            assert_eq!(
                *b,
                pattern(at + i as u64),
                "byte at offset {}",
                at + i as u64
            );
        }
        at += chunk.len() as u64;
        assert!(
            at <= from + len,
            "more bytes than expected: {} > {}",
            at - from,
            len
        );
    }
    assert_eq!(at - from, len, "fewer bytes than expected");
}

async fn read_all(mut stream: ByteStream) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        out.extend_from_slice(&chunk.unwrap());
    }
    out
}

fn range(start: u64, end: Option<u64>) -> Option<ByteRange> {
    Some(ByteRange { start, end })
}

/// Sets the query parameter whose name ends with `suffix` (case-insensitive)
/// to `f(old value)`.
fn edit_query(url: &str, suffix: &str, f: impl Fn(&str) -> String) -> String {
    let (base, query) = url.split_once('?').expect("URL with a query");
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            if name.to_ascii_lowercase().ends_with(suffix) {
                format!("{name}={}", f(value))
            } else {
                pair.to_owned()
            }
        })
        .collect();
    let edited = format!("{base}?{}", pairs.join("&"));
    assert_ne!(edited, url, "no query parameter ending with {suffix}");
    edited
}

fn flip_hex(s: &str) -> String {
    let mut chars: Vec<char> = s.chars().collect();
    chars[5] = if chars[5] == '0' { '1' } else { '0' };
    chars.into_iter().collect()
}

/// The behaviour every backend must have. Presigned URLs are fetched over
/// real HTTP (the local store's from a server running `serve_presigned`).
async fn conformance(store: &dyn ObjectStore) {
    let http = reqwest::Client::new();
    let size = 10 * MIB + 12_345; // more than one 8 MiB part on S3

    // Round trip of a streamed body, content type kept.
    let key = "conf/2026/11/22/010203-res_big.mp3";
    assert!(!store.exists(key).await.unwrap());
    let stored = store
        .put(key, "audio/mpeg", pattern_stream(size, None), Some(size))
        .await
        .unwrap();
    assert_eq!(stored, size);
    assert!(store.exists(key).await.unwrap());
    let head = store.head(key).await.unwrap();
    assert_eq!(
        head,
        ObjectMeta {
            size,
            content_type: "audio/mpeg".into()
        }
    );
    let body = store.get(key, None).await.unwrap();
    assert_eq!(
        (body.total_size, body.range, body.content_type.as_str()),
        (size, None, "audio/mpeg")
    );
    check_pattern(body.stream, 0, size).await;

    // Ranges: start, middle, suffix, end clamped, past the end.
    let body = store.get(key, range(0, Some(99))).await.unwrap();
    assert_eq!((body.total_size, body.range), (size, Some((0, 99))));
    assert_eq!(body.content_type, "audio/mpeg");
    check_pattern(body.stream, 0, 100).await;
    let (a, b) = (5 * MIB + 3, 9 * MIB + 70_000); // crosses a part boundary on S3
    let body = store.get(key, range(a, Some(b))).await.unwrap();
    assert_eq!(body.range, Some((a, b)));
    check_pattern(body.stream, a, b - a + 1).await;
    let body = store.get(key, range(size - 1000, None)).await.unwrap();
    assert_eq!(body.range, Some((size - 1000, size - 1)));
    check_pattern(body.stream, size - 1000, 1000).await;
    let body = store
        .get(key, range(size - 10, Some(size + 100)))
        .await
        .unwrap();
    assert_eq!(body.range, Some((size - 10, size - 1)));
    check_pattern(body.stream, size - 10, 10).await;
    match store.get(key, range(size, None)).await {
        Err(ObjectError::RangeNotSatisfiable { size: s }) => assert_eq!(s, size),
        other => panic!("range past the end: {:?}", other.map(|b| b.range)),
    }

    // Delete, then it is gone; deleting again is fine.
    store.delete(key).await.unwrap();
    assert!(!store.exists(key).await.unwrap());
    assert!(matches!(
        store.get(key, None).await,
        Err(ObjectError::NotFound)
    ));
    assert!(matches!(store.head(key).await, Err(ObjectError::NotFound)));
    store.delete(key).await.unwrap();
    store.delete("conf/never/was.bin").await.unwrap();

    // Over the limit: TooLarge, nothing stored. Once within the first 8 MiB
    // (a single PUT on S3), once after (a multipart upload, aborted).
    for (len, limit) in [(3 * MIB, MIB), (10 * MIB, 9 * MIB)] {
        let key = format!("conf/too-large-{len}.bin");
        match store
            .put(&key, "audio/wav", pattern_stream(len, None), Some(limit))
            .await
        {
            Err(ObjectError::TooLarge { limit: l }) => assert_eq!(l, limit),
            other => panic!("put over the limit: {other:?}"),
        }
        assert!(!store.exists(&key).await.unwrap(), "{key} left behind");
    }
    // Exactly at the limit is fine.
    let at_limit = store
        .put(
            "conf/at-limit.bin",
            "audio/wav",
            pattern_stream(4096, None),
            Some(4096),
        )
        .await;
    assert_eq!(at_limit.unwrap(), 4096);

    // A failing body: Body error, nothing stored (both paths again).
    for fail_after in [MIB, 9 * MIB] {
        let key = format!("conf/broken-{fail_after}.bin");
        match store
            .put(
                &key,
                "audio/wav",
                pattern_stream(20 * MIB, Some(fail_after)),
                None,
            )
            .await
        {
            Err(ObjectError::Body(e)) => {
                let msg = e.to_string();
                assert!(msg.contains("client went away"), "{msg}")
            }
            other => panic!("put of a failing body: {other:?}"),
        }
        assert!(!store.exists(&key).await.unwrap(), "{key} left behind");
    }

    // A failed overwrite leaves the object that was there.
    let keep = "conf/keep.txt";
    store
        .put(keep, "text/plain", bytes_stream(b"first version"), None)
        .await
        .unwrap();
    let failed = store
        .put(keep, "text/plain", pattern_stream(2 * MIB, None), Some(MIB))
        .await;
    assert!(matches!(failed, Err(ObjectError::TooLarge { .. })));
    let failed = store
        .put(
            keep,
            "text/plain",
            pattern_stream(2 * MIB, Some(1000)),
            None,
        )
        .await;
    assert!(matches!(failed, Err(ObjectError::Body(_))));
    let body = store.get(keep, None).await.unwrap();
    assert_eq!(read_all(body.stream).await, b"first version");
    // A successful overwrite replaces it, content type included.
    store
        .put(keep, "application/json", bytes_stream(b"{}"), None)
        .await
        .unwrap();
    let body = store.get(keep, None).await.unwrap();
    assert_eq!(body.content_type, "application/json");
    assert_eq!(read_all(body.stream).await, b"{}");

    // An empty object.
    assert_eq!(
        store
            .put(
                "conf/empty.bin",
                "audio/wav",
                pattern_stream(0, None),
                Some(0)
            )
            .await
            .unwrap(),
        0
    );
    let body = store.get("conf/empty.bin", None).await.unwrap();
    assert_eq!(body.total_size, 0);
    assert!(read_all(body.stream).await.is_empty());
    assert!(matches!(
        store.get("conf/empty.bin", range(0, None)).await,
        Err(ObjectError::RangeNotSatisfiable { size: 0 })
    ));

    // Keys both backends refuse.
    for bad in [
        "",
        "/abs",
        "a//b",
        "a/../b",
        "..",
        "a\\b",
        ".tmp/x",
        "a/.hidden",
        "a/",
    ] {
        let put = store.put(bad, "text/plain", bytes_stream(b"x"), None).await;
        assert!(
            matches!(put, Err(ObjectError::Backend(_))),
            "put {bad:?}: {put:?}"
        );
        assert!(
            matches!(store.get(bad, None).await, Err(ObjectError::Backend(_))),
            "get {bad:?}"
        );
        assert!(
            store.presign_get(bad, Duration::from_secs(60)).is_err(),
            "presign {bad:?}"
        );
    }

    // Presigned URLs, fetched over HTTP. The key needs escaping.
    let key = "conf/pre signed/voice+1.txt";
    let other = "conf/pre signed/voice+2.txt";
    store
        .put(
            key,
            "text/plain; charset=utf-8",
            bytes_stream(b"hello, presigned"),
            None,
        )
        .await
        .unwrap();
    store
        .put(
            other,
            "text/plain; charset=utf-8",
            bytes_stream(b"another object"),
            None,
        )
        .await
        .unwrap();
    let url = store.presign_get(key, Duration::from_secs(300)).unwrap();
    let resp = http.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{url}");
    assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(resp.bytes().await.unwrap(), &b"hello, presigned"[..]);

    // Tampered: signature, key (an object that exists), expiry.
    let tampered = [
        edit_query(&url, "signature", flip_hex),
        url.replacen("voice%2B1", "voice%2B2", 1),
        edit_query(&url, "expires", |v| {
            (v.parse::<u64>().unwrap() + 1).to_string()
        }),
    ];
    assert_ne!(tampered[1], url, "key not found in {url}");
    for bad in &tampered {
        let resp = http.get(bad).send().await.unwrap();
        assert_eq!(resp.status(), 403, "{bad}");
    }
    // The store's own URLs map back to their key; others do not.
    assert_eq!(store.key_of_url(&url).as_deref(), Some(key));
    assert_eq!(
        store.key_of_url(&url[..url.find('?').unwrap()]).as_deref(),
        Some(key)
    );
    assert_eq!(
        store.key_of_url("https://elsewhere.example/objects/conf/pre%20signed/voice%2B1.txt"),
        None
    );
    assert_eq!(store.key_of_url(""), None);

    // Rename: content and content type move; the source is gone.
    let moved = "conf/moved/voice 1.txt";
    store.rename(key, moved).await.unwrap();
    assert!(!store.exists(key).await.unwrap());
    let body = store.get(moved, None).await.unwrap();
    assert_eq!(body.content_type, "text/plain; charset=utf-8");
    assert_eq!(read_all(body.stream).await, b"hello, presigned");
    store.rename(moved, other).await.unwrap(); // replaces `other`
    let body = store.get(other, None).await.unwrap();
    assert_eq!(read_all(body.stream).await, b"hello, presigned");
    assert!(matches!(
        store.rename(moved, "conf/x.txt").await,
        Err(ObjectError::NotFound)
    ));
    store.rename(other, key).await.unwrap();

    // Expired.
    let short = store.presign_get(key, Duration::from_secs(1)).unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let resp = http.get(&short).send().await.unwrap();
    assert_eq!(resp.status(), 403, "{short}");
}

/// Serves `serve_presigned` for `store` on `listener` until the test ends.
fn spawn_presign_server(store: Arc<LocalStore>, listener: tokio::net::TcpListener) {
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                continue;
            };
            let store = store.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let store = store.clone();
                        async move {
                            Ok::<_, Infallible>(
                                serve_presigned(&store, req.method(), req.uri(), req.headers())
                                    .await,
                            )
                        }
                    });
                let io = hyper_util::rt::TokioIo::new(socket);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
}

/// A local store under a fresh directory, with its presigned URLs served.
async fn local_store(dir: &TempDir) -> Arc<LocalStore> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let store = Arc::new(
        LocalStore::new(
            dir.path().join("objects"),
            base,
            b"test signing key".to_vec(),
        )
        .unwrap(),
    );
    spawn_presign_server(store.clone(), listener);
    store
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_local_conformance() {
    let dir = TempDir::new();
    let store = local_store(&dir).await;
    conformance(store.as_ref()).await;
    // Failed puts left no temporary file; deletes pruned empty directories.
    let tmp: Vec<_> = std::fs::read_dir(store.root().join(".tmp"))
        .unwrap()
        .collect();
    assert!(tmp.is_empty(), "temporary files left: {tmp:?}");
    assert!(
        !store.root().join("conf/2026").exists(),
        "empty directories not pruned"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_s3_conformance() {
    let server = S3TestServer::start().unwrap();
    let store = server.store("conformance").await.unwrap();
    store.ensure_bucket().await.unwrap(); // a second time is fine
    conformance(&store).await;
    // Aborted multipart uploads left no object files behind.
    let mut names = Vec::new();
    let mut dirs = vec![server.root().join("conformance")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else {
                names.push(
                    e.path()
                        .strip_prefix(server.root())
                        .unwrap()
                        .display()
                        .to_string(),
                );
            }
        }
    }
    assert!(
        !names
            .iter()
            .any(|n| n.contains("too-large") || n.contains("broken")),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_s3_refuses_wrong_credentials() {
    let server = S3TestServer::start().unwrap();
    let store = server.store("creds").await.unwrap();
    store
        .put("a/b.txt", "text/plain", bytes_stream(b"x"), None)
        .await
        .unwrap();
    let mut config = server.config("creds");
    config.secret_key = "not-the-secret".into();
    let wrong = S3Store::new(config).unwrap();
    let err = wrong
        .get("a/b.txt", None)
        .await
        .err()
        .expect("a wrong secret must be refused");
    assert!(matches!(err, ObjectError::Backend(_)), "{err:?}");
    let url = wrong
        .presign_get("a/b.txt", Duration::from_secs(60))
        .unwrap();
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_local_http_serving() {
    let dir = TempDir::new();
    let store = local_store(&dir).await;
    let http = reqwest::Client::new();
    let size = 300_000u64;
    store
        .put("s/clip.mp3", "audio/mpeg", pattern_stream(size, None), None)
        .await
        .unwrap();
    let url = store
        .presign_get("s/clip.mp3", Duration::from_secs(600))
        .unwrap();
    assert!(url.starts_with(&format!(
        "http://{}/objects/s/clip.mp3?expires=",
        url[7..].split('/').next().unwrap()
    )));

    // Whole object: headers.
    let resp = http.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let h = resp.headers().clone();
    assert_eq!(h["content-type"], "audio/mpeg");
    assert_eq!(h["content-length"], size.to_string().as_str());
    assert_eq!(h["accept-ranges"], "bytes");
    let cache = h["cache-control"].to_str().unwrap();
    let max_age: u64 = cache
        .strip_prefix("private, max-age=")
        .unwrap()
        .parse()
        .unwrap();
    assert!((598..=600).contains(&max_age), "{cache}");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(resp.bytes().await.unwrap(), pattern_bytes(0, size as usize));

    // HEAD: the same headers, no body.
    let resp = http.head(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-length"], size.to_string().as_str());
    assert!(resp.bytes().await.unwrap().is_empty());

    // Ranges.
    for (header, start, end) in [
        ("bytes=0-99", 0, 99),
        ("bytes=100000-", 100_000, size - 1),
        ("bytes=-500", size - 500, size - 1),
        ("bytes=299990-400000", 299_990, size - 1),
    ] {
        let resp = http.get(&url).header("range", header).send().await.unwrap();
        assert_eq!(resp.status(), 206, "{header}");
        assert_eq!(
            resp.headers()["content-range"],
            format!("bytes {start}-{end}/{size}").as_str(),
            "{header}"
        );
        assert_eq!(
            resp.headers()["content-length"],
            (end - start + 1).to_string().as_str()
        );
        assert_eq!(
            resp.bytes().await.unwrap(),
            pattern_bytes(start, (end - start + 1) as usize),
            "{header}"
        );
    }
    for header in ["bytes=300000-", "bytes=-0"] {
        let resp = http.get(&url).header("range", header).send().await.unwrap();
        assert_eq!(resp.status(), 416, "{header}");
        assert_eq!(
            resp.headers()["content-range"],
            format!("bytes */{size}").as_str()
        );
    }
    // Several ranges, or nonsense: ignored, whole object.
    for header in ["bytes=0-1,5-6", "pages=1-2", "bytes=9-3"] {
        let resp = http.get(&url).header("range", header).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{header}");
        assert_eq!(resp.bytes().await.unwrap().len() as u64, size);
    }

    // Refusals: JSON detail, 403 for every kind of bad URL.
    let base = &url[..url.find("/objects/").unwrap()];
    let expired = store
        .presign_until("s/clip.mp3", signing::now_unix() - 1)
        .unwrap();
    let cases = [
        (format!("{base}/objects/s/clip.mp3"), "missing signature"),
        (
            edit_query(&url, "signature", |_| String::new()),
            "malformed signature",
        ),
        (
            edit_query(&url, "signature", |v| v.to_uppercase()),
            "malformed signature",
        ),
        (edit_query(&url, "signature", flip_hex), "invalid signature"),
        (
            edit_query(&url, "expires", |v| format!("0{v}")),
            "malformed signature",
        ),
        (
            edit_query(&url, "expires", |v| {
                (v.parse::<u64>().unwrap() + 3600).to_string()
            }),
            "invalid signature",
        ),
        (url.replacen("clip.mp3", "clip.wav", 1), "invalid signature"),
        (format!("{url}&expires=1"), "malformed signature"),
        (expired, "link expired"),
    ];
    for (bad, why) in cases {
        let resp = http.get(&bad).send().await.unwrap();
        assert_eq!(resp.status(), 403, "{bad}");
        assert_eq!(resp.headers()["content-type"], "application/json");
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["detail"], why, "{bad}");
    }

    // Other methods: 405.
    let resp = http.delete(&url).send().await.unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "GET, HEAD");

    // A valid URL for an object since deleted: 404.
    store.delete("s/clip.mp3").await.unwrap();
    let resp = http.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["detail"], "object not found");
}

#[tokio::test]
async fn objects_local_put_cancelled_leaves_nothing() {
    let dir = TempDir::new();
    let store =
        LocalStore::new(dir.path().to_path_buf(), "http://gw".into(), b"k".to_vec()).unwrap();
    // A body that never ends: the put is dropped half-way.
    let endless: ByteStream = Box::pin(
        futures_util::stream::iter(std::iter::repeat_with(|| {
            Ok(Bytes::from_static(&[7u8; 4096]))
        }))
        .take(100)
        .chain(futures_util::stream::pending()),
    );
    let put = store.put("x/y.bin", "audio/wav", endless, None);
    assert!(tokio::time::timeout(Duration::from_millis(200), put)
        .await
        .is_err());
    assert_eq!(
        std::fs::read_dir(dir.path().join(".tmp")).unwrap().count(),
        0
    );
    assert!(!store.exists("x/y.bin").await.unwrap());
}

#[tokio::test]
async fn objects_local_file_layout_and_corruption() {
    let dir = TempDir::new();
    let store =
        LocalStore::new(dir.path().to_path_buf(), "http://gw".into(), b"k".to_vec()).unwrap();
    store
        .put("a/b.txt", "", bytes_stream(b"abc"), None)
        .await
        .unwrap();
    // Empty content type is stored as octet-stream; one file per object.
    assert_eq!(
        std::fs::read(dir.path().join("a/b.txt")).unwrap(),
        b"gwobj1 application/octet-stream\nabc"
    );
    assert!(matches!(
        store
            .put("a/c.txt", "text/plain\nX-Evil: 1", bytes_stream(b"x"), None)
            .await,
        Err(ObjectError::Backend(_))
    ));
    std::fs::write(dir.path().join("a/raw.txt"), b"no header").unwrap();
    assert!(matches!(
        store.get("a/raw.txt", None).await,
        Err(ObjectError::Backend(_))
    ));
    // A directory is not an object.
    assert!(!store.exists("a").await.unwrap());
    assert!(matches!(
        store.get("a", None).await,
        Err(ObjectError::NotFound)
    ));
    assert!(matches!(
        store.get("a/b.txt/c", None).await,
        Err(ObjectError::NotFound)
    ));
}

#[test]
fn objects_key_validation_and_ranges() {
    assert!(validate_key("synthesis/42/2026/11/22/010203-res_xxx.mp3").is_ok());
    assert!(validate_key("a b/ü.mp3").is_ok());
    assert!(validate_key(&"a".repeat(1025)).is_err());
    assert!(validate_key("a\u{0}b").is_err());
    assert_eq!(
        ByteRange {
            start: 0,
            end: None
        }
        .resolve(10)
        .unwrap(),
        (0, 9)
    );
    assert_eq!(
        ByteRange {
            start: 3,
            end: Some(100)
        }
        .resolve(10)
        .unwrap(),
        (3, 9)
    );
    assert!(ByteRange {
        start: 10,
        end: None
    }
    .resolve(10)
    .is_err());
    assert!(ByteRange {
        start: 5,
        end: Some(4)
    }
    .resolve(10)
    .is_err());
    assert!(ByteRange {
        start: 0,
        end: None
    }
    .resolve(0)
    .is_err());
}
