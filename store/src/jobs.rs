//! Repositories of the voice API's asynchronous jobs: reads, result
//! mirroring, and the follower's leases on due polls.

use super::sql::{p, Row};
use super::{Result, Store};

/// A job as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    pub job_id: String,
    pub kind: String,
    pub upstream_id: String,
    pub user_id: i64,
    pub submit_route: String,
    pub status: String,
    pub media_type: Option<String>,
    pub result: Option<String>,
    pub billed: bool,
    pub mirror_asset_id: Option<i64>,
    pub mirror_state: Option<String>,
    pub callback_uri: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// When the background follower polls the job next (`None`: not followed).
    pub follow_next_at: Option<String>,
    /// Polls the follower has claimed so far.
    pub follow_attempts: u32,
    /// The budgeted key it was submitted with: its charge counts in that
    /// key's spend (`store::budgets`).
    pub key_id: Option<i64>,
}

const JOB_COLS: &str =
    "job_id, kind, upstream_id, user_id, submit_route, status, media_type, result, billed,
     mirror_asset_id, mirror_state, callback_uri, created_at, updated_at, follow_next_at, follow_attempts, key_id";

fn row_to_job(r: &Row<'_>) -> Result<JobRow> {
    Ok(JobRow {
        job_id: r.get(0)?,
        kind: r.get(1)?,
        upstream_id: r.get(2)?,
        user_id: r.get(3)?,
        submit_route: r.get(4)?,
        status: r.get(5)?,
        media_type: r.get(6)?,
        result: r.get(7)?,
        billed: r.get(8)?,
        mirror_asset_id: r.get(9)?,
        mirror_state: r.get(10)?,
        callback_uri: r.get(11)?,
        created_at: r.get(12)?,
        updated_at: r.get(13)?,
        follow_next_at: r.get(14)?,
        follow_attempts: r.get(15)?,
        key_id: r.get(16)?,
    })
}

/// The voice API's asynchronous jobs: read by id or upstream id, the
/// mirroring of their results, and the follower's claims of due polls.
pub trait Jobs {
    /// A job by kind and the id the caller holds.
    fn job(&self, kind: &str, job_id: &str) -> Result<Option<JobRow>>;

    /// A job by kind and upstream id (inbound webhooks).
    fn job_by_upstream(&self, kind: &str, upstream_id: &str) -> Result<Option<JobRow>>;

    /// A user's jobs of a kind, newest first, one page (1-based), and the total.
    fn jobs_of(
        &self,
        user_id: i64,
        kind: &str,
        page: u32,
        page_size: u32,
    ) -> Result<(Vec<JobRow>, u64)>;

    /// Tries to take the right to copy a job's result (multi-instance safe:
    /// the claim is a conditional update). A claim older than `stale_before`
    /// (its holder died) or a failed copy can be taken again.
    fn claim_mirror(&self, kind: &str, job_id: &str, now: &str, stale_before: &str)
        -> Result<bool>;

    /// Records a finished copy (the asset is already committed).
    fn finish_mirror(&self, kind: &str, job_id: &str, asset_id: i64) -> Result<()>;

    /// Records a failed copy; the next GET may try again.
    fn fail_mirror(&self, kind: &str, job_id: &str) -> Result<()>;

    /// Pending jobs whose next poll is due at `now` and that no instance
    /// holds a live lease on, the most overdue first.
    fn due_jobs(&self, now: &str, limit: usize) -> Result<Vec<JobRow>>;

    /// Tries to take the lease of one poll of a job until `lease_until`
    /// (multi-instance safe: a conditional update; an expired lease, whose
    /// holder died, can be taken again). Counts the attempt.
    fn claim_follow(&self, kind: &str, job_id: &str, now: &str, lease_until: &str) -> Result<bool>;

    /// Releases a poll's lease and sets the next poll (`None`: stop following).
    fn release_follow(&self, kind: &str, job_id: &str, next: Option<&str>) -> Result<()>;
}

impl Jobs for Store {
    fn job(&self, kind: &str, job_id: &str) -> Result<Option<JobRow>> {
        self.with(|db| {
            db.row(
                &format!("SELECT {JOB_COLS} FROM jobs WHERE kind = ?1 AND job_id = ?2"),
                p![kind, job_id],
                row_to_job,
            )
        })
    }

    fn job_by_upstream(&self, kind: &str, upstream_id: &str) -> Result<Option<JobRow>> {
        self.with(|db| {
            db.row(
                &format!("SELECT {JOB_COLS} FROM jobs WHERE kind = ?1 AND upstream_id = ?2"),
                p![kind, upstream_id],
                row_to_job,
            )
        })
    }

    fn jobs_of(
        &self,
        user_id: i64,
        kind: &str,
        page: u32,
        page_size: u32,
    ) -> Result<(Vec<JobRow>, u64)> {
        let offset = (page.max(1) as i64 - 1) * page_size as i64;
        self.with(|db| {
            let total: i64 = db
                .row(
                    "SELECT COUNT(*) FROM jobs WHERE user_id = ?1 AND kind = ?2",
                    p![user_id, kind],
                    |r| r.get(0),
                )?
                .unwrap_or(0);
            let rows = db.rows(
                &format!(
                    "SELECT {JOB_COLS} FROM jobs WHERE user_id = ?1 AND kind = ?2 ORDER BY id DESC LIMIT ?3 OFFSET ?4"
                ),
                p![user_id, kind, page_size, offset],
                row_to_job,
            )?;
            Ok((rows, total as u64))
        })
    }

    fn claim_mirror(
        &self,
        kind: &str,
        job_id: &str,
        now: &str,
        stale_before: &str,
    ) -> Result<bool> {
        let n = self.with(|db| {
            db.exec(
                "UPDATE jobs SET mirror_state = 'copying', mirror_claimed_at = ?3
             WHERE kind = ?1 AND job_id = ?2 AND mirror_asset_id IS NULL
               AND (mirror_state IS NULL OR mirror_state = 'failed'
                    OR (mirror_state = 'copying' AND mirror_claimed_at < ?4))",
                p![kind, job_id, now, stale_before],
            )
        })?;
        Ok(n == 1)
    }

    fn finish_mirror(&self, kind: &str, job_id: &str, asset_id: i64) -> Result<()> {
        self.with(|db| db.exec("UPDATE jobs SET mirror_state = 'done', mirror_asset_id = ?3 WHERE kind = ?1 AND job_id = ?2", p![kind, job_id, asset_id]))?;
        Ok(())
    }

    fn fail_mirror(&self, kind: &str, job_id: &str) -> Result<()> {
        self.with(|db| db.exec("UPDATE jobs SET mirror_state = 'failed' WHERE kind = ?1 AND job_id = ?2 AND mirror_asset_id IS NULL", p![kind, job_id]))?;
        Ok(())
    }

    fn due_jobs(&self, now: &str, limit: usize) -> Result<Vec<JobRow>> {
        self.with(|db| {
            db.rows(
                &format!(
                    "SELECT {JOB_COLS} FROM jobs
             WHERE follow_next_at IS NOT NULL AND follow_next_at <= ?1
               AND status NOT IN ('completed', 'failed')
               AND (follow_lease_until IS NULL OR follow_lease_until < ?1)
             ORDER BY follow_next_at LIMIT ?2"
                ),
                p![now, limit as i64],
                row_to_job,
            )
        })
    }

    fn claim_follow(&self, kind: &str, job_id: &str, now: &str, lease_until: &str) -> Result<bool> {
        let n = self.with(|db| {
            db.exec(
                "UPDATE jobs SET follow_lease_until = ?4, follow_attempts = follow_attempts + 1
             WHERE kind = ?1 AND job_id = ?2
               AND follow_next_at IS NOT NULL AND follow_next_at <= ?3
               AND status NOT IN ('completed', 'failed')
               AND (follow_lease_until IS NULL OR follow_lease_until < ?3)",
                p![kind, job_id, now, lease_until],
            )
        })?;
        Ok(n == 1)
    }

    fn release_follow(&self, kind: &str, job_id: &str, next: Option<&str>) -> Result<()> {
        self.with(|db| db.exec("UPDATE jobs SET follow_lease_until = NULL,
                    follow_next_at = CASE WHEN status IN ('completed', 'failed') THEN NULL ELSE ?3 END
             WHERE kind = ?1 AND job_id = ?2", p![kind, job_id, next]))?;
        Ok(())
    }
}
