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
    assert_eq!(table.rows.len(), 83);
    assert_eq!(table.listing().len(), 83);
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
            "{:<6} {:<62} {:<18} {:<18} {}",
            "POST", "/api/v1/voice/voices", "proxy", "voice_subscription", "business_plan"
        )
    );
}
