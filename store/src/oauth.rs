//! Repositories of sign-ins with OpenID Connect providers: the accounts
//! linked to a provider's subject, and the one-time states of sign-ins
//! under way.

use super::accounts::{by_name_and_email, username_candidate};
use super::sql::p;
use super::{now_rfc3339, Result, Store, StoreError};

/// What a sign-in with an OpenID Connect provider found or made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OauthSignIn {
    /// The account linked to the provider's subject before.
    Linked(i64),
    /// A new account, linked to the subject now.
    Created(i64),
    /// The address belongs to another account (one with a password, or
    /// linked to another subject): nothing was made.
    EmailExists,
    /// A first sign-in whose provider did not verify the address: nothing
    /// was made (an address is claimed only when it is verified).
    Unverified,
}

/// A provider's user, as a checked ID token names them.
#[derive(Debug, Clone)]
pub struct OauthUser<'a> {
    pub provider: &'a str,
    pub subject: &'a str,
    pub email: &'a str,
    /// The provider says the address is the user's; without it no account
    /// is made (the account made starts confirmed).
    pub email_verified: bool,
    /// The username wanted; made unique with a suffix when taken.
    pub username: &'a str,
}

/// Sign-in with an OpenID Connect provider: the account linked to a
/// provider's subject (found, or made and linked), and the one-time
/// `state` of each sign-in under way, kept hashed until its callback.
pub trait ProviderSignIns {
    /// Signs in a provider's user: the account linked to (provider,
    /// subject), or, when the provider verified the address, a new one
    /// linked to it (e-mail address lower-case, confirmed, no password, the
    /// first free username of [`username_candidate`]), in one transaction.
    /// An address the provider did not verify is neither claimed nor looked
    /// up ([`OauthSignIn::Unverified`]). Two
    /// first sign-ins at once (on any instances) make one account: the
    /// second's insert waits for the first's and then finds its link.
    fn oauth_sign_in(&self, u: &OauthUser<'_>) -> Result<OauthSignIn>;

    /// Stores a sign-in under way (the hash of its `state`) until
    /// `expires_at`, and forgets those past their expiry.
    fn insert_oauth_state(
        &self,
        state_hash: &str,
        provider: &str,
        nonce: &str,
        pkce_verifier: &str,
        expires_at: &str,
    ) -> Result<()>;

    /// Takes a sign-in under way once, on any instance (one `DELETE`):
    /// its nonce and PKCE verifier when the state is `provider`'s and
    /// unexpired; `None` when it is unknown, used, expired or another
    /// provider's (it is spent all the same).
    fn take_oauth_state(
        &self,
        state_hash: &str,
        provider: &str,
    ) -> Result<Option<(String, String)>>;

    /// The (provider, subject) links of a user, oldest first.
    fn oauth_links_of(&self, user_id: i64) -> Result<Vec<(String, String)>>;
}

impl ProviderSignIns for Store {
    fn oauth_sign_in(&self, u: &OauthUser<'_>) -> Result<OauthSignIn> {
        let email = u.email.to_lowercase();
        let linked = "SELECT user_id FROM oauth_links WHERE provider = ?1 AND subject = ?2";
        self.transaction(|tx| {
            if let Some(id) = tx.row(linked, p![u.provider, u.subject], |r| r.get(0))? {
                return Ok(OauthSignIn::Linked(id));
            }
            if !u.email_verified {
                return Ok(OauthSignIn::Unverified);
            }
            let (by_username, by_email) = by_name_and_email(tx.dialect());
            if tx.exists(by_email, p![email])? {
                // On PostgreSQL (READ COMMITTED) each statement sees what was
                // committed before it: a first sign-in of the same subject
                // committed between the two reads made this address and its
                // link together, so the link is seen now.
                if let Some(id) = tx.row(linked, p![u.provider, u.subject], |r| r.get(0))? {
                    return Ok(OauthSignIn::Linked(id));
                }
                return Ok(OauthSignIn::EmailExists);
            }
            for n in 0..8 {
                let name = username_candidate(u.username, n);
                if tx.exists(by_username, p![name])? {
                    continue;
                }
                let id: Option<i64> = tx.row(
                    "INSERT INTO users (email, username, confirmed, created_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT DO NOTHING RETURNING id",
                    p![email, name, true, now_rfc3339()],
                    |r| r.get(0),
                )?;
                let Some(id) = id else {
                    // Another transaction inserted meanwhile: its link, its
                    // address, or else only its username.
                    if let Some(id) = tx.row(linked, p![u.provider, u.subject], |r| r.get(0))? {
                        return Ok(OauthSignIn::Linked(id));
                    }
                    if tx.exists(by_email, p![email])? {
                        return Ok(OauthSignIn::EmailExists);
                    }
                    continue;
                };
                let n = tx.exec(
                    "INSERT INTO oauth_links (provider, subject, user_id, created_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT DO NOTHING",
                    p![u.provider, u.subject, id, now_rfc3339()],
                )?;
                if n != 1 {
                    // Linked meanwhile to an account of another address: this one is rolled back.
                    return Err(StoreError::msg("the subject was linked by another sign-in at once"));
                }
                return Ok(OauthSignIn::Created(id));
            }
            Err(StoreError::msg("no free username for a new signed-in account"))
        })
    }

    fn insert_oauth_state(
        &self,
        state_hash: &str,
        provider: &str,
        nonce: &str,
        pkce_verifier: &str,
        expires_at: &str,
    ) -> Result<()> {
        let now = now_rfc3339();
        self.with(|db| {
            db.exec("DELETE FROM oauth_states WHERE expires_at < ?1", p![now])?;
            db.exec(
                "INSERT INTO oauth_states (state_hash, provider, nonce, pkce_verifier, expires_at, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                p![state_hash, provider, nonce, pkce_verifier, expires_at, now],
            )
        })?;
        Ok(())
    }

    fn take_oauth_state(
        &self,
        state_hash: &str,
        provider: &str,
    ) -> Result<Option<(String, String)>> {
        let now = now_rfc3339();
        let row: Option<(String, String, String, String)> = self.with(|db| {
            db.row(
                "DELETE FROM oauth_states WHERE state_hash = ?1
                 RETURNING provider, nonce, pkce_verifier, expires_at",
                p![state_hash],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
        })?;
        Ok(row
            .filter(|(p, _, _, expires)| p == provider && expires.as_str() > now.as_str())
            .map(|(_, nonce, verifier, _)| (nonce, verifier)))
    }

    fn oauth_links_of(&self, user_id: i64) -> Result<Vec<(String, String)>> {
        self.with(|db| {
            db.rows(
                "SELECT provider, subject FROM oauth_links WHERE user_id = ?1 ORDER BY created_at, provider",
                p![user_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }
}
