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
//! * **Blocking** ([`Transport::idle_wait`] supported; tcp and verbs through
//!   `ofi_rxm`): after [`HOT_POLLS`] empty polls the agent blocks on the
//!   provider's wait object, which wakes on a completion *or* on bytes
//!   arriving on any connection — so incoming RMA, which produces no
//!   completion at the target, is served within a wake-up (microseconds) and
//!   an idle process sleeps in the kernel. The block is bounded by
//!   [`IDLE_BLOCK`] only as a safety net.
//! * **Polling** (no suitable wait object; shm, sockets): it yields, then
//!   sleeps with a growing interval capped at [`MAX_SLEEP`].
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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::transport::{SharedTransport, Transport};

/// Longest sleep of an idle polling agent.
pub const MAX_SLEEP: Duration = Duration::from_micros(200);
/// Idle polls answered by yielding before a polling agent starts to sleep.
const YIELD_POLLS: u32 = 200;
/// Empty polls before a blocking agent blocks.
pub const HOT_POLLS: u32 = 8;
/// Longest single block of an idle blocking agent (a safety net: wake-ups
/// come from the provider's wait object).
pub const IDLE_BLOCK: Duration = Duration::from_millis(10);

/// A running progress thread; stopped and joined on drop.
pub struct ProgressAgent {
    stop: Arc<AtomicBool>,
    transport: SharedTransport,
    handle: Option<JoinHandle<()>>,
}

impl ProgressAgent {
    /// The agent thread's name (15 characters: the kernel's `comm` limit).
    pub const THREAD_NAME: &'static str = "onesided-agent";

    /// Starts the agent for `transport`, pinned to `cpus` when given.
    pub fn start(
        transport: SharedTransport,
        cpus: Option<Vec<usize>>,
    ) -> std::io::Result<ProgressAgent> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let t = transport.clone();
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
                let _ = placed_tx.send(());
                run(t.as_ref(), &flag)
            })?;
        // An error only if the thread died before placing itself.
        let _ = placed.recv();
        Ok(ProgressAgent {
            stop,
            transport,
            handle: Some(handle),
        })
    }
}

fn run(transport: &dyn Transport, stop: &AtomicBool) {
    let mut idle: u32 = 0;
    let mut sleep = Duration::from_micros(5);
    let mut can_block = true;
    while !stop.load(Ordering::Acquire) {
        let served = match transport.progress() {
            Ok(0) if can_block && idle >= HOT_POLLS => match transport.idle_wait(IDLE_BLOCK) {
                Ok(Some(n)) => Ok(n),
                Ok(None) => {
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
                    sleep = (sleep * 2).min(MAX_SLEEP);
                }
            }
            Ok(_) => {
                idle = 0;
                sleep = Duration::from_micros(5);
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
        self.transport.interrupt_idle_wait();
        if let Some(h) = self.handle.take() {
            if h.join().is_err() {
                tracing::warn!("progress agent panicked");
            }
        }
    }
}
