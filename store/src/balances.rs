//! Credit balances and holds inside one write transaction.
//!
//! Every change of a balance or of its holds goes through [`Balances`], the
//! transaction's view of the users it touched. The first touch of a user
//! locks the user's balance row ([`Balances::balance`]) and reads it; later
//! changes in the same transaction work on the cached figures, and the
//! balance row is written once, by [`Balances::flush`], before the commit.
//!
//! That is what makes a group commit of many requests of one user cheap:
//! the record writer keeps one `Balances` for the whole group, so N holds
//! cost one balance read, one sweep of stale holds, one sum of live holds
//! and N inserts (not N of each, with the sum growing with N), and N
//! charges cost N ledger lines and one balance write.
//!
//! Why the cache is exact: the balance row stays locked until the
//! transaction ends (SQLite's `BEGIN IMMEDIATE` locks the whole database;
//! PostgreSQL's row lock is taken by the first read), and every writer of a
//! balance or of holds takes that lock first, so nobody else changes a
//! cached user's balance or holds meanwhile. Every hold ends here too
//! ([`Balances::release`], a [`super::Record::HoldRelease`], whether its
//! request settled or failed), except the recovery paths of the writer
//! itself (owed releases, a dead instance's holds), which run between
//! groups.

use std::collections::HashMap;

use rust_decimal::Decimal;

use super::budgets::KeyBudgets;
use super::sql::{p, Db, Dialect};
use super::{Reserved, Result};

/// Holds older than this are stale and count no more (the last safety
/// net: a hold of a crashed instance stops counting when its instance's
/// lease lapses, see [`super::instances`]).
pub(super) const HOLD_TTL_HOURS: i64 = 24;

/// One user's figures as this transaction sees them.
struct Account {
    balance: Decimal,
    /// Sum of live holds, once read.
    held: Option<Decimal>,
    /// The balance changed: [`Balances::flush`] writes it.
    dirty: bool,
}

/// The balances and holds a transaction touched (see the module docs).
#[derive(Default)]
pub(super) struct Balances {
    accounts: HashMap<i64, Account>,
    /// The newest change's time, written as `updated_at`.
    at: String,
    /// The instance whose requests take the holds (`credit_holds.instance`).
    instance: Option<String>,
    /// The budgets of the keys whose requests hold or are charged
    /// ([`super::budgets`]); a written charge is counted through it.
    pub(super) keys: KeyBudgets,
}

impl Balances {
    /// The instance whose requests take the holds.
    pub(super) fn instance(&self) -> Option<&str> {
        self.instance.as_deref()
    }

    /// A transaction's balances whose holds are taken by `instance`.
    pub(super) fn of_instance(instance: Option<&str>) -> Balances {
        Balances {
            instance: instance.map(str::to_owned),
            ..Balances::default()
        }
    }

    /// The user's balance (0 when never credited), locking its row on the
    /// first touch. SQLite's `BEGIN IMMEDIATE` already serialises every
    /// writer, so there it is a plain read.
    pub(super) fn balance(&mut self, tx: &mut Db<'_>, user_id: i64, at: &str) -> Result<Decimal> {
        if let Some(a) = self.accounts.get(&user_id) {
            return Ok(a.balance);
        }
        let stored: Option<String> = match tx.dialect() {
            Dialect::Sqlite => tx.row(
                "SELECT balance FROM credit_balances WHERE user_id = ?1",
                p![user_id],
                |r| r.get(0),
            )?,
            Dialect::Postgres => tx.row(
                "INSERT INTO credit_balances (user_id, balance, updated_at) VALUES (?1, '0.00000000', ?2)
                 ON CONFLICT (user_id) DO UPDATE SET updated_at = credit_balances.updated_at
                 RETURNING balance",
                p![user_id, at],
                |r| r.get(0),
            )?,
        };
        let balance = stored.map_or(Ok(Decimal::ZERO), |s| super::sql::parse_dec(&s))?;
        self.accounts.insert(
            user_id,
            Account {
                balance,
                held: None,
                dirty: false,
            },
        );
        Ok(balance)
    }

    /// On PostgreSQL, whose several writers write groups at once
    /// (`writer::PG_WRITERS`): locks the balance of every user `records`
    /// hold or charge, in the order of user ids, before anything else is
    /// written, so that two groups wait for each other and never deadlock.
    /// SQLite's one writer locks the whole database: nothing to do.
    pub(super) fn lock_in_order<'a>(
        &mut self,
        tx: &mut Db<'_>,
        records: impl Iterator<Item = &'a super::Record>,
    ) -> Result<()> {
        if tx.dialect() != Dialect::Postgres {
            return Ok(());
        }
        let mut users: Vec<i64> = records
            .filter_map(|r| match r {
                super::Record::Hold { user_id, .. } => Some(*user_id),
                super::Record::Usage(u) if !u.charged.is_zero() => u.user_id,
                _ => None,
            })
            .collect();
        users.sort_unstable();
        users.dedup();
        let at = super::now_rfc3339();
        for user in users {
            self.balance(tx, user, &at)?;
        }
        Ok(())
    }

    fn account(&mut self, user_id: i64) -> &mut Account {
        self.accounts
            .get_mut(&user_id)
            .expect("balance() caches the account first")
    }

    /// Adds `amount` (negative: a debit) to a user's balance and writes the
    /// ledger line; the balance row itself is written by [`Balances::flush`].
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply(
        &mut self,
        tx: &mut Db<'_>,
        user_id: i64,
        amount: Decimal,
        kind: &str,
        usage_id: Option<i64>,
        note: Option<&str>,
        at: &str,
    ) -> Result<Decimal> {
        let after = self
            .balance(tx, user_id, at)?
            .checked_add(amount)
            .ok_or_else(|| overflow(user_id))?;
        let account = self.account(user_id);
        account.balance = after;
        account.dirty = true;
        if self.at.as_str() < at {
            self.at = at.to_owned();
        }
        tx.defer(
            "INSERT INTO credit_ledger (user_id, amount, balance_after, kind, usage_id, note, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            p![
                user_id,
                gateway_base::billing::format_money(amount),
                gateway_base::billing::format_money(after),
                kind,
                usage_id,
                note,
                at
            ],
        )?;
        Ok(after)
    }

    /// Holds `amount` of a user's credit for `request_id` if the balance
    /// minus the user's other live holds covers it (holds older than
    /// [`HOLD_TTL_HOURS`], or of an instance whose lease lapsed, are
    /// dropped first, once per transaction), and, when the request came
    /// with a key that has a budget, if the key's spend and holds leave
    /// room for it ([`KeyBudgets::check`]). `check_balance` false: only
    /// the key's budget is checked (a voice request's hold).
    pub(super) fn hold(
        &mut self,
        tx: &mut Db<'_>,
        user_id: i64,
        request_id: &str,
        amount: Decimal,
        key_id: Option<i64>,
        check_balance: bool,
    ) -> Result<Reserved> {
        let now = chrono::Utc::now();
        let at = super::rfc3339(now);
        let balance = self.balance(tx, user_id, &at)?;
        let held = match self.account(user_id).held {
            Some(h) => h,
            None => {
                let stale = super::rfc3339(now - chrono::Duration::hours(HOLD_TTL_HOURS));
                tx.defer(
                    "DELETE FROM credit_holds WHERE user_id = ?1 AND (created_at < ?2
                       OR instance IN (SELECT id FROM instances WHERE lease_until < ?3))",
                    p![user_id, stale, at],
                )?;
                // What the delete left is live: summed without the
                // filter a second time.
                let amounts = tx.rows(
                    "SELECT amount FROM credit_holds WHERE user_id = ?1",
                    p![user_id],
                    |r| r.dec(0),
                )?;
                let h = total(amounts, user_id)?;
                self.account(user_id).held = Some(h);
                h
            }
        };
        let available = balance.checked_sub(held).ok_or_else(|| overflow(user_id))?;
        if check_balance && available < amount {
            return Ok(Reserved::Insufficient { balance, available });
        }
        // The hold names its key only when the key has a budget.
        let mut budgeted = false;
        if let Some(k) = key_id {
            if let Some(refused) = self.keys.check(tx, k, amount, &mut budgeted)? {
                return Ok(refused);
            }
        }
        let key_id = key_id.filter(|_| budgeted);
        tx.defer(
            "INSERT INTO credit_holds (request_id, user_id, amount, created_at, instance, key_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            p![request_id, user_id, amount.to_string(), at, self.instance, key_id],
        )?;
        self.account(user_id).held =
            Some(held.checked_add(amount).ok_or_else(|| overflow(user_id))?);
        Ok(Reserved::Held)
    }

    /// Ends a request's hold (settled, or failed); a budgeted key's hold
    /// turns into its spend ([`KeyBudgets::settle`]).
    pub(super) fn release(&mut self, tx: &mut Db<'_>, request_id: &str) -> Result<()> {
        let released: Option<(i64, String, Option<i64>)> = tx.row(
            "DELETE FROM credit_holds WHERE request_id = ?1 RETURNING user_id, amount, key_id",
            p![request_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        if let Some((user_id, amount, key_id)) = released {
            let amount = super::sql::parse_dec(&amount)?;
            if let Some(k) = key_id {
                self.keys.settle(tx, k, request_id, amount)?;
            }
            if let Some(held) = self
                .accounts
                .get_mut(&user_id)
                .and_then(|a| a.held.as_mut())
            {
                *held = held.checked_sub(amount).ok_or_else(|| overflow(user_id))?;
            }
        }
        Ok(())
    }

    /// Writes every changed balance; call before the commit.
    pub(super) fn flush(&mut self, tx: &mut Db<'_>) -> Result<()> {
        for (user_id, a) in self.accounts.iter_mut().filter(|(_, a)| a.dirty) {
            tx.defer(
                "INSERT INTO credit_balances (user_id, balance, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (user_id) DO UPDATE SET balance = excluded.balance, updated_at = excluded.updated_at",
                p![user_id, gateway_base::billing::format_money(a.balance), self.at],
            )?;
            a.dirty = false;
        }
        Ok(())
    }
}

/// The sum of a user's live holds: younger than [`HOLD_TTL_HOURS`], and
/// of no instance whose lease lapsed.
pub(super) fn sum_holds(db: &mut Db<'_>, user_id: i64) -> Result<Decimal> {
    sum_live(db, "user_id", user_id)
}

/// The sum of the live holds of a key with a budget (see [`sum_holds`]).
pub(super) fn sum_key_holds(db: &mut Db<'_>, key_id: i64) -> Result<Decimal> {
    sum_live(db, "key_id", key_id)
}

/// The sum of the live holds whose `column` (`user_id`, `key_id`) is `id`.
fn sum_live(db: &mut Db<'_>, column: &str, id: i64) -> Result<Decimal> {
    let now = chrono::Utc::now();
    let stale = super::rfc3339(now - chrono::Duration::hours(HOLD_TTL_HOURS));
    let amounts = db.rows(
        &format!(
            "SELECT amount FROM credit_holds h WHERE {column} = ?1 AND created_at >= ?2
               AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = h.instance AND i.lease_until < ?3)"
        ),
        p![id, stale, super::rfc3339(now)],
        |r| r.dec(0),
    )?;
    total(amounts, id)
}

/// The sum of a user's hold amounts (checked).
fn total(amounts: Vec<Decimal>, user_id: i64) -> Result<Decimal> {
    super::budgets::sum(amounts).map_err(|_| overflow(user_id))
}

/// Decimal arithmetic on balances is checked: an overflow fails the
/// transaction (rolled back), never panics inside it.
fn overflow(user_id: i64) -> super::StoreError {
    super::StoreError::msg(format!(
        "the balance or holds of user {user_id} would overflow the decimal range"
    ))
}
