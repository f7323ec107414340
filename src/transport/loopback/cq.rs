//! Operations in flight: non-blocking operations are queued at post and
//! carried out, in order, when the origin drives progress — as a NIC
//! would, later — so callers that forget to wait or flush see their data
//! missing, as on a network.
//!
//! Order: every operation of one origin, blocking or not (and every
//! message it sends), runs under the queue's lock after all operations
//! posted before it. So operations to one target are applied in the order
//! they were issued (the orderings `Caps::atomic_order` promises), and a
//! blocking operation or message never overtakes a queued one.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{atomic, rma, LoopbackTransport};
use crate::error::Error;
use crate::transport::{Atomic, Completion, InFlight, RemoteAddr};

/// A buffer of an [`InFlight`]: its start and length.
struct Raw {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer belongs to an `InFlight` whose completion counts this
// operation: the `InFlight` neither gives the buffer back nor frees it
// while the count is pending (it leaks it instead), and nobody but the
// back-end touches it meanwhile. The pointer is used once, by whichever
// thread runs the queue.
unsafe impl Send for Raw {}

impl Raw {
    fn of(f: &InFlight) -> Raw {
        Raw {
            ptr: f.as_ptr(),
            len: f.len(),
        }
    }
}

/// What a queued operation does.
enum Work {
    Put(Raw),
    Get(Raw),
    Atomic(Atomic, Raw),
    Fetch(Atomic, Vec<u8>, Raw),
}

/// A queued operation and the trackers it counts on.
pub(super) struct Posted {
    target: usize,
    at: RemoteAddr,
    work: Work,
    done: Arc<Completion>,
    group: Option<Arc<Completion>>,
}

impl Posted {
    fn new(target: usize, at: RemoteAddr, work: Work, f: &InFlight) -> Posted {
        Posted {
            target,
            at,
            work,
            done: f.completion().clone(),
            group: f.group().cloned(),
        }
    }
    pub(super) fn put(target: usize, src: &InFlight, at: RemoteAddr) -> Posted {
        Self::new(target, at, Work::Put(Raw::of(src)), src)
    }
    pub(super) fn get(target: usize, dst: &InFlight, at: RemoteAddr) -> Posted {
        Self::new(target, at, Work::Get(Raw::of(dst)), dst)
    }
    pub(super) fn atomic(target: usize, what: Atomic, src: &InFlight, at: RemoteAddr) -> Posted {
        Self::new(target, at, Work::Atomic(what, Raw::of(src)), src)
    }
    pub(super) fn fetch(
        target: usize,
        what: Atomic,
        data: Vec<u8>,
        result: &InFlight,
        at: RemoteAddr,
    ) -> Posted {
        Self::new(target, at, Work::Fetch(what, data, Raw::of(result)), result)
    }

    /// Carries the operation out and counts it on its trackers.
    fn run(self, t: &LoopbackTransport) {
        let Posted {
            target,
            at,
            work,
            done,
            group,
        } = self;
        // The buffers of `Raw` are alive and ours until the completion
        // below is counted; each is a distinct allocation from any
        // registered memory, so the slices alias nothing.
        let r = match work {
            Work::Put(src) => {
                // SAFETY: see `Raw` and above.
                let data = unsafe { std::slice::from_raw_parts(src.ptr, src.len) };
                rma::write(t, target, data, at)
            }
            Work::Get(dst) => {
                // SAFETY: see `Raw` and above.
                let buf = unsafe { std::slice::from_raw_parts_mut(dst.ptr, dst.len) };
                rma::read(t, target, buf, at)
            }
            Work::Atomic(what, src) => {
                // SAFETY: see `Raw` and above.
                let data = unsafe { std::slice::from_raw_parts(src.ptr, src.len) };
                atomic::apply(t, target, what, data, None, at)
            }
            Work::Fetch(what, data, result) => {
                if result.len != data.len() {
                    Err(Error::InvalidArgument(format!(
                        "fetching atomic: result buffer of {} bytes for {} bytes of data",
                        result.len,
                        data.len()
                    )))
                } else {
                    // SAFETY: see `Raw` and above.
                    let out = unsafe { std::slice::from_raw_parts_mut(result.ptr, result.len) };
                    atomic::apply(t, target, what, &data, Some(out), at)
                }
            }
        };
        let trackers = std::iter::once(&done).chain(group.as_ref());
        match r {
            Ok(()) => trackers.for_each(|c| c.done()),
            Err(e @ Error::PeerUnreachable { .. }) => {
                trackers.for_each(|c| c.peer_gone(target, e.to_string()))
            }
            Err(e) => trackers.for_each(|c| c.failed(e.to_string())),
        }
    }
}

/// The origin's queue of operations in flight.
pub(super) struct Queue {
    q: Mutex<VecDeque<Posted>>,
    /// Operations in flight at once (`ONESIDED_RMA_SLOTS`).
    slots: usize,
}

impl Queue {
    pub(super) fn new(slots: usize) -> Queue {
        Queue {
            q: Mutex::new(VecDeque::new()),
            slots: slots.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Posted>> {
        // A panic while running an operation leaves the queue consistent
        // (each step is one pop), so a poisoned lock is still usable.
        self.q.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Slots (operations in flight at once).
    pub(super) fn slots(&self) -> usize {
        self.slots
    }

    /// Operations queued.
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Queues `p`, counting it on its trackers first. With every slot in
    /// use, the queued operations run first (what a post that finds the op
    /// table full does: it reads completions until a slot frees).
    pub(super) fn post(&self, t: &LoopbackTransport, p: Posted) {
        if let Some(g) = &p.group {
            g.add();
        }
        p.done.add();
        let mut q = self.lock();
        if q.len() >= self.slots {
            t.counters.exhausted();
            Self::drain(&mut q, t);
        }
        q.push_back(p);
    }

    fn drain(q: &mut VecDeque<Posted>, t: &LoopbackTransport) -> usize {
        let mut n = 0;
        while let Some(p) = q.pop_front() {
            p.run(t);
            n += 1;
        }
        n
    }

    /// Runs every queued operation, then `f`, under the queue's lock (a
    /// blocking operation or a send: ordered after what was posted).
    pub(super) fn then<R>(&self, t: &LoopbackTransport, f: impl FnOnce() -> R) -> R {
        let mut q = self.lock();
        Self::drain(&mut q, t);
        f()
    }

    /// Runs every queued operation; returns how many ran.
    pub(super) fn run(&self, t: &LoopbackTransport) -> usize {
        let mut q = self.lock();
        Self::drain(&mut q, t)
    }

    /// Fails every queued operation (the transport is closing).
    pub(super) fn abandon(&self, why: &str) {
        let mut q = self.lock();
        while let Some(p) = q.pop_front() {
            for c in std::iter::once(&p.done).chain(p.group.as_ref()) {
                c.failed(why.to_string());
            }
        }
    }
}
