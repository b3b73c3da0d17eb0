//! Reconciliation: the gateway's usage totals of a day against the
//! upstream's billing usage (`GET {main}/account/billing_usage`).
//!
//! Gateway usage is grouped by upstream product (the table's
//! `[reconcile.*]`, [`gateway_base::spec::Table::upstream_product`]);
//! each product's comparison is stored (`reconciliation_runs`), and a drift
//! above [`DRIFT_THRESHOLD_PCT`] percent is logged at error level with both
//! figures. Runs nightly inside `gateway serve` (for the previous UTC day, at
//! `GATEWAY_RECONCILE_AT`) and on demand with `gateway reconcile --date`.

use std::collections::BTreeMap;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde_json::Value;

use crate::services::Gateway;
use gateway_base::errors::ApiError;
use gateway_base::spec::{Base, Method, Upstream};
use gateway_store::{Instances, ReconciliationRow, Reconciliations};

/// Drift (percent of the upstream's figure) above which an error is logged.
pub const DRIFT_THRESHOLD_PCT: Decimal = Decimal::ONE;

/// Drift in percent of the upstream figure (100 when the upstream has none
/// but the gateway has some), rounded to 4 places.
pub fn drift_pct(gateway: Decimal, upstream: Decimal) -> Decimal {
    if upstream.is_zero() {
        return if gateway.is_zero() {
            Decimal::ZERO
        } else {
            Decimal::ONE_HUNDRED
        };
    }
    ((gateway - upstream).abs() / upstream * Decimal::ONE_HUNDRED).round_dp(4)
}

/// Fetches the upstream's usage of one day: product → quantity.
pub async fn upstream_usage(
    gw: &Gateway,
    day: &str,
) -> Result<BTreeMap<String, Decimal>, ApiError> {
    // Not a gateway route, so not a table row; it presents the key as the
    // table says for the main base.
    let up = Upstream {
        base: Base::Main,
        method: Method::Get,
        path: "/account/billing_usage",
        from_query: &[],
        from_body: &[],
        from_parent: &[],
        auth: gw.table.base_auth(Base::Main),
    };
    let query = vec![
        ("start_date".to_owned(), day.to_owned()),
        ("end_date".to_owned(), day.to_owned()),
    ];
    let v = gw
        .upstream
        .call(&up, up.path, &query)?
        .send()
        .await?
        .json("its billing usage")
        .await?;
    let items = v
        .get("items")
        .and_then(Value::as_object)
        .ok_or_else(|| ApiError::BadGateway("billing usage without items".into()))?;
    let mut out = BTreeMap::new();
    for (k, val) in items {
        let d = match val {
            Value::String(s) => Decimal::from_str(s.trim()).ok(),
            other => gateway_base::billing::decimal_from_json(other),
        };
        if let Some(d) = d {
            out.insert(k.clone(), d);
        }
    }
    Ok(out)
}

/// Compares one day, stores the comparison, logs drift; returns the rows.
pub async fn reconcile(gw: &Gateway, day: &str) -> Result<Vec<ReconciliationRow>, ApiError> {
    chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d")
        .map_err(|_| ApiError::BadRequest(format!("date must be YYYY-MM-DD, not {day:?}")))?;
    let d = day.to_owned();
    let totals = gw
        .store
        .blocking(move |store| store.usage_totals(&d))
        .await?;
    let mut gateway: BTreeMap<String, Decimal> = BTreeMap::new();
    for ((product, unit), q) in totals {
        if let Some(p) = gw.table.upstream_product(&product, &unit) {
            *gateway.entry(p.to_owned()).or_insert(Decimal::ZERO) += q;
        }
    }
    let upstream = upstream_usage(gw, day).await?;
    let mut products: Vec<&String> = gateway.keys().chain(upstream.keys()).collect();
    products.sort();
    products.dedup();
    let mut rows = Vec::new();
    for product in products {
        let g = gateway.get(product).copied().unwrap_or(Decimal::ZERO);
        let u = upstream.get(product).copied().unwrap_or(Decimal::ZERO);
        let drift = drift_pct(g, u);
        let status = if drift > DRIFT_THRESHOLD_PCT {
            "drift"
        } else {
            "ok"
        };
        if status == "drift" {
            tracing::error!(day, product = %product, gateway_total = %g, upstream_total = %u, drift_pct = %drift, "billing drift above 1 percent");
        } else {
            tracing::info!(day, product = %product, gateway_total = %g, upstream_total = %u, drift_pct = %drift, "billing reconciled");
        }
        rows.push(ReconciliationRow {
            day: day.to_owned(),
            product: product.clone(),
            gateway_total: g,
            upstream_total: Some(u),
            drift_pct: Some(drift),
            status: status.to_owned(),
        });
    }
    let to_store = rows.clone();
    gw.store
        .blocking(move |store| {
            to_store
                .iter()
                .try_for_each(|r| store.insert_reconciliation(r))
        })
        .await?;
    Ok(rows)
}

/// Runs [`reconcile`] for the previous UTC day every day at `at` (UTC),
/// on one instance only (a claim in the database). `gateway reconcile`
/// always runs.
pub async fn run_nightly(gw: Gateway, at: chrono::NaiveTime) {
    loop {
        let now = chrono::Utc::now();
        let mut next = now.date_naive().and_time(at).and_utc();
        if next <= now {
            next += chrono::Duration::days(1);
        }
        tokio::time::sleep((next - now).to_std().unwrap_or_default()).await;
        let day = (chrono::Utc::now().date_naive() - chrono::Duration::days(1))
            .format("%Y-%m-%d")
            .to_string();
        // Once per day whatever the number of instances sharing the database.
        let claim = format!("reconcile:{day}");
        match gw.store.blocking(move |s| s.claim_once(&claim)).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!(day, "reconciled by another instance");
                continue;
            }
            Err(e) => {
                tracing::error!(day, error = %e, "nightly reconciliation not claimed");
                continue;
            }
        }
        if let Err(e) = reconcile(&gw, &day).await {
            tracing::error!(day, error = %e, "nightly reconciliation failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn drift() {
        assert_eq!(drift_pct(d("101"), d("100")), d("1"));
        assert_eq!(drift_pct(d("101.01"), d("100")), d("1.01"));
        assert_eq!(drift_pct(d("99"), d("100")), d("1"));
        assert_eq!(drift_pct(d("0"), d("0")), d("0"));
        assert_eq!(drift_pct(d("5"), d("0")), d("100"));
    }
}
