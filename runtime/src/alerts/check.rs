//! One user's check: their keys' budgets against the thresholds, their
//! balance against the floor; an alert inserted for each crossed (once).

use gateway_base::billing::format_money;
use gateway_base::errors::ApiError;
use gateway_store::{AlertSettings, Alerts, Keys, Ledger, NewAlert};
use rust_decimal::Decimal;
use serde_json::json;

use crate::services::Gateway;

/// Checks `user` (see the module docs): alerts inserted, due at once;
/// `false` when the user has no settings.
pub(super) async fn user(gw: &Gateway, user: i64) -> Result<bool, ApiError> {
    let found = gw
        .store
        .blocking(move |s| {
            let Some(settings) = s.alert_settings(user)? else {
                return Ok(None);
            };
            let keys = match settings.budget_thresholds.is_empty() {
                true => Vec::new(),
                false => s.keys_of(user)?,
            };
            let balance = match settings.balance_floor {
                Some(_) => Some(s.balance(user)?),
                None => None,
            };
            Ok(Some((settings, keys, balance)))
        })
        .await?;
    let Some((settings, keys, balance)) = found else {
        return Ok(false);
    };
    let now = chrono::Utc::now();
    let mut new = Vec::new();
    for k in keys.iter().filter(|k| k.revoked_at.is_none()) {
        let Some(b) = &k.budget else { continue };
        if b.budget.usd <= Decimal::ZERO {
            continue;
        }
        let pct = b.spent * Decimal::ONE_HUNDRED / b.budget.usd;
        let period = b.budget.period.key(now);
        for t in settings
            .budget_thresholds
            .iter()
            .filter(|t| Decimal::from(**t) <= pct)
        {
            let body = json!({
                "type": "budget.threshold",
                "threshold": t,
                "key_id": k.id,
                "key_name": k.name,
                "budget_usd": b.budget.usd.to_string(),
                "budget_period": b.budget.period.as_str(),
                "period": period,
                "spent_usd": format_money(b.spent),
            });
            let once = format!("{user}:budget:{}:{period}:{t}", k.id);
            new.push(alert(user, &settings, once, "budget", t.to_string(), body));
        }
    }
    let floor = floor_alert(gw, user, &settings, balance).await?;
    if new.is_empty() && floor.is_none() {
        return Ok(true);
    }
    gw.store
        .blocking(move |s| {
            for a in &new {
                s.insert_alert(a)?;
            }
            if let Some(a) = &floor {
                s.fire_floor(a)?;
            }
            Ok(())
        })
        .await?;
    Ok(true)
}

/// The balance floor's alert when `balance` is below it; at or above it,
/// the floor is re-armed.
async fn floor_alert(
    gw: &Gateway,
    user: i64,
    settings: &AlertSettings,
    balance: Option<Decimal>,
) -> Result<Option<NewAlert>, ApiError> {
    let (Some(floor), Some(balance)) = (settings.balance_floor, balance) else {
        return Ok(None);
    };
    if balance >= floor {
        if settings.floor_alerted {
            gw.store.blocking(move |s| s.rearm_floor(user)).await?;
        }
        return Ok(None);
    }
    if settings.floor_alerted {
        return Ok(None);
    }
    let body = json!({
        "type": "balance.floor",
        "threshold": format_money(floor),
        "balance_usd": format_money(balance),
    });
    let once = format!("{user}:floor:{}", uuid::Uuid::new_v4().simple());
    Ok(Some(alert(
        user,
        settings,
        once,
        "balance",
        format_money(floor),
        body,
    )))
}

/// An alert of `user` (the body completed with its common fields).
fn alert(
    user: i64,
    settings: &AlertSettings,
    once_key: String,
    kind: &str,
    threshold: String,
    mut body: serde_json::Value,
) -> NewAlert {
    body["user_id"] = json!(user);
    body["created_at"] = json!(gateway_store::now_rfc3339());
    body["id"] = json!(format!("alert_{}", uuid::Uuid::new_v4().simple()));
    NewAlert {
        user_id: user,
        once_key,
        kind: kind.to_owned(),
        threshold,
        body: body.to_string(),
        email: settings.email,
        webhook: settings.webhook_url.is_some(),
    }
}
