//! Organizations: an account (a `users` row, so that its balance, holds,
//! ledger, keys and resources are an account's) with a name, members in
//! roles, invitations by a mailed token, and keys that each belong to a
//! member.

use super::sql::{p, Db};
use super::{now_rfc3339, Result, Store, StoreError};

/// An organization as a member sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgRow {
    pub id: i64,
    pub name: String,
    pub created_at: String,
    /// The caller's role in it.
    pub role: String,
}

/// A member of an organization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRow {
    pub user_id: i64,
    pub email: String,
    pub role: String,
    pub joined_at: String,
}

/// What removing a member did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    NotMember,
    /// The last owner stays.
    LastOwner,
    /// Removed, this many of their keys of the organization revoked.
    Removed(u64),
}

/// An invitation accepted: the organization joined, in the role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    pub org_id: i64,
    pub role: String,
}

/// Organizations, their members, invitations and members' keys.
pub trait Organizations {
    /// A new organization named `name`, `creator` its owner, its account
    /// under the unique address `handle` (no one signs in with it): its id.
    fn create_org(&self, name: &str, creator: i64, handle: &str) -> Result<i64>;

    /// The organizations `user` is a member of, with their role.
    fn orgs_of(&self, user: i64) -> Result<Vec<OrgRow>>;

    /// `user`'s role in `org` (`None`: not a member, or no such organization).
    fn org_role(&self, org: i64, user: i64) -> Result<Option<String>>;

    /// Whether `id` is an organization.
    fn is_org(&self, id: i64) -> Result<bool>;

    /// The members of `org`, oldest first.
    fn members(&self, org: i64) -> Result<Vec<MemberRow>>;

    /// Removes `user` from `org` and revokes their keys of it (one
    /// transaction); the last owner is not removed.
    fn remove_member(&self, org: i64, user: i64) -> Result<Removal>;

    /// Records an invitation of `email` into `org` as `role`, by its token's hash.
    fn invite(
        &self,
        org: i64,
        email: &str,
        role: &str,
        token_hash: &str,
        by: i64,
        expires_at: &str,
    ) -> Result<()>;

    /// Accepts the live invitation of this token hash for `user` (whose
    /// address must be the invited one): joined, or `None` (no such live
    /// invitation for them). A member already takes the invited role.
    fn accept_invitation(&self, token_hash: &str, user: i64, email: &str)
        -> Result<Option<Joined>>;

    /// Names `member` as the owner of the organization's key `key_id`.
    fn set_key_member(&self, key_id: i64, member: i64) -> Result<()>;
}

impl Organizations for Store {
    fn create_org(&self, name: &str, creator: i64, handle: &str) -> Result<i64> {
        let now = now_rfc3339();
        let email = handle;
        self.transaction(|tx| {
            let id: i64 = tx
                .row(
                    "INSERT INTO users (email, is_admin, created_at) VALUES (?1, 0, ?2) RETURNING id",
                    p![email, now],
                    |r| r.get(0),
                )?
                .ok_or_else(|| StoreError::msg("insert returned no id"))?;
            tx.exec(
                "INSERT INTO organizations (id, name, created_by, created_at) VALUES (?1, ?2, ?3, ?4)",
                p![id, name, creator, now],
            )?;
            tx.exec(
                "INSERT INTO org_members (org_id, user_id, role, created_at) VALUES (?1, ?2, 'owner', ?3)",
                p![id, creator, now],
            )?;
            Ok(id)
        })
    }

    fn orgs_of(&self, user: i64) -> Result<Vec<OrgRow>> {
        self.with(|db| {
            db.rows(
                "SELECT o.id, o.name, o.created_at, m.role FROM org_members m
                 JOIN organizations o ON o.id = m.org_id WHERE m.user_id = ?1 ORDER BY o.id",
                p![user],
                |r| {
                    Ok(OrgRow {
                        id: r.get(0)?,
                        name: r.get(1)?,
                        created_at: r.get(2)?,
                        role: r.get(3)?,
                    })
                },
            )
        })
    }

    fn org_role(&self, org: i64, user: i64) -> Result<Option<String>> {
        self.with(|db| {
            db.row(
                "SELECT role FROM org_members WHERE org_id = ?1 AND user_id = ?2",
                p![org, user],
                |r| r.get(0),
            )
        })
    }

    fn is_org(&self, id: i64) -> Result<bool> {
        self.with(|db| db.exists("SELECT 1 FROM organizations WHERE id = ?1", p![id]))
    }

    fn members(&self, org: i64) -> Result<Vec<MemberRow>> {
        self.with(|db| {
            db.rows(
                "SELECT m.user_id, u.email, m.role, m.created_at FROM org_members m
                 JOIN users u ON u.id = m.user_id WHERE m.org_id = ?1 ORDER BY m.created_at, m.user_id",
                p![org],
                |r| {
                    Ok(MemberRow {
                        user_id: r.get(0)?,
                        email: r.get(1)?,
                        role: r.get(2)?,
                        joined_at: r.get(3)?,
                    })
                },
            )
        })
    }

    fn remove_member(&self, org: i64, user: i64) -> Result<Removal> {
        self.transaction(|tx| {
            let role: Option<String> = tx.row(
                "SELECT role FROM org_members WHERE org_id = ?1 AND user_id = ?2",
                p![org, user],
                |r| r.get(0),
            )?;
            let Some(role) = role else {
                return Ok(Removal::NotMember);
            };
            if role == "owner" && owners(tx, org)? <= 1 {
                return Ok(Removal::LastOwner);
            }
            tx.exec(
                "DELETE FROM org_members WHERE org_id = ?1 AND user_id = ?2",
                p![org, user],
            )?;
            let revoked = tx.exec(
                "UPDATE api_keys SET revoked_at = ?3 WHERE user_id = ?1 AND member_id = ?2 AND revoked_at IS NULL",
                p![org, user, now_rfc3339()],
            )?;
            Ok(Removal::Removed(revoked))
        })
    }

    fn invite(
        &self,
        org: i64,
        email: &str,
        role: &str,
        token_hash: &str,
        by: i64,
        expires_at: &str,
    ) -> Result<()> {
        self.with(|db| {
            db.exec(
                "INSERT INTO org_invitations (token_hash, org_id, email, role, invited_by, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                p![token_hash, org, email, role, by, now_rfc3339(), expires_at],
            )
            .map(drop)
        })
    }

    fn accept_invitation(
        &self,
        token_hash: &str,
        user: i64,
        email: &str,
    ) -> Result<Option<Joined>> {
        let now = now_rfc3339();
        self.transaction(|tx| {
            let found: Option<(i64, String)> = tx.row(
                "SELECT org_id, role FROM org_invitations WHERE token_hash = ?1 AND accepted_at IS NULL
                 AND expires_at > ?2 AND lower(email) = lower(?3)",
                p![token_hash, now, email],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let Some((org_id, role)) = found else { return Ok(None) };
            tx.exec(
                "UPDATE org_invitations SET accepted_at = ?2 WHERE token_hash = ?1",
                p![token_hash, now],
            )?;
            tx.exec(
                "INSERT INTO org_members (org_id, user_id, role, created_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (org_id, user_id) DO UPDATE SET role = ?3",
                p![org_id, user, role, now],
            )?;
            Ok(Some(Joined { org_id, role }))
        })
    }

    fn set_key_member(&self, key_id: i64, member: i64) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE api_keys SET member_id = ?2 WHERE id = ?1",
                p![key_id, member],
            )
            .map(drop)
        })
    }
}

/// How many owners `org` has.
fn owners(tx: &mut Db<'_>, org: i64) -> Result<i64> {
    Ok(tx
        .row(
            "SELECT COUNT(*) FROM org_members WHERE org_id = ?1 AND role = 'owner'",
            p![org],
            |r| r.get(0),
        )?
        .unwrap_or(0))
}
