//! Video generation jobs of the general gateway (table `video_jobs`,
//! migration 8): the caller's job, its model, its credit hold, its status
//! as last seen, the stored copy of its video and the follower's schedule.

use super::sql::{p, Row};
use super::{Result, Store};

/// One video job.
#[derive(Debug, Clone)]
pub struct VideoJobRow {
    /// The provider's job id (answered to the caller as `job_id`).
    pub job_id: String,
    pub user_id: i64,
    pub provider: String,
    pub model: String,
    /// The submit request's id, under which its credit is held.
    pub hold_id: String,
    /// Seconds requested (the hold's basis and the most billed), decimal text.
    pub seconds: String,
    pub size: Option<String>,
    pub prompt: String,
    /// `pending`, `processing`, `completed`, `failed` or `cancelled`.
    pub status: String,
    /// The stored video's object key, once copied.
    pub object_key: Option<String>,
    pub expires_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

const COLS: &str = "job_id, user_id, provider, model, hold_id, seconds, size, prompt, status, object_key, expires_at, created_at, updated_at";

fn row(r: &Row<'_>) -> Result<VideoJobRow> {
    Ok(VideoJobRow {
        job_id: r.get(0)?,
        user_id: r.get(1)?,
        provider: r.get(2)?,
        model: r.get(3)?,
        hold_id: r.get(4)?,
        seconds: r.get(5)?,
        size: r.get(6)?,
        prompt: r.get(7)?,
        status: r.get(8)?,
        object_key: r.get(9)?,
        expires_at: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
    })
}

/// The general gateway's video generation jobs: made, read, followed
/// until they end, and their copies claimed.
pub trait Videos {
    /// Records a submitted job, first followed at `follow_at`; its hold
    /// (`hold_id`) becomes the job's, no longer the instance's (it outlives
    /// the instance's restarts and lease: `super::instances`).
    fn insert_video_job(&self, j: &VideoJobRow, follow_at: &str) -> Result<()>;

    /// One job by its id.
    fn video_job(&self, job_id: &str) -> Result<Option<VideoJobRow>>;

    /// A user's jobs, newest first, and how many there are.
    fn video_jobs_of(&self, user_id: i64, limit: u32, skip: u32)
        -> Result<(Vec<VideoJobRow>, u64)>;

    /// Sets a job's status while it is unfinished; `true` when it changed.
    /// A finished job (`completed`, `failed`, `cancelled`) is never changed
    /// again, so its hold is settled or released once.
    fn set_video_status(&self, job_id: &str, status: &str, now: &str) -> Result<bool>;

    /// Claims the copy of a finished job's video (one copier at a time,
    /// across instances; a claim older than `stale_before` is taken over).
    fn claim_video_copy(&self, job_id: &str, now: &str, stale_before: &str) -> Result<bool>;

    /// Gives a copy claim up (the copy failed: the next observer retries).
    fn release_video_copy(&self, job_id: &str) -> Result<()>;

    /// Marks a job completed with its stored copy (after its billing records
    /// are committed); `true` when this call finished it.
    fn complete_video(
        &self,
        job_id: &str,
        object_key: &str,
        expires_at: &str,
        now: &str,
    ) -> Result<bool>;

    /// Jobs whose next poll is due, claimed for the follower until `lease_until`.
    fn claim_due_video_jobs(
        &self,
        now: &str,
        lease_until: &str,
        limit: usize,
    ) -> Result<Vec<VideoJobRow>>;

    /// Sets a job's next poll (`None`: no longer followed).
    fn reschedule_video(&self, job_id: &str, next: Option<&str>) -> Result<()>;
}

impl Videos for Store {
    fn insert_video_job(&self, j: &VideoJobRow, follow_at: &str) -> Result<()> {
        self.transaction(|db| {
            db.exec(
                "UPDATE credit_holds SET instance = NULL WHERE request_id = ?1",
                p![j.hold_id],
            )?;
            db.exec(&format!(
                "INSERT INTO video_jobs ({COLS}, follow_next_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
            ), p![
                j.job_id,
                j.user_id,
                j.provider,
                j.model,
                j.hold_id,
                j.seconds,
                j.size,
                j.prompt,
                j.status,
                j.object_key,
                j.expires_at,
                j.created_at,
                j.updated_at,
                follow_at
            ])
        })?;
        Ok(())
    }

    fn video_job(&self, job_id: &str) -> Result<Option<VideoJobRow>> {
        self.with(|db| {
            db.row(
                &format!("SELECT {COLS} FROM video_jobs WHERE job_id = ?1"),
                p![job_id],
                row,
            )
        })
    }

    fn video_jobs_of(
        &self,
        user_id: i64,
        limit: u32,
        skip: u32,
    ) -> Result<(Vec<VideoJobRow>, u64)> {
        self.with(|db| {
            let total: i64 = db
                .row(
                    "SELECT COUNT(*) FROM video_jobs WHERE user_id = ?1",
                    p![user_id],
                    |r| r.get(0),
                )?
                .unwrap_or(0);
            let rows = db.rows(
                &format!(
                    "SELECT {COLS} FROM video_jobs WHERE user_id = ?1
                     ORDER BY created_at DESC, rowid DESC LIMIT ?2 OFFSET ?3"
                ),
                p![user_id, limit, skip],
                row,
            )?;
            Ok((rows, total as u64))
        })
    }

    fn set_video_status(&self, job_id: &str, status: &str, now: &str) -> Result<bool> {
        let n = self.with(|db| db.exec("UPDATE video_jobs SET status = ?2, updated_at = ?3,
                    follow_next_at = CASE WHEN ?2 IN ('completed', 'failed', 'cancelled') THEN NULL ELSE follow_next_at END
             WHERE job_id = ?1 AND status NOT IN ('completed', 'failed', 'cancelled')", p![job_id, status, now]))?;
        Ok(n == 1)
    }

    fn claim_video_copy(&self, job_id: &str, now: &str, stale_before: &str) -> Result<bool> {
        let n = self.with(|db| {
            db.exec(
                "UPDATE video_jobs SET copy_claimed_at = ?2
             WHERE job_id = ?1 AND object_key IS NULL
               AND status NOT IN ('completed', 'failed', 'cancelled')
               AND (copy_claimed_at IS NULL OR copy_claimed_at < ?3)",
                p![job_id, now, stale_before],
            )
        })?;
        Ok(n == 1)
    }

    fn release_video_copy(&self, job_id: &str) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE video_jobs SET copy_claimed_at = NULL WHERE job_id = ?1",
                p![job_id],
            )
        })?;
        Ok(())
    }

    fn complete_video(
        &self,
        job_id: &str,
        object_key: &str,
        expires_at: &str,
        now: &str,
    ) -> Result<bool> {
        let n = self.with(|db| {
            db.exec(
                "UPDATE video_jobs SET status = 'completed', object_key = ?2, expires_at = ?3,
                    updated_at = ?4, follow_next_at = NULL, copy_claimed_at = NULL
             WHERE job_id = ?1 AND status NOT IN ('completed', 'failed', 'cancelled')",
                p![job_id, object_key, expires_at, now],
            )
        })?;
        Ok(n == 1)
    }

    fn claim_due_video_jobs(
        &self,
        now: &str,
        lease_until: &str,
        limit: usize,
    ) -> Result<Vec<VideoJobRow>> {
        self.with(|db| {
            let due = db.rows(
                &format!(
                    "SELECT {COLS} FROM video_jobs
                     WHERE follow_next_at IS NOT NULL AND follow_next_at <= ?1
                       AND status NOT IN ('completed', 'failed', 'cancelled')
                     ORDER BY follow_next_at LIMIT ?2"
                ),
                p![now, limit],
                row,
            )?;
            let mut out = Vec::new();
            for j in due {
                // The lease moves the next poll out; a conditional update, so
                // that one instance polls a job at a time.
                let n = db.exec(
                    "UPDATE video_jobs SET follow_next_at = ?3
                     WHERE job_id = ?1 AND follow_next_at IS NOT NULL AND follow_next_at <= ?2",
                    p![j.job_id, now, lease_until],
                )?;
                if n == 1 {
                    out.push(j);
                }
            }
            Ok(out)
        })
    }

    fn reschedule_video(&self, job_id: &str, next: Option<&str>) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE video_jobs SET follow_next_at = ?2
             WHERE job_id = ?1 AND status NOT IN ('completed', 'failed', 'cancelled')",
                p![job_id, next],
            )
        })?;
        Ok(())
    }
}
