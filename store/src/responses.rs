//! Stored responses of the Responses API (table `responses`, migration
//! 21): a turn's input items and its response object, per tenant, with the
//! link to the turn it continues, so that a conversation is rebuilt from
//! its chain. A response is saved by the writer ([`super::Record::ResponseSave`],
//! with its request's usage and debit in one transaction); the reads,
//! deletes and sweeps are here.

use super::sql::{p, Row};
use super::{Result, Store};

/// One stored response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseRow {
    /// `resp_…`, the gateway's id.
    pub id: String,
    pub user_id: i64,
    /// The API key it was made with (`None`: an access token).
    pub key_id: Option<i64>,
    /// The response it continues (`previous_response_id`).
    pub previous_id: Option<String>,
    /// The model as the caller named it.
    pub model: String,
    /// The deployment that served it (`provider/model`).
    pub served: Option<String>,
    /// That provider's own id of it, when the provider stored the turn
    /// itself (a native Responses deployment asked with `store`).
    pub upstream_id: Option<String>,
    /// `queued`, `in_progress`, `completed`, `incomplete`, `failed`,
    /// `cancelled`.
    pub status: String,
    pub background: bool,
    /// The request that made it.
    pub request_id: String,
    /// JSON text: the turn's input items (normalized).
    pub input: String,
    /// JSON text: the response object as answered.
    pub body: String,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at: String,
    /// A background run's stream (what a cancel stops), once it started;
    /// set by [`Responses::set_response_stream`], never by a save.
    pub stream_id: Option<String>,
}

/// The columns [`row`] reads, in its order (a macro, so that the
/// statements naming them are whole literals).
macro_rules! cols {
    () => {
        "id, user_id, key_id, previous_id, model, served, upstream_id, status, background, \
         request_id, input, body, created_at, updated_at, expires_at, stream_id"
    };
}

fn row(r: &Row<'_>) -> Result<ResponseRow> {
    Ok(ResponseRow {
        id: r.get(0)?,
        user_id: r.get(1)?,
        key_id: r.get(2)?,
        previous_id: r.get(3)?,
        model: r.get(4)?,
        served: r.get(5)?,
        upstream_id: r.get(6)?,
        status: r.get(7)?,
        background: r.get(8)?,
        request_id: r.get(9)?,
        input: r.get(10)?,
        body: r.get(11)?,
        created_at: r.get(12)?,
        updated_at: r.get(13)?,
        expires_at: r.get(14)?,
        stream_id: r.get(15)?,
    })
}

/// Whose responses a lookup may see: the user's, and with `key` only
/// those made with that key (the gateway's key scope).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tenant {
    pub user_id: i64,
    pub key_id: Option<i64>,
}

/// Stored responses: one by id, a chain, a delete and the sweep of
/// expired ones. Another tenant's response is never found.
pub trait Responses {
    /// The tenant's response `id`, unexpired at `now`.
    fn response(&self, who: Tenant, id: &str, now: &str) -> Result<Option<ResponseRow>>;

    /// The conversation ending with `id`, oldest first: `id` and the
    /// responses it continues, each the tenant's and unexpired, at most
    /// `max` of them. `Ok(Err(missing))`: a link (`id` itself or one it
    /// continues) is not there (deleted, expired or not the tenant's).
    fn response_chain(
        &self,
        who: Tenant,
        id: &str,
        now: &str,
        max: usize,
    ) -> Result<std::result::Result<Vec<ResponseRow>, String>>;

    /// Deletes the tenant's response `id` (and its events); `true` when
    /// there was one.
    fn delete_response(&self, who: Tenant, id: &str) -> Result<bool>;

    /// Deletes the responses expired before `now` (and their events); how
    /// many.
    fn sweep_responses(&self, now: &str) -> Result<u64>;

    /// Response `id`, whoever's (the background run's own reads).
    fn response_by_id(&self, id: &str) -> Result<Option<ResponseRow>>;

    /// Names the stream of a background run `id`, once it started.
    fn set_response_stream(&self, id: &str, stream_id: &str) -> Result<()>;

    /// Marks a background run `id` cancelled while it is queued or in
    /// progress; `true` when this call did.
    fn cancel_response(&self, id: &str, now: &str) -> Result<bool>;

    /// Marks a background run `id` in progress (unless it ended already).
    fn start_response(&self, id: &str, now: &str) -> Result<()>;

    /// Keeps a background run's events, each with its sequence number.
    fn append_response_events(&self, id: &str, events: &[(i64, String)]) -> Result<()>;

    /// A background run's events after sequence number `after`, in order,
    /// at most `limit`.
    fn response_events(&self, id: &str, after: i64, limit: usize) -> Result<Vec<(i64, String)>>;
}

/// A lookup's condition on the tenant (`?2` its user, `?3` its key or
/// NULL): the user's, and the key's when set. One statement for both
/// (PostgreSQL types `?3` from its first use, the comparison with `key_id`).
macro_rules! tenant {
    () => {
        "user_id = ?2 AND (key_id = ?3 OR ?3 IS NULL)"
    };
}

/// One of the tenant's unexpired responses, by id.
const BY_TENANT: &str = concat!(
    "SELECT ",
    cols!(),
    " FROM responses WHERE id = ?1 AND ",
    tenant!(),
    " AND expires_at > ?4"
);

impl Responses for Store {
    fn response(&self, who: Tenant, id: &str, now: &str) -> Result<Option<ResponseRow>> {
        self.with(|db| db.row(BY_TENANT, p![id, who.user_id, who.key_id, now], row))
    }

    fn response_chain(
        &self,
        who: Tenant,
        id: &str,
        now: &str,
        max: usize,
    ) -> Result<std::result::Result<Vec<ResponseRow>, String>> {
        self.with(|db| {
            let mut chain = Vec::new();
            let mut next = Some(id.to_owned());
            while let Some(id) = next.take().filter(|_| chain.len() < max) {
                match db.row(BY_TENANT, p![id, who.user_id, who.key_id, now], row)? {
                    Some(r) => {
                        next = r.previous_id.clone();
                        chain.push(r);
                    }
                    None => return Ok(Err(id)),
                }
            }
            chain.reverse();
            Ok(Ok(chain))
        })
    }

    fn delete_response(&self, who: Tenant, id: &str) -> Result<bool> {
        let sql = concat!("DELETE FROM responses WHERE id = ?1 AND ", tenant!());
        self.transaction(|db| {
            let deleted = db.exec(sql, p![id, who.user_id, who.key_id])? > 0;
            db.exec("DELETE FROM response_events WHERE response_id = ?1", p![id])?;
            Ok(deleted)
        })
    }

    fn sweep_responses(&self, now: &str) -> Result<u64> {
        self.transaction(|db| {
            let n = db.exec("DELETE FROM responses WHERE expires_at <= ?1", p![now])?;
            if n > 0 {
                db.exec(
                    "DELETE FROM response_events WHERE response_id NOT IN (SELECT id FROM responses)",
                    &[],
                )?;
            }
            Ok(n)
        })
    }

    fn response_by_id(&self, id: &str) -> Result<Option<ResponseRow>> {
        let sql = concat!("SELECT ", cols!(), " FROM responses WHERE id = ?1");
        self.with(|db| db.row(sql, p![id], row))
    }

    fn set_response_stream(&self, id: &str, stream_id: &str) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE responses SET stream_id = ?2 WHERE id = ?1",
                p![id, stream_id],
            )
            .map(drop)
        })
    }

    fn cancel_response(&self, id: &str, now: &str) -> Result<bool> {
        self.with(|db| {
            let n = db.exec(
                "UPDATE responses SET status = 'cancelled', updated_at = ?2
                 WHERE id = ?1 AND background = 1 AND status IN ('queued', 'in_progress')",
                p![id, now],
            )?;
            Ok(n > 0)
        })
    }

    fn start_response(&self, id: &str, now: &str) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE responses SET status = 'in_progress', updated_at = ?2 WHERE id = ?1 AND status = 'queued'",
                p![id, now],
            )
            .map(drop)
        })
    }

    fn append_response_events(&self, id: &str, events: &[(i64, String)]) -> Result<()> {
        self.transaction(|db| {
            for (seq, event) in events {
                db.exec(
                    "INSERT INTO response_events (response_id, seq, event) VALUES (?1, ?2, ?3)
                     ON CONFLICT (response_id, seq) DO NOTHING",
                    p![id, seq, event],
                )?;
            }
            Ok(())
        })
    }

    fn response_events(&self, id: &str, after: i64, limit: usize) -> Result<Vec<(i64, String)>> {
        self.with(|db| {
            db.rows(
                "SELECT seq, event FROM response_events WHERE response_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                p![id, after, limit as i64],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }
}
