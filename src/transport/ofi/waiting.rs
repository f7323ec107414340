//! Waiting for the provider: retrying posts on `-FI_EAGAIN`, waiting for
//! completions, taking staging slots — each while driving progress and
//! bounded by `ONESIDED_TIMEOUT`.

use std::sync::Arc;
use std::time::Instant;

use super::cq;
use super::ops::Held;
use super::fault::{fabric_error, EAGAIN};
use super::{staging, OfiTransport};
use crate::error::{Error, Result};
use crate::transport::Completion;

/// Spins politely: a few busy iterations, then yields the core (ranks are
/// often oversubscribed on small machines).
pub fn backoff(round: &mut u32) {
    *round = round.saturating_add(1);
    if *round < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

fn timed_out(t: &OfiTransport, start: Instant) -> bool {
    t.timeout.is_some_and(|limit| start.elapsed() > limit) || crate::progress::wait::outer_passed()
}

/// Calls `post` until it stops returning `-FI_EAGAIN`. On failure the
/// context (if any) is taken back and counted done.
pub(super) fn post_retry(
    t: &OfiTransport,
    call: &'static str,
    target: usize,
    ctx: *mut std::os::raw::c_void,
    mut post: impl FnMut() -> isize,
) -> Result<()> {
    let start = Instant::now();
    let mut round = 0;
    let fail = |e: Error| {
        // The provider rejected the post: no completion will come for it.
        // (A null context is an inject: nothing to take back, and taking it
        // would count a bogus "rejected completion".)
        if !ctx.is_null() {
            if let Some(c) = t.ops.take(ctx) {
                c.complete();
            }
        }
        Err(e)
    };
    loop {
        let rc = post();
        if rc == 0 {
            return Ok(());
        }
        if rc != EAGAIN {
            return fail(fabric_error(
                call,
                rc,
                format!("posting an operation to rank {target}"),
            ));
        }
        if let Err(e) = cq::drain(t) {
            return fail(e);
        }
        if timed_out(t, start) {
            return fail(Error::timeout(format!(
                    "{call} to rank {target} kept returning FI_EAGAIN (is the peer alive?)"
                ), t.timeout.map(|d| d.as_secs()).unwrap_or(0)).awaiting(target));
        }
        backoff(&mut round);
    }
}

/// Drives progress until `done` has nothing pending.
pub fn wait(t: &OfiTransport, done: &Completion, what: &dyn Fn() -> String) -> Result<()> {
    let start = Instant::now();
    let mut round = 0;
    // Set once the table showed an operation of ours in flight past an
    // enclosing deadline: from then on only our own timeout counts.
    let mut held = false;
    let mut polling = None;
    while done.pending() != 0 {
        t.ensure_alive()?;
        cq::drain(t)?;
        if done.pending() == 0 {
            break;
        }
        let waited = start.elapsed();
        if polling.is_none() && waited >= crate::progress::wait::POLLER_AFTER {
            polling = Some(crate::progress::wait::Polling::enter(&t.pollers));
        }
        let own = t.timeout.is_some_and(|limit| waited > limit);
        if own || (!held && crate::progress::wait::outer_passed()) {
            let secs = t.timeout.map(|d| d.as_secs()).unwrap_or(0);
            // Only what is counted here in software (a reply to an active
            // message, say) can be given up at once: its state is owned
            // by its callback. An operation the provider still holds is
            // waited for up to our own timeout even past an enclosing
            // deadline (`within`: a healthy but loaded target is slow, not
            // gone). Then it is given up (abandoned: its context stays in
            // the table until the provider completes it) if all it touches
            // is kept until it completes — bounce cells, message buffers,
            // a request's buffers — and the provider stays in use for
            // every peer; if it may still read or write memory the caller
            // gets back (a blocking get or put on the caller's buffer),
            // the provider is not used again.
            let (holds, target) = t.ops.held(done);
            // The peer the operations wait for, when they all go to one.
            let naming = |e: Error| match target {
                Some(rank) => e.awaiting(rank),
                None => e,
            };
            held = holds != Held::Nothing;
            if !held {
                return Err(Error::timeout(
                    format!("waiting for {} completion(s) while {}", done.pending(), what()),
                    secs,
                ));
            }
            if own && holds == Held::OwnMemory {
                return Err(naming(Error::timeout(
                    format!(
                        "waiting for {} operation(s) while {} (given up; the provider stays in use)",
                        done.pending(),
                        what()
                    ),
                    secs,
                )));
            }
            if own {
                let msg = format!(
                    "waiting for {} operation(s) while {}; the provider will not be used again",
                    done.pending(),
                    what()
                );
                t.poison(msg.clone());
                return Err(naming(Error::timeout(msg, secs)));
            }
        }
        backoff(&mut round);
    }
    drop(polling);
    done.check(what)
}

/// The trackers an operation counts on: its own and, optionally, a group's
/// (the window's, so that a flush covers request-based operations).
pub(super) struct Trackers<'a> {
    pub(super) done: &'a Arc<Completion>,
    pub(super) group: Option<&'a Arc<Completion>>,
}

impl<'a> Trackers<'a> {
    pub(super) fn own(done: &'a Arc<Completion>) -> Self {
        Trackers { done, group: None }
    }
}

/// Takes a staging slot, driving progress while all are in use.
pub(super) fn acquire<'p>(
    t: &OfiTransport,
    pool: &'p staging::Staging,
) -> Result<staging::Slot<'p>> {
    let start = Instant::now();
    let mut round = 0;
    loop {
        if let Some(s) = pool.try_acquire() {
            return Ok(s);
        }
        cq::drain(t)?;
        if timed_out(t, start) {
            return Err(Error::timeout("waiting for a free staging buffer", t.timeout.map(|d| d.as_secs()).unwrap_or(0)));
        }
        backoff(&mut round);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::super::ops::Insert;
    use super::super::OfiTransport;
    use crate::config::Config;
    use crate::error::Error;
    use crate::progress::wait::within;
    use crate::transport::Completion;

    /// A transport of this process alone on the default provider, with
    /// `timeout` as its own limit.
    fn open(timeout: Duration) -> OfiTransport {
        let mut config = Config::from_env().expect("config");
        config.single_node = true;
        config.timeout = Some(timeout);
        OfiTransport::open(&config).expect("an ofi endpoint")
    }

    /// An enclosing deadline (a lock wait's) ends a wait for a reply that
    /// is counted in software without condemning the provider: the wait
    /// was slow, nothing of the provider's is at stake (the flaky failure
    /// of sync_modes' software-lock variant on a loaded CI machine).
    #[test]
    fn an_enclosing_deadline_ends_a_reply_wait_and_keeps_the_provider() {
        let t = open(Duration::from_secs(30));
        let done = Completion::new();
        done.add();
        let start = Instant::now();
        let r = within(Some(Duration::from_millis(20)), || {
            super::wait(&t, &done, &|| "a reply that never comes".into())
        });
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(t.ensure_alive().is_ok(), "the provider must stay usable");
        // Past our own timeout too: a missing reply is the peer's failure,
        // not the provider's.
        let t = open(Duration::from_millis(50));
        let r = super::wait(&t, &done, &|| "a reply that never comes".into());
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
        assert!(t.ensure_alive().is_ok(), "the provider must stay usable");
    }

    /// An operation the provider holds is waited for up to our own timeout
    /// even past an enclosing deadline (it may still write into its
    /// buffers), and only then is the provider given up.
    #[test]
    fn an_operation_in_flight_outlives_an_enclosing_deadline() {
        let own = Duration::from_millis(300);
        let t = open(own);
        let done = Arc::new(Completion::new());
        done.add();
        // An entry the provider never completes (never posted).
        let op = super::super::ops::tests::op(&done);
        assert!(matches!(t.ops.try_insert(op), Insert::Token(_)));
        let start = Instant::now();
        let r = within(Some(Duration::from_millis(10)), || {
            super::wait(&t, &done, &|| "an operation in flight".into())
        });
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
        assert!(start.elapsed() >= own, "ended at the enclosing deadline");
        assert!(t.ensure_alive().is_err(), "the provider must be given up");
    }

    /// An operation the provider holds that touches only memory kept until
    /// it completes (a bounce cell, a request's buffer) is given up at our
    /// timeout and the provider stays in use: the next operation, to any
    /// peer, still works (a stopped or unreachable peer costs a timeout,
    /// not the transport). Its context stays in the table until the
    /// provider completes it.
    #[test]
    fn an_operation_on_its_own_memory_is_abandoned_not_the_provider() {
        let own = Duration::from_millis(100);
        let t = open(own);
        let done = Arc::new(Completion::new());
        done.add();
        let mut op = super::super::ops::tests::op(&done);
        op.uses_caller = false;
        let Insert::Token(token) = t.ops.try_insert(op) else {
            panic!("no slot");
        };
        let r = super::wait(&t, &done, &|| "a read into a bounce cell".into());
        let Err(Error::Timeout { what, .. }) = &r else {
            panic!("{r:?}");
        };
        assert!(what.contains("the provider stays in use"), "{what}");
        assert!(t.ensure_alive().is_ok(), "the provider must stay usable");
        // Still tracked: a late completion finds its context.
        assert!(t.ops.take(token).is_some());
        // With one that uses the caller's memory beside it: given up.
        let done = Arc::new(Completion::new());
        done.add();
        done.add();
        let mut mine = super::super::ops::tests::op(&done);
        mine.uses_caller = false;
        assert!(matches!(t.ops.try_insert(mine), Insert::Token(_)));
        assert!(matches!(
            t.ops.try_insert(super::super::ops::tests::op(&done)),
            Insert::Token(_)
        ));
        let r = super::wait(&t, &done, &|| "a get into the caller's buffer".into());
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
        assert!(t.ensure_alive().is_err(), "the provider must be given up");
    }
}
