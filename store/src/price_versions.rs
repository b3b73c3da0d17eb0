//! The catalogue's prices by version (`GET /admin/prices/{version}`): each
//! version the gateway priced with, recorded when its catalogue is
//! installed (at start, at a reload), never deleted (records name it).

use super::sql::p;
use super::{now_rfc3339, Result, Store};

/// Price versions.
pub trait PriceVersions {
    /// Records `prices` (JSON) under `version` unless it is there.
    fn record_price_version(&self, version: &str, prices: &str) -> Result<()>;

    /// The prices (JSON) of `version` and when it was first recorded.
    fn price_version(&self, version: &str) -> Result<Option<(String, String)>>;
}

impl PriceVersions for Store {
    fn record_price_version(&self, version: &str, prices: &str) -> Result<()> {
        self.with(|db| {
            db.exec(
                "INSERT INTO price_versions (version, prices, created_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (version) DO NOTHING",
                p![version, prices, now_rfc3339()],
            )
            .map(drop)
        })
    }

    fn price_version(&self, version: &str) -> Result<Option<(String, String)>> {
        self.with(|db| {
            db.row(
                "SELECT prices, created_at FROM price_versions WHERE version = ?1",
                p![version],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
    }
}
