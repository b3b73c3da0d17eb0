//! Media files (`/api/v1/media`, spec §7 format 1): an image or audio file
//! stored as the caller's, judged by its first bytes, under a size limit
//! enforced while streaming; read back with a fresh presigned URL, listed
//! by page, deleted (404 at once, the object removed at once);
//! another user's is 404; a lost object is 500 "media retrieval failed".
//! Every answer is checked with what was (not) written: asset records and
//! objects.

use std::collections::BTreeSet;

use futures_util::StreamExt;
use reqwest::multipart::{Form, Part};
use runtime::store::Assets;
use serde_json::{json, Value};

use crate::harness::*;

/// A tiny real PNG's first bytes (signature and IHDR) and some body.
pub(crate) fn png() -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0".to_vec();
    b.extend_from_slice(&[7u8; 300]);
    b
}

/// `POST /api/v1/media` with `key` and the form's parts in order.
pub(crate) async fn post_media(env: &Env, key: &str, parts: Vec<(&'static str, Part)>) -> Answer {
    let mut form = Form::new();
    for (name, part) in parts {
        form = form.part(name, part);
    }
    let r = env
        .client
        .post(env.url("/api/v1/media"))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    Answer::from(r).await
}

pub(crate) fn file(bytes: Vec<u8>, name: &str) -> Part {
    Part::bytes(bytes).file_name(name.to_owned())
}

pub(crate) fn text(s: &str) -> Part {
    Part::text(s.to_owned())
}

pub(crate) async fn media(env: &Env, key: &str, method: &str, path: &str) -> Answer {
    env.call_as(key, method, &env.url(&format!("/api/v1/media{path}")), None)
        .await
}

/// Format 1 with `status`; its message.
#[track_caller]
pub(crate) fn format1(a: &Answer, status: u16) -> String {
    a.expect(status);
    let keys: BTreeSet<&str> = a
        .json
        .as_object()
        .unwrap_or_else(|| panic!("{}", a.text))
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["error", "message", "status_code", "details"]),
        "{}",
        a.text
    );
    assert_eq!(a.json["status_code"], json!(status));
    a.json["message"].as_str().unwrap().to_owned()
}

/// The media files' asset records (class `media`).
fn media_assets(env: &Env) -> Vec<runtime::store::AssetRow> {
    env.store()
        .assets()
        .unwrap()
        .into_iter()
        .filter(|a| a.class == "media")
        .collect()
}

#[tokio::test]
async fn a_media_file_is_stored_read_listed_and_soft_deleted() {
    let env = Env::start().await;
    let image = png();
    let a = post_media(
        &env,
        &env.key,
        vec![
            ("file_type", text("image")),
            ("file", file(image.clone(), "x.bin")),
        ],
    )
    .await;
    a.expect(200);
    let keys: BTreeSet<&str> = a
        .json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for k in [
        "id",
        "file_type",
        "content_type",
        "size_bytes",
        "url",
        "created_at",
    ] {
        assert!(keys.contains(k), "{k} missing: {}", a.text);
    }
    assert_eq!(a.json["file_type"], "image");
    // The content type is what the bytes are, not what the name says.
    assert_eq!(a.json["content_type"], "image/png");
    assert_eq!(a.json["size_bytes"], json!(image.len()));
    let image_id = a.json["id"].as_i64().unwrap();
    // The URL serves the very bytes.
    let got = env
        .client
        .get(a.json["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 200);
    assert_eq!(got.bytes().await.unwrap().to_vec(), image);
    // The record: the caller's, kept until deleted; the object under media/.
    let rows = media_assets(&env);
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(
        (row.id, row.owner_id, row.purpose.as_deref(), row.size_bytes),
        (
            image_id,
            Some(env.user_id),
            Some("image"),
            image.len() as u64
        )
    );
    assert_eq!(row.expires_at, None, "kept until its owner deletes it");
    assert!(
        row.object_key
            .starts_with(&format!("media/{}/", env.user_id)),
        "{}",
        row.object_key
    );
    assert_eq!(env.object_keys(), vec![row.object_key.clone()]);

    // Audio, with `file_type` after the file.
    let sound = wav(0.5);
    let b = post_media(
        &env,
        &env.key,
        vec![
            ("file", file(sound.clone(), "a.wav")),
            ("file_type", text("audio")),
        ],
    )
    .await;
    b.expect(200);
    assert_eq!(
        (
            b.json["file_type"].as_str(),
            b.json["content_type"].as_str()
        ),
        (Some("audio"), Some("audio/wav"))
    );
    let audio_id = b.json["id"].as_i64().unwrap();

    // Read back: metadata and a fresh presigned URL.
    let g = media(&env, &env.key, "GET", &format!("/{image_id}")).await;
    g.expect(200);
    assert_eq!(
        (g.json["id"].as_i64(), g.json["size_bytes"].as_u64()),
        (Some(image_id), Some(image.len() as u64))
    );
    let got = env
        .client
        .get(g.json["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(got.bytes().await.unwrap().to_vec(), image);

    // Listed newest first, by page.
    let l = media(&env, &env.key, "GET", "").await;
    l.expect(200);
    let ids: Vec<i64> = l.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        (ids, l.json["total"].as_u64()),
        (vec![audio_id, image_id], Some(2))
    );
    let p = media(&env, &env.key, "GET", "?limit=1&skip=1").await;
    p.expect(200);
    assert_eq!(p.json["data"][0]["id"].as_i64(), Some(image_id));
    assert_eq!(p.json["has_more"], json!(false));
    assert_eq!(
        media(&env, &env.key, "GET", "?limit=1").await.json["has_more"],
        json!(true)
    );

    // Another user sees none of it and can delete none of it.
    let (_, bob) = env.new_user("bob@example.com");
    for (m, path) in [
        ("GET", format!("/{image_id}")),
        ("DELETE", format!("/{image_id}")),
    ] {
        let a = media(&env, &bob, m, &path).await;
        assert_eq!(format1(&a, 404), "media file not found or soft-deleted");
        assert_eq!(a.json["error"], "not_found");
    }
    let l = media(&env, &bob, "GET", "").await;
    assert_eq!(
        (l.json["data"].clone(), l.json["total"].clone()),
        (json!([]), json!(0))
    );

    // Delete: 404 at once, and the object is gone from the store at once.
    let d = media(&env, &env.key, "DELETE", &format!("/{image_id}")).await;
    d.expect(200);
    for (m, path) in [
        ("GET", format!("/{image_id}")),
        ("DELETE", format!("/{image_id}")),
    ] {
        let a = media(&env, &env.key, m, &path).await;
        assert_eq!(format1(&a, 404), "media file not found or soft-deleted");
    }
    let l = media(&env, &env.key, "GET", "").await;
    assert_eq!(l.json["total"], json!(1));
    let key = row.object_key.clone();
    assert!(
        !env.object_keys().contains(&key),
        "the delete removed the object"
    );
    let gone = env.store().asset(image_id).unwrap().unwrap();
    assert!(gone.deleted_at.is_some());
    // Nothing is left for the sweeper.
    let report = runtime::retention::sweep_once(&env.gw.gateway).await;
    assert_eq!(report.deleted, 0, "{report:?}");
    // The audio file is untouched.
    media(&env, &env.key, "GET", &format!("/{audio_id}"))
        .await
        .expect(200);
    assert_eq!(env.object_keys().len(), 1);
    // Unknown and malformed ids: the same 404.
    for path in ["/999999", "/abc"] {
        let a = media(&env, &env.key, "GET", path).await;
        assert_eq!(format1(&a, 404), "media file not found or soft-deleted");
    }
}

#[tokio::test]
async fn bad_media_uploads_are_400_or_413_and_store_nothing() {
    let env = Env::start().await;
    let cases: Vec<(&str, Vec<(&'static str, Part)>, Option<&str>)> = vec![
        (
            "video type",
            vec![("file_type", text("video")), ("file", file(png(), "a.png"))],
            Some("invalid_file_type"),
        ),
        (
            "no type",
            vec![("file", file(png(), "a.png"))],
            Some("invalid_file_type"),
        ),
        (
            "png as audio",
            vec![("file_type", text("audio")), ("file", file(png(), "a.wav"))],
            None,
        ),
        (
            "wav as image",
            vec![
                ("file_type", text("image")),
                ("file", file(wav(0.2), "a.png")),
            ],
            None,
        ),
        (
            "text as image",
            vec![
                ("file_type", text("image")),
                (
                    "file",
                    file(b"hello, not an image at all".to_vec(), "a.png"),
                ),
            ],
            None,
        ),
        (
            "empty file",
            vec![
                ("file_type", text("image")),
                ("file", file(Vec::new(), "a.png")),
            ],
            None,
        ),
        // The type after the file: the file was stored, then removed.
        (
            "wav then image",
            vec![
                ("file", file(wav(0.2), "a.wav")),
                ("file_type", text("image")),
            ],
            None,
        ),
        ("no file", vec![("file_type", text("image"))], None),
    ];
    for (what, parts, reason) in cases {
        let a = post_media(&env, &env.key, parts).await;
        format1(&a, 400);
        assert_eq!(a.json["error"], "bad_request", "{what}");
        if let Some(r) = reason {
            assert_eq!(a.json["details"]["reason"], r, "{what}: {}", a.text);
        }
        assert!(media_assets(&env).is_empty(), "{what}: no record");
        assert!(env.object_keys().is_empty(), "{what}: no object");
    }
    // Over the documented 25 MiB, streamed without a length: 413 while
    // streaming, nothing left.
    let boundary = "media-test-boundary";
    let head = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file_type\"\r\n\r\nimage\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.png\"\r\nContent-Type: image/png\r\n\r\n"
    );
    let tail = format!("\r\n--{boundary}--\r\n");
    let size: usize = (25 << 20) + 4096;
    let mut chunks: Vec<Result<bytes::Bytes, std::io::Error>> =
        vec![Ok(head.into()), Ok(png().into())];
    for _ in 0..size.div_ceil(1 << 20) {
        chunks.push(Ok(bytes::Bytes::from(vec![0x55u8; 1 << 20])));
    }
    chunks.push(Ok(tail.into()));
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks).boxed());
    let r = env
        .client
        .post(env.url("/api/v1/media"))
        .bearer_auth(&env.key)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await;
    if let Ok(r) = r {
        let a = Answer::from(r).await;
        assert!(format1(&a, 413).contains("25 MiB"), "{}", a.text);
    }
    assert!(media_assets(&env).is_empty());
    assert!(env.object_keys().is_empty());
    let tmp = env.objects_dir().join(".tmp");
    assert_eq!(
        std::fs::read_dir(&tmp).map(|d| d.count()).unwrap_or(0),
        0,
        "no temporary file left"
    );
    assert!(
        env.audit().is_empty(),
        "a refused request is not audited as served"
    );
}

#[tokio::test]
async fn an_object_the_store_cannot_read_is_500_media_retrieval_failed() {
    let env = Env::start().await;
    let a = post_media(
        &env,
        &env.key,
        vec![("file_type", text("image")), ("file", file(png(), "a.png"))],
    )
    .await;
    a.expect(200);
    let id = a.json["id"].as_i64().unwrap();
    let row = env.store().asset(id).unwrap().unwrap();
    // The object store loses the object under the gateway.
    std::fs::remove_file(env.objects_dir().join(&row.object_key)).unwrap();
    let g = media(&env, &env.key, "GET", &format!("/{id}")).await;
    assert_eq!(format1(&g, 500), "media retrieval failed");
    assert_eq!(g.json["error"], "internal_server_error");
    assert_eq!(g.json["details"]["reason"], "server_error");
    assert!(
        !g.text.contains(&row.object_key),
        "no key in the answer: {}",
        g.text
    );
    // The record is untouched (a read changes nothing).
    assert_eq!(env.store().asset(id).unwrap().unwrap(), row);
    let listed: Value = media(&env, &env.key, "GET", "").await.json;
    assert_eq!(listed["total"], json!(1));
}
