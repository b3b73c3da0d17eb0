//! Erasing an account (`DELETE /auth/me`, `gateway users delete --purge`):
//! what is personal goes, what accounting needs stays under an anonymous
//! id (the user's row, its address and names erased).

use super::sql::p;
use super::{now_rfc3339, Result, Store};

/// What an erasure changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Erased {
    pub keys_revoked: u64,
    pub objects: u64,
    pub responses: u64,
}

/// Account erasure.
pub trait Erasure {
    /// The user's password hash (`None`: none, e.g. signed in through a provider).
    fn password_hash_of(&self, user: i64) -> Result<Option<String>>;

    /// The user's live objects: (asset id, object key).
    fn live_objects_of(&self, user: i64) -> Result<Vec<(i64, String)>>;

    /// Erases the user, in one transaction: address, username, password,
    /// callback secret and provider links erased (the address becomes
    /// `deleted-<id>@deleted.invalid`, free to register again); keys
    /// revoked; every asset record marked deleted (their objects deleted
    /// first by the caller); stored responses and their events deleted;
    /// batch lines' bodies, logged MCP arguments and results, alert
    /// settings, organization memberships and invitations to the address
    /// deleted. Usage, ledger, holds and audit records stay, naming the
    /// same (now anonymous) id.
    fn erase_user(&self, user: i64) -> Result<Erased>;
}

impl Erasure for Store {
    fn password_hash_of(&self, user: i64) -> Result<Option<String>> {
        self.with(|db| {
            Ok(db
                .row(
                    "SELECT password_hash FROM users WHERE id = ?1",
                    p![user],
                    |r| r.get(0),
                )?
                .flatten())
        })
    }

    fn live_objects_of(&self, user: i64) -> Result<Vec<(i64, String)>> {
        self.with(|db| {
            db.rows(
                "SELECT id, object_key FROM assets WHERE owner_id = ?1 AND deleted_at IS NULL ORDER BY id",
                p![user],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }

    fn erase_user(&self, user: i64) -> Result<Erased> {
        let now = now_rfc3339();
        let address = format!("deleted-{user}@deleted.invalid");
        self.transaction(|tx| {
            let email: Option<String> =
                tx.row("SELECT email FROM users WHERE id = ?1", p![user], |r| r.get(0))?;
            tx.exec(
                "UPDATE users SET email = ?2, username = NULL, password_hash = NULL, callback_secret = NULL,
                     deleted_at = COALESCE(deleted_at, ?3) WHERE id = ?1",
                p![user, address, now],
            )?;
            tx.exec("DELETE FROM oauth_links WHERE user_id = ?1", p![user])?;
            tx.exec("DELETE FROM account_tokens WHERE user_id = ?1", p![user])?;
            let keys_revoked = tx.exec(
                "UPDATE api_keys SET revoked_at = ?2 WHERE user_id = ?1 AND revoked_at IS NULL",
                p![user, now],
            )?;
            let objects = tx.exec(
                "UPDATE assets SET deleted_at = ?2 WHERE owner_id = ?1 AND deleted_at IS NULL",
                p![user, now],
            )?;
            tx.exec(
                "DELETE FROM response_events WHERE response_id IN (SELECT id FROM responses WHERE user_id = ?1)",
                p![user],
            )?;
            let responses = tx.exec("DELETE FROM responses WHERE user_id = ?1", p![user])?;
            tx.exec(
                "UPDATE batch_lines SET body = '{}', result = NULL
                 WHERE batch_id IN (SELECT id FROM batches WHERE user_id = ?1)",
                p![user],
            )?;
            tx.exec(
                "UPDATE mcp_calls SET arguments = NULL, result = NULL WHERE user_id = ?1",
                p![user],
            )?;
            tx.exec("DELETE FROM alert_settings WHERE user_id = ?1", p![user])?;
            tx.exec("DELETE FROM org_members WHERE user_id = ?1", p![user])?;
            if let Some(email) = email {
                tx.exec("DELETE FROM org_invitations WHERE lower(email) = lower(?1)", p![email])?;
            }
            Ok(Erased {
                keys_revoked,
                objects,
                responses,
            })
        })
    }
}
