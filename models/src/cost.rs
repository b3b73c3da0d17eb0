//! What an answer says it cost: the charge of the usage record its
//! request commits (`charged`, the same decimal, 8 places), in the JSON
//! answer's `usage.cost` (with `usage.byok`), in the [`HEADER`] of every
//! billed answer, and in the last event of a stream that asked for usage
//! ([`crate::usage_tail`]).
//!
//! `usage.cost` is a JSON number, as OpenAI-compatible clients read it
//! (OpenRouter's is one), written with exactly the 8 decimals of the
//! charge (`"cost": 0.00011760`): serde_json's `arbitrary_precision`
//! keeps a number's text, so no float ever rounds it. The header and
//! `/generations` carry the same decimal as a string.

use rust_decimal::Decimal;
use serde_json::{Map, Number, Value};

use gateway_store::Record;

/// The answer header naming a billed request's charge (USD, 8 places).
pub const HEADER: &str = "x-gateway-cost";

/// A request's charge as its answer shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub charged: Decimal,
    /// Paid with the caller's own provider key: charged nothing.
    pub byok: bool,
}

impl Cost {
    /// The charge of the usage record among `records`; `None` without one.
    pub fn of(records: &[Record]) -> Option<Cost> {
        let charged = records.iter().find_map(|r| match r {
            Record::Usage(u) => Some(u.charged),
            _ => None,
        })?;
        let byok = records
            .iter()
            .any(|r| matches!(r, Record::ModelUsage(m) if m.byok));
        Some(Cost { charged, byok })
    }

    /// The charge as a decimal string of 8 places (`"0.00000000"`).
    pub fn text(&self) -> String {
        text(self.charged)
    }

    /// The charge as a JSON number written with its 8 decimals
    /// (`0.00010320`, trailing zeros kept).
    pub fn number(&self) -> Value {
        number(self.charged)
    }

    /// Sets `cost` (a number, [`Cost::number`]) and `byok` in the answer's
    /// `usage` object (made when the answer has none).
    pub fn annotate(&self, answer: &mut Value) {
        let Some(obj) = answer.as_object_mut() else {
            return;
        };
        let usage = obj
            .entry("usage")
            .or_insert_with(|| Value::Object(Map::new()));
        if !usage.is_object() {
            *usage = Value::Object(Map::new());
        }
        if let Some(u) = usage.as_object_mut() {
            u.insert("cost".into(), self.number());
            u.insert("byok".into(), Value::Bool(self.byok));
        }
    }
}

/// An amount of money as the answers show it: a decimal string of 8 places.
pub fn text(amount: Decimal) -> String {
    format!("{amount:.8}")
}

/// An amount of money as a JSON number of 8 places: [`text`]'s digits,
/// kept as written (serde_json's `arbitrary_precision`).
pub fn number(amount: Decimal) -> Value {
    // A decimal's 8-place text is always a valid JSON number.
    text(amount)
        .parse::<Number>()
        .map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotates_an_answer_with_or_without_usage() {
        let c = Cost {
            charged: Decimal::new(1032, 7),
            byok: false,
        };
        let mut v = serde_json::json!({"usage": {"prompt_tokens": 3}});
        c.annotate(&mut v);
        assert_eq!(
            v,
            serde_json::from_str::<Value>(
                r#"{"usage": {"prompt_tokens": 3, "cost": 0.00010320, "byok": false}}"#
            )
            .unwrap()
        );
        assert_eq!(
            v.to_string(),
            r#"{"usage":{"byok":false,"cost":0.00010320,"prompt_tokens":3}}"#
        );
        let mut v = serde_json::json!({"data": []});
        Cost {
            charged: Decimal::ZERO,
            byok: true,
        }
        .annotate(&mut v);
        assert_eq!(v["usage"].to_string(), r#"{"byok":true,"cost":0.00000000}"#);
        assert_eq!(v["usage"]["cost"].as_f64(), Some(0.0));
    }

    #[test]
    fn the_number_keeps_its_eight_decimals() {
        for (amount, written) in [
            (Decimal::new(1176, 7), "0.00011760"),
            (Decimal::new(1, 8), "0.00000001"),
            (Decimal::new(123_456_789_012, 8), "1234.56789012"),
            (Decimal::new(5, 0), "5.00000000"),
        ] {
            let n = number(amount);
            assert_eq!(n.to_string(), written);
            assert!(n.is_number());
            let back: Value = serde_json::from_str(&format!("{{\"cost\":{n}}}")).unwrap();
            assert_eq!(back["cost"], n);
            assert_eq!(back["cost"].to_string(), written);
        }
    }
}
