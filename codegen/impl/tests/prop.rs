//! Property tests of the table validator: any text, and the real table with
//! a line removed or a value replaced, gives a table or errors, never a panic.

use proptest::prelude::*;

fn real_table() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../endpoints.toml")).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_text_is_a_table_or_errors(text in any::<String>()) {
        let _ = codegen_impl::parse_table(&text);
    }

    #[test]
    fn the_real_table_with_a_line_removed_never_panics(at in any::<prop::sample::Index>()) {
        let text = real_table();
        let lines: Vec<&str> = text.lines().collect();
        let cut = at.index(lines.len());
        let mutated: Vec<&str> = lines.iter().enumerate().filter(|(i, _)| *i != cut).map(|(_, l)| *l).collect();
        let _ = codegen_impl::parse_table(&mutated.join("\n"));
    }

    #[test]
    fn the_real_table_with_a_value_replaced_never_panics(at in any::<prop::sample::Index>(), value in "[a-z0-9_/{}\".-]{0,12}") {
        let text = real_table();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let i = at.index(lines.len());
        let mut lines = lines;
        if let Some((key, _)) = lines[i].split_once(" = ") {
            lines[i] = format!("{key} = {value}");
        }
        let _ = codegen_impl::parse_table(&lines.join("\n"));
    }
}
