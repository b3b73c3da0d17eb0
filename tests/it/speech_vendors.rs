//! Speech across voice vendors (issue #41): ElevenLabs, Deepgram and
//! Cartesia behind `/audio/tts/generations` and
//! `/audio/stt/transcriptions`, each called on its own path with its own
//! key header and body; speech billed by the character, transcription by
//! the seconds the gateway measured; a `[[voice]]` alias that survives a
//! fallback from one vendor to another; the vendors' errors mapped.

use runtime::store::Assets;
use serde_json::{json, Value};

use crate::harness::*;
use crate::speech_transcription::stt;

/// The providers file: one provider of each kind on the simulator, each
/// under its own prefix (`/p/{id}`), with the `narrator` alias and a
/// route from ElevenLabs to Cartesia.
fn vendors_toml(llm_url: &str) -> String {
    let root = llm_url.trim_end_matches("/v1");
    format!(
        r#"{}
[[provider]]
id = "eleven"
kind = "elevenlabs"
base_url = "{root}/p/eleven"
api_key_env = "{LLM_KEY_VAR}"
[[provider.model]]
id = "eleven_flash_v2_5"
type = "tts"
per_1k_chars = "0.30"
[[provider.model]]
id = "scribe_v1"
type = "stt"
per_minute = "0.0067"

[[provider]]
id = "dg"
kind = "deepgram"
base_url = "{root}/p/dg"
api_key_env = "{LLM_KEY_VAR}"
[[provider.model]]
id = "aura-2-thalia-en"
type = "tts"
per_1k_chars = "0.030"
[[provider.model]]
id = "nova-3"
type = "stt"
per_minute = "0.0043"

[[provider]]
id = "cart"
kind = "cartesia"
base_url = "{root}/p/cart"
api_key_env = "{LLM_KEY_VAR}"
[[provider.model]]
id = "sonic-2"
type = "tts"
per_1k_chars = "0.05"

[[voice]]
name = "narrator"
eleven = "21m00Tcm4TlvDq8ikWAM"
cart = "694f9389-aac1-45b6-b726-9d9369183238"
dg = "aura-2-thalia-en"
sim = "alloy"

[[route]]
model = "speaker"
strategy = "priority"
targets = [{{ model = "eleven/eleven_flash_v2_5" }}, {{ model = "cart/sonic-2" }}]
"#,
        media_toml(llm_url)
    )
}

async fn vendors_env() -> Env {
    let env = env_with_providers(vendors_toml, |_| {}).await;
    env.grant("1");
    env
}

/// The simulator's requests to `prefix` (a provider's `/p/{id}`).
async fn calls_to(env: &Env, prefix: &str) -> Vec<Value> {
    env.sim_requests()
        .await
        .into_iter()
        .filter(|r| r["path"].as_str().unwrap_or("").starts_with(prefix))
        .collect()
}

/// 13 Unicode characters (16 bytes): billed as 13.
const TEXT: &str = "héllo wörld ✓";

#[tokio::test]
async fn each_vendor_speaks_on_its_own_path_stored_and_billed_by_the_character() {
    let env = vendors_env().await;
    // ElevenLabs: the alias mapped, WAV asked as wav_24000, key in xi-api-key.
    let a = env
        .api(
            "/audio/tts/generations",
            json!({"model": "eleven/eleven_flash_v2_5", "input": TEXT, "voice": "narrator",
                   "response_format": "wav"}),
        )
        .await;
    a.expect(200);
    assert_eq!(a.json["model"], "eleven/eleven_flash_v2_5");
    assert_eq!(a.json["billing"]["unit"], "characters");
    assert_eq!(a.json["billing"]["quantity"], "13");
    // 13 × 0.30 / 1000 = 0.0039, +20 %.
    assert_eq!(a.json["billing"]["charged"], "0.00468");
    let call = &calls_to(&env, "/p/eleven").await[0];
    assert_eq!(
        call["path"],
        "/p/eleven/v1/text-to-speech/21m00Tcm4TlvDq8ikWAM"
    );
    assert_eq!(call["query"], "output_format=wav_24000");
    assert_eq!(call["headers"]["xi-api-key"], PROVIDER_KEY);
    assert!(call["headers"].get("authorization").is_none());
    assert_eq!(
        call["json"],
        json!({"text": TEXT, "model_id": "eleven_flash_v2_5"})
    );
    let r = env
        .client
        .get(a.json["audio_url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(&r.bytes().await.unwrap()[..4], b"RIFF");
    // Deepgram: the model is the voice; the key as `Token`.
    let a = env
        .api(
            "/audio/tts/generations",
            json!({"model": "dg/aura-2-thalia-en", "input": TEXT, "response_format": "mp3"}),
        )
        .await;
    a.expect(200);
    assert_eq!(a.json["billing"]["charged"], "0.000468");
    let call = &calls_to(&env, "/p/dg").await[0];
    assert_eq!(call["path"], "/p/dg/v1/speak");
    assert_eq!(call["query"], "model=aura-2-thalia-en");
    assert_eq!(
        call["headers"]["authorization"],
        format!("Token {PROVIDER_KEY}")
    );
    // Cartesia: the voice by id, its version header.
    let a = env
        .api(
            "/audio/tts/generations",
            json!({"model": "cart/sonic-2", "input": TEXT, "voice": "narrator",
                   "response_format": "pcm"}),
        )
        .await;
    a.expect(200);
    assert_eq!(a.json["billing"]["charged"], "0.00078");
    let call = &calls_to(&env, "/p/cart").await[0];
    assert_eq!(call["path"], "/p/cart/tts/bytes");
    assert_eq!(call["headers"]["x-api-key"], PROVIDER_KEY);
    assert!(call["headers"]["cartesia-version"].is_string());
    assert_eq!(
        call["json"]["voice"],
        json!({"mode": "id", "id": "694f9389-aac1-45b6-b726-9d9369183238"})
    );
    // Three usage rows, three stored objects; the balance to the 8th decimal.
    let u = env.usage();
    assert_eq!(u.len(), 3);
    assert!(u
        .iter()
        .all(|u| u.unit == "characters" && u.quantity == d("13")));
    assert_eq!(env.store().assets().unwrap().len(), 3);
    assert_eq!(
        env.balance(),
        d("1") - d("0.00468") - d("0.000468") - d("0.00078")
    );
}

#[tokio::test]
async fn a_route_fails_over_with_the_voice_mapped_for_the_deployment_that_serves() {
    let env = vendors_env().await;
    env.fault(json!({"path": "/p/eleven/*", "fault": {"status": 500}, "count": 0}))
        .await;
    let a = env
        .api(
            "/audio/tts/generations",
            json!({"model": "speaker", "input": TEXT, "voice": "narrator", "response_format": "wav"}),
        )
        .await;
    a.expect(200);
    assert_eq!(a.json["model"], "cart/sonic-2");
    assert_eq!(a.json["billing"]["charged"], "0.00078");
    let call = &calls_to(&env, "/p/cart").await[0];
    assert_eq!(
        call["json"]["voice"]["id"],
        "694f9389-aac1-45b6-b726-9d9369183238"
    );
    assert!(
        !calls_to(&env, "/p/eleven").await.is_empty(),
        "ElevenLabs tried first"
    );
    let u = env.usage();
    assert_eq!(u.len(), 1, "billed once");
    assert_eq!(env.balance(), d("0.99922"));
    env.wait_no_holds().await;
    // A speed ElevenLabs has not (0.7 to 1.2) skips it: Cartesia serves,
    // ElevenLabs is never called.
    env.clear_sim_log().await;
    let a = env
        .api(
            "/audio/tts/generations",
            json!({"model": "speaker", "input": TEXT, "voice": "narrator", "speed": 1.4}),
        )
        .await;
    a.expect(200);
    assert_eq!(a.json["model"], "cart/sonic-2");
    assert!(calls_to(&env, "/p/eleven").await.is_empty());
    assert_eq!(
        calls_to(&env, "/p/cart").await[0]["json"]["generation_config"]["speed"],
        json!(1.4)
    );
}

#[tokio::test]
async fn a_voice_no_deployment_has_is_a_400_and_nothing_is_called_or_charged() {
    let env = vendors_env().await;
    env.clear_sim_log().await;
    for (body, says) in [
        (
            json!({"model": "dg/aura-2-thalia-en", "input": "hi", "voice": "narrator2"}),
            "voice:",
        ),
        (
            json!({"model": "eleven/eleven_flash_v2_5", "input": "hi"}),
            "voice:",
        ),
        (
            json!({"model": "cart/sonic-2", "input": "hi", "voice": "narrator", "speed": 3.0}),
            "speed:",
        ),
    ] {
        let a = env.api("/audio/tts/generations", body).await;
        envelope(&a, 400);
        assert!(
            a.json["message"].as_str().unwrap().starts_with(says),
            "{}",
            a.json
        );
    }
    env.assert_no_upstream_call().await;
    nothing_charged(&env, d("1")).await;
    assert!(env.store().assets().unwrap().is_empty());
}

#[tokio::test]
async fn vendor_errors_are_mapped_and_charge_nothing() {
    let env = vendors_env().await;
    let speak = json!({"model": "eleven/eleven_flash_v2_5", "input": "hi", "voice": "narrator"});
    env.fault(json!({"path": "/p/eleven/*", "fault": {"status": 401}}))
        .await;
    // The provider refusing the gateway's key: a provider failure (format
    // 2's 500), naming no key.
    let a = env.api("/audio/tts/generations", speak.clone()).await;
    envelope(&a, 500);
    assert!(
        a.json["message"].as_str().unwrap().contains("credentials"),
        "{}",
        a.json
    );
    env.fault(
        json!({"path": "/p/eleven/*", "fault": {"status": 429, "headers": {"Retry-After": "7"}}}),
    )
    .await;
    let a = env.api("/audio/tts/generations", speak.clone()).await;
    envelope(&a, 429);
    assert_eq!(a.headers["retry-after"].to_str().unwrap(), "7");
    // ElevenLabs' own validation error names the field, as the caller
    // named it (its `text` is the caller's `input`).
    let detail =
        json!({"detail": [{"loc": ["body", "text"], "msg": "Field required", "type": "missing"}]});
    env.fault(json!({"path": "/p/eleven/*", "fault": {"status": 422, "body": detail}}))
        .await;
    let a = env.api("/audio/tts/generations", speak.clone()).await;
    envelope(&a, 400);
    assert!(
        a.json["message"]
            .as_str()
            .unwrap()
            .contains("input: Field required"),
        "{}",
        a.json
    );
    // Deepgram's and Cartesia's refusals, in their own shapes, map alike.
    for (prefix, model) in [
        ("/p/dg/*", "dg/aura-2-thalia-en"),
        ("/p/cart/*", "cart/sonic-2"),
    ] {
        let body = json!({"model": model, "input": "hi", "voice": "narrator"});
        env.fault(
            json!({"path": prefix, "fault": {"status": 429, "headers": {"Retry-After": "3"}}}),
        )
        .await;
        let a = env.api("/audio/tts/generations", body.clone()).await;
        envelope(&a, 429);
        assert_eq!(a.headers["retry-after"].to_str().unwrap(), "3", "{model}");
        env.fault(json!({"path": prefix, "fault": {"status": 403}}))
            .await;
        envelope(&env.api("/audio/tts/generations", body).await, 500);
    }
    // The caller's own vendor key for one call.
    env.clear_sim_log().await;
    let mut byok = speak.clone();
    byok["byok_api_key"] = json!("callers-own-key");
    let a = env.api("/audio/tts/generations", byok).await;
    // The simulator's key is not the caller's: its 401 is the caller's to fix.
    envelope(&a, 400);
    let call = &calls_to(&env, "/p/eleven").await[0];
    assert_eq!(call["headers"]["xi-api-key"], "callers-own-key");
    nothing_charged(&env, d("1")).await;
}

#[tokio::test]
async fn transcription_bills_the_measured_seconds_whatever_the_provider_claims() {
    let env = vendors_env().await;
    env.sim_config(json!({"stt_duration_factor": 2.0})).await;
    // Both kinds, both containers: billed on the measured seconds.
    let (mp3_2s, mp3_secs, _) = sim::audio::mp3_silence(2000, 24000);
    for model in ["dg/nova-3", "eleven/scribe_v1"] {
        for (name, file, secs) in [
            ("b.wav", wav(2.0), 2.0),
            ("b.mp3", mp3_2s.clone(), mp3_secs),
        ] {
            let a = stt(
                &env,
                "transcriptions",
                (name, file),
                &[("model", model), ("response_format", "verbose_json")],
            )
            .await;
            a.expect(200);
            let billed: f64 = a.json["billing"]["quantity"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                (billed - secs).abs() < 0.05,
                "{model} {name}: {billed} vs {secs}"
            );
            let claimed = a.json["duration"].as_f64().unwrap_or(0.0);
            assert!(
                claimed > billed * 1.5,
                "{model} {name}: the provider claimed {claimed}"
            );
        }
    }
    env.clear_sim_log().await;
    let before = env.usage().len();
    // 3 s of WAV on Deepgram: the audio is the body, the model in the query.
    let a = stt(
        &env,
        "transcriptions",
        ("a.wav", wav(3.0)),
        &[("model", "dg/nova-3")],
    )
    .await;
    a.expect(200);
    assert!(a.json["text"].is_string(), "{}", a.json);
    assert_eq!(a.json["billing"]["quantity"], "3");
    // 3 s at 0.0043 / min = 0.000215, +20 %.
    assert_eq!(a.json["billing"]["charged"], "0.000258");
    let call = &calls_to(&env, "/p/dg").await[0];
    assert_eq!(call["path"], "/p/dg/v1/listen");
    assert!(call["query"].as_str().unwrap().starts_with("model=nova-3"));
    assert_eq!(call["content_type"], "audio/wav");
    // An MP3 on ElevenLabs, multipart with `model_id`, verbose.
    let (mp3, secs, _) = sim::audio::mp3_silence(2000, 24000);
    let a = stt(
        &env,
        "transcriptions",
        ("a.mp3", mp3),
        &[
            ("model", "eleven/scribe_v1"),
            ("response_format", "verbose_json"),
        ],
    )
    .await;
    a.expect(200);
    let billed: f64 = a.json["billing"]["quantity"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((billed - secs).abs() < 0.05, "{billed} vs {secs}");
    let claimed = a.json["duration"].as_f64().unwrap_or(0.0);
    assert!(claimed > billed * 1.5, "the provider claimed {claimed}");
    let call = &calls_to(&env, "/p/eleven").await[0];
    assert_eq!(call["path"], "/p/eleven/v1/speech-to-text");
    assert_eq!(call["headers"]["xi-api-key"], PROVIDER_KEY);
    let u = env.usage();
    assert_eq!(u.len(), before + 2);
    assert!(u.iter().all(|u| u.unit == "audio_seconds"));
    // What a vendor does not take is a 400 before any call.
    env.clear_sim_log().await;
    let a = stt(
        &env,
        "transcriptions",
        ("a.wav", wav(1.0)),
        &[("model", "dg/nova-3"), ("prompt", "x")],
    )
    .await;
    envelope(&a, 400);
    let a = stt(
        &env,
        "translations",
        ("a.wav", wav(1.0)),
        &[("model", "eleven/scribe_v1")],
    )
    .await;
    envelope(&a, 400);
    env.assert_no_upstream_call().await;
}

#[tokio::test]
async fn streamed_speech_arrives_in_pieces_is_stored_from_the_same_bytes_and_billed_before_its_end()
{
    let env = vendors_env().await;
    env.sim_config(json!({"tts_chunk_ms": 40})).await;
    for model in [
        "eleven/eleven_flash_v2_5",
        "dg/aura-2-thalia-en",
        "cart/sonic-2",
    ] {
        let mut r = env
            .client
            .post(env.url("/api/v1/audio/tts/generations"))
            .bearer_auth(&env.key)
            .json(&json!({"model": model, "input": TEXT, "voice": "narrator",
                          "response_format": "wav", "stream": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        assert_eq!(r.headers()["content-type"], "audio/wav");
        let url = r.headers()["x-audio-url"].to_str().unwrap().to_owned();
        let request_id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
        let billed = env.usage().len();
        let (mut audio, mut pieces) = (Vec::new(), 0);
        while let Some(chunk) = r.chunk().await.unwrap() {
            if pieces == 0 {
                // The bill is committed once the provider has finished:
                // the first piece came before that.
                assert_eq!(env.usage().len(), billed, "{model}: relayed as it came");
            }
            pieces += 1;
            audio.extend_from_slice(&chunk);
        }
        assert!(pieces > 1, "{model}: the audio came in {pieces} piece(s)");
        assert_eq!(
            env.usage().len(),
            billed + 1,
            "{model}: billed before the last byte"
        );
        assert_eq!(&audio[..4], b"RIFF");
        // Billed and stored before the last byte left.
        let stored = env.client.get(&url).send().await.unwrap();
        assert_eq!(stored.status().as_u16(), 200, "{model}");
        assert_eq!(stored.bytes().await.unwrap().to_vec(), audio, "{model}");
        // The generation names it too.
        let g = env
            .call_as(
                &env.key,
                "GET",
                &env.url(&format!("/api/v1/generations/{request_id}")),
                None,
            )
            .await;
        g.expect(200);
        assert_eq!(g.json["unit"], "characters");
        let again = env
            .client
            .get(g.json["audio_url"].as_str().unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(again.bytes().await.unwrap().to_vec(), audio, "{model}");
    }
    let calls = calls_to(&env, "/p/eleven").await;
    assert!(calls[0]["path"].as_str().unwrap().ends_with("/stream"));
    // Three speeches billed (beside the free generation reads).
    let u = env.usage();
    assert_eq!(u.iter().filter(|u| u.unit == "characters").count(), 3);
    assert!(u
        .iter()
        .all(|u| u.unit == "characters" || u.charged == d("0")));
    assert_eq!(env.store().assets().unwrap().len(), 3);
    assert_eq!(
        env.balance(),
        d("1") - d("0.00468") - d("0.000468") - d("0.00078")
    );
    env.wait_no_holds().await;
}

#[tokio::test]
async fn voices_lists_the_aliases_and_each_providers_own_read_once_and_free() {
    let env = vendors_env().await;
    env.clear_sim_log().await;
    let voices = env.url("/api/v1/audio/voices");
    let a = env.call_as(&env.key, "GET", &voices, None).await;
    a.expect(200);
    let narrator = &a.json["aliases"][0];
    assert_eq!(narrator["name"], "narrator");
    assert_eq!(
        narrator["voices"]["cart"],
        "694f9389-aac1-45b6-b726-9d9369183238"
    );
    let of = |id: &str| -> Value {
        a.json["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["provider"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no {id}: {}", a.json))
    };
    let ids = |p: &Value| -> Vec<String> {
        p["voices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(
        ids(&of("eleven")).contains(&"21m00Tcm4TlvDq8ikWAM".to_owned()),
        "{}",
        a.json
    );
    assert!(ids(&of("cart")).contains(&"694f9389-aac1-45b6-b726-9d9369183238".to_owned()));
    assert_eq!(ids(&of("dg")), ["aura-2-thalia-en"]);
    assert!(ids(&of("sim")).contains(&"alloy".to_owned()));
    assert_eq!(of("eleven")["kind"], "elevenlabs");
    // Read from the two providers that list theirs, with their own keys.
    let calls = env.sim_requests().await;
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert!(calls
        .iter()
        .any(|c| c["path"] == "/p/eleven/v1/voices" && c["headers"]["xi-api-key"] == PROVIDER_KEY));
    assert!(calls.iter().any(|c| c["path"] == "/p/cart/voices"));
    // Kept: the second listing calls nobody; nothing is charged.
    env.clear_sim_log().await;
    env.call_as(&env.key, "GET", &voices, None)
        .await
        .expect(200);
    env.assert_no_upstream_call().await;
    nothing_charged(&env, d("1")).await;
    let r = env.client.get(&voices).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
}

#[tokio::test]
async fn a_streamed_speech_cut_short_is_billed_for_what_was_made_and_stores_nothing() {
    let env = vendors_env().await;
    // Paced slowly: the caller hangs up after the first piece.
    env.sim_config(json!({"tts_chunk_ms": 300})).await;
    let mut r = env
        .client
        .post(env.url("/api/v1/audio/tts/generations"))
        .bearer_auth(&env.key)
        .json(
            &json!({"model": "eleven/eleven_flash_v2_5", "input": TEXT, "voice": "narrator",
                      "response_format": "wav", "stream": true}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.chunk().await.unwrap().is_some());
    drop(r);
    // By the character: the whole input, which the provider charges.
    let start = std::time::Instant::now();
    while env.usage().is_empty() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "never billed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let u = env.usage();
    assert_eq!(
        (u[0].unit.as_str(), u[0].charged),
        ("characters", d("0.00468"))
    );
    env.wait_no_holds().await;
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert!(
        env.store().assets().unwrap().is_empty(),
        "a cut stream is not stored"
    );
    assert_eq!(env.usage().len(), 1, "billed once");
}

#[tokio::test]
async fn a_streamed_speech_priced_by_the_second_is_billed_on_the_seconds_it_measured() {
    let env = vendors_env().await;
    let mut r = env
        .client
        .post(env.url("/api/v1/audio/tts/generations"))
        .bearer_auth(&env.key)
        .json(
            &json!({"model": "sim/sim-tts", "input": "hello world", "voice": "narrator",
                      "response_format": "wav", "stream": true}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let mut audio = Vec::new();
    while let Some(chunk) = r.chunk().await.unwrap() {
        audio.extend_from_slice(&chunk);
    }
    assert_eq!(&audio[..4], b"RIFF");
    // 11 characters at the simulator's 0.06 s each: 0.66 s, at 0.01 USD, +20 %.
    let u = env.usage();
    assert_eq!(u.len(), 1);
    assert_eq!(
        (u[0].unit.as_str(), u[0].quantity, u[0].charged),
        ("audio_seconds", d("0.66"), d("0.00792"))
    );
    let call = &env.sim_requests().await[0];
    assert_eq!(
        call["json"]["voice"], "alloy",
        "the alias mapped for OpenAI's kind"
    );
    assert!(
        call["json"].get("stream").is_none(),
        "stream is the gateway's"
    );
    assert_eq!(env.store().assets().unwrap().len(), 1);
}
