//! Repositories of accounts: registration, log-in lookups, API keys by
//! user, revoked token ids, confirmation and reset tokens (stored hashed).

use rusqlite::{params, OptionalExtension, TransactionBehavior};

use super::{now_rfc3339, row_to_user, Result, Store, User};

const USER_COLS: &str = "id, email, is_admin, disabled, deleted_at IS NOT NULL";

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
}

/// A user as `/auth/me` and the admin list show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRow {
    pub id: i64,
    pub username: Option<String>,
    pub email: String,
    pub is_admin: bool,
    pub disabled: bool,
    pub confirmed: bool,
    pub deleted_at: Option<String>,
    pub created_at: String,
}

/// Why a registration was refused, or the new user's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    Created(i64),
    UsernameExists,
    EmailExists,
}

fn row_to_user_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<UserRow> {
    Ok(UserRow {
        id: r.get(0)?,
        username: r.get(1)?,
        email: r.get(2)?,
        is_admin: r.get(3)?,
        disabled: r.get(4)?,
        confirmed: r.get(5)?,
        deleted_at: r.get(6)?,
        created_at: r.get(7)?,
    })
}

const USER_ROW_COLS: &str =
    "id, username, email, is_admin, disabled, confirmed, deleted_at, created_at";

impl Store {
    /// A new account with a password; usernames compare without case,
    /// e-mail addresses are stored lower-case.
    pub fn register(
        &self,
        username: &str,
        email: &str,
        password_hash: &str,
        confirmed: bool,
    ) -> Result<Registration> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let email = email.to_lowercase();
        let taken = |sql: &str, v: &str| -> rusqlite::Result<bool> {
            tx.query_row(sql, [v], |_| Ok(()))
                .optional()
                .map(|o| o.is_some())
        };
        if taken(
            "SELECT 1 FROM users WHERE username = ?1 COLLATE NOCASE",
            username,
        )? {
            return Ok(Registration::UsernameExists);
        }
        if taken(
            "SELECT 1 FROM users WHERE email = ?1 COLLATE NOCASE",
            &email,
        )? {
            return Ok(Registration::EmailExists);
        }
        tx.execute(
            "INSERT INTO users (email, username, password_hash, confirmed, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![email, username, password_hash, confirmed, now_rfc3339()],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(Registration::Created(id))
    }

    /// The user logging in by e-mail address or username, their password
    /// hash and whether they are confirmed.
    pub fn login_lookup(&self, ident: &str) -> Result<Option<(User, Option<String>, bool)>> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                &format!(
                    "SELECT {USER_COLS}, password_hash, confirmed FROM users
                     WHERE email = ?1 COLLATE NOCASE OR username = ?1 COLLATE NOCASE
                     ORDER BY id LIMIT 1"
                ),
                [ident],
                |r| Ok((row_to_user(r)?, r.get(5)?, r.get(6)?)),
            )
            .optional()?)
    }

    /// A live (not deleted) user by e-mail address.
    pub fn user_by_email(&self, email: &str) -> Result<Option<User>> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                &format!("SELECT {USER_COLS} FROM users WHERE email = ?1 COLLATE NOCASE AND deleted_at IS NULL"),
                [email],
                row_to_user,
            )
            .optional()?)
    }

    pub fn user_row(&self, id: i64) -> Result<Option<UserRow>> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                &format!("SELECT {USER_ROW_COLS} FROM users WHERE id = ?1"),
                [id],
                row_to_user_row,
            )
            .optional()?)
    }

    /// Every user, oldest first.
    pub fn user_rows(&self) -> Result<Vec<UserRow>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(&format!("SELECT {USER_ROW_COLS} FROM users ORDER BY id"))?;
        let rows = stmt.query_map([], row_to_user_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Soft-deletes a user; `false` when there is no such live user.
    pub fn delete_user(&self, id: i64) -> Result<bool> {
        let n = self.conn()?.execute(
            "UPDATE users SET deleted_at = ?2 WHERE id = ?1 AND deleted_at IS NULL",
            params![id, now_rfc3339()],
        )?;
        Ok(n == 1)
    }

    pub fn set_password(&self, id: i64, password_hash: &str) -> Result<()> {
        self.conn()?.execute(
            "UPDATE users SET password_hash = ?2 WHERE id = ?1",
            params![id, password_hash],
        )?;
        Ok(())
    }

    pub fn confirm_user(&self, id: i64) -> Result<()> {
        self.conn()?
            .execute("UPDATE users SET confirmed = 1 WHERE id = ?1", [id])?;
        Ok(())
    }

    // ---- API keys ----

    /// Stores the SHA-256 hash (hex) of a new key; returns the key's id.
    pub fn insert_key(
        &self,
        user_id: i64,
        key_hash: &str,
        name: Option<&str>,
        prefix: &str,
    ) -> Result<i64> {
        let conn = self.conn()?;
        conn.execute(
            "INSERT INTO api_keys (user_id, key_hash, name, prefix, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![user_id, key_hash, name, prefix, now_rfc3339()],
        )?;
        Ok(conn.last_insert_rowid())
    }

    /// The owner of the key with this hash (revoked or not).
    pub fn key_owner(&self, key_hash: &str) -> Result<Option<KeyOwner>> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                "SELECT u.id, u.email, u.is_admin, u.disabled, u.deleted_at IS NOT NULL, k.revoked_at IS NOT NULL, k.models
                 FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = ?1",
                [key_hash],
                |r| {
                    let mut user = row_to_user(r)?;
                    // The models the key may use (`provider/model` or `provider/*`, comma-separated).
                    user.models = r.get::<_, Option<String>>(6)?.map(|m| {
                        m.split(',')
                            .map(|s| s.trim().to_owned())
                            .filter(|s| !s.is_empty())
                            .collect()
                    });
                    Ok(KeyOwner {
                        user,
                        revoked: r.get(5)?,
                    })
                },
            )
            .optional()?)
    }

    /// A user's keys, oldest first.
    pub fn keys_of(&self, user_id: i64) -> Result<Vec<KeyRow>> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT id, name, prefix, created_at, revoked_at FROM api_keys WHERE user_id = ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([user_id], |r| {
            Ok(KeyRow {
                id: r.get(0)?,
                name: r.get(1)?,
                prefix: r.get(2)?,
                created_at: r.get(3)?,
                revoked_at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Revokes one of a user's live keys; `false` when there is none with this id.
    pub fn revoke_key(&self, user_id: i64, key_id: i64) -> Result<bool> {
        let n = self.conn()?.execute(
            "UPDATE api_keys SET revoked_at = ?3 WHERE id = ?1 AND user_id = ?2 AND revoked_at IS NULL",
            params![key_id, user_id, now_rfc3339()],
        )?;
        Ok(n == 1)
    }

    // ---- tokens ----

    /// The user of a token and whether its id is revoked, in one read.
    pub fn token_subject(&self, user_id: i64, jti: &str) -> Result<(Option<User>, bool)> {
        let conn = self.conn()?;
        let revoked = conn
            .query_row("SELECT 1 FROM revoked_tokens WHERE jti = ?1", [jti], |_| {
                Ok(())
            })
            .optional()?
            .is_some();
        let user = conn
            .query_row(
                &format!("SELECT {USER_COLS} FROM users WHERE id = ?1"),
                [user_id],
                row_to_user,
            )
            .optional()?;
        Ok((user, revoked))
    }

    /// Records a revoked token id until `expires_at` (and forgets those
    /// past their expiry). `false` when it was revoked already.
    pub fn revoke_token(&self, jti: &str, user_id: i64, expires_at: &str) -> Result<bool> {
        let conn = self.conn()?;
        let now = now_rfc3339();
        conn.execute("DELETE FROM revoked_tokens WHERE expires_at < ?1", [&now])?;
        let n = conn.execute(
            "INSERT OR IGNORE INTO revoked_tokens (jti, user_id, expires_at, revoked_at) VALUES (?1, ?2, ?3, ?4)",
            params![jti, user_id, expires_at, now],
        )?;
        Ok(n == 1)
    }

    /// Stores a mailed token (its hash) for `purpose` (`confirm`, `reset`).
    pub fn insert_account_token(
        &self,
        token_hash: &str,
        user_id: i64,
        purpose: &str,
        expires_at: &str,
    ) -> Result<()> {
        self.conn()?.execute(
            "INSERT INTO account_tokens (token_hash, user_id, purpose, expires_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![token_hash, user_id, purpose, expires_at, now_rfc3339()],
        )?;
        Ok(())
    }

    /// Uses a mailed token once: the user it was for, if it is unused,
    /// unexpired and for `purpose`.
    pub fn take_account_token(&self, token_hash: &str, purpose: &str) -> Result<Option<i64>> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let now = now_rfc3339();
        let user: Option<i64> = tx
            .query_row(
                "SELECT user_id FROM account_tokens
                 WHERE token_hash = ?1 AND purpose = ?2 AND used_at IS NULL AND expires_at > ?3",
                params![token_hash, purpose, now],
                |r| r.get(0),
            )
            .optional()?;
        if user.is_some() {
            tx.execute(
                "UPDATE account_tokens SET used_at = ?2 WHERE token_hash = ?1",
                params![token_hash, now],
            )?;
        }
        tx.commit()?;
        Ok(user)
    }
}
