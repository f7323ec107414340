//! Waiting for the provider: retrying posts on `-FI_EAGAIN`, waiting for
//! completions, taking staging slots — each while driving progress and
//! bounded by `ONESIDED_TIMEOUT`.

use std::sync::Arc;
use std::time::Instant;

use super::cq;
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
    while done.pending() != 0 {
        t.ensure_alive()?;
        cq::drain(t)?;
        if done.pending() == 0 {
            break;
        }
        if timed_out(t, start) {
            let msg = format!(
                "waiting for {} operation(s) while {}; the provider will not be used again",
                done.pending(),
                what()
            );
            t.poison(msg.clone());
            return Err(Error::timeout(msg, t.timeout.map(|d| d.as_secs()).unwrap_or(0)));
        }
        backoff(&mut round);
    }
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
