//! Repositories of money: usage records, credit balances and the ledger,
//! daily totals for reconciliation.

use std::collections::BTreeMap;
use std::str::FromStr;

use rusqlite::{params, OptionalExtension, TransactionBehavior};
use rust_decimal::Decimal;

use super::writer::apply_credit;
use super::{now_rfc3339, Result, Store, StoreError};

/// A usage row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRow {
    pub id: i64,
    pub request_id: String,
    pub user_id: Option<i64>,
    pub route_id: String,
    pub product: String,
    pub unit: String,
    pub quantity: Decimal,
    pub unit_price: Option<Decimal>,
    pub charged: Decimal,
    pub unpriced: bool,
    pub once_key: Option<String>,
    pub created_at: String,
}

/// A ledger line as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    pub user_id: i64,
    pub amount: Decimal,
    pub balance_after: Decimal,
    pub kind: String,
    pub usage_id: Option<i64>,
    pub note: Option<String>,
}

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

fn dec(s: String) -> rusqlite::Result<Decimal> {
    Decimal::from_str(&s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

fn opt_dec(s: Option<String>) -> rusqlite::Result<Option<Decimal>> {
    s.map(dec).transpose()
}

impl Store {
    /// Adds credit to a user (`gateway credits grant`); returns the new balance.
    pub fn grant_credit(
        &self,
        user_id: i64,
        amount: Decimal,
        note: Option<&str>,
    ) -> Result<Decimal> {
        if self.user(user_id)?.is_none() {
            return Err(StoreError(format!("no user with id {user_id}")));
        }
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let after = apply_credit(&tx, user_id, amount, "grant", None, note, &now_rfc3339())?;
        tx.commit()?;
        Ok(after)
    }

    /// A user's credit balance (0 when never credited nor charged).
    pub fn balance(&self, user_id: i64) -> Result<Decimal> {
        let conn = self.conn()?;
        let s: Option<String> = conn
            .query_row(
                "SELECT balance FROM credit_balances WHERE user_id = ?1",
                [user_id],
                |r| r.get(0),
            )
            .optional()?;
        Ok(s.map(dec).transpose()?.unwrap_or(Decimal::ZERO))
    }

    /// Every usage row, oldest first.
    pub fn usage_rows(&self) -> Result<Vec<UsageRow>> {
        self.usage_rows_where(None)
    }

    /// One user's usage rows, oldest first.
    pub fn usage_rows_of(&self, user_id: i64) -> Result<Vec<UsageRow>> {
        self.usage_rows_where(Some(user_id))
    }

    fn usage_rows_where(&self, user_id: Option<i64>) -> Result<Vec<UsageRow>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT id, request_id, user_id, route_id, product, unit, quantity, unit_price, charged, unpriced, once_key, created_at
             FROM usage WHERE ?1 IS NULL OR user_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([user_id], |r| {
            Ok(UsageRow {
                id: r.get(0)?,
                request_id: r.get(1)?,
                user_id: r.get(2)?,
                route_id: r.get(3)?,
                product: r.get(4)?,
                unit: r.get(5)?,
                quantity: dec(r.get(6)?)?,
                unit_price: opt_dec(r.get(7)?)?,
                charged: dec(r.get(8)?)?,
                unpriced: r.get(9)?,
                once_key: r.get(10)?,
                created_at: r.get(11)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// A user's ledger, oldest first.
    pub fn ledger(&self, user_id: i64) -> Result<Vec<LedgerRow>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT user_id, amount, balance_after, kind, usage_id, note FROM credit_ledger WHERE user_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([user_id], |r| {
            Ok(LedgerRow {
                user_id: r.get(0)?,
                amount: dec(r.get(1)?)?,
                balance_after: dec(r.get(2)?)?,
                kind: r.get(3)?,
                usage_id: r.get(4)?,
                note: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Quantities per (product, unit) recorded on a UTC day (`YYYY-MM-DD`),
    /// summed exactly in decimal.
    pub fn usage_totals(&self, day: &str) -> Result<BTreeMap<(String, String), Decimal>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT product, unit, quantity FROM usage WHERE created_at >= ?1 AND created_at < ?2 AND quantity != '0'",
        )?;
        let (from, to) = day_bounds(day)?;
        let mut totals = BTreeMap::new();
        let rows = stmt.query_map(params![from, to], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                dec(r.get(2)?)?,
            ))
        })?;
        for row in rows {
            let (product, unit, q) = row?;
            *totals.entry((product, unit)).or_insert(Decimal::ZERO) += q;
        }
        Ok(totals)
    }

    /// Stores one reconciliation comparison.
    pub fn insert_reconciliation(&self, r: &ReconciliationRow) -> Result<()> {
        self.conn()?.execute(
            "INSERT INTO reconciliation_runs (day, product, gateway_total, upstream_total, drift_pct, status, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                r.day,
                r.product,
                r.gateway_total.to_string(),
                r.upstream_total.map(|d| d.to_string()),
                r.drift_pct.map(|d| d.to_string()),
                r.status,
                now_rfc3339()
            ],
        )?;
        Ok(())
    }

    /// Stored reconciliation comparisons of a day, in insertion order.
    pub fn reconciliations(&self, day: &str) -> Result<Vec<ReconciliationRow>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT day, product, gateway_total, upstream_total, drift_pct, status FROM reconciliation_runs WHERE day = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([day], |r| {
            Ok(ReconciliationRow {
                day: r.get(0)?,
                product: r.get(1)?,
                gateway_total: dec(r.get(2)?)?,
                upstream_total: opt_dec(r.get(3)?)?,
                drift_pct: opt_dec(r.get(4)?)?,
                status: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

/// The outcome of [`Store::reserve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reserved {
    /// The hold is written.
    Held,
    /// Balance minus the user's other holds is below the amount; nothing written.
    Insufficient {
        balance: Decimal,
        available: Decimal,
    },
}

/// A model request's token detail as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelUsageRow {
    pub request_id: String,
    pub user_id: Option<i64>,
    pub route_id: String,
    pub model: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub counted: bool,
    pub byok: bool,
    pub ended: String,
}

/// Holds older than this are stale (a crashed instance's) and count no more.
const HOLD_TTL_HOURS: i64 = 24;

impl Store {
    /// Holds `amount` of a user's credit for `request_id`, in one
    /// `BEGIN IMMEDIATE` transaction (so two requests cannot both take the
    /// last credit): written only when the balance minus the user's other
    /// live holds covers it. (The request path uses [`Record::Hold`]
    /// through the group-commit writer instead: same rule, no lock waits.)
    ///
    /// [`Record::Hold`]: super::Record::Hold
    pub fn reserve(&self, user_id: i64, request_id: &str, amount: Decimal) -> Result<Reserved> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let r = hold(&tx, user_id, request_id, amount)?;
        tx.commit()?;
        Ok(r)
    }

    /// Ends a hold without a charge (the request failed).
    pub fn release_hold(&self, request_id: &str) -> Result<()> {
        self.conn()?.execute(
            "DELETE FROM credit_holds WHERE request_id = ?1",
            [request_id],
        )?;
        Ok(())
    }

    /// The sum of a user's live holds.
    pub fn held(&self, user_id: i64) -> Result<Decimal> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare("SELECT amount FROM credit_holds WHERE user_id = ?1")?;
        let mut held = Decimal::ZERO;
        for a in stmt.query_map([user_id], |r| dec(r.get(0)?))? {
            held += a?;
        }
        Ok(held)
    }

    /// Models ranked by requests since `since` (RFC 3339), most first.
    pub fn trending_models(&self, since: &str, limit: usize) -> Result<Vec<(String, i64)>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT model, COUNT(*) AS n FROM model_usage WHERE created_at >= ?1
             GROUP BY model ORDER BY n DESC, model LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![since, limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Every model-usage row, oldest first.
    pub fn model_usage_rows(&self) -> Result<Vec<ModelUsageRow>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT request_id, user_id, route_id, model, input_tokens, output_tokens, counted, byok, ended
             FROM model_usage ORDER BY id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(ModelUsageRow {
                request_id: r.get(0)?,
                user_id: r.get(1)?,
                route_id: r.get(2)?,
                model: r.get(3)?,
                input_tokens: r.get(4)?,
                output_tokens: r.get(5)?,
                counted: r.get(6)?,
                byok: r.get(7)?,
                ended: r.get(8)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}

/// Inside a write transaction: writes the hold when the user's balance
/// minus their other live holds covers `amount` (stale holds, older than
/// [`HOLD_TTL_HOURS`], are dropped first).
pub(super) fn hold(
    tx: &rusqlite::Connection,
    user_id: i64,
    request_id: &str,
    amount: Decimal,
) -> rusqlite::Result<Reserved> {
    let now = chrono::Utc::now();
    let stale = super::rfc3339(now - chrono::Duration::hours(HOLD_TTL_HOURS));
    tx.prepare_cached("DELETE FROM credit_holds WHERE user_id = ?1 AND created_at < ?2")?
        .execute(params![user_id, stale])?;
    let balance: Decimal = tx
        .prepare_cached("SELECT balance FROM credit_balances WHERE user_id = ?1")?
        .query_row([user_id], |r| r.get::<_, String>(0))
        .optional()?
        .map(dec)
        .transpose()?
        .unwrap_or(Decimal::ZERO);
    let mut held = Decimal::ZERO;
    {
        let mut stmt = tx.prepare_cached("SELECT amount FROM credit_holds WHERE user_id = ?1")?;
        for a in stmt.query_map([user_id], |r| dec(r.get(0)?))? {
            held += a?;
        }
    }
    let available = balance - held;
    if available < amount {
        return Ok(Reserved::Insufficient { balance, available });
    }
    tx.prepare_cached(
        "INSERT INTO credit_holds (request_id, user_id, amount, created_at) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![request_id, user_id, amount.to_string(), super::rfc3339(now)])?;
    Ok(Reserved::Held)
}

/// `[day 00:00, next day 00:00)` as stored timestamps compare.
fn day_bounds(day: &str) -> Result<(String, String)> {
    let d = chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d")
        .map_err(|e| StoreError(format!("date {day:?}: {e}")))?;
    let next = d
        .succ_opt()
        .ok_or_else(|| StoreError("date out of range".into()))?;
    Ok((
        format!("{d}T00:00:00.000Z"),
        format!("{next}T00:00:00.000Z"),
    ))
}
