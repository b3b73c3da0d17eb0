//! The documentation's checks: `docs/configuration.md` is generated from the
//! code's own list of variables (`runtime::config::variables::VARIABLES`),
//! and that list and the variables the code reads are the same.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use runtime::config::variables::{Scope, VARIABLES};

use crate::harness::workspace_root;

const CONFIGURATION_PAGE: &str = "docs/configuration.md";

/// The page's sections: scope, title, what comes before the table.
const SECTIONS: &[(Scope, &str, &str)] = &[
    (
        Scope::Gateway,
        "The gateway",
        "Read by `gateway serve`, `gateway demo` and every other subcommand: \
         all from the environment, every subcommand the same variables. A \
         value that does not parse stops start-up with an error naming the \
         variable.\n\nBesides these, a provider of the providers file names the \
         variable holding its key (`api_key_env`, see [General \
         gateway](models.md#general-gateway)) and a sign-in provider the one \
         holding its client secret (`client_secret_env`, see [Sign-in with \
         OpenID Connect](accounts.md#sign-in-with-openid-connect)): those are \
         read by the names the files give. The OpenTelemetry SDK reads its \
         usual `OTEL_*` variables too (see `OTEL_EXPORTER_OTLP_ENDPOINT`).",
    ),
    (
        Scope::Simulator,
        "The provider simulator",
        "Read by `provider-sim` (`cargo run --bin provider-sim`); each is also \
         the command-line option named beside it.",
    ),
    (
        Scope::Tests,
        "Tests and tooling",
        "Read by the tests only (see [CONTRIBUTING.md](../CONTRIBUTING.md#the-tests)).",
    ),
];

/// Markdown of one cell: the list's text with every run of white space
/// (its source lines' wrapping) made one space.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `docs/configuration.md` as the list gives it.
fn configuration_page() -> String {
    let mut page = String::from(
        "# Configuration\n\n\
         <!-- Generated from runtime/src/config/variables/ (a file per subject) by \
         tests/it/docs.rs: edit the rows there, then run\n     \
         UPDATE_DOCS=1 cargo test --workspace --exclude sim --locked --test it -- docs -->\n\n\
         Every environment variable the workspace reads, with its default and \
         what it does.\n",
    );
    for (scope, title, intro) in SECTIONS {
        page += &format!("\n## {title}\n\n{intro}\n\n");
        page += "| Name | Default | Purpose |\n|---|---|---|\n";
        for v in VARIABLES.iter().filter(|v| v.scope == *scope) {
            page += &format!(
                "| `{}` | {} | {} |\n",
                v.name,
                cell(v.default),
                cell(v.meaning)
            );
        }
    }
    page
}

#[test]
fn configuration_page_is_generated_from_the_list() {
    let path = workspace_root().join(CONFIGURATION_PAGE);
    let want = configuration_page();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{CONFIGURATION_PAGE} differs from runtime::config::variables::VARIABLES: \
         run UPDATE_DOCS=1 cargo test --workspace --exclude sim --locked --test it -- docs"
    );
}

#[test]
fn every_variable_is_listed_once_with_a_meaning() {
    let mut seen = BTreeSet::new();
    for v in VARIABLES {
        assert!(seen.insert(v.name), "{} is listed twice", v.name);
        assert!(!cell(v.meaning).is_empty(), "{}: no meaning", v.name);
        assert!(!cell(v.default).is_empty(), "{}: no default", v.name);
        for text in [v.default, v.meaning] {
            assert!(
                !text.replace("\\|", "").contains('|'),
                "{}: an unescaped | breaks the table",
                v.name
            );
        }
    }
}

/// String literals of the code that look like a variable's name but are
/// not a variable the workspace reads, each with its reason.
const NOT_READ: &[(&str, &str)] = &[
    // Gemini's error statuses and finish reasons, WAV sample formats.
    ("API_KEY_INVALID", "a Gemini error reason"),
    ("DEADLINE_EXCEEDED", "a Gemini error status"),
    ("INVALID_ARGUMENT", "a Gemini error status"),
    ("NOT_FOUND", "a Gemini error status"),
    ("PERMISSION_DENIED", "a Gemini error status"),
    ("RESOURCE_EXHAUSTED", "a Gemini error status"),
    ("MAX_TOKENS", "a Gemini finish reason"),
    ("IMAGE_SAFETY", "a Gemini finish reason"),
    ("PROHIBITED_CONTENT", "a Gemini finish reason"),
    ("ASR_PAYMENT_REQUIRED", "a Deepgram error code"),
    ("INTERNAL_SERVER_ERROR", "a Deepgram error code"),
    ("INVALID_AUTH", "a Deepgram error code"),
    ("TOO_MANY_REQUESTS", "a Deepgram error code"),
    ("INSUFFICIENT_PERMISSIONS", "a Deepgram error code"),
    ("PCM_8", "a WAV sample format's name"),
    ("PCM_16", "a WAV sample format's name"),
    ("PCM_24", "a WAV sample format's name"),
    ("PCM_32", "a WAV sample format's name"),
    // Names of generated items and of a command-line value.
    ("ROUTE_COUNT", "an item the route table generates"),
    ("JOB_KINDS", "an item the route table generates"),
    ("THINGS_GET", "a generated route's static name in codegen's tests"),
    ("REQ_PER_S", "gateway-bench's --rate value name"),
    // Cargo's, read at build time by env!().
    ("CARGO_MANIFEST_DIR", "Cargo's, at build time"),
    ("CARGO_TARGET_TMPDIR", "Cargo's, at build time"),
    ("CARGO_PKG_VERSION", "Cargo's, at build time (the virtual MCP server's version)"),
    // The system's, or set for programs the tests and the bench start.
    ("PATH", "the system's search path: tests find chromium, redis-server and PostgreSQL's binaries in it"),
    ("NO_COLOR", "set on child processes to keep their logs plain; read by tracing-subscriber"),
    ("GATEWAY_BASE_URL", "set for the Python SDK checks (tests/anthropic_sdk/)"),
    ("GATEWAY_KEY", "set for the Python SDK checks (tests/anthropic_sdk/)"),
    ("GATEWAY_MODEL", "set for the Python SDK checks (tests/anthropic_sdk/)"),
    ("GATEWAY_EMBED_MODEL", "set for the Python SDK check of the Gemini door (tests/genai_sdk/)"),
    ("GATEWAY_FALLBACK", "set for the Python SDK check of the Responses API (tests/openai_sdk/)"),
    ("GATEWAY_SIM_URL", "set for the Python SDK check of the Responses API (tests/openai_sdk/)"),
    ("GATEWAY_FAULT", "set for the Python SDK check of the Responses API (tests/openai_sdk/)"),
    ("BATCH_LINES", "set for the Python SDK check of the Batch API (tests/openai_sdk/batches.py)"),
    ("GATEWAY_MCP_URL", "set for the MCP SDK check (tests/mcp_sdk/client.py)"),
    ("MCP_STEP", "set for the MCP SDK check (tests/mcp_sdk/client.py)"),
    ("MCP_TEST_TOKEN", "set for the tests' MCP servers (tests/mcp_sdk/server.py)"),
    ("GW_IT_MCP_AUTH", "the tests' MCP servers file's headers_env"),
    ("GH_AUTH", "a headers_env in an example MCP servers file"),
    ("GITHUB_MCP_AUTH", "a headers_env in the documented MCP servers file"),
    ("GW_TEST_UNSET_MCP_VAR", "a tests' headers_env left unset"),
    ("GATEWAY_BIN", "set for the accounts probe's script"),
    ("DASHBOARD_URL", "set for the dashboard's browser script (tests/dashboard/)"),
    ("DASHBOARD_USER", "set for the dashboard's browser script"),
    ("DASHBOARD_PASSWORD", "set for the dashboard's browser script"),
    ("DASHBOARD_OUT", "set for the dashboard's browser script"),
    ("DASHBOARD_BUY", "set for the dashboard's browser script"),
    // Names a providers file or a sign-in providers file gives (api_key_env,
    // client_secret_env): read by the name the file gives, not a fixed one.
    ("SIM_LLM_KEY", "an api_key_env in an example providers file"),
    ("DEMO_LLM_KEY", "the demo's providers file's api_key_env"),
    ("BENCH_LLM_KEY", "gateway-bench's providers file's api_key_env"),
    ("GW_IT_SIM_LLM_KEY", "the tests' providers file's api_key_env"),
    ("GW_IT_CHECK_KEY", "check-config's test providers file's api_key_env"),
    ("GW_IT_RELOAD_SECRET", "the reload test's sign-in providers file's client_secret_env"),
    ("GW_IT_UNSET_PROVIDER_KEY", "a tests' api_key_env left unset"),
    ("GW_TEST_UNSET_KEY_VAR", "a tests' api_key_env left unset"),
    ("GOOGLE_CLIENT_SECRET", "a client_secret_env in an example sign-in file"),
    ("IDP_SECRET", "a tests' client_secret_env"),
    ("IDP_CLIENT_SECRET", "a tests' client_secret_env"),
    ("UNSET_VAR", "a tests' client_secret_env left unset"),
];

/// Every `.rs` file of the workspace (the target directory and hidden
/// directories left out), relative to the root, with its text.
fn rust_files() -> Vec<(String, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" && name != "node_modules" {
                    walk(root, &path, out);
                }
            } else if name.ends_with(".rs") {
                let rel = path.strip_prefix(root).unwrap().to_string_lossy();
                out.push((rel.into_owned(), std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let root = workspace_root();
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out.sort();
    out
}

/// The names of variables a piece of code reads or names, in every form:
/// a string literal that looks like one (`"GATEWAY_ADDR"`, whether it is
/// read at once or through a constant), a literal of any upper-case name
/// passed to `env::var`, `env::var_os`, `env!`, `option_env!` or clap's
/// `env = `, and `RUST_LOG` for `EnvFilter`'s `from_default_env`.
fn names_in(code: &str) -> BTreeSet<String> {
    let b = code.as_bytes();
    let upper = |s: &str| {
        !s.is_empty()
            && s.as_bytes()[0].is_ascii_uppercase()
            && s.bytes()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
    };
    let mut out = BTreeSet::new();
    let mut i = 0;
    while let Some(at) = code[i..].find('"').map(|k| k + i) {
        let end = code[at + 1..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(code.len(), |k| k + at + 1);
        let word = &code[at + 1..end];
        if end < b.len() && b[end] == b'"' && upper(word) {
            let variable_like =
                word.contains('_') && !word.starts_with('_') && !word.ends_with('_');
            let before = code[..at].trim_end();
            let passed = [
                "env::var(",
                "env::var_os(",
                "env!(",
                "option_env!(",
                "env =",
            ]
            .iter()
            .any(|p| before.ends_with(p));
            if variable_like || passed {
                out.insert(word.to_owned());
            }
        }
        i = at + 1;
    }
    if code.contains("from_default_env") {
        out.insert("RUST_LOG".to_owned());
    }
    out
}

/// Whose code a file is, for the check that a listed variable is read by
/// what the list says reads it.
fn reader_of(rel: &str) -> Option<Scope> {
    let gateway = [
        "base/src/",
        "store/src/",
        "adapters/src/",
        "models/src/",
        "runtime/src/",
        "app/src/",
        "server/src/",
    ];
    if gateway.iter().any(|p| rel.starts_with(p)) {
        Some(Scope::Gateway)
    } else if rel.starts_with("sim/src/") {
        Some(Scope::Simulator)
    } else {
        None
    }
}

#[test]
fn the_list_names_every_variable_the_code_reads_and_no_other() {
    // The list's files: its module and the modules of its subjects.
    let list = Path::new("runtime/src/config/variables");
    let excluded: BTreeMap<&str, &str> = NOT_READ.iter().copied().collect();
    let listed: BTreeMap<&str, Scope> = VARIABLES.iter().map(|v| (v.name, v.scope)).collect();
    // name → the scopes whose code names it (None: tests, bench, codegen)
    let mut found: BTreeMap<String, BTreeSet<Option<Scope>>> = BTreeMap::new();
    // The names outside this file, whose NOT_READ names them all.
    let mut elsewhere = BTreeSet::new();
    let (mut files, mut list_files) = (0, 0);
    for (rel, text) in rust_files() {
        if Path::new(&rel).with_extension("").starts_with(list) {
            list_files += 1;
            continue;
        }
        files += 1;
        for name in names_in(&text) {
            if rel != "tests/it/docs.rs" {
                elsewhere.insert(name.clone());
            }
            found.entry(name).or_default().insert(reader_of(&rel));
        }
    }
    assert!(files > 100, "only {files} .rs files found");
    assert!(list_files > 1, "the list's files are not under {list:?}");
    for name in found.keys() {
        assert!(
            listed.contains_key(name.as_str()) || excluded.contains_key(name.as_str()),
            "the code names the variable {name}, which runtime::config::variables::VARIABLES \
             does not list (list it, or say in NOT_READ why it is no variable of ours)"
        );
    }
    for (name, scope) in &listed {
        assert!(
            !excluded.contains_key(name),
            "{name}: both listed and excluded"
        );
        let readers = found.get(*name).cloned().unwrap_or_default();
        let read = match scope {
            Scope::Tests => !readers.is_empty(),
            s => readers.contains(&Some(*s)),
        };
        assert!(
            read,
            "{name} is listed ({scope:?}) but no code of that scope reads it"
        );
    }
    for name in excluded.keys() {
        assert!(
            elsewhere.contains(*name),
            "NOT_READ names {name}, which no code names"
        );
    }
}

#[test]
fn the_scan_finds_every_form_of_a_read() {
    // Written with ' for " so that the scan of this file does not see them.
    let code = r#"
        const A: &str = 'GATEWAY_ONE';
        let p = std::env::var('PATH');
        let h = std::env::var_os('HOME');
        #[arg(long, env = 'SIMPLE')]
        let d = env!('CARGO_X');
        let f = EnvFilter::try_from_default_env();
        let not = 'Hello'; let alsonot = 'ABC'; let x = '_A_'; let y = 'A_b';
    "#
    .replace('\'', "\"");
    let names: Vec<String> = names_in(&code).into_iter().collect();
    assert_eq!(
        names.join(" "),
        "CARGO_X GATEWAY_ONE HOME PATH RUST_LOG SIMPLE"
    );
}

/// The Markdown files whose relative links must resolve.
fn markdown_files() -> Vec<String> {
    let mut files: Vec<String> = [
        "README.md",
        "CONTRIBUTING.md",
        "ARCHITECTURE.md",
        "bench/RESULTS.md",
    ]
    .map(str::to_owned)
    .into();
    for entry in std::fs::read_dir(workspace_root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    files.sort();
    files
}

/// The text outside fenced code blocks, with inline code spans blanked.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if !fenced {
            out.push_str(line);
        }
        out.push('\n');
    }
    out.split('`')
        .enumerate()
        .map(|(i, part)| if i % 2 == 0 { part } else { "" })
        .collect()
}

/// GitHub's anchor of a heading: lower case, every character but letters,
/// digits, spaces, `-` and `_` dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings; a repeated one gets `-1`,
/// `-2`, ... as on GitHub.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let hashes = line.len() - line.trim_start_matches('#').len();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim_end_matches('#'));
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// Every link target of a Markdown text: `[x](target)` and `![x](target)`.
fn link_targets(text: &str) -> Vec<String> {
    let text = prose(text);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find([')', ' ', '\n']).unwrap_or(rest.len());
        out.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    out
}

#[test]
fn every_relative_link_of_the_docs_resolves() {
    let root = workspace_root();
    let mut checked = 0;
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(root.join(&file)).unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = if path.is_empty() {
                root.join(&file)
            } else {
                root.join(&file).parent().unwrap().join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{file}: {target}: no such file"));
            } else if !anchor.is_empty() {
                let linked = std::fs::read_to_string(&resolved).unwrap_or_default();
                if !anchors(&linked).contains(anchor) {
                    broken.push(format!("{file}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} relative links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn links_and_anchors_are_read_as_github_reads_them() {
    let page = "# Buying credits (Stripe Checkout)\n## A\n## A\n```\n# not a heading\n```\n\
                see [x](a.md#b), `[not](c.md)`, ![img](d.png) and [y](#a-1).\n";
    let anchors = anchors(page);
    let want = ["a", "a-1", "buying-credits-stripe-checkout"].map(str::to_owned);
    assert_eq!(anchors, want.into_iter().collect::<BTreeSet<_>>());
    assert_eq!(link_targets(page), ["a.md#b", "d.png", "#a-1"]);
    assert_eq!(
        slug("2026-11-25, round 2 (#29), `a462d20`: A/B experiments"),
        "2026-11-25-round-2-29-a462d20-ab-experiments"
    );
}
