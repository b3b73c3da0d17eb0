//! Repositories of webhooks: inbound provider events and the callbacks
//! delivered to users.

use super::sql::p;
use super::{now_rfc3339, Result, Store};

/// An inbound webhook event as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEventRow {
    pub id: i64,
    pub body: Vec<u8>,
    pub event: Option<String>,
    pub kind: Option<String>,
    pub upstream_id: Option<String>,
    pub signed: bool,
    pub outcome: String,
}

/// Webhooks both ways: inbound provider events (each body seen once),
/// and the callbacks the gateway delivers to its users (their secret, the
/// claim and outcome of a delivery).
pub trait Webhooks {
    /// Whether an event with this body hash was stored already.
    fn webhook_event_seen(&self, body_sha256: &str) -> Result<bool>;

    /// Every stored webhook event, oldest first.
    fn webhook_events(&self) -> Result<Vec<WebhookEventRow>>;

    /// A user's callback secret, created on first use (32 random bytes, hex).
    fn callback_secret(&self, user_id: i64) -> Result<Option<String>>;

    /// Takes the right to deliver a job's callback (once per job).
    fn claim_callback(&self, kind: &str, job_id: &str) -> Result<bool>;

    /// Records the end of a callback delivery: `delivered` or `failed`.
    fn finish_callback(&self, kind: &str, job_id: &str, state: &str, attempts: u32) -> Result<()>;
}

impl Webhooks for Store {
    fn webhook_event_seen(&self, body_sha256: &str) -> Result<bool> {
        self.with(|db| {
            db.exists(
                "SELECT 1 FROM webhook_events WHERE body_sha256 = ?1",
                p![body_sha256],
            )
        })
    }

    fn webhook_events(&self) -> Result<Vec<WebhookEventRow>> {
        self.with(|db| db.rows("SELECT id, body, event, kind, upstream_id, signed, outcome FROM webhook_events ORDER BY id", &[], |r| {
            Ok(WebhookEventRow {
                id: r.get(0)?,
                body: r.get(1)?,
                event: r.get(2)?,
                kind: r.get(3)?,
                upstream_id: r.get(4)?,
                signed: r.get(5)?,
                outcome: r.get(6)?,
            })
        }))
    }

    fn callback_secret(&self, user_id: i64) -> Result<Option<String>> {
        self.with(|db| {
            let read = |db: &mut super::sql::Db<'_>| {
                db.row(
                    "SELECT callback_secret FROM users WHERE id = ?1",
                    p![user_id],
                    |r| r.get::<Option<String>>(0),
                )
            };
            match read(db)? {
                None => Ok(None),
                Some(Some(s)) => Ok(Some(s)),
                Some(None) => {
                    let secret = hex::encode(rand::random::<[u8; 32]>());
                    db.exec(
                        "UPDATE users SET callback_secret = ?2 WHERE id = ?1 AND callback_secret IS NULL",
                        p![user_id, secret],
                    )?;
                    // Another process may have won the race: read what is stored.
                    Ok(read(db)?.flatten())
                }
            }
        })
    }

    fn claim_callback(&self, kind: &str, job_id: &str) -> Result<bool> {
        let n = self.with(|db| db.exec("UPDATE jobs SET callback_state = 'delivering', updated_at = ?3
             WHERE kind = ?1 AND job_id = ?2 AND callback_uri IS NOT NULL AND callback_state IS NULL", p![kind, job_id, now_rfc3339()]))?;
        Ok(n == 1)
    }

    fn finish_callback(&self, kind: &str, job_id: &str, state: &str, attempts: u32) -> Result<()> {
        self.with(|db| db.exec("UPDATE jobs SET callback_state = ?3, callback_attempts = ?4 WHERE kind = ?1 AND job_id = ?2", p![kind, job_id, state, attempts]))?;
        Ok(())
    }
}
