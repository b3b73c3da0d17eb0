//! Repositories of tenant isolation (who owns which upstream resource),
//! inbound webhook events, and users' callback secrets.

use std::collections::HashMap;

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

impl Store {
    /// The owner of a resource, if a gateway user created it.
    pub fn resource_owner(&self, kind: &str, upstream_id: &str) -> Result<Option<i64>> {
        self.with(|db| {
            db.row(
                "SELECT owner_id FROM resources WHERE kind = ?1 AND upstream_id = ?2",
                p![kind, upstream_id],
                |r| r.get(0),
            )
        })
    }

    /// The parent recorded with a resource at its creation (an agent tool's agent).
    pub fn resource_parent(&self, kind: &str, upstream_id: &str) -> Result<Option<String>> {
        let parent = self.with(|db| {
            db.row(
                "SELECT parent FROM resources WHERE kind = ?1 AND upstream_id = ?2",
                p![kind, upstream_id],
                |r| r.get::<Option<String>>(0),
            )
        })?;
        Ok(parent.flatten())
    }

    /// Owners of every recorded resource of a kind: upstream id → owner.
    pub fn resource_owners(&self, kind: &str) -> Result<HashMap<String, i64>> {
        let rows = self.with(|db| {
            db.rows(
                "SELECT upstream_id, owner_id FROM resources WHERE kind = ?1",
                p![kind],
                |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?)),
            )
        })?;
        Ok(rows.into_iter().collect())
    }

    /// The status recorded for a resource (a voice's training).
    pub fn resource_status(&self, kind: &str, upstream_id: &str) -> Result<Option<String>> {
        let status = self.with(|db| {
            db.row(
                "SELECT status FROM resources WHERE kind = ?1 AND upstream_id = ?2",
                p![kind, upstream_id],
                |r| r.get::<Option<String>>(0),
            )
        })?;
        Ok(status.flatten())
    }

    /// Whether an event with this body hash was stored already.
    pub fn webhook_event_seen(&self, body_sha256: &str) -> Result<bool> {
        self.with(|db| {
            db.exists(
                "SELECT 1 FROM webhook_events WHERE body_sha256 = ?1",
                p![body_sha256],
            )
        })
    }

    /// Every stored webhook event, oldest first.
    pub fn webhook_events(&self) -> Result<Vec<WebhookEventRow>> {
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

    /// A user's callback secret, created on first use (32 random bytes, hex).
    pub fn callback_secret(&self, user_id: i64) -> Result<Option<String>> {
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

    /// Takes the right to deliver a job's callback (once per job).
    pub fn claim_callback(&self, kind: &str, job_id: &str) -> Result<bool> {
        let n = self.with(|db| db.exec("UPDATE jobs SET callback_state = 'delivering', updated_at = ?3
             WHERE kind = ?1 AND job_id = ?2 AND callback_uri IS NOT NULL AND callback_state IS NULL", p![kind, job_id, now_rfc3339()]))?;
        Ok(n == 1)
    }

    /// Records the end of a callback delivery: `delivered` or `failed`.
    pub fn finish_callback(
        &self,
        kind: &str,
        job_id: &str,
        state: &str,
        attempts: u32,
    ) -> Result<()> {
        self.with(|db| db.exec("UPDATE jobs SET callback_state = ?3, callback_attempts = ?4 WHERE kind = ?1 AND job_id = ?2", p![kind, job_id, state, attempts]))?;
        Ok(())
    }
}
