//! The checks of today's request options, as Anthropic makes them (the
//! parts the simulator reads): `thinking`, `output_config`,
//! `context_management`, `metadata` and a top-level `cache_control`.
//!
//! * `thinking`: `{"type": "enabled", "budget_tokens": N}` with N at least
//!   1024 and (on `/v1/messages`) below `max_tokens`, `{"type":
//!   "adaptive"}` or `{"type": "disabled"}`.
//! * `output_config`: an object; its `format`, when given, `{"type":
//!   "json_schema", "schema": {...}}`; its `effort`, when given, one of
//!   `low`, `medium`, `high`, `max`.
//! * `context_management`, `metadata`, `cache_control`: objects
//!   (`metadata.user_id` a string when given). `context_management` edits
//!   nothing here: the simulator's contexts are never long enough.

use serde_json::{Map, Value};

use super::errors::bad;
use crate::response::Resp;

/// Least `thinking.budget_tokens` Anthropic accepts.
pub const MIN_BUDGET: u64 = 1024;

/// Checks the options of a request; `max_tokens` when the request has one
/// (`/v1/messages`).
pub fn validate(f: &Map<String, Value>, max_tokens: Option<u64>) -> Result<(), Resp> {
    for k in [
        "context_management",
        "metadata",
        "cache_control",
        "output_config",
    ] {
        if f.get(k).is_some_and(|v| !v.is_object()) {
            return Err(bad(&format!("{k}: Input should be a valid dictionary")));
        }
    }
    if f.get("metadata")
        .and_then(|m| m.get("user_id"))
        .is_some_and(|u| !u.is_string() && !u.is_null())
    {
        return Err(bad("metadata.user_id: Input should be a valid string"));
    }
    if let Some(t) = f.get("thinking") {
        thinking(t, max_tokens)?;
    }
    if let Some(c) = f.get("output_config") {
        output_config(c)?;
    }
    Ok(())
}

fn thinking(t: &Value, max_tokens: Option<u64>) -> Result<(), Resp> {
    match t.get("type").and_then(Value::as_str) {
        Some("adaptive" | "disabled") => Ok(()),
        Some("enabled") => {
            let budget = t
                .get("budget_tokens")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("thinking.enabled.budget_tokens: Field required"))?;
            if budget < MIN_BUDGET {
                return Err(bad(&format!(
                    "thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_BUDGET}"
                )));
            }
            if max_tokens.is_some_and(|m| m <= budget) {
                return Err(bad(
                    "`max_tokens` must be greater than `thinking.budget_tokens`",
                ));
            }
            Ok(())
        }
        _ => Err(bad(
            "thinking: Input tag does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'",
        )),
    }
}

fn output_config(c: &Value) -> Result<(), Resp> {
    if let Some(format) = c.get("format").filter(|f| !f.is_null()) {
        if format.get("type").and_then(Value::as_str) != Some("json_schema") {
            return Err(bad(
                "output_config.format.type: Input should be 'json_schema'",
            ));
        }
        if !format.get("schema").is_some_and(Value::is_object) {
            return Err(bad("output_config.format.schema: Field required"));
        }
    }
    match c.get("effort") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(e)) if matches!(e.as_str(), "low" | "medium" | "high" | "max") => Ok(()),
        Some(_) => Err(bad(
            "output_config.effort: Input should be 'low', 'medium', 'high' or 'max'",
        )),
    }
}
