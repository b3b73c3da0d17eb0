//! The job follower: pending jobs followed to the end without a caller.
//!
//! A job is otherwise observed only when its caller GETs it or the
//! provider's webhook arrives; a job nobody asks about would never be billed
//! nor called back. The follower polls every pending job (status neither
//! `completed` nor `failed`) upstream until it finishes:
//!
//! * **Schedule in the database.** A job's next poll is `follow_next_at` on
//!   its row (set at submission, 2 s after it:
//!   [`crate::config::Config::job_follow_first_delay`]); after each poll that
//!   leaves it pending, the delay doubles up to
//!   [`crate::config::Config::job_follow_max_delay`] (2 s, 4 s, 8 s … 60 s).
//!   Nothing is kept in memory, so a restarted gateway resumes from the rows.
//! * **One poller per job, across instances.** Each poll is claimed by a
//!   conditional update taking a lease on the row
//!   ([`gateway_store::Store::claim_follow`]); a lease whose holder died
//!   expires ([`lease`]) and the job is taken over.
//! * **Bounded.** At most `GATEWAY_JOB_FOLLOW_CONCURRENCY` polls run at once
//!   per instance; the follower looks for due jobs every
//!   `GATEWAY_JOB_FOLLOW_SECS` (0 disables it).
//! * **The same progress as a GET.** What a poll sees goes through
//!   [`crate::progress::observe`]: billed once (the once-keyed usage record,
//!   committed by the group-commit writer), called back once (the callback
//!   starts after the commit), and a completed result of a mirrored kind is
//!   copied once ([`crate::mirror::mirror`]; a failed copy is retried by the
//!   next GET).
//! * **Giving up.** Network errors, 5xx and other upstream errors back off
//!   like a pending job. A job is no longer followed once it is older than
//!   [`MAX_AGE`], or when the upstream still answers 404 for it after
//!   [`NOT_FOUND_ATTEMPTS`] polls (a job the provider does not know). It is
//!   not marked failed: its status stays what was last seen, and a GET or a
//!   webhook can still finish it.
//! * **Video jobs too.** Each tick also polls the general gateway's due
//!   video jobs ([`crate::videos::follow_due`]: their own table, claimed the
//!   same way, billed and copied once by [`crate::videos::observe`]).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::ctx::{charge_of, new_request_id};
use crate::progress::{item_of, observe};
use crate::services::Gateway;
use gateway_base::errors::ApiError;
use gateway_base::spec::{JobKind, PathParams};
use gateway_store::{rfc3339, JobRow, Jobs, OutsideRecordPhase, Record};

/// A job older than this is no longer followed.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// A job the upstream answers 404 for after this many polls is no longer followed.
pub const NOT_FOUND_ATTEMPTS: u32 = 10;

/// What one poll leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// The job finished (or cannot be followed): stop following it.
    Stop,
    /// Poll again later.
    Again,
    /// The upstream does not know the job (404).
    NotFound,
}

/// Looks for due jobs every `every` until the gateway stops (dropping the
/// task aborts the polls in flight; their leases expire).
pub async fn run_periodically(gw: Gateway, every: Duration) {
    let permits = Arc::new(Semaphore::new(gw.config.job_follow_concurrency.max(1)));
    let mut polls = JoinSet::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        while polls.try_join_next().is_some() {}
        crate::videos::follow_due(&gw, &permits).await;
        follow_due(&gw, &permits, &mut polls).await;
    }
}

/// Claims as many due jobs as there are free permits and starts their polls.
async fn follow_due(gw: &Gateway, permits: &Arc<Semaphore>, polls: &mut JoinSet<()>) {
    let free = permits.available_permits();
    if free == 0 || !gw.upstream.configured() {
        return;
    }
    let now = chrono::Utc::now();
    let n = rfc3339(now);
    let due = match gw.store.blocking(move |s| s.due_jobs(&n, free)).await {
        Ok(d) => d,
        Err(e) => {
            tracing::error!(error = %e, "job follower: listing due jobs failed");
            return;
        }
    };
    for job in due {
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            break;
        };
        let now = chrono::Utc::now();
        let (n, until) = (rfc3339(now), rfc3339(now + chrono_of(lease(gw))));
        let (k, j) = (job.kind.clone(), job.job_id.clone());
        let claimed = gw
            .store
            .blocking(move |s| s.claim_follow(&k, &j, &n, &until))
            .await;
        match claimed {
            Ok(true) => {
                let gw = gw.clone();
                polls.spawn(async move {
                    follow_one(&gw, job).await;
                    drop(permit);
                });
            }
            Ok(false) => {} // another instance (or a GET's completion) got there first
            Err(e) => tracing::warn!(job = %job.job_id, error = %e, "job follower: claim failed"),
        }
    }
}

/// How long one poll's claim holds: longer than a poll can take (the
/// upstream call, the result's copy), so that a live poll is never taken over.
pub fn lease(gw: &Gateway) -> Duration {
    gw.config.upstream_timeout * 2 + crate::mirror::WAIT_FOR_COPY + Duration::from_secs(60)
}

fn chrono_of(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or_else(|_| chrono::Duration::days(1))
}

/// The delay after the `attempts`-th poll of a job: the first delay doubled
/// per poll, capped.
pub fn backoff(first: Duration, cap: Duration, attempts: u32) -> Duration {
    first
        .checked_mul(1u32.checked_shl(attempts.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(cap)
        .min(cap)
}

/// One claimed poll, then the job's next poll time (or none) and the lease released.
async fn follow_one(gw: &Gateway, job: JobRow) {
    let attempts = job.follow_attempts + 1;
    let after = poll(gw, &job).await;
    let now = chrono::Utc::now();
    let too_old = chrono::DateTime::parse_from_rfc3339(&job.created_at)
        .map(|c| now - c.with_timezone(&chrono::Utc) > chrono_of(MAX_AGE))
        .unwrap_or(false);
    let next = match after {
        After::Stop => None,
        After::NotFound if attempts >= NOT_FOUND_ATTEMPTS => {
            tracing::warn!(job = %job.job_id, kind = %job.kind, attempts, "job follower: the upstream does not know the job; no longer followed");
            None
        }
        _ if too_old => {
            tracing::warn!(job = %job.job_id, kind = %job.kind, attempts, "job follower: the job is too old; no longer followed");
            None
        }
        After::Again | After::NotFound => {
            let delay = backoff(
                gw.config.job_follow_first_delay,
                gw.config.job_follow_max_delay,
                attempts,
            );
            Some(rfc3339(now + chrono_of(delay)))
        }
    };
    let (k, j) = (job.kind.clone(), job.job_id.clone());
    if let Err(e) = gw
        .store
        .blocking(move |s| s.release_follow(&k, &j, next.as_deref()))
        .await
    {
        tracing::warn!(job = %job.job_id, error = %e, "job follower: releasing the lease failed; it expires");
    }
}

/// Asks the upstream for the job, and applies what it saw like a GET does.
async fn poll(gw: &Gateway, job: &JobRow) -> After {
    let Some(kind) = gw.table.job_kind(&job.kind) else {
        tracing::warn!(job = %job.job_id, kind = %job.kind, "job follower: unknown job kind; not followed");
        return After::Stop;
    };
    let answer = match ask(gw, kind, job).await {
        Ok(Some(a)) => a,
        Ok(None) => return After::Stop,
        Err(ApiError::UpstreamNotFound(_)) => return After::NotFound,
        Err(e) => {
            tracing::info!(job = %job.job_id, error = %e, "job follower: poll failed; backing off");
            return After::Again;
        }
    };
    let item = item_of(&answer).clone();
    let progress = observe(kind, job, &item);
    if let (Some(field), Some(get), true) = (kind.mirror, kind.get, progress.completed()) {
        if let Some(Value::String(url)) = crate::shape::dotted(&answer, field) {
            // Best effort, as on a GET: a failed copy is retried by the next GET.
            let _ = crate::mirror::mirror(gw, job, get, url).await;
        }
    }
    let finished = progress.finished();
    let mut records: Vec<Record> = Vec::new();
    if let Some(m) = progress.metered {
        let charge = charge_of(gw, &m);
        let key_id = m.key_id;
        records.extend(crate::money::settle(crate::money::Bill::Metered {
            metered: m,
            charge,
            request_id: new_request_id(),
            markup_pct: gw.config.prices.markup_pct,
            user_id: Some(job.user_id),
            route_id: kind.submit.id,
            capability: kind.submit.capability,
            key_id,
            api_key_id: None,
        }));
    }
    records.extend(progress.records);
    if !records.is_empty() {
        let why = OutsideRecordPhase::FollowedJob;
        if let Err(e) = gw.store.commit_outside_record_phase(why, records).await {
            tracing::error!(job = %job.job_id, error = %e, "job follower: committing the job's progress failed; backing off");
            return After::Again;
        }
    }
    // After the commit, like a request's deferred work.
    if let Some(callback) = progress.callback {
        callback.start(gw.clone());
    }
    if finished {
        After::Stop
    } else {
        After::Again
    }
}

/// The upstream's answer for the job (`None`: the kind has no way to read a job).
async fn ask(gw: &Gateway, kind: &JobKind, job: &JobRow) -> Result<Option<Value>, ApiError> {
    let Some(get) = kind.get else {
        return Ok(None);
    };
    let Some(up) = get.upstream.as_ref() else {
        return Ok(None);
    };
    let mut params = PathParams::new();
    params.push(
        "job_id",
        &gateway_adapters::upstream::encode_segment(&job.upstream_id),
    );
    let path = crate::shape::upstream_path(get, up.path, &params, &mut Vec::new(), None)?;
    let answer = gw.upstream.call(up, &path, &[])?.send().await?;
    Ok(Some(answer.json("a job status").await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let s = Duration::from_secs;
        let delays: Vec<_> = (1..=7).map(|n| backoff(s(2), s(60), n)).collect();
        assert_eq!(delays, [s(4), s(8), s(16), s(32), s(60), s(60), s(60)]);
        assert_eq!(backoff(s(2), s(60), 0), s(2));
        assert_eq!(backoff(s(2), s(60), u32::MAX), s(60));
    }
}
