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
}

const COLS: &str = "id, user_id, key_id, previous_id, model, served, upstream_id, status, background, request_id, input, body, created_at, updated_at, expires_at";

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

    /// Deletes the tenant's response `id`; `true` when there was one.
    fn delete_response(&self, who: Tenant, id: &str) -> Result<bool>;

    /// Deletes the responses expired before `now`; how many.
    fn sweep_responses(&self, now: &str) -> Result<u64>;
}

/// A lookup's condition on the tenant: the user's, and the key's when set.
fn tenant_sql(who: Tenant) -> &'static str {
    match who.key_id {
        Some(_) => "user_id = ?2 AND key_id = ?3",
        None => "user_id = ?2 AND ?3 IS NULL",
    }
}

impl Responses for Store {
    fn response(&self, who: Tenant, id: &str, now: &str) -> Result<Option<ResponseRow>> {
        let sql = format!(
            "SELECT {COLS} FROM responses WHERE id = ?1 AND {} AND expires_at > ?4",
            tenant_sql(who)
        );
        self.with(|db| db.row(&sql, p![id, who.user_id, who.key_id, now], row))
    }

    fn response_chain(
        &self,
        who: Tenant,
        id: &str,
        now: &str,
        max: usize,
    ) -> Result<std::result::Result<Vec<ResponseRow>, String>> {
        let mut chain = Vec::new();
        let mut next = Some(id.to_owned());
        while let Some(id) = next.take() {
            if chain.len() >= max {
                break;
            }
            match self.response(who, &id, now)? {
                Some(r) => {
                    next = r.previous_id.clone();
                    chain.push(r);
                }
                None => return Ok(Err(id)),
            }
        }
        chain.reverse();
        Ok(Ok(chain))
    }

    fn delete_response(&self, who: Tenant, id: &str) -> Result<bool> {
        let sql = format!(
            "DELETE FROM responses WHERE id = ?1 AND {}",
            tenant_sql(who)
        );
        self.with(|db| Ok(db.exec(&sql, p![id, who.user_id, who.key_id])? > 0))
    }

    fn sweep_responses(&self, now: &str) -> Result<u64> {
        self.with(|db| db.exec("DELETE FROM responses WHERE expires_at <= ?1", p![now]))
    }
}
