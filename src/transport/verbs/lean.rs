//! Blocking operations of one work request, polled by their caller.
//!
//! A blocking `put`, `get`, `atomic`, `fetch_atomic` or `compare_atomic`
//! that fits one work request skips the general machinery of
//! [`ops`](super::ops) (the op table under its mutex, a [`Sink`] with its
//! claim count, the thread's result buffer): it takes a staging slot,
//! marks the slot's *cell* pending with the target and the queue pair's
//! generation, posts one request whose id names the slot (with [`LEAN`]
//! set), and polls the completion queue until the cell says the request
//! is over. Whichever thread reads the completion (the caller, or the
//! progress agent) records its status in the cell; the caller then copies
//! the result out of the slot and gives the slot back. On soft-RoCE this
//! took a blocking `fetch_and_op` from ~2,420 to ~1,630 instructions and
//! its latency from 1.64× to 1.21× `ib_atomic_lat` (docs/performance.md).
//!
//! [`Sink`]: crate::transport::inflight::Sink
//!
//! # Invariants
//! One `AtomicU64` per staging slot (state, completion status, generation
//! and target packed together, so every transition is one compare-exchange):
//! * `IDLE → PENDING` only by the thread holding the slot (it took the slot
//!   from the pool and has not given it back).
//! * `PENDING → DONE(status)` by the reader of the request's completion,
//!   when the generations match; `PENDING → STALE` when the queue pair was
//!   replaced (destroyed: no completion will come).
//! * `PENDING → ABANDONED` by the caller when its wait ended in an error
//!   (a timeout): the device may still write the slot, so the slot then
//!   belongs to whichever event ends the request (its completion, or the
//!   pair's replacement), which sets `IDLE` and gives the slot back.
//! * `DONE`/`STALE → IDLE` by the caller, which then gives the slot back.
//!
//! So a slot is in the pool only while its cell is `IDLE` and no request
//! on it is in flight, as [`Staging`](super::staging::Staging) requires.

use std::sync::atomic::{AtomicU64, Ordering};

use super::cq::{OpKind, Wc, WrId};
use super::transport::{VerbsTransport, NOT_EXECUTED};
use crate::error::{Error, Result};
use crate::progress::wait::Waiter;
use crate::transport::Transport;

/// Set in a work request id's slot when the request is a lean one (the rest
/// of the slot is the staging slot).
pub(super) const LEAN: u64 = 1 << 39;

const IDLE: u64 = 0;
const PENDING: u64 = 1;
const DONE: u64 = 2;
const STALE: u64 = 3;
const ABANDONED: u64 = 4;

fn pack(state: u64, status: u32, generation: u16, target: u32) -> u64 {
    state | (u64::from(status & 0xff) << 8) | (u64::from(generation) << 16) | (u64::from(target) << 32)
}
fn state(v: u64) -> u64 {
    v & 0xff
}
fn status(v: u64) -> u32 {
    ((v >> 8) & 0xff) as u32
}
fn generation(v: u64) -> u16 {
    ((v >> 16) & 0xffff) as u16
}
fn target(v: u64) -> u32 {
    (v >> 32) as u32
}

/// What reading a lean request's completion did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Applied {
    /// Recorded for the waiting caller.
    Recorded,
    /// The caller had given up: the slot goes back to the pool.
    GiveBack,
    /// Not a request in flight under that generation.
    Rejected,
}

/// One cell per staging slot.
pub(super) struct Cells {
    cells: Box<[AtomicU64]>,
}

impl Cells {
    /// `n` idle cells.
    pub fn new(n: usize) -> Cells {
        Cells {
            cells: (0..n).map(|_| AtomicU64::new(IDLE)).collect(),
        }
    }

    /// Requests posted and not over (the abandoned ones included).
    pub fn in_flight(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| matches!(state(c.load(Ordering::Relaxed)), PENDING | ABANDONED))
            .count()
    }

    fn cell(&self, slot: usize) -> Option<&AtomicU64> {
        self.cells.get(slot)
    }

    /// Marks `slot` (held by the caller) pending for a request to `target`
    /// on the pair of `generation`, before the request is posted.
    fn arm(&self, slot: usize, target: u32, generation: u16) {
        if let Some(c) = self.cell(slot) {
            // SeqCst: ordered before the post (whose completion another
            // thread may read) on every architecture.
            c.store(pack(PENDING, 0, generation, target), Ordering::SeqCst);
        }
    }

    fn load(&self, slot: usize) -> u64 {
        self.cell(slot).map_or(IDLE, |c| c.load(Ordering::Acquire))
    }

    fn reset(&self, slot: usize) {
        if let Some(c) = self.cell(slot) {
            c.store(IDLE, Ordering::Release);
        }
    }

    /// The completion (`status`) of the request on `slot` posted under
    /// `generation`.
    pub fn complete(&self, slot: usize, generation: u16, status: u32) -> (Applied, u32) {
        let Some(c) = self.cell(slot) else {
            return (Applied::Rejected, 0);
        };
        let mut v = c.load(Ordering::Acquire);
        loop {
            if self::generation(v) != generation {
                return (Applied::Rejected, 0);
            }
            let (next, applied) = match state(v) {
                PENDING => (pack(DONE, status, generation, target(v)), Applied::Recorded),
                ABANDONED => (IDLE, Applied::GiveBack),
                _ => return (Applied::Rejected, 0),
            };
            match c.compare_exchange(v, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return (applied, target(v)),
                Err(now) => v = now,
            }
        }
    }

    /// Ends the requests to `target` posted on a pair other than
    /// generation `keep` (it was replaced); `give` gets the slots whose
    /// callers had given up, `retire` the generation of each request ended
    /// (a completion that still comes is stale).
    pub fn fail_stale(
        &self,
        target: usize,
        keep: u16,
        mut give: impl FnMut(usize),
        mut retire: impl FnMut(u16),
    ) {
        let Ok(t) = u32::try_from(target) else {
            return;
        };
        for (slot, c) in self.cells.iter().enumerate() {
            let mut v = c.load(Ordering::Acquire);
            loop {
                if self::target(v) != t || generation(v) == keep {
                    break;
                }
                let next = match state(v) {
                    PENDING => pack(STALE, 0, generation(v), t),
                    ABANDONED => IDLE,
                    _ => break,
                };
                match c.compare_exchange(v, next, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        retire(generation(v));
                        if next == IDLE {
                            give(slot);
                        }
                        break;
                    }
                    Err(now) => v = now,
                }
            }
        }
    }

    /// The caller gives up on `slot`'s request: `Ok` when it was still
    /// pending (the slot now belongs to the request's end), `Err` with the
    /// cell when it ended meanwhile.
    fn abandon(&self, slot: usize) -> std::result::Result<(), u64> {
        let Some(c) = self.cell(slot) else {
            return Ok(());
        };
        let v = c.load(Ordering::Acquire);
        if state(v) != PENDING {
            return Err(v);
        }
        let next = pack(ABANDONED, 0, generation(v), target(v));
        c.compare_exchange(v, next, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
    }
}

/// The local side of a lean request.
pub(super) enum Source<'a> {
    /// The slot's first bytes (a get's or an atomic's landing place).
    Slot(usize),
    /// A put's bytes: inline (the device copies them during the post) when
    /// the queue pair allows, otherwise copied into the slot first.
    Put(&'a [u8]),
}

/// Where a lean request's fetched bytes go.
pub(super) enum Fetched<'a> {
    /// Nothing is fetched.
    Nothing,
    /// Copied from the slot.
    Bytes(&'a mut [u8]),
    /// An atomic's fetched 64-bit word, byte order fixed.
    Word(&'a mut [u8]),
}

impl VerbsTransport {
    /// Posts one request of `kind` to `target` with `post`
    /// (given the request id and its local side), waits for it, and copies
    /// what it fetched to `out`. See the module documentation.
    ///
    /// # Errors
    /// As the general path: the post failing, an error completion (the
    /// peer gone, or not executed because an earlier failure broke the
    /// connection), or [`Error::Timeout`] naming `what`.
    pub(super) fn lean(
        &self,
        target: usize,
        kind: OpKind,
        source: Source<'_>,
        out: Fetched<'_>,
        what: &dyn Fn() -> String,
        post: impl Fn(&super::conn::RcQp, u64, super::rma::Local) -> Result<()>,
    ) -> Result<()> {
        let t32 = u32::try_from(target)
            .map_err(|_| Error::InvalidArgument(format!("{}: rank out of range", what())))?;
        let (qp, generation) = self.qp_for(target)?;
        let slot = self.take_slot()?;
        let local = match source {
            Source::Put(data) if data.len() <= qp.max_inline as usize => Ok(super::rma::Local {
                addr: data.as_ptr() as u64,
                len: u32::try_from(data.len()).unwrap_or(u32::MAX),
                lkey: 0,
            }),
            Source::Put(data) => self.staging.fill(slot, data).and_then(|()| self.staging.local(slot, data.len())),
            Source::Slot(len) => self.staging.local(slot, len),
        };
        let local = match local {
            Ok(l) => l,
            Err(e) => {
                self.staging.give(slot);
                return Err(e);
            }
        };
        let id = WrId {
            generation,
            kind,
            slot: LEAN | slot as u64,
        }
        .encode()
        .ok_or_else(|| Error::InvalidArgument("staging slot does not fit a work request id".into()));
        let id = match id {
            Ok(id) => id,
            Err(e) => {
                self.staging.give(slot);
                return Err(e);
            }
        };
        self.cells.arm(slot, t32, generation);
        self.counters.lean.bump();
        let mut w = Waiter::new(self.timeout, what);
        loop {
            match post(&qp, id, local) {
                Ok(()) => break,
                Err(e) => {
                    // A full send queue frees as completions are read.
                    let r = if e.errno() == Some(nix::libc::ENOMEM) {
                        self.progress().and_then(|_| w.step())
                    } else {
                        Err(e)
                    };
                    if let Err(e) = r {
                        self.cells.reset(slot);
                        self.staging.give(slot);
                        return Err(e);
                    }
                }
            }
        }
        let v = loop {
            let r = self.progress();
            let v = self.cells.load(slot);
            if state(v) != PENDING {
                break v;
            }
            if let Err(e) = r.and_then(|_| w.step()) {
                match self.cells.abandon(slot) {
                    // The device may still write the slot: its end gives it
                    // back. An RDMA request needs no CPU at the target, so
                    // one this late means the peer's NIC or process is gone:
                    // the pair is moved to the error state, which flushes
                    // the request (and ends it on devices whose retries do
                    // not run out, rxe among them), and made again on the
                    // next contact.
                    Ok(()) => {
                        self.give_up_on(target, generation, &qp, &e);
                        return Err(e.awaiting(target));
                    }
                    Err(v) => break v,
                }
            }
        };
        let r = match (state(v), status(v)) {
            (DONE, s) if s == rdma_sys::IBV_WC_SUCCESS => match out {
                Fetched::Nothing => Ok(()),
                Fetched::Bytes(out) => self.staging.drain(slot, out),
                Fetched::Word(out) => {
                    let mut b = [0u8; 8];
                    let r = self.staging.drain(slot, &mut b);
                    let word = self.order.fix(u64::from_ne_bytes(b)).to_ne_bytes();
                    match out.get_mut(..8) {
                        Some(o) => {
                            o.copy_from_slice(&word);
                            r
                        }
                        None => Err(Error::InvalidArgument("an atomic result of fewer than 8 bytes".into())),
                    }
                }
            },
            (DONE, s) => {
                let message = failure(kind, target, s);
                if peer_gone(s) {
                    Err(Error::peer_unreachable(target, what(), message))
                } else {
                    Err(Error::backend("transport", "completion", what(), 0, message))
                }
            }
            _ => Err(Error::backend(
                "transport",
                "completion",
                what(),
                0,
                format!(
                    "the connection to rank {target} was made again while a {kind:?} was in flight{NOT_EXECUTED}"
                ),
            )),
        };
        self.cells.reset(slot);
        self.staging.give(slot);
        r
    }

    /// One 64-bit FETCH_AND_ADD of `add` (little-endian bytes) on `dst`,
    /// its fetched word to `out`.
    pub(super) fn lean_fetch_add(
        &self,
        target: usize,
        add: [u8; 8],
        dst: crate::transport::RemoteAddr,
        out: Fetched<'_>,
        what: &dyn Fn() -> String,
    ) -> Result<()> {
        let add = u64::from_le_bytes(add);
        self.counters.atomics.bump();
        self.counters.fetch_add.bump();
        self.lean(target, OpKind::FetchAdd, Source::Slot(8), out, what, |qp, id, local| {
            qp.post_fetch_add(id, local, dst, add)
        })
    }

    /// After a request to `target` on `qp` (of `generation`) timed out, or
    /// must end now: the pair to the error state (its requests complete
    /// flushed), marked broken (made again on the next contact).
    pub(super) fn give_up_on(&self, target: usize, generation: u16, qp: &super::conn::RcQp, why: &Error) {
        if let Err(e) = qp.to_error() {
            tracing::warn!("moving the queue pair to rank {target} to the error state: {e}");
        }
        self.broken(target, generation, &format!("{why}{NOT_EXECUTED}"));
    }

    /// Reads the completion `wc` of lean request `id`.
    pub(super) fn on_lean(&self, wc: &Wc, id: WrId) {
        let slot = usize::try_from(id.slot & !LEAN).unwrap_or(usize::MAX);
        let (applied, target) = self.cells.complete(slot, id.generation, wc.status);
        match applied {
            Applied::Rejected => self.ops.count_unmatched(id.generation),
            Applied::GiveBack => self.staging.give(slot),
            Applied::Recorded => {}
        }
        if applied != Applied::Rejected && wc.status != rdma_sys::IBV_WC_SUCCESS {
            self.broken(target as usize, id.generation, &failure(id.kind, target as usize, wc.status));
        }
    }
}

/// Whether a completion `status` means the peer does not answer.
pub(super) fn peer_gone(status: u32) -> bool {
    matches!(status, rdma_sys::IBV_WC_RETRY_EXC_ERR | rdma_sys::IBV_WC_RNR_RETRY_EXC_ERR)
}

/// The message of a failed request (the general path's and the lean one's).
pub(super) fn failure(kind: OpKind, target: usize, status: u32) -> String {
    let gone = peer_gone(status);
    format!(
        "{kind:?} to rank {target} failed: {} (status {status}){}",
        super::cq::status_text(status),
        if gone {
            "; the peer does not answer"
        } else if status == rdma_sys::IBV_WC_WR_FLUSH_ERR {
            NOT_EXECUTED
        } else {
            ""
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_follow_their_transitions() {
        let c = Cells::new(4);
        // A request that completes.
        c.arm(1, 7, 3);
        assert_eq!(state(c.load(1)), PENDING);
        assert_eq!(c.complete(1, 2, 0), (Applied::Rejected, 0), "older generation");
        assert_eq!(c.complete(1, 3, 5), (Applied::Recorded, 7));
        let v = c.load(1);
        assert_eq!((state(v), status(v), target(v), generation(v)), (DONE, 5, 7, 3));
        assert_eq!(c.complete(1, 3, 0).0, Applied::Rejected, "a second completion");
        assert!(c.abandon(1).is_err(), "over already");
        c.reset(1);
        // A caller that gives up: the completion gives the slot back.
        c.arm(2, 9, 4);
        assert_eq!(c.abandon(2), Ok(()));
        assert_eq!(c.complete(2, 4, 0), (Applied::GiveBack, 9));
        assert_eq!(state(c.load(2)), IDLE);
        // Replaced pairs: pending ends stale, abandoned gives back, others untouched.
        c.arm(0, 9, 4);
        c.arm(2, 9, 4);
        c.abandon(2).unwrap();
        c.arm(3, 9, 5);
        c.arm(1, 8, 4);
        let (mut given, mut retired) = (Vec::new(), Vec::new());
        c.fail_stale(9, 5, |s| given.push(s), |g| retired.push(g));
        assert_eq!(given, vec![2]);
        assert_eq!(retired, vec![4, 4], "the generation of each request ended");
        assert_eq!(state(c.load(0)), STALE);
        assert_eq!(state(c.load(2)), IDLE);
        assert_eq!(state(c.load(3)), PENDING, "current generation");
        assert_eq!(state(c.load(1)), PENDING, "another target");
        assert_eq!(c.complete(0, 4, 0).0, Applied::Rejected, "stale: over");
        assert_eq!(c.complete(7, 4, 0).0, Applied::Rejected, "no such slot");
    }

    #[test]
    fn failures_are_worded_as_the_general_path() {
        let m = failure(OpKind::FetchAdd, 3, rdma_sys::IBV_WC_RETRY_EXC_ERR);
        assert!(m.starts_with("FetchAdd to rank 3 failed: "), "{m}");
        assert!(m.ends_with("; the peer does not answer"), "{m}");
        assert!(failure(OpKind::Read, 1, rdma_sys::IBV_WC_WR_FLUSH_ERR).ends_with(NOT_EXECUTED));
    }
}
