//! The providers file's speech keys (voices, vendor kinds).
use super::super::adapter::{Adapter, Op};
use super::super::model::ModelType;
use super::super::provider::Provider;
use super::super::speech::{Speak, Upload};
use super::super::voices::voice_for;
use super::parse;
use rust_decimal::Decimal;
use serde_json::{json, Map, Value};

const FILE: &str = r#"
[[provider]]
id = "eleven"
kind = "elevenlabs"
base_url = "http://127.0.0.1:1"
api_key_env = "GW_TEST_UNSET_KEY_VAR"
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
base_url = "http://127.0.0.1:1"
api_key_env = "GW_TEST_UNSET_KEY_VAR"
[[provider.model]]
id = "aura-2-thalia-en"
type = "tts"
per_1k_chars = "0.030"

[[provider]]
id = "cart"
kind = "cartesia"
base_url = "http://127.0.0.1:1"
api_key_env = "GW_TEST_UNSET_KEY_VAR"
[[provider.model]]
id = "sonic-2"
type = "tts"
per_1k_chars = "0.05"

[[voice]]
name = "narrator"
eleven = "21m00Tcm4TlvDq8ikWAM"
cart = "694f9389-aac1-45b6-b726-9d9369183238"
dg = "aura-2-thalia-en"
"#;

fn speak(format: &'static str) -> Speak<'static> {
    Speak {
        text: "héllo",
        voice: Some("v1"),
        speed: None,
        format,
        stream: false,
        extra: Map::new(),
    }
}

#[test]
fn voices_map_per_provider_and_skip_what_cannot_speak() {
    let ps = parse(FILE, "p.toml", Decimal::ZERO).unwrap();
    let dep = |p: &str, m: &str| ps.get(p, m).unwrap();
    let (p, m) = dep("eleven", "eleven_flash_v2_5");
    let v = |asked, p: &Provider, m| voice_for(&ps.voices, asked, p, m, p.adapter.voice_use());
    assert_eq!(
        v(Some("narrator"), p, m),
        Some(Some("21m00Tcm4TlvDq8ikWAM"))
    );
    assert_eq!(v(Some("raw-id"), p, m), Some(Some("raw-id")));
    assert_eq!(v(None, p, m), None, "elevenlabs needs a voice");
    let (dp, dm) = dep("dg", "aura-2-thalia-en");
    assert_eq!(v(Some("narrator"), dp, dm), Some(None));
    assert_eq!(v(None, dp, dm), Some(None));
    assert_eq!(v(Some("other"), dp, dm), None);
    let no_cart = FILE.replace("cart = \"694f9389-aac1-45b6-b726-9d9369183238\"\n", "");
    let ps2 = parse(&no_cart, "p.toml", Decimal::ZERO).unwrap();
    let (cp, cm) = ps2.get("cart", "sonic-2").unwrap();
    assert_eq!(
        voice_for(
            &ps2.voices,
            Some("narrator"),
            cp,
            cm,
            cp.adapter.voice_use()
        ),
        None
    );
}

#[test]
fn each_kind_builds_its_own_call() {
    let ps = parse(FILE, "p.toml", Decimal::ZERO).unwrap();
    let (p, m) = ps.get("eleven", "eleven_flash_v2_5").unwrap();
    let n = p.adapter.speech(m, &speak("wav"), Map::new()).unwrap();
    assert_eq!(n.path, "/v1/text-to-speech/v1?output_format=wav_24000");
    assert_eq!(
        Value::Object(n.body),
        json!({"text": "héllo", "model_id": "eleven_flash_v2_5"})
    );
    let (p, m) = ps.get("dg", "aura-2-thalia-en").unwrap();
    let n = p.adapter.speech(m, &speak("pcm"), Map::new()).unwrap();
    assert_eq!(
        n.path,
        "/v1/speak?model=aura-2-thalia-en&encoding=linear16&container=none&sample_rate=24000"
    );
    assert_eq!(Value::Object(n.body), json!({"text": "héllo"}));
    let (p, m) = ps.get("cart", "sonic-2").unwrap();
    let mut s = speak("mp3");
    s.speed = Some(1.2);
    let n = p.adapter.speech(m, &s, Map::new()).unwrap();
    assert_eq!(n.path, "/tts/bytes");
    assert_eq!(n.body["voice"], json!({"mode": "id", "id": "v1"}));
    assert_eq!(n.body["output_format"]["container"], "mp3");
    assert_eq!(n.body["generation_config"]["speed"], json!(1.2));
    s.speed = Some(3.0);
    let e = p.adapter.speech(m, &s, Map::new()).unwrap_err();
    assert!(e.to_string().contains("speed: a cartesia"), "{e}");
}

#[test]
fn prices_and_kinds_are_checked() {
    let ps = parse(FILE, "p.toml", Decimal::ZERO).unwrap();
    let (_, m) = ps.get("eleven", "scribe_v1").unwrap();
    assert_eq!(
        m.seconds_cost(Decimal::from(90)),
        Some(Decimal::new(10050, 6))
    );
    let (_, m) = ps.get("eleven", "eleven_flash_v2_5").unwrap();
    assert_eq!(m.chars_cost(13), Some(Decimal::new(39, 4)));
    let bad = FILE.replace(
        "id = \"sonic-2\"\ntype = \"tts\"",
        "id = \"ink\"\ntype = \"stt\"",
    );
    let e = parse(&bad, "p.toml", Decimal::ZERO).unwrap_err();
    assert!(e.0.contains("a cartesia provider has no stt models"), "{e}");
    let bad = FILE.replace("eleven = \"21m", "nobody = \"x\"\neleven = \"21m");
    let e = parse(&bad, "p.toml", Decimal::ZERO).unwrap_err();
    assert!(e.0.contains("line 37") && e.0.contains("nobody"), "{e}");
    let bad = FILE.replace("per_minute = \"0.0067\"", "per_1k_chars = \"1\"");
    assert!(parse(&bad, "p.toml", Decimal::ZERO).is_err());
    let _ = (ModelType::Tts, Op::Speech);
}

#[test]
fn vendors_transcripts_read_as_openai() {
    let ps = parse(FILE, "p.toml", Decimal::ZERO).unwrap();
    let (p, m) = ps.get("eleven", "scribe_v1").unwrap();
    let mut form = Map::new();
    form.insert("language".into(), json!("en"));
    assert_eq!(
        p.adapter
            .transcription(Op::Transcription, m, form.clone())
            .unwrap(),
        Upload::Multipart {
            path: "/v1/speech-to-text".into(),
            fields: vec![
                ("model_id".into(), "scribe_v1".into()),
                ("language_code".into(), "en".into())
            ]
        }
    );
    form.insert("prompt".into(), json!("x"));
    assert!(p.adapter.transcription(Op::Transcription, m, form).is_err());
    assert!(p
        .adapter
        .transcription(Op::Translation, m, Map::new())
        .is_err());
    let t = p
        .adapter
        .transcript(
            &json!({"text": "hi there", "language_code": "en", "words": [
            {"text": "hi", "start": 0.0, "end": 0.2, "type": "word"},
            {"text": " ", "start": 0.2, "end": 0.25, "type": "spacing"},
            {"text": "there", "start": 0.25, "end": 0.6, "type": "word"}]}),
        )
        .unwrap()
        .unwrap();
    assert_eq!(t.to_json(false), json!({"text": "hi there"}));
    assert_eq!(t.claimed_seconds, Some(json!(0.6)));
    let dg = super::super::deepgram::Deepgram;
    let t = dg
        .transcript(
            &json!({"metadata": {"duration": 3.5}, "results": {"channels": [
            {"alternatives": [{"transcript": "hello", "words": []}]}]}}),
        )
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.text.as_str(), t.claimed_seconds),
        ("hello", Some(json!(3.5)))
    );
}
