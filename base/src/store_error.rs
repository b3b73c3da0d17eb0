//! The database's error: what was being done, the driver's error that caused
//! it, and what kind of failure it is.
//!
//! A value type below the store, so that [`crate::errors`] can tell an
//! unavailable database (503) from any other failure (500) in an error's
//! chain of causes without depending on the store. It names no driver: the
//! store wraps a driver's error with [`StoreError::driver`] where it meets
//! one.

/// A database error: what was being done (`context`, may be empty) and the
/// driver's error that caused it, kept whole (callers log it and answer
/// 500), and what kind of failure it is ([`Failure`]: an unavailable
/// database answers 503 instead).
#[derive(Debug, Clone)]
pub struct StoreError {
    pub context: std::borrow::Cow<'static, str>,
    pub source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
    pub failure: Failure,
}

/// What kind of failure a [`StoreError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Failure {
    /// Anything else (a constraint, a bug, a corrupt value): 500.
    #[default]
    Other,
    /// The database cannot be reached (refused, connection closed, shutting
    /// down or starting up, no pooled connection in time); nothing of the
    /// transaction was committed. Answered 503 with `Retry-After`.
    Unavailable,
    /// The connection broke while its `COMMIT` was in flight: the
    /// transaction may or may not have committed. Answered like
    /// [`Failure::Unavailable`], but never retried.
    InDoubt,
}

impl StoreError {
    /// A failure with no cause beyond `context`.
    pub fn msg(context: impl Into<std::borrow::Cow<'static, str>>) -> StoreError {
        StoreError {
            context: context.into(),
            source: None,
            failure: Failure::Other,
        }
    }

    /// A failure while doing `context`, caused by `source`.
    pub fn caused(
        context: impl Into<std::borrow::Cow<'static, str>>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> StoreError {
        StoreError {
            context: context.into(),
            source: Some(std::sync::Arc::from(source.into())),
            failure: Failure::Other,
        }
    }

    /// The driver's error, with no context of its own.
    pub fn driver(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreError {
        StoreError::caused("", source)
    }

    /// This error, as a failure of kind `failure`.
    pub fn with_failure(mut self, failure: Failure) -> StoreError {
        self.failure = failure;
        self
    }

    /// The database could not be reached (see [`Failure::Unavailable`]).
    pub fn is_unavailable(&self) -> bool {
        self.failure != Failure::Other
    }

    /// The first [`StoreError`] in an error's chain of causes that says the
    /// database was unavailable, if any (how an error wrapped in other
    /// contexts still answers 503).
    pub fn unavailable_in(e: &(dyn std::error::Error + 'static)) -> bool {
        let mut cause = Some(e);
        while let Some(e) = cause {
            if e.downcast_ref::<StoreError>()
                .is_some_and(StoreError::is_unavailable)
            {
                return true;
            }
            cause = e.source();
        }
        false
    }
}

impl std::fmt::Display for StoreError {
    /// `database: context: cause` (as much of it as there is).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("database")?;
        if !self.context.is_empty() {
            write!(f, ": {}", self.context)?;
        }
        if let Some(e) = &self.source {
            write!(f, ": {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;
