//! Retention: the sweeper that deletes expired objects (and the stored
//! responses of the Responses API past their retention).
//!
//! An asset whose `expires_at` has passed has its object deleted and its
//! record marked `deleted_at`; an asset without `expires_at` is permanent and
//! is never touched. Runs periodically inside `gateway serve`
//! (`GATEWAY_SWEEP_INTERVAL_SECS`) and once with `gateway sweep`. Safe to run
//! from several instances at once: deleting a missing object is not an error,
//! and marking is idempotent.
//!
//! A packed object (`objects::pack`) has no file: deleting it is a no-op
//! and marking its asset deleted makes it unreadable (the local store finds
//! packed objects through live asset records only). At the end of each
//! sweep, the segments that no live asset references and whose mtime is
//! over a day old are removed ([`collect_segments`]). A segment being filled
//! by a running `serve` (this process or another one beside it, e.g. `gateway
//! sweep` from the CLI) is written to at least every 10 minutes or rotated,
//! so it is always younger than that and never removed.

use gateway_store::Assets;

use crate::services::Gateway;

/// Assets handled per database round trip.
const PAGE: usize = 500;

/// What one sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    pub deleted: usize,
    pub failed: usize,
    /// Packed segments removed (no live asset, idle over a day).
    pub segments_removed: usize,
    /// Stored responses of the Responses API deleted (expired).
    pub responses_removed: u64,
}

/// Deletes the stored responses expired at or before now
/// (`GATEWAY_RESPONSES_RETENTION_DAYS` after they were made).
async fn sweep_responses(gw: &Gateway) -> u64 {
    use gateway_store::Responses;
    let now = gateway_store::now_rfc3339();
    match gw
        .store
        .blocking(move |store| store.sweep_responses(&now))
        .await
    {
        Ok(n) => n,
        Err(e) => {
            tracing::error!(error = %e, "sweeper: deleting expired responses failed");
            0
        }
    }
}

/// Deletes every object that expired at or before now.
pub async fn sweep_once(gw: &Gateway) -> SweepReport {
    let mut report = SweepReport::default();
    loop {
        let now = gateway_store::now_rfc3339();
        let n = now.clone();
        let batch = match gw
            .store
            .blocking(move |store| store.expired_assets(&n, PAGE))
            .await
        {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "sweeper: listing expired assets failed");
                return report;
            }
        };
        if batch.is_empty() {
            break;
        }
        let mut progressed = false;
        for asset in batch {
            match gw.objects.delete(&asset.object_key).await {
                Ok(()) => {
                    let at = now.clone();
                    if gw
                        .store
                        .blocking(move |store| store.mark_asset_deleted(asset.id, &at))
                        .await
                        .is_ok()
                    {
                        report.deleted += 1;
                        progressed = true;
                    } else {
                        report.failed += 1;
                    }
                }
                Err(e) => {
                    tracing::warn!(key = %asset.object_key, error = %e, "sweeper: delete failed; will retry next sweep");
                    report.failed += 1;
                }
            }
        }
        if !progressed {
            break;
        }
    }
    report.segments_removed = collect_segments(gw).await;
    report.responses_removed = sweep_responses(gw).await;
    if report.deleted > 0
        || report.failed > 0
        || report.segments_removed > 0
        || report.responses_removed > 0
    {
        tracing::info!(
            deleted = report.deleted,
            failed = report.failed,
            segments_removed = report.segments_removed,
            responses_removed = report.responses_removed,
            "retention sweep"
        );
    }
    report
}

/// Removes the local store's packed segments that no live asset references
/// and that were not modified for a day (see the module docs). Returns how
/// many were removed. This process's active segment is never removed.
pub async fn collect_segments(gw: &Gateway) -> usize {
    let Some(local) = gw.objects.as_local() else {
        return 0;
    };
    let live = match gw.store.blocking(|store| store.live_packs()).await {
        Ok(l) => l.into_iter().collect::<std::collections::HashSet<String>>(),
        Err(e) => {
            tracing::error!(error = %e, "sweeper: listing live segments failed");
            return 0;
        }
    };
    let mut live = live;
    // This process's own active segment, whatever its mtime says.
    live.extend(local.active_segment());
    let dir = local.packs_dir().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut removed = 0;
        for path in gateway_adapters::objects::pack::collectable_segments(&dir, &live) {
            match std::fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(segment = %path.display(), error = %e, "sweeper: removing a segment failed")
                }
            }
        }
        removed
    })
    .await
    .unwrap_or(0)
}

/// Sweeps every `interval` until the gateway stops.
pub async fn run_periodically(gw: Gateway, interval: std::time::Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        sweep_once(&gw).await;
    }
}
