//! What a start refused for its configuration says.

/// Variables that are set but do not parse: the first in `name` and
/// `reason`, every other one in `also`, each by its own name (the
/// configuration is read whole, so one start reports them all).
#[derive(Debug)]
pub struct ConfigError {
    pub name: &'static str,
    pub reason: String,
    /// The other bad variables, in the order they were read.
    pub also: Vec<(&'static str, String)>,
}

impl ConfigError {
    /// One bad variable.
    pub fn new(name: &'static str, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            name,
            reason: reason.into(),
            also: Vec::new(),
        }
    }

    /// The names of every bad variable.
    pub fn names(&self) -> Vec<&'static str> {
        std::iter::once(self.name)
            .chain(self.also.iter().map(|(n, _)| *n))
            .collect()
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid value for {}: {}", self.name, self.reason)?;
        for (name, reason) in &self.also {
            write!(f, "; invalid value for {name}: {reason}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}
