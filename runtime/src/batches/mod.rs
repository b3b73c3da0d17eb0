//! The batch executor: every instance runs the batches in progress
//! (`modes::batches` makes them), line by line, each line a request of its
//! own ([`crate::pipeline::run_line`]).
//!
//! ```text
//!  loop (each second, or woken by a batch made or cancelled here)
//!    running batches ─▶ one task per batch ─▶ claim lines ─▶ run each ─▶ its end committed
//!                                       └─ none open ─▶ begin the end ─▶ files ─▶ ended
//! ```
//!
//! * **Claims.** Lines are claimed from the database a few at a time, as
//!   places free up: at most `GATEWAY_BATCH_CONCURRENCY` of a batch and
//!   `GATEWAY_BATCH_INSTANCE_CONCURRENCY` of all batches on an instance.
//!   Lines yield to interactive traffic: a line starts when no interactive
//!   request is in flight on the instance, or after waiting a second. A claim is a lease of the instance's own lease: a crashed
//!   instance's lines return to the pool once it lapses (or at once when
//!   it restarts), so several instances share a batch and none loses one.
//! * **Money.** A line is a model request like any other (held, routed,
//!   retried, cached, settled), at its model's batch price, its usage
//!   record once-keyed by the line (`batch_…#n`): its result and charge
//!   are committed together, so a charged line is never run again, and a
//!   line run twice (its lease lapsed while it ran) is charged once.
//! * **No credit.** A line whose hold is refused (402: the balance, or the
//!   key's budget) waits until the batch's other lines here finished, and
//!   is tried once more alone; refused again, it and every waiting line
//!   end `insufficient_credits`, and the batch ends `completed` with what
//!   was done: never overdrawn.
//! * **Window and cancel.** Past its window no line starts: the waiting
//!   ones end `batch_expired` and the batch `expired`; a cancelled batch's
//!   waiting lines end `batch_cancelled`, those in flight finish (billed),
//!   then the batch is `cancelled`.
//! * **The end** ([`results`]): once no line is open, one instance takes
//!   the end and writes the output and error files.

mod results;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::pipeline::{self, Line, LineRun};
use crate::services::Gateway;
use gateway_base::spec::EndpointSpec;
use gateway_store::{
    Accounts, BatchRow, Batches, ClaimedLine, Keys, LineEnd, OutsideRecordPhase, Record, User,
};

/// How often the executor looks for batches and a batch at its lines.
const POLL: Duration = Duration::from_secs(1);

/// Runs the batches of the database on this instance (`instance`), until
/// the task is aborted.
pub async fn run(gw: Gateway, instance: String) {
    let shared = Arc::new(Shared {
        gw: gw.clone(),
        instance,
        running: Mutex::new(HashSet::new()),
        places: Arc::new(tokio::sync::Semaphore::new(gw.config.batches.per_instance)),
    });
    loop {
        let ids = gw.store.blocking(|s| s.running_batches()).await;
        // No batch running: nothing waits (no query).
        let waiting = match &ids {
            Ok(ids) if !ids.is_empty() => gw.store.blocking(|s| s.waiting_lines()).await.ok(),
            _ => Some(0),
        };
        if let Some(n) = waiting {
            gateway_base::telemetry::batch_lines_waiting(n);
        }
        for id in ids.unwrap_or_default() {
            if lock(&shared.running).insert(id.clone()) {
                tokio::spawn(run_batch(shared.clone(), id));
            }
        }
        tokio::select! {
            _ = gw.batch_wake.notified() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// What the batches run on this instance share.
struct Shared {
    gw: Gateway,
    instance: String,
    /// The batches this instance runs now.
    running: Mutex<HashSet<String>>,
    /// The places of lines in flight on this instance.
    places: Arc<tokio::sync::Semaphore>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One batch on this instance, until nothing is left for it to do here.
async fn run_batch(shared: Arc<Shared>, id: String) {
    let mut batch = Batch {
        shared: shared.clone(),
        id: id.clone(),
        in_flight: tokio::task::JoinSet::new(),
        lines: HashMap::new(),
        refused: Vec::new(),
        last: None,
    };
    if let Err(e) = batch.run().await {
        tracing::warn!(batch = %id, error = %e, "a batch's round failed; it is taken up again");
        // The lines in flight finish here, their ends recorded if the
        // database lets them (else their claims are released later).
        while !batch.in_flight.is_empty() {
            let _ = batch.join_one().await;
        }
    }
    lock(&shared.running).remove(&id);
}

/// A batch being run here.
struct Batch {
    shared: Arc<Shared>,
    id: String,
    in_flight: tokio::task::JoinSet<(ClaimedLine, LineRun)>,
    /// The line each task in flight runs.
    lines: HashMap<tokio::task::Id, i64>,
    /// Lines refused for credit, to be tried again alone.
    refused: Vec<ClaimedLine>,
    /// The last round that claimed, while lines run: reused for
    /// [`ROUND_TTL`] (a round reads the batch and its caller's key).
    last: Option<(std::time::Instant, BatchRow, Round)>,
}

/// How long a claiming round's reads are reused while lines run (a
/// cancel, an expiry or a revoked key is seen within it).
const ROUND_TTL: Duration = Duration::from_millis(500);

/// What the next round of a batch does.
#[derive(Clone)]
enum Round {
    /// Claim lines and run them.
    Claim(&'static EndpointSpec, User),
    /// Start no line (cancelled, expired, or lines refused for credit).
    Drain,
    /// Nothing more here: the batch ended, or another instance ends it.
    Leave,
}

impl Batch {
    fn gw(&self) -> &Gateway {
        &self.shared.gw
    }

    /// The row the batch's lines are requests of.
    fn line_spec(&self, row: &BatchRow) -> Option<&'static EndpointSpec> {
        let routes = self.gw().table.routes;
        routes.iter().copied().find(|r| r.id == row.route_id)
    }

    async fn run(&mut self) -> Result<(), gateway_store::StoreError> {
        loop {
            let Some((row, round)) = self.next_round().await? else {
                return Ok(());
            };
            match round {
                Round::Leave => return Ok(()),
                Round::Claim(spec, user) => self.claim(spec, &user, &row).await?,
                Round::Drain => {}
            }
            if self.in_flight.is_empty() {
                if !self.refused.is_empty() {
                    self.retry_refused(&row).await?;
                    continue;
                }
                if self.try_end(&row).await? {
                    return Ok(());
                }
                tokio::time::sleep(POLL).await;
                continue;
            }
            tokio::select! {
                done = self.join_one() => done?,
                _ = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// The batch and what this round may do: the last claiming round's
    /// while lines run and it is fresh, else read now (`None`: the batch
    /// is gone).
    async fn next_round(&mut self) -> Result<Option<(BatchRow, Round)>, gateway_store::StoreError> {
        if let Some((at, row, round)) = &self.last {
            if at.elapsed() < ROUND_TTL && !self.in_flight.is_empty() {
                return Ok(Some((row.clone(), round.clone())));
            }
        }
        let id = self.id.clone();
        let Some(row) = self
            .gw()
            .store
            .blocking(move |s| s.batch_by_id(&id))
            .await?
        else {
            return Ok(None);
        };
        let round = self.round(&row).await?;
        self.last = matches!(round, Round::Claim(..))
            .then(|| (std::time::Instant::now(), row.clone(), round.clone()));
        Ok(Some((row, round)))
    }

    /// What this round may do: the batch's status, its window, its
    /// caller's rights now.
    async fn round(&self, row: &BatchRow) -> Result<Round, gateway_store::StoreError> {
        let now = gateway_store::now_rfc3339();
        match row.status.as_str() {
            "in_progress" if row.expires_at <= now && row.ending.is_none() => {
                let id = self.id.clone();
                self.gw()
                    .store
                    .blocking(move |s| s.expire_batch(&id))
                    .await?;
                self.fail_waiting(
                    "batch_expired",
                    "the batch's window ended before this request ran",
                )
                .await?;
                return Ok(Round::Drain);
            }
            "in_progress" if row.ending.is_some() => {
                self.fail_waiting(
                    "batch_expired",
                    "the batch's window ended before this request ran",
                )
                .await?;
                return Ok(Round::Drain);
            }
            "in_progress" => {}
            "cancelling" => {
                self.fail_waiting(
                    "batch_cancelled",
                    "the batch was cancelled before this request ran",
                )
                .await?;
                return Ok(Round::Drain);
            }
            "finalizing" => return Ok(Round::Drain),
            _ => return Ok(Round::Leave),
        }
        if !self.refused.is_empty() {
            return Ok(Round::Drain);
        }
        let Some(spec) = self.line_spec(row) else {
            self.fail_waiting("invalid_request", "the batch's endpoint is served no more")
                .await?;
            return Ok(Round::Drain);
        };
        match self.caller(row).await? {
            Ok(user) => Ok(Round::Claim(spec, user)),
            Err(why) => {
                self.fail_waiting("invalid_api_key", why).await?;
                Ok(Round::Drain)
            }
        }
    }

    /// The batch's caller as its key is now (its allowed models, its
    /// budget); `Err` when the key was revoked or the account disabled or
    /// deleted since.
    async fn caller(
        &self,
        row: &BatchRow,
    ) -> Result<Result<User, &'static str>, gateway_store::StoreError> {
        let (user_id, key_id) = (row.user_id, row.key_id);
        let found = self
            .gw()
            .store
            .blocking(move |s| match key_id {
                Some(k) => match s.key_hash_of(user_id, k)? {
                    Some(h) => Ok(s.key_owner(&h)?.filter(|o| !o.revoked).map(|o| o.user)),
                    None => Ok(None),
                },
                None => s.user(user_id),
            })
            .await?;
        Ok(match found {
            Some(u) if !u.disabled && !u.deleted => Ok(u),
            Some(_) => Err("the batch's account is disabled"),
            None => Err("the batch's API key was revoked"),
        })
    }

    /// Claims lines for the places free and starts them.
    async fn claim(
        &mut self,
        spec: &'static EndpointSpec,
        user: &User,
        row: &BatchRow,
    ) -> Result<(), gateway_store::StoreError> {
        let limits = self.gw().config.batches;
        let free = limits
            .concurrency
            .saturating_sub(self.in_flight.len())
            .min(self.shared.places.available_permits());
        // Claimed a few at a time: a claim is a write of its own.
        let available = self.shared.places.available_permits().max(1);
        let enough = (limits.concurrency / 2).max(1).min(available);
        if free == 0 || (free < enough && !self.in_flight.is_empty()) {
            return Ok(());
        }
        let (id, instance, now) = (
            self.id.clone(),
            self.shared.instance.clone(),
            gateway_store::now_rfc3339(),
        );
        let lines = self
            .gw()
            .store
            .blocking(move |s| s.claim_lines(&id, &instance, &now, free))
            .await?;
        let capability = create_capability(self.gw());
        for line in lines {
            self.start(spec, user.clone(), line, capability, row);
        }
        Ok(())
    }

    /// Runs `line` in a task of its own, in one of the instance's places.
    fn start(
        &mut self,
        spec: &'static EndpointSpec,
        user: User,
        line: ClaimedLine,
        capability: &'static str,
        row: &BatchRow,
    ) {
        let gw = self.shared.gw.clone();
        let places = self.shared.places.clone();
        let batch_id = row.id.clone();
        let n = line.line;
        let task = self.in_flight.spawn(async move {
            let _place = places.acquire_owned().await;
            yield_to_interactive().await;
            let run = loop {
                let l = Line {
                    batch_id: batch_id.clone(),
                    line: line.line,
                    body: bytes::Bytes::from(line.body.clone()),
                    capability,
                };
                match pipeline::run_line(gw.clone(), spec, user.clone(), l).await {
                    LineRun::Wait(secs) => tokio::time::sleep(Duration::from_secs(secs)).await,
                    other => break other,
                }
            };
            (line, run)
        });
        self.lines.insert(task.id(), n);
    }

    /// Waits for a line in flight to end and does what its end leaves to
    /// do ([`Batch::ended`]).
    async fn join_one(&mut self) -> Result<(), gateway_store::StoreError> {
        match self.join_ran().await? {
            Some((line, run)) => self.ended(line, run).await,
            None => Ok(()),
        }
    }

    /// The next line in flight to end, and how it ran; a line whose task
    /// failed (a panic) ends failed here (`None`).
    async fn join_ran(
        &mut self,
    ) -> Result<Option<(ClaimedLine, LineRun)>, gateway_store::StoreError> {
        match self.in_flight.join_next_with_id().await {
            Some(Ok((id, ran))) => {
                self.lines.remove(&id);
                Ok(Some(ran))
            }
            Some(Err(e)) => {
                let Some(n) = self.lines.remove(&e.id()) else {
                    return Ok(None);
                };
                tracing::error!(batch = %self.id, line = n, error = %e, "a batch line's task failed");
                let why = json!({"code": "server_error", "message": "the request failed inside the gateway"});
                self.record_failed(n, None, None, why.to_string()).await?;
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// What a line's run left to do: an error answer recorded, a refusal
    /// for credit kept to be tried again alone.
    async fn ended(
        &mut self,
        line: ClaimedLine,
        run: LineRun,
    ) -> Result<(), gateway_store::StoreError> {
        match run {
            LineRun::Done => {
                gateway_base::telemetry::batch_line("done", 1);
                Ok(())
            }
            LineRun::Wait(_) => Ok(()),
            LineRun::Failed {
                no_credit: true, ..
            } => {
                self.refused.push(line);
                Ok(())
            }
            LineRun::Failed {
                request_id,
                status,
                body,
                ..
            } => {
                self.record_failed(line.line, Some(request_id), Some(status), body)
                    .await
            }
        }
    }

    /// Tries the lines refused for credit again, one by one, alone: the
    /// first refused again ends itself, the others and every waiting line
    /// `insufficient_credits`.
    async fn retry_refused(&mut self, row: &BatchRow) -> Result<(), gateway_store::StoreError> {
        let active = row.status == "in_progress" && row.ending.is_none();
        let retry = match active {
            true => self.round_for_retry(row).await?,
            false => Round::Drain,
        };
        let mut refused = std::mem::take(&mut self.refused).into_iter();
        let Round::Claim(spec, user) = retry else {
            // Not tried again (cancelled, expired, its key revoked): they
            // end as they were refused.
            for l in refused {
                self.record_failed(l.line, None, None, no_credit_error())
                    .await?;
            }
            return Ok(());
        };
        let capability = create_capability(self.gw());
        while let Some(line) = refused.next() {
            self.start(spec, user.clone(), line, capability, row);
            let Some((line, run)) = self.join_ran().await? else {
                continue;
            };
            if let LineRun::Failed {
                no_credit: true, ..
            } = run
            {
                let why = no_credit_error();
                for l in std::iter::once(line).chain(refused.by_ref()) {
                    self.record_failed(l.line, None, None, why.clone()).await?;
                }
                return self.fail_waiting("insufficient_credits", NO_CREDIT).await;
            }
            self.ended(line, run).await?;
        }
        Ok(())
    }

    /// The round of a retry: the batch's caller and row, whatever else
    /// holds the batch back.
    async fn round_for_retry(&self, row: &BatchRow) -> Result<Round, gateway_store::StoreError> {
        let Some(spec) = self.line_spec(row) else {
            return Ok(Round::Drain);
        };
        Ok(match self.caller(row).await? {
            Ok(user) => Round::Claim(spec, user),
            Err(_) => Round::Drain,
        })
    }

    /// Ends line `n` failed: with the answer that refused it, or (no
    /// request) the error `result`.
    async fn record_failed(
        &self,
        n: i64,
        request_id: Option<String>,
        status: Option<u16>,
        result: String,
    ) -> Result<(), gateway_store::StoreError> {
        let end = LineEnd {
            batch_id: self.id.clone(),
            line: n,
            state: "failed",
            request_id,
            status_code: status,
            result,
        };
        self.gw()
            .store
            .commit_outside_record_phase(
                OutsideRecordPhase::BatchLine,
                vec![Record::BatchLine(end)],
            )
            .await?;
        gateway_base::telemetry::batch_line("failed", 1);
        Ok(())
    }

    /// Ends every waiting line failed with `code`.
    async fn fail_waiting(
        &self,
        code: &str,
        message: &str,
    ) -> Result<(), gateway_store::StoreError> {
        let result = json!({"code": code, "message": message}).to_string();
        let (id, now) = (self.id.clone(), gateway_store::now_rfc3339());
        let n = self
            .gw()
            .store
            .blocking(move |s| s.fail_waiting_lines(&id, &result, &now))
            .await?;
        gateway_base::telemetry::batch_line("failed", n);
        Ok(())
    }

    /// Takes the batch's end when no line is open and writes it; `true`
    /// when there is nothing more to do here (ended, or ended elsewhere).
    async fn try_end(&self, row: &BatchRow) -> Result<bool, gateway_store::StoreError> {
        let (id, instance, now) = (
            self.id.clone(),
            self.shared.instance.clone(),
            gateway_store::now_rfc3339(),
        );
        let taken = self
            .gw()
            .store
            .blocking(move |s| s.begin_batch_end(&id, &instance, &now))
            .await?;
        if taken {
            results::finish(self.gw(), row).await?;
            return Ok(true);
        }
        let id = self.id.clone();
        let counts = self
            .gw()
            .store
            .blocking(move |s| s.line_counts(&id))
            .await?;
        if counts.claimed > 0 {
            // Nothing runs here: a line still claimed by this instance lost
            // its end (the database failed to take it); it goes back.
            let (id, instance) = (self.id.clone(), self.shared.instance.clone());
            self.gw()
                .store
                .blocking(move |s| s.release_claims(&id, &instance))
                .await?;
        }
        // Lines open elsewhere: this instance waits for them (their
        // instance may stop); none: another instance is ending it.
        Ok(counts.open() == 0 && row.status != "in_progress")
    }
}

/// What a line refused for credit says.
const NO_CREDIT: &str = "the balance or the API key's budget could not hold this request";

fn no_credit_error() -> String {
    json!({"code": "insufficient_credits", "message": NO_CREDIT}).to_string()
}

/// The capability a batch's lines count against: the batch creation
/// row's (`endpoints.toml`).
fn create_capability(gw: &Gateway) -> &'static str {
    gw.table
        .routes
        .iter()
        .find(|r| r.mode == gateway_base::spec::Mode::BatchCreate)
        .map_or("batch", |r| r.capability)
}

/// Waits (up to a second) before a line starts while interactive requests
/// are in flight: batch lines yield to them. A line starts when none is
/// in flight, or after that second (so a busy instance still runs a
/// batch, slowly, and no batch starves).
async fn yield_to_interactive() {
    for _ in 0..200 {
        if gateway_base::watchdog::requests_in_flight() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
