//! `gateway`: see `gateway --help`.
fn main() -> std::process::ExitCode {
    server::cli::main()
}
