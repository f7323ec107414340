//! The one way the library waits for something another process does:
//! check, drive progress, back off, and give up at the deadline that
//! `ONESIDED_TIMEOUT` sets — with an error that names what was awaited and
//! from whom.
//!
//! A wait for a store a node-local peer makes into shared memory first
//! checks it in a tight loop for a few µs ([`spin_local`]), where every
//! local rank has a CPU to itself ([`spin_fits`]).
//!
//! Backing off: where every local rank has a CPU of its own
//! ([`spin_fits`]), the caller's checks and progress calls run back to back
//! for `ONESIDED_WAIT_SPIN_US` (50 µs) — the progress call, a read of the
//! completion queue, is the spin; a `pause` between polls would only delay
//! seeing the completion (by ~140 cycles on current x86, and by a trip
//! through the emulator's main loop in the qemu TCG soft-RoCE guest, where
//! `pause` was the hottest instruction of a waiting fetch_and_op) — then
//! the wait yields the core between checks. Where ranks outnumber CPUs, a
//! few busy spins, then yielding, as [`crossbeam_utils::Backoff`] does. A wait that has lasted longer than
//! `ONESIDED_WAIT_SLEEP_AFTER_US` (1 ms) also sleeps between checks, at most
//! 100 µs and an eighth of the time waited so far: a rank idle in a barrier
//! while another works must not keep a core busy with `sched_yield` — on a
//! machine with fewer cores than runnable threads (a laptop, the emulated
//! soft-RoCE guest) that core is what the working rank, its progress agent
//! or the kernel's soft-RoCE threads need. The answer to such a wait comes
//! at most one sleep later (≤ 12.5 % of the wait). Only on back-ends whose
//! one-sided operations need no CPU at the target, with a progress agent
//! that sleeps on the back-end's events (native verbs): under
//! `ONESIDED_PROGRESS=manual`, or where the target's CPU carries the data
//! (libfabric), a waiting rank's polls serve its peers, and it never
//! sleeps. `ONESIDED_TIMEOUT=0`
//! means no deadline: a wait on a peer that died then never ends.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use crate::error::{Error, Result};
use crate::transport::Transport;

/// The application threads now polling a back-end in a long wait, for
/// the progress agent to stand down while they do (`progress`, "Standing
/// down"): the agent parks while any does, and the last one to leave
/// unparks it.
///
/// Invariant: every increment is undone by the [`Polling`] guard that made
/// it, and the guard that brings the count to zero unparks the registered
/// agent after the decrement; an agent that saw a non-zero count and parks
/// later finds the unpark's token (`std::thread::park`), so it never sleeps
/// through the end of the last wait. A stale read costs the agent one
/// park or one poll, never correctness: a poller drives all of the
/// back-end's progress itself.
#[derive(Debug, Default)]
pub struct Pollers {
    count: AtomicUsize,
    agent: std::sync::Mutex<Option<std::thread::Thread>>,
    stand_downs: AtomicU64,
}

impl Pollers {
    /// Whether any thread is polling now.
    #[inline]
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Times the agent stood down (a stretch of parking, counted once).
    pub fn stand_downs(&self) -> u64 {
        self.stand_downs.load(Ordering::Relaxed)
    }

    /// Counts one stand-down of the agent.
    pub(crate) fn count_stand_down(&self) {
        self.stand_downs.fetch_add(1, Ordering::Relaxed);
    }

    /// Registers the agent thread to unpark when the last poller leaves
    /// (`None`: no agent any more).
    pub(crate) fn set_agent(&self, agent: Option<std::thread::Thread>) {
        if let Ok(mut a) = self.agent.lock() {
            *a = agent;
        }
    }
}

/// How long a wait polls before it counts as polling ([`Polling`]): a
/// short wait (an 8-byte operation's round trip) leaves the agent alone,
/// and a wait counted costs one unpark when it ends.
pub(crate) const POLLER_AFTER: Duration = Duration::from_micros(50);

/// Held by a thread while it polls the back-end in a wait that has lasted
/// [`POLLER_AFTER`]; see [`Pollers`].
pub(crate) struct Polling<'p>(&'p Pollers);

impl<'p> Polling<'p> {
    /// Counts the calling thread as polling until the guard drops.
    pub(crate) fn enter(p: &'p Pollers) -> Polling<'p> {
        p.count.fetch_add(1, Ordering::AcqRel);
        Polling(p)
    }
}

impl Drop for Polling<'_> {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Ok(a) = self.0.agent.lock() {
                if let Some(t) = a.as_ref() {
                    t.unpark();
                }
            }
        }
    }
}

/// `ONESIDED_WAIT_SLEEP_AFTER_US` in µs (`u64::MAX`: never sleep); set by
/// `World` from its configuration, read only by waits that already yield.
static SLEEP_AFTER_US: AtomicU64 = AtomicU64::new(1000);

/// A wait reads the clock every this many steps (a clock read is ~280
/// instructions per blocking operation in the emulated soft-RoCE guest,
/// measured with callgrind); the deadline and the naps are that much
/// coarser: at most this many yields or naps late.
const CLOCK_EVERY: u32 = 8;

/// How long a wait polls back to back before it yields, in µs
/// (`ONESIDED_WAIT_SPIN_US` where [`spin_fits`], else 0: the exponential
/// spin of [`Backoff`] instead); set by `World`, process-global as
/// [`SLEEP_AFTER_US`].
static POLL_SPIN_US: AtomicU64 = AtomicU64::new(0);

/// Sets how long every wait of the process polls back to back before it
/// yields between checks (zero: a short exponential spin with `pause`,
/// then yields).
pub(crate) fn poll_spin(d: Duration) {
    let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    POLL_SPIN_US.store(us, Ordering::Relaxed);
}

/// The longest single sleep of a long wait.
const MAX_SLEEP: Duration = Duration::from_micros(100);

/// Sets after how long a wait starts sleeping between checks (`None`:
/// never) for every wait of the process from now on.
pub(crate) fn sleep_after(d: Option<Duration>) {
    let us = d.map_or(u64::MAX, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    SLEEP_AFTER_US.store(us, Ordering::Relaxed);
}

/// How long a wait that has lasted `waited` sleeps before its next check
/// (`None`: it only yields).
fn nap(waited: Duration) -> Option<Duration> {
    let after = SLEEP_AFTER_US.load(Ordering::Relaxed);
    if after == u64::MAX || waited < Duration::from_micros(after) {
        return None;
    }
    Some((waited / 8).min(MAX_SLEEP))
}

thread_local! {
    /// The deadline of the compound wait this thread is inside
    /// ([`within`]): every wait nested in it ends there at the latest.
    static OUTER: std::cell::Cell<Option<Instant>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with every wait of this thread inside it — the transport's
/// waits for each of its operations included — ending `limit` from now at
/// the latest (`None`: no extra bound). A call made of several blocking
/// steps (a lock acquisition polls the lock word with one atomic after
/// another) thus fails within `ONESIDED_TIMEOUT` in all, not one timeout
/// per step: an atomic to a peer that died in the middle of the wait
/// would otherwise wait a whole timeout of its own. Nested calls keep the
/// earlier deadline.
pub(crate) fn within<R>(limit: Option<Duration>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Instant>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OUTER.with(|o| o.set(self.0));
        }
    }
    let prev = OUTER.with(|o| o.get());
    let mine = limit.and_then(|l| Instant::now().checked_add(l));
    let deadline = match (prev, mine) {
        (Some(p), Some(m)) => Some(p.min(m)),
        (p, m) => p.or(m),
    };
    OUTER.with(|o| o.set(deadline));
    let _restore = Restore(prev);
    f()
}

/// Whether this thread is inside [`within`] and its deadline has passed.
pub(crate) fn outer_passed() -> bool {
    OUTER
        .with(|o| o.get())
        .is_some_and(|d| Instant::now() >= d)
}

/// A wait in progress: the start, the deadline and the back-off state.
pub(crate) struct Waiter<'w> {
    /// Read from the clock at the first unsuccessful check, so that a wait
    /// that is over at once costs no clock read.
    start: Option<Instant>,
    /// Time waited as of the last clock read (the clock starts at the
    /// first step and is read every [`CLOCK_EVERY`] steps after it).
    waited: Duration,
    steps: u32,
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
            waited: Duration::ZERO,
            steps: 0,
            limit,
            backoff: Backoff::new(),
            what,
        }
    }

    /// One unsuccessful check: `Err(Timeout)` once the deadline passed,
    /// otherwise backs off and returns `Ok`.
    pub(crate) fn step(&mut self) -> Result<()> {
        let spin = POLL_SPIN_US.load(Ordering::Relaxed);
        if self.limit.is_some() || spin > 0 || self.backoff.is_completed() {
            let read = match self.start {
                // The first step only starts the clock: nothing was waited.
                None => {
                    self.start = Some(Instant::now());
                    true
                }
                Some(start) if self.steps % CLOCK_EVERY == 0 => {
                    self.waited = start.elapsed();
                    true
                }
                Some(_) => false,
            };
            self.steps = self.steps.wrapping_add(1);
            if read && outer_passed() {
                let secs = self.limit.map_or(0, |l| l.as_secs());
                return Err(Error::timeout((self.what)(), secs));
            }
        }
        if let Some(limit) = self.limit {
            if self.waited > limit {
                return Err(Error::timeout((self.what)(), limit.as_secs()));
            }
        }
        if spin > 0 {
            // Back to back: the caller's next check and poll are the spin.
            if self.waited < Duration::from_micros(spin) {
                return Ok(());
            }
            match nap(self.waited) {
                Some(d) => std::thread::sleep(d),
                None => std::thread::yield_now(),
            }
        } else if self.backoff.is_completed() {
            match nap(self.waited) {
                Some(d) => std::thread::sleep(d),
                None => std::thread::yield_now(),
            }
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
    let mut polling = None;
    loop {
        if done()? {
            return Ok(());
        }
        transport.progress()?;
        if polling.is_none() && w.waited >= POLLER_AFTER {
            polling = transport.pollers().map(Polling::enter);
        }
        w.step()?;
    }
}

/// How long [`spin_local`] checks without driving progress or yielding.
const LOCAL_SPIN: Duration = Duration::from_micros(5);

/// Whether [`spin_local`] spins at all; set by `World` from
/// [`spin_fits`] (process-global, as [`SLEEP_AFTER_US`]).
static LOCAL_SPIN_ON: AtomicBool = AtomicBool::new(true);

/// Turns [`spin_local`]'s spin on or off for every wait of the process
/// from now on.
pub(crate) fn local_spin(on: bool) {
    LOCAL_SPIN_ON.store(on, Ordering::Relaxed);
}

/// Whether `local_ranks` processes of the job on this machine can spin
/// without taking a core from one another: each has a core of its own.
/// `binding` is this process's CPU affinity (as many CPUs as its
/// `sched_getaffinity` mask holds), `usable` the CPUs the process may use
/// in all (`available_parallelism`: the affinity mask and cgroup quotas),
/// `online` the machine's online CPUs. A process bound to fewer CPUs than
/// are online was placed by its launcher or user (`taskset`, `mpirun
/// --bind-to core`, Slurm's binding): its spin takes no other rank's core.
/// Otherwise the ranks share the usable CPUs, and spinning where ranks
/// outnumber them delays the rank whose store is awaited (measured:
/// `fence_lat` at 4 ranks on 2 CPUs, 31–43 µs spinning against 18–19 µs
/// without; docs/performance.md).
pub(crate) fn spin_fits(local_ranks: usize, binding: usize, usable: usize, online: usize) -> bool {
    (binding > 0 && binding < online) || local_ranks <= usable.max(1)
}

/// Checks `done` in a tight loop for at most [`LOCAL_SPIN`], without a
/// progress call or a yield between checks; whether it became true. For a
/// word a node-local peer stores into shared memory (a barrier or
/// synchronisation flag): the store shows within ~100 ns of being made,
/// while each progress call costs a system call on socket providers and a
/// yield another, and a wake-up in the middle of either comes that much
/// late.
///
/// # Errors
/// `done`'s.
pub(crate) fn spin_local(mut done: impl FnMut() -> Result<bool>) -> Result<bool> {
    if done()? {
        return Ok(true);
    }
    if !LOCAL_SPIN_ON.load(Ordering::Relaxed) {
        return Ok(false);
    }
    let start = Instant::now();
    let mut checks = 0u32;
    loop {
        std::hint::spin_loop();
        if done()? {
            return Ok(true);
        }
        checks = checks.wrapping_add(1);
        if checks % 64 == 0 && start.elapsed() >= LOCAL_SPIN {
            return Ok(false);
        }
    }
}

/// [`spin_local`], then [`until`]: a wait for a node-local peer's store.
///
/// # Errors
/// As [`until`].
pub(crate) fn until_local(
    transport: &dyn Transport,
    limit: Option<Duration>,
    what: &dyn Fn() -> String,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<()> {
    if spin_local(&mut done)? {
        return Ok(());
    }
    until(transport, limit, what, done)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{within, Waiter};

    /// A wait nested in `within` ends at the outer deadline, long before
    /// its own limit; outside it (and after it) its own limit holds again.
    #[test]
    fn a_nested_wait_ends_at_the_outer_deadline() {
        let what = || "the nested wait".to_string();
        let start = Instant::now();
        let err = within(Some(Duration::from_millis(50)), || {
            // Nested scopes keep the earlier deadline.
            within(Some(Duration::from_secs(3600)), || {
                let mut w = Waiter::new(Some(Duration::from_secs(20)), &what);
                loop {
                    if let Err(e) = w.step() {
                        return e;
                    }
                }
            })
        });
        assert!(err.to_string().contains("the nested wait"), "{err}");
        // Not its own 20 s limit (the deadline is 50 ms; 10 s of slack for
        // a loaded machine).
        assert!(start.elapsed() < Duration::from_secs(10), "ended by its own limit");
        assert!(!super::outer_passed(), "the deadline outlived its scope");
        // Outside: ten steps of an hour-long wait do not time out.
        let mut w = Waiter::new(Some(Duration::from_secs(3600)), &what);
        for _ in 0..10 {
            w.step().expect("no outer deadline any more");
        }
    }

    #[test]
    fn spins_only_where_every_local_rank_has_a_cpu() {
        use super::spin_fits;
        // 2 ranks, 2 CPUs, unbound: spin.
        assert!(spin_fits(2, 2, 2, 2));
        // 4 ranks on 2 CPUs, unbound: no spin.
        assert!(!spin_fits(4, 2, 2, 2));
        // Bound to one CPU of two (taskset, --bind-to core): spin.
        assert!(spin_fits(4, 1, 1, 2));
        // A cgroup quota of 2 CPUs on a 64-CPU machine, 4 ranks: no spin.
        assert!(!spin_fits(4, 64, 2, 64));
        // Affinity unknown (0): decided by the usable CPUs.
        assert!(spin_fits(1, 0, 1, 1));
    }

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
    fn a_wait_polling_back_to_back_still_times_out() {
        poll_spin(Duration::from_millis(5));
        let what = || "waiting for rank 2's reply".to_string();
        let mut w = Waiter::new(Some(Duration::from_millis(20)), &what);
        let mut steps = 0u64;
        let err = loop {
            steps += 1;
            if let Err(e) = w.step() {
                break e;
            }
        };
        poll_spin(Duration::ZERO);
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert!(steps > 1, "{steps}");
    }

    #[test]
    fn a_long_wait_naps_briefly_a_short_one_never() {
        sleep_after(Some(Duration::from_millis(1)));
        assert_eq!(nap(Duration::from_micros(999)), None);
        assert_eq!(nap(Duration::from_micros(1000)), Some(Duration::from_micros(100)));
        assert_eq!(nap(Duration::from_secs(5)), Some(MAX_SLEEP));
        sleep_after(Some(Duration::from_micros(80)));
        assert_eq!(nap(Duration::from_micros(400)), Some(Duration::from_micros(50)));
        sleep_after(None);
        assert_eq!(nap(Duration::from_secs(5)), None);
        sleep_after(Some(Duration::from_millis(1)));
    }

    #[test]
    fn a_local_spin_ends_when_done_gives_up_later_and_passes_errors_on() {
        let mut n = 0;
        let done = spin_local(|| {
            n += 1;
            Ok(n == 100)
        });
        assert!(done.unwrap());
        assert_eq!(n, 100);
        // Never done: gives up (then `until_local` goes on with `until`).
        assert!(!spin_local(|| Ok(false)).unwrap());
        let err = spin_local(|| Err(Error::InvalidArgument("flag unreadable".into())));
        assert!(err.unwrap_err().to_string().contains("flag unreadable"));
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
