//! The one way the library waits for something another process does:
//! check, drive progress, back off, and give up at the deadline that
//! `ONESIDED_TIMEOUT` sets — with an error that names what was awaited and
//! from whom.
//!
//! Backing off: a few busy spins (an answer from a node-local peer or the
//! progress agent usually arrives within them), then yielding the core
//! (ranks often outnumber cores on small machines), as
//! [`crossbeam_utils::Backoff`] does. `ONESIDED_TIMEOUT=0` means no deadline:
//! a wait on a peer that died then never ends.

use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use crate::error::{Error, Result};
use crate::transport::Transport;

/// A wait in progress: the start, the deadline and the back-off state.
pub(crate) struct Waiter<'w> {
    /// Read from the clock at the first unsuccessful check, so that a wait
    /// that is over at once costs no clock read.
    start: Option<Instant>,
    limit: Option<Duration>,
    backoff: Backoff,
    what: &'w dyn Fn() -> String,
}

impl<'w> Waiter<'w> {
    /// Starts waiting; `what` describes the wait for the timeout error
    /// (built only if it is needed).
    pub(crate) fn new(limit: Option<Duration>, what: &'w dyn Fn() -> String) -> Self {
        Waiter {
            start: None,
            limit,
            backoff: Backoff::new(),
            what,
        }
    }

    /// One unsuccessful check: `Err(Timeout)` once the deadline passed,
    /// otherwise backs off and returns `Ok`.
    pub(crate) fn step(&mut self) -> Result<()> {
        if let Some(limit) = self.limit {
            let start = *self.start.get_or_insert_with(Instant::now);
            if start.elapsed() > limit {
                return Err(Error::timeout((self.what)(), limit.as_secs()));
            }
        }
        if self.backoff.is_completed() {
            std::thread::yield_now();
        } else {
            self.backoff.snooze();
        }
        Ok(())
    }
}

/// Drives `transport` until `done` returns `Ok(true)`, bounded by `limit`.
///
/// # Errors
/// `done`'s or the transport's error, or [`Error::Timeout`] naming `what`.
pub(crate) fn until(
    transport: &dyn Transport,
    limit: Option<Duration>,
    what: &dyn Fn() -> String,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let mut w = Waiter::new(limit, what);
    loop {
        if done()? {
            return Ok(());
        }
        transport.progress()?;
        w.step()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_that_never_ends_times_out_naming_what() {
        let what = || "waiting for rank 3's flag".to_string();
        let mut w = Waiter::new(Some(Duration::from_millis(20)), &what);
        let err = loop {
            if let Err(e) = w.step() {
                break e;
            }
        };
        let text = err.to_string();
        assert!(matches!(err, Error::Timeout { .. }), "{text}");
        assert!(text.contains("rank 3"), "{text}");
    }

    #[test]
    fn no_limit_means_no_timeout() {
        let what = String::new;
        let mut w = Waiter::new(None, &what);
        for _ in 0..1000 {
            w.step().unwrap();
        }
    }
}
