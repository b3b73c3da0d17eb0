//! The architecture invariants of ARCHITECTURE.md that a test can check,
//! checked on the source tree itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::harness::workspace_root;

/// Every `.rs` file under `dir`, relative to `dir`, with its text.
fn sources(dir: &str) -> Vec<(String, String)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(base, &path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let base = workspace_root().join(dir);
    let mut out = Vec::new();
    walk(&base, &base, &mut out);
    out.sort();
    out
}

/// The code of a file, read whole: without comments and without its test
/// modules (`#[cfg(test)] mod x { ... }` blocks and `#[cfg(test)] mod x;`
/// declarations). String literals are kept (the SQL and key checks read
/// them); a comment's line stays, empty.
fn code(text: &str) -> String {
    let text = strip_comments(text);
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some((start, end)) = next_test_module(rest) {
        out.push_str(&rest[..start]);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The names of the test modules a file declares (`#[cfg(test)] mod x;`),
/// whose files are test code.
fn test_module_files(text: &str) -> Vec<String> {
    let text = strip_comments(text);
    let mut names = Vec::new();
    let mut rest = text.as_str();
    while let Some((start, end)) = next_test_module(rest) {
        let item = &rest[start..end];
        if item.trim_end().ends_with(';') {
            let name = item
                .trim_end()
                .trim_end_matches(';')
                .split_whitespace()
                .last();
            names.extend(name.map(str::to_owned));
        }
        rest = &rest[end..];
    }
    names
}

/// The byte range of the next `#[cfg(test)] [pub] mod x { ... }` or
/// `#[cfg(test)] [pub] mod x;` in comment-free text.
fn next_test_module(text: &str) -> Option<(usize, usize)> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(i) = text[from..].find("#[cfg(test)]") {
        let start = from + i;
        from = start + "#[cfg(test)]".len();
        let item = text[from..].trim_start();
        let item = item
            .strip_prefix("pub(crate)")
            .or(item.strip_prefix("pub"))
            .unwrap_or(item)
            .trim_start();
        let Some(named) = item.strip_prefix("mod ") else {
            continue;
        };
        let tail = named.trim_start().trim_start_matches(ident).trim_start();
        let at = text.len() - tail.len();
        match tail.chars().next() {
            Some(';') => return Some((start, at + 1)),
            Some('{') => return Some((start, matching_brace(text, at))),
            _ => {}
        }
    }
    None
}

/// The index just past the brace closing the one at `open`, reading string
/// and character literals as such.
fn matching_brace(text: &str, open: usize) -> usize {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = open;
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            b'"' | b'r' | b'b' | b'\'' => {
                if let Some(end) = literal_end(b, i) {
                    i = end;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// When a string, raw string or character literal starts at `i`: the index
/// just past it.
fn literal_end(b: &[u8], i: usize) -> Option<usize> {
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    if i > 0 && ident(b[i - 1]) {
        return None; // inside an identifier (`for`, `br`, `x'`)
    }
    let mut j = i;
    if b[j] == b'b' {
        j += 1;
    }
    if j < b.len() && b[j] == b'r' {
        // r"..." / r#"..."#
        let mut k = j + 1;
        let mut hashes = 0;
        while k < b.len() && b[k] == b'#' {
            hashes += 1;
            k += 1;
        }
        if k >= b.len() || b[k] != b'"' {
            return None;
        }
        let close: Vec<u8> = std::iter::once(b'"')
            .chain(std::iter::repeat_n(b'#', hashes))
            .collect();
        let body = &b[k + 1..];
        let end = body
            .windows(close.len())
            .position(|w| w == close.as_slice())?;
        return Some(k + 1 + end + close.len());
    }
    match b.get(j) {
        Some(b'"') => {
            let mut k = j + 1;
            while k < b.len() {
                match b[k] {
                    b'\\' => k += 2,
                    b'"' => return Some(k + 1),
                    _ => k += 1,
                }
            }
            Some(b.len())
        }
        Some(b'\'') => {
            // 'x', '\n', '\'', '\u{..}'; a lifetime ('a) is no literal.
            if b.get(j + 1) == Some(&b'\\') {
                let close = b.get(j + 3..)?.iter().position(|&c| c == b'\'')?;
                return Some(j + 3 + close + 1);
            }
            let c = String::from_utf8_lossy(b.get(j + 1..(j + 5).min(b.len()))?)
                .chars()
                .next()?;
            let len = if c == char::REPLACEMENT_CHARACTER {
                1
            } else {
                c.len_utf8()
            };
            (b.get(j + 1 + len) == Some(&b'\'')).then_some(j + 2 + len)
        }
        _ => None,
    }
}

/// The text without `//` and `/* */` comments (string literals kept).
fn strip_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == b'\n' {
                        out.push(b'\n');
                    }
                    i += 1;
                }
            }
            continue;
        }
        if matches!(b[i], b'"' | b'r' | b'b' | b'\'') {
            if let Some(end) = literal_end(b, i) {
                out.extend_from_slice(&b[i..end]);
                i = end;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).expect("comments end on character boundaries")
}

/// `a/b.rs` → `a::b`, `a/mod.rs` → `a`, `lib.rs` → ``.
fn module_of(rel: &str) -> String {
    let m = rel.trim_end_matches(".rs").replace('/', "::");
    let m = m
        .strip_suffix("::mod")
        .map(str::to_owned)
        .unwrap_or(m.clone());
    if m == "lib" || m == "main" {
        String::new()
    } else {
        m
    }
}

/// Every path a piece of code names from `at` on, as a use tree: `a::b`,
/// `a::{b, c::{d, self}}`, each as its segments (`self` in a group stands
/// for the group's prefix; `*` ends a path).
fn use_tree(code: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let b = code.as_bytes();
    let mut i = 0;
    let mut path = prefix;
    loop {
        let ws = code[i..].len() - code[i..].trim_start().len();
        i += ws;
        if b.get(i) == Some(&b'{') {
            i += 1;
            loop {
                let ws = code[i..].len() - code[i..].trim_start().len();
                i += ws;
                match b.get(i) {
                    Some(b'}') => return i + 1,
                    Some(b',') => i += 1,
                    None => return i,
                    _ => {
                        let used = use_tree(&code[i..], path.clone(), out);
                        if used == 0 {
                            // Not a path (`as x`, stray text): skip a character.
                            i += 1;
                        } else {
                            i += used;
                        }
                    }
                }
            }
        }
        let name: String = code[i..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            out.push(path);
            return i;
        }
        i += name.len();
        if name != "self" {
            path.push(name);
        }
        if code[i..].starts_with("::") {
            i += 2;
        } else {
            out.push(path);
            return i;
        }
    }
}

/// The modules of the crate under `dir` a file's code names: `crate::`,
/// `super::` and `self::` paths, their groups, and in the crate root
/// (`lib.rs`) root-relative paths. A path naming an item of the crate root
/// (`crate::Gateway`) names `lib.rs` (module ``).
fn imports(me: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let here: Vec<String> = if me.is_empty() {
        Vec::new()
    } else {
        me.split("::").map(str::to_owned).collect()
    };
    let b = code.as_bytes();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !code.is_char_boundary(i) {
            i += 1; // inside a character of a literal that is not ASCII
            continue;
        }
        let boundary =
            i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b':');
        let rest = &code[i..];
        if boundary && rest.starts_with("crate::") {
            i += "crate::".len();
            i += use_tree(&code[i..], Vec::new(), &mut paths);
        } else if boundary && (rest.starts_with("super::") || rest.starts_with("self::")) {
            let mut at = here.clone();
            let mut j = i;
            loop {
                if code[j..].starts_with("super::") {
                    at.pop();
                    j += "super::".len();
                } else if code[j..].starts_with("self::") {
                    j += "self::".len();
                } else {
                    break;
                }
            }
            i = j + use_tree(&code[j..], at, &mut paths);
        } else if boundary && me.is_empty() {
            // The crate root names its modules without `crate::`.
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty()
                && modules.contains(&name)
                && code[i + name.len()..].starts_with("::")
            {
                i += name.len() + 2;
                i += use_tree(&code[i..], vec![name], &mut paths);
            } else {
                i += name.len().max(1);
            }
        } else {
            i += 1;
        }
    }
    let mut out = BTreeSet::new();
    for path in paths {
        // The longest module prefix of the path is the file it names; none: the root.
        let mut parts = path;
        let owner = loop {
            let m = parts.join("::");
            if modules.contains(&m) || parts.is_empty() {
                break m;
            }
            parts.pop();
        };
        // A file naming itself, or a child naming its own parent, does not
        // count (the root is no such parent: loops through it count).
        if owner != me && (owner.is_empty() || !me.starts_with(&format!("{owner}::"))) {
            out.insert(owner);
        }
    }
    out
}

/// The files of `runtime/src` that are not test code, as module → code, and
/// the imports between them (module → modules it names).
fn runtime_graph() -> (BTreeMap<String, String>, BTreeMap<String, BTreeSet<String>>) {
    let files = sources("runtime/src");
    let mut test_files = BTreeSet::new();
    for (rel, text) in &files {
        let me = module_of(rel);
        for name in test_module_files(text) {
            test_files.insert(if me.is_empty() {
                name
            } else {
                format!("{me}::{name}")
            });
        }
    }
    let is_test = |m: &str| {
        test_files
            .iter()
            .any(|t| m == t || m.starts_with(&format!("{t}::")))
    };
    let code_of: BTreeMap<String, String> = files
        .iter()
        .map(|(rel, text)| (module_of(rel), code(text)))
        .filter(|(m, _)| !is_test(m))
        .collect();
    let modules: BTreeSet<String> = files.iter().map(|(rel, _)| module_of(rel)).collect();
    let edges = code_of
        .iter()
        .map(|(m, code)| (m.clone(), imports(m, code, &modules)))
        .collect();
    (code_of, edges)
}

#[test]
fn layout_reads_paths_the_way_the_compiler_does() {
    let modules: BTreeSet<String> = ["", "a", "a::b", "a::c", "d", "d::e"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let names = |me: &str, src: &str| -> Vec<String> {
        imports(me, &code(src), &modules).into_iter().collect()
    };
    assert_eq!(names("a::b", "use super::c::X;"), ["a::c"]);
    assert_eq!(names("a::b", "use super::{c, d};"), ["a::c"]);
    assert_eq!(
        names("a", "use self::b::Y; fn f() { super::d::e::g() }"),
        ["a::b", "d::e"]
    );
    assert_eq!(
        names("d", "use crate::{a::{b::Z, c}, Top};"),
        ["", "a::b", "a::c"]
    );
    assert_eq!(names("", "pub use a::b::X; pub mod d;"), ["a::b"]);
    assert_eq!(
        names("a::c", "// crate::d\nlet s = \"/* crate::d::e */\";"),
        ["d::e"]
    );
    let text = "use crate::d;\n#[cfg(test)]\nmod tests {\n    use crate::a; let s = \"}\"; let c = '}';\n}\nuse crate::a::b;\n#[cfg(test)]\nmod more;\nfn z() {}\n";
    let kept = code(text);
    assert_eq!(kept.lines().count(), 5, "{kept}");
    assert!(kept.contains("use crate::a::b;") && kept.contains("fn z()"));
    assert!(!kept.contains("let s") && !kept.contains("mod more"));
    assert_eq!(test_module_files(text), ["more"]);
}

#[test]
fn runtime_files_import_each_other_in_no_circle() {
    let (_, edges) = runtime_graph();
    // Depth-first search for a back edge.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_owned(), 1);
        stack.push(m.to_owned());
        for next in edges.get(m).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|s| s == next).unwrap();
                    let mut circle = stack[start..].to_vec();
                    circle.push(next.clone());
                    return Some(circle);
                }
                0 => {
                    if let Some(c) = visit(next, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in edges.keys() {
        if state.get(m.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(circle) = visit(m, &edges, &mut state, &mut Vec::new()) {
                let named: Vec<&str> = circle
                    .iter()
                    .map(|m| if m.is_empty() { "lib.rs" } else { m.as_str() })
                    .collect();
                panic!("runtime/src imports in a circle: {}", named.join(" -> "));
            }
        }
    }
}

/// The floors of `runtime/src`, lowest first (ARCHITECTURE.md, "Layers"):
/// a module imports from its own floor or below. A module's floor is that
/// of its top module.
const FLOORS: &[(&str, &[&str])] = &[
    (
        "leaves",
        &[
            "spec",
            "body",
            "billing",
            "signing",
            "secret_file",
            "telemetry",
            "traces",
            "audio",
            "net",
            "media",
            "watchdog",
            "access",
            "spool",
            "tls",
        ],
    ),
    (
        "adapters",
        &[
            "errors",
            "store",
            "objects",
            "cluster",
            "upstream",
            "auth",
            "ratelimit",
            "mail",
            "oidc",
            "stripe",
        ],
    ),
    (
        "services",
        &[
            "services",
            "config",
            "instance",
            "ctx",
            "owners",
            "owner_cache",
            "shape",
            "validate",
            "progress",
            "mirror",
            "generated",
            "fetch",
            "callbacks",
            "credits",
            "budgets",
            "job_bound",
            "bounds",
            "relay",
            "messages_api",
            "streams",
            "videos",
            "providers",
            "routing",
            "cost",
            "usage_tail",
            "cache",
        ],
    ),
    ("modes", &["modes"]),
    (
        "pipeline and tasks",
        &[
            "pipeline",
            "router",
            "server",
            "dashboard",
            "follower",
            "retention",
            "reconcile",
        ],
    ),
    ("root", &["", "__private", "start"]),
];

/// The imports from a lower floor to a higher one that are allowed, each
/// with its reason (also in ARCHITECTURE.md). At most two.
const UPWARD: &[(&str, &str, &str)] = &[];

#[test]
fn runtime_layers_import_downward_only() {
    assert!(UPWARD.len() <= 2, "at most two upward imports");
    let floor = |m: &str| -> (usize, &str) {
        let top = m.split("::").next().unwrap();
        FLOORS
            .iter()
            .enumerate()
            .find(|(_, (_, ms))| ms.contains(&top))
            .map(|(i, (name, _))| (i, *name))
            .unwrap_or_else(|| {
                panic!("runtime/src module `{m}` stands on no floor of layout::FLOORS")
            })
    };
    let (_, edges) = runtime_graph();
    let mut upward = Vec::new();
    for (from, tos) in &edges {
        for to in tos {
            let (f, f_name) = floor(from);
            let (t, t_name) = floor(to);
            if t > f && !UPWARD.iter().any(|(a, b, _)| a == from && b == to) {
                upward.push(format!("{from} ({f_name}) -> {to} ({t_name})"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports from a lower floor to a higher one:\n{}",
        upward.join("\n")
    );
    for (from, to, why) in UPWARD {
        assert!(
            edges.get(*from).is_some_and(|t| t.contains(*to)),
            "layout::UPWARD lists {from} -> {to} ({why}), which no longer exists: drop it"
        );
    }
}

#[test]
fn modes_never_import_a_sibling_mode() {
    for (rel, text) in sources("runtime/src/modes") {
        if rel == "mod.rs" {
            continue;
        }
        let code = code(&text);
        assert!(
            !code.contains("crate::modes::") && !code.contains("super::super"),
            "modes/{rel} reaches into another mode"
        );
        for (i, _) in code.match_indices("super::") {
            let name: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // `common.rs` holds what several modes share; it is no mode.
            assert!(
                name == "common"
                    || !Path::new(
                        &workspace_root()
                            .join("runtime/src/modes")
                            .join(format!("{name}.rs"))
                    )
                    .exists(),
                "modes/{rel} imports the sibling mode {name}"
            );
        }
    }
}

/// The gateway's own crates: the runtime, the start-up crate, the binary.
const GATEWAY_SOURCES: [&str; 7] = [
    "base/src",
    "store/src",
    "adapters/src",
    "models/src",
    "runtime/src",
    "app/src",
    "server/src",
];

/// SQL lives in `runtime/src/store/`: no other file of the gateway (the
/// runtime, the start-up crate `app`, the binary `server`) holds any.
#[test]
fn only_store_speaks_sql() {
    let files = GATEWAY_SOURCES.into_iter().flat_map(|dir| {
        sources(dir)
            .into_iter()
            .map(move |(rel, t)| (format!("{dir}/{rel}"), t))
    });
    for (rel, text) in files {
        if rel.starts_with("store/src/") {
            continue;
        }
        let code = code(&text);
        assert!(!code.contains("rusqlite"), "{rel} uses rusqlite");
        for kw in [
            "\"SELECT ",
            "\"INSERT ",
            "\"UPDATE ",
            "\"DELETE FROM",
            "\"CREATE TABLE",
        ] {
            assert!(!code.contains(kw), "{rel} holds SQL ({kw})");
        }
    }
}

#[test]
fn ratelimit_names_no_capability() {
    let capabilities: BTreeSet<&str> = server::routes::TABLE
        .capabilities
        .iter()
        .map(|c| c.name)
        .collect();
    assert!(
        capabilities.contains("tts"),
        "the table's capabilities are generated"
    );
    for (rel, text) in sources("adapters/src/ratelimit") {
        if rel.ends_with("tests.rs") {
            continue; // unit tests use a capability table of their own
        }
        let code = code(&text);
        for c in &capabilities {
            assert!(
                !code.contains(&format!("\"{c}\"")),
                "ratelimit/{rel} names the capability {c}"
            );
        }
    }
}

#[test]
fn only_upstream_presents_the_provider_key() {
    // The runtime's crates (the first five of GATEWAY_SOURCES).
    for (rel, text) in GATEWAY_SOURCES[..5].iter().flat_map(|dir| {
        sources(dir)
            .into_iter()
            .map(move |(rel, text)| (format!("{dir}/{rel}"), text))
    }) {
        if rel.starts_with("adapters/src/upstream/") || rel == "runtime/src/config.rs" {
            continue;
        }
        let code = code(&text);
        assert!(
            !code.contains("provider_api_key")
                && !code.contains("x-access-token")
                && !code.contains("Token token="),
            "{rel} handles the upstream credential"
        );
    }
}

#[test]
fn files_stay_small() {
    for (dir, limit) in [
        ("base/src", 700),
        ("store/src", 700),
        ("adapters/src", 700),
        ("models/src", 700),
        ("runtime/src", 700),
        ("app/src", 700),
        ("server/src", 700),
        ("codegen/impl/src", 900),
        ("sim/src", 700),
    ] {
        for (rel, text) in sources(dir) {
            if rel.ends_with("tests.rs") {
                continue; // a test module of its own
            }
            let lines = code(&text).lines().count();
            assert!(
                lines <= limit,
                "{dir}/{rel}: {lines} lines of code (limit {limit})"
            );
        }
    }
}

/// Records are committed by the pipeline's record phase (`Store::commit`,
/// `Store::commit_unflushed`, in `pipeline.rs` only) or through the one door
/// for everything else, `Store::commit_outside_record_phase`, whose callers
/// and reasons are listed here: a new caller is a decision, made here and in
/// ARCHITECTURE.md.
#[test]
fn records_commit_through_one_door() {
    const DOOR: &str = ".commit_outside_record_phase(";
    // file → (calls of the door, the reasons it names)
    let expected: BTreeMap<&str, (usize, Vec<&str>)> = [
        ("runtime/src/credits.rs", (1, vec!["Hold"])),
        ("runtime/src/relay.rs", (1, vec!["StreamSettlement"])),
        ("runtime/src/videos.rs", (2, vec!["VideoJobEnd"])),
        (
            "runtime/src/modes/media_files.rs",
            (1, vec!["UploadedAsset"]),
        ),
        ("runtime/src/modes/uploads.rs", (1, vec!["UploadedAsset"])),
        ("runtime/src/mirror.rs", (1, vec!["MirroredCopy"])),
        ("runtime/src/follower.rs", (1, vec!["FollowedJob"])),
    ]
    .into_iter()
    .collect();
    let mut found: BTreeMap<String, (usize, Vec<String>)> = BTreeMap::new();
    let mut writer_calls = 0;
    for dir in GATEWAY_SOURCES {
        for (rel, text) in sources(dir) {
            let file = format!("{dir}/{rel}");
            let code = code(&text);
            // Commits of the record writer, however they are reached.
            let commits = code
                .match_indices(".commit(")
                .filter(|(i, _)| !code[i + 8..].starts_with(')'))
                .count()
                + code.matches(".commit_unflushed(").count();
            if file.starts_with("store/src/") {
                if rel != "writer.rs" {
                    writer_calls += code.matches("writer.commit").count();
                }
                continue;
            }
            assert!(
                !code.contains("RecordWriter"),
                "{file} reaches the record writer itself"
            );
            if file == "runtime/src/pipeline.rs" {
                assert!(commits > 0, "the record phase commits in pipeline.rs");
                assert!(
                    !code.contains(DOOR),
                    "the record phase uses its own commits"
                );
                continue;
            }
            assert_eq!(
                commits, 0,
                "{file} commits records outside the record phase without the door \
                 (Store::commit_outside_record_phase)"
            );
            let calls = code.matches(DOOR).count();
            if calls > 0 {
                let mut reasons: Vec<String> = code
                    .match_indices("OutsideRecordPhase::")
                    .map(|(i, p)| {
                        let rest = &code[i + p.len()..];
                        let end = rest
                            .find(|c: char| !c.is_alphanumeric() && c != '_')
                            .unwrap_or(rest.len());
                        rest[..end].to_owned()
                    })
                    .collect();
                reasons.sort_unstable();
                reasons.dedup();
                found.insert(file, (calls, reasons));
            }
        }
    }
    let expected: BTreeMap<String, (usize, Vec<String>)> = expected
        .into_iter()
        .map(|(k, (n, why))| {
            (
                k.to_owned(),
                (n, why.into_iter().map(String::from).collect()),
            )
        })
        .collect();
    assert_eq!(
        found, expected,
        "the callers of Store::commit_outside_record_phase changed: \
         update this list and ARCHITECTURE.md's invariant on records"
    );
    // The store reaches its writer through `commit`, `commit_unflushed` and
    // the door, and no other way.
    assert_eq!(writer_calls, 3, "the store commits records another way");
}

/// Where each item of Rust source starts and ends, skipping what is inside
/// comments, strings and character literals: the code with those blanked
/// out (same length, same line breaks).
fn blank_literals(text: &str) -> Vec<u8> {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        let start = i;
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                blank(&mut out, start, i);
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
                blank(&mut out, start, i);
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let mut j = i + 1;
                while b.get(j) == Some(&b'#') {
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let hashes = j - i - 1;
                let mut end = j + 1;
                while end < b.len()
                    && !(b[end] == b'"'
                        && b[end + 1..]
                            .iter()
                            .take(hashes)
                            .filter(|c| **c == b'#')
                            .count()
                            == hashes)
                {
                    end += 1;
                }
                i = end + 1 + hashes;
                blank(&mut out, start, i);
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                blank(&mut out, start, i);
            }
            b'\'' => {
                // A character literal ('x', '\n', '{'), or a lifetime ('a).
                if b.get(i + 1) == Some(&b'\\') {
                    i += 2;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                    blank(&mut out, start, i);
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                    blank(&mut out, start, i);
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// The closing brace matching the first `{` at or after `from` (or the
/// `;` that ends an item without a body, when it comes first).
fn item_end(code: &[u8], from: usize) -> usize {
    let mut depth = 0usize;
    for (i, c) in code.iter().enumerate().skip(from) {
        match c {
            b';' if depth == 0 => return i,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// Every function of `text` outside `#[cfg(test)]` items: its name, the
/// line of its `fn` and its length in lines (to its closing brace).
fn function_lengths(text: &str) -> Vec<(String, usize, usize)> {
    let code = blank_literals(text);
    let line_of = |i: usize| code[..i].iter().filter(|c| **c == b'\n').count() + 1;
    let is_ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < code.len() {
        if code[i..].starts_with(b"#[cfg(test)]") {
            i = item_end(&code, i + 12) + 1;
            continue;
        }
        let at_word = i == 0 || !is_ident(code[i - 1]);
        if at_word && code[i..].starts_with(b"fn ") {
            let name: String = code[i + 3..]
                .iter()
                .skip_while(|c| c.is_ascii_whitespace())
                .take_while(|c| is_ident(**c))
                .map(|c| *c as char)
                .collect();
            let end = item_end(&code, i);
            if code.get(end) == Some(&b'}') {
                out.push((name, line_of(i), line_of(end) - line_of(i) + 1));
            }
        }
        i += 1;
    }
    out
}

#[test]
fn no_function_is_over_120_lines() {
    // The measure itself, on a sample: literals and test code do not count.
    let sample = "fn a() {\n    let s = \"{\";\n    let c = '{';\n}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
    assert_eq!(function_lengths(sample), [("a".to_owned(), 1, 4)]);
    let mut long = Vec::new();
    for dir in GATEWAY_SOURCES {
        for (rel, text) in sources(dir) {
            if rel.ends_with("/tests.rs") || rel == "tests.rs" || rel.ends_with("_tests.rs") {
                continue; // a test module of its own
            }
            for (name, line, lines) in function_lengths(&text) {
                if lines > 120 {
                    long.push(format!("{dir}/{rel}:{line} fn {name}: {lines} lines"));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over 120 lines:\n{}",
        long.join("\n")
    );
}

/// The money files name no capability, job kind or upstream product of the
/// table: prices, price-key products and the reconciliation's products are
/// the table's (`[prices]`, `[products]`, `[reconcile.*]`). Reads the files
/// whole but their test modules, by itself (the helpers above may change).
#[test]
fn billing_and_reconcile_name_no_capability() {
    let table = &server::routes::TABLE;
    let mut names: BTreeSet<&str> = table.capabilities.iter().map(|c| c.name).collect();
    names.extend(table.job_kinds.iter().map(|k| k.kind));
    names.extend(table.upstream_products.iter().map(|p| p.upstream));
    assert!(names.contains("tts") && names.contains("watermark_apply") && names.contains("synth"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for file in ["base/src/billing.rs", "runtime/src/reconcile.rs"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let code: String = text
            .split("\n#[cfg(test)]\nmod tests")
            .next()
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for name in &names {
            assert!(
                !code.contains(&format!("\"{name}\"")),
                "{file} names `{name}`: it belongs in endpoints.toml"
            );
        }
    }
}

/// The table's vocabulary is declared once (`gateway-spec`): no source file
/// of the workspace is compiled a second time through `#[path]`.
#[test]
fn no_path_attribute_in_the_workspace() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in [
        "spec", "codegen", "runtime", "server", "sim", "bench", "tests",
    ] {
        walk(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "the workspace's sources are found");
    let attribute = ["#[", "path"].concat();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.lines().any(|l| l.trim_start().starts_with(&attribute)),
            "{} compiles a file through #[path]",
            file.display()
        );
    }
}
