//! Repositories of the nightly reconciliation's runs.

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use super::sql::p;
use super::{now_rfc3339, Result, Store, StoreError};

/// One stored reconciliation comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconciliationRow {
    pub day: String,
    pub product: String,
    pub gateway_total: Decimal,
    pub upstream_total: Option<Decimal>,
    pub drift_pct: Option<Decimal>,
    pub status: String,
}

/// The nightly reconciliation's runs: what the gateway charged for a day
/// against what the provider reports, kept for operators.
pub trait Reconciliations {
    /// Quantities per (product, unit) recorded on a UTC day (`YYYY-MM-DD`),
    /// summed exactly in decimal.
    fn usage_totals(&self, day: &str) -> Result<BTreeMap<(String, String), Decimal>>;

    /// Stores one reconciliation comparison.
    fn insert_reconciliation(&self, r: &ReconciliationRow) -> Result<()>;

    /// Stored reconciliation comparisons of a day, in insertion order.
    fn reconciliations(&self, day: &str) -> Result<Vec<ReconciliationRow>>;
}

impl Reconciliations for Store {
    fn usage_totals(&self, day: &str) -> Result<BTreeMap<(String, String), Decimal>> {
        let (from, to) = day_bounds(day)?;
        let rows = self.with(|db| {
            db.rows(
                "SELECT product, unit, quantity FROM usage_records WHERE created_at >= ?1 AND created_at < ?2 AND quantity != '0'",
                p![from, to],
                |r| Ok((r.get::<String>(0)?, r.get::<String>(1)?, r.dec(2)?)),
            )
        })?;
        let mut totals = BTreeMap::new();
        for (product, unit, q) in rows {
            *totals.entry((product, unit)).or_insert(Decimal::ZERO) += q;
        }
        Ok(totals)
    }

    fn insert_reconciliation(&self, r: &ReconciliationRow) -> Result<()> {
        self.with(|db| {
            db.exec(
                "INSERT INTO reconciliation_runs (day, product, gateway_total, upstream_total, drift_pct, status, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                p![
                    r.day,
                    r.product,
                    r.gateway_total.to_string(),
                    r.upstream_total.map(|d| d.to_string()),
                    r.drift_pct.map(|d| d.to_string()),
                    r.status,
                    now_rfc3339()
                ],
            )
        })?;
        Ok(())
    }

    fn reconciliations(&self, day: &str) -> Result<Vec<ReconciliationRow>> {
        self.with(|db| {
            db.rows(
                "SELECT day, product, gateway_total, upstream_total, drift_pct, status FROM reconciliation_runs WHERE day = ?1 ORDER BY id",
                p![day],
                |r| {
                    Ok(ReconciliationRow {
                        day: r.get(0)?,
                        product: r.get(1)?,
                        gateway_total: r.dec(2)?,
                        upstream_total: r.opt_dec(3)?,
                        drift_pct: r.opt_dec(4)?,
                        status: r.get(5)?,
                    })
                },
            )
        })
    }
}

/// `[day 00:00, next day 00:00)` as stored timestamps compare.
fn day_bounds(day: &str) -> Result<(String, String)> {
    let d = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d")
        .map_err(|e| StoreError::caused(format!("date {day:?}"), e))?;
    let next = d
        .succ_opt()
        .ok_or_else(|| StoreError::msg("date out of range"))?;
    Ok((
        format!("{d}T00:00:00.000Z"),
        format!("{next}T00:00:00.000Z"),
    ))
}
