//! The architecture invariants of ARCHITECTURE.md that a test can check,
//! checked on the source tree itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

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
    let base = root().join(dir);
    let mut out = Vec::new();
    walk(&base, &base, &mut out);
    out.sort();
    out
}

/// The code of a file without its `#[cfg(test)]` tail and without `//` comments.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
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

#[test]
fn runtime_files_import_each_other_in_no_circle() {
    let files = sources("runtime/src");
    let modules: BTreeSet<String> = files.iter().map(|(rel, _)| module_of(rel)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in &files {
        let me = module_of(rel);
        let code = code(text);
        for (i, _) in code.match_indices("crate::") {
            let path: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // The longest module prefix of the path is the file it names.
            let mut parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
            while !parts.is_empty() {
                let m = parts.join("::");
                if modules.contains(&m) {
                    // A child naming its own parent does not count.
                    if m != me && !me.starts_with(&format!("{m}::")) {
                        edges.entry(me.clone()).or_default().insert(m);
                    }
                    break;
                }
                parts.pop();
            }
        }
    }
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
    for m in &modules {
        if state.get(m.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(circle) = visit(m, &edges, &mut state, &mut Vec::new()) {
                panic!("runtime/src imports in a circle: {}", circle.join(" -> "));
            }
        }
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
                    || !Path::new(&root().join("runtime/src/modes").join(format!("{name}.rs")))
                        .exists(),
                "modes/{rel} imports the sibling mode {name}"
            );
        }
    }
}

#[test]
fn only_store_speaks_sql() {
    for (rel, text) in sources("runtime/src") {
        if rel.starts_with("store/") {
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
    for (rel, text) in sources("runtime/src/ratelimit") {
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
    for (rel, text) in sources("runtime/src") {
        if rel.starts_with("upstream/") || rel == "config.rs" {
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
        ("runtime/src", 700),
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
        ("runtime/src/relay.rs", (2, vec!["StreamSettlement"])),
        ("runtime/src/videos.rs", (2, vec!["VideoJobEnd"])),
        ("runtime/src/modes/uploads.rs", (1, vec!["UploadedAsset"])),
        ("runtime/src/mirror.rs", (1, vec!["MirroredCopy"])),
        ("runtime/src/follower.rs", (1, vec!["FollowedJob"])),
    ]
    .into_iter()
    .collect();
    let mut found: BTreeMap<String, (usize, Vec<String>)> = BTreeMap::new();
    let mut writer_calls = 0;
    for dir in ["runtime/src", "server/src"] {
        for (rel, text) in sources(dir) {
            let file = format!("{dir}/{rel}");
            let code = code(&text);
            // Commits of the record writer, however they are reached.
            let commits = code
                .match_indices(".commit(")
                .filter(|(i, _)| !code[i + 8..].starts_with(')'))
                .count()
                + code.matches(".commit_unflushed(").count();
            if file.starts_with("runtime/src/store/") {
                if rel != "store/writer.rs" {
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
    for (rel, text) in sources("runtime/src") {
        if rel.ends_with("/tests.rs") || rel == "tests.rs" || rel.ends_with("_tests.rs") {
            continue; // a test module of its own
        }
        for (name, line, lines) in function_lengths(&text) {
            if lines > 120 {
                long.push(format!("runtime/src/{rel}:{line} fn {name}: {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over 120 lines:\n{}",
        long.join("\n")
    );
}
