//! The asynchronous progress agent.
//!
//! With `FI_PROGRESS_MANUAL` providers (tcp, shm, sockets here) an origin's
//! operation advances only while the *target* process calls into libfabric.
//! A target busy computing would block every origin, so each process runs an
//! agent thread that reads the completion queue (`ONESIDED_PROGRESS=thread`,
//! the default). It spins briefly after activity, then yields, then sleeps
//! with a growing interval capped at [`MAX_SLEEP`] so that an idle process
//! costs almost no CPU. `ONESIDED_PROGRESS=manual` leaves progress to the
//! library calls of the application thread.
//!
//! Invariant: the agent only reads completions; all state it touches is the
//! completion counters (atomics) of operations that are in flight.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::transport::SharedTransport;

/// Longest sleep of an idle agent.
pub const MAX_SLEEP: Duration = Duration::from_micros(200);
/// Idle polls answered by yielding before the agent starts to sleep.
const YIELD_POLLS: u32 = 200;

/// A running progress thread; stopped and joined on drop.
pub struct ProgressAgent {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl ProgressAgent {
    /// Starts the agent for `transport`.
    pub fn start(transport: SharedTransport) -> std::io::Result<ProgressAgent> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("onesided-progress".into())
            .spawn(move || run(transport, flag))?;
        Ok(ProgressAgent {
            stop,
            handle: Some(handle),
        })
    }
}

fn run(transport: SharedTransport, stop: Arc<AtomicBool>) {
    let mut idle: u32 = 0;
    let mut sleep = Duration::from_micros(5);
    while !stop.load(Ordering::Acquire) {
        match transport.progress() {
            Ok(0) => {
                idle = idle.saturating_add(1);
                if idle < YIELD_POLLS {
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
        if let Some(h) = self.handle.take() {
            if h.join().is_err() {
                tracing::warn!("progress agent panicked");
            }
        }
    }
}
