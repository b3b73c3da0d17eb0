//! Retention (spec §8): the sweeper deletes what expired and nothing else;
//! permanent assets are never swept.

use std::process::Command;

use runtime::store::Assets;

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_deletes_expired_objects_only() {
    let env = Env::with(|c| c.sweep_interval = None).await;
    let synth = env.post("/tts/synthesize", synth_body("Sweep me")).await;
    synth.expect(200);
    let permanent = env.upload("voice.wav", wav(0.2), Some("voice_clone")).await;
    permanent.expect(200);
    let keep = env.upload("keep.wav", wav(0.2), Some("stt_input")).await;
    keep.expect(200);
    let expired = env
        .upload("old.wav", wav(0.2), Some("audio_job_input"))
        .await;
    expired.expect(200);

    let assets = env.store().assets().unwrap();
    let synth_asset = assets
        .iter()
        .find(|a| a.class == "synthesis")
        .unwrap()
        .clone();
    let expired_id = expired.json["asset_id"].as_i64().unwrap();
    env.store()
        .set_asset_expiry(synth_asset.id, Some("2000-01-01T00:00:00.000Z"))
        .unwrap();
    env.store()
        .set_asset_expiry(expired_id, Some("2000-01-01T00:00:00.000Z"))
        .unwrap();
    let before = env.object_keys();
    assert_eq!(before.len(), 4);

    // `gateway sweep`, the operator's command, on the same data directory.
    let out = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .arg("sweep")
        .envs(env.dir.gateway_env())
        .env("GATEWAY_PUBLIC_URL", env.gw.url())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "deleted 2 failed 0"
    );

    let after = env.object_keys();
    assert_eq!(after.len(), 2, "{after:?}");
    let live: Vec<_> = env
        .store()
        .assets()
        .unwrap()
        .into_iter()
        .filter(|a| a.deleted_at.is_none())
        .map(|a| a.id)
        .collect();
    assert_eq!(
        live,
        vec![
            permanent.json["asset_id"].as_i64().unwrap(),
            keep.json["asset_id"].as_i64().unwrap()
        ]
    );
    // Their URLs still work; the swept one's does not.
    assert_eq!(
        reqwest::get(permanent.json["url"].as_str().unwrap())
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    assert_eq!(
        reqwest::get(expired.json["url"].as_str().unwrap())
            .await
            .unwrap()
            .status()
            .as_u16(),
        404
    );
    // A second sweep finds nothing.
    let report = runtime::retention::sweep_once(&env.gw.gateway).await;
    assert_eq!(report, runtime::retention::SweepReport::default());
}

#[tokio::test]
async fn the_server_sweeps_periodically() {
    let env = Env::with(|c| c.sweep_interval = Some(std::time::Duration::from_millis(100))).await;
    let up = env.upload("old.wav", wav(0.2), None).await;
    env.store()
        .set_asset_expiry(
            up.json["asset_id"].as_i64().unwrap(),
            Some("2000-01-01T00:00:00.000Z"),
        )
        .unwrap();
    for _ in 0..100 {
        if env.object_keys().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(env.object_keys().is_empty(), "swept by the background task");
}
