//! Per-day usage counters, as the provider reports them from
//! `GET /account/billing_usage?start_date=YYYY-MM-DD&end_date=YYYY-MM-DD`:
//! `{"success": true, "items": {"synth": "8.46", "detect": "12", ...}}`
//! (quantities as strings).
//!
//! Products and units: `synth`, `stt`, `enhance`, `edit`, `detect`,
//! `intelligence`, `tracing`, `watermark_apply`, `watermark_detect` in seconds;
//! `detect_images`, `intelligence_images`, `identity_search`,
//! `identity_enroll`, `voice_design` in units. Usage is booked on the UTC day
//! the request was served. `POST /__sim/billing_usage` replaces a day's
//! counters (later usage adds to them).

use std::collections::{BTreeMap, HashMap};

use chrono::NaiveDate;
use serde_json::{Map, Value};

/// Counters per day and product.
#[derive(Default, Debug)]
pub struct Billing {
    /// Day → product → quantity.
    days: HashMap<NaiveDate, BTreeMap<String, f64>>,
}

impl Billing {
    /// Adds `amount` of `product` to today's (UTC) counters.
    pub fn add(&mut self, product: &str, amount: f64) {
        self.add_on(chrono::Utc::now().date_naive(), product, amount);
    }

    /// Adds `amount` of `product` on `day`.
    pub fn add_on(&mut self, day: NaiveDate, product: &str, amount: f64) {
        *self
            .days
            .entry(day)
            .or_default()
            .entry(product.to_owned())
            .or_default() += amount;
    }

    /// Replaces the counters of `day` (values may be numbers or numeric strings).
    pub fn set_day(&mut self, day: NaiveDate, items: &Map<String, Value>) -> Result<(), String> {
        let mut counters = BTreeMap::new();
        for (k, v) in items {
            let n = match v {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            }
            .ok_or_else(|| format!("items.{k} must be a number or numeric string"))?;
            counters.insert(k.clone(), n);
        }
        self.days.insert(day, counters);
        Ok(())
    }

    /// Sums the counters of `start..=end`, formatted as strings.
    pub fn range(&self, start: NaiveDate, end: NaiveDate) -> Map<String, Value> {
        let mut sums: BTreeMap<&str, f64> = BTreeMap::new();
        for (day, counters) in &self.days {
            if *day >= start && *day <= end {
                for (k, v) in counters {
                    *sums.entry(k).or_default() += v;
                }
            }
        }
        sums.into_iter()
            .map(|(k, v)| (k.to_owned(), Value::String(format_quantity(v))))
            .collect()
    }
}

/// `12` for whole numbers, otherwise up to 3 decimals without trailing zeros.
pub fn format_quantity(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_formats() {
        let mut b = Billing::default();
        let d1 = NaiveDate::from_ymd_opt(2024, 5, 1).unwrap();
        let d2 = NaiveDate::from_ymd_opt(2024, 5, 2).unwrap();
        b.add_on(d1, "synth", 1.5);
        b.add_on(d2, "synth", 2.25);
        b.add_on(d2, "detect_images", 1.0);
        let r = b.range(d1, d2);
        assert_eq!(r["synth"], "3.75");
        assert_eq!(r["detect_images"], "1");
        assert_eq!(b.range(d1, d1)["synth"], "1.5");
        let mut items = Map::new();
        items.insert("synth".into(), Value::String("8450".into()));
        b.set_day(d1, &items).unwrap();
        assert_eq!(b.range(d1, d1)["synth"], "8450");
        assert_eq!(format_quantity(0.1 + 0.2), "0.3");
    }
}
