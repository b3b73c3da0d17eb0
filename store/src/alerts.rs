//! Spend alerts: a user's settings, each alert sent once (a unique
//! once-key, so that instances checking the same user at once insert it
//! once), and its deliveries claimed and retried through the database.

use rust_decimal::Decimal;

use super::sql::{p, parse_dec};
use super::{now_rfc3339, Result, Store};

/// A user's alert settings as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertSettings {
    /// Percentages of a key's budget, ascending.
    pub budget_thresholds: Vec<u32>,
    pub balance_floor: Option<Decimal>,
    pub email: bool,
    pub webhook_url: Option<String>,
    /// The webhook's HMAC key (never listed; shown once when made).
    pub webhook_secret: Option<String>,
    pub updated_at: String,
    /// The floor's alert fired and the balance has not been above it since
    /// (read only: setting the settings re-arms it).
    pub floor_alerted: bool,
}

/// An alert to insert: its once-key (the user, what crossed which
/// threshold in which period), kind, threshold and body.
#[derive(Debug, Clone)]
pub struct NewAlert {
    pub user_id: i64,
    pub once_key: String,
    pub kind: String,
    pub threshold: String,
    pub body: String,
    pub email: bool,
    pub webhook: bool,
}

/// An alert as listed and delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertRow {
    pub id: i64,
    pub user_id: i64,
    pub kind: String,
    pub threshold: String,
    pub body: String,
    /// `none`, `pending`, `sent`, `failed`.
    pub email_state: String,
    /// `none`, `pending`, `delivered`, `failed`.
    pub webhook_state: String,
    pub attempts: i64,
    pub next_attempt_at: Option<String>,
    pub created_at: String,
}

const ALERT_COLUMNS: &str = "id, user_id, kind, threshold, body, email_state, webhook_state, attempts, next_attempt_at, created_at";

fn alert_row(r: &super::sql::Row<'_>) -> Result<AlertRow> {
    Ok(AlertRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        kind: r.get(2)?,
        threshold: r.get(3)?,
        body: r.get(4)?,
        email_state: r.get(5)?,
        webhook_state: r.get(6)?,
        attempts: r.get(7)?,
        next_attempt_at: r.get(8)?,
        created_at: r.get(9)?,
    })
}

/// Alert settings, alerts and their deliveries.
pub trait Alerts {
    /// The user's settings (`None`: none set).
    fn alert_settings(&self, user_id: i64) -> Result<Option<AlertSettings>>;

    /// Sets the user's settings (the floor re-armed).
    fn set_alert_settings(&self, user_id: i64, s: &AlertSettings) -> Result<()>;

    /// Inserts `a` unless an alert of its once-key exists; `true` when
    /// inserted (its deliveries due now).
    fn insert_alert(&self, a: &NewAlert) -> Result<bool>;

    /// The balance floor's alert, once until the balance is above the floor
    /// again ([`Alerts::rearm_floor`]): `a` inserted when the floor was
    /// armed (and it is disarmed in the same transaction).
    fn fire_floor(&self, a: &NewAlert) -> Result<bool>;

    /// Re-arms the balance floor's alert (the balance is above it).
    fn rearm_floor(&self, user_id: i64) -> Result<()>;

    /// The user's alerts, newest first, at most `limit`.
    fn alerts_of(&self, user_id: i64, limit: i64) -> Result<Vec<AlertRow>>;

    /// Alerts whose deliveries are due at `now`, oldest first.
    fn due_alerts(&self, now: &str, limit: i64) -> Result<Vec<AlertRow>>;

    /// Claims a due alert's deliveries until `until` (a lease: another
    /// instance takes it over after): `false` when another claimed it.
    fn claim_alert(&self, a: &AlertRow, until: &str) -> Result<bool>;

    /// Records an attempt's outcome: the states, the attempts made and
    /// when to try again (`None`: done).
    fn alert_attempted(
        &self,
        id: i64,
        email_state: &str,
        webhook_state: &str,
        attempts: i64,
        next: Option<&str>,
    ) -> Result<()>;
}

impl Alerts for Store {
    fn alert_settings(&self, user_id: i64) -> Result<Option<AlertSettings>> {
        self.with(|db| {
            db.row(
                "SELECT budget_thresholds, balance_floor, email, webhook_url, webhook_secret, updated_at, floor_alerted
                 FROM alert_settings WHERE user_id = ?1",
                p![user_id],
                |r| {
                    let t: String = r.get(0)?;
                    let floor: Option<String> = r.get(1)?;
                    Ok(AlertSettings {
                        budget_thresholds: t.split(',').filter_map(|n| n.trim().parse().ok()).collect(),
                        balance_floor: floor.as_deref().map(parse_dec).transpose()?,
                        email: r.get(2)?,
                        webhook_url: r.get(3)?,
                        webhook_secret: r.get(4)?,
                        updated_at: r.get(5)?,
                        floor_alerted: r.get(6)?,
                    })
                },
            )
        })
    }

    fn set_alert_settings(&self, user_id: i64, s: &AlertSettings) -> Result<()> {
        let thresholds = s
            .budget_thresholds
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let floor = s.balance_floor.map(|d| d.to_string());
        self.with(|db| {
            db.exec(
                "INSERT INTO alert_settings (user_id, budget_thresholds, balance_floor, email, webhook_url, webhook_secret, floor_alerted, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)
                 ON CONFLICT (user_id) DO UPDATE SET budget_thresholds = ?2, balance_floor = ?3, email = ?4,
                     webhook_url = ?5, webhook_secret = ?6, floor_alerted = 0, updated_at = ?7",
                p![user_id, thresholds, floor, s.email, s.webhook_url, s.webhook_secret, s.updated_at],
            )
            .map(drop)
        })
    }

    fn insert_alert(&self, a: &NewAlert) -> Result<bool> {
        self.with(|db| insert(db, a))
    }

    fn fire_floor(&self, a: &NewAlert) -> Result<bool> {
        self.transaction(|tx| {
            let armed = tx.exec(
                "UPDATE alert_settings SET floor_alerted = 1 WHERE user_id = ?1 AND floor_alerted = 0",
                p![a.user_id],
            )?;
            if armed == 0 {
                return Ok(false);
            }
            insert(tx, a)
        })
    }

    fn rearm_floor(&self, user_id: i64) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE alert_settings SET floor_alerted = 0 WHERE user_id = ?1 AND floor_alerted = 1",
                p![user_id],
            )
            .map(drop)
        })
    }

    fn alerts_of(&self, user_id: i64, limit: i64) -> Result<Vec<AlertRow>> {
        self.with(|db| {
            db.rows(
                &format!("SELECT {ALERT_COLUMNS} FROM alerts WHERE user_id = ?1 ORDER BY id DESC LIMIT ?2"),
                p![user_id, limit],
                alert_row,
            )
        })
    }

    fn due_alerts(&self, now: &str, limit: i64) -> Result<Vec<AlertRow>> {
        self.with(|db| {
            db.rows(
                &format!(
                    "SELECT {ALERT_COLUMNS} FROM alerts WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= ?1
                     ORDER BY next_attempt_at LIMIT ?2"
                ),
                p![now, limit],
                alert_row,
            )
        })
    }

    fn claim_alert(&self, a: &AlertRow, until: &str) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "UPDATE alerts SET next_attempt_at = ?3 WHERE id = ?1 AND next_attempt_at = ?2",
                p![a.id, a.next_attempt_at, until],
            )
            .map(|n| n == 1)
        })
    }

    fn alert_attempted(
        &self,
        id: i64,
        email_state: &str,
        webhook_state: &str,
        attempts: i64,
        next: Option<&str>,
    ) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE alerts SET email_state = ?2, webhook_state = ?3, attempts = ?4, next_attempt_at = ?5 WHERE id = ?1",
                p![id, email_state, webhook_state, attempts, next],
            )
            .map(drop)
        })
    }
}

fn insert(db: &mut super::sql::Db<'_>, a: &NewAlert) -> Result<bool> {
    let state = |on: bool| if on { "pending" } else { "none" };
    let now = now_rfc3339();
    let due = (a.email || a.webhook).then(|| now.clone());
    db.exec(
        "INSERT INTO alerts (user_id, once_key, kind, threshold, body, email_state, webhook_state, attempts, next_attempt_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8, ?9) ON CONFLICT (once_key) DO NOTHING",
        p![a.user_id, a.once_key, a.kind, a.threshold, a.body, state(a.email), state(a.webhook), due, now],
    )
    .map(|n| n == 1)
}
