//! Completion counting shared between the code that issues operations and
//! the progress engine that reads completion queues.
//!
//! Invariant: `pending` counts operations handed to the provider whose
//! completion (success or error) has not been processed yet. It is
//! incremented before the post and decremented exactly once per operation by
//! the CQ reader (or by the poster itself when the post fails). Whoever waits
//! for `pending == 0` then reads the first error recorded, if any.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::cell::Cell;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::error::Error;

thread_local! {
    /// This thread's tracker for its blocking operations, reused while no
    /// operation holds it, so that a blocking put/get/atomic allocates
    /// nothing.
    static SPARE: Cell<Option<Arc<Completion>>> = const { Cell::new(None) };
}

/// Runs `f` with a tracker of this thread's own (see [`SPARE`]); `f` must
/// wait for every operation it counts on it.
pub(crate) fn with_own<R>(f: impl FnOnce(&Arc<Completion>) -> R) -> R {
    let mut done = SPARE
        .with(|s| s.take())
        .unwrap_or_else(|| Arc::new(Completion::new()));
    let r = f(&done);
    if done.pending() == 0 {
        // Every operation completed; the threads that counted them drop
        // their references right after counting. `get_mut` checks
        // uniqueness with the needed memory ordering. If an operation is
        // still in flight (a timed-out wait) the tracker is left to it.
        let mut round = 0;
        while Arc::get_mut(&mut done).is_none() && round < SPARE_WAIT_ROUNDS {
            round += 1;
            if round < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        if Arc::get_mut(&mut done).is_some() {
            done.take_error();
            SPARE.with(|s| s.set(Some(done)));
        }
    }
    r
}

/// How long [`with_own`] waits for a completing thread to drop its
/// reference before it gives the tracker up.
const SPARE_WAIT_ROUNDS: u32 = 1000;

/// Tracks a set of operations until they complete.
#[derive(Default, Debug)]
pub struct Completion {
    pending: AtomicUsize,
    /// An error is recorded: lets `take_error` skip the lock when none is.
    failed: AtomicBool,
    error: Mutex<Option<Recorded>>,
}

/// The first error recorded on a [`Completion`].
#[derive(Debug)]
struct Recorded {
    message: String,
    /// The peer the failed operation went to, when the failure says the
    /// peer is gone (its connection was refused, reset or closed).
    gone: Option<usize>,
}

impl Completion {
    /// A tracker with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of operations not completed yet.
    #[inline]
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }
    /// Called before an operation is posted.
    pub fn add(&self) {
        self.pending.fetch_add(1, Ordering::AcqRel);
    }
    /// Called once per posted operation when its completion arrives, or when
    /// its post failed.
    pub fn done(&self) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }
    /// Records an error completion (the first one wins) and counts it done.
    pub fn failed(&self, message: String) {
        self.record(Recorded {
            message,
            gone: None,
        });
    }
    /// As [`Completion::failed`], for an operation that failed because
    /// peer `rank` is gone or unreachable.
    pub fn peer_gone(&self, rank: usize, message: String) {
        self.record(Recorded {
            message,
            gone: Some(rank),
        });
    }
    fn record(&self, r: Recorded) {
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert(r);
        }
        self.failed.store(true, Ordering::Release);
        self.done();
    }
    /// Nothing pending and no error recorded: a wait would return `Ok`
    /// at once (lets callers skip it on the fast path).
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.pending() == 0 && !self.failed.load(Ordering::Acquire)
    }
    /// Takes the first recorded error's text, if any.
    pub fn take_error(&self) -> Option<String> {
        self.take().map(|r| r.message)
    }
    fn take(&self) -> Option<Recorded> {
        // A load first: the common case (no error) needs no RMW.
        if !self.failed.load(Ordering::Acquire) || !self.failed.swap(false, Ordering::AcqRel) {
            return None;
        }
        self.error.lock().ok().and_then(|mut e| e.take())
    }
    /// `Ok` if no error was recorded, otherwise a transport error naming
    /// `what` ([`Error::PeerUnreachable`] when the peer is gone).
    #[inline]
    pub fn check(&self, what: impl FnOnce() -> String) -> Result<(), Error> {
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.check_slow(what)
    }

    #[cold]
    fn check_slow(&self, what: impl FnOnce() -> String) -> Result<(), Error> {
        match self.take() {
            None => Ok(()),
            Some(Recorded {
                message,
                gone: Some(rank),
            }) => Err(Error::peer_unreachable(rank, what(), message)),
            Some(Recorded { message, .. }) => {
                Err(Error::backend("transport", "completion", what(), 0, message))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Per target
//
// A window's request-based operations, and the acknowledgements of its
// aggregated batches, are counted per target: `flush(rank)`,
// `flush_local(rank)` and `unlock(rank)` complete the operations to `rank`
// alone (MPI_Win_flush), so an operation to another target that is slow,
// or that a stopped or unreachable peer keeps from ever completing, holds
// up only the synchronization calls that cover that target. (With one
// tracker per window, one operation given up on a stopped peer made every
// later flush of the window time out.)
//
// Invariants:
// - A tracker exists only for a target operations were counted for
//   (nothing for targets never contacted).
// - A slot keeps its position once created: `PerTarget::each_busy` visits
//   every slot once by index while operations are issued concurrently.
//   Beyond `KEEP` slots, a new target takes over a slot whose tracker is
//   idle and referred to by nothing else (no operation can count on it
//   any more), so the table stays bounded by the targets with operations
//   in flight.

/// Slots kept before idle ones are taken over by new targets.
const KEEP: usize = 64;

/// Trackers of operations counted per target (module docs: "Per target").
#[derive(Default)]
pub struct PerTarget {
    slots: Mutex<Vec<(usize, Arc<Completion>)>>,
    /// A tracker was handed out: until then every query answers at once
    /// without the lock (a window whose operations are all blocking or
    /// direct never takes it).
    used: AtomicBool,
}

impl PerTarget {
    fn slots(&self) -> MutexGuard<'_, Vec<(usize, Arc<Completion>)>> {
        // The table is consistent after any panic (plain pushes and
        // assignments): a poisoned lock is still usable.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tracker operations to `rank` count on.
    pub fn to(&self, rank: usize) -> Arc<Completion> {
        let mut slots = self.slots();
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Release);
        }
        if let Some((_, c)) = slots.iter().find(|(r, _)| *r == rank) {
            return c.clone();
        }
        if slots.len() >= KEEP {
            // Only this table refers to an idle, unshared tracker: no
            // operation counts on it, none can start to (that takes this
            // lock), and it has no error to report.
            if let Some(slot) = slots
                .iter_mut()
                .find(|(_, c)| c.is_idle() && Arc::strong_count(c) == 1)
            {
                slot.0 = rank;
                return slot.1.clone();
            }
        }
        let c = Arc::new(Completion::new());
        slots.push((rank, c.clone()));
        c
    }

    /// Operations to `rank` (or to any target) not completed yet.
    #[inline]
    pub fn pending(&self, rank: Option<usize>) -> usize {
        if !self.used.load(Ordering::Acquire) {
            return 0;
        }
        self.pending_in_slots(rank)
    }

    #[inline(never)]
    fn pending_in_slots(&self, rank: Option<usize>) -> usize {
        self.slots()
            .iter()
            .filter(|(r, _)| rank.is_none_or(|want| want == *r))
            .map(|(_, c)| c.pending())
            .sum()
    }

    /// Nothing pending and no error to report, for any target.
    pub fn is_idle(&self) -> bool {
        !self.used.load(Ordering::Acquire) || self.slots().iter().all(|(_, c)| c.is_idle())
    }

    /// Calls `f` once with each tracker of `rank` (or of every target) that
    /// has operations in flight or an error to report, in slot order, and
    /// stops at the first error. The lock is not held while `f` runs:
    /// other threads keep issuing.
    #[inline]
    pub fn each_busy(
        &self,
        rank: Option<usize>,
        f: impl FnMut(usize, &Completion) -> Result<(), Error>,
    ) -> Result<(), Error> {
        // Inline: a window that never used a request costs one load.
        if !self.used.load(Ordering::Acquire) {
            return Ok(());
        }
        self.each_busy_slot(rank, f)
    }

    #[inline(never)]
    fn each_busy_slot(
        &self,
        rank: Option<usize>,
        mut f: impl FnMut(usize, &Completion) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let wanted = |r: usize, c: &Completion| rank.is_none_or(|want| want == r) && !c.is_idle();
        // The first slot to wait for, in one pass (none: the common case).
        let Some(mut i) = self.slots().iter().position(|(r, c)| wanted(*r, c)) else {
            return Ok(());
        };
        loop {
            let (r, c) = match self.slots().get(i) {
                None => return Ok(()),
                Some((r, c)) => (*r, c.clone()),
            };
            i += 1;
            if wanted(r, &c) {
                f(r, &c)?;
            }
        }
    }
}

#[cfg(test)]
mod per_target_tests {
    use super::*;

    #[test]
    fn each_target_has_its_own_tracker() {
        let o = PerTarget::default();
        let a = o.to(3);
        let b = o.to(7);
        assert!(Arc::ptr_eq(&a, &o.to(3)));
        a.add();
        a.add();
        b.add();
        assert_eq!(o.pending(Some(3)), 2);
        assert_eq!(o.pending(Some(7)), 1);
        assert_eq!(o.pending(Some(5)), 0);
        assert_eq!(o.pending(None), 3);
        let mut seen = Vec::new();
        o.each_busy(Some(7), |r, _| {
            seen.push(r);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [7]);
        seen.clear();
        o.each_busy(None, |r, _| {
            seen.push(r);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [3, 7]);
        // An error recorded on an idle tracker is still reported.
        b.failed("lost".into());
        a.done();
        a.done();
        seen.clear();
        o.each_busy(None, |r, _| {
            seen.push(r);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [7]);
    }

    #[test]
    fn idle_unshared_slots_are_taken_over_past_the_bound() {
        let o = PerTarget::default();
        let held: Vec<_> = (0..KEEP).map(|r| o.to(r)).collect();
        // Every slot shared (operations could count on it): a new one.
        let extra = o.to(1000);
        assert_eq!(o.slots().len(), KEEP + 1);
        drop(extra);
        // Slot of target 1000 is idle and unshared: target 2000 takes it.
        let again = o.to(2000);
        assert_eq!(o.slots().len(), KEEP + 1);
        assert!(o.slots().iter().all(|(r, _)| *r != 1000));
        // A busy tracker is never taken over even when unshared.
        again.add();
        drop(again);
        let _third = o.to(3000);
        assert_eq!(o.slots().len(), KEEP + 2);
        assert_eq!(o.pending(Some(2000)), 1);
        drop(held);
    }
}
