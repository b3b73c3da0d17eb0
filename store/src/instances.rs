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
use super::{now_rfc3339, rfc3339, Result, Store};

fn lease_until(lease: Duration) -> String {
    rfc3339(chrono::Utc::now() + chrono::Duration::from_std(lease).unwrap_or_default())
}

/// The gateway instances sharing this database: their leases, and the
/// once-only claims of scheduled work among them.
pub trait Instances {
    /// Registers instance `id` (its lease renewed for `lease`), deletes
    /// the holds of its previous run, and names it in every hold taken from
    /// now on. Returns how many holds were released.
    fn start_instance(&self, id: &str, lease: Duration) -> Result<u64>;

    /// Renews instance `id`'s lease for `lease` from now.
    fn renew_instance_lease(&self, id: &str, lease: Duration) -> Result<()>;

    /// Claims the work named `name` once for all instances sharing this
    /// database: `true` for the first caller only.
    fn claim_once(&self, name: &str) -> Result<bool>;
}

impl Instances for Store {
    fn start_instance(&self, id: &str, lease: Duration) -> Result<u64> {
        let now = super::now_rfc3339();
        let released = self.transaction(|tx| {
            tx.exec(
                "INSERT INTO instances (id, lease_until, started_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until, started_at = excluded.started_at",
                p![id, lease_until(lease), now],
            )?;
            // A background response this instance ran before it stopped
            // ends failed (its hold is released just below, never billed).
            tx.exec(
                "UPDATE responses SET status = 'failed', updated_at = ?2
                 WHERE instance = ?1 AND status IN ('queued', 'in_progress')",
                p![id, now],
            )?;
            // The batch lines it was running go back to the pool.
            tx.exec(
                "UPDATE batch_lines SET state = 'waiting', owner = NULL WHERE state = 'claimed' AND owner = ?1",
                p![id],
            )?;
            tx.exec("DELETE FROM credit_holds WHERE instance = ?1", p![id])
        })?;
        self.writer.set_instance(id);
        Ok(released)
    }

    fn renew_instance_lease(&self, id: &str, lease: Duration) -> Result<()> {
        self.with(|db| {
            db.exec(
                "INSERT INTO instances (id, lease_until, started_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until",
                p![id, lease_until(lease), super::now_rfc3339()],
            )
        })?;
        Ok(())
    }

    fn claim_once(&self, name: &str) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "INSERT INTO claims (name, claimed_at) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
                p![name, now_rfc3339()],
            )
        })
        .map(|n| n == 1)
    }
}
