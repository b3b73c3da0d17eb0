//! Repositories of accounts: registration, log-in lookups, API keys by
//! user, revoked token ids, confirmation and reset tokens (stored hashed).

use super::sql::{p, Dialect, Row};
use super::{now_rfc3339, row_to_user, Result, Store, StoreError, User};

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

fn row_to_user_row(r: &Row<'_>) -> Result<UserRow> {
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

/// The `revoked_tokens` id standing for "every token of the user issued
/// before `revoked_at`" (a password reset). Token ids are UUIDs, never this.
fn reset_marker(user_id: i64) -> String {
    format!("reset:{user_id}")
}

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
        let email = email.to_lowercase();
        self.transaction(|tx| {
            // SQLite compares with NOCASE (its unique index on usernames);
            // PostgreSQL's index is on lower(username).
            let (by_username, by_email) = match tx.dialect() {
                Dialect::Sqlite => (
                    "SELECT 1 FROM users WHERE username = ?1 COLLATE NOCASE",
                    "SELECT 1 FROM users WHERE email = ?1 COLLATE NOCASE",
                ),
                Dialect::Postgres => (
                    "SELECT 1 FROM users WHERE lower(username) = lower(?1)",
                    "SELECT 1 FROM users WHERE lower(email) = lower(?1)",
                ),
            };
            if tx.exists(by_username, p![username])? {
                return Ok(Registration::UsernameExists);
            }
            if tx.exists(by_email, p![email])? {
                return Ok(Registration::EmailExists);
            }
            // Another instance may register the same name meanwhile: its
            // insert wins the unique index, this one inserts nothing.
            let id: Option<i64> = tx.row(
                "INSERT INTO users (email, username, password_hash, confirmed, created_at) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT DO NOTHING RETURNING id",
                p![email, username, password_hash, confirmed, now_rfc3339()],
                |r| r.get(0),
            )?;
            Ok(match id {
                Some(id) => Registration::Created(id),
                None if tx.exists(by_email, p![email])? => Registration::EmailExists,
                None => Registration::UsernameExists,
            })
        })
    }

    /// The user logging in by e-mail address (an identifier with `@`) or
    /// else by username, their password hash and whether they are
    /// confirmed. An e-mail address matches e-mail addresses only, so no
    /// username (registered before usernames lost their `@`) can stand for
    /// someone's address.
    pub fn login_lookup(&self, ident: &str) -> Result<Option<(User, Option<String>, bool)>> {
        let column = if ident.contains('@') {
            "email"
        } else {
            "username"
        };
        self.with(|db| {
            let sql = match db.dialect() {
                Dialect::Sqlite => format!(
                    "SELECT {USER_COLS}, password_hash, confirmed FROM users
                     WHERE {column} = ?1 COLLATE NOCASE
                     ORDER BY id LIMIT 1"
                ),
                Dialect::Postgres => format!(
                    "SELECT {USER_COLS}, password_hash, confirmed FROM users
                     WHERE lower({column}) = lower(?1)
                     ORDER BY id LIMIT 1"
                ),
            };
            db.row(&sql, p![ident], |r| {
                Ok((row_to_user(r)?, r.get(5)?, r.get(6)?))
            })
        })
    }

    /// A live (not deleted) user by e-mail address.
    pub fn user_by_email(&self, email: &str) -> Result<Option<User>> {
        self.with(|db| {
            let sql = match db.dialect() {
                Dialect::Sqlite => format!(
                    "SELECT {USER_COLS} FROM users WHERE email = ?1 COLLATE NOCASE AND deleted_at IS NULL"
                ),
                Dialect::Postgres => format!(
                    "SELECT {USER_COLS} FROM users WHERE lower(email) = lower(?1) AND deleted_at IS NULL"
                ),
            };
            db.row(&sql, p![email], row_to_user)
        })
    }

    pub fn user_row(&self, id: i64) -> Result<Option<UserRow>> {
        self.with(|db| {
            db.row(
                &format!("SELECT {USER_ROW_COLS} FROM users WHERE id = ?1"),
                p![id],
                row_to_user_row,
            )
        })
    }

    /// Every user, oldest first.
    pub fn user_rows(&self) -> Result<Vec<UserRow>> {
        self.with(|db| {
            db.rows(
                &format!("SELECT {USER_ROW_COLS} FROM users ORDER BY id"),
                &[],
                row_to_user_row,
            )
        })
    }

    /// Soft-deletes a user; `false` when there is no such live user.
    pub fn delete_user(&self, id: i64) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "UPDATE users SET deleted_at = ?2 WHERE id = ?1 AND deleted_at IS NULL",
                p![id, now_rfc3339()],
            )
        })
        .map(|n| n == 1)
    }

    /// A password reset, in one transaction: the new hash, every token of
    /// the user issued before `at` revoked (one row of `revoked_tokens`,
    /// `reset:<user id>`, kept until `keep_until`, when every older token
    /// has expired anyway), and every unused reset token of the user spent.
    pub fn set_password_revoking(
        &self,
        id: i64,
        password_hash: &str,
        at: chrono::DateTime<chrono::Utc>,
        keep_until: chrono::DateTime<chrono::Utc>,
    ) -> Result<()> {
        let (at, keep_until) = (super::rfc3339(at), super::rfc3339(keep_until));
        self.transaction(|tx| {
            tx.exec(
                "UPDATE users SET password_hash = ?2 WHERE id = ?1",
                p![id, password_hash],
            )?;
            tx.exec(
                "INSERT INTO revoked_tokens (jti, user_id, expires_at, revoked_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (jti) DO UPDATE SET expires_at = excluded.expires_at, revoked_at = excluded.revoked_at",
                p![reset_marker(id), id, keep_until, at],
            )?;
            tx.exec(
                "UPDATE account_tokens SET used_at = ?2
                 WHERE user_id = ?1 AND purpose = 'reset' AND used_at IS NULL",
                p![id, at],
            )?;
            Ok(())
        })
    }

    pub fn confirm_user(&self, id: i64) -> Result<()> {
        self.with(|db| db.exec("UPDATE users SET confirmed = 1 WHERE id = ?1", p![id]))?;
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
        self.with(|db| {
            db.row(
                "INSERT INTO api_keys (user_id, key_hash, name, prefix, created_at) VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
                p![user_id, key_hash, name, prefix, now_rfc3339()],
                |r| r.get(0),
            )?
            .ok_or_else(|| StoreError::msg("key insert returned no id"))
        })
    }

    /// The owner of the key with this hash (revoked or not).
    pub fn key_owner(&self, key_hash: &str) -> Result<Option<KeyOwner>> {
        self.with(|db| {
            db.row(
                "SELECT u.id, u.email, u.is_admin, u.disabled, u.deleted_at IS NOT NULL, k.revoked_at IS NOT NULL, k.models
                 FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = ?1",
                p![key_hash],
                |r| {
                    let mut user = row_to_user(r)?;
                    // The models the key may use (`provider/model` or `provider/*`, comma-separated).
                    user.models = r.get::<Option<String>>(6)?.map(|m| {
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
        })
    }

    /// A user's keys, oldest first.
    pub fn keys_of(&self, user_id: i64) -> Result<Vec<KeyRow>> {
        self.with(|db| {
            db.rows(
                "SELECT id, name, prefix, created_at, revoked_at FROM api_keys WHERE user_id = ?1 ORDER BY id",
                p![user_id],
                |r| {
                    Ok(KeyRow {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        prefix: r.get(2)?,
                        created_at: r.get(3)?,
                        revoked_at: r.get(4)?,
                    })
                },
            )
        })
    }

    /// Revokes one of a user's live keys; `false` when there is none with this id.
    pub fn revoke_key(&self, user_id: i64, key_id: i64) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "UPDATE api_keys SET revoked_at = ?3 WHERE id = ?1 AND user_id = ?2 AND revoked_at IS NULL",
                p![key_id, user_id, now_rfc3339()],
            )
        })
        .map(|n| n == 1)
    }

    /// The hash of one of a user's keys (to tell other instances it is revoked).
    pub fn key_hash_of(&self, user_id: i64, key_id: i64) -> Result<Option<String>> {
        self.with(|db| {
            db.row(
                "SELECT key_hash FROM api_keys WHERE id = ?1 AND user_id = ?2",
                p![key_id, user_id],
                |r| r.get(0),
            )
        })
    }

    // ---- tokens ----

    /// The user of a token and whether it is revoked (its id, or every
    /// token of the user issued before a password reset), in one read.
    pub fn token_subject(
        &self,
        user_id: i64,
        jti: &str,
        issued_ms: i64,
    ) -> Result<(Option<User>, bool)> {
        let marker = reset_marker(user_id);
        self.with(|db| {
            let rows: Vec<(String, String)> = db.rows(
                "SELECT jti, revoked_at FROM revoked_tokens WHERE jti = ?1 OR jti = ?2",
                p![jti, marker],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let revoked = rows.iter().any(|(j, at)| {
                j != &marker
                    || chrono::DateTime::parse_from_rfc3339(at)
                        .map_or(true, |at| issued_ms < at.timestamp_millis())
            });
            let user = db.row(
                &format!("SELECT {USER_COLS} FROM users WHERE id = ?1"),
                p![user_id],
                row_to_user,
            )?;
            Ok((user, revoked))
        })
    }

    /// Records a revoked token id until `expires_at` (and forgets those
    /// past their expiry). `false` when it was revoked already.
    pub fn revoke_token(&self, jti: &str, user_id: i64, expires_at: &str) -> Result<bool> {
        let now = now_rfc3339();
        self.with(|db| {
            db.exec("DELETE FROM revoked_tokens WHERE expires_at < ?1", p![now])?;
            db.exec(
                "INSERT INTO revoked_tokens (jti, user_id, expires_at, revoked_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (jti) DO NOTHING",
                p![jti, user_id, expires_at, now],
            )
        })
        .map(|n| n == 1)
    }

    /// Stores a mailed token (its hash) for `purpose` (`confirm`, `reset`).
    pub fn insert_account_token(
        &self,
        token_hash: &str,
        user_id: i64,
        purpose: &str,
        expires_at: &str,
    ) -> Result<()> {
        self.with(|db| {
            db.exec(
                "INSERT INTO account_tokens (token_hash, user_id, purpose, expires_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                p![token_hash, user_id, purpose, expires_at, now_rfc3339()],
            )
        })?;
        Ok(())
    }

    /// Uses a mailed token once: the user it was for, if it is unused,
    /// unexpired and for `purpose`. One conditional update, so that two
    /// uses at once (on any instances) cannot both succeed.
    pub fn take_account_token(&self, token_hash: &str, purpose: &str) -> Result<Option<i64>> {
        let now = now_rfc3339();
        self.with(|db| {
            db.row(
                "UPDATE account_tokens SET used_at = ?3
                 WHERE token_hash = ?1 AND purpose = ?2 AND used_at IS NULL AND expires_at > ?3
                 RETURNING user_id",
                p![token_hash, purpose, now],
                |r| r.get(0),
            )
        })
    }
}
