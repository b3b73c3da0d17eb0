//! Repositories of accounts: registration, log-in lookups, revoked token
//! ids, confirmation and reset tokens (stored hashed).

use super::sql::{p, Db, Dialect, Row};
use super::{now_rfc3339, row_to_user, Result, Store, StoreError, User};

const USER_COLS: &str = "id, email, is_admin, disabled, deleted_at IS NOT NULL";

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
    /// The address is an account's that signs in with a provider (409).
    EmailLinked,
}

/// A completed password reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasswordReset {
    pub user_id: i64,
    /// The account was one an unverified sign-in made (unconfirmed and
    /// linked: see [`Accounts::reset_password_with_token`]); its links are
    /// gone and its keys revoked.
    pub reclaimed: bool,
}

/// The `n`th username tried for `base`: itself, then `base-2` ..
/// `base-5`, then `base-` and 6 random hex digits.
pub(super) fn username_candidate(base: &str, n: u32) -> String {
    match n {
        0 => base.to_owned(),
        1..=4 => format!("{base}-{}", n + 1),
        _ => format!("{base}-{}", hex::encode(rand::random::<[u8; 3]>())),
    }
}

/// Statements finding a user by username and by e-mail address, without case.
pub(super) fn by_name_and_email(d: Dialect) -> (&'static str, &'static str) {
    // SQLite compares with NOCASE (its unique index on usernames);
    // PostgreSQL's index is on lower(username).
    match d {
        Dialect::Sqlite => (
            "SELECT 1 FROM users WHERE username = ?1 COLLATE NOCASE",
            "SELECT 1 FROM users WHERE email = ?1 COLLATE NOCASE",
        ),
        Dialect::Postgres => (
            "SELECT 1 FROM users WHERE lower(username) = lower(?1)",
            "SELECT 1 FROM users WHERE lower(email) = lower(?1)",
        ),
    }
}

/// Whether an account with this address is linked to a provider.
fn email_is_linked(tx: &mut super::sql::Db<'_>, email: &str) -> Result<bool> {
    let sql = match tx.dialect() {
        Dialect::Sqlite => "SELECT 1 FROM users u JOIN oauth_links l ON l.user_id = u.id WHERE u.email = ?1 COLLATE NOCASE",
        Dialect::Postgres => "SELECT 1 FROM users u JOIN oauth_links l ON l.user_id = u.id WHERE lower(u.email) = lower(?1)",
    };
    tx.exists(sql, p![email])
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

/// Accounts: users (made, read, disabled, deleted), registration and
/// log-in lookups, passwords and their resets, confirmation, and revoked
/// tokens (sign-in with a provider: [`super::ProviderSignIns`]). Authentication and the
/// account routes hold the store through it.
pub trait Accounts {
    fn create_user(&self, email: &str, is_admin: bool) -> Result<i64>;

    fn user(&self, id: i64) -> Result<Option<User>>;

    fn set_user_disabled(&self, id: i64, disabled: bool) -> Result<bool>;

    /// A new account with a password; usernames compare without case,
    /// e-mail addresses are stored lower-case.
    fn register(
        &self,
        username: &str,
        email: &str,
        password_hash: &str,
        confirmed: bool,
    ) -> Result<Registration>;

    /// The user logging in by e-mail address (an identifier with `@`) or
    /// else by username, their password hash and whether they are
    /// confirmed. An e-mail address matches e-mail addresses only, so no
    /// username (registered before usernames lost their `@`) can stand for
    /// someone's address.
    fn login_lookup(&self, ident: &str) -> Result<Option<(User, Option<String>, bool)>>;

    /// A live (not deleted) user by e-mail address.
    fn user_by_email(&self, email: &str) -> Result<Option<User>>;

    fn user_row(&self, id: i64) -> Result<Option<UserRow>>;

    /// Every user, oldest first.
    fn user_rows(&self) -> Result<Vec<UserRow>>;

    /// Soft-deletes a user; `false` when there is no such live user.
    fn delete_user(&self, id: i64) -> Result<bool>;

    /// A password reset, in one transaction: the new hash, every token of
    /// the user issued before `at` revoked (one row of `revoked_tokens`,
    /// `reset:<user id>`, kept until `keep_until`, when every older token
    /// has expired anyway), and every unused reset token of the user spent.
    fn set_password_revoking(
        &self,
        id: i64,
        password_hash: &str,
        at: chrono::DateTime<chrono::Utc>,
        keep_until: chrono::DateTime<chrono::Utc>,
    ) -> Result<()>;

    /// Completes a password reset with a mailed `reset` token: the token
    /// spent and the password set (as [`Accounts::set_password_revoking`]) in
    /// one transaction, so that a failure leaves the token usable. `None`
    /// when the token is unknown, used or expired.
    ///
    /// The reset proves the address (its token was mailed there). An
    /// account that is unconfirmed and linked to a provider was made by a
    /// sign-in whose provider did not verify the address (before such
    /// sign-ins were refused; a verified one makes a confirmed account):
    /// whoever signed in so may not be the address's owner, so its links
    /// are removed, its keys (all made through them) revoked and the
    /// account confirmed, all in the same transaction.
    fn reset_password_with_token(
        &self,
        token_hash: &str,
        password_hash: &str,
        at: chrono::DateTime<chrono::Utc>,
        keep_until: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<PasswordReset>>;

    fn confirm_user(&self, id: i64) -> Result<()>;

    /// Confirms the user of a mailed `confirm` token, the token spent in
    /// the same transaction (a failure leaves it usable). The user, or
    /// `None` when the token is unknown, used or expired.
    fn confirm_with_token(&self, token_hash: &str) -> Result<Option<i64>>;

    /// The user of a token and whether it is revoked (its id, or every
    /// token of the user issued before a password reset), in one read.
    fn token_subject(
        &self,
        user_id: i64,
        jti: &str,
        issued_ms: i64,
    ) -> Result<(Option<User>, bool)>;

    /// Records a revoked token id until `expires_at` (and forgets those
    /// past their expiry). `false` when it was revoked already.
    fn revoke_token(&self, jti: &str, user_id: i64, expires_at: &str) -> Result<bool>;

    /// Stores a mailed token (its hash) for `purpose` (`confirm`, `reset`).
    fn insert_account_token(
        &self,
        token_hash: &str,
        user_id: i64,
        purpose: &str,
        expires_at: &str,
    ) -> Result<()>;

    /// Uses a mailed token once: the user it was for, if it is unused,
    /// unexpired and for `purpose`. One conditional update, so that two
    /// uses at once (on any instances) cannot both succeed.
    fn take_account_token(&self, token_hash: &str, purpose: &str) -> Result<Option<i64>>;
}

impl Accounts for Store {
    fn create_user(&self, email: &str, is_admin: bool) -> Result<i64> {
        self.with(|db| {
            db.row(
                "INSERT INTO users (email, is_admin, created_at) VALUES (?1, ?2, ?3) RETURNING id",
                p![email, is_admin, now_rfc3339()],
                |r| r.get(0),
            )?
            .ok_or_else(|| StoreError::msg("insert returned no id"))
        })
    }

    fn user(&self, id: i64) -> Result<Option<User>> {
        self.with(|db| {
            db.row(
                "SELECT id, email, is_admin, disabled, deleted_at IS NOT NULL FROM users WHERE id = ?1",
                p![id],
                row_to_user,
            )
        })
    }

    fn set_user_disabled(&self, id: i64, disabled: bool) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "UPDATE users SET disabled = ?2 WHERE id = ?1",
                p![id, disabled],
            )
        })
        .map(|n| n == 1)
    }

    fn register(
        &self,
        username: &str,
        email: &str,
        password_hash: &str,
        confirmed: bool,
    ) -> Result<Registration> {
        let email = email.to_lowercase();
        self.transaction(|tx| {
            let (by_username, by_email) = by_name_and_email(tx.dialect());
            // An address that signs in with a provider says so first (409).
            if email_is_linked(tx, &email)? {
                return Ok(Registration::EmailLinked);
            }
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

    fn login_lookup(&self, ident: &str) -> Result<Option<(User, Option<String>, bool)>> {
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

    fn user_by_email(&self, email: &str) -> Result<Option<User>> {
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

    fn user_row(&self, id: i64) -> Result<Option<UserRow>> {
        self.with(|db| {
            db.row(
                &format!("SELECT {USER_ROW_COLS} FROM users WHERE id = ?1"),
                p![id],
                row_to_user_row,
            )
        })
    }

    fn user_rows(&self) -> Result<Vec<UserRow>> {
        self.with(|db| {
            db.rows(
                &format!("SELECT {USER_ROW_COLS} FROM users ORDER BY id"),
                &[],
                row_to_user_row,
            )
        })
    }

    fn delete_user(&self, id: i64) -> Result<bool> {
        self.with(|db| {
            db.exec(
                "UPDATE users SET deleted_at = ?2 WHERE id = ?1 AND deleted_at IS NULL",
                p![id, now_rfc3339()],
            )
        })
        .map(|n| n == 1)
    }

    fn set_password_revoking(
        &self,
        id: i64,
        password_hash: &str,
        at: chrono::DateTime<chrono::Utc>,
        keep_until: chrono::DateTime<chrono::Utc>,
    ) -> Result<()> {
        self.transaction(|tx| set_password_in(tx, id, password_hash, at, keep_until))
    }

    fn reset_password_with_token(
        &self,
        token_hash: &str,
        password_hash: &str,
        at: chrono::DateTime<chrono::Utc>,
        keep_until: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<PasswordReset>> {
        self.transaction(|tx| {
            let Some(id) = take_token_in(tx, token_hash, "reset")? else {
                return Ok(None);
            };
            set_password_in(tx, id, password_hash, at, keep_until)?;
            let reclaimed = tx.exists(
                "SELECT 1 FROM users u WHERE u.id = ?1 AND u.confirmed = 0
                 AND EXISTS (SELECT 1 FROM oauth_links l WHERE l.user_id = u.id)",
                p![id],
            )?;
            if reclaimed {
                tx.exec("DELETE FROM oauth_links WHERE user_id = ?1", p![id])?;
                tx.exec(
                    "UPDATE api_keys SET revoked_at = ?2 WHERE user_id = ?1 AND revoked_at IS NULL",
                    p![id, super::rfc3339(at)],
                )?;
                tx.exec("UPDATE users SET confirmed = 1 WHERE id = ?1", p![id])?;
            }
            Ok(Some(PasswordReset {
                user_id: id,
                reclaimed,
            }))
        })
    }

    fn confirm_user(&self, id: i64) -> Result<()> {
        self.with(|db| db.exec("UPDATE users SET confirmed = 1 WHERE id = ?1", p![id]))?;
        Ok(())
    }

    fn confirm_with_token(&self, token_hash: &str) -> Result<Option<i64>> {
        self.transaction(|tx| {
            let user = take_token_in(tx, token_hash, "confirm")?;
            if let Some(id) = user {
                tx.exec("UPDATE users SET confirmed = 1 WHERE id = ?1", p![id])?;
            }
            Ok(user)
        })
    }

    fn token_subject(
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

    fn revoke_token(&self, jti: &str, user_id: i64, expires_at: &str) -> Result<bool> {
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

    fn insert_account_token(
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

    fn take_account_token(&self, token_hash: &str, purpose: &str) -> Result<Option<i64>> {
        self.with(|db| take_token_in(db, token_hash, purpose))
    }
}

/// [`Accounts::take_account_token`] on `db` (inside a caller's transaction).
fn take_token_in(db: &mut Db<'_>, token_hash: &str, purpose: &str) -> Result<Option<i64>> {
    let now = now_rfc3339();
    db.row(
        "UPDATE account_tokens SET used_at = ?3
         WHERE token_hash = ?1 AND purpose = ?2 AND used_at IS NULL AND expires_at > ?3
         RETURNING user_id",
        p![token_hash, purpose, now],
        |r| r.get(0),
    )
}

/// [`Accounts::set_password_revoking`]'s statements, inside a transaction.
fn set_password_in(
    tx: &mut Db<'_>,
    id: i64,
    password_hash: &str,
    at: chrono::DateTime<chrono::Utc>,
    keep_until: chrono::DateTime<chrono::Utc>,
) -> Result<()> {
    let (at, keep_until) = (super::rfc3339(at), super::rfc3339(keep_until));
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
}
