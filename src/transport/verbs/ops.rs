//! Operations in flight: what each posted work request must do when its
//! completion is read.
//!
//! A work request's id is its slot in this table with the generation of
//! the queue pair it was posted on ([`WrId`](super::cq::WrId)). A
//! completion is applied only if the slot holds an operation of that
//! generation, never to a newer operation in the same slot. A completion
//! of a pair that was replaced while requests were in flight on it
//! (flushed by the error state, or read after the replacement) is
//! expected: its generation is marked retired and the completion is
//! counted as stale; any other unmatched completion (a duplicate, an
//! unknown id) as rejected. The table is bounded
//! (`ONESIDED_RMA_SLOTS`); a post that finds it full drives progress until
//! a slot frees.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::cq::OpKind;
use crate::transport::inflight::Sink;

/// One posted work request.
pub struct Op {
    /// Rank of the peer.
    pub target: usize,
    /// Generation of the queue pair it was posted on.
    pub generation: u16,
    /// What it is.
    pub kind: OpKind,
    /// Staging slot to give back on completion.
    pub slot: Option<usize>,
    /// Where the outcome goes (counted done, or data delivered).
    pub sink: Sink,
    /// Byte offset in the sink's buffer of the data this request fetches.
    pub at: usize,
    /// Bytes to copy from the staging slot into the sink (0: nothing fetched).
    pub copy: usize,
    /// The fetched bytes are 64-bit atomic results (byte order fixed).
    pub atomic_result: bool,
    /// Runs once with the error when the request fails after it was
    /// posted (a posted send's hook, [`crate::transport::Transport::send_posted`]);
    /// dropped uncalled otherwise.
    pub on_fail: Option<crate::transport::SendFailed>,
}

struct Table {
    ops: Vec<Option<Op>>,
    free: Vec<usize>,
}

/// The bounded table.
pub struct OpTable {
    table: Mutex<Table>,
    capacity: usize,
    rejected: AtomicU64,
    stale: AtomicU64,
    /// One bit per 16-bit generation (8 KiB, whatever the job size): set
    /// when a pair of that generation is replaced with requests in flight,
    /// cleared when the generation is handed out again after the wrap.
    retired: Box<[AtomicU64]>,
    exhausted: AtomicU64,
}

/// Words of the retired-generation bitset.
const RETIRED_WORDS: usize = (u16::MAX as usize + 1) / 64;

impl OpTable {
    /// A table of `capacity` slots.
    pub fn new(capacity: usize) -> OpTable {
        let capacity = capacity.max(1);
        OpTable {
            table: Mutex::new(Table {
                ops: (0..capacity).map(|_| None).collect(),
                free: (0..capacity).rev().collect(),
            }),
            capacity,
            rejected: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            retired: (0..RETIRED_WORDS).map(|_| AtomicU64::new(0)).collect(),
            exhausted: AtomicU64::new(0),
        }
    }

    fn retired_bit(&self, generation: u16) -> (&AtomicU64, u64) {
        let g = usize::from(generation);
        (&self.retired[g / 64], 1u64 << (g % 64))
    }

    /// Marks `generation` retired: its pair was replaced while requests
    /// were in flight on it, so their completions may still be read.
    pub fn retire(&self, generation: u16) {
        let (w, bit) = self.retired_bit(generation);
        w.fetch_or(bit, Ordering::Relaxed);
    }

    /// `generation` is handed out to a new pair (after the 16-bit wrap):
    /// no longer retired.
    pub fn reuse(&self, generation: u16) {
        let (w, bit) = self.retired_bit(generation);
        w.fetch_and(!bit, Ordering::Relaxed);
    }

    /// Counts a completion that matched no request in flight: stale if its
    /// pair of `generation` was retired, rejected otherwise.
    pub fn count_unmatched(&self, generation: u16) {
        let (w, bit) = self.retired_bit(generation);
        if w.load(Ordering::Relaxed) & bit != 0 {
            self.stale.fetch_add(1, Ordering::Relaxed);
        } else {
            self.rejected.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Stores `op`; its slot, or `Err(op)` when the table is full.
    pub fn insert(&self, op: Op) -> Result<u64, Op> {
        let Ok(mut t) = self.table.lock() else {
            return Err(op);
        };
        match t.free.pop() {
            Some(i) => {
                t.ops[i] = Some(op);
                Ok(i as u64)
            }
            None => {
                self.exhausted.fetch_add(1, Ordering::Relaxed);
                Err(op)
            }
        }
    }

    /// Takes the operation in `slot` if it was posted under `generation`;
    /// otherwise counts an unmatched completion ([`Self::count_unmatched`]).
    pub fn take(&self, slot: u64, generation: u16) -> Option<Op> {
        let taken = self.table.lock().ok().and_then(|mut t| {
            let i = usize::try_from(slot).ok().filter(|&i| i < t.ops.len())?;
            if t.ops[i].as_ref()?.generation != generation {
                return None;
            }
            let op = t.ops[i].take();
            t.free.push(i);
            op
        });
        if taken.is_none() {
            self.count_unmatched(generation);
        }
        taken
    }

    /// Takes back an operation whose post failed (no completion will come).
    pub fn cancel(&self, slot: u64) -> Option<Op> {
        let mut t = self.table.lock().ok()?;
        let i = usize::try_from(slot).ok().filter(|&i| i < t.ops.len())?;
        let op = t.ops[i].take();
        if op.is_some() {
            t.free.push(i);
        }
        op
    }

    /// Takes every operation posted to `target` under a generation other
    /// than `keep` (its queue pair was replaced), retiring their
    /// generations: a completion that still comes is stale.
    pub fn take_stale(&self, target: usize, keep: u16) -> Vec<Op> {
        let Ok(mut t) = self.table.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for i in 0..t.ops.len() {
            let stale = t.ops[i]
                .as_ref()
                .is_some_and(|o| o.target == target && o.generation != keep);
            if stale {
                if let Some(op) = t.ops[i].take() {
                    self.retire(op.generation);
                    out.push(op);
                    t.free.push(i);
                }
            }
        }
        out
    }

    /// The queue pairs (target, generation) of the RDMA requests in flight
    /// whose outcome goes to `c` (their sink's own completion or its
    /// group's), once each.
    pub fn rdma_awaited_by(&self, c: &crate::transport::completion::Completion) -> Vec<(usize, u16)> {
        let Ok(t) = self.table.lock() else {
            return Vec::new();
        };
        let mut out: Vec<(usize, u16)> = Vec::new();
        for op in t.ops.iter().flatten() {
            let rdma = matches!(op.kind, OpKind::Write | OpKind::Read | OpKind::FetchAdd | OpKind::CmpSwap);
            if rdma && op.sink.reports_to(c) && !out.contains(&(op.target, op.generation)) {
                out.push((op.target, op.generation));
            }
        }
        out
    }

    /// Operations in flight.
    pub fn in_flight(&self) -> usize {
        self.table
            .lock()
            .map(|t| self.capacity - t.free.len())
            .unwrap_or(0)
    }

    /// Slots.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Completions that matched nothing in flight and no retired pair (a
    /// duplicate, an unknown id: a provider or library bug).
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Completions of requests on a retired pair, read after their
    /// operations were failed (expected after a peer error).
    pub fn stale(&self) -> u64 {
        self.stale.load(Ordering::Relaxed)
    }

    /// Inserts that found the table full.
    pub fn exhausted(&self) -> u64 {
        self.exhausted.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Op, OpTable};
    use crate::transport::completion::Completion;
    use crate::transport::inflight::Sink;
    use crate::transport::verbs::cq::OpKind;

    fn op(target: usize, generation: u16) -> Op {
        Op {
            target,
            generation,
            kind: OpKind::Write,
            slot: None,
            sink: Sink::counter(Arc::new(Completion::new())),
            at: 0,
            copy: 0,
            atomic_result: false,
            on_fail: None,
        }
    }

    /// A completion of a replaced pair's request is stale, not rejected;
    /// a duplicate of a completion already applied is rejected; a
    /// generation handed out again is no longer retired.
    #[test]
    fn stale_and_rejected_completions_are_told_apart() {
        let t = OpTable::new(4);
        let a = t.insert(op(3, 7)).ok().expect("a slot");
        let b = t.insert(op(3, 8)).ok().expect("a slot");
        // The pair to rank 3 is made again as generation 8: 7's request ends.
        let ended = t.take_stale(3, 8);
        assert_eq!(ended.len(), 1);
        assert_eq!(ended[0].generation, 7);
        // Its flushed completion arrives later.
        assert!(t.take(a, 7).is_none());
        assert_eq!((t.stale(), t.rejected()), (1, 0));
        // 8's completion applies once; a repeat of it is rejected.
        assert!(t.take(b, 8).is_some());
        assert!(t.take(b, 8).is_none());
        assert_eq!((t.stale(), t.rejected()), (1, 1));
        // Generation 7 handed out again (after the wrap): not retired.
        t.reuse(7);
        assert!(t.take(a, 7).is_none());
        assert_eq!((t.stale(), t.rejected()), (1, 2));
        assert_eq!(t.in_flight(), 0);
    }
}
