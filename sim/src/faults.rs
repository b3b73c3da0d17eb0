//! Fault injection: rules added with `POST /__sim/faults` that make matching
//! provider requests fail.
//!
//! A rule is `{"path": "<pattern>", "method": "GET"?, "fault": <fault>, "count": N?}`:
//!
//! * `path`: an exact request path, or a prefix ending in `*`
//!   (`/api/v2/voices*`; a lone `*` matches everything), compared with the
//!   path without its query string;
//! * `fault`: `{"status": 503, "body": {...}?, "headers": {"Retry-After": "7"}?}`
//!   answers that status (default body `{"success":false,"message":"injected fault"}`),
//!   `{"delay_ms": 500}` waits then answers normally (combine with `status` to
//!   delay the error), `"reset"` drops the connection without a response,
//!   `"timeout"` never answers;
//!   A `status` of 200 with a `body` answers any figure a test needs (a
//!   synthesis `duration: -500`, a job item with `duration_seconds: -1000`)
//!   on the real path;
//!   `{"stream_error": 529, "after": 2}` (Anthropic `/v1/messages` and Gemini
//!   `/v1beta/...` only) answers normally but breaks a streamed answer off
//!   after `after` content deltas (default 1) with the provider's error event
//!   for that status (a non-streamed answer is unaffected; the use is spent);
//!   without a `body`, an error answer has the default body of the path's
//!   provider ([`crate::server::default_body`]: Anthropic's, Google's or
//!   the voice provider's shape); on OpenAI's streamed chat, completions and
//!   responses the same rule breaks the connection after `after` events
//!   instead (no error event, no `[DONE]`: a provider dropping midway);
//! * `{"body_break": 10}` answers normally, but a whole (not streamed)
//!   answer breaks off after that many bytes of its body: the headers go out
//!   with the full `Content-Length`, then the connection drops (a provider
//!   failing after its first byte; streamed answers are unaffected);
//! * a named provider's paths (`/p/{name}/v1/...`, served as `/v1/...`)
//!   are matched whole, so `/p/a/*` fails provider `a` and not `b`;
//! * `count`: how many matching requests the rule applies to (default 1;
//!   0 means unlimited);
//! * `every`: the rule applies to one matching request in `every` (the
//!   2nd, 4th, ... with 2: a deployment failing half its requests); the
//!   others pass untouched and spend no use.
//!
//! Rules are tried in the order they were added; the first match is used and
//! its count decremented.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Method, StatusCode};
use serde_json::{json, Value};

/// What happens to a matched request.
#[derive(Clone, Debug)]
pub enum Effect {
    /// Answer normally (after the delay, if any).
    Proceed,
    /// Answer this status, body and headers instead.
    Respond {
        /// HTTP status.
        status: StatusCode,
        /// JSON (or, when a string, raw text) body; `None`: the default
        /// error body of the path's provider
        /// ([`crate::server::default_body`]).
        body: Option<Value>,
        /// Extra response headers.
        headers: Vec<(HeaderName, HeaderValue)>,
    },
    /// Drop the connection without any response.
    Reset,
    /// Never answer.
    Timeout,
    /// Answer normally, but a streamed answer of the Anthropic or Gemini
    /// API breaks off with an error event of this status after `after`
    /// content deltas (other answers are unaffected).
    StreamError {
        /// The error's status (its type follows the provider's mapping).
        status: StatusCode,
        /// Content deltas sent before the error.
        after: usize,
    },
    /// Answer normally, but a whole body breaks off after this many bytes.
    BodyBreak(usize),
}

/// A matched fault: an optional delay, then an effect.
#[derive(Clone, Debug)]
pub struct Fault {
    /// Wait this long first.
    pub delay: Option<Duration>,
    /// Then do this.
    pub effect: Effect,
}

#[derive(Clone, Debug)]
struct Rule {
    /// Id returned when added.
    id: u64,
    /// Exact path, or prefix ending in `*`.
    pattern: String,
    /// Only this method, when set.
    method: Option<Method>,
    /// What a match does.
    fault: Fault,
    /// Remaining uses; `None` is unlimited.
    remaining: Option<u64>,
    /// Applies to one matching request in this many.
    every: u64,
    /// Matching requests seen.
    seen: u64,
    /// The rule as posted (for listing).
    spec: Value,
}

impl Rule {
    fn matches(&self, method: &Method, path: &str) -> bool {
        if let Some(m) = &self.method {
            if m != method {
                return false;
            }
        }
        match self.pattern.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => self.pattern == path,
        }
    }
}

/// The ordered rule list.
#[derive(Default)]
pub struct Faults {
    /// Fast path: false when there are no rules.
    active: AtomicBool,
    /// Last id handed out, and the rules in order.
    rules: Mutex<(u64, Vec<Rule>)>,
}

impl Faults {
    /// Parses and appends a rule; returns its id.
    pub fn add(&self, spec: &Value) -> Result<u64, String> {
        let pattern = spec
            .get("path")
            .and_then(Value::as_str)
            .ok_or("`path` (string) is required")?
            .to_owned();
        let method = match spec.get("method") {
            None | Some(Value::Null) => None,
            Some(Value::String(m)) => Some(
                Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                    .map_err(|_| format!("bad method {m:?}"))?,
            ),
            Some(_) => return Err("`method` must be a string".into()),
        };
        let fault = parse_fault(spec.get("fault").ok_or("`fault` is required")?)?;
        let remaining = match spec.get("count") {
            None | Some(Value::Null) => Some(1),
            Some(v) => match v.as_u64() {
                Some(0) => None,
                Some(n) => Some(n),
                None => return Err("`count` must be a non-negative integer".into()),
            },
        };
        let every = match spec.get("every") {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_u64()
                .filter(|n| *n > 0)
                .ok_or("`every` must be a positive integer")?,
        };
        let mut rules = self.rules.lock().unwrap();
        rules.0 += 1;
        let id = rules.0;
        rules.1.push(Rule {
            id,
            pattern,
            method,
            fault,
            remaining,
            every,
            seen: 0,
            spec: spec.clone(),
        });
        self.active.store(true, Ordering::Release);
        Ok(id)
    }

    /// Removes every rule.
    pub fn clear(&self) {
        let mut rules = self.rules.lock().unwrap();
        rules.1.clear();
        self.active.store(false, Ordering::Release);
    }

    /// The rules still in force: `[{id, rule, remaining}]` (`remaining` null = unlimited).
    pub fn list(&self) -> Value {
        let rules = self.rules.lock().unwrap();
        Value::Array(
            rules
                .1
                .iter()
                .map(|r| json!({"id": r.id, "rule": r.spec, "remaining": r.remaining}))
                .collect(),
        )
    }

    /// Finds the first rule matching this request, consumes one use of it and
    /// returns its fault.
    pub fn take(&self, method: &Method, path: &str) -> Option<Fault> {
        if !self.active.load(Ordering::Acquire) {
            return None;
        }
        let mut rules = self.rules.lock().unwrap();
        let idx = rules.1.iter().position(|r| r.matches(method, path))?;
        rules.1[idx].seen += 1;
        if !rules.1[idx].seen.is_multiple_of(rules.1[idx].every) {
            return None;
        }
        let fault = rules.1[idx].fault.clone();
        if let Some(n) = rules.1[idx].remaining.as_mut() {
            *n -= 1;
            if *n == 0 {
                rules.1.remove(idx);
            }
        }
        if rules.1.is_empty() {
            self.active.store(false, Ordering::Release);
        }
        Some(fault)
    }
}

fn parse_fault(v: &Value) -> Result<Fault, String> {
    match v {
        Value::String(s) => match s.as_str() {
            "reset" => Ok(Fault {
                delay: None,
                effect: Effect::Reset,
            }),
            "timeout" => Ok(Fault {
                delay: None,
                effect: Effect::Timeout,
            }),
            other => Err(format!(
                "unknown fault {other:?} (expected \"reset\" or \"timeout\")"
            )),
        },
        Value::Object(o) => {
            let delay = match o.get("delay_ms") {
                None | Some(Value::Null) => None,
                Some(d) => Some(Duration::from_millis(
                    d.as_u64()
                        .ok_or("`delay_ms` must be a non-negative integer")?,
                )),
            };
            if let Some(n) = o.get("body_break") {
                let n = n
                    .as_u64()
                    .ok_or("`body_break` must be a non-negative integer")?;
                return Ok(Fault {
                    delay,
                    effect: Effect::BodyBreak(n as usize),
                });
            }
            if let Some(s) = o.get("stream_error") {
                let status = parse_status(s)?;
                let after = match o.get("after") {
                    None | Some(Value::Null) => 1,
                    Some(a) => a.as_u64().ok_or("`after` must be a non-negative integer")? as usize,
                };
                return Ok(Fault {
                    delay,
                    effect: Effect::StreamError { status, after },
                });
            }
            let effect = match o.get("status") {
                None | Some(Value::Null) => match o.get("kind").and_then(Value::as_str) {
                    Some("reset") => Effect::Reset,
                    Some("timeout") => Effect::Timeout,
                    _ if delay.is_some() => Effect::Proceed,
                    _ => {
                        return Err(
                            "fault needs `status`, `delay_ms`, or is \"reset\"/\"timeout\"".into(),
                        )
                    }
                },
                Some(s) => {
                    let status = parse_status(s)?;
                    Effect::Respond {
                        status,
                        body: o.get("body").cloned(),
                        headers: parse_headers(o.get("headers"))?,
                    }
                }
            };
            Ok(Fault { delay, effect })
        }
        _ => Err("`fault` must be an object or \"reset\"/\"timeout\"".into()),
    }
}

/// A `Respond` fault's extra `headers` (`{"Retry-After": "7"}`; a value
/// that is not a string is written as JSON).
fn parse_headers(h: Option<&Value>) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let Some(h) = h else {
        return Ok(Vec::new());
    };
    let h = h.as_object().ok_or("`headers` must be an object")?;
    let mut headers = Vec::new();
    for (k, v) in h {
        let name =
            HeaderName::from_bytes(k.as_bytes()).map_err(|_| format!("bad header name {k:?}"))?;
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let value =
            HeaderValue::from_str(&text).map_err(|_| format!("bad header value for {k}"))?;
        headers.push((name, value));
    }
    Ok(headers)
}

fn parse_status(s: &Value) -> Result<StatusCode, String> {
    let code = s.as_u64().ok_or("`status` must be an integer")?;
    u16::try_from(code)
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or_else(|| format!("bad status {code}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_patterns_methods_and_counts() {
        let f = Faults::default();
        f.add(&json!({"path": "/api/v2/voices*", "method": "get", "fault": {"status": 503}, "count": 2}))
            .unwrap();
        assert!(f.take(&Method::POST, "/api/v2/voices").is_none());
        assert!(f.take(&Method::GET, "/api/v2/other").is_none());
        assert!(f.take(&Method::GET, "/api/v2/voices/x").is_some());
        assert!(f.take(&Method::GET, "/api/v2/voices").is_some());
        assert!(f.take(&Method::GET, "/api/v2/voices").is_none());
    }

    #[test]
    fn unlimited_and_exact() {
        let f = Faults::default();
        f.add(&json!({"path": "/synthesize", "fault": "reset", "count": 0}))
            .unwrap();
        for _ in 0..5 {
            assert!(matches!(
                f.take(&Method::POST, "/synthesize").unwrap().effect,
                Effect::Reset
            ));
        }
        assert!(f.take(&Method::POST, "/synthesize/x").is_none());
        f.clear();
        assert!(f.take(&Method::POST, "/synthesize").is_none());
    }

    #[test]
    fn every_second_request() {
        let f = Faults::default();
        f.add(&json!({"path": "/p/b/*", "fault": {"status": 503}, "count": 0, "every": 2}))
            .unwrap();
        let hits: Vec<bool> = (0..4)
            .map(|_| f.take(&Method::POST, "/p/b/v1/chat/completions").is_some())
            .collect();
        assert_eq!(hits, [false, true, false, true]);
    }

    #[test]
    fn a_200_answers_any_body() {
        let f = Faults::default();
        f.add(
            &json!({"path": "/synthesize", "fault": {"status": 200, "body": {"duration": -500}}}),
        )
        .unwrap();
        match f.take(&Method::POST, "/synthesize").unwrap().effect {
            Effect::Respond { status, body, .. } => {
                assert_eq!(
                    (status, body),
                    (StatusCode::OK, Some(json!({"duration": -500})))
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_bad_specs() {
        let f = Faults::default();
        assert!(f.add(&json!({"path": "/x", "fault": "explode"})).is_err());
        assert!(f.add(&json!({"fault": "reset"})).is_err());
        assert!(f
            .add(&json!({"path": "/x", "fault": {"status": 99}}))
            .is_err());
    }
}
