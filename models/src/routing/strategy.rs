//! The order of a route's targets for one request.
//!
//! * `weighted`: drawn without replacement by weight (the first target is
//!   `weight / total` likely to go first; the others follow by the same
//!   draw), so failover goes on where the weights say;
//! * `least-latency`: by a moving average (EWMA, α = [`ALPHA`]) of each
//!   deployment's time to first byte, unmeasured first; one request in
//!   [`EXPLORE`] takes a random order so that a deployment that was slow
//!   (or failed) is measured again;
//! * `priority`: the file's order.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::providers::{Deployment, Providers, Route, Strategy};

/// Weight of the newest sample in the moving average.
pub const ALPHA: f64 = 0.3;
/// One request in this many explores (a random order) under least-latency.
pub const EXPLORE: u32 = 10;

/// Time to first byte per deployment (`provider/model`), milliseconds.
#[derive(Default)]
pub struct Latency(Mutex<HashMap<String, f64>>);

impl Latency {
    /// Adds a sample of `name`'s time to first byte.
    pub fn observe(&self, name: &str, ttfb: Duration) {
        let ms = ttfb.as_secs_f64() * 1000.0;
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match map.get_mut(name) {
            Some(avg) => *avg = ALPHA * ms + (1.0 - ALPHA) * *avg,
            None => {
                map.insert(name.to_owned(), ms);
            }
        }
    }

    /// The moving average of `name` (`None`: never measured).
    pub fn average(&self, name: &str) -> Option<f64> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
    }
}

/// `route`'s targets in the order its strategy gives for one request.
pub fn order(providers: &Providers, route: &Route, latency: &Latency) -> Vec<Deployment> {
    match route.strategy {
        Strategy::Priority => route.targets.iter().map(|t| t.deployment).collect(),
        Strategy::Weighted => weighted(route),
        Strategy::LeastLatency => {
            let mut list: Vec<Deployment> = route.targets.iter().map(|t| t.deployment).collect();
            if rand::random::<u32>().is_multiple_of(EXPLORE) {
                use rand::seq::SliceRandom;
                list.shuffle(&mut rand::thread_rng());
                return list;
            }
            let name = |d: Deployment| {
                let (p, m) = providers.deployment(d);
                format!("{}/{}", p.id, m.id)
            };
            let mut keyed: Vec<(f64, Deployment)> = list
                .into_iter()
                .map(|d| (latency.average(&name(d)).unwrap_or(0.0), d))
                .collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
            keyed.into_iter().map(|(_, d)| d).collect()
        }
    }
}

/// The targets drawn one by one, each with a chance proportional to its
/// weight among those left.
fn weighted(route: &Route) -> Vec<Deployment> {
    let mut left: Vec<(u64, Deployment)> = route
        .targets
        .iter()
        .map(|t| (u64::from(t.weight), t.deployment))
        .collect();
    let mut out = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let total: u64 = left.iter().map(|t| t.0).sum();
        let mut draw = rand::random::<u64>() % total.max(1);
        let i = left
            .iter()
            .position(|t| {
                if draw < t.0 {
                    true
                } else {
                    draw -= t.0;
                    false
                }
            })
            .unwrap_or(0);
        out.push(left.remove(i).1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::{ModelType, Target};

    fn route(strategy: Strategy, weights: &[u32]) -> Route {
        Route {
            name: "r".into(),
            limits: Default::default(),
            strategy,
            targets: weights
                .iter()
                .enumerate()
                .map(|(i, w)| Target {
                    deployment: Deployment {
                        provider: i,
                        model: 0,
                    },
                    weight: *w,
                })
                .collect(),
            fallbacks: Vec::new(),
            kind: ModelType::Chat,
            cache_ttl_secs: None,
        }
    }

    #[test]
    fn weighted_draws_follow_the_weights() {
        let r = route(Strategy::Weighted, &[3, 1]);
        let firsts = (0..4000).filter(|_| weighted(&r)[0].provider == 0).count();
        assert!((2700..3300).contains(&firsts), "{firsts}");
        assert_eq!(weighted(&r).len(), 2);
    }

    #[test]
    fn the_average_moves_toward_new_samples() {
        let l = Latency::default();
        l.observe("a", Duration::from_millis(100));
        l.observe("a", Duration::from_millis(200));
        assert_eq!(l.average("a"), Some(130.0));
        assert_eq!(l.average("b"), None);
    }
}
