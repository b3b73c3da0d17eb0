//! Retention: the sweeper that deletes expired objects.
//!
//! An asset whose `expires_at` has passed has its object deleted and its
//! record marked `deleted_at`; an asset without `expires_at` is permanent and
//! is never touched. Runs periodically inside `gateway serve`
//! (`GATEWAY_SWEEP_INTERVAL_SECS`) and once with `gateway sweep`. Safe to run
//! from several instances at once: deleting a missing object is not an error,
//! and marking is idempotent.

use crate::Gateway;

/// Assets handled per database round trip.
const PAGE: usize = 500;

/// What one sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SweepReport {
    pub deleted: usize,
    pub failed: usize,
}

/// Deletes every object that expired at or before now.
pub async fn sweep_once(gw: &Gateway) -> SweepReport {
    let mut report = SweepReport::default();
    loop {
        let now = crate::store::now_rfc3339();
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
    if report.deleted > 0 || report.failed > 0 {
        tracing::info!(
            deleted = report.deleted,
            failed = report.failed,
            "retention sweep"
        );
    }
    report
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
