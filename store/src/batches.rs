//! Batches (tables `batches` and `batch_lines`, migration 24): a batch's
//! row and each of its lines, claimed by the instances that run them.
//!
//! A batch and its lines are written by the create request's record
//! ([`super::Record::BatchCreate`]); a line's end by its own request's
//! ([`super::Record::BatchLine`], with that request's usage and debit, in
//! one transaction: a charged line is a done line). Claims, the batch's
//! progress and its end are here.
//!
//! A line is `waiting`, `claimed` (by the instance named in `owner`),
//! `done` (answered 2xx) or `failed`. A claim is a lease of the claiming
//! instance's own lease (`store::instances`): a line whose owner stopped
//! renewing returns to the pool, and an instance restarted under its id
//! puts its own claimed lines back at once.

use rust_decimal::Decimal;

use super::sql::{p, Db, Dialect, Row};
use super::{Result, Store};

/// One batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRow {
    /// `batch_…`.
    pub id: String,
    pub user_id: i64,
    /// The API key it was made with, its budgeted key and its model
    /// allow-list (JSON text): the rights its lines run with.
    pub key_id: Option<i64>,
    pub budget_key: Option<i64>,
    pub models: Option<String>,
    /// `/v1/chat/completions`, … and the row its lines are requests of.
    pub endpoint: String,
    pub route_id: String,
    pub input_file_id: String,
    pub completion_window: String,
    /// JSON text.
    pub metadata: Option<String>,
    /// OpenAI's statuses (`in_progress`, `finalizing`, `completed`,
    /// `failed`, `expired`, `cancelling`, `cancelled`).
    pub status: String,
    /// `expired` once its window passed with lines not run.
    pub ending: Option<String>,
    /// JSON text: the validation's errors (a `failed` batch's).
    pub errors: Option<String>,
    pub total: i64,
    pub output_file_id: Option<String>,
    pub error_file_id: Option<String>,
    pub created_at: String,
    pub expires_at: String,
    pub in_progress_at: Option<String>,
    pub finalizing_at: Option<String>,
    /// When it ended (`completed`, `failed`, `expired` or `cancelled`).
    pub ended_at: Option<String>,
    pub cancelling_at: Option<String>,
}

/// A batch to create, with its lines.
#[derive(Debug, Clone)]
pub struct NewBatch {
    pub row: BatchRow,
    pub lines: Vec<NewLine>,
}

/// One line of a new batch (numbered from 1).
#[derive(Debug, Clone)]
pub struct NewLine {
    pub line: i64,
    pub custom_id: String,
    /// JSON text: the request's body.
    pub body: String,
}

/// A line claimed to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedLine {
    pub line: i64,
    pub custom_id: String,
    pub body: String,
}

/// A line's end (what [`super::Record::BatchLine`] writes).
#[derive(Debug, Clone)]
pub struct LineEnd {
    pub batch_id: String,
    pub line: i64,
    /// `done` or `failed`.
    pub state: &'static str,
    /// The request that ran it (`None`: never run).
    pub request_id: Option<String>,
    pub status_code: Option<u16>,
    /// JSON text: the answer's body, or the error object of a line not run.
    pub result: String,
}

/// A line as its batch's results read it.
#[derive(Debug, Clone)]
pub struct LineRow {
    pub line: i64,
    pub custom_id: String,
    pub state: String,
    pub request_id: Option<String>,
    pub status_code: Option<u16>,
    pub result: Option<String>,
}

/// How many of a batch's lines are in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineCounts {
    pub waiting: i64,
    pub claimed: i64,
    pub done: i64,
    pub failed: i64,
}

impl LineCounts {
    /// Lines not ended yet.
    pub fn open(&self) -> i64 {
        self.waiting + self.claimed
    }
}

macro_rules! cols {
    () => {
        "id, user_id, key_id, budget_key, models, endpoint, route_id, input_file_id, completion_window, \
         metadata, status, ending, errors, total, output_file_id, error_file_id, created_at, expires_at, \
         in_progress_at, finalizing_at, ended_at, cancelling_at"
    };
}

fn row(r: &Row<'_>) -> Result<BatchRow> {
    Ok(BatchRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        key_id: r.get(2)?,
        budget_key: r.get(3)?,
        models: r.get(4)?,
        endpoint: r.get(5)?,
        route_id: r.get(6)?,
        input_file_id: r.get(7)?,
        completion_window: r.get(8)?,
        metadata: r.get(9)?,
        status: r.get(10)?,
        ending: r.get(11)?,
        errors: r.get(12)?,
        total: r.get(13)?,
        output_file_id: r.get(14)?,
        error_file_id: r.get(15)?,
        created_at: r.get(16)?,
        expires_at: r.get(17)?,
        in_progress_at: r.get(18)?,
        finalizing_at: r.get(19)?,
        ended_at: r.get(20)?,
        cancelling_at: r.get(21)?,
    })
}

/// Writes a new batch and its lines (inside the writer's transaction).
pub(super) fn insert_batch(tx: &mut Db<'_>, b: &NewBatch) -> Result<()> {
    let r = &b.row;
    tx.defer(
        concat!("INSERT INTO batches (", cols!(), ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)"),
        p![r.id, r.user_id, r.key_id, r.budget_key, r.models, r.endpoint, r.route_id, r.input_file_id, r.completion_window,
           r.metadata, r.status, r.ending, r.errors, r.total, r.output_file_id, r.error_file_id, r.created_at, r.expires_at,
           r.in_progress_at, r.finalizing_at, r.ended_at, r.cancelling_at],
    )?;
    for l in &b.lines {
        tx.defer(
            "INSERT INTO batch_lines (batch_id, line, custom_id, body, state) VALUES (?1, ?2, ?3, ?4, 'waiting')",
            p![r.id, l.line, l.custom_id, l.body],
        )?;
    }
    Ok(())
}

/// Writes a line's end, unless it ended already (a line run twice, its
/// lease lapsed meanwhile, keeps its first end; its second charge is
/// refused by the usage record's once-key).
pub(super) fn end_line(tx: &mut Db<'_>, l: &LineEnd) -> Result<()> {
    tx.defer(
        "UPDATE batch_lines SET state = ?3, request_id = ?4, status_code = ?5, result = ?6, owner = NULL
         WHERE batch_id = ?1 AND line = ?2 AND state IN ('waiting', 'claimed')",
        p![l.batch_id, l.line, l.state, l.request_id, l.status_code.map(i64::from), l.result],
    )
}

/// Batches and their lines. Another user's batch is never found.
pub trait Batches {
    /// The user's batch `id`.
    fn batch(&self, user_id: i64, id: &str) -> Result<Option<BatchRow>>;

    /// Batch `id`, whoever's (the executor's reads).
    fn batch_by_id(&self, id: &str) -> Result<Option<BatchRow>>;

    /// The user's batches, newest first, after the batch `after` (by
    /// id), at most `limit`.
    fn batches(&self, user_id: i64, after: Option<&str>, limit: usize) -> Result<Vec<BatchRow>>;

    /// The batches being run (or ended by an instance that stopped).
    fn running_batches(&self) -> Result<Vec<String>>;

    /// The lines of the batches in progress that wait for an instance.
    fn waiting_lines(&self) -> Result<u64>;

    /// How many of its lines are in each state.
    fn line_counts(&self, id: &str) -> Result<LineCounts>;

    /// What its lines were charged, together.
    fn batch_cost(&self, id: &str) -> Result<Decimal>;

    /// Claims up to `n` of its claimable lines for `instance`, in order.
    fn claim_lines(
        &self,
        id: &str,
        instance: &str,
        now: &str,
        n: usize,
    ) -> Result<Vec<ClaimedLine>>;

    /// Ends every line not running failed with `result` (JSON text):
    /// waiting, or claimed by an instance whose lease lapsed; how many.
    fn fail_waiting_lines(&self, id: &str, result: &str, now: &str) -> Result<u64>;

    /// Puts the lines of batch `id` claimed by `instance` back in the
    /// pool (none of them runs there).
    fn release_claims(&self, id: &str, instance: &str) -> Result<u64>;

    /// Marks the user's batch cancelling, if it is in progress; the row
    /// as it is after.
    fn cancel_batch(&self, user_id: i64, id: &str, now: &str) -> Result<Option<BatchRow>>;

    /// Marks an in-progress batch as ending `expired` (its window passed).
    fn expire_batch(&self, id: &str) -> Result<()>;

    /// Takes the end of batch `id` for `instance` once no line of it is
    /// open: `finalizing` (a cancelling batch stays so), unless another
    /// live instance is ending it. `true`: this instance writes its files.
    fn begin_batch_end(&self, id: &str, instance: &str, now: &str) -> Result<bool>;

    /// Ends batch `id` with `status` and its files.
    fn end_batch(
        &self,
        id: &str,
        status: &str,
        output_file_id: Option<&str>,
        error_file_id: Option<&str>,
        now: &str,
    ) -> Result<()>;

    /// Its lines in order after line `after`, at most `limit`.
    fn line_results(&self, id: &str, after: i64, limit: usize) -> Result<Vec<LineRow>>;
}

impl Batches for Store {
    fn batch(&self, user_id: i64, id: &str) -> Result<Option<BatchRow>> {
        let sql = concat!(
            "SELECT ",
            cols!(),
            " FROM batches WHERE id = ?1 AND user_id = ?2"
        );
        self.with(|db| db.row(sql, p![id, user_id], row))
    }

    fn batch_by_id(&self, id: &str) -> Result<Option<BatchRow>> {
        let sql = concat!("SELECT ", cols!(), " FROM batches WHERE id = ?1");
        self.with(|db| db.row(sql, p![id], row))
    }

    fn batches(&self, user_id: i64, after: Option<&str>, limit: usize) -> Result<Vec<BatchRow>> {
        let sql = concat!(
            "SELECT ",
            cols!(),
            " FROM batches WHERE user_id = ?1 AND (id < ?2 OR ?2 IS NULL) ORDER BY id DESC LIMIT ?3"
        );
        self.with(|db| db.rows(sql, p![user_id, after, limit as i64], row))
    }

    fn running_batches(&self) -> Result<Vec<String>> {
        self.with(|db| {
            db.rows(
                "SELECT id FROM batches WHERE status IN ('in_progress', 'cancelling', 'finalizing') ORDER BY id",
                &[],
                |r| r.get(0),
            )
        })
    }

    fn waiting_lines(&self) -> Result<u64> {
        self.with(|db| {
            db.row(
                "SELECT COUNT(*) FROM batch_lines l JOIN batches b ON b.id = l.batch_id
                 WHERE b.status = 'in_progress' AND l.state = 'waiting'",
                &[],
                |r| r.get::<i64>(0),
            )
        })
        .map(|n| n.unwrap_or(0).max(0) as u64)
    }

    fn line_counts(&self, id: &str) -> Result<LineCounts> {
        let counts: Vec<(String, i64)> = self.with(|db| {
            db.rows(
                "SELECT state, COUNT(*) FROM batch_lines WHERE batch_id = ?1 GROUP BY state",
                p![id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })?;
        let mut c = LineCounts::default();
        for (state, n) in counts {
            match state.as_str() {
                "waiting" => c.waiting = n,
                "claimed" => c.claimed = n,
                "done" => c.done = n,
                _ => c.failed += n,
            }
        }
        Ok(c)
    }

    fn batch_cost(&self, id: &str) -> Result<Decimal> {
        let charges: Vec<Decimal> = self.with(|db| {
            db.rows(
                // `unit != 'free'`: the partial index `usage_by_request`
                // serves the join (without it, a scan of usage per line).
                // Charges only: `usage`, not `usage_records` (the usage
                // folded into audit rows charges nothing).
                "SELECT u.charged FROM batch_lines l JOIN usage u ON u.request_id = l.request_id AND u.unit != 'free'
                 WHERE l.batch_id = ?1 AND l.request_id IS NOT NULL",
                p![id],
                |r| r.dec(0),
            )
        })?;
        Ok(charges.into_iter().sum())
    }

    fn claim_lines(
        &self,
        id: &str,
        instance: &str,
        now: &str,
        n: usize,
    ) -> Result<Vec<ClaimedLine>> {
        let mut lines = self.transaction(|db| {
            // Lines of an instance whose lease lapsed go back to the pool
            // first (few, found by `batch_lines_by_state`); then waiting
            // lines are claimed in order, by the same index. (One condition
            // for both kept the database off the index: each claim walked
            // the batch from its first line.)
            db.exec(
                "UPDATE batch_lines SET state = 'waiting', owner = NULL WHERE batch_id = ?1 AND state = 'claimed'
                 AND owner NOT IN (SELECT id FROM instances WHERE lease_until > ?2)",
                p![id, now],
            )?;
            let sql = match db.dialect() {
                // Two instances claiming at once never take the same line:
                // a locked line is skipped. The lines are chosen once, in a
                // CTE (an `IN (subquery … FOR UPDATE)` may run per row).
                Dialect::Postgres => concat!(
                    "WITH c AS (SELECT line FROM batch_lines WHERE batch_id = ?1 AND state = 'waiting'",
                    " ORDER BY line LIMIT ?3 FOR UPDATE SKIP LOCKED) ",
                    "UPDATE batch_lines b SET state = 'claimed', owner = ?2 FROM c WHERE b.batch_id = ?1 AND b.line = c.line ",
                    "RETURNING b.line, b.custom_id, b.body"
                ),
                // One writer at a time: the statement sees what it updates.
                Dialect::Sqlite => concat!(
                    "UPDATE batch_lines SET state = 'claimed', owner = ?2 WHERE batch_id = ?1",
                    " AND line IN (SELECT line FROM batch_lines WHERE batch_id = ?1 AND state = 'waiting'",
                    " ORDER BY line LIMIT ?3) RETURNING line, custom_id, body"
                ),
            };
            db.rows(sql, p![id, instance, n as i64], |r| {
                Ok(ClaimedLine {
                    line: r.get(0)?,
                    custom_id: r.get(1)?,
                    body: r.get(2)?,
                })
            })
        })?;
        lines.sort_by_key(|l| l.line);
        Ok(lines)
    }

    fn fail_waiting_lines(&self, id: &str, result: &str, now: &str) -> Result<u64> {
        self.with(|db| {
            db.exec(
                "UPDATE batch_lines SET state = 'failed', result = ?2, owner = NULL WHERE batch_id = ?1 AND
                 (state = 'waiting' OR (state = 'claimed' AND owner NOT IN (SELECT id FROM instances WHERE lease_until > ?3)))",
                p![id, result, now],
            )
        })
    }

    fn release_claims(&self, id: &str, instance: &str) -> Result<u64> {
        self.with(|db| {
            db.exec(
                "UPDATE batch_lines SET state = 'waiting', owner = NULL
                 WHERE batch_id = ?1 AND state = 'claimed' AND owner = ?2",
                p![id, instance],
            )
        })
    }

    fn cancel_batch(&self, user_id: i64, id: &str, now: &str) -> Result<Option<BatchRow>> {
        self.with(|db| {
            db.exec(
                "UPDATE batches SET status = 'cancelling', cancelling_at = ?3
                 WHERE id = ?1 AND user_id = ?2 AND status IN ('validating', 'in_progress')",
                p![id, user_id, now],
            )?;
            let sql = concat!(
                "SELECT ",
                cols!(),
                " FROM batches WHERE id = ?1 AND user_id = ?2"
            );
            db.row(sql, p![id, user_id], row)
        })
    }

    fn expire_batch(&self, id: &str) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE batches SET ending = 'expired' WHERE id = ?1 AND status = 'in_progress'",
                p![id],
            )
            .map(drop)
        })
    }

    fn begin_batch_end(&self, id: &str, instance: &str, now: &str) -> Result<bool> {
        let sql = "UPDATE batches SET owner = ?2, finalizing_at = COALESCE(finalizing_at, ?3),
                 status = CASE WHEN status = 'in_progress' THEN 'finalizing' ELSE status END
             WHERE id = ?1 AND status IN ('in_progress', 'cancelling', 'finalizing')
               AND (owner IS NULL OR owner = ?2 OR owner NOT IN (SELECT id FROM instances WHERE lease_until > ?3))
               AND NOT EXISTS (SELECT 1 FROM batch_lines WHERE batch_id = ?1 AND state IN ('waiting', 'claimed'))";
        self.with(|db| db.exec(sql, p![id, instance, now]).map(|n| n == 1))
    }

    fn end_batch(
        &self,
        id: &str,
        status: &str,
        output_file_id: Option<&str>,
        error_file_id: Option<&str>,
        now: &str,
    ) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE batches SET status = ?2, output_file_id = ?3, error_file_id = ?4, ended_at = ?5, owner = NULL
                 WHERE id = ?1",
                p![id, status, output_file_id, error_file_id, now],
            )
            .map(drop)
        })
    }

    fn line_results(&self, id: &str, after: i64, limit: usize) -> Result<Vec<LineRow>> {
        self.with(|db| {
            db.rows(
                "SELECT line, custom_id, state, request_id, status_code, result FROM batch_lines
                 WHERE batch_id = ?1 AND line > ?2 ORDER BY line LIMIT ?3",
                p![id, after, limit as i64],
                |r| {
                    Ok(LineRow {
                        line: r.get(0)?,
                        custom_id: r.get(1)?,
                        state: r.get(2)?,
                        request_id: r.get(3)?,
                        status_code: r.get::<Option<i64>>(4)?.map(|c| c as u16),
                        result: r.get(5)?,
                    })
                },
            )
        })
    }
}
