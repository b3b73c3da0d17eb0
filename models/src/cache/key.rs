//! The key of a cached answer: SHA-256 of the deployment that serves it
//! (`provider/model`, or the route's name), the
//! operation, the scope and the request's semantic fields in a canonical
//! JSON form (object keys sorted, no whitespace), so that two requests that
//! differ only in key order, whitespace or the fields of [`IGNORED`] share
//! an entry.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::scope::Scope;

/// Fields of the upstream body that never change the answer's content:
/// how it is delivered (`stream`, `stream_options`), who the provider is
/// told the end user is (`user`), and the caller's own key (already
/// removed by the adapter; the scope separates BYOK entries).
pub const IGNORED: [&str; 4] = ["stream", "stream_options", "user", "byok_api_key"];

/// A cache key: 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key(pub String);

/// Who may share an entry (see [`Scope`]), as text: `u:<user id>`,
/// `k:<key id>`, `g`; a BYOK request adds the SHA-256 of its key.
pub fn scope_text(scope: Scope, user: Option<i64>, key: Option<i64>, byok: Option<&str>) -> String {
    let mut s = match (scope, user, key) {
        (Scope::Global, _, _) => "g".to_owned(),
        (Scope::Key, _, Some(k)) => format!("k:{k}"),
        // A caller without a key (a session token) is scoped to its user.
        (Scope::Key | Scope::User, Some(u), _) => format!("u:{u}"),
        (_, None, _) => "anonymous".to_owned(),
    };
    if let Some(b) = byok {
        s.push_str("|byok:");
        s.push_str(&hex::encode(Sha256::digest(b.as_bytes())));
    }
    s
}

/// The key of `body` (the upstream body) sent to `deployment`
/// (`provider/model`, or a route's name) for `op`, within `scope`.
pub fn key(deployment: &str, op: &str, scope: &str, body: &Map<String, Value>) -> Key {
    let mut h = Sha256::new();
    for part in [deployment, op, scope] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    let mut text = String::with_capacity(256);
    let semantic: Map<String, Value> = body
        .iter()
        .filter(|(k, _)| !IGNORED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    canonical(&Value::Object(semantic), &mut text);
    h.update(text.as_bytes());
    Key(hex::encode(h.finalize()))
}

/// `v` as canonical JSON: object keys sorted, no whitespace.
pub fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn k(v: Value) -> Key {
        key("sim/sim-gpt", "chat", "u:1", v.as_object().unwrap())
    }

    #[test]
    fn key_order_whitespace_and_delivery_fields_do_not_count() {
        let a: Value = serde_json::from_str(
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0}"#,
        )
        .unwrap();
        let b: Value = serde_json::from_str(
            "{ \"temperature\" : 0,\n \"messages\":[{\"content\":\"hi\",\"role\":\"user\"}], \"model\":\"m\", \"stream\": true, \"user\": \"x\", \"stream_options\": {\"include_usage\": true}}",
        )
        .unwrap();
        assert_eq!(k(a.clone()), k(b));
        let mut c = a.clone();
        c["temperature"] = json!(1);
        assert_ne!(k(a.clone()), k(c));
        let body = a.as_object().unwrap();
        assert_ne!(
            key("sim/sim-gpt", "chat", "u:1", body),
            key("sim/sim-gpt", "chat", "u:2", body)
        );
        assert_ne!(
            key("sim/sim-gpt", "chat", "u:1", body),
            key("sim/other", "chat", "u:1", body)
        );
    }

    #[test]
    fn scopes() {
        assert_eq!(scope_text(Scope::User, Some(1), Some(9), None), "u:1");
        assert_eq!(scope_text(Scope::Key, Some(1), Some(9), None), "k:9");
        assert_eq!(scope_text(Scope::Key, Some(1), None, None), "u:1");
        assert_eq!(scope_text(Scope::Global, Some(1), Some(9), None), "g");
        let byok = scope_text(Scope::Global, Some(1), None, Some("sk-a"));
        assert!(
            byok.starts_with("g|byok:") && !byok.contains("sk-a"),
            "{byok}"
        );
        assert_ne!(byok, scope_text(Scope::Global, Some(1), None, Some("sk-b")));
    }
}
