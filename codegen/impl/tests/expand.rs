//! Snapshot of the expansion of a small table, pretty-printed, so a change
//! to the generated code is visible in review. `UPDATE_SNAPSHOTS=1 cargo
//! test -p codegen-impl` rewrites the snapshot.

use std::path::Path;

fn pretty(tokens: proc_macro2::TokenStream) -> String {
    let file: syn::File = syn::parse2(tokens).expect("the expansion parses as a Rust file");
    prettyplease::unparse(&file)
}

/// Compares `actual` with the checked-in file, or rewrites it.
fn assert_snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "snapshot {} differs from line {} on:\n  expected: {:?}\n  actual:   {:?}\n\
             (UPDATE_SNAPSHOTS=1 cargo test -p codegen-impl rewrites it; review the diff)",
            path.display(),
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line),
        );
    }
}

#[test]
fn small_table_expansion() {
    let text = include_str!("fixtures/small.toml");
    let table = codegen_impl::parse_table(text).expect("the fixture is valid");
    let tokens = codegen_impl::expand(&table, Some("/path/to/endpoints.toml"));
    assert_snapshot("small.rs", &pretty(tokens));
}

#[test]
fn errors_expand_to_compile_errors_and_an_empty_skeleton() {
    let tokens = codegen_impl::routes_macro(quote::quote!(inline = "[areas.voice]\nprefix = 1\n"));
    let text = pretty(tokens);
    assert!(text.contains("compile_error!"), "{text}");
    assert!(
        text.contains("inline table:2: [areas.voice]: `prefix`: invalid type"),
        "{text}"
    );
    assert!(text.contains("no `[[endpoint]]` rows"), "{text}");
    // The names a user of the routes module expects, empty: no
    // unresolved-name error is added to the table's own.
    for name in [
        "pub static ROUTES",
        "pub const ROUTE_COUNT: usize = 0;",
        "pub static TABLE",
        "pub static OPENAPI_JSON",
        "pub static DOCS_HTML",
        "pub fn route(",
    ] {
        assert!(text.contains(name), "{name}: {text}");
    }
}

#[test]
fn bad_macro_input() {
    for input in [
        quote::quote!(42),
        quote::quote!(table = "x"),
        quote::quote!("a" "b"),
    ] {
        let text = codegen_impl::routes_macro(input).to_string();
        assert!(text.contains("compile_error"), "{text}");
    }
}
