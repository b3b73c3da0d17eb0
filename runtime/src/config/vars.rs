//! The environment as the configuration reads it: empty values unset, and
//! every bad variable noted rather than returned at the first, so that one
//! start names them all.

use super::error::ConfigError;

/// The variables being read and the bad ones found so far.
pub(super) struct Vars<G> {
    pub(super) get: G,
    pub(super) bad: Vec<(&'static str, String)>,
}

impl<G: Fn(&str) -> Option<String>> Vars<G> {
    /// The value of `name`; empty counts as unset.
    pub(super) fn raw(&self, name: &str) -> Option<String> {
        (self.get)(name).filter(|v| !v.trim().is_empty())
    }

    /// Notes a bad variable.
    pub(super) fn bad(&mut self, name: &'static str, reason: impl Into<String>) {
        self.bad.push((name, reason.into()));
    }

    /// The parsed value of `name` when set; a value that does not parse is
    /// noted (and gives `None`).
    pub(super) fn parse<T>(
        &mut self,
        name: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let v = self.raw(name)?;
        parse(&v).map_err(|reason| self.bad(name, reason)).ok()
    }

    /// Sets `slot` from `name` when it is set and parses.
    pub(super) fn set<T>(
        &mut self,
        slot: &mut T,
        name: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) {
        if let Some(v) = self.parse(name, parse) {
            *slot = v;
        }
    }

    /// `c`, or every bad variable.
    pub(super) fn finish<C>(self, c: C) -> Result<C, ConfigError> {
        let mut bad = self.bad.into_iter();
        match bad.next() {
            None => Ok(c),
            Some((name, reason)) => Err(ConfigError {
                name,
                reason,
                also: bad.collect(),
            }),
        }
    }
}
