//! Repositories of money: usage records, credit balances and the ledger,
//! daily totals for reconciliation.

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use super::balances::{sum_holds, sum_key_holds, Balances};
use super::budgets::{Budget, KeyBudget};
use super::sql::{p, Db, Row};
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

impl Store {
    /// Adds credit to a user (`gateway credits grant`); returns the new balance.
    pub fn grant_credit(
        &self,
        user_id: i64,
        amount: Decimal,
        note: Option<&str>,
    ) -> Result<Decimal> {
        if self.user(user_id)?.is_none() {
            return Err(StoreError::msg(format!("no user with id {user_id}")));
        }
        self.transaction(|tx| {
            let mut balances = Balances::default();
            let at = now_rfc3339();
            let before = balances.balance(tx, user_id, &at)?;
            gateway_base::billing::check_grant(before, amount).map_err(StoreError::msg)?;
            let after = balances.apply(tx, user_id, amount, "grant", None, note, &at)?;
            balances.flush(tx)?;
            Ok(after)
        })
    }

    /// A user's credit balance (0 when never credited nor charged).
    pub fn balance(&self, user_id: i64) -> Result<Decimal> {
        Ok(self
            .with(|db| {
                db.row(
                    "SELECT balance FROM credit_balances WHERE user_id = ?1",
                    p![user_id],
                    |r| r.dec(0),
                )
            })?
            .unwrap_or(Decimal::ZERO))
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
        let row = |r: &Row<'_>| {
            Ok(UsageRow {
                id: r.get(0)?,
                request_id: r.get(1)?,
                user_id: r.get(2)?,
                route_id: r.get(3)?,
                product: r.get(4)?,
                unit: r.get(5)?,
                quantity: r.dec(6)?,
                unit_price: r.opt_dec(7)?,
                charged: r.dec(8)?,
                unpriced: r.get(9)?,
                once_key: r.get(10)?,
                created_at: r.get(11)?,
            })
        };
        const COLS: &str = "SELECT id, request_id, user_id, route_id, product, unit, quantity, unit_price, charged, unpriced, once_key, created_at FROM usage";
        self.with(|db| match user_id {
            None => db.rows(&format!("{COLS} ORDER BY id"), &[], row),
            Some(u) => db.rows(
                &format!("{COLS} WHERE user_id = ?1 ORDER BY id"),
                p![u],
                row,
            ),
        })
    }

    /// A user's ledger, oldest first.
    pub fn ledger(&self, user_id: i64) -> Result<Vec<LedgerRow>> {
        self.with(|db| {
            db.rows(
                "SELECT user_id, amount, balance_after, kind, usage_id, note FROM credit_ledger WHERE user_id = ?1 ORDER BY id",
                p![user_id],
                |r| {
                    Ok(LedgerRow {
                        user_id: r.get(0)?,
                        amount: r.dec(1)?,
                        balance_after: r.dec(2)?,
                        kind: r.get(3)?,
                        usage_id: r.get(4)?,
                        note: r.get(5)?,
                    })
                },
            )
        })
    }

    /// Quantities per (product, unit) recorded on a UTC day (`YYYY-MM-DD`),
    /// summed exactly in decimal.
    pub fn usage_totals(&self, day: &str) -> Result<BTreeMap<(String, String), Decimal>> {
        let (from, to) = day_bounds(day)?;
        let rows = self.with(|db| {
            db.rows(
                "SELECT product, unit, quantity FROM usage WHERE created_at >= ?1 AND created_at < ?2 AND quantity != '0'",
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

    /// Stores one reconciliation comparison.
    pub fn insert_reconciliation(&self, r: &ReconciliationRow) -> Result<()> {
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

    /// Stored reconciliation comparisons of a day, in insertion order.
    pub fn reconciliations(&self, day: &str) -> Result<Vec<ReconciliationRow>> {
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
    /// The request's key has a budget, and what it spent and holds in the
    /// current period (`used`) plus the amount would exceed it; nothing
    /// written.
    OverBudget {
        budget: super::Budget,
        used: Decimal,
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
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub counted: bool,
    pub byok: bool,
    pub ended: String,
    /// Upstream attempts.
    pub attempts: i64,
    /// The route the caller named.
    pub route: Option<String>,
}

impl Store {
    /// Holds `amount` of a user's credit for `request_id`, in one
    /// `BEGIN IMMEDIATE` transaction (so two requests cannot both take the
    /// last credit): written only when the balance minus the user's other
    /// live holds covers it. (The request path uses [`Record::Hold`]
    /// through the group-commit writer instead: same rule, no lock waits.)
    ///
    /// [`Record::Hold`]: super::Record::Hold
    pub fn reserve(&self, user_id: i64, request_id: &str, amount: Decimal) -> Result<Reserved> {
        self.transaction(|tx| Balances::default().hold(tx, user_id, request_id, amount, None, true))
    }

    /// Ends a hold without a charge (the request failed). If the database
    /// cannot be reached, the release is owed: the record writer deletes
    /// the hold as soon as it answers again.
    pub fn release_hold(&self, request_id: &str) -> Result<()> {
        let released = self.with(|db| {
            db.exec(
                "DELETE FROM credit_holds WHERE request_id = ?1",
                p![request_id],
            )
        });
        if released.is_err() {
            self.writer.owe_release(request_id.to_owned());
        }
        released.map(drop)
    }

    /// Whether the end of `request_id`'s hold is owed to the record writer:
    /// a commit ending it (a stream's settlement) or its release failed,
    /// the database unreachable, and it has not answered since.
    pub fn owes_release(&self, request_id: &str) -> bool {
        self.writer.owes_release(request_id)
    }

    /// The sum of a user's live holds.
    pub fn held(&self, user_id: i64) -> Result<Decimal> {
        self.with(|db| sum_holds(db, user_id))
    }

    /// Models ranked by requests since `since` (RFC 3339), most first.
    pub fn trending_models(&self, since: &str, limit: usize) -> Result<Vec<(String, i64)>> {
        self.with(|db| {
            db.rows(
                "SELECT model, COUNT(*) AS n FROM model_usage WHERE created_at >= ?1
                 GROUP BY model ORDER BY n DESC, model LIMIT ?2",
                p![since, limit],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }

    /// Every model-usage row, oldest first.
    pub fn model_usage_rows(&self) -> Result<Vec<ModelUsageRow>> {
        self.with(|db| {
            db.rows(
                "SELECT request_id, user_id, route_id, model, input_tokens, output_tokens, counted, byok, ended,
                        cache_read_tokens, cache_write_tokens, attempts, route
                 FROM model_usage ORDER BY id",
                &[],
                |r| {
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
                        cache_read_tokens: r.get(9)?,
                        cache_write_tokens: r.get(10)?,
                        attempts: r.get(11)?,
                        route: r.get(12)?,
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

impl Store {
    /// A key's budget and what it spent and holds (`None`: no budget, or
    /// no such key).
    pub fn key_budget(&self, key_id: i64) -> Result<Option<KeyBudget>> {
        self.with(|db| {
            let stored: Option<(Option<String>, Option<String>)> = db.row(
                "SELECT budget_usd, budget_period FROM api_keys WHERE id = ?1",
                p![key_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            match stored {
                Some((usd, period)) => key_budget(db, key_id, usd, period),
                None => Ok(None),
            }
        })
    }
}

/// A key's budget as a listing shows it (`None`: no budget); `held` counts
/// live holds only ([`sum_key_holds`]).
pub(super) fn key_budget(
    db: &mut Db<'_>,
    key_id: i64,
    usd: Option<String>,
    period: Option<String>,
) -> Result<Option<KeyBudget>> {
    let Some(budget) = Budget::stored(usd, period)? else {
        return Ok(None);
    };
    let now = chrono::Utc::now();
    let spent = super::budgets::spent_in(db, key_id, &budget.period.key(now))?;
    Ok(Some(KeyBudget {
        budget,
        spent,
        held: sum_key_holds(db, key_id)?,
        period_end: budget.period.end(now),
    }))
}
