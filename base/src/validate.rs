//! Validation of request bodies and query strings against a row's field rules.
//!
//! The rules come from the table (`[endpoint.body]`, `[endpoint.query]`), so a
//! new constraint is a table edit. Each failure is a 400 whose message starts
//! with the field's name.

use serde_json::{Map, Value};

use crate::errors::ApiError;
use crate::spec::{FieldRule, FieldType};

fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

fn range_message(rule: &FieldRule) -> String {
    match (rule.min, rule.max) {
        (Some(lo), Some(hi)) => {
            format!("{} must be between {} and {}", rule.name, num(lo), num(hi))
        }
        (Some(lo), None) => format!("{} must be at least {}", rule.name, num(lo)),
        (None, Some(hi)) => format!("{} must be at most {}", rule.name, num(hi)),
        (None, None) => String::new(),
    }
}

fn check_range(rule: &FieldRule, x: f64) -> Result<(), ApiError> {
    let low = rule.min.is_some_and(|lo| x < lo);
    let high = rule.max.is_some_and(|hi| x > hi);
    if low || high || !x.is_finite() {
        return Err(ApiError::BadRequest(range_message(rule)));
    }
    Ok(())
}

fn check_string(rule: &FieldRule, s: &str) -> Result<(), ApiError> {
    if let Some(max) = rule.max_len {
        if s.chars().count() > max as usize {
            return Err(ApiError::BadRequest(format!(
                "{} must be at most {max} characters",
                rule.name
            )));
        }
    }
    if !rule.one_of.is_empty() && !rule.one_of.contains(&s) {
        return Err(ApiError::BadRequest(format!(
            "{} must be one of: {}",
            rule.name,
            rule.one_of.join(", ")
        )));
    }
    Ok(())
}

fn type_error(rule: &FieldRule) -> ApiError {
    let article = match rule.ty {
        FieldType::Integer | FieldType::Object | FieldType::Array => "an",
        _ => "a",
    };
    ApiError::BadRequest(format!(
        "{} must be {article} {}",
        rule.name,
        rule.ty.as_str()
    ))
}

/// Checks one JSON value against its rule.
fn check_value(rule: &FieldRule, v: &Value) -> Result<(), ApiError> {
    match rule.ty {
        FieldType::String => check_string(rule, v.as_str().ok_or_else(|| type_error(rule))?),
        FieldType::Integer => {
            let x = v
                .as_i64()
                .map(|i| i as f64)
                .or_else(|| v.as_u64().map(|u| u as f64))
                .ok_or_else(|| type_error(rule))?;
            check_range(rule, x)
        }
        FieldType::Number => check_range(rule, v.as_f64().ok_or_else(|| type_error(rule))?),
        FieldType::Boolean => v.as_bool().map(|_| ()).ok_or_else(|| type_error(rule)),
        FieldType::Object => v.as_object().map(|_| ()).ok_or_else(|| type_error(rule)),
        FieldType::Array => v.as_array().map(|_| ()).ok_or_else(|| type_error(rule)),
        FieldType::Any => Ok(()),
    }
}

/// Validates a JSON object body. A `null` counts as absent.
pub fn body(rules: &[FieldRule], obj: &Map<String, Value>) -> Result<(), ApiError> {
    for rule in rules {
        match obj.get(rule.name) {
            None | Some(Value::Null) => {
                if rule.required {
                    return Err(ApiError::BadRequest(format!("{} is required", rule.name)));
                }
            }
            Some(v) => check_value(rule, v)?,
        }
    }
    Ok(())
}

/// Validates query parameters (`name=value` pairs, already decoded).
pub fn query(rules: &[FieldRule], pairs: &[(String, String)]) -> Result<(), ApiError> {
    for rule in rules {
        let Some((_, raw)) = pairs.iter().find(|(k, _)| k == rule.name) else {
            if rule.required {
                return Err(ApiError::BadRequest(format!("{} is required", rule.name)));
            }
            continue;
        };
        let v = match rule.ty {
            FieldType::Integer => {
                Value::from(raw.trim().parse::<i64>().map_err(|_| type_error(rule))?)
            }
            FieldType::Number => {
                let x = raw.trim().parse::<f64>().map_err(|_| type_error(rule))?;
                serde_json::Number::from_f64(x)
                    .map(Value::Number)
                    .ok_or_else(|| type_error(rule))?
            }
            FieldType::Boolean => Value::from(match raw.as_str() {
                "true" | "1" => true,
                "false" | "0" => false,
                _ => return Err(type_error(rule)),
            }),
            _ => Value::from(raw.as_str()),
        };
        check_value(rule, &v)?;
    }
    Ok(())
}

/// Decodes a query string into pairs.
pub fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(q.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RULES: &[FieldRule] = &[
        FieldRule {
            name: "text",
            ty: FieldType::String,
            required: true,
            max_len: Some(5),
            min: None,
            max: None,
            one_of: &[],
        },
        FieldRule {
            name: "fmt",
            ty: FieldType::String,
            required: false,
            max_len: None,
            min: None,
            max: None,
            one_of: &["mp3", "wav"],
        },
        FieldRule {
            name: "rate",
            ty: FieldType::Integer,
            required: false,
            max_len: None,
            min: Some(8000.0),
            max: Some(48000.0),
            one_of: &[],
        },
        FieldRule {
            name: "speed",
            ty: FieldType::Number,
            required: false,
            max_len: None,
            min: Some(0.5),
            max: Some(2.0),
            one_of: &[],
        },
    ];

    fn check(v: Value, expected: Result<(), &str>) {
        let got = body(RULES, v.as_object().unwrap()).map_err(|e| e.message());
        assert_eq!(
            got.as_ref().map_err(|s| s.as_str()),
            expected.as_ref().map_err(|s| *s),
            "{v}"
        );
    }

    #[test]
    fn body_rules() {
        check(json!({"text": "hi"}), Ok(()));
        check(json!({}), Err("text is required"));
        check(json!({"text": null}), Err("text is required"));
        check(json!({"text": 5}), Err("text must be a string"));
        check(json!({"text": "héllo"}), Ok(()));
        check(
            json!({"text": "hélloo"}),
            Err("text must be at most 5 characters"),
        );
        check(
            json!({"text": "a", "fmt": "ogg"}),
            Err("fmt must be one of: mp3, wav"),
        );
        check(
            json!({"text": "a", "rate": 7999}),
            Err("rate must be between 8000 and 48000"),
        );
        check(json!({"text": "a", "rate": 48000}), Ok(()));
        check(
            json!({"text": "a", "rate": 16000.5}),
            Err("rate must be an integer"),
        );
        check(
            json!({"text": "a", "speed": 2.01}),
            Err("speed must be between 0.5 and 2"),
        );
        check(json!({"text": "a", "speed": 0.5}), Ok(()));
        check(
            json!({"text": "a", "speed": "fast"}),
            Err("speed must be a number"),
        );
    }

    #[test]
    fn query_rules() {
        let q = |s: &str| query(&RULES[2..3], &parse_query(Some(s))).map_err(|e| e.message());
        assert_eq!(q("rate=8000"), Ok(()));
        assert_eq!(q(""), Ok(()));
        assert_eq!(q("rate=abc"), Err("rate must be an integer".into()));
        assert_eq!(
            q("rate=9"),
            Err("rate must be between 8000 and 48000".into())
        );
    }
}
