//! The asynchronous progress agent.
//!
//! With `FI_PROGRESS_MANUAL` providers (tcp, shm, sockets here) an origin's
//! operation advances only while the *target* process calls into libfabric.
//! A target busy computing would block every origin, so each process runs an
//! agent thread that reads the completion queue (`ONESIDED_PROGRESS=thread`,
//! the default). `ONESIDED_PROGRESS=manual` leaves progress to the library
//! calls of the application thread.
//!
//! How an idle agent waits depends on the back-end:
//!
//! * **Sleeping on event sources** (the back-end has
//!   [`Transport::event_fds`]; tcp and verbs through `ofi_rxm`): after
//!   [`HOT_POLLS`] empty polls the agent re-arms the back-end's
//!   notifications ([`Transport::arm`]) and sleeps in `poll(2)` on the
//!   back-end's descriptors and its own stop eventfd. The descriptors wake
//!   on a completion *or* on bytes arriving on any connection — so incoming
//!   RMA, which produces no completion at the target, is served within a
//!   wake-up (microseconds) and an idle process sleeps in the kernel. The
//!   sleep is bounded by [`IDLE_BLOCK`] only as a safety net.
//! * **Polling** (no event sources; net, shm, sockets): it yields, then
//!   sleeps with a growing interval capped at [`MAX_SLEEP`] — and, once it
//!   has served nothing for [`LONG_IDLE`], at the idle sleep
//!   (`ONESIDED_PROGRESS_IDLE_US`; by default also 200 µs). Measured on net
//!   (`examples/busy_target.rs`, 3 alternating runs): 200 µs costs an idle
//!   process 7-10 % of a core, 2 ms 1.2-2.0 %; a stream of operations keeps
//!   the agent under the short cap either way (8-13 µs per put+flush), but
//!   the first put+flush after a 30 ms pause to a target computing outside
//!   the library takes 0.4-0.55 ms with 200 µs and 1.6-1.7 ms with 2 ms. A
//!   job whose processes mostly compute may choose the longer sleep.
//!
//! Standing down: an agent confined to the one CPU an application thread
//! is bound to (`taskset -c 3`, a launcher's rank-per-core binding, with
//! no free core for the agent) takes turns with that thread whenever both
//! poll: each turn is two context switches, and every wake-up of the agent
//! preempts the thread. So while an application thread has been polling
//! the back-end in a wait for [`wait::POLLER_AFTER`] (a long transfer, a
//! barrier; [`Transport::pollers`], libfabric back-ends) the agent parks
//! instead, and the last such wait unparks it as it ends: the thread's
//! polls serve everything the agent's would. Measured on net, ranks bound
//! one per CPU, 8 interleaved rounds (docs/performance.md, "net 1 MiB
//! get: the agent beside a bound rank"): a 1 MiB get 346 → 212 µs
//! (median; `fi_rma_raw` 172), 8-byte operations within their spread.
//! Unbound processes keep the agent polling beside the thread: there it
//! has a CPU of its own, and an earlier variant that stood down there too
//! made an 8-byte put + flush slower (16.9 → 20.5 µs, median of 8 rounds).
//!
//! Placement: the agent thread is named `onesided-agent` (visible in `top
//! -H`, `/proc/<pid>/task/<tid>/comm`) and pins itself, before its first
//! poll, to the CPUs [`crate::topology::agent_placement`] chose from
//! `ONESIDED_PROGRESS_CPU` (a failed pin is logged and the agent runs
//! unpinned).
//!
//! Invariant: the agent only reads completions; all state it touches is the
//! completion counters (atomics) of operations that are in flight. Threads
//! waiting in library calls read the CQ themselves, so a blocked agent never
//! delays them (the domain is `FI_THREAD_SAFE`; a blocking read holds no
//! lock while it sleeps).

pub mod wait;

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::transport::{SharedTransport, Transport};

/// Longest sleep of a polling agent that served something within
/// [`LONG_IDLE`].
pub const MAX_SLEEP: Duration = Duration::from_micros(200);
/// Idle time after which a polling agent sleeps longer than
/// [`MAX_SLEEP`], up to its idle sleep (`ONESIDED_PROGRESS_IDLE_US`).
pub const LONG_IDLE: Duration = Duration::from_millis(20);
/// Idle polls answered by yielding before a polling agent starts to sleep.
const YIELD_POLLS: u32 = 200;
/// Empty polls before an agent with event sources sleeps on them.
pub const HOT_POLLS: u32 = 8;
/// Longest single sleep of an idle agent on event sources (a safety net:
/// wake-ups come from the back-end's descriptors).
pub const IDLE_BLOCK: Duration = Duration::from_millis(10);

/// A running progress thread; stopped and joined on drop.
pub struct ProgressAgent {
    stop: Arc<AtomicBool>,
    wake: Arc<EventFd>,
    handle: Option<JoinHandle<()>>,
}

impl ProgressAgent {
    /// The agent thread's name (15 characters: the kernel's `comm` limit).
    pub const THREAD_NAME: &'static str = "onesided-agent";

    /// Starts the agent for `transport`, pinned to `cpus` when given;
    /// `stand_down`: it parks while an application thread polls the
    /// back-end in a long wait (see the module documentation) — for an
    /// agent that shares its one CPU with the application.
    pub fn start(
        transport: SharedTransport,
        cpus: Option<Vec<usize>>,
        idle_sleep: Duration,
        stand_down: bool,
    ) -> std::io::Result<ProgressAgent> {
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(
            EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
                .map_err(std::io::Error::from)?,
        );
        let (flag, w) = (stop.clone(), wake.clone());
        // The agent is named and placed when `start` returns.
        let (placed_tx, placed) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name(Self::THREAD_NAME.into())
            .spawn(move || {
                if let Some(cpus) = cpus {
                    if let Err(e) = crate::topology::pin_current_thread(&cpus) {
                        tracing::warn!("progress agent stays unpinned: {e}");
                    }
                }
                let pollers = transport.pollers().filter(|_| stand_down);
                if let Some(p) = pollers {
                    p.set_agent(Some(std::thread::current()));
                }
                let _ = placed_tx.send(());
                run(transport.as_ref(), &flag, &w, idle_sleep.max(MAX_SLEEP), stand_down);
                if let Some(p) = pollers {
                    p.set_agent(None);
                }
            })?;
        // An error only if the thread died before placing itself.
        let _ = placed.recv();
        Ok(ProgressAgent {
            stop,
            wake,
            handle: Some(handle),
        })
    }
}

/// Sleeps until one of the back-end's descriptors or `wake` is readable,
/// or [`IDLE_BLOCK`] passed. `false`: the back-end offers no descriptor.
fn sleep_on_events(transport: &dyn Transport, wake: &EventFd) -> crate::error::Result<bool> {
    let fds = transport.event_fds();
    if fds.is_empty() {
        return Ok(false);
    }
    if !transport.arm()? {
        // Work arrived between the last poll and the arming.
        return Ok(true);
    }
    let mut set: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    set.push(PollFd::new(wake.as_fd(), PollFlags::POLLIN));
    let ms = u16::try_from(IDLE_BLOCK.as_millis()).unwrap_or(u16::MAX);
    match nix::poll::poll(&mut set, PollTimeout::from(ms)) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(true),
        Err(e) => Err(crate::error::Error::io(
            "progress agent: poll on the back-end's event sources",
            e.into(),
        )),
    }
}

fn run(transport: &dyn Transport, stop: &AtomicBool, wake: &EventFd, idle_sleep: Duration, stand_down: bool) {
    let mut idle: u32 = 0;
    let mut sleep = Duration::from_micros(5);
    let mut can_block = true;
    let mut served_at = std::time::Instant::now();
    let pollers = transport.pollers().filter(|_| stand_down);
    let mut parked = false;
    while !stop.load(Ordering::Acquire) {
        if let Some(p) = pollers.filter(|p| p.any()) {
            // An application thread polls the back-end in a long wait: its
            // polls serve everything ours would. Ours would only take
            // turns with it on the provider's lock and, on a shared CPU,
            // cost two context switches per turn: park until the last
            // such wait ends (it unparks us; the timeout is a safety net).
            if !parked {
                p.count_stand_down();
                parked = true;
            }
            std::thread::park_timeout(IDLE_BLOCK);
            continue;
        }
        parked = false;
        let served = match transport.progress() {
            Ok(0) if can_block && idle >= HOT_POLLS => match sleep_on_events(transport, wake) {
                Ok(true) => transport.progress(),
                Ok(false) => {
                    can_block = false;
                    Ok(0)
                }
                Err(e) => Err(e),
            },
            other => other,
        };
        match served {
            Ok(0) => {
                idle = idle.saturating_add(1);
                if can_block || idle < YIELD_POLLS {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(sleep);
                    let cap = if served_at.elapsed() > LONG_IDLE {
                        idle_sleep
                    } else {
                        MAX_SLEEP
                    };
                    sleep = (sleep * 2).min(cap);
                }
            }
            Ok(_) => {
                idle = 0;
                sleep = Duration::from_micros(5);
                served_at = std::time::Instant::now();
            }
            Err(e) => {
                tracing::warn!("progress agent stops: {e}");
                return;
            }
        }
    }
}

impl Drop for ProgressAgent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Err(e) = self.wake.arm() {
            tracing::warn!("waking the progress agent to stop it: {e}");
        }
        if let Some(h) = self.handle.take() {
            // A standing-down agent parks instead of polling the eventfd.
            h.thread().unpark();
            if h.join().is_err() {
                tracing::warn!("progress agent panicked");
            }
        }
    }
}
