//! A row of the list: one variable, and who reads it.

/// Who reads a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// The `gateway` binary: `serve`, `demo` and every other subcommand.
    Gateway,
    /// The provider simulator, `provider-sim`.
    Simulator,
    /// The tests and the test tooling only.
    Tests,
}

/// One environment variable.
#[derive(Clone, Copy, Debug)]
pub struct Variable {
    pub name: &'static str,
    /// The value when unset, in Markdown.
    pub default: &'static str,
    /// What it does, in Markdown.
    pub meaning: &'static str,
    pub scope: Scope,
}
