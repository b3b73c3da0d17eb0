//! Packed objects of the local store (`runtime::objects::pack`): synthesis
//! audio appended to a shared segment instead of a file of its own, found
//! through its asset record, served with Range and HEAD, kept across a
//! restart and a `kill -9` (under both `GATEWAY_DB_SYNC` modes), swept,
//! and a torn segment tail costs only the torn record.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use runtime::store::{Accounts, Assets};
use serde_json::json;
use tokio::net::TcpListener;

use crate::harness::*;

fn synth(text: &str) -> serde_json::Value {
    json!({"voice_uuid": "stock-voice-1", "text": text, "output_format": "wav"})
}

/// The decoded `audio_content` of a synthesis answer.
fn audio_of(a: &Answer) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(a.json["audio_content"].as_str().unwrap())
        .unwrap()
}

/// Files under the objects directory, the store's own `.`-names skipped.
fn object_files(root: &std::path::Path) -> Vec<String> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

/// The segment files (paths), sorted by name.
fn segments(objects: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(objects.join(".packs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

async fn get(url: &str, range: Option<&str>) -> reqwest::Response {
    let mut rb = reqwest::Client::new().get(url);
    if let Some(r) = range {
        rb = rb.header("range", r);
    }
    rb.send().await.unwrap()
}

#[tokio::test]
async fn synthesis_audio_is_packed_and_served_whole_by_range_and_head() {
    let env = Env::start().await;
    let a = env.post("/tts/synthesize", synth("Packed audio")).await;
    a.expect(200);
    let b = env
        .post("/tts/synthesize", synth("Packed audio, twice"))
        .await;
    b.expect(200);
    // No file per object: both records are in one segment.
    assert!(object_files(&env.objects_dir()).is_empty());
    let segs = segments(&env.objects_dir());
    assert_eq!(segs.len(), 1, "{segs:?}");
    let records = runtime::objects::pack::read_records(&segs[0]).unwrap();
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| r.crc_ok));
    let seg_name = segs[0].file_name().unwrap().to_string_lossy().into_owned();
    let assets = env.store().assets().unwrap();
    assert_eq!(assets.len(), 2);
    for (asset, record) in assets.iter().zip(&records) {
        assert_eq!(asset.pack.as_deref(), Some(seg_name.as_str()));
        assert_eq!(asset.pack_offset, Some(record.offset));
        assert_eq!(
            (&asset.object_key, asset.size_bytes, &asset.content_type),
            (&record.key, record.size, &record.content_type)
        );
    }
    assert_eq!(env.object_keys().len(), 2);

    let audio = audio_of(&a);
    let url = a.json["audio_url"].as_str().unwrap();
    let r = get(url, None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "audio/wav");
    assert_eq!(r.bytes().await.unwrap().as_ref(), audio.as_slice());
    let r = get(url, Some("bytes=4-13")).await;
    assert_eq!(r.status(), 206);
    assert_eq!(
        r.headers()["content-range"],
        format!("bytes 4-13/{}", audio.len())
    );
    assert_eq!(r.bytes().await.unwrap().as_ref(), &audio[4..14]);
    let r = get(url, Some("bytes=-5")).await;
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().await.unwrap().as_ref(), &audio[audio.len() - 5..]);
    let r = get(url, Some(&format!("bytes={}-", audio.len()))).await;
    assert_eq!(r.status(), 416);
    let r = reqwest::Client::new().head(url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-length"], audio.len().to_string());
    // The second object's bytes, not its neighbour's.
    let r = get(b.json["audio_url"].as_str().unwrap(), None).await;
    assert_eq!(r.bytes().await.unwrap().as_ref(), audio_of(&b).as_slice());
    // Through the store's interface too.
    let objects = &env.gw.gateway.objects;
    let key = &records[0].key;
    assert!(objects.exists(key).await.unwrap());
    assert_eq!(objects.head(key).await.unwrap().size, audio.len() as u64);
    assert!(!objects.exists("synthesis/none.wav").await.unwrap());
    // The segment directory is never a servable key.
    let r = get(&format!("{}/objects/.packs/{seg_name}", env.gw.url()), None).await;
    assert_eq!(r.status(), 403);

    // A restarted gateway serves it still.
    let Env { sim, gw, dir, .. } = env;
    gw.stop().await;
    let gw = server::start(
        config_for(&sim, &dir),
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
    )
    .unwrap();
    let moved = url.replace(&url[..url.find("/objects/").unwrap()], &gw.url());
    let r = get(&moved, Some("bytes=0-3")).await;
    assert_eq!(r.status(), 206);
    assert_eq!(r.bytes().await.unwrap().as_ref(), &audio[..4]);
    let r = get(&moved, None).await;
    assert_eq!(r.bytes().await.unwrap().as_ref(), audio.as_slice());
    gw.stop().await;
}

#[tokio::test]
async fn the_sweeper_hides_expired_packed_objects_then_removes_idle_segments() {
    let env = Env::start().await;
    let a = env.post("/tts/synthesize", synth("Soon gone")).await;
    a.expect(200);
    let b = env.post("/tts/synthesize", synth("Gone later")).await;
    b.expect(200);
    let (url_a, url_b) = (
        a.json["audio_url"].as_str().unwrap(),
        b.json["audio_url"].as_str().unwrap(),
    );
    assert_eq!(get(url_a, None).await.status(), 200);
    let assets = env.store().assets().unwrap();
    let expire = |id| {
        env.store()
            .set_asset_expiry(id, Some("2000-01-01T00:00:00.000Z"))
            .unwrap()
    };
    expire(assets[0].id);
    let report = runtime::retention::sweep_once(&env.gw.gateway).await;
    assert_eq!((report.deleted, report.segments_removed), (1, 0));
    assert_eq!(get(url_a, None).await.status(), 404);
    assert_eq!(get(url_b, None).await.status(), 200);
    assert_eq!(env.object_keys().len(), 1);
    // Old, but a live asset is in it: kept.
    let seg = segments(&env.objects_dir()).pop().unwrap();
    let age = |p: &std::path::Path| {
        let old = std::time::SystemTime::now() - Duration::from_secs(2 * 24 * 3600);
        let f = std::fs::File::options().write(true).open(p).unwrap();
        f.set_modified(old).unwrap();
    };
    age(&seg);
    let report = runtime::retention::sweep_once(&env.gw.gateway).await;
    assert_eq!((report.deleted, report.segments_removed), (0, 0));
    expire(assets[1].id);
    let report = runtime::retention::sweep_once(&env.gw.gateway).await;
    assert_eq!(report.deleted, 1);
    assert_eq!(get(url_b, None).await.status(), 404);
    assert!(env.object_keys().is_empty());
    // No live asset and old, but still this gateway's active segment: kept.
    assert_eq!(report.segments_removed, 0);
    assert!(seg.exists());
    // Once that gateway is gone, a sweep (as `gateway sweep` runs it)
    // removes it; a young segment stays.
    let Env { sim, gw, dir, .. } = env;
    gw.stop().await;
    let young = seg.with_file_name("20990101T000000-000000000000.pack");
    std::fs::write(&young, b"").unwrap();
    let one_shot = server::gateway(config_for(&sim, &dir)).unwrap();
    let report = runtime::retention::sweep_once(&one_shot).await;
    assert_eq!(report.segments_removed, 1);
    assert!(
        !seg.exists(),
        "the old segment with no live asset is removed"
    );
    assert!(young.exists(), "a young segment stays");
}

/// Starts `gateway serve` on `dir` with `sync` (`full` or `normal`);
/// returns the child and its address.
fn serve(dir: &TempDir, sim: &sim::Sim, sync: &str) -> (Child, String) {
    let mut c = Command::new(BIN);
    c.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "info")
        .envs(dir.gateway_env())
        .env("GATEWAY_ADDR", "127.0.0.1:0")
        .env("GATEWAY_DB_SYNC", sync)
        .env("PROVIDER_API_KEY", PROVIDER_KEY)
        .env("PROVIDER_BASE_URL", sim.base_url())
        .env("PROVIDER_SYNTH_URL", sim.synth_url())
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "serve ended early");
        if let Some(a) = line
            .trim_end()
            .rsplit("listening on ")
            .next()
            .filter(|_| line.contains("listening on"))
        {
            break a.trim().to_owned();
        }
    };
    // Keep draining stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in err.lines() {});
    (child, addr)
}

async fn answered_objects_survive_kill_9(sync: &str) {
    let dir = TempDir::new("packs");
    let sim = start_sim().await;
    let store = runtime::store::Store::open_at(&dir.database()).unwrap();
    let user = store.create_user("k9@example.com", false).unwrap();
    let key = runtime::auth::create_key(&store, user).unwrap();
    drop(store);
    let (mut child, addr) = serve(&dir, &sim, sync);
    let client = reqwest::Client::new();
    let mut answered = Vec::new();
    let calls = (0..12).map(|i| {
        let client = client.clone();
        let (addr, key) = (addr.clone(), key.clone());
        async move {
            let r = client
                .post(format!("http://{addr}/api/v1/voice/tts/synthesize"))
                .bearer_auth(&key)
                .json(&synth(&format!("Answered before the kill {i}")))
                .send()
                .await
                .unwrap();
            Answer::from(r).await
        }
    });
    for a in futures_util::future::join_all(calls).await {
        a.expect(200);
        answered.push((
            a.json["audio_url"].as_str().unwrap().to_owned(),
            audio_of(&a),
        ));
    }
    // SIGKILL right after the answers: no shutdown, nothing flushed.
    child.kill().unwrap();
    child.wait().unwrap();

    let (mut child, addr) = serve(&dir, &sim, sync);
    for (url, audio) in &answered {
        let path = &url[url.find("/objects/").unwrap()..];
        let r = get(&format!("http://{addr}{path}"), None).await;
        assert_eq!(r.status(), 200, "{sync}: {url}");
        assert_eq!(
            r.bytes().await.unwrap().as_ref(),
            audio.as_slice(),
            "{sync}"
        );
    }
    // The restarted process appends to a segment of its own.
    let r = client
        .post(format!("http://{addr}/api/v1/voice/tts/synthesize"))
        .bearer_auth(&key)
        .json(&synth("After the restart"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(segments(&dir.0.join("objects")).len(), 2, "{sync}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn answered_packed_objects_survive_kill_9_under_full_sync() {
    answered_objects_survive_kill_9("full").await;
}

#[tokio::test]
async fn answered_packed_objects_survive_kill_9_under_normal_sync() {
    answered_objects_survive_kill_9("normal").await;
}

#[tokio::test]
async fn a_torn_segment_tail_costs_only_the_torn_object() {
    let env = Env::start().await;
    let a = env.post("/tts/synthesize", synth("Whole")).await;
    a.expect(200);
    let b = env
        .post("/tts/synthesize", synth("Torn by the crash"))
        .await;
    b.expect(200);
    let Env {
        sim, gw, dir, key, ..
    } = env;
    gw.stop().await;
    // A crash tore the tail: the second record is cut in its body.
    let seg = segments(&dir.0.join("objects")).pop().unwrap();
    let records = runtime::objects::pack::read_records(&seg).unwrap();
    assert_eq!(records.len(), 2);
    let f = std::fs::File::options().write(true).open(&seg).unwrap();
    f.set_len(records[1].offset + records[1].size / 2).unwrap();
    drop(f);
    assert_eq!(runtime::objects::pack::read_records(&seg).unwrap().len(), 1);

    let gw = server::start(
        config_for(&sim, &dir),
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
    )
    .unwrap();
    let at = |url: &str| url.replace(&url[..url.find("/objects/").unwrap()], &gw.url());
    let r = get(&at(a.json["audio_url"].as_str().unwrap()), None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.bytes().await.unwrap().as_ref(), audio_of(&a).as_slice());
    // The torn object is an error, never bytes that are not its own.
    let r = get(&at(b.json["audio_url"].as_str().unwrap()), None).await;
    assert_eq!(r.status(), 500);
    // New writes go to a new segment, never after the torn tail.
    let c = reqwest::Client::new()
        .post(format!("{}/api/v1/voice/tts/synthesize", gw.url()))
        .bearer_auth(&key)
        .json(&synth("After the tear"))
        .send()
        .await
        .unwrap();
    let c = Answer::from(c).await;
    c.expect(200);
    let segs = segments(&dir.0.join("objects"));
    assert_eq!(segs.len(), 2);
    assert_eq!(
        std::fs::metadata(&seg).unwrap().len(),
        records[1].offset + records[1].size / 2,
        "nothing appended to the torn segment"
    );
    let r = get(c.json["audio_url"].as_str().unwrap(), None).await;
    assert_eq!(r.bytes().await.unwrap().as_ref(), audio_of(&c).as_slice());
    gw.stop().await;
}
