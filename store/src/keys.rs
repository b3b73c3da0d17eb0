//! Repositories of API keys: stored hashed, looked up by hash, listed,
//! limited and revoked.

use super::sql::p;
use super::{now_rfc3339, row_to_user, Result, Store, StoreError, User};

/// The owner of an API key, and whether the key is revoked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyOwner {
    pub user: User,
    pub revoked: bool,
}

/// An API key as its owner sees it (never the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub id: i64,
    pub name: Option<String>,
    pub prefix: Option<String>,
    pub created_at: String,
    pub revoked_at: Option<String>,
    /// Its budget and what it spent (`None`: no budget).
    pub budget: Option<super::KeyBudget>,
    /// Its MCP allow-list (`server/tool`, `server/*`; `None`: every tool).
    pub mcp_tools: Option<Vec<String>>,
    /// Its requests and tokens per window (`None`: no such limit).
    pub rpm: Option<u64>,
    pub tpm: Option<u64>,
    /// An organization's key: the member it belongs to.
    pub member_id: Option<i64>,
}

/// A comma-separated list as stored (`models`, `mcp_tools`).
fn list_of(v: Option<String>) -> Option<Vec<String>> {
    v.map(|m| {
        m.split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    })
}

/// API keys: stored as hashes, found by hash for authentication, listed
/// and revoked by their owners, limited to models and to budgets.
pub trait Keys {
    /// Stores the SHA-256 hash (hex) of a new key, with its budget if it
    /// has one; returns the key's id.
    fn insert_key(
        &self,
        user_id: i64,
        key_hash: &str,
        name: Option<&str>,
        prefix: &str,
        budget: Option<super::Budget>,
    ) -> Result<i64>;

    /// The owner of the key with this hash (revoked or not).
    fn key_owner(&self, key_hash: &str) -> Result<Option<KeyOwner>>;

    /// A user's keys, oldest first, with their budgets.
    fn keys_of(&self, user_id: i64) -> Result<Vec<KeyRow>>;

    /// Revokes one of a user's live keys; `false` when there is none with this id.
    fn revoke_key(&self, user_id: i64, key_id: i64) -> Result<bool>;

    /// Sets (or, with `None`, removes) the budget of a live key, of
    /// `user_id` when given (the CLI gives none); `false`: no such live key.
    /// What the key spent stays: the new budget applies to it at once.
    fn set_key_budget(
        &self,
        user_id: Option<i64>,
        key_id: i64,
        budget: Option<super::Budget>,
    ) -> Result<bool>;

    /// The hash of one of a user's keys (to tell other instances it is revoked).
    fn key_hash_of(&self, user_id: i64, key_id: i64) -> Result<Option<String>>;

    /// Limits a key to `models` (comma-separated `provider/model` or
    /// `provider/*`; `None`: every model). False when no live key has that hash.
    fn set_key_models(&self, key_hash: &str, models: Option<&str>) -> Result<bool>;

    fn revoke_key_hash(&self, key_hash: &str) -> Result<bool>;

    /// Sets the MCP allow-list of the live key `key_id` (the user's, when
    /// `user_id` is given: the operator's CLI gives none), comma-separated;
    /// `None`: every tool. `false` when there is no such key.
    fn set_key_mcp_tools(
        &self,
        user_id: Option<i64>,
        key_id: i64,
        tools: Option<&str>,
    ) -> Result<bool>;

    /// Sets the `rpm` or `tpm` limit (`which`) of the live key `key_id`
    /// (the user's, when `user_id` is given); `None` removes it. `false`
    /// when there is no such key.
    fn set_key_limit(
        &self,
        user_id: Option<i64>,
        key_id: i64,
        which: KeyLimit,
        value: Option<u64>,
    ) -> Result<bool>;
}

/// Which of a key's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyLimit {
    Rpm,
    Tpm,
}

/// A stored limit (a count, never negative).
fn limit_of(v: Option<i64>) -> Option<u64> {
    v.and_then(|n| u64::try_from(n).ok())
}

impl Keys for Store {
    fn insert_key(
        &self,
        user_id: i64,
        key_hash: &str,
        name: Option<&str>,
        prefix: &str,
        budget: Option<super::Budget>,
    ) -> Result<i64> {
        let usd = budget.map(|b| b.usd.to_string());
        let period = budget.map(|b| b.period.as_str());
        self.with(|db| {
            db.row(
                "INSERT INTO api_keys (user_id, key_hash, name, prefix, created_at, budget_usd, budget_period)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
                p![user_id, key_hash, name, prefix, now_rfc3339(), usd, period],
                |r| r.get(0),
            )?
            .ok_or_else(|| StoreError::msg("key insert returned no id"))
        })
    }

    fn key_owner(&self, key_hash: &str) -> Result<Option<KeyOwner>> {
        self.with(|db| {
            db.row(
                "SELECT u.id, u.email, u.is_admin, u.disabled, u.deleted_at IS NOT NULL, k.revoked_at IS NOT NULL, k.models,
                        CASE WHEN k.budget_usd IS NULL THEN NULL ELSE k.id END, k.id, k.mcp_tools, k.rpm, k.tpm
                 FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = ?1",
                p![key_hash],
                |r| {
                    let mut user = row_to_user(r)?;
                    // The models the key may use (`provider/model` or `provider/*`, comma-separated).
                    user.models = list_of(r.get(6)?);
                    user.mcp_tools = list_of(r.get(9)?);
                    user.rpm = limit_of(r.get(10)?);
                    user.tpm = limit_of(r.get(11)?);
                    user.budget_key = r.get(7)?;
                    user.key_id = r.get(8)?;
                    Ok(KeyOwner {
                        user,
                        revoked: r.get(5)?,
                    })
                },
            )
        })
    }

    fn keys_of(&self, user_id: i64) -> Result<Vec<KeyRow>> {
        self.with(|db| {
            let rows = db.rows(
                "SELECT id, name, prefix, created_at, revoked_at, budget_usd, budget_period, mcp_tools, rpm, tpm, member_id
                 FROM api_keys WHERE user_id = ?1 ORDER BY id",
                p![user_id],
                |r| {
                    let key = KeyRow {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        prefix: r.get(2)?,
                        created_at: r.get(3)?,
                        revoked_at: r.get(4)?,
                        budget: None,
                        mcp_tools: list_of(r.get(7)?),
                        rpm: limit_of(r.get(8)?),
                        tpm: limit_of(r.get(9)?),
                        member_id: r.get(10)?,
                    };
                    Ok((key, r.get(5)?, r.get(6)?))
                },
            )?;
            rows.into_iter()
                .map(|(mut key, usd, period)| {
                    key.budget = super::money::key_budget(db, key.id, usd, period)?;
                    Ok(key)
                })
                .collect()
        })
    }

    fn revoke_key(&self, user_id: i64, key_id: i64) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "UPDATE api_keys SET revoked_at = ?3 WHERE id = ?1 AND user_id = ?2 AND revoked_at IS NULL",
                p![key_id, user_id, now_rfc3339()],
            )
        })
        .map(|n| n == 1)
    }

    fn set_key_budget(
        &self,
        user_id: Option<i64>,
        key_id: i64,
        budget: Option<super::Budget>,
    ) -> Result<bool> {
        let usd = budget.map(|b| b.usd.to_string());
        let period = budget.map(|b| b.period.as_str());
        self.with(|db| match user_id {
            Some(u) => db.exec(
                "UPDATE api_keys SET budget_usd = ?3, budget_period = ?4
                 WHERE id = ?1 AND user_id = ?2 AND revoked_at IS NULL",
                p![key_id, u, usd, period],
            ),
            None => db.exec(
                "UPDATE api_keys SET budget_usd = ?2, budget_period = ?3
                 WHERE id = ?1 AND revoked_at IS NULL",
                p![key_id, usd, period],
            ),
        })
        .map(|n| n == 1)
    }

    fn key_hash_of(&self, user_id: i64, key_id: i64) -> Result<Option<String>> {
        self.with(|db| {
            db.row(
                "SELECT key_hash FROM api_keys WHERE id = ?1 AND user_id = ?2",
                p![key_id, user_id],
                |r| r.get(0),
            )
        })
    }

    fn set_key_models(&self, key_hash: &str, models: Option<&str>) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "UPDATE api_keys SET models = ?2 WHERE key_hash = ?1 AND revoked_at IS NULL",
                p![key_hash, models],
            )
        })
        .map(|n| n == 1)
    }

    fn set_key_mcp_tools(
        &self,
        user_id: Option<i64>,
        key_id: i64,
        tools: Option<&str>,
    ) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "UPDATE api_keys SET mcp_tools = ?3 WHERE (user_id = ?1 OR ?1 IS NULL) AND id = ?2 AND revoked_at IS NULL",
                p![user_id, key_id, tools],
            )
            .map(|n| n == 1)
        })
    }

    fn set_key_limit(
        &self,
        user_id: Option<i64>,
        key_id: i64,
        which: KeyLimit,
        value: Option<u64>,
    ) -> Result<bool> {
        let value = value.map(|v| i64::try_from(v).unwrap_or(i64::MAX));
        let sql = match which {
            KeyLimit::Rpm => "UPDATE api_keys SET rpm = ?3 WHERE (user_id = ?1 OR ?1 IS NULL) AND id = ?2 AND revoked_at IS NULL",
            KeyLimit::Tpm => "UPDATE api_keys SET tpm = ?3 WHERE (user_id = ?1 OR ?1 IS NULL) AND id = ?2 AND revoked_at IS NULL",
        };
        self.with(|db| db.exec(sql, p![user_id, key_id, value]).map(|n| n == 1))
    }

    fn revoke_key_hash(&self, key_hash: &str) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "UPDATE api_keys SET revoked_at = ?2 WHERE key_hash = ?1 AND revoked_at IS NULL",
                p![key_hash, now_rfc3339()],
            )
        })
        .map(|n| n == 1)
    }
}
