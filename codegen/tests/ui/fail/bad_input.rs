// The macro takes a path string or `inline = "..."`.
codegen::routes!(42);
codegen::routes!(table = "x");
codegen::routes!("does/not/exist.toml");

fn main() {}
