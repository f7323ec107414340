//! Summaries of repeated measurements and the iteration plan.

use std::time::Instant;

use serde::Serialize;

/// Median, fastest and slowest of a set of repetitions.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Summary {
    /// Median (mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

/// Summarizes `values` (which must not be empty).
pub fn summarize(values: &[f64]) -> Summary {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Summary {
        median,
        min: v.first().copied().unwrap_or(f64::NAN),
        max: v.last().copied().unwrap_or(f64::NAN),
    }
}

/// Per-iteration times of a measured loop (`--per-iter`): off unless
/// enabled, so a loop of nanosecond operations reads no clock per
/// iteration.
#[derive(Debug, Default)]
pub struct Samples {
    on: bool,
    last: Option<Instant>,
    ns: Vec<u64>,
}

impl Samples {
    /// Records from now on (`on`) or not; forgets what was recorded.
    pub fn reset(&mut self, on: bool) {
        self.on = on;
        self.last = None;
        self.ns.clear();
    }

    /// Marks the start of a measured loop.
    pub fn start(&mut self) {
        if self.on {
            self.last = Some(Instant::now());
        }
    }

    /// Marks the end of one iteration (the start of the next).
    pub fn mark(&mut self) {
        if let Some(prev) = self.last {
            let now = Instant::now();
            self.ns
                .push(u64::try_from((now - prev).as_nanos()).unwrap_or(u64::MAX));
            self.last = Some(now);
        }
    }

    /// Median and 99th percentile of the iterations recorded since the
    /// last reset, in µs per operation (`per_iter` operations per
    /// iteration); `None` when nothing was recorded.
    pub fn percentiles(&self, per_iter: usize) -> Option<(f64, f64)> {
        if self.ns.is_empty() {
            return None;
        }
        let mut v = self.ns.clone();
        v.sort_unstable();
        let at = |q: f64| {
            let i = ((v.len() - 1) as f64 * q).round() as usize;
            v[i.min(v.len() - 1)] as f64 / 1e3 / per_iter.max(1) as f64
        };
        Some((at(0.5), at(0.99)))
    }
}

/// Iterations per repetition: `target / per_iter`, at most `max_iters`, at
/// least 3.
pub fn plan_iters(per_iter_s: f64, target_s: f64, max_iters: u64) -> u64 {
    let want = if per_iter_s > 0.0 {
        (target_s / per_iter_s).floor()
    } else {
        max_iters as f64
    };
    let capped = want.min(max_iters as f64).max(0.0) as u64;
    capped.max(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_even() {
        let s = summarize(&[3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(summarize(&[4.0, 1.0, 2.0, 3.0]).median, 2.5);
    }

    #[test]
    fn samples_give_per_operation_percentiles_only_when_on() {
        let mut s = Samples::default();
        s.start();
        s.mark();
        assert_eq!(s.percentiles(1), None, "off: nothing recorded");
        s.reset(true);
        s.ns.extend([4000, 1000, 3000, 2000, 100_000]);
        let (p50, p99) = s.percentiles(2).unwrap();
        assert_eq!(p50, 1.5);
        assert_eq!(p99, 50.0);
        s.start();
        s.mark();
        assert_eq!(s.ns.len(), 6);
        s.reset(false);
        assert_eq!(s.percentiles(1), None);
    }

    #[test]
    fn iteration_plan_is_clamped() {
        assert_eq!(plan_iters(1e-6, 0.5, 10_000), 10_000);
        assert_eq!(plan_iters(1.0, 0.5, 10_000), 3);
        assert_eq!(plan_iters(0.01, 0.5, 10_000), 50);
        assert_eq!(plan_iters(0.0, 0.5, 7), 7);
    }
}
