//! The layout rules Cargo cannot see, checked on the source tree itself. Cargo keeps the floors
//! between crates, but compiles a crate's files as one unit, in any knot, and reads no string:
//!
//! - **No import circle** between the files of any crate (each lib, bin and proc-macro target of
//!   `cargo metadata`): files in a knot can only be read, moved or split together. A file imports
//!   another when it names a module of it by `crate::`, `self::`, `super::` (a child naming its
//!   parent too) or a parent's bare `child::` path, anywhere in its code, macros included; a name
//!   taken from the crate root (its re-exports, the crate's front door) does not count.
//! - **Modes never import a sibling mode**: what several share is in `modes::common`.
//! - **Only the store speaks SQL**: literals that read as SQL, and `rusqlite`, only in the
//!   `gateway-store` package or under a `store/` directory; the schema has one owner.
//! - **Only the upstream client presents the provider key** (`upstream` modules; `config` reads
//!   it): one place adds it, so one place scrubs it.
//! - **Records commit through one door**: the pipeline's record phase, or
//!   `Store::commit_outside_record_phase` from the callers listed here with their reasons.
//! - **Money has one door**: outside the store, usage and token records are made in `money::bill`
//!   alone (its `settle`), the record that ends a hold in `money::hold` alone (`hold_release`).
//! - **No table fact in code**: the rate limiter and the money files (`billing`, `reconcile`) spell
//!   no capability, job kind or upstream product: those are `endpoints.toml`'s.
//! - **Files and functions stay small** ([`FILE_LINES`], [`FN_LINES`]): Cargo has no size.
//! - **No `#[path]`**, tests, benches and build scripts included: a file compiled twice, or away
//!   from its module path, is legal Rust.
//!
//! Files are read whole with `syn`: items under `#[cfg(test)]` or `#[test]`, doc comments and
//! files under `tests/` are left out, macro invocations are read as tokens. The rules name
//! packages and modules, not directories, so they hold while files move between crates.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::OnceLock;

use proc_macro2::{Spacing, TokenStream, TokenTree};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::Item;

/// Lines of a file (test items not counted), and of a function of the runtime's crates.
const FILE_LINES: usize = 600;
const FN_LINES: usize = 80;
/// The request runtime and the crates split from it (a package not there yet is simply absent).
const RUNTIME: &str = "runtime gateway-base gateway-store gateway-adapters gateway-models";
/// The gateway's other crates, start-up and binary, whose functions keep the older bar.
const STARTUP: &str = "app server";
const STARTUP_FN_LINES: usize = 120;

/// The files of the packages of `lists` (names apart by spaces).
fn of<'a>(lists: &'a [&str]) -> impl Fn(&Crate, &Source) -> bool + 'a {
    |c, _| lists.join(" ").split(' ').any(|p| p == c.package)
}

/// The store: its package, or a file under a `store/` directory (before the package exists).
fn in_store(c: &Crate, f: &Source) -> bool {
    c.package == "gateway-store" || f.rel.rsplit('/').skip(1).any(|d| d == "store")
}

/// A token of code and its line: an identifier, a punctuation (`::` as one), a group's bracket,
/// a string literal as `"` and its value, any other literal (and a doc comment) as `0`.
type Token = (String, usize);

fn ident(t: &str) -> bool {
    t.starts_with(|c: char| c.is_alphabetic() || c == '_')
}

/// One file of a crate, read whole, test items left out.
#[derive(Default)]
struct Source {
    rel: String,
    module: Vec<String>,
    lines: usize,
    /// Every function with a body: its name, the line of its `fn`, its lines.
    fns: Vec<(String, usize, usize)>,
    /// The code by the module it is written in (an inline module apart from its file's).
    chunks: Vec<(Vec<String>, Vec<Token>)>,
}

/// The token after each run of tokens of `f` reading `pattern` (tokens apart by spaces).
fn after<'a>(f: &'a Source, pattern: &str) -> Vec<&'a str> {
    let p: Vec<&str> = pattern.split(' ').collect();
    let runs = f.chunks.iter().flat_map(|(_, t)| t.windows(p.len() + 1));
    let runs = runs.filter(|w| p.iter().zip(w.iter()).all(|(p, t)| t.0 == *p));
    runs.map(|w| w[p.len()].0.as_str()).collect()
}

/// One crate: its files, the root first, and each module's file (an inline one's is its parent's).
#[derive(Default)]
struct Crate {
    package: String,
    /// A test, bench or example target, or a build script: read for `#[path]` only.
    test: bool,
    files: Vec<Source>,
    mods: HashMap<Vec<String>, usize>,
}

impl Crate {
    fn load(root: &Path, package: &str, src: &Path, test: bool) -> Crate {
        let mut c = Crate::default();
        (c.package, c.test) = (package.to_owned(), test);
        c.file(root, Vec::new(), src, src.parent().unwrap());
        c
    }

    /// Reads the file of `module`, then those of the modules it declares (in `dir`).
    fn file(&mut self, root: &Path, module: Vec<String>, path: &Path, dir: &Path) {
        let text = std::fs::read_to_string(path).unwrap();
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let (at, mut src) = (self.files.len(), Source::default());
        (src.rel, src.module, src.lines) = (rel(root, path), module.clone(), text.lines().count());
        self.mods.insert(module.clone(), at);
        self.files.push(src);
        self.items(root, at, module, dir, ast.items);
    }

    /// Sorts the items of `module` (in file `at`): tests out, code to its chunk, modules to theirs.
    fn items(&mut self, root: &Path, at: usize, module: Vec<String>, dir: &Path, items: Vec<Item>) {
        let (mut code, mut fns, mut gone, tests) = (Vec::new(), Vec::new(), 0, !self.test);
        let mut test = |item: &dyn ToTokens| {
            let span = is_test(item).then(|| item.span());
            gone += span.map_or(0, |s| s.end().line + 1 - s.start().line);
            span.is_some()
        };
        for mut item in items {
            if test(&item) {
                continue;
            } else if let Item::Impl(i) = &mut item {
                i.items.retain(|x| !test(x));
            }
            let Item::Mod(m) = item else {
                flatten(item.to_token_stream(), &mut code, &mut fns);
                continue;
            };
            let attrs = &m.attrs; // `#[path]` shows there
            flatten(quote::quote!(#(#attrs)*), &mut code, &mut fns);
            let dir = dir.join(m.ident.to_string());
            let sub = [&module[..], &[m.ident.to_string()]].concat();
            let in_tests = |p: &Path| tests && rel(root, p).split('/').any(|d| d == "tests");
            let files = [dir.with_extension("rs"), dir.join("mod.rs")];
            if let Some((_, inner)) = m.content {
                self.mods.entry(sub.clone()).or_insert(at);
                self.items(root, at, sub, &dir, inner);
            } else if let Some(file) = files.iter().find(|p| p.exists() && !in_tests(p)) {
                self.file(root, sub, file, &dir);
            }
        }
        let file = &mut self.files[at];
        (file.lines, file.fns) = (file.lines - gone, [&file.fns[..], &fns].concat());
        file.chunks.push((module, code));
    }

    /// The file of the module a path names from module `cur`, when it starts with `crate`,
    /// `self`, `super` or a child's bare name: that of its longest prefix that is a module.
    fn resolve(&self, cur: &[String], segs: &[String]) -> Option<usize> {
        let ups = segs.iter().take_while(|s| *s == "super").count();
        let child = self.mods.contains_key(&[cur, &segs[..1]].concat());
        let (base, rest) = match segs[0].as_str() {
            "crate" => (Vec::new(), &segs[1..]),
            "self" => (cur.to_vec(), &segs[1..]),
            "super" if ups <= cur.len() => (cur[..cur.len() - ups].to_vec(), &segs[ups..]),
            _ if child => (cur.to_vec(), segs),
            _ => return None,
        };
        let module = |n: &usize| [&base[..], &rest[..*n]].concat();
        let mut longest_first = (0..=rest.len()).rev();
        let n = longest_first.find(|n| self.mods.contains_key(&module(n)))?;
        Some(self.mods[&module(&n)])
    }

    /// (file, other file it names) → the paths that do. Arrows into the crate root are left out.
    fn arrows(&self) -> Arrows {
        let mut arrows = Arrows::new();
        for (f, src) in self.files.iter().enumerate() {
            for (cur, code) in &src.chunks {
                for segs in paths(code) {
                    match self.resolve(cur, &segs) {
                        Some(to) if to != 0 && to != f => arrows.entry((f, to)).or_default(),
                        _ => continue,
                    }
                    .insert(segs.join("::"));
                }
            }
        }
        arrows
    }
}

type Arrows = BTreeMap<(usize, usize), BTreeSet<String>>;

fn rel(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.display().to_string()
}

/// The strongly connected components of two or more files: files that reach each other.
fn circles(arrows: &Arrows) -> Vec<BTreeSet<usize>> {
    let reach = |from: usize| {
        let (mut seen, mut todo) = (BTreeSet::from([from]), vec![from]);
        while let Some(f) = todo.pop() {
            let next = arrows.range((f, 0)..(f + 1, 0)).map(|((_, g), _)| *g);
            todo.extend(next.filter(|g| seen.insert(*g)));
        }
        seen
    };
    let reached: BTreeMap<_, _> = arrows.keys().map(|(f, _)| (*f, reach(*f))).collect();
    let mut out = BTreeSet::new();
    for (f, r) in &reached {
        let back = |g: &&usize| reached.get(*g).is_some_and(|s| s.contains(f));
        out.insert(r.iter().filter(back).copied().collect::<BTreeSet<_>>());
    }
    out.into_iter().filter(|c| c.len() > 1).collect()
}

/// Every path a run of code names: `a::b::c` wherever it stands, and each branch of a tree,
/// `a::{b, c::d}` or a `use`. `::extern` and `$crate` paths name no module of ours.
fn paths(t: &[Token]) -> Vec<Vec<String>> {
    let (mut out, mut i) = (Vec::new(), 0);
    while i < t.len() {
        let inside = i > 0 && ["::", "$"].contains(&t[i - 1].0.as_str());
        let path = ident(&t[i].0) && t.get(i + 1).is_some_and(|n| n.0 == "::");
        i = match t[i].0.as_str() {
            _ if inside => i + 1,
            "use" => tree(t, i + 1, Vec::new(), &mut out),
            _ if path => tree(t, i, Vec::new(), &mut out),
            _ => i + 1,
        };
    }
    out
}

/// Reads the path tree at `t[i]` after the segments `segs`; returns the index after it.
fn tree(t: &[Token], mut i: usize, mut segs: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let at = |i: usize| t.get(i).map_or("", |x| x.0.as_str());
    while ident(at(i)) {
        segs.extend((at(i) != "self" || segs.is_empty()).then(|| at(i).to_owned()));
        if at(i + 1) != "::" {
            out.push(segs);
            return i + 1 + 2 * usize::from(at(i + 1) == "as");
        }
        i += 2;
    }
    if at(i) == "{" {
        i += 1;
        while !["", "}"].contains(&at(i)) {
            let next = tree(t, i, segs.clone(), out);
            i = next.max(i + 1) + usize::from(at(next) == ",");
        }
        return i + 1;
    }
    out.extend(Some(segs).filter(|s| !s.is_empty()));
    i + usize::from(at(i) == "*")
}

/// Appends the tokens of `ts` to `out`, groups flattened between their brackets, and to `fns`
/// each function with a body: its name, the line of its `fn`, its lines to its closing brace.
fn flatten(ts: TokenStream, out: &mut Vec<Token>, fns: &mut Vec<(String, usize, usize)>) {
    let (mut colon, mut named) = (false, None);
    for tree in ts {
        let line = tree.span().start().line;
        let tail = out.iter().rev().take(3).map(|t| t.0.as_str());
        let doc = tail.eq(["=", "doc", "["]); // `#[doc = "…"]`: prose, not code
        let t = match &tree {
            TokenTree::Punct(_) if colon => {
                (colon, out.last_mut().unwrap().0) = (false, "::".into());
                continue;
            }
            TokenTree::Punct(p) => {
                colon = p.as_char() == ':' && p.spacing() == Spacing::Joint;
                named = named.filter(|_| p.as_char() != ';');
                p.as_char().to_string()
            }
            TokenTree::Ident(x) => {
                let after_fn = out.last().filter(|t| t.0 == "fn");
                named = after_fn.map(|t| (x.to_string(), t.1)).or(named);
                x.to_string()
            }
            TokenTree::Literal(l) => match syn::Lit::new(l.clone()) {
                syn::Lit::Str(s) if !doc => format!("\"{}", s.value()),
                _ => "0".into(),
            },
            TokenTree::Group(g) => {
                // Parenthesis, Brace, Bracket, None: the brackets as written.
                let d = g.delimiter() as usize;
                out.push((["(", "{", "[", ""][d].into(), line));
                flatten(g.stream(), out, fns);
                if let Some((name, first)) = named.take_if(|_| d == 1) {
                    fns.push((name, first, g.span_close().start().line + 1 - first));
                }
                [")", "}", "]", ""][d].into()
            }
        };
        out.push((t, line));
    }
}

/// Whether the outer attributes of an item (of a module or an impl) hold `#[test]`,
/// `#[cfg(test)]`, `#[cfg(all(test, …))]` or `#[cfg(any(test, …))]`.
fn is_test(item: &dyn ToTokens) -> bool {
    let tokens = Vec::from_iter(item.to_token_stream());
    let mut attrs = tokens.chunks(2).take_while(|t| t[0].to_string() == "#");
    let heads = ["[test,", "[cfg(test,", "[cfg(all(test,", "[cfg(any(test,"];
    attrs.any(|t| {
        let text = t[1].to_string().replace(' ', "").replace([')', ']'], ",");
        heads.iter().any(|h| text.starts_with(h))
    })
}

/// Every crate of the workspace, each target of each package, read once for all the tests.
fn workspace() -> &'static [Crate] {
    static CRATES: OnceLock<Vec<Crate>> = OnceLock::new();
    CRATES.get_or_init(|| {
        let mut cargo = std::process::Command::new("cargo");
        cargo.args("metadata --no-deps --format-version 1 --offline".split(' '));
        let out = cargo.current_dir(crate::harness::workspace_root()).output();
        let meta: serde_json::Value = serde_json::from_slice(&out.unwrap().stdout).unwrap();
        let text = |v: &serde_json::Value| v.as_str().unwrap().to_owned();
        let root = Path::new(meta["workspace_root"].as_str().unwrap());
        let mut crates = Vec::new();
        for p in meta["packages"].as_array().unwrap() {
            for t in p["targets"].as_array().unwrap() {
                let test = !matches!(text(&t["kind"][0]).as_str(), "lib" | "bin" | "proc-macro");
                let (package, src) = (text(&p["name"]), text(&t["src_path"]));
                crates.push(Crate::load(root, &package, Path::new(&src), test));
            }
        }
        crates
    })
}

/// Each file of the lib, bin and proc-macro crates that `pick` admits, once (targets share some).
fn files(pick: impl Fn(&Crate, &Source) -> bool) -> Vec<&'static Source> {
    let (mut seen, mut out) = (BTreeSet::new(), Vec::new());
    for c in workspace().iter().filter(|c| !c.test) {
        out.extend(c.files.iter().filter(|f| pick(c, f) && seen.insert(&f.rel)));
    }
    out
}

/// `file:line: token` for each token of `files` that `hit` admits.
fn hits(files: Vec<&Source>, hit: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for f in files {
        for (t, line) in f.chunks.iter().flat_map(|(_, t)| t).filter(|(t, _)| hit(t)) {
            out.push(format!("{}:{line}: {:.60}", f.rel, t.replace('\n', " ")));
        }
    }
    out
}

fn none(rule: &str, found: impl IntoIterator<Item = String>) {
    let found: Vec<String> = found.into_iter().collect();
    assert!(found.is_empty(), "{rule}:\n{}", found.join("\n"));
}

#[test]
fn imports_tie_no_circle_nor_sibling_modes() {
    let (mut found, mut siblings) = (Vec::new(), Vec::new());
    for c in workspace().iter().filter(|c| !c.test) {
        let (arrows, name) = (c.arrows(), |f: &usize| c.files[*f].rel.as_str());
        for comp in circles(&arrows) {
            let names: Vec<&str> = comp.iter().map(name).collect();
            found.push(format!("{}: {}", c.package, names.join(", ")));
            let inside = |((f, g), _): &(&(usize, usize), _)| comp.contains(f) && comp.contains(g);
            for ((f, g), why) in arrows.iter().filter(inside) {
                found.push(format!("  {} -> {}: {why:?}", name(f), name(g)));
            }
        }
        for ((f, g), why) in &arrows {
            let (from, to) = (&c.files[*f].module, &c.files[*g].module);
            // The mode a file of `modes` belongs to, and the one it names, if any.
            let p = from.iter().position(|m| m == "modes");
            let mine = p.and_then(|p| from.get(p + 1));
            let theirs = p.and_then(|p| to.get(p + 1).filter(|_| to[..=p] == from[..=p]));
            let sibling = theirs.is_some_and(|t| Some(t) != mine && t != "common");
            siblings.extend((mine.is_some() && sibling).then(|| format!("{}: {why:?}", name(f))));
        }
    }
    assert!(workspace().len() > 9, "every crate is read");
    none("modes importing a sibling mode", siblings);
    none("files importing each other in a circle", found);
}

/// A crate for the reader itself, a line `file: code` each (`~` a line break): a `super::`
/// circle (one arrow in a macro), a parent's bare path answered by its child's `super::`, and a
/// file whose paths in a doc, a string, a test module or to the root would make a third.
const PLANTED: &str = "lib.rs: mod a; mod b; mod c; mod d; pub struct Top; fn main() { d::f() }
    a.rs: use super::b::B; pub struct A; fn x() { crate::d::f() }
    b.rs: pub struct B; fn f() { println!(\"{:?}\", super::a::A) }
    c.rs: mod e; pub fn g() {} fn h() { e::f() }
    c/e.rs: use super::g; pub fn f() {~    g()~}
    d.rs: /// crate::a~fn f() { \"crate::a\"; crate::Top; }~#[cfg(test)]~mod t { use crate::a; }";

#[test]
fn layout_sees_a_planted_circle_of_each_kind() {
    let dir = std::env::temp_dir().join(format!("layout-{}", std::process::id()));
    for (file, code) in PLANTED.lines().filter_map(|l| l.trim().split_once(": ")) {
        std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        std::fs::write(dir.join(file), code.replace('~', "\n")).unwrap();
    }
    let c = Crate::load(&dir, "planted", &dir.join("lib.rs"), false);
    std::fs::remove_dir_all(&dir).unwrap();
    let (found, name) = (circles(&c.arrows()), |f: &usize| c.files[*f].rel.as_str());
    let found = Vec::from_iter(found.iter().map(|c| Vec::from_iter(c.iter().map(name))));
    assert_eq!(found, [["a.rs", "b.rs"], ["c.rs", "c/e.rs"]]);
    // A function's lines from `fn` to its brace; a file's, test items aside.
    assert_eq!((c.files[4].fns[0].2, c.files[5].lines), (3, 2));
}

/// A string literal reading as SQL: the words of one of these pairs, in this order.
fn sql(t: &str) -> bool {
    let w: Vec<&str> = t.split(|c: char| !c.is_alphanumeric()).collect();
    let at = |word| w.iter().position(|x| *x == word);
    let later = |(a, b)| at(a).is_some_and(|i| w[i..].contains(&b));
    let pairs = "INSERT INTO,DELETE FROM,CREATE TABLE,SELECT FROM,UPDATE SET".split(',');
    t.starts_with('"') && pairs.map(|p| p.split_once(' ').unwrap()).any(later)
}

#[test]
fn only_store_speaks_sql() {
    let found = hits(files(|c, f| !in_store(c, f)), |t| sql(t) || t == "rusqlite");
    none("SQL outside the store", found);
}

#[test]
fn only_upstream_presents_the_provider_key() {
    let own = |f: &Source| f.module.iter().any(|m| m == "upstream") || f.module == ["config"];
    let keys = ["provider_api_key", "x-access-token", "Token token="];
    let key = |t: &str| keys.iter().any(|k| t.contains(k));
    let found = hits(files(|c, f| of(&[RUNTIME])(c, f) && !own(f)), key);
    none("the upstream credential outside `upstream`", found);
}

/// Outside the store, records are committed by the pipeline's record phase (`Store::commit`,
/// `Store::commit_unflushed`), or through the door, `Store::commit_outside_record_phase`, by these
/// callers (module, calls, reasons); the store reaches its writer those three ways. A new caller
/// is a decision, made here and in ARCHITECTURE.md.
const DOOR: &str = "batches 1 BatchLine
batches::results 1 BatchResults
follower 1 FollowedJob
mirror 1 MirroredCopy
modes::chat::responses::background 2 StoredResponse
modes::chat::responses::stored 1 StoredResponse
modes::common 1 UploadedAsset
modes::mcp::relay 1 ToolCall
modes::uploads 1 UploadedAsset
money::hold 2 Hold HoldEnd
pipeline commits
relay 1 StreamSettlement
sessions 1 SessionTurn
store writer 3
videos 2 VideoJobEnd";

#[test]
fn records_commit_through_one_door() {
    let outside = files(|c, f| of(&[RUNTIME, STARTUP])(c, f) && !in_store(c, f));
    let mut found = hits(outside.clone(), |t| t == "RecordWriter");
    for f in outside {
        let module = f.module.join("::");
        let door = after(f, ". commit_outside_record_phase (").len();
        let args = after(f, ". commit (").into_iter().filter(|t| *t != ")");
        let commits = args.count() + after(f, ". commit_unflushed (").len();
        let why = Vec::from_iter(BTreeSet::from_iter(after(f, "OutsideRecordPhase ::"))).join(" ");
        found.extend(match (commits, door) {
            (0, 0) => None,
            (0, _) => Some(format!("{module} {door} {why}")),
            (_, 0) if module == "pipeline" => Some("pipeline commits".into()),
            _ => Some(format!("{}: {commits} commits, {door} doors", f.rel)),
        });
    }
    let store = files(|c, f| in_store(c, f) && f.module.last().is_none_or(|m| m != "writer"));
    let writer = store.iter().flat_map(|f| after(f, "writer ."));
    let writer = writer.filter(|t| t.starts_with("commit")).count();
    found.push(format!("store writer {writer}"));
    found.sort();
    assert_eq!(found.join("\n"), DOOR, "records committed another way");
}

#[test]
fn money_has_one_door() {
    let (mut found, mut door) = (Vec::new(), 0);
    for f in files(|c, f| of(&[RUNTIME, STARTUP])(c, f) && !in_store(c, f)) {
        for made in ["UsageRecord", "ModelUsageRecord", "HoldRelease"] {
            let n = after(f, &format!("{made} {{")).len();
            match f.module.join("::").as_str() {
                "money::bill" | "money::hold" => door += n,
                _ if n > 0 => found.push(format!("{} makes a {made}", f.rel)),
                _ => {}
            }
        }
    }
    assert!(door >= 3, "the door makes each record ({door} found)");
    none("money written outside its door", found);
}

#[test]
fn no_table_fact_in_code() {
    let table = &server::routes::TABLE;
    let mut names: BTreeSet<&str> = table.capabilities.iter().map(|c| c.name).collect();
    names.extend(table.job_kinds.iter().map(|k| k.kind));
    names.extend(table.upstream_products.iter().map(|p| p.upstream));
    assert!(names.contains("tts") && names.contains("watermark_apply") && names.contains("synth"));
    let mut found = Vec::new();
    for module in ["ratelimit", "billing", "reconcile"] {
        let files =
            files(|c, f| of(&[RUNTIME, STARTUP])(c, f) && f.module.iter().any(|m| m == module));
        assert!(!files.is_empty(), "{module} is read");
        let name = |t: &str| t.strip_prefix('"').is_some_and(|s| names.contains(s));
        found.extend(hits(files, name));
    }
    none("names of endpoints.toml spelt in code", found);
}

#[test]
fn files_and_functions_stay_small() {
    let long = files(|_, f| f.lines > FILE_LINES).into_iter();
    let mut found = Vec::from_iter(long.map(|f| format!("{}: {} lines", f.rel, f.lines)));
    for (packages, limit) in [(RUNTIME, FN_LINES), (STARTUP, STARTUP_FN_LINES)] {
        for f in files(of(&[packages])) {
            for (name, line, n) in f.fns.iter().filter(|(_, _, n)| *n > limit) {
                found.push(format!("{}:{line} fn {name}: {n} lines", f.rel));
            }
        }
    }
    none(&format!("too long ({FILE_LINES}, {FN_LINES} lines)"), found);
}

#[test]
fn no_path_attribute_in_the_workspace() {
    let all = workspace().iter().flat_map(|c| &c.files);
    let found = all.filter(|f| after(f, "# [").contains(&"path"));
    assert!(workspace().iter().any(|c| c.test), "the tests are read");
    none("compiled through #[path]", found.map(|f| f.rel.clone()));
}
