//! Repositories of tenant isolation: who owns which upstream resource.

use std::collections::HashMap;

use super::sql::p;
use super::{Result, Store};

/// Which user owns an upstream resource (tenant isolation), its parent
/// and its status.
pub trait Owners {
    /// The owner of a resource, if a gateway user created it.
    fn resource_owner(&self, kind: &str, upstream_id: &str) -> Result<Option<i64>>;

    /// The parent recorded with a resource at its creation (an agent tool's agent).
    fn resource_parent(&self, kind: &str, upstream_id: &str) -> Result<Option<String>>;

    /// Owners of every recorded resource of a kind: upstream id → owner.
    fn resource_owners(&self, kind: &str) -> Result<HashMap<String, i64>>;

    /// The status recorded for a resource (a voice's training).
    fn resource_status(&self, kind: &str, upstream_id: &str) -> Result<Option<String>>;
}

impl Owners for Store {
    fn resource_owner(&self, kind: &str, upstream_id: &str) -> Result<Option<i64>> {
        self.with(|db| {
            db.row(
                "SELECT owner_id FROM resources WHERE kind = ?1 AND upstream_id = ?2",
                p![kind, upstream_id],
                |r| r.get(0),
            )
        })
    }

    fn resource_parent(&self, kind: &str, upstream_id: &str) -> Result<Option<String>> {
        let parent = self.with(|db| {
            db.row(
                "SELECT parent FROM resources WHERE kind = ?1 AND upstream_id = ?2",
                p![kind, upstream_id],
                |r| r.get::<Option<String>>(0),
            )
        })?;
        Ok(parent.flatten())
    }

    fn resource_owners(&self, kind: &str) -> Result<HashMap<String, i64>> {
        let rows = self.with(|db| {
            db.rows(
                "SELECT upstream_id, owner_id FROM resources WHERE kind = ?1",
                p![kind],
                |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?)),
            )
        })?;
        Ok(rows.into_iter().collect())
    }

    fn resource_status(&self, kind: &str, upstream_id: &str) -> Result<Option<String>> {
        let status = self.with(|db| {
            db.row(
                "SELECT status FROM resources WHERE kind = ?1 AND upstream_id = ?2",
                p![kind, upstream_id],
                |r| r.get::<Option<String>>(0),
            )
        })?;
        Ok(status.flatten())
    }
}
