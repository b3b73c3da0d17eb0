//! An alert's deliveries: claimed by one instance for a lease, sent
//! (mail, signed webhook), retried after a back-off while any is pending.

use chrono::Utc;
use gateway_base::signing;
use gateway_store::{Accounts, AlertRow, Alerts};

use crate::callbacks::{Failure, BACKOFF};
use crate::services::Gateway;

/// How long a claim on an alert's deliveries lasts.
pub const LEASE: std::time::Duration = std::time::Duration::from_secs(60);

/// Attempts at an alert's deliveries before they are given up (`failed`).
pub const ATTEMPTS: i64 = 6;

/// The header carrying a webhook delivery's time (Unix seconds), signed
/// with its body: a receiver refuses a delivery whose time is old (a replay).
pub const TIMESTAMP_HEADER: &str = "x-gateway-timestamp";

/// Claims the alerts whose deliveries are due and sends each in a task.
pub(super) async fn due(gw: &Gateway) {
    let now = gateway_store::now_rfc3339();
    let until = gateway_store::rfc3339(Utc::now() + LEASE);
    let claimed = gw
        .store
        .blocking(move |s| {
            let mut mine = Vec::new();
            for a in s.due_alerts(&now, 16)? {
                if s.claim_alert(&a, &until)? {
                    mine.push(a);
                }
            }
            Ok(mine)
        })
        .await;
    match claimed {
        Ok(alerts) => {
            for a in alerts {
                tokio::spawn(send(gw.clone(), a));
            }
        }
        Err(e) => tracing::warn!(error = %e, "spend alerts: due deliveries not read"),
    }
}

/// One attempt at `a`'s pending deliveries, its outcome recorded.
async fn send(gw: Gateway, a: AlertRow) {
    let user = a.user_id;
    let found = gw
        .store
        .blocking(move |s| Ok((s.alert_settings(user)?, s.user(user)?.map(|u| u.email))))
        .await;
    let (settings, email) = match found {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(error = %e, "spend alerts: a delivery's settings not read");
            return; // due again when its lease ends
        }
    };
    let mut mail = a.email_state.clone();
    if mail == "pending" {
        mail = match email {
            Some(to) => match gateway_adapters::mail::send(
                &gw.config.accounts,
                &gw.config.data_dir,
                &to,
                &subject(&a),
                text(&a),
            )
            .await
            {
                Ok(()) => "sent".into(),
                Err(e) => {
                    tracing::warn!(alert = a.id, error = %e, "spend alert: mail failed");
                    mail
                }
            },
            None => "failed".into(),
        };
    }
    let mut hook = a.webhook_state.clone();
    if hook == "pending" {
        let target = settings.and_then(|s| Some((s.webhook_url?, s.webhook_secret?)));
        hook = match target {
            Some((url, secret)) => match webhook(&gw, &url, &secret, &a.body).await {
                Ok(()) => "delivered".into(),
                Err(Failure::Permanent(e)) => {
                    tracing::warn!(alert = a.id, error = %e, "spend alert: webhook refused; not retried");
                    "failed".into()
                }
                Err(Failure::Retry(e)) => {
                    tracing::info!(alert = a.id, error = %e, "spend alert: webhook attempt failed");
                    hook
                }
            },
            // The webhook was removed since.
            None => "none".into(),
        };
    }
    record(&gw, &a, mail, hook).await;
}

/// Records the attempt: done, due again after the back-off, or given up.
async fn record(gw: &Gateway, a: &AlertRow, mut mail: String, mut hook: String) {
    let attempts = a.attempts + 1;
    let pending = mail == "pending" || hook == "pending";
    let next = match pending && attempts < ATTEMPTS {
        true => {
            let i = usize::try_from(attempts - 1)
                .unwrap_or(0)
                .min(BACKOFF.len() - 1);
            Some(gateway_store::rfc3339(Utc::now() + BACKOFF[i]))
        }
        false => None,
    };
    if next.is_none() {
        for s in [&mut mail, &mut hook] {
            if s == "pending" {
                *s = "failed".into();
            }
        }
    }
    let id = a.id;
    let r = gw
        .store
        .blocking(move |s| s.alert_attempted(id, &mail, &hook, attempts, next.as_deref()))
        .await;
    if let Err(e) = r {
        tracing::warn!(alert = id, error = %e, "spend alert: an attempt's outcome not recorded");
    }
}

/// The webhook's POST: `X-Provider-Signature: sha256=<hex>` of
/// `"{timestamp}.{body}"` keyed by the secret, the timestamp in
/// [`TIMESTAMP_HEADER`].
async fn webhook(gw: &Gateway, url: &str, secret: &str, body: &str) -> Result<(), Failure> {
    let ts = Utc::now().timestamp().to_string();
    let signed = signing::sign(secret.as_bytes(), format!("{ts}.{body}").as_bytes());
    let headers = [(signing::SIGNATURE_HEADER, signed), (TIMESTAMP_HEADER, ts)];
    crate::callbacks::post(gw, "webhook_url", url, body, &headers).await
}

fn subject(a: &AlertRow) -> String {
    match a.kind.as_str() {
        "budget" => format!("Spend alert: a key reached {} % of its budget", a.threshold),
        _ => format!("Spend alert: your balance is below {} USD", a.threshold),
    }
}

fn text(a: &AlertRow) -> String {
    let v: serde_json::Value = serde_json::from_str(&a.body).unwrap_or_default();
    match a.kind.as_str() {
        "budget" => format!(
            "The API key {} ({}) has spent {} USD of its budget of {} USD per {} ({} % reached).\n",
            v["key_id"],
            v["key_name"].as_str().unwrap_or("unnamed"),
            v["spent_usd"].as_str().unwrap_or("?"),
            v["budget_usd"].as_str().unwrap_or("?"),
            v["budget_period"].as_str().unwrap_or("?"),
            a.threshold
        ),
        _ => format!(
            "Your balance is {} USD, below the floor of {} USD you set.\n",
            v["balance_usd"].as_str().unwrap_or("?"),
            a.threshold
        ),
    }
}
