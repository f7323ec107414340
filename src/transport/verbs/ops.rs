//! Operations in flight: what each posted work request must do when its
//! completion is read.
//!
//! A work request's id is its slot in this table with the generation of
//! the queue pair it was posted on ([`WrId`](super::cq::WrId)). A
//! completion is applied only if the slot holds an operation of that
//! generation: completions of a queue pair that was torn down (and whose
//! operations were already failed) are counted as rejected, never applied
//! to a newer operation in the same slot. The table is bounded
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
    exhausted: AtomicU64,
}

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
            exhausted: AtomicU64::new(0),
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
    /// otherwise counts a rejected completion.
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
            self.rejected.fetch_add(1, Ordering::Relaxed);
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
    /// than `keep` (its queue pair was replaced: no completion will come).
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

    /// Counts a rejected completion of a request outside the table.
    pub fn count_rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Completions rejected (stale generation or unknown slot).
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Inserts that found the table full.
    pub fn exhausted(&self) -> u64 {
        self.exhausted.load(Ordering::Relaxed)
    }
}
