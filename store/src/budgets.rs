//! Budgets per key: a key may carry a budget in USD per period (a UTC day,
//! a calendar month in UTC, or its whole life), and what its requests spend
//! in the current period (charges, plus the holds of its requests in
//! flight) never exceeds it.
//!
//! The check rides in the credit hold's transaction ([`KeyBudgets::check`],
//! called by `balances::Balances::hold`), after the user's balance row is
//! locked: every writer of a key's holds and spend touches the user's
//! balance first (a hold reads it; a charge debits it), so the figures
//! cached here are exact for the transaction, on SQLite (one writer) and on
//! PostgreSQL (the row lock), however many instances share the database.
//!
//! What a key was charged is kept per period in `key_spend` (`period`:
//! `YYYY-MM-DD`, `YYYY-MM` or `total`, UTC): spend of an earlier period
//! simply is not read. A charge counts in the period of its settlement; a
//! held request's charge is added when its hold is released with it
//! ([`KeyBudgets::settle`]: the spend moves from held to charged), one
//! whose usage record names the key (the voice API's, held or not, and a
//! voice job's, by the key it was submitted with) when it is written
//! ([`KeyBudgets::charge`]; its hold, if any, released in the same
//! transaction, then counts no more).

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use chrono::{DateTime, Datelike, TimeZone, Utc};
use rust_decimal::Decimal;

use super::sql::{p, parse_dec, Db};
use super::{Reserved, Result, StoreError};

/// The period a key's budget covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// A UTC day.
    Day,
    /// A calendar month, in UTC.
    Month,
    /// The key's whole life.
    Total,
}

impl Period {
    /// `day`, `month` or `total`.
    pub fn parse(s: &str) -> Option<Period> {
        match s {
            "day" => Some(Period::Day),
            "month" => Some(Period::Month),
            "total" => Some(Period::Total),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Month => "month",
            Period::Total => "total",
        }
    }

    /// The period holding `now`, as `key_spend.period` names it.
    pub fn key(self, now: DateTime<Utc>) -> String {
        match self {
            Period::Day => now.format("%Y-%m-%d").to_string(),
            Period::Month => now.format("%Y-%m").to_string(),
            Period::Total => "total".to_owned(),
        }
    }

    /// When the period holding `now` ends (`None`: never).
    pub fn end(self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let day = now.date_naive();
        let next = match self {
            Period::Day => day.succ_opt()?,
            Period::Month if day.month() == 12 => {
                chrono::NaiveDate::from_ymd_opt(day.year() + 1, 1, 1)?
            }
            Period::Month => chrono::NaiveDate::from_ymd_opt(day.year(), day.month() + 1, 1)?,
            Period::Total => return None,
        };
        Some(Utc.from_utc_datetime(&next.and_hms_opt(0, 0, 0)?))
    }
}

/// A key's budget: at most `usd` per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub usd: Decimal,
    pub period: Period,
}

/// The most places a budget may have (the places of a charge).
const BUDGET_DP: u32 = 8;

impl Budget {
    /// From the caller's text: `usd` a positive decimal of at most 8
    /// places, `period` `day`, `month` or `total`. `Err`: what is wrong,
    /// naming the field.
    pub fn parse(usd: &str, period: &str) -> std::result::Result<Budget, String> {
        let amount: Decimal = usd
            .trim()
            .parse()
            .map_err(|_| format!("budget_usd: {usd:?} is not a decimal amount"))?;
        if amount <= Decimal::ZERO || amount.scale() > BUDGET_DP {
            return Err(format!(
                "budget_usd: must be above 0 with at most {BUDGET_DP} decimal places"
            ));
        }
        if amount > Decimal::from(1_000_000_000_000u64) {
            return Err("budget_usd: must be at most 1000000000000".into());
        }
        let period = Period::parse(period)
            .ok_or_else(|| format!("budget_period: {period:?} is not one of day, month, total"))?;
        Ok(Budget {
            usd: amount.normalize(),
            period,
        })
    }

    /// From the stored columns (`None` when the key has no budget).
    pub(super) fn stored(usd: Option<String>, period: Option<String>) -> Result<Option<Budget>> {
        let (Some(usd), Some(period)) = (usd, period) else {
            return Ok(None);
        };
        let period = Period::parse(&period)
            .ok_or_else(|| StoreError::msg(format!("stored budget period {period:?}")))?;
        Ok(Some(Budget {
            usd: parse_dec(&usd)?,
            period,
        }))
    }
}

/// A key's budget and what it spent, as a listing shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBudget {
    pub budget: Budget,
    /// Charged in the current period.
    pub spent: Decimal,
    /// Held by its requests in flight.
    pub held: Decimal,
    /// When the current period ends (`None`: `total`).
    pub period_end: Option<DateTime<Utc>>,
}

/// A budgeted key's figures as one transaction sees them.
struct Account {
    budget: Budget,
    /// The current period (`key_spend.period`).
    period: String,
    spent: Decimal,
    /// Sum of its live holds, once read.
    held: Option<Decimal>,
}

/// The budgets a transaction touched (see the module docs).
#[derive(Default)]
pub(super) struct KeyBudgets {
    /// `None`: the key has no budget.
    keys: HashMap<i64, Option<Account>>,
    /// Charges written in this transaction whose key is their hold's,
    /// by request id, until the hold is released ([`KeyBudgets::settle`]).
    pending: HashMap<String, Decimal>,
}

impl KeyBudgets {
    /// The key's figures (read on the first touch); `None`: no budget.
    fn account(&mut self, tx: &mut Db<'_>, key_id: i64) -> Result<Option<&mut Account>> {
        let account = match self.keys.entry(key_id) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(read_account(tx, key_id, Utc::now())?),
        };
        Ok(account.as_mut())
    }

    /// Whether `amount` more fits the key's budget. `Ok(None)`: it does,
    /// or the key has none (`budgeted` says which); else the refusal.
    /// Call after the user's stale holds were swept (`Balances::hold`).
    pub(super) fn check(
        &mut self,
        tx: &mut Db<'_>,
        key_id: i64,
        amount: Decimal,
        budgeted: &mut bool,
    ) -> Result<Option<Reserved>> {
        let Some(a) = self.account(tx, key_id)? else {
            return Ok(None);
        };
        *budgeted = true;
        let held = match a.held {
            Some(h) => h,
            None => {
                let amounts = tx.rows(
                    "SELECT amount FROM credit_holds WHERE key_id = ?1",
                    p![key_id],
                    |r| r.dec(0),
                )?;
                let h = sum(amounts)?;
                a.held = Some(h);
                h
            }
        };
        let used = a.spent.checked_add(held).ok_or_else(overflow)?;
        let after = used.checked_add(amount).ok_or_else(overflow)?;
        if after > a.budget.usd {
            return Ok(Some(Reserved::OverBudget {
                budget: a.budget,
                used,
            }));
        }
        a.held = Some(held.checked_add(amount).ok_or_else(overflow)?);
        Ok(None)
    }

    /// A charge of `amount` written for `request_id`: the key's spend at
    /// once when the key is known (`key_id`), else when the request's hold
    /// is released ([`KeyBudgets::settle`]).
    pub(super) fn charge(
        &mut self,
        tx: &mut Db<'_>,
        key_id: Option<i64>,
        request_id: &str,
        amount: Decimal,
    ) -> Result<()> {
        match key_id {
            Some(k) => self.spend(tx, k, amount),
            None => {
                self.pending.insert(request_id.to_owned(), amount);
                Ok(())
            }
        }
    }

    /// The hold of `request_id` on `key_id` of `amount` ended: it counts
    /// no more, and the request's charge, if written, counts as spent.
    pub(super) fn settle(
        &mut self,
        tx: &mut Db<'_>,
        key_id: i64,
        request_id: &str,
        amount: Decimal,
    ) -> Result<()> {
        if let Some(Some(Account { held: Some(h), .. })) = self.keys.get_mut(&key_id) {
            *h = h.checked_sub(amount).ok_or_else(overflow)?;
        }
        match self.pending.remove(request_id) {
            Some(charged) => self.spend(tx, key_id, charged),
            None => Ok(()),
        }
    }

    /// Adds `amount` to what a budgeted key spent in its current period.
    fn spend(&mut self, tx: &mut Db<'_>, key_id: i64, amount: Decimal) -> Result<()> {
        let Some(a) = self.account(tx, key_id)? else {
            return Ok(());
        };
        a.spent = a.spent.checked_add(amount).ok_or_else(overflow)?;
        tx.defer(
            "INSERT INTO key_spend (key_id, period, spent) VALUES (?1, ?2, ?3)
             ON CONFLICT (key_id, period) DO UPDATE SET spent = excluded.spent",
            p![
                key_id,
                a.period,
                gateway_base::billing::format_money(a.spent)
            ],
        )?;
        Ok(())
    }
}

/// A key's budget and its spend in the period holding `now`.
fn read_account(tx: &mut Db<'_>, key_id: i64, now: DateTime<Utc>) -> Result<Option<Account>> {
    let stored: Option<(Option<String>, Option<String>)> = tx.row(
        "SELECT budget_usd, budget_period FROM api_keys WHERE id = ?1",
        p![key_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let Some(budget) = stored
        .map(|(u, per)| Budget::stored(u, per))
        .transpose()?
        .flatten()
    else {
        return Ok(None);
    };
    let period = budget.period.key(now);
    let spent = spent_in(tx, key_id, &period)?;
    Ok(Some(Account {
        budget,
        period,
        spent,
        held: None,
    }))
}

pub(super) fn spent_in(db: &mut Db<'_>, key_id: i64, period: &str) -> Result<Decimal> {
    db.row(
        "SELECT spent FROM key_spend WHERE key_id = ?1 AND period = ?2",
        p![key_id, period],
        |r| r.dec(0),
    )
    .map(Option::unwrap_or_default)
}

/// The sum of hold amounts (checked).
pub(super) fn sum(amounts: Vec<Decimal>) -> Result<Decimal> {
    amounts
        .into_iter()
        .try_fold(Decimal::ZERO, Decimal::checked_add)
        .ok_or_else(overflow)
}

fn overflow() -> StoreError {
    StoreError::msg("a key's spend would overflow the decimal range")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_and_their_ends() {
        let t = Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 59).unwrap();
        assert_eq!(Period::Day.key(t), "2026-12-31");
        assert_eq!(Period::Month.key(t), "2026-12");
        assert_eq!(Period::Total.key(t), "total");
        let end = |p: Period| p.end(t).map(|e| e.to_rfc3339());
        assert_eq!(end(Period::Day).unwrap(), "2027-01-01T00:00:00+00:00");
        assert_eq!(end(Period::Month).unwrap(), "2027-01-01T00:00:00+00:00");
        assert_eq!(end(Period::Total), None);
    }

    #[test]
    fn budgets_parse_strictly() {
        let b = Budget::parse("5", "day").unwrap();
        assert_eq!((b.usd, b.period), (Decimal::from(5), Period::Day));
        assert!(Budget::parse("0.12345678", "month").is_ok());
        for (usd, period) in [
            ("0.123456789", "day"),
            ("0", "day"),
            ("-1", "day"),
            ("five", "day"),
            ("5", "week"),
        ] {
            assert!(Budget::parse(usd, period).is_err(), "{usd} {period}");
        }
    }
}
