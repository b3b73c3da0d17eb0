//! What a load run measured ([`Outcome`]: the latency and time-to-first-byte
//! histograms, requests, errors, bytes) and, for a run measured in windows,
//! each load's outcome per window as the workers add them ([`Windows`]).

use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Error samples kept per run.
const MAX_ERROR_SAMPLES: usize = 5;

/// What a run measured.
#[derive(Debug)]
pub struct Outcome {
    /// Latencies of successful measured requests (ns).
    pub hist: Histogram<u64>,
    /// Times to the first byte of the answer's body (ns).
    pub ttfb: Histogram<u64>,
    /// Successful measured requests.
    pub ok: u64,
    /// Failed requests (warm-up included).
    pub errors: u64,
    /// The first few error messages.
    pub error_samples: Vec<String>,
    /// From the start of the measurement to the end of its last request.
    pub elapsed: Duration,
    /// Response body bytes read in the measurement.
    pub bytes: u64,
}

impl Outcome {
    /// Nothing measured yet.
    pub fn empty() -> Outcome {
        Outcome {
            hist: new_histogram(),
            ttfb: new_histogram(),
            ok: 0,
            errors: 0,
            error_samples: Vec::new(),
            elapsed: Duration::ZERO,
            bytes: 0,
        }
    }

    /// Counts a failed request, keeping its message among the first few.
    pub(crate) fn error(&mut self, msg: String) {
        self.errors += 1;
        if self.error_samples.len() < MAX_ERROR_SAMPLES {
            self.error_samples.push(msg);
        }
    }

    /// Adds `o`'s requests, errors and histograms to these.
    fn merge(&mut self, o: &Outcome) {
        let _ = self.hist.add(&o.hist);
        let _ = self.ttfb.add(&o.ttfb);
        self.ok += o.ok;
        self.bytes += o.bytes;
        self.errors += o.errors;
        for m in &o.error_samples {
            if self.error_samples.len() < MAX_ERROR_SAMPLES {
                self.error_samples.push(m.clone());
            }
        }
    }

    /// Back to nothing measured, keeping the histograms' memory.
    pub(crate) fn clear(&mut self) {
        self.hist.reset();
        self.ttfb.reset();
        (self.ok, self.errors, self.bytes) = (0, 0, 0);
        self.error_samples.clear();
        self.elapsed = Duration::ZERO;
    }

    /// Successful requests per second.
    pub fn rps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.ok as f64 / s
        } else {
            0.0
        }
    }
}

/// A latency histogram: 1 µs to 10 min, in ns, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1_000, 600_000_000_000, 3).expect("valid histogram bounds")
}

/// What a windowed run measured so far, per load and window. A worker adds
/// its figures of a window when it sends its first request of the next one
/// (or stops): a window is complete once the next one is a request's
/// latency old.
pub struct Windows {
    loads: Vec<Mutex<Vec<Outcome>>>,
}

impl Windows {
    pub(crate) fn new(loads: usize) -> Windows {
        Windows {
            loads: (0..loads).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    /// Runs `f` on the outcomes of load `load`, locked (padded to `window`).
    pub(crate) fn with<T>(
        &self,
        load: usize,
        window: usize,
        f: impl FnOnce(&mut Outcome) -> T,
    ) -> T {
        let mut w = self.loads[load]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while w.len() <= window {
            w.push(Outcome::empty());
        }
        f(&mut w[window])
    }

    /// Adds `o` to window `window` of load `load`.
    pub(crate) fn add(&self, load: usize, window: usize, o: &Outcome) {
        self.with(load, window, |w| w.merge(o));
    }

    /// What window `window` of load `load` holds so far.
    pub fn peek<T>(&self, load: usize, window: usize, f: impl FnOnce(&Outcome) -> T) -> T {
        self.with(load, window, |w| f(w))
    }

    /// Every load's windows (`ends`: when each window ended, from the start
    /// of the measurement), their elapsed times set.
    pub(crate) fn take(&self, ends: &[Duration]) -> Vec<Vec<Outcome>> {
        let mut out = Vec::new();
        for load in 0..self.loads.len() {
            let mut windows = Vec::new();
            let mut from = Duration::ZERO;
            for (k, &end) in ends.iter().enumerate() {
                let mut o = self.with(load, k, |w| std::mem::replace(w, Outcome::empty()));
                o.elapsed = end.saturating_sub(from);
                from = end;
                windows.push(o);
            }
            out.push(windows);
        }
        out
    }
}
