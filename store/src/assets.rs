//! Repositories of stored objects' records (assets) and of jobs.

use super::sql::{p, Row};
use super::{Result, Store};

/// An asset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssetRow {
    pub id: i64,
    pub owner_id: Option<i64>,
    pub object_key: String,
    pub class: String,
    pub purpose: Option<String>,
    pub size_bytes: u64,
    pub content_type: String,
    pub file_name: Option<String>,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub deleted_at: Option<String>,
    /// The segment holding a packed object (`objects::pack`), if packed.
    pub pack: Option<String>,
    /// Offset of a packed object's body in its segment.
    pub pack_offset: Option<u64>,
}

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

const ASSET_COLS: &str =
    "id, owner_id, object_key, class, purpose, size_bytes, content_type, file_name, created_at, expires_at, deleted_at, pack, pack_offset";

fn row_to_asset(r: &Row<'_>) -> Result<AssetRow> {
    Ok(AssetRow {
        id: r.get(0)?,
        owner_id: r.get(1)?,
        object_key: r.get(2)?,
        class: r.get(3)?,
        purpose: r.get(4)?,
        size_bytes: r.get::<i64>(5)? as u64,
        content_type: r.get(6)?,
        file_name: r.get(7)?,
        created_at: r.get(8)?,
        expires_at: r.get(9)?,
        deleted_at: r.get(10)?,
        pack: r.get(11)?,
        pack_offset: r.get::<Option<i64>>(12)?.map(|o| o as u64),
    })
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

impl Store {
    pub fn asset(&self, id: i64) -> Result<Option<AssetRow>> {
        self.with(|db| {
            db.row(
                &format!("SELECT {ASSET_COLS} FROM assets WHERE id = ?1"),
                p![id],
                row_to_asset,
            )
        })
    }

    pub fn asset_by_key(&self, key: &str) -> Result<Option<AssetRow>> {
        self.with(|db| {
            db.row(
                &format!("SELECT {ASSET_COLS} FROM assets WHERE object_key = ?1"),
                p![key],
                row_to_asset,
            )
        })
    }

    /// Every asset, oldest first (tests, operators).
    pub fn assets(&self) -> Result<Vec<AssetRow>> {
        self.with(|db| {
            db.rows(
                &format!("SELECT {ASSET_COLS} FROM assets ORDER BY id"),
                &[],
                row_to_asset,
            )
        })
    }

    /// Where the live asset of `key` is packed: `(segment, body offset,
    /// size, content type)`; `None` when there is none or it is a file.
    /// (`object_key` is unique, so this is one index lookup.)
    pub fn packed_object(&self, key: &str) -> Result<Option<(String, u64, u64, String)>> {
        self.with(|db| {
            db.row(
                "SELECT pack, pack_offset, size_bytes, content_type FROM assets
                 WHERE object_key = ?1 AND deleted_at IS NULL AND pack IS NOT NULL",
                p![key],
                |r| {
                    Ok((
                        r.get::<String>(0)?,
                        r.get::<Option<i64>>(1)?.unwrap_or(0) as u64,
                        r.get::<i64>(2)? as u64,
                        r.get::<String>(3)?,
                    ))
                },
            )
        })
    }

    /// The segments that live assets are packed in (retention keeps them).
    pub fn live_packs(&self) -> Result<Vec<String>> {
        self.with(|db| {
            db.rows(
                "SELECT DISTINCT pack FROM assets WHERE deleted_at IS NULL AND pack IS NOT NULL",
                &[],
                |r| r.get(0),
            )
        })
    }

    /// Live assets whose `expires_at` is at or before `now` (permanent ones never).
    pub fn expired_assets(&self, now: &str, limit: usize) -> Result<Vec<AssetRow>> {
        self.with(|db| db.rows(&format!(
            "SELECT {ASSET_COLS} FROM assets
             WHERE deleted_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ?1 ORDER BY expires_at LIMIT ?2"
        ), p![now, limit as i64], row_to_asset))
    }

    /// Marks an asset's object deleted.
    pub fn mark_asset_deleted(&self, id: i64, at: &str) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE assets SET deleted_at = ?2 WHERE id = ?1 AND deleted_at IS NULL",
                p![id, at],
            )
        })?;
        Ok(())
    }

    /// The live asset `id` of class `class` owned by `owner`: not deleted and
    /// not expired at `now`.
    pub fn live_owned_asset(
        &self,
        owner: i64,
        class: &str,
        id: i64,
        now: &str,
    ) -> Result<Option<AssetRow>> {
        self.with(|db| {
            db.row(
                &format!(
                    "SELECT {ASSET_COLS} FROM assets WHERE id = ?1 AND owner_id = ?2 AND class = ?3
                     AND deleted_at IS NULL AND (expires_at IS NULL OR expires_at > ?4)"
                ),
                p![id, owner, class, now],
                row_to_asset,
            )
        })
    }

    /// One page of `owner`'s live assets of class `class` at `now`, newest
    /// first, and how many there are.
    pub fn live_owned_assets(
        &self,
        owner: i64,
        class: &str,
        now: &str,
        limit: u32,
        skip: u32,
    ) -> Result<(Vec<AssetRow>, u64)> {
        const LIVE: &str = "owner_id = ?1 AND class = ?2 AND deleted_at IS NULL
                            AND (expires_at IS NULL OR expires_at > ?3)";
        self.with(|db| {
            let total: i64 = db
                .row(
                    &format!("SELECT COUNT(*) FROM assets WHERE {LIVE}"),
                    p![owner, class, now],
                    |r| r.get(0),
                )?
                .unwrap_or(0);
            let rows = db.rows(
                &format!(
                    "SELECT {ASSET_COLS} FROM assets WHERE {LIVE} ORDER BY id DESC LIMIT ?4 OFFSET ?5"
                ),
                p![owner, class, now, limit as i64, skip as i64],
                row_to_asset,
            )?;
            Ok((rows, total as u64))
        })
    }

    /// Marks `owner`'s live asset `id` of class `class` deleted at `now`
    /// (its object already deleted by the caller): it is answered no more,
    /// and the sweeper leaves it. Whether there was one.
    pub fn delete_owned_asset(&self, owner: i64, class: &str, id: i64, now: &str) -> Result<bool> {
        let n = self.with(|db| {
            db.exec(
                "UPDATE assets SET deleted_at = ?4 WHERE id = ?1 AND owner_id = ?2 AND class = ?3
                 AND deleted_at IS NULL AND (expires_at IS NULL OR expires_at > ?4)",
                p![id, owner, class, now],
            )
        })?;
        Ok(n == 1)
    }

    /// Test and operator hook: moves an asset's expiry.
    pub fn set_asset_expiry(&self, id: i64, expires_at: Option<&str>) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE assets SET expires_at = ?2 WHERE id = ?1",
                p![id, expires_at],
            )
        })?;
        Ok(())
    }

    /// A job by kind and the id the caller holds.
    pub fn job(&self, kind: &str, job_id: &str) -> Result<Option<JobRow>> {
        self.with(|db| {
            db.row(
                &format!("SELECT {JOB_COLS} FROM jobs WHERE kind = ?1 AND job_id = ?2"),
                p![kind, job_id],
                row_to_job,
            )
        })
    }

    /// A job by kind and upstream id (inbound webhooks).
    pub fn job_by_upstream(&self, kind: &str, upstream_id: &str) -> Result<Option<JobRow>> {
        self.with(|db| {
            db.row(
                &format!("SELECT {JOB_COLS} FROM jobs WHERE kind = ?1 AND upstream_id = ?2"),
                p![kind, upstream_id],
                row_to_job,
            )
        })
    }

    /// A user's jobs of a kind, newest first, one page (1-based), and the total.
    pub fn jobs_of(
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

    /// Tries to take the right to copy a job's result (multi-instance safe:
    /// the claim is a conditional update). A claim older than `stale_before`
    /// (its holder died) or a failed copy can be taken again.
    pub fn claim_mirror(
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

    /// Records a finished copy (the asset is already committed).
    pub fn finish_mirror(&self, kind: &str, job_id: &str, asset_id: i64) -> Result<()> {
        self.with(|db| db.exec("UPDATE jobs SET mirror_state = 'done', mirror_asset_id = ?3 WHERE kind = ?1 AND job_id = ?2", p![kind, job_id, asset_id]))?;
        Ok(())
    }

    /// Records a failed copy; the next GET may try again.
    pub fn fail_mirror(&self, kind: &str, job_id: &str) -> Result<()> {
        self.with(|db| db.exec("UPDATE jobs SET mirror_state = 'failed' WHERE kind = ?1 AND job_id = ?2 AND mirror_asset_id IS NULL", p![kind, job_id]))?;
        Ok(())
    }

    /// Pending jobs whose next poll is due at `now` and that no instance
    /// holds a live lease on, the most overdue first.
    pub fn due_jobs(&self, now: &str, limit: usize) -> Result<Vec<JobRow>> {
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

    /// Tries to take the lease of one poll of a job until `lease_until`
    /// (multi-instance safe: a conditional update; an expired lease, whose
    /// holder died, can be taken again). Counts the attempt.
    pub fn claim_follow(
        &self,
        kind: &str,
        job_id: &str,
        now: &str,
        lease_until: &str,
    ) -> Result<bool> {
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

    /// Releases a poll's lease and sets the next poll (`None`: stop following).
    pub fn release_follow(&self, kind: &str, job_id: &str, next: Option<&str>) -> Result<()> {
        self.with(|db| db.exec("UPDATE jobs SET follow_lease_until = NULL,
                    follow_next_at = CASE WHEN status IN ('completed', 'failed') THEN NULL ELSE ?3 END
             WHERE kind = ?1 AND job_id = ?2", p![kind, job_id, next]))?;
        Ok(())
    }
}
