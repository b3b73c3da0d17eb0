//! Compile-time behaviour of `routes!`: each `fail` fixture holds one fault
//! and its committed `.stderr` shows the message (`TRYBUILD=overwrite` to
//! regenerate, then read the diff). The `pass` fixture runs its `main`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
