//! Instances and their leases: how the credit holds of a crashed instance
//! stop counting.
//!
//! Each serving instance has an id that survives its restarts
//! ([`crate::instance`]) and a row in `instances` whose `lease_until` it
//! renews (a heartbeat, `GATEWAY_INSTANCE_LEASE_SECS`). Every hold the
//! record writer takes names its instance (`credit_holds.instance`). At
//! start an instance deletes its own previous holds (their requests died
//! with the process); a hold of an instance whose lease lapsed counts no
//! more ([`super::balances::sum_holds`]) and is swept by the next hold of
//! its user. A hold kept by a job (a video's, a voice job's) belongs to the
//! job, not to the instance (its instance is cleared when the job is
//! recorded).

use std::time::Duration;

use super::sql::p;
use super::{rfc3339, Result, Store};

fn lease_until(lease: Duration) -> String {
    rfc3339(chrono::Utc::now() + chrono::Duration::from_std(lease).unwrap_or_default())
}

impl Store {
    /// Registers instance `id` (its lease renewed for `lease`), deletes
    /// the holds of its previous run, and names it in every hold taken from
    /// now on. Returns how many holds were released.
    pub fn start_instance(&self, id: &str, lease: Duration) -> Result<u64> {
        let now = super::now_rfc3339();
        let released = self.transaction(|tx| {
            tx.exec(
                "INSERT INTO instances (id, lease_until, started_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until, started_at = excluded.started_at",
                p![id, lease_until(lease), now],
            )?;
            tx.exec("DELETE FROM credit_holds WHERE instance = ?1", p![id])
        })?;
        self.writer.set_instance(id);
        Ok(released)
    }

    /// Renews instance `id`'s lease for `lease` from now.
    pub fn renew_instance_lease(&self, id: &str, lease: Duration) -> Result<()> {
        self.with(|db| {
            db.exec(
                "INSERT INTO instances (id, lease_until, started_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until",
                p![id, lease_until(lease), super::now_rfc3339()],
            )
        })?;
        Ok(())
    }

    /// A user's holds, live or not: `(request_id, instance)` (tests,
    /// operators).
    pub fn holds_of(&self, user_id: i64) -> Result<Vec<(String, Option<String>)>> {
        self.with(|db| {
            db.rows(
                "SELECT request_id, instance FROM credit_holds WHERE user_id = ?1 ORDER BY request_id",
                p![user_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }
}
