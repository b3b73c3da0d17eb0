//! What a soak is asked to do ([`Settings`], from the command line) and its
//! fixed parts: the scenarios, the calibration's concurrency, the window,
//! the connections per scenario.

use std::time::Duration;

use crate::load::Schedule;
use crate::plan::Scenario;

/// The soak's scenarios, in the order of its tables.
pub const SCENARIOS: [Scenario; 3] = [Scenario::Chat, Scenario::Free, Scenario::Billed];
/// Connections of the calibration's three closed loops together ("the c=64 rate" of the mix).
pub const CALIBRATION_CONCURRENCY: usize = 64;
/// A scenario's soak rate as a share of its req/s in the calibration ("half
/// the c=64 rate").
pub const RATE_SHARE: f64 = 0.5;
/// Length of a window (a row of the table).
pub const WINDOW: Duration = Duration::from_secs(60);
/// The latency a soak connection may take at its rate before the open loop
/// would wait for it: a scenario gets `rate × LATENCY_ROOM` connections.
pub const LATENCY_ROOM: Duration = Duration::from_millis(100);
/// The fewest connections a soaked scenario gets.
const MIN_CONNECTIONS: usize = 64;
/// The most connections a soaked scenario gets.
const MAX_CONNECTIONS: usize = 1024;

/// What a soak is asked to do.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How long the soak lasts (minutes).
    pub minutes: f64,
    /// Warm-up before each calibration and before the soak.
    pub warmup: Duration,
    /// Measured time of each calibration.
    pub calibration: Duration,
    /// `--rate`: each scenario's rate, no calibration.
    pub rate: Option<f64>,
    /// Longest time one request may take before it counts as an error.
    pub timeout: Duration,
}

impl Settings {
    /// The soak of the command line, `None` without `--soak`.
    pub fn of(cli: &crate::Cli) -> Result<Option<Settings>, String> {
        let Some(minutes) = cli.soak else {
            return Ok(None);
        };
        if !(minutes.is_finite() && minutes > 0.0 && minutes <= 7.0 * 24.0 * 60.0) {
            return Err("--soak must be a positive number of minutes (at most a week)".into());
        }
        let secs = |v: f64, name: &str| {
            Duration::try_from_secs_f64(v)
                .map_err(|_| format!("--{name} must be a non-negative number of seconds"))
        };
        if cli.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return Err("--rate must be a positive number of requests per second".into());
        }
        Ok(Some(Settings {
            minutes,
            warmup: secs(cli.warmup.unwrap_or(1.0), "warmup")?,
            calibration: secs(cli.duration.unwrap_or(5.0), "duration")?,
            rate: cli.rate,
            timeout: secs(cli.timeout, "timeout")?,
        }))
    }

    /// The soak's own schedule.
    pub fn schedule(&self) -> Schedule {
        Schedule {
            warmup: self.warmup,
            duration: Duration::from_secs_f64(self.minutes * 60.0),
            window: WINDOW,
        }
    }
}

/// Connections of a scenario soaked at `rate` requests/s.
pub fn connections_for(rate: f64) -> usize {
    let n = (rate * LATENCY_ROOM.as_secs_f64()).ceil();
    if n.is_finite() {
        (n as usize).clamp(MIN_CONNECTIONS, MAX_CONNECTIONS)
    } else {
        MAX_CONNECTIONS
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn settings(args: &[&str]) -> Result<Option<Settings>, String> {
        let args = [&["gateway-bench"], args].concat();
        let cli = crate::Cli::try_parse_from(args).map_err(|e| e.to_string())?;
        Settings::of(&cli)
    }

    #[test]
    fn reads_the_command_line() {
        assert!(settings(&[]).unwrap().is_none());
        let s = settings(&["--soak", "2.5"]).unwrap().unwrap();
        let secs = Duration::from_secs;
        assert_eq!(
            (s.minutes, s.warmup, s.calibration),
            (2.5, secs(1), secs(5))
        );
        assert_eq!((s.rate, s.schedule().windows()), (None, 3));
        let s = settings(&["--soak", "30", "--rate", "100", "--duration", "2"]).unwrap();
        let s = s.unwrap();
        assert_eq!((s.schedule().windows(), s.rate), (30, Some(100.0)));
        assert_eq!(s.calibration, secs(2));
        let bad: [&[&str]; 6] = [
            &["--soak", "0"],
            &["--soak", "-1"],
            &["--soak", "nan"],
            &["--soak", "1", "--rate", "0"],
            &["--soak", "1", "--scenario", "free"],
            &["--soak", "1", "--quick"],
        ];
        for args in bad {
            assert!(settings(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn connections_follow_the_rate() {
        assert_eq!(connections_for(10.0), MIN_CONNECTIONS);
        assert_eq!(connections_for(2000.0), 200);
        assert_eq!(connections_for(1e9), MAX_CONNECTIONS);
    }
}
