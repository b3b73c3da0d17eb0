//! OpenAI's Files API (issue #43): `POST /api/v1/files` streamed into the
//! object store, list, retrieve, content streamed back, delete; driven by
//! the official `openai` SDK (tests/openai_sdk/files.py), each file the
//! caller's own (another user's id is a 404 on every route), bad input a
//! 400 with nothing kept, a file over `GATEWAY_MAX_FILE_BYTES` a 413.

use runtime::store::Assets;
use serde_json::Value;

use crate::harness::*;

async fn upload(env: &Env, key: &str, name: &str, bytes: Vec<u8>, purpose: Option<&str>) -> Answer {
    let mut form = reqwest::multipart::Form::new();
    if let Some(p) = purpose {
        form = form.text("purpose", p.to_owned());
    }
    form = form.part(
        "file",
        reqwest::multipart::Part::bytes(bytes).file_name(name.to_owned()),
    );
    let r = env
        .client
        .post(env.url("/api/v1/files"))
        .bearer_auth(key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    Answer::from(r).await
}

/// The live files' object keys in the store.
fn live_files(env: &Env) -> Vec<String> {
    env.store()
        .assets()
        .unwrap()
        .into_iter()
        .filter(|a| a.class == "file" && a.deleted_at.is_none())
        .map(|a| a.object_key)
        .collect()
}

#[tokio::test]
async fn the_openai_sdk_creates_lists_reads_and_deletes_files() {
    let env = llm_env(|_| {}).await;
    let vars = vec![
        ("GATEWAY_BASE_URL", env.url("/api/v1")),
        ("GATEWAY_KEY", env.key.clone()),
    ];
    let out = run_script("python3", "tests/openai_sdk/files.py", vars).await;
    let ok = checks(&out);
    for name in ["create", "expires", "list", "content", "delete"] {
        assert!(ok.contains_key(name), "{name}: {out}");
    }
    // The deleted file's object is gone; the other is kept, the caller's.
    let kept = live_files(&env);
    // The hour-long file was deleted by the script too.
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].starts_with(&format!("files/{}/", env.user_id)));
    let deleted: Vec<_> = env
        .store()
        .assets()
        .unwrap()
        .into_iter()
        .filter(|a| a.class == "file" && a.deleted_at.is_some())
        .collect();
    assert_eq!(deleted.len(), 2);
    assert!(deleted
        .iter()
        .all(|d| !env.object_keys().contains(&d.object_key)));
    assert!(env.object_keys().contains(&kept[0]));
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn another_users_file_is_a_404_on_every_route() {
    let env = llm_env(|_| {}).await;
    let a = upload(&env, &env.key, "a.jsonl", b"{}\n".to_vec(), Some("batch")).await;
    a.expect(200);
    let id = a.json["id"].as_str().unwrap().to_owned();
    let (_, other) = env.new_user("mallory@example.com");
    for (method, path) in [
        ("GET", format!("/api/v1/files/{id}")),
        ("GET", format!("/api/v1/files/{id}/content")),
        ("DELETE", format!("/api/v1/files/{id}")),
        ("GET", "/api/v1/files/file-999999".to_owned()),
        ("GET", "/api/v1/files/not-a-file".to_owned()),
    ] {
        let r = env.call_as(&other, method, &env.url(&path), None).await;
        r.expect(404);
        let m = r.json["error"]["message"].as_str().unwrap_or("");
        assert!(m.starts_with("No such File object"), "{path}: {}", r.json);
    }
    let listed = env
        .call_as(&other, "GET", &env.url("/api/v1/files"), None)
        .await;
    listed.expect(200);
    assert_eq!(listed.json["data"], Value::Array(vec![]));
    assert_eq!(live_files(&env).len(), 1, "still there, still its owner's");
}

#[tokio::test]
async fn bad_uploads_keep_nothing() {
    let env = llm_env(|c| c.max_file_bytes = 1000).await;
    let before = env.object_keys();
    let r = upload(
        &env,
        &env.key,
        "a.jsonl",
        b"{}\n".to_vec(),
        Some("fine-tune"),
    )
    .await;
    r.expect(400);
    assert_eq!(r.json["error"]["param"], "purpose", "{}", r.json);
    upload(&env, &env.key, "a.jsonl", b"{}\n".to_vec(), None)
        .await
        .expect(400);
    let big = upload(&env, &env.key, "big.jsonl", vec![b'x'; 5000], Some("batch")).await;
    big.expect(413);
    assert!(live_files(&env).is_empty());
    assert_eq!(env.object_keys(), before, "no object left behind");
    // Listing pages: `after` and `limit`, newest first.
    let mut ids = Vec::new();
    for i in 0..3 {
        let a = upload(
            &env,
            &env.key,
            &format!("{i}.jsonl"),
            b"{}\n".to_vec(),
            Some("batch"),
        )
        .await;
        ids.push(a.json["id"].as_str().unwrap().to_owned());
    }
    let page = env
        .call_as(
            &env.key,
            "GET",
            &env.url(&format!("/api/v1/files?limit=1&after={}", ids[2])),
            None,
        )
        .await;
    page.expect(200);
    assert_eq!(page.json["data"][0]["id"], ids[1].as_str());
    assert_eq!(page.json["has_more"], true);
}

#[tokio::test]
async fn an_expired_file_is_swept_and_expiry_fields_are_checked() {
    let env = llm_env(|_| {}).await;
    for (anchor, seconds, param) in [
        ("created_at", "10", "expires_after[seconds]"),
        ("last_active_at", "3600", "expires_after[anchor]"),
    ] {
        let form = reqwest::multipart::Form::new()
            .text("purpose", "batch")
            .text("expires_after[anchor]", anchor)
            .text("expires_after[seconds]", seconds)
            .part(
                "file",
                reqwest::multipart::Part::bytes(b"{}\n".to_vec()).file_name("a.jsonl"),
            );
        let r = env.post_form(&env.url("/api/v1/files"), form).await;
        r.expect(400);
        assert_eq!(r.json["error"]["param"], param, "{}", r.json);
    }
    assert!(live_files(&env).is_empty());
    // A batch file past its expiry is swept: its object removed, then 404.
    let a = upload(&env, &env.key, "old.jsonl", b"{}\n".to_vec(), Some("batch")).await;
    a.expect(200);
    let id = a.json["id"].as_str().unwrap().to_owned();
    let n: i64 = id.trim_start_matches("file-").parse().unwrap();
    env.store()
        .set_asset_expiry(n, Some("2020-01-01T00:00:00Z"))
        .unwrap();
    runtime::retention::sweep_once(&env.gw.gateway).await;
    assert!(live_files(&env).is_empty());
    let r = env
        .call_as(
            &env.key,
            "GET",
            &env.url(&format!("/api/v1/files/{id}")),
            None,
        )
        .await;
    r.expect(404);
}
