//! Who may share a cache entry (`GATEWAY_CACHE_SCOPE`).

use std::str::FromStr;

/// Who may share an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scope {
    /// The same user (any of its keys).
    #[default]
    User,
    /// The same API key.
    Key,
    /// Everyone: only when an operator sets it.
    Global,
}

impl FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Scope, String> {
        match s.trim() {
            "user" => Ok(Scope::User),
            "key" => Ok(Scope::Key),
            "global" => Ok(Scope::Global),
            other => Err(format!("{other:?} is not one of user, key, global")),
        }
    }
}
