//! The knobs of routing: retries, back-off and cool-down, and the
//! environment variables that set them.

use std::time::Duration;

/// `GATEWAY_RETRY_MAX`: retries after the first attempt.
pub const GATEWAY_RETRY_MAX: &str = "GATEWAY_RETRY_MAX";
/// `GATEWAY_RETRY_BASE_MS`: the back-off's base.
pub const GATEWAY_RETRY_BASE_MS: &str = "GATEWAY_RETRY_BASE_MS";
/// `GATEWAY_COOLDOWN_FAILS`: failures in the window that start a cool-down.
pub const GATEWAY_COOLDOWN_FAILS: &str = "GATEWAY_COOLDOWN_FAILS";
/// `GATEWAY_COOLDOWN_SECS`: how long a cool-down lasts.
pub const GATEWAY_COOLDOWN_SECS: &str = "GATEWAY_COOLDOWN_SECS";

/// The knobs of routing (environment variables above).
#[derive(Debug, Clone)]
pub struct Settings {
    pub retry_max: u32,
    pub retry_base: Duration,
    pub cooldown_fails: u32,
    pub cooldown_window: Duration,
    pub cooldown: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            retry_max: 2,
            retry_base: Duration::from_millis(100),
            cooldown_fails: 3,
            cooldown_window: Duration::from_secs(30),
            cooldown: Duration::from_secs(30),
        }
    }
}
