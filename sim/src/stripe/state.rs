//! What the simulated Stripe remembers ([`StripeSim`]): its configuration
//! (the secret key callers must present, where events go, their signing
//! secret) and the checkout sessions. Kept apart from the handlers in
//! [`crate::stripe`] so that the shared state can hold it without naming
//! the handlers, which themselves take the shared state.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{json, Value};

/// Stripe's side: configuration and sessions.
#[derive(Default)]
pub struct StripeSim {
    pub(super) state: Mutex<State>,
}

/// The configuration and sessions behind [`StripeSim`]'s lock.
#[derive(Default)]
pub(super) struct State {
    pub(super) secret_key: Option<String>,
    pub(super) webhook_url: Option<String>,
    pub(super) webhook_secret: Option<String>,
    pub(super) sessions: HashMap<String, Value>,
    /// Session ids in creation order.
    pub(super) order: Vec<String>,
    /// Idempotency key → session id.
    pub(super) idempotent: HashMap<String, String>,
    pub(super) seq: u64,
}

impl StripeSim {
    /// Sets the secret key callers must present, where events go and
    /// their signing secret (as `POST /__sim/stripe/config`).
    pub fn configure(
        &self,
        secret_key: Option<String>,
        webhook_url: Option<String>,
        webhook_secret: Option<String>,
    ) {
        let mut st = self.state.lock().unwrap();
        st.secret_key = secret_key;
        st.webhook_url = webhook_url;
        st.webhook_secret = webhook_secret;
    }

    /// The configuration as `GET /__sim/stripe/config` shows it (secrets as `<set>`).
    pub(super) fn config_json(&self) -> Value {
        let st = self.state.lock().unwrap();
        let set = |o: &Option<String>| o.as_ref().map(|_| "<set>");
        json!({
            "secret_key": set(&st.secret_key),
            "webhook_url": st.webhook_url,
            "webhook_secret": set(&st.webhook_secret),
        })
    }
}
