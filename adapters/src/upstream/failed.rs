//! A failed upstream attempt, typed: what failed ([`FailureKind`]), on
//! which side ([`Side`]), whether another attempt may help (derived from
//! what failed, never stored apart), and the cause. The string forms used
//! by logs, metrics labels and trace attributes all come from
//! [`FailureKind::as_str`], so dashboards keep their labels.

use std::sync::Arc;
use std::time::Duration;

use super::scrub::Key;
use gateway_base::errors::ApiError;

/// What failed in an upstream attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// No connection could be made (refused, DNS, TLS handshake).
    Connect,
    /// The call's deadline passed, or a stream sent nothing for its idle
    /// time-out.
    Timeout,
    /// The connection broke or failed before the answer's headers.
    Transport,
    /// The connection broke while the answer's body was read.
    BodyBroken,
    /// The request could not be built (the deployment's URL is invalid).
    Request,
    /// The provider answered this non-success status.
    Status(u16),
    /// The provider answered this success status with an answer the
    /// gateway cannot read (not JSON, or larger than the gateway reads).
    InvalidAnswer(u16),
}

/// Which side an upstream failure is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The gateway's own (its configuration).
    Gateway,
    /// The network between the gateway and the provider.
    Network,
    /// The provider's (an answered status or an unreadable answer).
    Provider,
}

impl FailureKind {
    /// The label of logs, metrics and traces: `network`, `timeout`,
    /// `rate_limited`, `status_4xx`, `status_5xx`, `invalid_answer`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::Connect
            | FailureKind::Transport
            | FailureKind::BodyBroken
            | FailureKind::Request => "network",
            FailureKind::Status(429) => "rate_limited",
            FailureKind::Status(400..=499) => "status_4xx",
            FailureKind::Status(_) => "status_5xx",
            FailureKind::InvalidAnswer(_) => "invalid_answer",
        }
    }

    pub fn side(self) -> Side {
        match self {
            FailureKind::Request => Side::Gateway,
            FailureKind::Connect
            | FailureKind::Timeout
            | FailureKind::Transport
            | FailureKind::BodyBroken => Side::Network,
            FailureKind::Status(_) | FailureKind::InvalidAnswer(_) => Side::Provider,
        }
    }

    /// Whether another attempt (elsewhere) may succeed: any transport
    /// failure, 429, 500, 502, 503, 504 or 529 may; any other status is
    /// about the request and would fail again, and an unreadable answer
    /// was answered (and may have been charged) by the provider.
    pub fn retryable(self) -> bool {
        match self {
            FailureKind::Status(s) => matches!(s, 429 | 500 | 502 | 503 | 504 | 529),
            FailureKind::InvalidAnswer(_) => false,
            _ => true,
        }
    }

    /// The upstream's status, when it answered one.
    pub fn status(self) -> Option<u16> {
        match self {
            FailureKind::Status(s) | FailureKind::InvalidAnswer(s) => Some(s),
            _ => None,
        }
    }
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Gateway => "gateway",
            Side::Network => "network",
            Side::Provider => "provider",
        })
    }
}

/// The cause of a failure: the transport's error, kept as a source error.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// A failed upstream attempt: the caller's error if nothing else is tried,
/// what failed, and the cause (displayed scrubbed of the upstream key).
#[derive(Debug)]
pub struct Failed {
    pub error: ApiError,
    pub kind: FailureKind,
    /// The upstream's `Retry-After`, when it sent one.
    pub retry_after: Option<Duration>,
    cause: Option<Cause>,
    key: Option<Arc<Key>>,
}

impl Failed {
    pub fn new(kind: FailureKind, error: ApiError) -> Failed {
        Failed {
            error,
            kind,
            retry_after: None,
            cause: None,
            key: None,
        }
    }

    /// Keeps the cause, to be scrubbed of `key` when displayed.
    pub(crate) fn caused_by(mut self, cause: Cause, key: Option<Arc<Key>>) -> Failed {
        self.cause = Some(cause);
        self.key = key;
        self
    }

    pub fn retryable(&self) -> bool {
        self.kind.retryable()
    }

    pub fn status(&self) -> Option<u16> {
        self.kind.status()
    }

    pub fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.cause.as_deref()
    }

    /// What a trace keeps of it: as displayed, but without the provider's
    /// own message when the provider answered (`status_5xx (503,
    /// provider)`): a provider's error text may quote the request, and a
    /// trace never holds a prompt. The log line keeps the whole of it.
    pub fn for_trace(&self) -> String {
        match self.kind.side() {
            Side::Provider => match self.kind.status() {
                Some(s) => format!("{} ({s}, {})", self.kind.as_str(), Side::Provider),
                None => format!("{} ({})", self.kind.as_str(), Side::Provider),
            },
            _ => self.to_string(),
        }
    }
}

/// `status_5xx (503, provider): <message>`: the kind, the status, the side,
/// and the cause (or the caller's message), scrubbed of the upstream key.
impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind.as_str())?;
        match self.kind.status() {
            Some(s) => write!(f, " ({s}, {})", self.kind.side())?,
            None => write!(f, " ({})", self.kind.side())?,
        }
        let text = match &self.cause {
            Some(c) => c.to_string(),
            None => self.error.to_string(),
        };
        let text = match &self.key {
            Some(k) => k.scrub_str(&text),
            None => text,
        };
        write!(f, ": {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_classified_by_what_failed() {
        use FailureKind::*;
        let cases = [
            (Connect, "network", Side::Network, true),
            (Timeout, "timeout", Side::Network, true),
            (Transport, "network", Side::Network, true),
            (BodyBroken, "network", Side::Network, true),
            (Request, "network", Side::Gateway, true),
            (Status(429), "rate_limited", Side::Provider, true),
            (Status(400), "status_4xx", Side::Provider, false),
            (Status(404), "status_4xx", Side::Provider, false),
            (Status(401), "status_4xx", Side::Provider, false),
            (Status(500), "status_5xx", Side::Provider, true),
            (Status(501), "status_5xx", Side::Provider, false),
            (Status(502), "status_5xx", Side::Provider, true),
            (Status(503), "status_5xx", Side::Provider, true),
            (Status(504), "status_5xx", Side::Provider, true),
            (Status(529), "status_5xx", Side::Provider, true),
            (InvalidAnswer(200), "invalid_answer", Side::Provider, false),
        ];
        for (kind, label, side, retryable) in cases {
            assert_eq!(kind.as_str(), label, "{kind:?}");
            assert_eq!(kind.side(), side, "{kind:?}");
            assert_eq!(kind.retryable(), retryable, "{kind:?}");
        }
        assert_eq!(Status(503).status(), Some(503));
        assert_eq!(InvalidAnswer(200).status(), Some(200));
        assert_eq!(Connect.status(), None);
    }

    #[test]
    fn a_failure_displays_its_cause_without_the_key() {
        let key = Key::new("sk-secret-123456");
        let f = Failed::new(
            FailureKind::Connect,
            ApiError::Network("network error contacting the model provider".into()),
        )
        .caused_by(
            "tcp connect error to https://x/?key=sk-secret-123456: refused".into(),
            Some(key),
        );
        let shown = f.to_string();
        assert!(
            shown.starts_with("network (network): tcp connect error"),
            "{shown}"
        );
        assert!(!shown.contains("sk-secret-123456"), "{shown}");
        let g = Failed::new(
            FailureKind::Status(503),
            ApiError::Unavailable("busy".into()),
        );
        assert!(
            g.to_string().starts_with("status_5xx (503, provider): "),
            "{g}"
        );
        assert!(g.retryable());
    }
}
