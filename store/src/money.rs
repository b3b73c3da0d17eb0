//! Repositories of money: credit balances and the ledger, holds, a key's
//! budget as it stands.

use rust_decimal::Decimal;

use super::balances::{sum_holds, sum_key_holds, Balances};
use super::budgets::{Budget, KeyBudget};
use super::sql::{p, Db};
use super::Accounts;
use super::{now_rfc3339, Result, Store, StoreError};

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

/// The outcome of [`Ledger::reserve`].
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

/// Money held and owed: credit balances and their ledger, the holds a
/// request takes before it runs and their release, and a key's budget as
/// it stands. Usage is written by the record writer; this is what is read
/// and granted around it.
pub trait Ledger {
    /// Adds credit to a user (`gateway credits grant`); returns the new balance.
    fn grant_credit(&self, user_id: i64, amount: Decimal, note: Option<&str>) -> Result<Decimal>;

    /// A user's credit balance (0 when never credited nor charged).
    fn balance(&self, user_id: i64) -> Result<Decimal>;

    /// A user's ledger, oldest first.
    fn ledger(&self, user_id: i64) -> Result<Vec<LedgerRow>>;

    /// Holds `amount` of a user's credit for `request_id`, in one
    /// `BEGIN IMMEDIATE` transaction (so two requests cannot both take the
    /// last credit): written only when the balance minus the user's other
    /// live holds covers it. (The request path uses [`Record::Hold`]
    /// through the group-commit writer instead: same rule, no lock waits.)
    ///
    /// [`Record::Hold`]: super::Record::Hold
    fn reserve(&self, user_id: i64, request_id: &str, amount: Decimal) -> Result<Reserved>;

    /// Owes the end of `request_id`'s hold to the record writer, which
    /// deletes it with its next batch (a hold dropped where no commit can
    /// be awaited).
    fn owe_release(&self, request_id: String);

    /// Whether the end of `request_id`'s hold is owed to the record writer:
    /// a commit ending it (a stream's settlement) or its release failed,
    /// the database unreachable, and it has not answered since.
    fn owes_release(&self, request_id: &str) -> bool;

    /// The sum of a user's live holds.
    fn held(&self, user_id: i64) -> Result<Decimal>;

    /// A user's holds, live or not: `(request_id, instance)` (tests,
    /// operators).
    fn holds_of(&self, user_id: i64) -> Result<Vec<(String, Option<String>)>>;

    /// A key's budget and what it spent and holds (`None`: no budget, or
    /// no such key).
    fn key_budget(&self, key_id: i64) -> Result<Option<KeyBudget>>;
}

impl Ledger for Store {
    fn grant_credit(&self, user_id: i64, amount: Decimal, note: Option<&str>) -> Result<Decimal> {
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

    fn balance(&self, user_id: i64) -> Result<Decimal> {
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

    fn ledger(&self, user_id: i64) -> Result<Vec<LedgerRow>> {
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

    fn reserve(&self, user_id: i64, request_id: &str, amount: Decimal) -> Result<Reserved> {
        self.transaction(|tx| Balances::default().hold(tx, user_id, request_id, amount, None, true))
    }

    fn owe_release(&self, request_id: String) {
        self.writer.owe_release(request_id);
    }

    fn owes_release(&self, request_id: &str) -> bool {
        self.writer.owes_release(request_id)
    }

    fn held(&self, user_id: i64) -> Result<Decimal> {
        self.with(|db| sum_holds(db, user_id))
    }

    fn holds_of(&self, user_id: i64) -> Result<Vec<(String, Option<String>)>> {
        self.with(|db| {
            db.rows(
                "SELECT request_id, instance FROM credit_holds WHERE user_id = ?1 ORDER BY request_id",
                p![user_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }

    fn key_budget(&self, key_id: i64) -> Result<Option<KeyBudget>> {
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
