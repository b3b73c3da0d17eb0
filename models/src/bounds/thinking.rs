//! The fields of Anthropic's Messages API that raise what the model does
//! past the prompt's bytes and the reply's length: `thinking` and
//! `output_config` (the parent module's rule).
//!
//! * `thinking` `{"type": "enabled", "budget_tokens": N}`: the thinking is
//!   billed as output, so N counts in the output bound (each choice's
//!   output is at least N). Anthropic counts the thinking inside
//!   `max_tokens` and requires `max_tokens` > N: in an Anthropic body a
//!   budget not below `max_tokens` is refused (400 naming
//!   `thinking.budget_tokens`), as is a budget that is not a whole number.
//! * `thinking` `{"type": "adaptive"}`: the model chooses how much to think,
//!   inside `max_tokens` (Anthropic's rule again), which the output bound
//!   already holds whole; nothing is added, the type is checked.
//! * `output_config`: `effort` (`low` to `max`) spends at most `max_tokens`
//!   too; a `format`'s JSON schema reaches the provider and counts by its
//!   bytes, as every byte does. Both are checked for their shape, so that a
//!   body the bound misreads never reaches the provider.
//!
//! In another provider's body a `thinking.budget_tokens` still counts in
//! the output bound; its other rules are that API's, not checked here.

use serde_json::{Map, Value};

use super::documents::Shape;
use gateway_base::errors::ApiError;

/// Efforts of `output_config.effort`.
const EFFORTS: [&str; 4] = ["low", "medium", "high", "max"];
/// Types of `thinking.type`.
const THINKING: [&str; 3] = ["enabled", "adaptive", "disabled"];

/// Each choice's output bound `per_choice` (the reply's length) raised by
/// the body's thinking; 400 naming a field Anthropic's rules refuse.
pub(super) fn output(
    body: &Map<String, Value>,
    shape: Shape,
    per_choice: u64,
) -> Result<u64, ApiError> {
    if shape == Shape::Anthropic {
        check_output_config(body)?;
    }
    let Some(t) = body.get("thinking").filter(|t| !t.is_null()) else {
        return Ok(per_choice);
    };
    let budget = match t.get("budget_tokens") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|n| *n <= u64::from(u32::MAX))
                .ok_or_else(|| {
                    ApiError::BadRequest("thinking.budget_tokens: must be a whole number".into())
                })?,
        ),
    };
    if shape == Shape::Anthropic {
        check_thinking(body, t, budget)?;
    }
    Ok(budget.map_or(per_choice, |b| per_choice.max(b)))
}

/// Anthropic's rules of `thinking` (module docs).
fn check_thinking(
    body: &Map<String, Value>,
    t: &Value,
    budget: Option<u64>,
) -> Result<(), ApiError> {
    let ty = t
        .as_object()
        .ok_or_else(|| ApiError::BadRequest("thinking: must be an object".into()))?
        .get("type")
        .and_then(Value::as_str)
        .filter(|ty| THINKING.contains(ty))
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "thinking.type: must be one of {}",
                THINKING.join(", ")
            ))
        })?;
    if ty != "enabled" {
        return Ok(());
    }
    let budget = budget.ok_or_else(|| {
        ApiError::BadRequest("thinking.budget_tokens: is required when thinking is enabled".into())
    })?;
    match body.get("max_tokens").and_then(Value::as_u64) {
        Some(max) if budget >= max => Err(ApiError::BadRequest(format!(
            "thinking.budget_tokens: must be less than max_tokens ({max}): the thinking counts in max_tokens"
        ))),
        _ => Ok(()),
    }
}

/// The shape of `output_config` (module docs).
fn check_output_config(body: &Map<String, Value>) -> Result<(), ApiError> {
    let c = match body.get("output_config") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(c)) => c,
        Some(_) => {
            return Err(ApiError::BadRequest(
                "output_config: must be an object".into(),
            ))
        }
    };
    match c.get("effort") {
        None | Some(Value::Null) => {}
        Some(Value::String(e)) if EFFORTS.contains(&e.as_str()) => {}
        Some(_) => {
            return Err(ApiError::BadRequest(format!(
                "output_config.effort: must be one of {}",
                EFFORTS.join(", ")
            )))
        }
    }
    match c.get("format") {
        None | Some(Value::Null) => Ok(()),
        Some(f) if f.get("type").and_then(Value::as_str) == Some("json_schema") => {
            if f.get("schema").is_some_and(Value::is_object) {
                Ok(())
            } else {
                Err(ApiError::BadRequest(
                    "output_config.format.schema: must be a JSON schema (an object)".into(),
                ))
            }
        }
        Some(_) => Err(ApiError::BadRequest(
            "output_config.format.type: must be json_schema".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn out(body: Value, shape: Shape) -> Result<u64, ApiError> {
        output(body.as_object().unwrap(), shape, 2000)
    }

    fn refused(body: Value) -> String {
        match out(body, Shape::Anthropic) {
            Err(ApiError::BadRequest(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn thinking_counts_and_is_checked() {
        let enabled = |b: u64, max: u64| json!({"max_tokens": max, "thinking": {"type": "enabled", "budget_tokens": b}});
        assert_eq!(out(enabled(1024, 2000), Shape::Anthropic).unwrap(), 2000);
        assert!(refused(enabled(2000, 2000)).starts_with("thinking.budget_tokens"));
        assert!(refused(enabled(5000, 2000)).starts_with("thinking.budget_tokens"));
        assert!(
            refused(json!({"thinking": {"type": "enabled"}})).starts_with("thinking.budget_tokens")
        );
        assert!(
            refused(json!({"thinking": {"type": "enabled", "budget_tokens": "9"}}))
                .starts_with("thinking.budget_tokens")
        );
        assert!(refused(json!({"thinking": {"type": "lots"}})).starts_with("thinking.type"));
        assert!(refused(json!({"thinking": "on"})).starts_with("thinking"));
        let adaptive = json!({"max_tokens": 2000, "thinking": {"type": "adaptive"}});
        assert_eq!(out(adaptive, Shape::Anthropic).unwrap(), 2000);
        // Another API's budget still raises the bound, unchecked otherwise.
        let other = json!({"thinking": {"type": "enabled", "budget_tokens": 9000}});
        assert_eq!(out(other, Shape::OpenAi).unwrap(), 9000);
        assert_eq!(
            out(json!({"thinking": {"type": "enabled"}}), Shape::OpenAi).unwrap(),
            2000
        );
    }

    #[test]
    fn output_config_is_checked() {
        let ok = json!({"output_config": {"effort": "max",
            "format": {"type": "json_schema", "schema": {"type": "object"}}}});
        assert_eq!(out(ok, Shape::Anthropic).unwrap(), 2000);
        for bad in [
            json!({"output_config": "fast"}),
            json!({"output_config": {"effort": "huge"}}),
            json!({"output_config": {"format": {"type": "json_object"}}}),
            json!({"output_config": {"format": {"type": "json_schema"}}}),
        ] {
            assert!(refused(bad).starts_with("output_config"));
        }
    }
}
