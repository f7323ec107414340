//! The targets a window wrote to (or updated atomically) since their last
//! flush, when the provider's flush is an ordered read that can be skipped
//! for clean targets. Ranks below 64 are one bit each in an atomic word;
//! higher ranks go to a mutex-protected set (only those ever touched).
//!
//! Concurrency rule (callers): mark a target *after* posting the operation.
//! Then a flush that finds the bit clear either runs after a flush that
//! cleared it (whose RMW read our mark, so its read was posted after our
//! operation and the provider orders it behind) or the operation was never
//! marked — which cannot happen for an operation posted before this flush by
//! the same thread, since its mark precedes the flush in program order.
//! `take` of a set bit is an RMW, so exactly one flusher owns each mark.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// See the module doc.
#[derive(Default)]
pub struct Dirty {
    low: AtomicU64,
    // Whether `high` may be non-empty (lets `take`/`all` skip its lock).
    any_high: AtomicBool,
    high: Mutex<HashSet<usize>>,
}

impl Dirty {
    /// Records writes to `rank` (after they were posted).
    #[inline]
    pub fn mark(&self, rank: usize) {
        if rank < 64 {
            self.low.fetch_or(1 << rank, Ordering::AcqRel);
        } else if let Ok(mut h) = self.high.lock() {
            h.insert(rank);
            self.any_high.store(true, Ordering::Release);
        }
    }

    /// Clears `rank`; returns whether it was marked (then the caller must
    /// make its writes visible). A poisoned lock answers true (safe side).
    #[inline]
    pub fn take(&self, rank: usize) -> bool {
        if rank < 64 {
            let bit = 1u64 << rank;
            // A clear bit needs no RMW (see the module doc).
            return self.low.load(Ordering::Acquire) & bit != 0
                && self.low.fetch_and(!bit, Ordering::AcqRel) & bit != 0;
        }
        if !self.any_high.load(Ordering::Acquire) {
            return false;
        }
        self.take_high(rank)
    }

    /// [`Dirty::take`] of a rank of 64 or more, through the mutex (out of
    /// line: the flush of a low rank stays a few instructions).
    #[cold]
    #[inline(never)]
    fn take_high(&self, rank: usize) -> bool {
        self.high
            .lock()
            .map(|mut h| h.remove(&rank))
            .unwrap_or(true)
    }

    /// The marked ranks (not clearing them): ranks below 64 as a bit set,
    /// the others listed (no allocation unless such a rank is marked).
    pub fn snapshot(&self) -> (u64, Vec<usize>) {
        let low = self.low.load(Ordering::Acquire);
        let mut high = Vec::new();
        if self.any_high.load(Ordering::Acquire) {
            if let Ok(h) = self.high.lock() {
                high.extend(h.iter().copied());
            }
        }
        (low, high)
    }
}

/// Calls `f` with every rank of a [`Dirty::snapshot`] (or a union of them).
pub fn for_each_rank((mut low, high): (u64, Vec<usize>), mut f: impl FnMut(usize)) {
    while low != 0 {
        f(low.trailing_zeros() as usize);
        low &= low - 1;
    }
    high.into_iter().for_each(f);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mark_take_iterate() {
        let d = Dirty::default();
        assert!(!d.take(3) && !d.take(100));
        for r in [0, 3, 63, 64, 100] {
            d.mark(r);
        }
        d.mark(3);
        let mut seen = Vec::new();
        for_each_rank(d.snapshot(), |r| seen.push(r));
        seen.sort_unstable();
        assert_eq!(seen, vec![0, 3, 63, 64, 100]);
        assert!(d.take(3) && !d.take(3));
        assert!(d.take(100) && !d.take(100));
        assert!(d.take(63) && d.take(0) && d.take(64));
        assert_eq!(d.snapshot(), (0, vec![]));
    }
}
