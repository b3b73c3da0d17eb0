//! The smallest JSON document valid for a JSON schema: the answer's text
//! of a request for structured output (Anthropic's `output_config.format`
//! of type `json_schema`, OpenAI's `response_format` of type
//! `json_schema`). A leaf: both providers' answers use it.
//!
//! Rules: `const` is its value; `enum` its first value; `anyOf` / `oneOf`
//! / `allOf` their first schema; `$ref` a `#/$defs/..` or
//! `#/definitions/..` of the root; by `type` (the first not `null` of a
//! list; `object` when `properties` are given, else `string`): an object
//! holds its `required` properties only, an array `minItems` items, a
//! string `"sim"` (its `format`'s example for `date-time`, `date`, `time`,
//! `email`, `uri`, `uuid`) padded to `minLength` and cut to `maxLength`, a
//! number or integer its `minimum` (`exclusiveMinimum` + 1), else 0, a
//! boolean `true`, `null` null.

use serde_json::{json, Map, Value};

/// The smallest instance of `schema`.
pub fn instance(schema: &Value) -> Value {
    of(schema, schema, 0)
}

/// Depth past which a recursive schema stops (its `$ref`s to itself).
const MAX_DEPTH: usize = 32;

fn of(s: &Value, root: &Value, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(c) = s.get("const") {
        return c.clone();
    }
    if let Some(first) = s
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for k in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = s.get(k).and_then(Value::as_array).and_then(|a| a.first()) {
            return of(first, root, depth + 1);
        }
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let target = r
            .strip_prefix('#')
            .and_then(|p| root.pointer(p))
            .unwrap_or(&Value::Null);
        return of(target, root, depth + 1);
    }
    match ty(s) {
        "object" => object(s, root, depth),
        "array" => {
            let n = s.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = s.get("items").unwrap_or(&Value::Null);
            Value::Array((0..n).map(|_| of(item, root, depth + 1)).collect())
        }
        "integer" | "number" => number(s),
        "boolean" => Value::Bool(true),
        "null" => Value::Null,
        _ => string(s),
    }
}

/// The schema's type (rule in the module docs).
fn ty(s: &Value) -> &str {
    match s.get("type") {
        Some(Value::String(t)) => t,
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.get("properties").is_some() => "object",
        _ => "string",
    }
}

fn object(s: &Value, root: &Value, depth: usize) -> Value {
    let props = s.get("properties").and_then(Value::as_object);
    let mut out = Map::new();
    for name in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let p = props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
        out.insert(name.to_owned(), of(p, root, depth + 1));
    }
    Value::Object(out)
}

fn number(s: &Value) -> Value {
    let integer = ty(s) == "integer";
    let min = s.get("minimum").and_then(Value::as_f64).or_else(|| {
        s.get("exclusiveMinimum")
            .and_then(Value::as_f64)
            .map(|m| m.floor() + 1.0)
    });
    match min {
        Some(m) if integer || m.fract() == 0.0 => json!(m.ceil() as i64),
        Some(m) => json!(m),
        None => json!(0),
    }
}

fn string(s: &Value) -> Value {
    let base = match s.get("format").and_then(Value::as_str) {
        Some("date-time") => "2025-01-01T00:00:00Z",
        Some("date") => "2025-01-01",
        Some("time") => "00:00:00",
        Some("email") => "sim@example.com",
        Some("uri") => "https://example.com/",
        Some("uuid") => "00000000-0000-4000-8000-000000000000",
        _ => "sim",
    };
    let mut text = base.to_owned();
    let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
    while text.chars().count() < min {
        text.push('m');
    }
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64) {
        text = text.chars().take(max as usize).collect();
    }
    Value::String(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_instances() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "minLength": 5},
            "age": {"type": "integer", "minimum": 18},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "kind": {"enum": ["a", "b"]},
            "opt": {"type": "string"},
            "when": {"type": ["string", "null"], "format": "date"},
            "child": {"$ref": "#/$defs/child"}},
            "required": ["name", "age", "tags", "kind", "when", "child"],
            "additionalProperties": false,
            "$defs": {"child": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}});
        assert_eq!(
            instance(&schema),
            json!({"name": "simmm", "age": 18, "tags": ["sim", "sim"], "kind": "a",
                "when": "2025-01-01", "child": {"ok": true}})
        );
        assert_eq!(
            instance(&json!({"type": "number", "exclusiveMinimum": 0.5})),
            json!(1)
        );
        assert_eq!(
            instance(&json!({"anyOf": [{"type": "null"}, {"type": "string"}]})),
            Value::Null
        );
    }
}
