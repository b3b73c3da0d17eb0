//! Repositories of stored objects' records (assets).

use super::sql::{p, Row};
use super::{Result, Store};

/// An asset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssetRow {
    pub id: i64,
    pub owner_id: Option<i64>,
    pub object_key: String,
    pub class: String,
    pub purpose: Option<String>,
    pub size_bytes: u64,
    pub content_type: String,
    pub file_name: Option<String>,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub deleted_at: Option<String>,
    /// The segment holding a packed object (`objects::pack`), if packed.
    pub pack: Option<String>,
    /// Offset of a packed object's body in its segment.
    pub pack_offset: Option<u64>,
}

const ASSET_COLS: &str =
    "id, owner_id, object_key, class, purpose, size_bytes, content_type, file_name, created_at, expires_at, deleted_at, pack, pack_offset";

fn row_to_asset(r: &Row<'_>) -> Result<AssetRow> {
    Ok(AssetRow {
        id: r.get(0)?,
        owner_id: r.get(1)?,
        object_key: r.get(2)?,
        class: r.get(3)?,
        purpose: r.get(4)?,
        size_bytes: r.get::<i64>(5)? as u64,
        content_type: r.get(6)?,
        file_name: r.get(7)?,
        created_at: r.get(8)?,
        expires_at: r.get(9)?,
        deleted_at: r.get(10)?,
        pack: r.get(11)?,
        pack_offset: r.get::<Option<i64>>(12)?.map(|o| o as u64),
    })
}

/// Stored objects (uploads, generated media, mirrored copies): read by
/// id, key or owner, packed into segments, expired and deleted.
pub trait Assets {
    fn asset(&self, id: i64) -> Result<Option<AssetRow>>;

    fn asset_by_key(&self, key: &str) -> Result<Option<AssetRow>>;

    /// The live speech `owner`'s request `request_id` stored (its
    /// `source`), at `now`.
    fn speech_of(&self, owner: i64, request_id: &str, now: &str) -> Result<Option<AssetRow>>;

    /// Every asset, oldest first (tests, operators).
    fn assets(&self) -> Result<Vec<AssetRow>>;

    /// Where the live asset of `key` is packed: `(segment, body offset,
    /// size, content type)`; `None` when there is none or it is a file.
    /// (`object_key` is unique, so this is one index lookup.)
    fn packed_object(&self, key: &str) -> Result<Option<(String, u64, u64, String)>>;

    /// The segments that live assets are packed in (retention keeps them).
    fn live_packs(&self) -> Result<Vec<String>>;

    /// Live assets whose `expires_at` is at or before `now` (permanent ones never).
    fn expired_assets(&self, now: &str, limit: usize) -> Result<Vec<AssetRow>>;

    /// Marks an asset's object deleted.
    fn mark_asset_deleted(&self, id: i64, at: &str) -> Result<()>;

    /// The live asset `id` of class `class` owned by `owner`: not deleted and
    /// not expired at `now`.
    fn live_owned_asset(
        &self,
        owner: i64,
        class: &str,
        id: i64,
        now: &str,
    ) -> Result<Option<AssetRow>>;

    /// One page of `owner`'s live assets of class `class` at `now`, newest
    /// first, and how many there are.
    fn live_owned_assets(
        &self,
        owner: i64,
        class: &str,
        now: &str,
        limit: u32,
        skip: u32,
    ) -> Result<(Vec<AssetRow>, u64)>;

    /// Marks `owner`'s live asset `id` of class `class` deleted at `now`
    /// (its object already deleted by the caller): it is answered no more,
    /// and the sweeper leaves it. Whether there was one.
    fn delete_owned_asset(&self, owner: i64, class: &str, id: i64, now: &str) -> Result<bool>;

    /// Test and operator hook: moves an asset's expiry.
    fn set_asset_expiry(&self, id: i64, expires_at: Option<&str>) -> Result<()>;
}

impl Assets for Store {
    fn asset(&self, id: i64) -> Result<Option<AssetRow>> {
        self.with(|db| {
            db.row(
                &format!("SELECT {ASSET_COLS} FROM assets WHERE id = ?1"),
                p![id],
                row_to_asset,
            )
        })
    }

    fn asset_by_key(&self, key: &str) -> Result<Option<AssetRow>> {
        self.with(|db| {
            db.row(
                &format!("SELECT {ASSET_COLS} FROM assets WHERE object_key = ?1"),
                p![key],
                row_to_asset,
            )
        })
    }

    fn speech_of(&self, owner: i64, request_id: &str, now: &str) -> Result<Option<AssetRow>> {
        self.with(|db| {
            db.row(
                &format!(
                    "SELECT {ASSET_COLS} FROM assets WHERE source = ?1 AND class = 'speech'
                     AND owner_id = ?2 AND deleted_at IS NULL
                     AND (expires_at IS NULL OR expires_at > ?3)"
                ),
                p![request_id, owner, now],
                row_to_asset,
            )
        })
    }

    fn assets(&self) -> Result<Vec<AssetRow>> {
        self.with(|db| {
            db.rows(
                &format!("SELECT {ASSET_COLS} FROM assets ORDER BY id"),
                &[],
                row_to_asset,
            )
        })
    }

    fn packed_object(&self, key: &str) -> Result<Option<(String, u64, u64, String)>> {
        self.with(|db| {
            db.row(
                "SELECT pack, pack_offset, size_bytes, content_type FROM assets
                 WHERE object_key = ?1 AND deleted_at IS NULL AND pack IS NOT NULL",
                p![key],
                |r| {
                    Ok((
                        r.get::<String>(0)?,
                        r.get::<Option<i64>>(1)?.unwrap_or(0) as u64,
                        r.get::<i64>(2)? as u64,
                        r.get::<String>(3)?,
                    ))
                },
            )
        })
    }

    fn live_packs(&self) -> Result<Vec<String>> {
        self.with(|db| {
            db.rows(
                "SELECT DISTINCT pack FROM assets WHERE deleted_at IS NULL AND pack IS NOT NULL",
                &[],
                |r| r.get(0),
            )
        })
    }

    fn expired_assets(&self, now: &str, limit: usize) -> Result<Vec<AssetRow>> {
        self.with(|db| db.rows(&format!(
            "SELECT {ASSET_COLS} FROM assets
             WHERE deleted_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ?1 ORDER BY expires_at LIMIT ?2"
        ), p![now, limit as i64], row_to_asset))
    }

    fn mark_asset_deleted(&self, id: i64, at: &str) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE assets SET deleted_at = ?2 WHERE id = ?1 AND deleted_at IS NULL",
                p![id, at],
            )
        })?;
        Ok(())
    }

    fn live_owned_asset(
        &self,
        owner: i64,
        class: &str,
        id: i64,
        now: &str,
    ) -> Result<Option<AssetRow>> {
        self.with(|db| {
            db.row(
                &format!(
                    "SELECT {ASSET_COLS} FROM assets WHERE id = ?1 AND owner_id = ?2 AND class = ?3
                     AND deleted_at IS NULL AND (expires_at IS NULL OR expires_at > ?4)"
                ),
                p![id, owner, class, now],
                row_to_asset,
            )
        })
    }

    fn live_owned_assets(
        &self,
        owner: i64,
        class: &str,
        now: &str,
        limit: u32,
        skip: u32,
    ) -> Result<(Vec<AssetRow>, u64)> {
        const LIVE: &str = "owner_id = ?1 AND class = ?2 AND deleted_at IS NULL
                            AND (expires_at IS NULL OR expires_at > ?3)";
        self.with(|db| {
            let total: i64 = db
                .row(
                    &format!("SELECT COUNT(*) FROM assets WHERE {LIVE}"),
                    p![owner, class, now],
                    |r| r.get(0),
                )?
                .unwrap_or(0);
            let rows = db.rows(
                &format!(
                    "SELECT {ASSET_COLS} FROM assets WHERE {LIVE} ORDER BY id DESC LIMIT ?4 OFFSET ?5"
                ),
                p![owner, class, now, limit as i64, skip as i64],
                row_to_asset,
            )?;
            Ok((rows, total as u64))
        })
    }

    fn delete_owned_asset(&self, owner: i64, class: &str, id: i64, now: &str) -> Result<bool> {
        let n = self.with(|db| {
            db.exec(
                "UPDATE assets SET deleted_at = ?4 WHERE id = ?1 AND owner_id = ?2 AND class = ?3
                 AND deleted_at IS NULL AND (expires_at IS NULL OR expires_at > ?4)",
                p![id, owner, class, now],
            )
        })?;
        Ok(n == 1)
    }

    fn set_asset_expiry(&self, id: i64, expires_at: Option<&str>) -> Result<()> {
        self.with(|db| {
            db.exec(
                "UPDATE assets SET expires_at = ?2 WHERE id = ?1",
                p![id, expires_at],
            )
        })?;
        Ok(())
    }
}
