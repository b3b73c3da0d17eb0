//! Billing (spec §1, §2, §8): charges to the 8th decimal, usage records for
//! every success and none for failures, the credit ledger, exactly-once
//! charges for jobs and voice builds.

use runtime::store::{Accounts, Assets, Jobs, Ledger};
use rust_decimal::Decimal;
use serde_json::json;

use crate::harness::*;

#[tokio::test]
async fn synthesis_is_charged_to_8_places_and_debited() {
    let env = Env::start().await;
    env.grant("10.00");
    let a = env.post("/tts/synthesize", json!({"voice_uuid": "stock-voice-1", "text": "Hello, billing world!", "output_format": "wav"})).await;
    a.expect(200);
    let billing = &a.json["billing"];
    assert_eq!(billing["unit"], json!("audio_seconds"));
    let seconds = d(&billing["quantity"].to_string());
    assert_eq!(billing["quantity"], a.json["audio_duration"]);
    assert_eq!(
        seconds,
        d(&a.json["raw_response"]["duration"].to_string()),
        "billed seconds are the upstream's duration"
    );
    // quantity × 0.0005 × 1.20, half away from zero, 8 places
    let expected = (seconds * d("0.0005") * d("1.2"))
        .round_dp_with_strategy(8, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
    let charged = billing["charged"].as_str().unwrap();
    assert_eq!(charged, format!("{:.8}", expected));
    assert_eq!(charged.split('.').nth(1).unwrap().len(), 8);

    let usage = env.usage();
    assert_eq!(usage.len(), 1);
    let u = &usage[0];
    assert_eq!(
        (u.product.as_str(), u.unit.as_str()),
        ("tts", "audio_seconds")
    );
    assert_eq!(
        (u.quantity, u.charged, u.unit_price),
        (seconds, expected, Some(d("0.0005")))
    );
    assert_eq!(u.request_id, a.json["request_id"].as_str().unwrap());
    assert_eq!(
        env.balance(),
        d("10") - expected,
        "the charge is debited from the credit balance"
    );
    let ledger = env.store().ledger(env.user_id).unwrap();
    assert_eq!(ledger.len(), 2);
    assert_eq!(
        (
            ledger[1].kind.as_str(),
            ledger[1].amount,
            ledger[1].usage_id
        ),
        ("charge", -expected, Some(u.id))
    );
}

#[tokio::test]
async fn markup_is_configurable() {
    let env = Env::with(|c| c.prices = runtime::billing::Prices::parse(None, "50").unwrap()).await;
    let a = env.post("/tts/synthesize", synth_body("Hello")).await;
    a.expect(200);
    let seconds = d(&a.json["billing"]["quantity"].to_string());
    assert_eq!(
        a.json["billing"]["charged"].as_str().unwrap(),
        format!("{:.8}", (seconds * d("0.0005") * d("1.5")).round_dp(8))
    );
}

#[tokio::test]
async fn failures_write_no_records_and_charge_nothing() {
    let env = Env::start().await;
    env.grant("1.00");
    env.fault(json!({"path": "/synthesize", "fault": {"status": 500}}))
        .await;
    env.post("/tts/synthesize", synth_body("Hello"))
        .await
        .expect(502);
    env.post("/tts/synthesize", json!({"voice_uuid": "stock-voice-1"}))
        .await
        .expect(400);
    env.post(
        "/tts/synthesize",
        json!({"voice_uuid": "nope", "text": "hi"}),
    )
    .await
    .expect(404);
    assert!(env.usage().is_empty());
    assert!(env.audit().is_empty());
    assert!(env.store().assets().unwrap().is_empty());
    assert!(
        env.object_keys().is_empty(),
        "no audio stored for a failed synthesis"
    );
    assert_eq!(env.balance(), d("1"));
}

#[tokio::test]
async fn free_routes_write_zero_usage_and_the_voice_api_never_answers_402() {
    let env = Env::start().await;
    // No credit at all: metered, not refused.
    env.get("/tts/voices").await.expect(200);
    env.post("/tts/synthesize", synth_body("Hello"))
        .await
        .expect(200);
    let usage = env.usage();
    assert_eq!(usage.len(), 2);
    assert_eq!(
        (usage[0].quantity, usage[0].charged),
        (Decimal::ZERO, Decimal::ZERO)
    );
    assert!(
        env.balance() < Decimal::ZERO,
        "the balance goes negative: the voice API meters"
    );
}

#[tokio::test]
async fn per_request_units_and_unpriced_capabilities() {
    let env = Env::with(|c| {
        c.prices = runtime::billing::Prices::parse(Some("identity.searches=0.01"), "20").unwrap()
    })
    .await;
    let up = env.upload("s.wav", wav(0.5), None).await;
    up.expect(200);
    let url = up.json["url"].as_str().unwrap().to_owned();
    env.post("/identity/search", json!({"audio_url": url}))
        .await
        .expect(200);
    env.post("/identity/enroll", json!({"name": "Ann", "audio_url": url}))
        .await
        .expect(200);
    let usage = env.usage();
    let search = usage
        .iter()
        .find(|u| u.route_id == "identity.search")
        .unwrap();
    assert_eq!(
        (search.quantity, search.charged, search.unpriced),
        (d("1"), d("0.012"), false)
    );
    let enroll = usage
        .iter()
        .find(|u| u.route_id == "identity.enroll")
        .unwrap();
    assert_eq!(
        (enroll.quantity, enroll.charged, enroll.unpriced),
        (d("1"), Decimal::ZERO, true),
        "no price configured: quantity kept, charged 0, flagged"
    );
}

#[tokio::test]
async fn voice_subscription_is_billed_on_the_first_build_only() {
    let env = Env::with(|c| {
        c.business_plan_active = true;
        c.prices =
            runtime::billing::Prices::parse(Some("voices.voice_subscription=1.00"), "20").unwrap();
    })
    .await;
    let voice = env.post("/voices", json!({"name": "Mine"})).await;
    voice.expect(200);
    let uuid = voice.json["item"]["uuid"].as_str().unwrap().to_owned();
    env.post(&format!("/voices/{uuid}/build"), json!({}))
        .await
        .expect(200);
    env.post(&format!("/voices/{uuid}/build"), json!({}))
        .await
        .expect(200);
    let charged: Vec<Decimal> = env
        .usage()
        .iter()
        .filter(|u| u.route_id == "voices.build")
        .map(|u| u.charged)
        .collect();
    assert_eq!(
        charged,
        vec![d("1.2"), Decimal::ZERO],
        "second build: a usage record, no charge"
    );
    assert_eq!(
        env.usage()
            .iter()
            .filter(|u| u.route_id == "voices.create")
            .map(|u| u.charged)
            .sum::<Decimal>(),
        Decimal::ZERO
    );
    assert_eq!(env.balance(), d("-1.2"));
}

/// Spec A2: a promoted design is billed under the same price key as a build
/// (`voices.voice_subscription`); DELETE /voices is free (and still gated).
#[tokio::test]
async fn promotion_shares_the_build_price_key_and_delete_is_free() {
    let env = Env::with(|c| {
        c.business_plan_active = true;
        c.prices =
            runtime::billing::Prices::parse(Some("voices.voice_subscription=1.00"), "20").unwrap();
    })
    .await;
    let design = env
        .post(
            "/voice-design/candidates",
            json!({"description": "a calm narrator"}),
        )
        .await;
    design.expect(200);
    let design_uuid = design.json["item"]["uuid"].as_str().unwrap().to_owned();
    let promoted = env
        .post(
            &format!("/voice-design/{design_uuid}/promote"),
            json!({"candidate_index": 1, "name": "Calm"}),
        )
        .await;
    promoted.expect(200);
    let voice = promoted.json["voice_uuid"].as_str().unwrap().to_owned();
    env.call("DELETE", &format!("/voices/{voice}"), None)
        .await
        .expect(200);
    let usage = env.usage();
    let promote = usage
        .iter()
        .find(|u| u.route_id == "voice_design.promote")
        .unwrap();
    assert_eq!(
        (
            promote.product.as_str(),
            promote.unit.as_str(),
            promote.charged
        ),
        ("voices", "voice_subscription", d("1.2"))
    );
    let delete = usage
        .iter()
        .find(|u| u.route_id == "voices.delete")
        .unwrap();
    assert_eq!(
        (delete.unit.as_str(), delete.quantity, delete.charged),
        ("free", Decimal::ZERO, Decimal::ZERO)
    );
    let designs: Decimal = usage
        .iter()
        .filter(|u| u.route_id == "voice_design.candidates")
        .map(|u| u.charged)
        .sum();
    assert_eq!(env.balance(), -(d("1.2") + designs));

    // Still gated: without the business plan DELETE answers the gate's refusal.
    let env = Env::start().await;
    let a = env.call("DELETE", "/voices/v1", None).await;
    assert_ne!(a.status, 200, "{}", a.text);
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn a_job_is_charged_exactly_once_however_often_it_is_read() {
    let env = Env::with(|c| {
        c.prices =
            runtime::billing::Prices::parse(Some("enhance.audio_seconds=0.001"), "20").unwrap()
    })
    .await;
    let up = env
        .upload("in.wav", wav(2.0), Some("audio_job_input"))
        .await;
    up.expect(200);
    let job = env
        .post("/enhance", json!({"audio_url": up.json["url"]}))
        .await;
    assert!(job.status == 200 || job.status == 202, "{}", job.text);
    let job_id = job.json["job_id"].as_str().unwrap().to_owned();
    let pending = env.get(&format!("/enhance/{job_id}")).await;
    pending.expect(200);
    env.complete_job(&job_id).await;
    // Concurrent reads of the completed job.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (client, url, key) = (
            env.client.clone(),
            env.voice(&format!("/enhance/{job_id}")),
            env.key.clone(),
        );
        tasks.push(tokio::spawn(async move {
            client
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 200);
    }
    env.get(&format!("/enhance/{job_id}")).await.expect(200);
    let charges: Vec<_> = env
        .usage()
        .into_iter()
        .filter(|u| !u.charged.is_zero())
        .collect();
    assert_eq!(charges.len(), 1, "{charges:#?}");
    let c = &charges[0];
    assert_eq!(
        c.once_key.as_deref(),
        Some(format!("job:enhance:{job_id}").as_str())
    );
    assert_eq!(
        (c.product.as_str(), c.unit.as_str(), c.route_id.as_str()),
        ("enhance", "audio_seconds", "enhance.submit")
    );
    assert_eq!(
        c.quantity,
        d("2"),
        "the upstream's reported seconds of the 2 s input"
    );
    assert_eq!(c.charged, d("0.0024"));
    let job_row = env.store().job("enhance", &job_id).unwrap().unwrap();
    assert!(job_row.billed);
    assert_eq!(job_row.status, "completed");
}

#[tokio::test]
async fn detect_bills_by_media_type() {
    let env = Env::with(|c| {
        c.prices = runtime::billing::Prices::parse(Some("detect.images=0.05"), "0").unwrap()
    })
    .await;
    let up = env
        .upload("face.png", b"\x89PNG\r\n\x1a\nnot really".to_vec(), None)
        .await;
    up.expect(200);
    let job = env
        .post(
            "/detect",
            json!({"audio_url": up.json["url"], "media_type": "image"}),
        )
        .await;
    let job_id = job.json["job_id"].as_str().unwrap().to_owned();
    env.complete_job(&job_id).await;
    env.get(&format!("/detect/{job_id}")).await.expect(200);
    let charge = env
        .usage()
        .into_iter()
        .find(|u| u.once_key.is_some())
        .expect("job charge");
    assert_eq!(
        (charge.unit.as_str(), charge.quantity, charge.charged),
        ("images", d("1"), d("0.05"))
    );
}

#[test]
fn credits_grant_cli_prints_the_balance() {
    let dir = TempDir::new("credits");
    let store = runtime::store::Store::open_at(&dir.database()).unwrap();
    let id = store.create_user("c@example.com", false).unwrap();
    drop(store);
    let grant = |amount: &str| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_gateway"));
        c.args([
            "credits",
            "grant",
            "--user",
            &id.to_string(),
            "--amount",
            amount,
        ]);
        c.envs(dir.gateway_env());
        c.output().unwrap()
    };
    let out = grant("10.00");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "10.00000000\n");
    let out = grant("ten");
    assert!(!out.status.success());
    let store = runtime::store::Store::open_at(&dir.database()).unwrap();
    assert_eq!(store.balance(id).unwrap(), d("10"));
}

#[tokio::test]
async fn without_an_upstream_duration_the_audio_is_measured() {
    use base64::Engine;
    let env = Env::start().await;
    let audio = base64::engine::general_purpose::STANDARD.encode(wav(1.5));
    // An upstream answer with audio but no `duration`, and with its own URL.
    env.fault(json!({
        "path": "/synthesize",
        "fault": {"status": 200, "body": {"success": true, "audio_content": audio, "output_format": "wav", "url": "https://cdn.example.com/a.wav"}},
    }))
    .await;
    let a = env.post("/tts/synthesize", synth_body("Hello")).await;
    a.expect(200);
    assert_eq!(
        a.json["billing"]["quantity"],
        json!(1.5),
        "measured from the WAV itself"
    );
    assert_eq!(a.json["billing"]["charged"], json!("0.00090000"));
    assert_eq!(
        a.json["resemble_url"],
        json!("https://cdn.example.com/a.wav"),
        "present when the upstream gave a URL"
    );
    assert_eq!(env.usage()[0].quantity, d("1.5"));
}

/// F6: a negative `duration` from the synthesis upstream is never billed as a
/// credit; the gateway measures the returned audio instead.
#[tokio::test]
async fn a_negative_synthesis_duration_is_measured_instead_never_credited() {
    use base64::Engine;
    let env = Env::start().await;
    env.grant("10.00");
    let audio = base64::engine::general_purpose::STANDARD.encode(wav(2.0));
    for bad in [json!(-500), json!("NaN"), json!("-Infinity")] {
        env.fault(
            json!({"path": "/synthesize", "fault": {"status": 200, "body": {
            "success": true, "audio_content": audio, "duration": bad, "output_format": "wav"}}}),
        )
        .await;
        let a = env.post("/tts/synthesize", synth_body("Hello")).await;
        a.expect(200);
        let seconds = d(&a.json["billing"]["quantity"].to_string());
        assert_eq!(seconds, d("2"), "{bad}: the audio's measured seconds");
        assert_eq!(a.json["billing"]["charged"], json!("0.00120000"), "{bad}");
    }
    let usage = env.usage();
    assert_eq!(usage.len(), 3);
    assert!(usage
        .iter()
        .all(|u| u.quantity == d("2") && u.charged == d("0.0012")));
    assert_eq!(env.balance(), d("10") - d("0.0036"), "never credited");
}

/// F6: a negative `duration_seconds` on a job (GET or signed webhook) bills 0.
#[tokio::test]
async fn a_negative_job_duration_bills_nothing_by_get_or_webhook() {
    const SECRET: &str = "whsec-f6";
    let env = Env::with(|c| {
        c.webhook_secret = Some(SECRET.into());
        c.prices = runtime::billing::Prices::parse(Some("stt.audio_seconds=0.01"), "20").unwrap();
    })
    .await;
    env.grant("5.00");
    let up = env.upload("in.wav", wav(1.0), Some("stt_input")).await;
    let url = up.json["url"].clone();
    let submit = || async {
        let a = env.post("/stt", json!({"audio_url": url})).await;
        a.expect(200);
        a.json["job_id"].as_str().unwrap().to_owned()
    };

    // Through a GET: the upstream answers completed with -1000 seconds.
    let job = submit().await;
    env.fault(
        json!({"path": format!("/api/v2/speech-to-text/{job}"), "method": "GET",
        "fault": {"status": 200, "body": {"success": true, "item": {
            "uuid": job, "status": "completed", "text": "hi", "duration_seconds": -1000}}}}),
    )
    .await;
    let a = env.get(&format!("/stt/{job}")).await;
    a.expect(200);
    assert_eq!(a.json["status"], json!("completed"));
    let row = env.store().job("stt", &job).unwrap().unwrap();
    assert_eq!((row.status.as_str(), row.billed), ("completed", true));

    // Through a signed webhook.
    let job2 = submit().await;
    let body = json!({"event": "job.completed", "kind": "stt", "id": job2, "status": "completed",
        "item": {"uuid": job2, "status": "completed", "text": "hi", "duration_seconds": -1000}})
    .to_string()
    .into_bytes();
    let a = env
        .client
        .post(env.voice("/webhooks/provider"))
        .header("content-type", "application/json")
        .header(
            "x-provider-signature",
            runtime::signing::sign(SECRET.as_bytes(), &body),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(a.status().as_u16(), 200);
    let row = env.store().job("stt", &job2).unwrap().unwrap();
    assert_eq!((row.status.as_str(), row.billed), ("completed", true));

    // A later GET (the job really completes upstream) bills nothing more.
    env.complete_job(&job2).await;
    env.get(&format!("/stt/{job2}")).await.expect(200);

    let usage = env.usage();
    assert!(
        usage
            .iter()
            .all(|u| u.quantity >= Decimal::ZERO && u.charged >= Decimal::ZERO),
        "{usage:#?}"
    );
    let job_charges: Vec<_> = usage.iter().filter(|u| u.once_key.is_some()).collect();
    assert_eq!(job_charges.len(), 2, "{usage:#?}");
    assert!(job_charges
        .iter()
        .all(|u| u.quantity.is_zero() && u.charged.is_zero()));
    assert_eq!(env.balance(), d("5"), "nothing charged, nothing credited");
}
