//! What an answer says it cost: the charge of the usage record its
//! request commits (`charged`, the same decimal, 8 places), in the JSON
//! answer's `usage.cost` (with `usage.byok`), in the [`HEADER`] of every
//! billed answer, and in the last event of a stream that asked for usage
//! ([`crate::usage_tail`]).

use rust_decimal::Decimal;
use serde_json::{Map, Value};

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

    /// Sets `cost` and `byok` in the answer's `usage` object (made when
    /// the answer has none).
    pub fn annotate(&self, answer: &mut Value) {
        let Some(obj) = answer.as_object_mut() else {
            return;
        };
        let usage = obj
            .entry("usage")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(u) = usage.as_object_mut() {
            u.insert("cost".into(), Value::String(self.text()));
            u.insert("byok".into(), Value::Bool(self.byok));
        } else {
            *usage = serde_json::json!({"cost": self.text(), "byok": self.byok});
        }
    }
}

/// An amount of money as the answers show it: a decimal string of 8 places.
pub fn text(amount: Decimal) -> String {
    format!("{amount:.8}")
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
            serde_json::json!({"usage": {"prompt_tokens": 3, "cost": "0.00010320", "byok": false}})
        );
        let mut v = serde_json::json!({"data": []});
        Cost {
            charged: Decimal::ZERO,
            byok: true,
        }
        .annotate(&mut v);
        assert_eq!(
            v["usage"],
            serde_json::json!({"cost": "0.00000000", "byok": true})
        );
    }
}
