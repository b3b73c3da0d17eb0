//! Spend alerts: a user's thresholds on their keys' budgets and a floor
//! under their balance (`PUT /alerts/settings`, `modes::alerts`), checked
//! within seconds of the settlement that crossed one, delivered by mail
//! and by a signed webhook, each once.
//!
//! - **Told**: the record writer tells [`Charged`] of every user a commit
//!   charged, once it is committed ([`gateway_store::Store::on_charge`],
//!   installed by `start`); nothing is read on the request's path.
//! - **Checked** ([`check`]): each second the task checks the users
//!   charged since the last round — and those of the round before, so
//!   that a check racing a commit sees it next time — against their
//!   settings. A key's budget threshold `t` fires when the key's spend in
//!   its period reaches `t` % of its budget, once per key, period and
//!   threshold: the alert's once-key is unique in the database, so
//!   instances checking the same user at once insert it once. The balance
//!   floor fires when the balance falls below it, once until a check sees
//!   the balance at or above it again.
//! - **Delivered** ([`deliver`]): an alert's deliveries are due when it is
//!   inserted; any instance claims a due alert for a lease
//!   ([`deliver::LEASE`]) by a conditional update, sends what is pending (the mail
//!   to the user's address, the webhook signed over `"{timestamp}.{body}"`
//!   with the timestamp in `X-Gateway-Timestamp`), and on a failure makes
//!   it due again after a back-off, at most [`deliver::ATTEMPTS`] times. An
//!   instance that dies with a claim leaves it to the others when its
//!   lease ends.

pub mod charged;
mod check;
pub mod deliver;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use charged::Charged;

use crate::services::Gateway;

/// How often charged users are checked and due deliveries looked for.
const ROUND: Duration = Duration::from_secs(1);

/// How long a user found without settings is not asked again (settings
/// set on another instance are seen within it; on this one at once).
const NO_SETTINGS_TTL: Duration = Duration::from_secs(10);

/// The alerts task of one instance (see the module docs).
pub async fn run(gw: Gateway) {
    let mut previous = HashSet::new();
    let mut without: HashMap<i64, Instant> = HashMap::new();
    loop {
        tokio::select! {
            _ = gw.charged.woken() => {
                // A short wait gathers a burst's users into one round.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            _ = tokio::time::sleep(ROUND) => {}
        }
        let now = gw.charged.take();
        for user in gw.charged.take_changed() {
            without.remove(&user);
        }
        without.retain(|_, at| at.elapsed() < NO_SETTINGS_TTL);
        for user in now.union(&previous) {
            if without.contains_key(user) {
                continue;
            }
            match check::user(&gw, *user).await {
                Ok(false) => {
                    without.insert(*user, Instant::now());
                }
                Ok(true) => {}
                Err(e) => {
                    tracing::warn!(user_id = user, error = %e, "spend alerts: a check failed")
                }
            }
        }
        previous = now;
        deliver::due(&gw).await;
    }
}

/// The shared listener the writer calls.
pub fn listener(charged: Arc<Charged>) -> gateway_store::ChargeListener {
    Arc::new(move |user| charged.tell(user))
}
