//! Every validation rule, data-driven: a table (or one row) and a piece of
//! the message it must produce. Run at run time through the same
//! `parse_table` the macro uses.

use codegen_impl::table::Metering;
use codegen_impl::{parse_table, TableError};

const HEADER: &str = r#"
[areas.voice]
prefix = "/api/v1/voice"
auth = "bearer"
errors = "detail"

[areas.gateway]
prefix = "/api/v1"
auth = "bearer"
errors = "envelope"

[bases.main]
auth = "bearer"

[bases.llm]
auth = "bearer"
"#;

/// A valid row to start from; tests replace or append lines.
const ROW: &str = r#"
[[endpoint]]
id = "things.get"
area = "voice"
method = "GET"
path = "/things/{thing_id}"
mode = "proxy"
capability = "things"
billing = "free"
upstream = { base = "main", method = "GET", path = "/things/{thing_id}" }
"#;

/// The `job_submit` row of job kind `stt`: a table whose rows name the kind
/// needs one.
const STT_SUBMIT: &str = r#"
[[endpoint]]
id = "stt.submit"
area = "voice"
method = "POST"
path = "/stt"
mode = "job_submit"
job = "stt"
capability = "things"
billing = "free"
upstream = { base = "main", method = "POST", path = "/stt" }
"#;

/// The capability `ROW` names. Tables put it after their rows, so the rows'
/// line numbers do not depend on it.
const CAPABILITIES: &str = r#"
[capabilities]
things = "60/m"

[limits]
upload = "500 MiB"
transcription = "25 MiB"
image = "32 MiB"
speech = "64 MiB"

[purposes.uploads]
prefix = "uploads/"
class = "uploads"
default = true
"#;

/// Header + rows + `[capabilities]`.
fn table(rows: &[&str]) -> String {
    let mut t = HEADER.to_string();
    for r in rows {
        t.push_str(r);
    }
    t.push_str(CAPABILITIES);
    t
}

/// `ROW` with `key = ...` lines replaced (or added, or removed with `None`),
/// followed by extra text (sub-tables).
fn row(changes: &[(&str, Option<&str>)], extra: &str) -> String {
    let mut lines: Vec<String> = ROW.lines().map(str::to_string).collect();
    for (key, value) in changes {
        let pos = lines
            .iter()
            .position(|l| l.starts_with(&format!("{key} = ")));
        match (pos, value) {
            (Some(i), Some(v)) => lines[i] = format!("{key} = {v}"),
            (Some(i), None) => {
                lines.remove(i);
            }
            (None, Some(v)) => lines.push(format!("{key} = {v}")),
            (None, None) => panic!("no key {key} to remove"),
        }
    }
    format!("{}\n{extra}\n", lines.join("\n"))
}

fn errors(text: &str) -> Vec<TableError> {
    match parse_table(text) {
        Ok(_) => Vec::new(),
        Err(e) => e,
    }
}

/// The table must fail with exactly one error containing `expected`.
#[track_caller]
fn check(text: &str, expected: &str) {
    let errs = errors(text);
    let rendered: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    assert!(
        errs.len() == 1 && rendered[0].contains(expected),
        "expected one error containing {expected:?}, got {rendered:#?}\n--- table ---\n{text}"
    );
}

/// The table must fail with exactly these errors (one substring each, in order).
#[track_caller]
fn check_all(text: &str, expected: &[&str]) {
    let errs = errors(text);
    let rendered: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    assert!(
        errs.len() == expected.len() && rendered.iter().zip(expected).all(|(e, x)| e.contains(x)),
        "expected errors containing {expected:#?}, got {rendered:#?}\n--- table ---\n{text}"
    );
}

/// A single-row table whose row is changed as given.
#[track_caller]
fn check_row(changes: &[(&str, Option<&str>)], extra: &str, expected: &str) {
    check(&table(&[&row(changes, extra)]), expected);
}

#[track_caller]
fn ok(text: &str) {
    let errs = errors(text);
    assert!(
        errs.is_empty(),
        "unexpected errors: {errs:#?}\n--- table ---\n{text}"
    );
}

#[test]
fn the_base_row_is_valid() {
    ok(&table(&[ROW]));
    ok(&table(&[&row(&[], "")]));
}

#[test]
fn errors_name_the_row_and_line() {
    let text = table(&[
        ROW,
        &row(
            &[
                ("id", Some("\"b\"")),
                ("method", Some("\"POST\"")),
                ("mode", Some("\"prox\"")),
            ],
            "",
        ),
    ]);
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].row.as_deref(), Some("b"));
    let mode_line = text.lines().position(|l| l == "mode = \"prox\"").unwrap() + 1;
    assert_eq!(errs[0].line, Some(mode_line));
    assert_eq!(
        errs[0].render(Some("endpoints.toml")),
        format!(
            "endpoints.toml:{mode_line}: row `b`: `mode`: unknown mode `prox`, expected one of: proxy, fields, synthesize, \
             job_submit, job_get, job_list, upload, webhook, owned_search, chat, completion, stop_stream, messages, count_tokens, gemini, responses, response_get, response_delete, response_input_items, response_cancel, embedding, image, video_submit, \
             video_get, video_list, video_cancel, speech, speech_voices, transcription, realtime, file_upload, file_list, file_get, file_content, file_delete, batch_create, batch_list, batch_get, batch_cancel, mcp, stt_stream, catalogue, catalogue_trending, catalogue_model, \
             register, login, token_refresh, logout, confirm_email, reset_password, me, account_delete, oauth_authorize, oauth_callback, key_list, key_create, key_revoke, key_update, alert_settings_get, alert_settings_set, alert_list, org_create, org_list, org_invite, org_accept, org_members, org_member_remove, \
             admin_users, admin_disable, admin_enable, admin_delete, admin_credits, admin_reload, admin_prices, \
             media_upload, media_get, media_list, media_delete, \
             stripe_checkout, stripe_webhook, stripe_purchases, \
             generation, usage_totals, credit_balance, credit_ledger"
        )
    );
}

#[test]
fn reports_every_error_not_just_the_first() {
    let text = table(&[
        &row(
            &[("mode", Some("\"prox\"")), ("billing", Some("\"gratis\""))],
            "",
        ),
        &row(
            &[
                ("id", Some("\"second\"")),
                ("path", Some("\"/x/{a}\"")),
                ("gate", Some("\"business_plan\"")),
            ],
            "",
        ),
        &row(
            &[
                ("id", Some("\"third\"")),
                ("path", Some("\"/y\"")),
                ("capability", Some("\"\"")),
            ],
            "",
        ),
    ]);
    let errs = errors(&text);
    let rendered: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    let expect = [
        ("things.get", "unknown mode `prox`"),
        ("things.get", "unknown billing `gratis`"),
        (
            "second",
            "uses `{thing_id}`, which is neither a path parameter",
        ),
        (
            "second",
            "path parameter `{a}` is not used by the upstream path",
        ),
        ("third", "`capability` is empty"),
        ("third", "uses `{thing_id}`"),
    ];
    assert_eq!(errs.len(), expect.len(), "{rendered:#?}");
    for (row, msg) in expect {
        assert!(
            errs.iter()
                .any(|e| e.row.as_deref() == Some(row) && e.message.contains(msg)),
            "missing ({row}, {msg}) in {rendered:#?}"
        );
    }
    // Sorted by line.
    let lines: Vec<usize> = errs.iter().map(|e| e.line.unwrap()).collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted);
}

#[test]
fn syntax_errors() {
    check(
        &format!("{HEADER}\n[[endpoint]]\nid = \"x"),
        "TOML syntax error",
    );
    let errs = errors("a = 1\nb = [\nc=");
    assert_eq!(errs[0].line, Some(3));
}

#[test]
fn duplicates() {
    check_all(
        &table(&[ROW, ROW]),
        &[
            "duplicate id `things.get` (first used by the row at line 18)",
            "duplicate method and path",
        ],
    );
    // Same method and shape: parameter names and a trailing slash do not matter.
    let other = row(
        &[
            ("id", Some("\"other\"")),
            ("path", Some("\"/things/{x}/\"")),
            (
                "upstream",
                Some(r#"{ base = "main", method = "GET", path = "/things/{x}" }"#),
            ),
        ],
        "",
    );
    check(&table(&[ROW, &other]), "duplicate method and path: GET /api/v1/voice/things/{x}/ is already served by row `things.get`");
    // Another method on the same path is fine.
    ok(&table(&[
        ROW,
        &row(
            &[("id", Some("\"other\"")), ("method", Some("\"DELETE\""))],
            "",
        ),
    ]));
    // Two areas meeting on the same full path.
    let gw = row(
        &[
            ("id", Some("\"gw\"")),
            ("area", Some("\"gateway\"")),
            ("path", Some("\"/voice/things/{thing_id}\"")),
        ],
        "",
    );
    check(&table(&[ROW, &gw]), "duplicate method and path");
    // Ids that generate the same Rust name.
    check(
        &table(&[
            ROW,
            &row(
                &[
                    ("id", Some("\"things_get\"")),
                    ("method", Some("\"DELETE\"")),
                ],
                "",
            ),
        ]),
        "both generate the name `THINGS_GET`",
    );
}

#[test]
fn keywords_and_unknown_keys() {
    check_row(&[("mode", Some("\"prox\""))], "", "unknown mode `prox`");
    check_row(
        &[("billing", Some("\"cents\""))],
        "",
        "unknown billing `cents`",
    );
    check_row(
        &[("gate", Some("\"pro_plan\""))],
        "",
        "unknown gate `pro_plan`",
    );
    check_row(&[("auth", Some("\"basic\""))], "", "unknown auth `basic`");
    check_row(
        &[("errors", Some("\"json\""))],
        "",
        "unknown error format `json`",
    );
    check_row(
        &[("method", Some("\"get\""))],
        "",
        "unknown method `get`, expected one of: GET, POST",
    );
    check_row(&[("area", Some("\"admin\""))], "", "unknown area `admin`");
    check_row(
        &[(
            "upstream",
            Some(r#"{ base = "cdn", method = "GET", path = "/things/{thing_id}" }"#),
        )],
        "",
        "`upstream.base`: unknown base `cdn`",
    );
    check_row(
        &[(
            "upstream",
            Some(r#"{ base = "main", method = "GO", path = "/things/{thing_id}" }"#),
        )],
        "",
        "`upstream.method`: unknown method `GO`",
    );
    check_row(
        &[("retention_day", Some("7"))],
        "",
        "unknown key `retention_day` (did you mean `retention_days`?)",
    );
    check_row(
        &[(
            "upstream",
            Some(r#"{ base = "main", method = "GET", path = "/things/{thing_id}", headers = 1 }"#),
        )],
        "",
        "unknown field `headers`",
    );
    check_row(
        &[],
        "[endpoint.query]\npage = { type = \"int\" }",
        "`query.page.type`: unknown field type `int`",
    );
    check_row(
        &[],
        "[endpoint.query]\npage = { type = \"integer\", minimum = 1 }",
        "unknown field `minimum`",
    );
    check_row(
        &[("retention_days", Some("-1"))],
        "",
        "`retention_days`: invalid value",
    );
    check_row(&[("mode", Some("3"))], "", "`mode`");
    check(
        &format!("{HEADER}\n[server]\nport = 1\n{ROW}{CAPABILITIES}"),
        "unknown top-level key `server`",
    );
    check(
        &format!("{HEADER}\n[areas.admin]\nprefix = \"/admin\"\n{ROW}{CAPABILITIES}"),
        "unknown area `admin`",
    );
    check(
        &format!("{HEADER}\n[bases.cdn]\nauth = \"bearer\"\n{ROW}{CAPABILITIES}"),
        "unknown base `cdn`",
    );
    check(
        &format!("{HEADER}\n[bases.synth]\nauth = \"basic\"\n{ROW}{CAPABILITIES}"),
        "[bases.synth]: `auth`: unknown upstream auth `basic`",
    );
    check(&format!("[areas.voice]\nprefix = \"/v\"\nauth = \"bearer\"\nerrors = \"detail\"\ncolour = 1\n[bases.main]\nauth = \"bearer\"\n{ROW}{CAPABILITIES}"), "unknown field `colour`");
}

#[test]
fn one_bad_row_does_not_hide_the_others() {
    let text = table(&[
        &row(&[("mode", Some("\"prox\""))], ""),
        &row(
            &[
                ("id", Some("\"b\"")),
                ("method", Some("\"POST\"")),
                ("billing", Some("\"cents\"")),
            ],
            "",
        ),
    ]);
    let errs = errors(&text);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert_eq!(errs[0].row.as_deref(), Some("things.get"));
    assert_eq!(errs[1].row.as_deref(), Some("b"));
    // A row with a bad key still takes part in the other checks.
    let text = table(&[ROW, &row(&[("mode", Some("\"prox\""))], "")]);
    let rendered: Vec<String> = errors(&text).iter().map(|e| e.to_string()).collect();
    assert!(
        rendered.iter().any(|e| e.contains("duplicate id")),
        "{rendered:#?}"
    );
}

#[test]
fn missing_keys() {
    for key in [
        "id",
        "area",
        "method",
        "path",
        "mode",
        "capability",
        "billing",
    ] {
        let errs = errors(&table(&[&row(&[(key, None)], "")]));
        assert!(
            errs.iter()
                .any(|e| e.message == format!("missing key `{key}`")),
            "{key}: {errs:#?}"
        );
    }
    // Without an id the row is named by its position.
    let errs = errors(&table(&[
        ROW,
        &row(&[("id", None), ("method", Some("\"PUT\""))], ""),
    ]));
    assert_eq!(errs[0].row.as_deref(), Some("#2"));
    check(HEADER, "no `[[endpoint]]` rows");
}

#[test]
fn areas_and_bases_must_be_declared() {
    ok(&table(&[&row(&[("area", Some("\"gateway\""))], "")]));
    let no_gateway = format!(
        "[areas.voice]\nprefix = \"/api/v1/voice\"\nauth = \"bearer\"\nerrors = \"detail\"\n[bases.main]\nauth = \"bearer\"\n{}{CAPABILITIES}",
        row(&[("area", Some("\"gateway\""))], "")
    );
    check(&no_gateway, "area `gateway` is not declared in `[areas]`");
    check_row(
        &[(
            "upstream",
            Some(r#"{ base = "synth", method = "GET", path = "/things/{thing_id}" }"#),
        )],
        "",
        "base `synth` is not declared in `[bases]`",
    );
    let no_defaults = format!(
        "[areas.voice]\nprefix = \"/v\"\n[bases.main]\nauth = \"bearer\"\n{ROW}{CAPABILITIES}"
    );
    let errs = errors(&no_defaults);
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(errs[0].message.contains("no `auth`"));
    assert!(errs[1].message.contains("no `errors`"));
    ok(&format!(
        "[areas.voice]\nprefix = \"/v\"\n[bases.main]\nauth = \"bearer\"\n{}{CAPABILITIES}",
        row(
            &[("auth", Some("\"bearer\"")), ("errors", Some("\"detail\""))],
            ""
        )
    ));
    check(&format!("[areas.voice]\nprefix = \"api\"\nauth = \"bearer\"\nerrors = \"detail\"\n[bases.main]\nauth = \"bearer\"\n{ROW}{CAPABILITIES}"), "prefix `api` must start with `/`");
    check(&format!("[areas.voice]\nprefix = \"/api/\"\nauth = \"bearer\"\nerrors = \"detail\"\n[bases.main]\nauth = \"bearer\"\n{ROW}{CAPABILITIES}"), "must not end with `/`");
    check(&format!("[areas.voice]\nprefix = \"/api/{{v}}\"\nauth = \"bearer\"\nerrors = \"detail\"\n[bases.main]\nauth = \"bearer\"\n{ROW}{CAPABILITIES}"), "contains `{`");
}

#[test]
fn paths() {
    let up = |p: &str| format!(r#"{{ base = "main", method = "GET", path = "{p}" }}"#);
    check_row(
        &[("path", Some("\"things\""))],
        "",
        "path `things` must start with `/`",
    );
    check_row(
        &[("path", Some("\"/things//{thing_id}\""))],
        "",
        "empty segment (`//`)",
    );
    check_row(
        &[("path", Some("\"/things/x{thing_id}\""))],
        "",
        "a parameter must be a whole segment `{name}`",
    );
    check_row(
        &[("path", Some("\"/things/{thing_id}.json\""))],
        "",
        "a parameter must be a whole segment",
    );
    check_row(
        &[
            ("path", Some("\"/things/{rest*}/x\"")),
            ("upstream", Some(&up("/x/{rest}"))),
        ],
        "",
        "a tail parameter `{name*}` must be the path's last segment",
    );
    check_row(
        &[("path", Some("\"/things/{thing-id*}\""))],
        "",
        "path parameter `{thing-id}` is not an identifier",
    );
    ok(&table(&[&row(
        &[
            ("path", Some("\"/things/{rest*}\"")),
            ("upstream", Some(&up("/x/{rest}"))),
        ],
        "",
    )]));
    check_row(
        &[("path", Some("\"/things/{thing-id}\""))],
        "",
        "path parameter `{thing-id}` is not an identifier",
    );
    check_row(
        &[("path", Some("\"/things/{}\""))],
        "",
        "path parameter `{}` is not an identifier",
    );
    check_row(&[("path", Some("\"/things/a b\""))], "", "contains ` `");
    check_row(&[("path", Some("\"/things/a?b=1\""))], "", "contains `?`");
    check_row(
        &[("path", Some("\"/t/{thing_id}/{thing_id}\""))],
        "",
        "duplicate path parameter `{thing_id}`",
    );
    check_row(
        &[
            ("path", Some("\"/t/{a}/{b}/{c}/{d}/{thing_id}\"")),
            ("upstream", Some(&up("/x/{a}/{b}/{c}/{d}/{thing_id}"))),
        ],
        "",
        "has 5 parameters; at most 4",
    );
    ok(&table(&[&row(
        &[
            ("path", Some("\"/t/{a}/{b}/{c}/{thing_id}\"")),
            ("upstream", Some(&up("/x/{a}/{b}/{c}/{thing_id}"))),
        ],
        "",
    )]));
    ok(&table(&[&row(
        &[("path", Some("\"/things/{thing_id}/\""))],
        "",
    )]));
}

#[test]
fn upstream_templates() {
    let up = |p: &str, extra: &str| {
        format!(r#"{{ base = "main", method = "GET", path = "{p}"{extra} }}"#)
    };
    check_all(
        &table(&[&row(&[("upstream", Some(&up("/things/{id}", "")))], "")]),
        &[
            "uses `{id}`, which is neither a path parameter of the route nor listed in `from_query`/`from_body`/`from_parent`",
            "path parameter `{thing_id}` is not used by the upstream path `/things/{id}`",
        ],
    );
    check_row(
        &[("upstream", Some(&up("things/{thing_id}", "")))],
        "",
        "must start with `/`",
    );
    check_row(
        &[("upstream", Some(&up("/things/{thing_id", "")))],
        "",
        "has a `{` without `}`",
    );
    check_row(
        &[("upstream", Some(&up("/things/thing_id}", "")))],
        "",
        "has a `}` without `{`",
    );
    check_row(
        &[("upstream", Some(&up("/things/{thing_id}/{1x}", "")))],
        "",
        "placeholder `{1x}` is not an identifier",
    );
    // from_query / from_body.
    let q = "[endpoint.query]\nowner = { type = \"string\", required = true }";
    ok(&table(&[&row(
        &[(
            "upstream",
            Some(&up(
                "/o/{owner}/things/{thing_id}",
                ", from_query = [\"owner\"]",
            )),
        )],
        q,
    )]));
    check_row(
        &[(
            "upstream",
            Some(&up(
                "/o/{owner}/things/{thing_id}",
                ", from_query = [\"owner\"]",
            )),
        )],
        "",
        "`from_query` lists `owner`, so `[endpoint.query]` must declare it as required",
    );
    check_row(
        &[(
            "upstream",
            Some(&up("/things/{thing_id}", ", from_query = [\"owner\"]")),
        )],
        q,
        "`from_query` lists `owner`, which the upstream path `/things/{thing_id}` does not use",
    );
    check_row(
        &[(
            "upstream",
            Some(&up("/things/{thing_id}", ", from_body = [\"owner\"]")),
        )],
        "",
        "`from_body` lists `owner`, which the upstream path",
    );
    check_row(
        &[(
            "upstream",
            Some(&up("/things/{thing_id}", ", from_query = [\"thing_id\"]")),
        )],
        "[endpoint.query]\nthing_id = { type = \"string\", required = true }",
        "which is already a path parameter of the route",
    );
    let b = "[endpoint.body]\nindex = { type = \"integer\", required = true }";
    ok(&table(&[&row(
        &[
            ("method", Some("\"POST\"")),
            (
                "upstream",
                Some(&up(
                    "/things/{thing_id}/{index}",
                    ", from_body = [\"index\"]",
                )),
            ),
        ],
        b,
    )]));
    check_row(
        &[
            ("method", Some("\"POST\"")),
            (
                "upstream",
                Some(&up(
                    "/things/{thing_id}/{index}",
                    ", from_body = [\"index\"]",
                )),
            ),
        ],
        "[endpoint.body]\nindex = { type = \"integer\" }",
        "must declare it as required",
    );
    // proxy forwards the route: every route parameter must reach the upstream.
    check_row(
        &[("upstream", Some(&up("/things", "")))],
        "",
        "path parameter `{thing_id}` is not used by the upstream path `/things`",
    );
    // ... but a job mode may use its parameter locally.
    ok(&table(&[
        &row(
            &[
                ("mode", Some("\"job_get\"")),
                ("job", Some("\"stt\"")),
                ("upstream", Some(&up("/jobs", ""))),
            ],
            "",
        ),
        STT_SUBMIT,
    ]));
}

#[test]
fn modes() {
    check_row(
        &[("upstream", None)],
        "",
        "mode `proxy` forwards to the provider and needs an `upstream`",
    );
    for mode in ["fields", "synthesize", "job_submit", "job_get", "job_list"] {
        let errs = errors(&table(&[&row(
            &[("mode", Some(&format!("\"{mode}\""))), ("upstream", None)],
            "",
        )]));
        assert!(
            errs.iter()
                .any(|e| e.message.contains("needs an `upstream`")),
            "{mode}: {errs:#?}"
        );
    }
    let plain = Some(r#"{ base = "main", method = "POST", path = "/u" }"#);
    check_row(
        &[
            ("mode", Some("\"upload\"")),
            ("path", Some("\"/uploads\"")),
            ("method", Some("\"POST\"")),
            ("upstream", plain),
        ],
        "",
        "mode `upload` is served by the gateway itself and takes no `upstream`",
    );
    check_row(
        &[
            ("mode", Some("\"webhook\"")),
            ("path", Some("\"/hook\"")),
            ("method", Some("\"POST\"")),
            ("upstream", plain),
        ],
        "",
        "mode `webhook` is served by the gateway itself",
    );
    ok(&table(&[&row(
        &[
            ("mode", Some("\"upload\"")),
            ("path", Some("\"/uploads\"")),
            ("method", Some("\"POST\"")),
            ("upstream", None),
        ],
        "",
    )]));
    check_row(
        &[("mode", Some("\"job_get\""))],
        "",
        "mode `job_get` needs `job`",
    );
    check_row(
        &[("job", Some("\"stt\""))],
        "",
        "`job` only applies to the job modes",
    );
    check_row(
        &[
            ("mode", Some("\"job_get\"")),
            ("job", Some("\"Speech To Text\"")),
        ],
        "",
        "job kind `Speech To Text` must be lower-case",
    );
    check_row(
        &[("mode", Some("\"fields\"")), ("method", Some("\"PUT\""))],
        "",
        "mode `fields` needs a required object field `fields`",
    );
    check_row(
        &[("mode", Some("\"fields\"")), ("method", Some("\"PUT\""))],
        "[endpoint.body]\nfields = { type = \"object\" }",
        "mode `fields` needs a required object field `fields`",
    );
    check_row(
        &[("mode", Some("\"fields\"")), ("method", Some("\"PUT\""))],
        "[endpoint.body]\nfields = { type = \"array\", required = true }",
        "mode `fields` needs a required object field",
    );
    ok(&table(&[&row(
        &[("mode", Some("\"fields\"")), ("method", Some("\"PUT\""))],
        "[endpoint.body]\nfields = { type = \"object\", required = true }",
    )]));
    check_row(
        &[("mirror", Some("\"item.url\""))],
        "",
        "`mirror` only applies to mode `job_get`, not `proxy`",
    );
    check(
        &table(&[
            &row(
                &[
                    ("mode", Some("\"job_get\"")),
                    ("job", Some("\"stt\"")),
                    ("mirror", Some("\"item..url\"")),
                ],
                "",
            ),
            STT_SUBMIT,
        ]),
        "must be a dotted path",
    );
    ok(&table(&[
        &row(
            &[
                ("mode", Some("\"job_get\"")),
                ("job", Some("\"stt\"")),
                ("mirror", Some("\"item.url\"")),
            ],
            "",
        ),
        STT_SUBMIT,
    ]));
    // The general-gateway modes may or may not call an upstream.
    ok(&table(&[&row(
        &[("mode", Some("\"catalogue\"")), ("upstream", None)],
        "",
    )]));
}

#[test]
fn billing_gate_and_auth() {
    // A gate on a free route is allowed (spec A2: DELETE /voices).
    ok(&table(&[&row(&[("gate", Some("\"business_plan\""))], "")]));
    ok(&table(&[&row(
        &[
            ("gate", Some("\"business_plan\"")),
            ("billing", Some("\"generations\"")),
        ],
        "",
    )]));
    check_row(
        &[("billing", Some("\"tokens\"")), ("auth", Some("\"none\""))],
        "",
        "billing `tokens` needs a caller to charge, but auth is `none`",
    );
    check_row(
        &[
            ("billing", Some("\"tokens\"")),
            ("auth", Some("\"signature\"")),
        ],
        "",
        "but auth is `signature`",
    );
    check_row(&[("capability", Some("\"\""))], "", "`capability` is empty");
    check_row(
        &[("capability", Some("\"  \""))],
        "",
        "`capability` is empty",
    );
    check_row(
        &[("capability", Some("\"t t\""))],
        "",
        "contains white space",
    );
}

#[test]
fn field_rules() {
    let body = |rule: &str| format!("[endpoint.body]\nx = {rule}");
    let post = [("method", Some("\"POST\""))];
    check_row(
        &post,
        &body("{ type = \"integer\", min = 5, max = 1 }"),
        "[endpoint.body] field `x`: `min` (5) is greater than `max` (1)",
    );
    check_row(
        &post,
        &body("{ type = \"integer\", max_len = 5 }"),
        "`max_len` only applies to strings, but the type is `integer`",
    );
    check_row(
        &post,
        &body("{ type = \"any\", one_of = [\"a\"] }"),
        "`one_of` only applies to strings, but the type is `any`",
    );
    check_row(
        &post,
        &body("{ type = \"string\", min = 1 }"),
        "`min`/`max` only apply to `integer` and `number` fields, but the type is `string`",
    );
    check_row(
        &post,
        &body("{ type = \"boolean\", max = 1 }"),
        "`min`/`max` only apply",
    );
    check_row(
        &post,
        &body("{ type = \"number\", max = nan }"),
        "`max` must be a finite number",
    );
    check_row(
        &post,
        &body("{ type = \"number\", min = -inf }"),
        "`min` must be a finite number",
    );
    check_row(
        &post,
        &body("{ type = \"string\", one_of = [] }"),
        "`one_of` is empty",
    );
    check_row(
        &post,
        &body("{ type = \"string\", one_of = [\"a\", \"a\"] }"),
        "`one_of` lists `a` twice",
    );
    check_row(
        &post,
        &body("{ type = \"string\", max_len = 2, one_of = [\"abc\"] }"),
        "is longer than `max_len` (2)",
    );
    check_row(
        &post,
        &body("{ type = \"string\", required = \"yes\" }"),
        "`body.x.required`: invalid type",
    );
    check_row(
        &[],
        &body("{ type = \"string\" }"),
        "a GET route has no body",
    );
    check_row(
        &[],
        "[endpoint.query]\np = { type = \"integer\", min = 2.5, max = 1 }",
        "[endpoint.query] field `p`: `min` (2.5) is greater than `max` (1)",
    );
    ok(&table(&[&row(
        &post,
        &body("{ type = \"number\", min = -2.0, max = 2 }"),
    )]));
}

#[test]
fn mapping_toward_the_upstream() {
    let post = ("method", Some("\"POST\""));
    check_row(
        &[post, ("rename", Some("{ text = \"text\" }"))],
        "",
        "`rename` maps `text` to itself",
    );
    check_row(
        &[post, ("rename", Some("{ a = \"x\", b = \"x\" }"))],
        "",
        "`rename` maps two fields to `x`",
    );
    check_row(
        &[post, ("rename", Some("{ a = \"\" }"))],
        "",
        "`rename` has an empty field name",
    );
    check_row(
        &[post, ("rename", Some("{ a = 1 }"))],
        "",
        "`rename.a`: invalid type",
    );
    check_row(
        &[
            post,
            ("rename", Some("{ a = \"b\" }")),
            ("drop", Some("[\"a\"]")),
        ],
        "",
        "`a` is both renamed and dropped",
    );
    check_row(
        &[post, ("drop", Some("[\"a\", \"a\"]"))],
        "",
        "`drop` lists `a` twice",
    );
    check_row(
        &[post, ("drop", Some("[\"\"]"))],
        "",
        "`drop` lists an empty name",
    );
    check_row(&[post, ("set", Some("{}"))], "", "`set` is empty");
    check_row(
        &[post, ("set", Some("{ x = inf }"))],
        "",
        "is not a JSON number",
    );
    check_row(&[post, ("set", Some("1"))], "", "`set`: invalid type");
    check_row(&[post, ("file_field", Some("\"file\""))], "", "`file_field` sends the body's `audio_url` as a file, so `[endpoint.body]` must declare `audio_url`");
    check_row(
        &[
            post,
            ("file_field", Some("\"file\"")),
            ("mode", Some("\"upload\"")),
            ("upstream", None),
        ],
        "[endpoint.body]\naudio_url = { type = \"string\" }",
        "`file_field` sends a file upstream, but the row has no `upstream`",
    );
    check_row(
        &[("retention_days", Some("0"))],
        "",
        "`retention_days` must be at least 1",
    );
    check_row(
        &[("summary", Some("\"\"\"two\nlines\"\"\""))],
        "",
        "`summary` must be one line",
    );
}

#[test]
fn ids() {
    check_row(&[("id", Some("\"\""))], "", "`id` is empty");
    check_row(&[("id", Some("\"1st\""))], "", "must start with a letter");
    check_row(
        &[("id", Some("\"a b\""))],
        "",
        "must start with a letter and hold only letters",
    );
    check_row(&[("id", Some("\"routes\""))], "", "would generate `ROUTES`");
    check_row(
        &[("id", Some("\"route-count\""))],
        "",
        "would generate `ROUTE_COUNT`",
    );
}

#[test]
fn set_is_compact_json_in_written_order() {
    let t = parse_table(&table(&[&row(
        &[
            ("method", Some("\"POST\"")),
            (
                "set",
                Some(r#"{ z = false, a = "q\"uote", n = [1, 2.5, { k = true }], d = 1979-05-27 }"#),
            ),
        ],
        "",
    )]))
    .unwrap();
    // A TOML date becomes a JSON string.
    assert_eq!(
        t.rows[0].set.as_deref(),
        Some(r#"{"z":false,"a":"q\"uote","n":[1,2.5,{"k":true}],"d":"1979-05-27"}"#)
    );
}

#[test]
fn resolved_rows() {
    let t = parse_table(&table(&[&row(
        &[("method", Some("\"POST\"")), ("rename", Some("{ b = \"bb\", a = \"aa\" }")), ("upstream", Some(r#"{ base = "llm", method = "PUT", path = "/x/{thing_id}" }"#))],
        "[endpoint.body]\nzeta = { type = \"string\", required = true }\nalpha = { type = \"integer\", min = 1 }\n[endpoint.query]\nq = { type = \"string\" }",
    )]))
    .unwrap();
    let r = &t.rows[0];
    assert_eq!(r.path, "/api/v1/voice/things/{thing_id}");
    assert_eq!(r.params, ["thing_id"]);
    assert_eq!(r.static_name(), "THINGS_GET");
    assert_eq!(r.handler_name(), "handle_things_get");
    assert_eq!(
        r.body.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
        ["zeta", "alpha"]
    );
    assert_eq!(
        r.rename,
        [
            ("b".to_string(), "bb".to_string()),
            ("a".to_string(), "aa".to_string())
        ]
    );
    assert_eq!(r.summary, "");
    assert_eq!(r.auth.as_str(), "bearer");
    assert_eq!(r.errors.as_str(), "detail");
    let up = r.upstream.as_ref().unwrap();
    assert_eq!(
        (up.base.as_str(), up.method.as_str(), up.auth.as_str()),
        ("llm", "PUT", "bearer")
    );
    assert_eq!(
        t.listing(),
        [format!(
            "{:<6} {:<62} {:<20} {:<18} {}",
            "POST", "/api/v1/voice/things/{thing_id}", "proxy", "free", "-"
        )]
    );
}

/// `ROW_KEYS` (used for "did you mean") lists exactly the fields of the serde row.
#[test]
fn row_keys_match_the_serde_model() {
    use codegen_impl::table::RawEndpoint;
    use codegen_impl::validate::ROW_KEYS;
    use serde::Deserialize;
    let read = |key: &str| {
        let mut t = toml::Table::new();
        // A list of numbers: the wrong type for every key.
        t.insert(
            key.to_string(),
            toml::Value::Array(vec![toml::Value::Integer(1)]),
        );
        RawEndpoint::deserialize(toml::Value::Table(t))
            .unwrap_err()
            .to_string()
    };
    for key in ROW_KEYS {
        assert!(!read(key).contains("unknown field"), "{key}: {}", read(key));
    }
    let unknown = read("no_such_key");
    let listed = unknown.split("expected one of ").nth(1).unwrap();
    assert_eq!(listed.matches('`').count() / 2, ROW_KEYS.len(), "{unknown}");
}

#[test]
fn metering() {
    check_row(
        &[("metering", Some("\"per_request\""))],
        "",
        "metering `per_request` on a `free` route",
    );
    check_row(
        &[
            ("metering", Some("\"first_build\"")),
            ("billing", Some("\"searches\"")),
        ],
        "",
        "metering `first_build` needs billing `voice_subscription`",
    );
    check_row(
        &[("metering", Some("\"sometimes\""))],
        "",
        "unknown metering `sometimes`",
    );
    ok(&table(&[&row(
        &[
            ("metering", Some("\"first_build\"")),
            ("billing", Some("\"voice_subscription\"")),
        ],
        "",
    )]));
    // Defaults follow the billing unit.
    let t = parse_table(&table(&[&row(&[("billing", Some("\"searches\""))], "")])).unwrap();
    assert_eq!(t.rows[0].metering, Metering::PerRequest);
    let t = parse_table(&table(&[&row(
        &[("billing", Some("\"audio_seconds\""))],
        "",
    )]))
    .unwrap();
    assert_eq!(t.rows[0].metering, Metering::Measured);
    let t = parse_table(&table(&[&row(
        &[("billing", Some("\"voice_subscription\""))],
        "",
    )]))
    .unwrap();
    assert_eq!(t.rows[0].metering, Metering::None);
}

#[test]
fn resources_and_owner_checks() {
    let with_resources = |row_text: &str| {
        let mut t = table(&[row_text]);
        t.push_str("\n[resources]\nthing_id = \"thing\"\n");
        t
    };
    // A `[resources]` parameter is checked.
    let t = parse_table(&with_resources(&row(&[], ""))).unwrap();
    assert_eq!(
        t.rows[0].owner_checks,
        vec![("thing_id".to_string(), "thing".to_string())]
    );
    // The row's own `resource` names its last parameter when `[resources]` does not.
    let t = parse_table(&table(&[&row(&[("resource", Some("\"widget\""))], "")])).unwrap();
    assert_eq!(
        t.rows[0].owner_checks,
        vec![("thing_id".to_string(), "widget".to_string())]
    );
    assert_eq!(t.rows[0].resource.as_deref(), Some("widget"));
    // Nothing declared: nothing checked.
    let t = parse_table(&table(&[&row(&[], "")])).unwrap();
    assert!(t.rows[0].owner_checks.is_empty());
    check_row(
        &[("resource", Some("\"Bad Kind\""))],
        "",
        "`resource` `Bad Kind` must be lower-case letters and `_`",
    );
    let mut bad = table(&[&row(&[], "")]);
    bad.push_str("\n[resources]\nthing_id = 5\n");
    check(&bad, "[resources] `thing_id`: the kind must be a string");
}

#[test]
fn file_field_on_fields_rows_reads_fields_audio_url() {
    let extra = "[endpoint.body]\nfields = { type = \"object\", required = true }\n";
    ok(&table(&[&row(
        &[
            ("method", Some("\"POST\"")),
            ("mode", Some("\"fields\"")),
            ("file_field", Some("\"file\"")),
        ],
        extra,
    )]));
    // Other modes still need an `audio_url` body rule.
    check_row(
        &[
            ("method", Some("\"POST\"")),
            ("file_field", Some("\"file\"")),
        ],
        "",
        "`[endpoint.body]` must declare `audio_url`",
    );
}

#[test]
fn body_fields_named_in_resources_are_checked() {
    let extra = "[endpoint.body]\nvoice_uuid = { type = \"string\" }\n";
    let mut t = table(&[&row(&[("method", Some("\"POST\""))], extra)]);
    t.push_str("\n[resources]\nvoice_uuid = \"voice\"\n");
    let t = parse_table(&t).unwrap();
    assert_eq!(
        t.rows[0].owner_checks,
        vec![("voice_uuid".to_string(), "voice".to_string())]
    );
}

#[test]
fn capabilities() {
    let with_caps = |caps: &str| format!("{HEADER}{ROW}\n[capabilities]\n{caps}\n");
    ok(&with_caps("things = \"60/m\""));
    ok(&with_caps("things = \"off\""));
    for q in ["1/s", "600/h", "1/d", "4294967295/m"] {
        ok(&with_caps(&format!("things = \"{q}\"")));
    }
    let t = parse_table(&with_caps("things = \"600/h\"")).unwrap();
    assert_eq!(t.capabilities.len(), 1);
    assert_eq!(t.capabilities[0].name, "things");
    let q = t.capabilities[0].quota.unwrap();
    assert_eq!((q.count, q.per_secs), (600, 3600));
    let off = parse_table(&with_caps("things = \"off\"")).unwrap();
    assert_eq!(off.capabilities[0].quota, None);

    // Bad quotas, each on its own line; every one is reported.
    let text = with_caps(
        "things = \"60/w\"\nb = \"0/m\"\nc = \"60\"\nd = 60\ne = \"-1/m\"\nf = \"60 /m\"\ng = \"OFF\"\n\"h-i\" = \"1/m\"",
    );
    let errs = errors(&text);
    let rendered: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    let expect = [
        "[capabilities] `things`: quota `60/w`: unknown unit `w` (expected s, m, h or d)",
        "[capabilities] `b`: quota `0/m`: the count `0` must be a whole number from 1",
        "[capabilities] `c`: quota `60` must be `off` or `<count>/<unit>`",
        "[capabilities] `d`: the quota must be a string",
        "[capabilities] `e`: quota `-1/m`: the count `-1`",
        "[capabilities] `f`: quota `60 /m`: the count `60 `",
        "[capabilities] `g`: quota `OFF` must be `off` or",
        "[capabilities] `h-i`: a capability name must be an identifier",
    ];
    assert_eq!(errs.len(), expect.len(), "{rendered:#?}");
    for (e, x) in rendered.iter().zip(expect) {
        assert!(e.contains(x), "{e:?} does not contain {x:?}");
    }
    // A broken entry is declared: the row naming it says nothing more.
    assert!(errs.iter().all(|e| e.row.is_none()), "{rendered:#?}");
    let caps_line = text.lines().position(|l| l == "b = \"0/m\"").unwrap() + 1;
    assert_eq!(errs[1].line, Some(caps_line));

    // Undeclared, with a suggestion, on the row's `capability` line.
    let text = table(&[&row(&[("capability", Some("\"thing\""))], "")]);
    let errs = errors(&text);
    let rendered: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    assert_eq!(errs.len(), 2, "{rendered:#?}");
    let cap_line = text
        .lines()
        .position(|l| l == "capability = \"thing\"")
        .unwrap()
        + 1;
    assert_eq!(
        rendered[0],
        format!("line {cap_line}: row `things.get`: capability `thing` is not declared in `[capabilities]` (did you mean `things`?)")
    );
    // ... and `things` is then declared but unused.
    assert!(
        rendered[1]
            .contains("capability `things` is declared in `[capabilities]` but no row uses it"),
        "{rendered:#?}"
    );
    // No `[capabilities]` at all: each row says its capability is undeclared.
    check(
        &format!("{HEADER}{ROW}"),
        "capability `things` is not declared in `[capabilities]`",
    );
    check(
        &format!("capabilities = 3\n{HEADER}{ROW}"),
        "`capabilities` must be a table",
    );
    // Unused, alone.
    check(
        &with_caps("things = \"60/m\"\nspare = \"1/m\""),
        "capability `spare` is declared in `[capabilities]` but no row uses it",
    );
    // A row whose capability is unreadable might be the user: no "unused".
    check_row(&[("capability", Some("\"\""))], "", "`capability` is empty");
}

#[test]
fn job_kinds() {
    let get = row(
        &[
            ("id", Some("\"stt.get\"")),
            ("path", Some("\"/stt/{thing_id}\"")),
            ("mode", Some("\"job_get\"")),
            ("job", Some("\"stt\"")),
            ("mirror", Some("\"item.url\"")),
        ],
        "",
    );
    let t = parse_table(&table(&[&get, STT_SUBMIT])).unwrap();
    let kinds = t.job_kinds();
    assert_eq!(kinds.len(), 1);
    assert_eq!(kinds[0].kind, "stt");
    assert_eq!(kinds[0].submit.id, "stt.submit");
    assert_eq!(kinds[0].get.unwrap().id, "stt.get");
    assert_eq!(kinds[0].mirror(), Some("item.url"));

    // No submit row.
    let text = table(&[&get]);
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let job_line = text.lines().position(|l| l == "job = \"stt\"").unwrap() + 1;
    assert_eq!(
        errs[0].render(None),
        format!("line {job_line}: row `stt.get`: job kind `stt` has no `job_submit` row (it is named by `stt.get` (line 18)); each job kind needs exactly one")
    );
    // Two submit rows, two get rows.
    let submit2 = STT_SUBMIT
        .replace("stt.submit", "stt.submit2")
        .replace("\"/stt\"", "\"/stt2\"");
    let get2 = get
        .replace("stt.get", "stt.get2")
        .replace("/stt/{thing_id}", "/stt2/{thing_id}");
    check_all(
        &table(&[STT_SUBMIT, &get, &submit2, &get2]),
        &[
            "row `stt.submit2`: job kind `stt` already has a `job_submit` row, `stt.submit` (line 18); a job kind has exactly one",
            "row `stt.get2`: job kind `stt` already has a `job_get` row, `stt.get` (line 29); a job kind has at most one",
        ],
    );
    // A row whose mode is unreadable leaves the kind alone.
    check(
        &table(&[&get.replace("\"job_get\"", "\"job_gett\"")]),
        "unknown mode `job_gett`",
    );
}

#[test]
fn job_ceilings() {
    let billed = STT_SUBMIT.replace("billing = \"free\"", "billing = \"audio_seconds\"");
    // A billed job kind needs its ceiling, at its submit row.
    let text = table(&[&billed]);
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(
        errs[0].to_string(),
        "line 18: row `stt.submit`: job kind `stt` is billed: its submit needs a ceiling in `[job_ceilings]` (`stt = 3600`: the units it holds when the gateway cannot measure the job's input)"
    );
    let with = |entries: &str| format!("{text}\n[job_ceilings]\n{entries}\n");
    let t = parse_table(&with("stt = 3600")).unwrap();
    assert_eq!(t.job_ceilings, [("stt".to_string(), 3600)]);
    assert_eq!(t.job_ceiling("stt"), Some(3600));
    // Each entry is a whole number of units in range, of a billed job kind.
    check_all(
        &with("stt = 0\nstt2 = 60\n\"bad kind\" = 60"),
        &[
            "[job_ceilings] `stt`: the ceiling must be a whole number of units from 1 to 1000000",
            "[job_ceilings] `stt2`: `stt2` is no row's job kind (did you mean `stt`?)",
            "[job_ceilings] `bad kind`: a job kind is an identifier",
        ],
    );
    check(
        &with("stt = \"3600\""),
        "[job_ceilings] `stt`: the ceiling must be a whole number",
    );
    check(
        &format!("{}\n[job_ceilings]\nstt = 60\n", table(&[STT_SUBMIT])),
        "[job_ceilings] `stt`: the job kind is not billed (its `job_submit` row is `free`), so its submit holds nothing",
    );
    // A misspelt section is an unknown top-level key, and the kind still
    // has no ceiling.
    check_all(
        &format!("{text}\n[job_ceiling]\nstt = 60\n"),
        &[
            "job kind `stt` is billed",
            "unknown top-level key `job_ceiling` (did you mean `job_ceilings`?)",
        ],
    );
}

#[test]
fn generated_names_are_reserved() {
    for id in [
        "table",
        "capabilities",
        "job_kinds",
        "bases",
        "routes",
        "route.count",
    ] {
        check_row(
            &[("id", Some(&format!("\"{id}\"")))],
            "",
            "a name the generated module already uses",
        );
    }
}
