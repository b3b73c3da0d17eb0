//! Credit purchases (Stripe Checkout): a purchase is recorded `pending` at
//! checkout with the amount the gateway asked Stripe for, and credited
//! once, when Stripe says its session is paid.
//!
//! *Exactly once*: [`Purchases::credit_purchase`] is one transaction that flips
//! the purchase `pending` → `paid` with a conditional update and, only if
//! that update changed the row, writes the ledger line (kind `purchase`,
//! its note naming the session) and the balance. A second delivery of the
//! event, another event for the same session, a concurrent delivery on
//! any instance or one after a restart finds the purchase no longer
//! pending and credits nothing: SQLite's `BEGIN IMMEDIATE` serialises the
//! transactions, and on PostgreSQL the second update waits for the first's
//! row lock and then sees `paid`. The session id is unique, so two
//! purchases never share one.

use rust_decimal::Decimal;

use super::balances::Balances;
use super::sql::p;
use super::{now_rfc3339, Result, Store};

/// A purchase as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurchaseRow {
    pub id: i64,
    pub user_id: i64,
    pub session_id: String,
    /// The amount recorded at checkout, in USD.
    pub amount_usd: Decimal,
    /// `pending`, `paid` or `expired`.
    pub status: String,
    pub created_at: String,
    /// When the Checkout Session expires (RFC 3339), as Stripe said.
    pub expires_at: Option<String>,
    pub paid_at: Option<String>,
    /// The event that paid it.
    pub paid_event: Option<String>,
}

/// What [`Purchases::credit_purchase`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credited {
    /// The purchase was pending: its amount was credited; the new balance.
    Now { user_id: i64, balance: Decimal },
    /// Already paid (or expired): nothing was credited.
    Already,
    /// No purchase has this session.
    Unknown,
}

const COLS: &str = "SELECT id, user_id, session_id, amount_usd, status, created_at, expires_at, paid_at, paid_event FROM purchases";

/// Credits bought through Stripe Checkout: one purchase per session,
/// credited once when paid, or expired.
pub trait Purchases {
    /// Records a pending purchase of `amount_usd` by `user_id` for a session.
    fn insert_purchase(
        &self,
        user_id: i64,
        session_id: &str,
        amount_usd: Decimal,
        expires_at: Option<&str>,
    ) -> Result<i64>;

    /// Credits the session's purchase once (see the module docs): the
    /// amount recorded at checkout, never another.
    fn credit_purchase(&self, session_id: &str, event_id: &str) -> Result<Credited>;

    /// Marks a pending purchase expired (its session expired unpaid);
    /// whether it was pending.
    fn expire_purchase(&self, session_id: &str) -> Result<bool>;

    /// The purchase of a session.
    fn purchase(&self, session_id: &str) -> Result<Option<PurchaseRow>>;

    /// A user's purchases, newest first, at most `limit`.
    fn purchases_of(&self, user_id: i64, limit: u32) -> Result<Vec<PurchaseRow>>;
}

impl Purchases for Store {
    fn insert_purchase(
        &self,
        user_id: i64,
        session_id: &str,
        amount_usd: Decimal,
        expires_at: Option<&str>,
    ) -> Result<i64> {
        self.with(|db| {
            db.row(
                "INSERT INTO purchases (user_id, session_id, amount_usd, status, created_at, expires_at)
                 VALUES (?1, ?2, ?3, 'pending', ?4, ?5) RETURNING id",
                p![user_id, session_id, amount_usd.to_string(), now_rfc3339(), expires_at],
                |r| r.get(0),
            )
        })?
        .ok_or_else(|| super::StoreError::msg("inserting a purchase returned no id"))
    }

    fn credit_purchase(&self, session_id: &str, event_id: &str) -> Result<Credited> {
        self.transaction(|tx| {
            let at = now_rfc3339();
            let flipped: Option<(i64, String)> = tx.row(
                "UPDATE purchases SET status = 'paid', paid_at = ?2, paid_event = ?3
                 WHERE session_id = ?1 AND status = 'pending' RETURNING user_id, amount_usd",
                p![session_id, at, event_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let Some((user_id, amount)) = flipped else {
                let known = tx.exists(
                    "SELECT 1 FROM purchases WHERE session_id = ?1",
                    p![session_id],
                )?;
                return Ok(if known {
                    Credited::Already
                } else {
                    Credited::Unknown
                });
            };
            let amount = super::sql::parse_dec(&amount)?;
            let mut balances = Balances::default();
            let before = balances.balance(tx, user_id, &at)?;
            gateway_base::billing::check_grant(before, amount).map_err(super::StoreError::msg)?;
            let note = format!("stripe checkout session {session_id}");
            let balance =
                balances.apply(tx, user_id, amount, "purchase", None, Some(&note), &at)?;
            balances.flush(tx)?;
            Ok(Credited::Now { user_id, balance })
        })
    }

    fn expire_purchase(&self, session_id: &str) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "UPDATE purchases SET status = 'expired' WHERE session_id = ?1 AND status = 'pending'",
                p![session_id],
            )
        })
        .map(|n| n > 0)
    }

    fn purchase(&self, session_id: &str) -> Result<Option<PurchaseRow>> {
        self.with(|db| {
            db.row(
                &format!("{COLS} WHERE session_id = ?1"),
                p![session_id],
                row,
            )
        })
    }

    fn purchases_of(&self, user_id: i64, limit: u32) -> Result<Vec<PurchaseRow>> {
        self.with(|db| {
            db.rows(
                &format!("{COLS} WHERE user_id = ?1 ORDER BY id DESC LIMIT ?2"),
                p![user_id, i64::from(limit)],
                row,
            )
        })
    }
}

fn row(r: &super::sql::Row<'_>) -> Result<PurchaseRow> {
    Ok(PurchaseRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        session_id: r.get(2)?,
        amount_usd: r.dec(3)?,
        status: r.get(4)?,
        created_at: r.get(5)?,
        expires_at: r.get(6)?,
        paid_at: r.get(7)?,
        paid_event: r.get(8)?,
    })
}
