//! The top-level fields of an Anthropic Messages request other than its
//! conversation and tools, as the chat path's (OpenAI) fields: each is
//! translated, dropped as a hint that changes nothing in the answer, or
//! refused with a 400 naming it ([`option`]).
//!
//! * `thinking`: `disabled` → `reasoning_effort: none`; `enabled` → the
//!   effort of its `budget_tokens` ([`convert::effort_of_budget`]: up to
//!   1024 `low`, 8192 `medium`, 24576 `high`, above `xhigh`); `adaptive`
//!   → nothing (the provider's own default).
//! * `output_config.effort` (`low`, `medium`, `high`, `max` → `xhigh`) →
//!   `reasoning_effort` (unless thinking is disabled).
//! * `output_config.format` and its older form `output_format`
//!   (`{type: json_schema, schema}`) → `response_format` `json_schema`
//!   (named `output`, strict).
//! * `metadata.user_id` → `user` (another key of `metadata`: 400).
//! * `cache_control` (automatic caching) → dropped: a hint; the providers
//!   of other APIs cache by themselves.
//! * `service_tier: auto` → dropped (the default everywhere); another
//!   tier: 400.
//! * `top_k`, `context_management` (it changes what the model sees),
//!   `container`, `mcp_servers` and any other field: 400 naming it.

use serde_json::{json, Map, Value};

use crate::providers::convert;
use gateway_base::errors::ApiError;

fn bad(m: String) -> ApiError {
    ApiError::BadRequest(m)
}

/// Why a field of Anthropic's is refused for a model of another API.
fn refused(k: &str) -> ApiError {
    let why = match k {
        "top_k" => "the chat shape this request crosses to the model's provider has no top_k",
        "context_management" => {
            "only an anthropic model's provider edits the context it is given; without it the answer would differ"
        }
        _ => "an unknown field, or one with no equivalent for a model of another API than Anthropic's",
    };
    bad(format!("{k}: {why}; leave it out"))
}

/// Translates top-level field `k` (not `messages`, `system`, `tools`,
/// `tool_choice` nor a field copied as is) into `out`.
pub fn option(k: &str, v: &Value, out: &mut Map<String, Value>) -> Result<(), ApiError> {
    if v.is_null() {
        return Ok(());
    }
    match k {
        "cache_control" => {}
        "service_tier" if v == "auto" => {}
        "service_tier" => return Err(bad(
            "service_tier: only auto has an equivalent for a model of another API than Anthropic's"
                .into(),
        )),
        "metadata" => metadata(v, out)?,
        "thinking" => {
            if let Some(e) = thinking(v)? {
                out.insert("reasoning_effort".into(), e.into());
            }
        }
        "output_config" => output_config(v, out)?,
        "output_format" => format(v, "output_format", out)?,
        _ => return Err(refused(k)),
    }
    Ok(())
}

/// After every field: `output_config.effort` gives way to a disabled
/// thinking.
pub fn settle(body: &Map<String, Value>, out: &mut Map<String, Value>) {
    let disabled = body.get("thinking").and_then(|t| t.get("type")) == Some(&json!("disabled"));
    if disabled {
        out.insert("reasoning_effort".into(), "none".into());
    }
}

fn metadata(v: &Value, out: &mut Map<String, Value>) -> Result<(), ApiError> {
    let m = v
        .as_object()
        .ok_or_else(|| bad("metadata: must be an object".into()))?;
    for (k, v) in m {
        match (k.as_str(), v) {
            ("user_id", Value::Null) => {}
            ("user_id", Value::String(u)) => {
                out.insert("user".into(), u.as_str().into());
            }
            ("user_id", _) => return Err(bad("metadata.user_id: must be a string".into())),
            (k, _) => return Err(bad(format!("metadata.{k}: an unknown field; leave it out"))),
        }
    }
    Ok(())
}

/// The `reasoning_effort` of a `thinking` object; `None` for `adaptive`.
fn thinking(v: &Value) -> Result<Option<&'static str>, ApiError> {
    match v.get("type").and_then(Value::as_str) {
        Some("disabled") => Ok(Some("none")),
        Some("adaptive") => Ok(None),
        Some("enabled") => match v.get("budget_tokens").and_then(Value::as_u64) {
            Some(b) if b >= 1024 => Ok(Some(convert::effort_of_budget(b))),
            _ => Err(bad(
                "thinking.budget_tokens: must be an integer of at least 1024".into(),
            )),
        },
        _ => Err(bad(
            "thinking.type: must be enabled, disabled or adaptive".into()
        )),
    }
}

fn output_config(v: &Value, out: &mut Map<String, Value>) -> Result<(), ApiError> {
    let c = v
        .as_object()
        .ok_or_else(|| bad("output_config: must be an object".into()))?;
    for (k, v) in c {
        match (k.as_str(), v) {
            (_, Value::Null) => {}
            ("format", f) => format(f, "output_config.format", out)?,
            ("effort", e) => {
                let effort = match e.as_str() {
                    Some(e @ ("low" | "medium" | "high")) => e,
                    Some("max") => "xhigh",
                    _ => {
                        return Err(bad(
                            "output_config.effort: must be low, medium, high or max".into(),
                        ))
                    }
                };
                out.insert("reasoning_effort".into(), effort.into());
            }
            (k, _) => {
                return Err(bad(format!(
                    "output_config.{k}: an unknown field, or one with no equivalent for a model of another API than Anthropic's; leave it out"
                )))
            }
        }
    }
    Ok(())
}

fn format(f: &Value, at: &str, out: &mut Map<String, Value>) -> Result<(), ApiError> {
    if f.get("type").and_then(Value::as_str) != Some("json_schema") {
        return Err(bad(format!("{at}.type: must be json_schema")));
    }
    let schema = f
        .get("schema")
        .filter(|s| s.is_object())
        .ok_or_else(|| bad(format!("{at}.schema: must be an object")))?;
    out.insert(
        "response_format".into(),
        json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": true}}),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(k: &str, v: Value) -> Result<Value, ApiError> {
        let mut out = Map::new();
        option(k, &v, &mut out)?;
        Ok(Value::Object(out))
    }

    #[test]
    fn each_field_is_translated_dropped_or_refused() {
        assert_eq!(
            one(
                "thinking",
                json!({"type": "enabled", "budget_tokens": 2000})
            )
            .unwrap(),
            json!({"reasoning_effort": "medium"})
        );
        assert_eq!(
            one("thinking", json!({"type": "disabled"})).unwrap(),
            json!({"reasoning_effort": "none"})
        );
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let rf = json!({"response_format": {"type": "json_schema",
            "json_schema": {"name": "output", "schema": schema, "strict": true}}});
        assert_eq!(
            one(
                "output_format",
                json!({"type": "json_schema", "schema": schema})
            )
            .unwrap(),
            rf
        );
        let mut both = rf.clone();
        both["reasoning_effort"] = json!("low");
        assert_eq!(
            one(
                "output_config",
                json!({"format": {"type": "json_schema", "schema": schema}, "effort": "low"})
            )
            .unwrap(),
            both
        );
        assert_eq!(
            one("metadata", json!({"user_id": "u"})).unwrap(),
            json!({"user": "u"})
        );
        assert_eq!(
            one("cache_control", json!({"type": "ephemeral"})).unwrap(),
            json!({})
        );
        for (k, v) in [
            ("context_management", json!({"edits": []})),
            ("top_k", json!(5)),
            ("mcp_servers", json!([])),
            ("metadata", json!({"tag": "x"})),
            ("service_tier", json!("standard_only")),
        ] {
            let ApiError::BadRequest(m) = one(k, v).unwrap_err() else {
                panic!()
            };
            assert!(m.starts_with(k), "{m}");
        }
    }
}
