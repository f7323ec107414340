//! Summaries of repeated measurements and the iteration plan.

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
    fn iteration_plan_is_clamped() {
        assert_eq!(plan_iters(1e-6, 0.5, 10_000), 10_000);
        assert_eq!(plan_iters(1.0, 0.5, 10_000), 3);
        assert_eq!(plan_iters(0.01, 0.5, 10_000), 50);
        assert_eq!(plan_iters(0.0, 0.5, 7), 7);
    }
}
