//! Helpers for request fields shared by the handler groups: required and
//! optional strings, integers, loose booleans, JSON objects and new ids.

use serde_json::{json, Map, Value};

use crate::response::{bad_field, Resp};

/// The object inside `v` (empty for anything else).
pub(super) fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// A fresh random uuid.
pub(super) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A trimmed, non-empty string field.
pub(super) fn str_field<'a>(f: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    f.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// A required string field (400 when missing or blank).
pub(super) fn required<'a>(f: &'a Map<String, Value>, key: &str) -> Result<&'a str, Resp> {
    str_field(f, key).ok_or_else(|| bad_field(key, "is required"))
}

/// Integer from a JSON number or numeric string.
pub(super) fn int_field(f: &Map<String, Value>, key: &str) -> Result<Option<i64>, Resp> {
    match f.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| bad_field(key, "must be an integer")),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| bad_field(key, "must be an integer")),
        Some(_) => Err(bad_field(key, "must be an integer")),
    }
}

/// `"true"`/`"1"`/`"yes"` (and the negatives) as booleans; anything else unchanged.
pub(super) fn bool_of(v: &Value) -> Value {
    match v {
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => json!(true),
            "false" | "0" | "no" => json!(false),
            _ => v.clone(),
        },
        _ => v.clone(),
    }
}
