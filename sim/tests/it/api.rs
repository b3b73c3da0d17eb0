//! The voice provider API, control plane, jobs, webhooks, faults and log.

use std::io::Cursor;
use std::time::{Duration, Instant};

use base64::Engine as _;
use reqwest::multipart::Form;
use serde_json::{json, Value};
use sim::{Sim, SimConfig};

use crate::support::{client, get, post, receiver, start, wav_part};

async fn wait_status(c: &reqwest::Client, url: String, want: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (_, v) = get(c, url.clone()).await;
        if v["item"]["status"] == want {
            return v["item"].clone();
        }
        assert!(Instant::now() < deadline, "never reached {want}: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn synthesize_wav_and_mp3() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let url = format!("{}/synthesize", sim.synth_url());
    let (s, v) = post(
        &c,
        url.clone(),
        json!({"voice_uuid": "stock-voice-1", "data": "Hello world"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["success"], true);
    assert_eq!(v["output_format"], "wav");
    assert_eq!(v["sample_rate"], 22050);
    assert_eq!(v["duration"], 0.66);
    assert_eq!(
        v["audio_timestamps"]["graph_chars"]
            .as_array()
            .unwrap()
            .len(),
        11
    );
    assert_eq!(v["audio_timestamps"]["graph_times"][10][1], 0.66);
    assert_eq!(v["issues"], json!([]));
    let wav = base64::engine::general_purpose::STANDARD
        .decode(v["audio_content"].as_str().unwrap())
        .unwrap();
    let reader = hound::WavReader::new(Cursor::new(wav)).unwrap();
    let secs = f64::from(reader.duration()) / f64::from(reader.spec().sample_rate);
    assert!((secs - 0.66).abs() < 0.001);

    let (s, v) = post(
        &c,
        url.clone(),
        json!({"voice_uuid": "stock-voice-2", "data": "x".repeat(100), "output_format": "mp3", "sample_rate": 44100}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["output_format"], "mp3");
    assert_eq!(v["sample_rate"], 44100);
    let mp3 = base64::engine::general_purpose::STANDARD
        .decode(v["audio_content"].as_str().unwrap())
        .unwrap();
    let (frames, secs) = sim::audio::mp3_frames(&mp3).unwrap();
    assert_eq!(frames, (6.0f64 * 44100.0 / 1152.0).round() as usize);
    assert_eq!(v["duration"].as_f64().unwrap(), sim::audio::round_ms(secs));
    assert!((secs - 6.0).abs() < 0.014);

    // Short text: at least half a second.
    let (_, v) = post(
        &c,
        url.clone(),
        json!({"voice_uuid": "stock-voice-1", "data": "Hi"}),
    )
    .await;
    assert_eq!(v["duration"], 0.5);

    let (s, v) = post(&c, url.clone(), json!({"voice_uuid": "stock-voice-1"})).await;
    assert_eq!((s, v["success"].clone()), (400, json!(false)));
    assert_eq!(v["errors"]["data"], json!(["is required"]));
    let (s, _) = post(&c, url.clone(), json!({"data": "x"})).await;
    assert_eq!(s, 400);
    let (s, _) = post(&c, url.clone(), json!({"voice_uuid": "nope", "data": "x"})).await;
    assert_eq!(s, 404);
    let (s, _) = post(
        &c,
        url,
        json!({"voice_uuid": "stock-voice-1", "data": "x", "output_format": "ogg"}),
    )
    .await;
    assert_eq!(s, 400);

    // Usage is booked for the day.
    let today = chrono::Utc::now().date_naive();
    let (s, v) = get(
        &c,
        format!(
            "{}/account/billing_usage?start_date={today}&end_date={today}",
            sim.base_url()
        ),
    )
    .await;
    assert_eq!(s, 200);
    let synth: f64 = v["items"]["synth"].as_str().unwrap().parse().unwrap();
    assert!((synth - (0.66 + 6.0 + 0.5)).abs() < 0.02, "{v}");
    let (s, _) = post(
        &c,
        format!("{}/__sim/billing_usage", sim.url()),
        json!({"date": today.to_string(), "items": {"synth": "8450"}}),
    )
    .await;
    assert_eq!(s, 200);
    let (_, v) = get(
        &c,
        format!(
            "{}/account/billing_usage?start_date={today}&end_date={today}",
            sim.base_url()
        ),
    )
    .await;
    assert_eq!(v["items"]["synth"], "8450");
    let (s, _) = get(
        &c,
        format!(
            "{}/account/billing_usage?start_date={today}",
            sim.base_url()
        ),
    )
    .await;
    assert_eq!(s, 400);
}

#[tokio::test]
async fn stt_job_progresses_and_signed_webhook_arrives_once() {
    let (hook, mut rx) = receiver().await;
    let sim = start(SimConfig {
        job_duration: Duration::from_millis(150),
        webhook_url: Some(hook),
        webhook_secret: Some("s3cret".into()),
        ..Default::default()
    })
    .await;
    let c = client();
    let form = Form::new()
        .part("file", wav_part(1500, "talk.wav"))
        .text("query", "who speaks?");
    let r = c
        .post(format!("{}/speech-to-text", sim.base_url()))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["item"]["status"], "pending");
    let id = v["item"]["uuid"].as_str().unwrap().to_owned();
    let url = format!("{}/speech-to-text/{id}", sim.base_url());
    let item = wait_status(&c, url.clone(), "completed").await;
    assert_eq!(item["duration_seconds"], 1.5);
    assert_eq!(item["query"], "who speaks?");
    assert!(item["text"].as_str().unwrap().len() > 5);
    let words = item["words"].as_array().unwrap();
    assert_eq!(words.last().unwrap()["end_time"], 1.5);
    assert!(words[0].get("speaker_id").is_some());

    let (sig, body) = tokio::time::timeout(Duration::from_secs(3), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(sim::webhook::verify(
        "s3cret",
        &body,
        sig.as_deref().unwrap()
    ));
    let payload: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(payload["event"], "job.completed");
    assert_eq!(payload["kind"], "stt");
    assert_eq!(payload["id"], id.as_str());
    assert_eq!(payload["status"], "completed");
    assert_eq!(payload["item"], item);
    // Exactly once, even when forced after completion.
    let (s, _) = post(
        &c,
        format!("{}/__sim/jobs/{id}/complete", sim.url()),
        json!({}),
    )
    .await;
    assert_eq!(s, 200);
    assert!(tokio::time::timeout(Duration::from_millis(300), rx.recv())
        .await
        .is_err());
    assert_eq!(sim.webhooks().len(), 1);

    // List shape.
    let (_, v) = get(
        &c,
        format!("{}/speech-to-text?page=1&per_page=5", sim.base_url()),
    )
    .await;
    assert_eq!(
        v["meta"],
        json!({"page": 1, "per_page": 5, "total_pages": 1, "total_items": 1})
    );
    assert_eq!(v["items"][0]["uuid"], id.as_str());
    // Missing file.
    let r = c
        .post(format!("{}/speech-to-text", sim.base_url()))
        .multipart(Form::new().text("query", "q"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn voice_build_forced_and_design_and_recordings() {
    let (hook, mut rx) = receiver().await;
    let sim = start(SimConfig {
        job_duration: Duration::from_secs(30),
        webhook_url: Some(hook),
        ..Default::default()
    })
    .await;
    let c = client();
    let b = sim.base_url();
    let (s, v) = post(&c, format!("{b}/voices"), json!({"description": "no name"})).await;
    assert_eq!(s, 400);
    assert!(v["errors"]["name"].is_array());
    let (s, v) = post(
        &c,
        format!("{b}/voices"),
        json!({"name": "Mine", "consent": "yes"}),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(v["item"]["status"], "draft");
    let id = v["item"]["uuid"].as_str().unwrap().to_owned();
    for k in ["created_at", "updated_at", "default_language", "voice_type"] {
        assert!(v["item"].get(k).is_some(), "{k}");
    }
    // Recordings: multipart create, get, patch, list, delete.
    let form = Form::new()
        .part("file", wav_part(800, "r.wav"))
        .text("name", "r1")
        .text("text", "hello")
        .text("is_active", "true");
    let v: Value = c
        .post(format!("{b}/voices/{id}/recordings"))
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["item"]["is_active"], true);
    assert_eq!(v["item"]["duration_seconds"], 0.8);
    let rid = v["item"]["uuid"].as_str().unwrap().to_owned();
    let v: Value = c
        .patch(format!("{b}/voices/{id}/recordings/{rid}"))
        .json(&json!({"emotion": "happy"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["item"]["emotion"], "happy");
    let (_, v) = get(&c, format!("{b}/voices/{id}/recordings")).await;
    assert_eq!(v["items"].as_array().unwrap().len(), 1);
    let (s, _) = get(&c, format!("{b}/voices/nope/recordings")).await;
    assert_eq!(s, 404);
    assert_eq!(
        c.delete(format!("{b}/voices/{id}/recordings/{rid}"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );

    let (s, v) = post(&c, format!("{b}/voices/{id}/build"), json!({"fill": false})).await;
    assert_eq!(s, 200);
    assert_eq!(v["item"]["status"], "building");
    let (s, v) = post(
        &c,
        format!("{}/__sim/jobs/{id}/complete", sim.url()),
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (_, v) = get(&c, format!("{b}/voices/{id}")).await;
    assert_eq!(v["item"]["status"], "ready");
    let (_, body) = tokio::time::timeout(Duration::from_secs(3), rx.recv())
        .await
        .unwrap()
        .unwrap();
    let payload: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(payload["event"], "voice.build.completed");
    assert_eq!(payload["kind"], "voice");
    assert_eq!(payload["item"]["status"], "ready");
    let (s, _) = post(
        &c,
        format!("{}/__sim/jobs/unknown/complete", sim.url()),
        json!({}),
    )
    .await;
    assert_eq!(s, 404);

    // Voice design → rapid voice.
    let (s, _) = post(
        &c,
        format!("{b}/voice-design"),
        json!({"sample_text": "hi"}),
    )
    .await;
    assert_eq!(s, 400);
    let (s, v) = post(
        &c,
        format!("{b}/voice-design"),
        json!({"user_prompt": "warm narrator"}),
    )
    .await;
    assert_eq!(s, 200);
    let cands = v["item"]["voice_candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 3);
    assert_eq!(cands[2]["voice_sample_index"], 2);
    let sample = c
        .get(cands[0]["audio_url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(sim::audio::wav_duration(&sample), Some(3.0));
    let d = v["item"]["uuid"].as_str().unwrap();
    let (s, _) = post(
        &c,
        format!("{b}/voice-design/{d}/3/create_rapid_voice"),
        json!({"voice_name": "x"}),
    )
    .await;
    assert_eq!(s, 400);
    let (s, _) = post(
        &c,
        format!("{b}/voice-design/nope/0/create_rapid_voice"),
        json!({"voice_name": "x"}),
    )
    .await;
    assert_eq!(s, 404);
    let (s, v) = post(
        &c,
        format!("{b}/voice-design/{d}/1/create_rapid_voice"),
        json!({"voice_name": "Designed"}),
    )
    .await;
    assert_eq!(s, 200);
    let vid = v["voice_uuid"].as_str().unwrap();
    let (_, v) = get(&c, format!("{b}/voices/{vid}")).await;
    assert_eq!(
        (v["item"]["name"].clone(), v["item"]["status"].clone()),
        (json!("Designed"), json!("ready"))
    );

    let r = c.delete(format!("{b}/voices/{id}")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"success": true}));
    let (s, _) = get(&c, format!("{b}/voices/{id}")).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn enhance_edit_detect_watermark_identity() {
    let sim = start(SimConfig {
        job_duration: Duration::from_millis(90),
        ..Default::default()
    })
    .await;
    let c = client();
    let b = sim.base_url();

    let form = Form::new().part("audio_file", wav_part(1200, "noisy.wav"));
    let r = c
        .post(format!("{b}/audio_enhancements"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], "pending");
    let id = v["uuid"].as_str().unwrap();
    let (_, v) = get(&c, format!("{b}/audio_enhancements/{id}")).await;
    assert!(v["item"].get("enhanced_audio_url").is_none());
    let item = wait_status(&c, format!("{b}/audio_enhancements/{id}"), "completed").await;
    assert_eq!(item["duration_seconds"], 1.2);
    let media = item["enhanced_audio_url"].as_str().unwrap();
    assert!(media.starts_with(&format!("{}/__sim/media/", sim.url())));
    let wav = c.get(media).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(sim::audio::wav_duration(&wav), Some(1.2));

    let form = Form::new()
        .part("input_audio", wav_part(700, "in.wav"))
        .text("original_transcript", "a")
        .text("target_transcript", "b")
        .text("voice_uuid", "stock-voice-1");
    let v: Value = c
        .post(format!("{b}/edit"))
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = v["item"]["uuid"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(120)).await;
    let (_, v) = get(&c, format!("{b}/edit/{id}")).await;
    assert!(v["item"].get("status").is_none());
    assert!(v["item"]["result_audio_url"].is_string());
    assert_eq!(v["item"]["duration_seconds"], 0.7);

    let (_, v) = post(
        &c,
        format!("{b}/detect"),
        json!({"url": "http://127.0.0.1:9/fake.mp4", "audio_source_tracing": true}),
    )
    .await;
    assert_eq!(v["item"]["media_type"], "video");
    assert_eq!(v["item"]["status"], "pending");
    let id = v["item"]["uuid"].as_str().unwrap().to_owned();
    let (_, v) = post(
        &c,
        format!("{b}/detect"),
        json!({"url": "https://x.test/a.png"}),
    )
    .await;
    assert_eq!(v["item"]["media_type"], "image");
    assert_eq!(v["item"]["image_count"], 1);
    let (s, _) = post(&c, format!("{b}/detect"), json!({})).await;
    assert_eq!(s, 400);
    let item = wait_status(&c, format!("{b}/detect/{id}"), "completed").await;
    assert_eq!(item["metrics"]["label"], "fake");
    assert!(item["duration_seconds"].is_number());
    let tracing = wait_status(&c, format!("{b}/audio_source_tracings/{id}"), "completed").await;
    assert_eq!(tracing["label"], "resemble_ai");
    assert!(tracing["error_message"].is_null());

    let (_, v) = post(
        &c,
        format!("{b}/intelligence"),
        json!({"url": "https://x.test/a.wav"}),
    )
    .await;
    let id = v["item"]["uuid"].as_str().unwrap().to_owned();
    let item = wait_status(&c, format!("{b}/intelligences/{id}"), "completed").await;
    assert!(item["description"].is_object());

    let (_, v) = post(
        &c,
        format!("{b}/watermark/apply"),
        json!({"url": "https://x.test/a.wav", "strength": 0.5}),
    )
    .await;
    let id = v["item"]["uuid"].as_str().unwrap().to_owned();
    let item = wait_status(&c, format!("{b}/watermark/apply/{id}/result"), "completed").await;
    let marked = item["watermarked_media"].as_str().unwrap().to_owned();
    let (_, v) = post(&c, format!("{b}/watermark/detect"), json!({"url": marked})).await;
    let id = v["item"]["uuid"].as_str().unwrap().to_owned();
    let item = wait_status(&c, format!("{b}/watermark/detect/{id}/result"), "completed").await;
    assert_eq!(item["metrics"]["overall_status"], "present");
    assert!(item["metrics"]["confidence"].as_f64().unwrap() > 0.9);
    assert_eq!(item["duration_seconds"], 5.0);

    let (s, _) = post(&c, format!("{b}/identity"), json!({"url": "u"})).await;
    assert_eq!(s, 400);
    let (_, v) = post(
        &c,
        format!("{b}/identity"),
        json!({"name": "Ann", "url": "https://x.test/ann.wav"}),
    )
    .await;
    let ann = v["item"]["uuid"].as_str().unwrap().to_owned();
    post(&c, format!("{b}/identity"), json!({"name": "Bob"})).await;
    let (s, _) = post(
        &c,
        format!("{b}/identity/{ann}/attachments"),
        json!({"url": "https://x.test/2.wav"}),
    )
    .await;
    assert_eq!(s, 200);
    let (_, v) = post(
        &c,
        format!("{b}/identity/search"),
        json!({"url": "https://x.test/q.wav", "top_k": 1}),
    )
    .await;
    let hits = v["item"].as_object().unwrap();
    assert_eq!(hits.len(), 1);
    let hit = hits.values().next().unwrap();
    assert!(
        hit["distance"].is_number() && hit["score_type"].is_string() && hit["name"].is_string()
    );
    let (s, _) = post(&c, format!("{b}/identity/search"), json!({})).await;
    assert_eq!(s, 400);
    assert_eq!(
        c.delete(format!("{b}/identity/{ann}"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let (s, _) = get(&c, format!("{b}/identity/{ann}")).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn pagination_and_crud_shapes() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let b = sim.base_url();
    let (_, v) = get(&c, format!("{b}/voices?page=1&page_size=2")).await;
    assert_eq!(
        (
            v["page"].clone(),
            v["num_pages"].clone(),
            v["page_size"].clone()
        ),
        (json!(1), json!(2), json!(2))
    );
    assert_eq!(v["items"].as_array().unwrap().len(), 2);
    let (_, v) = get(&c, format!("{b}/voices?page=2&page_size=2")).await;
    assert_eq!(v["items"][0]["uuid"], "stock-voice-3");
    let (_, v) = get(&c, format!("{b}/voices")).await;
    assert_eq!(
        (v["page_size"].clone(), v["num_pages"].clone()),
        (json!(10), json!(1))
    );
    let (s, _) = get(&c, format!("{b}/voices?page=zero")).await;
    assert_eq!(s, 400);

    let (_, v) = post(
        &c,
        format!("{b}/projects"),
        json!({"name": "P", "description": "d"}),
    )
    .await;
    assert_eq!(v["item"]["is_archived"], false);
    let p = v["item"]["uuid"].as_str().unwrap().to_owned();
    let v: Value = c
        .put(format!("{b}/projects/{p}"))
        .json(&json!({"is_archived": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (v["item"]["name"].clone(), v["item"]["is_archived"].clone()),
        (json!("P"), json!(true))
    );
    let (_, v) = post(
        &c,
        format!("{b}/projects/{p}/clips"),
        json!({"title": "t", "body": "hello", "voice_uuid": "stock-voice-1"}),
    )
    .await;
    let clip = v["item"]["uuid"].as_str().unwrap().to_owned();
    let (_, v) = get(&c, format!("{b}/projects/{p}/clips")).await;
    assert_eq!(v["items"][0]["uuid"], clip.as_str());
    let (s, _) = post(&c, format!("{b}/projects/nope/clips"), json!({})).await;
    assert_eq!(s, 404);
    assert_eq!(
        c.delete(format!("{b}/projects/{p}"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let (s, _) = get(&c, format!("{b}/projects/{p}/clips/{clip}")).await;
    assert_eq!(s, 404);

    let (_, v) = post(
        &c,
        format!("{b}/agents"),
        json!({"name": "A", "nested": {"x": 1}}),
    )
    .await;
    assert_eq!(v["item"]["nested"]["x"], 1);
    let a = v["item"]["uuid"].as_str().unwrap().to_owned();
    for sub in ["tools", "webhooks"] {
        let (_, v) = post(&c, format!("{b}/agents/{a}/{sub}"), json!({"name": "t"})).await;
        let t = v["item"]["uuid"].as_str().unwrap().to_owned();
        let (_, v) = get(&c, format!("{b}/agents/{a}/{sub}")).await;
        assert_eq!(v["count"], 1);
        assert_eq!(v["items"][0]["uuid"], t.as_str());
        let v: Value = c
            .put(format!("{b}/agents/{a}/{sub}/{t}"))
            .json(&json!({"x": 2}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            (v["item"]["name"].clone(), v["item"]["x"].clone()),
            (json!("t"), json!(2))
        );
        let (s, _) = get(&c, format!("{b}/agents/nope/{sub}")).await;
        assert_eq!(s, 404);
    }
    let (s, v) = get(&c, format!("{b}/agents/capabilities")).await;
    assert_eq!((s, v["success"].clone()), (200, json!(true)));
    let (s, _) = get(&c, format!("{b}/agents/system-tools")).await;
    assert_eq!(s, 200);
    let (_, v) = get(&c, format!("{b}/agents")).await;
    assert_eq!(v["items"].as_array().unwrap().len(), 1);
    let (_, v) = post(&c, format!("{b}/knowledge_items"), json!({"title": "k"})).await;
    let k = v["item"]["uuid"].as_str().unwrap().to_owned();
    assert_eq!(
        c.delete(format!("{b}/knowledge_items/{k}"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let (s, _) = get(&c, format!("{b}/knowledge_items/{k}")).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn faults_status_delay_reset_timeout() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    let ctl = format!("{}/__sim/faults", sim.url());
    let voices = format!("{}/voices", sim.base_url());

    let (s, _) = post(&c, ctl.clone(), json!({"path": "/api/v2/voices*", "method": "GET", "fault": {"status": 503, "headers": {"Retry-After": "7"}}})).await;
    assert_eq!(s, 200);
    let r = c.get(&voices).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "7");
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["success"].clone(), v["message"].clone()),
        (json!(false), json!("injected fault"))
    );
    assert_eq!(
        c.get(&voices).send().await.unwrap().status(),
        200,
        "count defaults to 1"
    );

    post(&c, ctl.clone(), json!({"path": "/api/v2/voices", "fault": {"status": 429, "body": {"custom": true}}, "count": 2})).await;
    for _ in 0..2 {
        let r = c.get(&voices).send().await.unwrap();
        assert_eq!(r.status(), 429);
        assert_eq!(r.json::<Value>().await.unwrap(), json!({"custom": true}));
    }
    assert_eq!(c.get(&voices).send().await.unwrap().status(), 200);

    post(
        &c,
        ctl.clone(),
        json!({"path": "/api/v2/voices", "fault": {"delay_ms": 300}}),
    )
    .await;
    let t = Instant::now();
    assert_eq!(c.get(&voices).send().await.unwrap().status(), 200);
    assert!(t.elapsed() >= Duration::from_millis(300));

    post(
        &c,
        ctl.clone(),
        json!({"path": "/synthesize", "fault": "reset"}),
    )
    .await;
    let err = c
        .post(format!("{}/synthesize", sim.synth_url()))
        .json(&json!({"voice_uuid": "stock-voice-1", "data": "x"}))
        .send()
        .await
        .unwrap_err();
    assert!(!err.is_timeout() && err.status().is_none(), "{err:?}");

    post(&c, ctl.clone(), json!({"path": "*", "fault": "timeout"})).await;
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let err = quick.get(&voices).send().await.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");

    // Control plane is never faulted; unlimited rules until cleared.
    post(
        &c,
        ctl.clone(),
        json!({"path": "*", "fault": {"status": 500}, "count": 0}),
    )
    .await;
    let (s, v) = get(&c, ctl.clone()).await;
    assert_eq!(s, 200);
    assert_eq!(v["faults"][0]["remaining"], Value::Null);
    for _ in 0..3 {
        assert_eq!(c.get(&voices).send().await.unwrap().status(), 500);
    }
    assert_eq!(c.delete(&ctl).send().await.unwrap().status(), 200);
    assert_eq!(c.get(&voices).send().await.unwrap().status(), 200);
    let (s, _) = post(&c, ctl, json!({"path": "/x", "fault": "melt"})).await;
    assert_eq!(s, 400);
}

#[tokio::test]
async fn request_log_records_what_was_sent() {
    let sim = start(SimConfig::default()).await;
    let c = client();
    c.post(format!("{}/synthesize?trace=1", sim.synth_url()))
        .bearer_auth("k1")
        .json(&json!({"voice_uuid": "stock-voice-1", "data": "hello"}))
        .send()
        .await
        .unwrap();
    let form = Form::new()
        .part("audio_file", wav_part(100, "a.wav"))
        .text("note", "n");
    c.post(format!("{}/audio_enhancements", sim.base_url()))
        .multipart(form)
        .send()
        .await
        .unwrap();
    c.get(format!("{}/__sim/health", sim.url()))
        .send()
        .await
        .unwrap();

    let (_, v) = get(&c, format!("{}/__sim/requests", sim.url())).await;
    let reqs = v["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 2, "control requests are not logged: {v}");
    assert_eq!(reqs[0]["method"], "POST");
    assert_eq!(reqs[0]["path"], "/synthesize");
    assert_eq!(reqs[0]["query"], "trace=1");
    assert_eq!(reqs[0]["headers"]["authorization"], "Bearer k1");
    assert_eq!(reqs[0]["json"]["data"], "hello");
    assert!(reqs[0]["body"].as_str().unwrap().contains("\"data\""));
    let parts = reqs[1]["parts"].as_array().unwrap();
    assert_eq!(parts[0]["name"], "audio_file");
    assert_eq!(parts[0]["filename"], "a.wav");
    assert_eq!(parts[0]["size"], 44 + 2 * 1600);
    assert_eq!(parts[1]["value"], "n");
    assert_eq!(sim.requests().len(), 2);

    assert_eq!(
        c.delete(format!("{}/__sim/requests", sim.url()))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let (_, v) = get(&c, format!("{}/__sim/requests", sim.url())).await;
    assert_eq!(v["requests"], json!([]));
}

#[tokio::test]
async fn credentials_are_checked_when_configured() {
    let sim = start(SimConfig {
        api_key: Some("key-1".into()),
        ..Default::default()
    })
    .await;
    let c = client();
    let voice = format!("{}/voices/stock-voice-1", sim.base_url());
    let r = c.get(&voice).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.json::<Value>().await.unwrap()["success"], false);
    assert_eq!(
        c.get(&voice)
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        c.get(&voice)
            .bearer_auth("key-1")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        c.get(&voice)
            .header("Authorization", "Token token=key-1")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        c.get(&voice)
            .header("Authorization", "Token token=\"key-1\"")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let synth = format!("{}/synthesize", sim.synth_url());
    let body = json!({"voice_uuid": "stock-voice-1", "data": "x"});
    assert_eq!(
        c.post(&synth).json(&body).send().await.unwrap().status(),
        401
    );
    assert_eq!(
        c.post(&synth)
            .header("x-access-token", "key-1")
            .json(&body)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // The control plane needs no credential, and can change the key.
    let (s, v) = post(
        &c,
        format!("{}/__sim/config", sim.url()),
        json!({"api_key": null, "job_duration_ms": 50}),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(v["job_duration_ms"], 50);
    assert_eq!(c.get(&voice).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn drop_stops_the_server() {
    let sim = start(SimConfig::default()).await;
    let url = format!("{}/voices", sim.base_url());
    let c = client();
    assert_eq!(c.get(&url).send().await.unwrap().status(), 200);
    sim.shutdown().await;
    let fresh = client();
    assert!(fresh.get(&url).send().await.is_err());
}

#[tokio::test]
async fn failed_jobs_retries_and_clip_callbacks() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Sim>();

    // A port with nothing listening: connection errors are retried 3 times, then recorded.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_url = format!("http://{}/hook", dead.local_addr().unwrap());
    drop(dead);
    let sim = start(SimConfig {
        job_duration: Duration::from_secs(30),
        webhook_url: Some(dead_url),
        ..Default::default()
    })
    .await;
    let c = client();
    let b = sim.base_url();
    let (_, v) = post(
        &c,
        format!("{b}/watermark/detect"),
        json!({"url": "https://x.test/a.wav"}),
    )
    .await;
    let id = v["item"]["uuid"].as_str().unwrap().to_owned();
    let (s, v) = post(&c, format!("{}/__sim/jobs/{id}/fail", sim.url()), json!({})).await;
    assert_eq!(s, 200);
    assert_eq!(v["items"][0]["status"], "failed");
    let (_, v) = get(&c, format!("{b}/watermark/detect/{id}/result")).await;
    assert_eq!(v["item"]["status"], "failed");
    let deadline = Instant::now() + Duration::from_secs(3);
    let hook = loop {
        if let Some(h) = sim.webhooks().pop() {
            break h;
        }
        assert!(Instant::now() < deadline, "no delivery recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(hook["attempts"], 4);
    assert!(hook["error"].is_string());
    assert_eq!(hook["event"], "job.failed");
    assert_eq!(hook["kind"], "watermark_detect");

    // Clip creation with callback_uri POSTs {id, project_id, url, ...} after the job duration.
    let (hook_url, mut rx) = receiver().await;
    post(
        &c,
        format!("{}/__sim/config", sim.url()),
        json!({"job_duration_ms": 30, "webhook_url": null}),
    )
    .await;
    let (_, v) = post(&c, format!("{b}/projects"), json!({"name": "P"})).await;
    let p = v["item"]["uuid"].as_str().unwrap().to_owned();
    let (_, v) = post(
        &c,
        format!("{b}/projects/{p}/clips"),
        json!({"body": "hello", "callback_uri": hook_url}),
    )
    .await;
    let clip = v["item"]["uuid"].as_str().unwrap().to_owned();
    let (sig, body) = tokio::time::timeout(Duration::from_secs(3), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(sig.is_none(), "unsigned without a secret");
    let payload: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (payload["id"].as_str(), payload["project_id"].as_str()),
        (Some(clip.as_str()), Some(p.as_str()))
    );
    let wav = c
        .get(payload["url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(sim::audio::wav_duration(&wav), Some(0.5));

    // Reset forgets everything but the stock voices.
    assert_eq!(
        c.post(format!("{}/__sim/reset", sim.url()))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let (s, _) = get(&c, format!("{b}/projects/{p}")).await;
    assert_eq!(s, 404);
    let (_, v) = get(&c, format!("{b}/voices")).await;
    assert_eq!(v["items"].as_array().unwrap().len(), 3);
}
