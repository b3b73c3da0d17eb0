//! The gateway's real `endpoints.toml` parses cleanly, at run time, through
//! the same code the macro runs at compile time.

use codegen_impl::parse_table;

fn real() -> codegen_impl::Table {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../endpoints.toml");
    let text = std::fs::read_to_string(path).unwrap();
    match parse_table(&text) {
        Ok(t) => t,
        Err(errors) => panic!(
            "endpoints.toml has errors:\n{}",
            errors
                .iter()
                .map(|e| e.render(Some("endpoints.toml")))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

#[test]
fn parses_with_no_errors() {
    let table = real();
    // Update when rows are added or removed.
    assert_eq!(table.rows.len(), 160);
    assert_eq!(table.listing().len(), 160);
}

#[test]
fn spot_checks() {
    let t = real();
    let r = t.row("tts.synthesize").unwrap();
    assert_eq!(r.path, "/api/v1/voice/tts/synthesize");
    assert_eq!(r.rename, [("text".to_string(), "data".to_string())]);
    assert_eq!(r.body.len(), 7);
    assert_eq!(r.body[0].name, "voice_uuid");
    assert_eq!(
        t.row("voices.build").unwrap().set.as_deref(),
        Some(r#"{"fill":false}"#)
    );
    assert_eq!(
        t.row("recordings.get").unwrap().params,
        ["voice_uuid", "recording_uuid"]
    );
    assert_eq!(t.row("models.list").unwrap().path, "/api/v1/models/");
    assert_eq!(
        t.row("webhooks.provider").unwrap().auth.as_str(),
        "signature"
    );
    assert_eq!(
        t.row("chat.completions").unwrap().errors.as_str(),
        "envelope"
    );
    let promote = t.row("voice_design.promote").unwrap();
    assert_eq!(
        promote.upstream.as_ref().unwrap().from_body,
        ["candidate_index"]
    );
    assert!(t.rows.iter().all(|r| r.line > 0));
    assert_eq!(
        t.row("voices.create").unwrap().listing_line(),
        format!(
            "{:<6} {:<62} {:<20} {:<18} {}",
            "POST", "/api/v1/voice/voices", "proxy", "voice_subscription", "business_plan"
        )
    );
}

#[test]
fn capabilities_and_job_kinds() {
    let t = real();
    // The defaults runtime/src/ratelimit.rs had hard-coded, in table order.
    let caps: Vec<(&str, Option<(u32, u64)>)> = t
        .capabilities
        .iter()
        .map(|c| (c.name.as_str(), c.quota.map(|q| (q.count, q.per_secs))))
        .collect();
    let m = |n| Some((n, 60));
    assert_eq!(
        caps,
        [
            ("tts", m(60)),
            ("voices", m(10)),
            ("recordings", m(120)),
            ("voice_design", m(10)),
            ("stt", m(30)),
            ("enhance", m(30)),
            ("edit", m(30)),
            ("detect", m(30)),
            ("intelligence", m(30)),
            ("tracing", m(30)),
            ("watermark", m(30)),
            ("identity", m(30)),
            ("projects", m(120)),
            ("agents", m(120)),
            ("uploads", m(20)),
            ("webhook", None),
            ("chat", m(120)),
            ("completions", m(120)),
            ("embeddings", m(120)),
            ("images", m(20)),
            ("videos", m(20)),
            ("audio", m(60)),
            ("realtime", m(60)),
            ("files", m(60)),
            ("batches", m(120)),
            ("batch", m(60000)),
            ("mcp", m(600)),
            ("models", m(300)),
            ("accounts", m(60)),
            ("admin", None),
            ("media", m(60)),
            ("payments", m(30)),
            ("history", m(120)),
        ]
    );

    let job_kinds = t.job_kinds();
    let kinds: Vec<(&str, &str, Option<&str>, Option<&str>)> = job_kinds
        .iter()
        .map(|k| {
            (
                k.kind,
                k.submit.id.as_str(),
                k.get.map(|g| g.id.as_str()),
                k.mirror(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("stt", "stt.submit", Some("stt.get"), None),
            (
                "enhance",
                "enhance.submit",
                Some("enhance.get"),
                Some("item.enhanced_audio_url")
            ),
            (
                "edit",
                "edit.submit",
                Some("edit.get"),
                Some("item.result_audio_url")
            ),
            ("detect", "detect.submit", Some("detect.get"), None),
            (
                "intelligence",
                "intelligence.submit",
                Some("intelligence.get"),
                None
            ),
            ("tracing", "tracing.submit", Some("tracing.get"), None),
            (
                "watermark_apply",
                "watermark.apply.submit",
                Some("watermark.apply.get"),
                Some("item.watermarked_media")
            ),
            (
                "watermark_detect",
                "watermark.detect.submit",
                Some("watermark.detect.get"),
                None
            ),
        ]
    );
    assert_eq!(t.bases.len(), 3);
}

/// The facts that moved from the runtime's code into the table keep the
/// values the code held (no behaviour change).
#[test]
fn the_facts_the_code_held() {
    use codegen_impl::table::{Billing, ErrorFormat, Mode};
    let t = real();
    let errors: Vec<_> = t
        .areas
        .iter()
        .map(|a| (a.prefix.as_str(), a.errors))
        .collect();
    assert_eq!(
        errors,
        [
            ("/api/v1/voice", Some(ErrorFormat::Detail)),
            ("/api/v1", Some(ErrorFormat::Envelope))
        ]
    );
    assert_eq!(t.unmatched_errors, Some(ErrorFormat::Detail));
    let voice = t.kinds.iter().find(|k| k.kind == "voice").unwrap();
    assert!(voice.shared_stock);
    assert_eq!(voice.id_field.as_deref(), Some("voice_uuid"));
    assert_eq!(t.kinds.len(), 1, "only voices are shared stock");
    assert_eq!(
        t.limits,
        [
            (Mode::Upload, 500 << 20),
            (Mode::Transcription, 25 << 20),
            (Mode::Image, 32 << 20),
            (Mode::Speech, 64 << 20),
            (Mode::MediaUpload, 25 << 20),
        ]
    );
    let purposes: Vec<_> = t
        .purposes
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.prefix.as_str(),
                p.class.as_str(),
                p.retention_days,
                p.default,
            )
        })
        .collect();
    assert_eq!(
        purposes,
        [
            (
                "voice_clone",
                "voice-recordings/",
                "voice_recordings",
                None,
                false
            ),
            ("stt_input", "stt-input/", "stt_input", Some(30), false),
            ("watermark_input", "watermark/", "watermark", Some(7), false),
            (
                "audio_job_input",
                "audio-jobs/",
                "audio_jobs",
                Some(7),
                false
            ),
            ("uploads", "uploads/", "uploads", Some(30), true),
        ]
    );
    let prices: Vec<_> = t
        .prices
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        prices,
        [
            ("tts.audio_seconds", "0.0005"),
            ("watermark_apply.audio_seconds", "0.0005"),
            ("watermark_detect.audio_seconds", "0.0002"),
        ]
    );
    assert_eq!(
        t.unit_products,
        [(Billing::VoiceSubscription, "voices".to_string())]
    );
    let reconcile: Vec<_> = t
        .upstream_products
        .iter()
        .map(|(p, u, up)| (p.as_str(), u.as_str(), up.as_str()))
        .collect();
    assert_eq!(
        reconcile,
        [
            ("tts", "audio_seconds", "synth"),
            ("stt", "audio_seconds", "stt"),
            ("enhance", "audio_seconds", "enhance"),
            ("edit", "audio_seconds", "edit"),
            ("detect", "audio_seconds", "detect"),
            ("detect", "video_seconds", "detect"),
            ("detect", "images", "detect_images"),
            ("intelligence", "audio_seconds", "intelligence"),
            ("intelligence", "video_seconds", "intelligence"),
            ("intelligence", "images", "intelligence_images"),
            ("tracing", "audio_seconds", "tracing"),
            ("watermark_apply", "audio_seconds", "watermark_apply"),
            ("watermark_detect", "audio_seconds", "watermark_detect"),
            ("identity", "searches", "identity_search"),
            ("identity", "enrollments", "identity_enroll"),
            ("voice_design", "generations", "voice_design"),
        ]
    );
    // Translation was picked by the upstream path's suffix.
    for r in t.rows.iter().filter(|r| r.mode == Mode::Transcription) {
        let by_path = r.upstream.as_ref().unwrap().path.ends_with("/translations");
        assert_eq!(r.translate, by_path, "{}", r.id);
    }
}

/// The OpenAPI links (schemathesis's stateful phase follows them): every
/// kind the issue names is created by an operation whose answer links to
/// the operations taking its id.
#[test]
fn creating_operations_link_to_those_taking_their_id() {
    let t = real();
    let doc = codegen_impl::openapi::document(&t);
    let mut linked = std::collections::BTreeMap::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if let Some(links) = op["responses"]["2XX"]["links"].as_object() {
                let targets: Vec<&str> = links.keys().map(String::as_str).collect();
                linked.insert(
                    op["operationId"].as_str().unwrap().to_owned(),
                    targets.join(" "),
                );
                for l in links.values() {
                    let target = l["operationId"].as_str().unwrap();
                    assert!(t.row(target).is_some(), "{method} {path}: link to {target}");
                }
            }
        }
    }
    let expect = [
        ("voices.create", "voices.delete"),
        ("voices.create", "recordings.create"),
        ("voices.create", "tts.voices.get"),
        ("recordings.create", "recordings.delete"),
        ("voice_design.candidates", "voice_design.promote"),
        ("projects.create", "clips.create"),
        ("clips.create", "clips.get"),
        ("agents.create", "agents.delete"),
        ("agent_tools.create", "agent_tools.update"),
        ("agent_webhooks.create", "agent_webhooks.get"),
        ("knowledge_base.create", "knowledge_base.get"),
        ("identity.enroll", "identity.delete"),
        ("stt.submit", "stt.get"),
        ("watermark.apply.submit", "watermark.apply.get"),
        ("videos.generations", "videos.jobs.cancel"),
        ("keys.create", "keys.revoke"),
        ("uploads.create", "stt.submit"),
        ("auth.register", "auth.login"),
        ("auth.register", "admin.users.disable"),
        ("auth.login", "auth.refresh"),
    ];
    for (from, to) in expect {
        let targets = linked
            .get(from)
            .unwrap_or_else(|| panic!("{from} links nothing: {linked:#?}"));
        assert!(
            targets.split(' ').any(|t| t == to),
            "{from} -> {to}: {targets}"
        );
    }
    // The clip's project comes from the creating request.
    let clip = &doc["paths"]["/api/v1/voice/projects/{project_uuid}/clips"]["post"];
    let link = &clip["responses"]["2XX"]["links"]["clips.get"];
    assert_eq!(
        link["parameters"]["path.project_uuid"],
        "$request.path.project_uuid"
    );
    assert_eq!(
        link["parameters"]["path.clip_uuid"],
        "$response.body#/item/uuid"
    );
    if std::env::var_os("PRINT_LINKS").is_some() {
        eprintln!("{linked:#?}");
    }
}
