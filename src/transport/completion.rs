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
use std::sync::{Arc, Mutex};

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
