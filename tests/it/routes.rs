//! The generated router against the table: `ROUTES` equals the table parsed
//! at run time by the same parser the macro uses, and the route listing
//! equals the checked-in snapshot (so any route change shows in review).
//! Set `UPDATE_SNAPSHOTS=1` to rewrite the snapshot after an intended change.

use crate::harness::workspace_root;

#[test]
fn generated_routes_equal_the_table_parsed_at_run_time() {
    let text = std::fs::read_to_string(workspace_root().join("endpoints.toml")).unwrap();
    let table =
        codegen_impl::parse_table(&text).unwrap_or_else(|errs| panic!("table errors: {errs:?}"));
    let generated: Vec<String> = server::routes::ROUTES
        .iter()
        .map(|s| s.listing_line())
        .collect();
    assert_eq!(generated, table.listing());
}

#[test]
fn route_listing_matches_snapshot() {
    let listing = server::route_listing();
    let path = workspace_root().join("tests/snapshots/routes.txt");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &listing).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .expect("tests/snapshots/routes.txt (UPDATE_SNAPSHOTS=1 creates it)");
    assert_eq!(
        listing, expected,
        "route listing changed; review and rerun with UPDATE_SNAPSHOTS=1"
    );
}

/// Every route of spec §4, A1–A11 and B.
const SPEC_ROUTES: &[(&str, &str)] = &[
    ("POST", "/api/v1/voice/tts/synthesize"),
    ("GET", "/api/v1/voice/tts/voices"),
    ("GET", "/api/v1/voice/tts/voices/{voice_uuid}"),
    ("POST", "/api/v1/voice/voices"),
    ("POST", "/api/v1/voice/voices/{voice_uuid}/build"),
    ("DELETE", "/api/v1/voice/voices/{voice_uuid}"),
    ("GET", "/api/v1/voice/voices/{voice_uuid}/recordings"),
    ("POST", "/api/v1/voice/voices/{voice_uuid}/recordings"),
    (
        "GET",
        "/api/v1/voice/voices/{voice_uuid}/recordings/{recording_uuid}",
    ),
    (
        "PUT",
        "/api/v1/voice/voices/{voice_uuid}/recordings/{recording_uuid}",
    ),
    (
        "DELETE",
        "/api/v1/voice/voices/{voice_uuid}/recordings/{recording_uuid}",
    ),
    ("POST", "/api/v1/voice/voice-design/candidates"),
    ("POST", "/api/v1/voice/voice-design/{design_uuid}/promote"),
    ("POST", "/api/v1/voice/stt"),
    ("GET", "/api/v1/voice/stt/{job_id}"),
    ("GET", "/api/v1/voice/stt"),
    ("POST", "/api/v1/voice/enhance"),
    ("GET", "/api/v1/voice/enhance/{job_id}"),
    ("POST", "/api/v1/voice/edit"),
    ("GET", "/api/v1/voice/edit/{job_id}"),
    ("POST", "/api/v1/voice/detect"),
    ("GET", "/api/v1/voice/detect/{job_id}"),
    ("POST", "/api/v1/voice/intelligence"),
    ("GET", "/api/v1/voice/intelligence/{job_id}"),
    ("POST", "/api/v1/voice/tracing"),
    ("GET", "/api/v1/voice/tracing/{job_id}"),
    ("POST", "/api/v1/voice/watermark/apply"),
    ("GET", "/api/v1/voice/watermark/apply/{job_id}"),
    ("POST", "/api/v1/voice/watermark/detect"),
    ("GET", "/api/v1/voice/watermark/detect/{job_id}"),
    ("POST", "/api/v1/voice/identity/search"),
    ("POST", "/api/v1/voice/identity/enroll"),
    ("GET", "/api/v1/voice/identity"),
    ("GET", "/api/v1/voice/identity/{identity_id}"),
    ("DELETE", "/api/v1/voice/identity/{identity_id}"),
    ("GET", "/api/v1/voice/projects"),
    ("POST", "/api/v1/voice/projects"),
    ("GET", "/api/v1/voice/projects/{project_uuid}"),
    ("PUT", "/api/v1/voice/projects/{project_uuid}"),
    ("DELETE", "/api/v1/voice/projects/{project_uuid}"),
    ("GET", "/api/v1/voice/projects/{project_uuid}/clips"),
    ("POST", "/api/v1/voice/projects/{project_uuid}/clips"),
    (
        "GET",
        "/api/v1/voice/projects/{project_uuid}/clips/{clip_uuid}",
    ),
    (
        "DELETE",
        "/api/v1/voice/projects/{project_uuid}/clips/{clip_uuid}",
    ),
    ("GET", "/api/v1/voice/agents/capabilities"),
    ("GET", "/api/v1/voice/agents/system-tools"),
    ("POST", "/api/v1/voice/uploads"),
    ("POST", "/api/v1/voice/webhooks/provider"),
    ("POST", "/api/v1/chat/completions"),
    ("POST", "/api/v1/completions"),
    ("POST", "/api/v1/completions/stop-stream/{stream_id}"),
    ("POST", "/api/v1/embeddings"),
    ("POST", "/api/v1/images/generations"),
    ("POST", "/api/v1/videos/generations"),
    ("GET", "/api/v1/videos/jobs/{job_id}"),
    ("GET", "/api/v1/videos/jobs"),
    ("POST", "/api/v1/videos/jobs/{job_id}/cancel"),
    ("POST", "/api/v1/audio/tts/generations"),
    ("POST", "/api/v1/audio/stt/transcriptions"),
    ("POST", "/api/v1/audio/stt/translations"),
    ("GET", "/api/v1/models/"),
    ("GET", "/api/v1/models/trending"),
    ("GET", "/api/v1/models/{provider_id}/{model_id}"),
];

#[test]
fn every_spec_route_is_in_the_table() {
    let have: Vec<(&str, &str)> = server::routes::ROUTES
        .iter()
        .map(|s| (s.method.as_str(), s.path))
        .collect();
    for r in SPEC_ROUTES {
        assert!(have.contains(r), "missing {r:?}");
    }
    // A9: four agent resources with five CRUD routes each.
    for prefix in ["agents", "agent-tools", "agent-webhooks", "knowledge-base"] {
        let n = have.iter().filter(|(_, p)| {
            p.strip_prefix("/api/v1/voice/")
                .is_some_and(|rest| rest == prefix || rest == format!("{prefix}/{{uuid}}"))
        });
        assert_eq!(n.count(), 5, "{prefix}");
    }
    let voice = have
        .iter()
        .filter(|(_, p)| p.starts_with("/api/v1/voice/"))
        .count();
    assert_eq!(voice, 68, "A1–A11: 3+3+5+2+3+4+6+4+5+9+22+1+1");
    let accounts = have
        .iter()
        .filter(|(_, p)| {
            ["/api/v1/auth/", "/api/v1/keys", "/api/v1/admin/"]
                .iter()
                .any(|a| p.starts_with(a))
        })
        .count();
    assert_eq!(
        accounts, 25,
        "issue #10: 7 auth + 3 keys + 6 admin routes; issue #24: 2 sign-in routes; \
         issue #27: 3 more admin history routes (usage was one already), a key's budget edit; \
         issue #46: DELETE /auth/me, /admin/reload, /admin/prices/{{version}}"
    );
    let media = have
        .iter()
        .filter(|(_, p)| p.starts_with("/api/v1/media"))
        .count();
    assert_eq!(media, 4, "issue #24: media upload, list, get, delete");
    let payments = have
        .iter()
        .filter(|(_, p)| p.starts_with("/api/v1/stripe/"))
        .count();
    assert_eq!(
        payments, 3,
        "issue #24: Stripe checkout, webhook, purchases"
    );
    let history = have
        .iter()
        .filter(|(_, p)| {
            ["/api/v1/usage", "/api/v1/generations/", "/api/v1/credits"]
                .iter()
                .any(|a| p.starts_with(a))
        })
        .count();
    assert_eq!(history, 4, "issue #27: usage, generations, credits, ledger");
    assert_eq!(
        have.len() - voice - accounts - media - payments - history,
        56,
        "B: 15 general-gateway routes; issue #45: /alerts/settings (GET, PUT) and /alerts, /organizations (create, list, accept; invitations, members, member removal, keys: list, create, update, revoke; usage, credits); issue #25: /messages and /messages/count_tokens; issue #39: /gemini; \
         issue #40: /responses, its get, delete, input items and cancel; issue #41: /audio/voices; issue #42: /realtime and /audio/stt/stream; issue #43: /files (create, list, get, content, delete), /batches (create, list, get, cancel); issue #44: /mcp/{{server}} and /mcp (POST, GET, DELETE)"
    );
}

#[test]
fn matcher_prefers_static_segments_and_ignores_a_trailing_slash() {
    use runtime::router::RouteMatch;
    let id = |m: &str, p: &str| match server::routes::route(&m.parse().unwrap(), p) {
        RouteMatch::Found { spec, params, .. } => {
            let ps: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{} {}", spec.id, ps.join(","))
        }
        RouteMatch::MethodNotAllowed { allowed } => format!("405 {allowed}"),
        RouteMatch::NotFound => "404".into(),
    };
    assert_eq!(
        id("GET", "/api/v1/voice/agents/capabilities"),
        "agents.capabilities "
    );
    assert_eq!(
        id("GET", "/api/v1/voice/agents/a%20b"),
        "agents.get uuid=a%20b"
    );
    assert_eq!(id("GET", "/api/v1/models"), "models.list ");
    assert_eq!(id("GET", "/api/v1/models/"), "models.list ");
    assert_eq!(id("GET", "/api/v1/models/trending"), "models.trending ");
    assert_eq!(
        id("GET", "/api/v1/models/openai/gpt-4o"),
        "models.get provider_id=openai,model_id=gpt-4o"
    );
    assert_eq!(
        id("PATCH", "/api/v1/voice/projects/p1"),
        "405 GET, PUT, DELETE"
    );
    assert_eq!(id("GET", "/api/v1/voice/nope"), "404");
    assert_eq!(
        id(
            "GET",
            "/api/v1/voice/tts/voices/v1/extra/deep/path/a/b/c/d/e/f/g"
        ),
        "404"
    );
}
