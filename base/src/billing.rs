//! Money: prices, markup, charges. `rust_decimal` everywhere, never a float.
//!
//! * A **price key** is `<product>.<unit>`: the product is the row's job kind
//!   when it has one (so watermark apply and detect are priced apart), else
//!   its capability; the unit is what the request is billed by
//!   (`tts.audio_seconds`, `detect.video_seconds`, `identity.searches`, ...).
//!   A billing unit may name its own product in the table's `[products]`:
//!   a voice subscription has one key, `voices.voice_subscription`, whether
//!   it is billed at a voice's first build or at its promotion from a design
//!   (whose capability is `voice_design`): see `Table::product_of`.
//! * **Charge** = quantity × unit price × (1 + markup / 100), rounded half
//!   away from zero to 8 decimal places, rendered with exactly 8 places.
//! * A product without a configured price is **unpriced**: its quantity is
//!   still recorded, with `charged` 0 and the record flagged.
//!
//! Prices come from `GATEWAY_PRICES` (`key=price,key=price`, USD per unit of
//! upstream cost), on top of the table's `[prices]` (the spec's known
//! prices, added by [`Prices::with_defaults`] when the gateway starts).

use std::collections::BTreeMap;
use std::str::FromStr;

use rust_decimal::{Decimal, RoundingStrategy};

use crate::spec::PriceSpec;

/// Decimal places of every charge.
pub const CHARGE_DP: u32 = 8;

/// The largest balance a user may hold (USD 10^15): far inside the decimal
/// range with its 8 places, so no sum of balances, holds and charges can
/// overflow. A grant that would pass it is refused (400).
pub const MAX_BALANCE: Decimal = Decimal::from_parts(0xA4C6_8000, 0x38D7E, 0, false, 0);

/// Why a grant of credit is refused: its amount, or the balance it would
/// make, is not a positive decimal up to [`MAX_BALANCE`] with at most
/// [`CHARGE_DP`] places.
pub fn check_grant(balance: Decimal, amount: Decimal) -> Result<Decimal, String> {
    if amount <= Decimal::ZERO {
        return Err("amount: a positive decimal is required".into());
    }
    if amount.scale() > CHARGE_DP && amount.normalize().scale() > CHARGE_DP {
        return Err(format!("amount: at most {CHARGE_DP} decimal places"));
    }
    match balance.checked_add(amount) {
        Some(after) if after <= MAX_BALANCE => Ok(after),
        _ => Err(format!(
            "amount: the balance would exceed the largest balance allowed ({MAX_BALANCE})"
        )),
    }
}

/// The charge of an upstream cost: `raw` × (1 + `markup_pct` / 100),
/// rounded half away from zero to [`CHARGE_DP`] places. Every charge the
/// gateway makes goes through it: the voice API's prices ([`Prices::charge`])
/// and the general gateway's per-model prices and holds (`runtime::money`).
pub fn with_markup(raw: Decimal, markup_pct: Decimal) -> Decimal {
    round_charge(raw * (Decimal::ONE + markup_pct / Decimal::ONE_HUNDRED))
}

/// `d` rounded as every charge is: half away from zero, [`CHARGE_DP`] places.
pub fn round_charge(d: Decimal) -> Decimal {
    d.round_dp_with_strategy(CHARGE_DP, RoundingStrategy::MidpointAwayFromZero)
}

/// Price table plus markup.
#[derive(Debug, Clone, PartialEq)]
pub struct Prices {
    prices: BTreeMap<String, Decimal>,
    /// Markup in percent (20.0 by default).
    pub markup_pct: Decimal,
}

/// A charge for some quantity of a product.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub price_key: String,
    pub quantity: Decimal,
    /// Upstream unit price; `None` when the product is unpriced.
    pub unit_price: Option<Decimal>,
    /// Amount charged to the caller, 8 decimal places.
    pub charged: Decimal,
}

impl Charge {
    pub fn unpriced(&self) -> bool {
        self.unit_price.is_none()
    }

    /// `charged` as the wire shows it: exactly 8 decimal places.
    pub fn charged_str(&self) -> String {
        format_money(self.charged)
    }
}

/// A decimal rendered with exactly 8 places ("0.00060000").
pub fn format_money(d: Decimal) -> String {
    let mut d = round_charge(d);
    d.rescale(CHARGE_DP);
    d.to_string()
}

/// A markup in percent: a non-negative decimal.
pub fn parse_markup(text: &str) -> Result<Decimal, PriceError> {
    let m =
        Decimal::from_str(text.trim()).map_err(|e| PriceError(format!("markup {text:?}: {e}")))?;
    if m.is_sign_negative() {
        return Err(PriceError(format!("markup {m} is negative")));
    }
    Ok(m)
}

/// Why a price table could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub struct PriceError(pub String);

impl Prices {
    /// `spec` (`key=price,...`) and a markup given as text.
    pub fn parse(spec: Option<&str>, markup_pct: &str) -> Result<Prices, PriceError> {
        Prices::with_markup(spec, parse_markup(markup_pct)?)
    }

    /// `spec` (`key=price,...`), with a parsed markup.
    pub fn with_markup(spec: Option<&str>, markup_pct: Decimal) -> Result<Prices, PriceError> {
        let mut prices: BTreeMap<String, Decimal> = BTreeMap::new();
        for item in spec
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| PriceError(format!("{item:?} is not key=price")))?;
            let (k, v) = (k.trim(), v.trim());
            if !k.contains('.') {
                return Err(PriceError(format!("{k:?} is not <product>.<unit>")));
            }
            let price = Decimal::from_str(v)
                .map_err(|e| PriceError(format!("price of {k}: {v:?}: {e}")))?;
            if price.is_sign_negative() {
                return Err(PriceError(format!("price of {k} is negative")));
            }
            prices.insert(k.to_owned(), price);
        }
        Ok(Prices { prices, markup_pct })
    }

    /// These prices over the table's known ones (`[prices]`): a key the
    /// configuration prices keeps its price.
    pub fn with_defaults(mut self, defaults: &[PriceSpec]) -> Result<Prices, PriceError> {
        for d in defaults {
            if !self.prices.contains_key(d.key) {
                let price = Decimal::from_str(d.price)
                    .map_err(|e| PriceError(format!("[prices] {}: {:?}: {e}", d.key, d.price)))?;
                self.prices.insert(d.key.to_owned(), price);
            }
        }
        Ok(self)
    }

    /// The configured upstream unit price of a key.
    pub fn price(&self, key: &str) -> Option<Decimal> {
        self.prices.get(key).copied()
    }

    /// Charge for `quantity` units of `price_key`.
    /// A negative quantity is never charged as a credit: it is billed as 0
    /// (and logged; [`quantity_from_upstream`] keeps upstream figures out).
    pub fn charge(&self, price_key: &str, quantity: Decimal) -> Charge {
        let quantity = if quantity.is_sign_negative() && !quantity.is_zero() {
            tracing::error!(price_key, %quantity, "negative quantity billed as 0");
            Decimal::ZERO
        } else {
            quantity
        };
        let unit_price = self.price(price_key);
        let charged = match unit_price {
            Some(p) => with_markup(quantity * p, self.markup_pct),
            None => Decimal::ZERO,
        };
        Charge {
            price_key: price_key.to_owned(),
            quantity,
            unit_price,
            charged,
        }
    }

    /// The whole table (for `gateway prices` and docs).
    pub fn entries(&self) -> impl Iterator<Item = (&str, Decimal)> {
        self.prices.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

/// A JSON number as an exact decimal (through its text, never through f64 math).
pub fn decimal_from_json(v: &serde_json::Value) -> Option<Decimal> {
    match v {
        serde_json::Value::Number(n) => {
            let s = n.to_string();
            Decimal::from_str(&s)
                .or_else(|_| Decimal::from_scientific(&s))
                .ok()
        }
        serde_json::Value::String(s) => Decimal::from_str(s.trim()).ok(),
        _ => None,
    }
}

/// A quantity the upstream reported, read by [`quantity_from_upstream`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamQuantity {
    /// The field is absent (or `null`).
    Absent,
    /// A finite, non-negative quantity.
    Valid(Decimal),
    /// The field is present but negative, non-finite or not a number: it was
    /// logged at error level and must bill nothing.
    Rejected,
}

impl UpstreamQuantity {
    /// The valid quantity, if any.
    pub fn valid(self) -> Option<Decimal> {
        match self {
            UpstreamQuantity::Valid(d) => Some(d),
            _ => None,
        }
    }
}

/// The one place where an upstream figure becomes a billable quantity.
///
/// The upstream's figures (a synthesis `duration`, a job's `duration_seconds`
/// or `image_count`, through a GET or a signed webhook) are **never** trusted
/// to credit a balance: a negative, non-finite (`"NaN"`, `"Infinity"`, a
/// number beyond the decimal range) or non-numeric value is logged at error
/// level and answered [`UpstreamQuantity::Rejected`], and the caller bills
/// nothing for it. What each caller does then:
///
/// * **synthesis** measures the returned audio instead (as when the upstream
///   gives no duration) and bills that; when the audio cannot be measured
///   either, the request fails with 502 and nothing is billed;
/// * **a job** is recorded as completed but billed quantity 0 (its once-key
///   is spent, so a later observation cannot bill it again).
pub fn quantity_from_upstream(field: &str, v: Option<&serde_json::Value>) -> UpstreamQuantity {
    let v = match v {
        None | Some(serde_json::Value::Null) => return UpstreamQuantity::Absent,
        Some(v) => v,
    };
    match decimal_from_json(v) {
        Some(d) if !d.is_sign_negative() || d.is_zero() => UpstreamQuantity::Valid(d.abs()),
        other => {
            tracing::error!(
                field,
                value = %v,
                parsed = ?other,
                "the upstream reported a negative or non-finite quantity; billing nothing for it"
            );
            UpstreamQuantity::Rejected
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    /// As the table's `[prices]` says.
    const TABLE: &[PriceSpec] = &[
        PriceSpec {
            key: "tts.audio_seconds",
            price: "0.0005",
        },
        PriceSpec {
            key: "watermark_detect.audio_seconds",
            price: "0.0002",
        },
    ];

    /// `spec` and `markup` over the table's prices, as the gateway starts with them.
    fn prices(spec: Option<&str>, markup: &str) -> Prices {
        Prices::parse(spec, markup)
            .unwrap()
            .with_defaults(TABLE)
            .unwrap()
    }

    #[test]
    fn synthesis_charge_to_8_places() {
        let p = prices(None, "20.0");
        // 1 s × 0.0005 × 1.2 = 0.0006
        assert_eq!(
            p.charge("tts.audio_seconds", d("1")).charged_str(),
            "0.00060000"
        );
        // 2.345 s × 0.0005 × 1.2 = 0.001407
        assert_eq!(
            p.charge("tts.audio_seconds", d("2.345")).charged_str(),
            "0.00140700"
        );
        // 0.123456789 s × 0.0005 × 1.2 = 0.0000740740734 → 0.00007407
        assert_eq!(
            p.charge("tts.audio_seconds", d("0.123456789"))
                .charged_str(),
            "0.00007407"
        );
    }

    #[test]
    fn grants_are_checked_never_overflow() {
        assert_eq!(MAX_BALANCE, d("1000000000000000"));
        assert_eq!(check_grant(d("1"), d("2")), Ok(d("3")));
        assert!(check_grant(Decimal::ZERO, Decimal::MAX).is_err());
        assert!(check_grant(d("1"), d("79228162514264337593543950335")).is_err());
        assert!(check_grant(MAX_BALANCE, d("0.00000001")).is_err());
        assert!(check_grant(Decimal::ZERO, d("0")).is_err());
        assert!(check_grant(Decimal::ZERO, d("0.000000001")).is_err());
        assert_eq!(check_grant(Decimal::ZERO, d("1.500000000")), Ok(d("1.5")));
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        let p = Prices::parse(Some("x.units=0.000000005"), "0").unwrap();
        assert_eq!(p.charge("x.units", d("1")).charged_str(), "0.00000001");
        let p = Prices::parse(Some("x.units=0.000000015"), "0").unwrap();
        assert_eq!(p.charge("x.units", d("1")).charged_str(), "0.00000002");
        let p = Prices::parse(Some("x.units=0.0000000149"), "0").unwrap();
        assert_eq!(p.charge("x.units", d("1")).charged_str(), "0.00000001");
    }

    #[test]
    fn markup_then_half_away_from_zero_to_8_places() {
        // 0.0005 × 1.2 = 0.0006, exact.
        assert_eq!(with_markup(d("0.0005"), d("20")), d("0.0006"));
        // 0.000000005 × 1.0 is a midpoint: away from zero, both signs.
        assert_eq!(with_markup(d("0.000000005"), d("0")), d("0.00000001"));
        assert_eq!(with_markup(d("-0.000000005"), d("0")), d("-0.00000001"));
        // 0.000000025 × 1.0: away from zero, not to even.
        assert_eq!(with_markup(d("0.000000025"), d("0")), d("0.00000003"));
        // Just under a midpoint rounds down.
        assert_eq!(with_markup(d("0.0000000149"), d("0")), d("0.00000001"));
        // 0.123456789 × 1.5 = 0.1851851835 → 0.18518518.
        assert_eq!(with_markup(d("0.123456789"), d("50")), d("0.18518518"));
        // A fractional markup: 1 × 1.125.
        assert_eq!(with_markup(d("1"), d("12.5")), d("1.125"));
        assert_eq!(with_markup(Decimal::ZERO, d("20")), Decimal::ZERO);
        assert_eq!(round_charge(d("0.123456785")), d("0.12345679"));
    }

    #[test]
    fn unpriced_records_quantity_and_charges_nothing() {
        let p = prices(None, "20");
        let c = p.charge("tracing.audio_seconds", d("12.5"));
        assert!(c.unpriced());
        assert_eq!(
            (c.quantity, c.charged_str()),
            (d("12.5"), "0.00000000".to_owned())
        );
    }

    #[test]
    fn table_overrides_and_errors() {
        // The configured price of a key wins over the table's.
        let p = prices(
            Some("tts.audio_seconds=0.001, identity.searches=0.01"),
            "50",
        );
        assert_eq!(
            p.charge("tts.audio_seconds", d("2")).charged_str(),
            "0.00300000"
        );
        assert_eq!(
            p.charge("identity.searches", d("1")).charged_str(),
            "0.01500000"
        );
        assert_eq!(p.price("watermark_detect.audio_seconds"), Some(d("0.0002")));
        assert!(Prices::parse(Some("tts=1"), "20").is_err());
        assert!(Prices::parse(Some("tts.audio_seconds=abc"), "20").is_err());
        assert!(Prices::parse(Some("tts.audio_seconds=-1"), "20").is_err());
        assert!(Prices::parse(None, "x").is_err());
    }

    #[test]
    fn json_numbers_become_exact_decimals() {
        assert_eq!(
            decimal_from_json(&serde_json::json!(2.345)),
            Some(d("2.345"))
        );
        assert_eq!(decimal_from_json(&serde_json::json!(3)), Some(d("3")));
        assert_eq!(decimal_from_json(&serde_json::json!("1.5")), Some(d("1.5")));
        assert_eq!(decimal_from_json(&serde_json::json!(null)), None);
    }

    #[test]
    fn upstream_quantities_never_go_negative() {
        use serde_json::json;
        let q = |v: serde_json::Value| quantity_from_upstream("duration", Some(&v));
        assert_eq!(q(json!(2.5)), UpstreamQuantity::Valid(d("2.5")));
        assert_eq!(q(json!(0)), UpstreamQuantity::Valid(Decimal::ZERO));
        assert_eq!(q(json!(-0.0)), UpstreamQuantity::Valid(Decimal::ZERO));
        assert_eq!(q(json!(-500)), UpstreamQuantity::Rejected);
        assert_eq!(q(json!("-1")), UpstreamQuantity::Rejected);
        assert_eq!(q(json!("NaN")), UpstreamQuantity::Rejected);
        assert_eq!(q(json!("Infinity")), UpstreamQuantity::Rejected);
        assert_eq!(q(json!(1e300)), UpstreamQuantity::Rejected);
        assert_eq!(q(json!({"x": 1})), UpstreamQuantity::Rejected);
        assert_eq!(
            quantity_from_upstream("duration", None),
            UpstreamQuantity::Absent
        );
        assert_eq!(
            quantity_from_upstream("duration", Some(&json!(null))),
            UpstreamQuantity::Absent
        );
        let p = prices(None, "20");
        assert_eq!(
            p.charge("tts.audio_seconds", d("-500")).charged,
            Decimal::ZERO
        );
    }
}
