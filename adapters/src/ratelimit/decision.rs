//! The interface of the stores: a store's answer ([`Decision`]), its
//! failure, the [`LimiterStore`] trait, and the decision of a quota that
//! needs no state.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::quota::Quota;

// ---------------------------------------------------------------------------
// The store interface
// ---------------------------------------------------------------------------

/// A store's answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Over the quota; the earliest time a retry can succeed.
    Deny {
        retry_after: Duration,
    },
}

/// The store could not decide (network, shared store down, …); the request is allowed.
#[derive(Debug, thiserror::Error)]
#[error("rate-limit store: {0}")]
pub struct StoreUnavailable(pub String);

/// The future of a [`LimiterStore`]'s answer.
pub type CheckFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Decision, StoreUnavailable>> + Send + 'a>>;

/// A store of one's own (tests inject failing or fixed stores through
/// `Config::limiter_store`). The built-in stores implement it too, but a
/// [`RateLimiter`](super::RateLimiter) calls them directly ([`Store`]), so
/// the in-process store's check allocates nothing and never suspends.
///
/// `check` counts one request of `user_id` against `quota` of `capability`
/// and says whether it conforms. It is on the path of every limited
/// request and must not wait for long.
pub trait LimiterStore: Send + Sync + 'static {
    fn check<'a>(&'a self, user_id: i64, capability: &'a str, quota: &'a Quota) -> CheckFuture<'a>;
}

/// The decision of a quota that needs no state: a count of 0 denies every
/// request, a period of 0 limits nothing. `None` for every parsed quota.
pub(super) fn stateless(quota: &Quota) -> Option<Decision> {
    if quota.count == 0 {
        return Some(Decision::Deny {
            retry_after: quota.per.max(Duration::from_secs(1)),
        });
    }
    quota.per.is_zero().then_some(Decision::Allow)
}
