//! The operation table of one window: `slots` lists of *target elements*
//! (one per target with queued operations), each holding its *operation
//! elements* and the batch they encode.
//!
//! Invariants:
//! * A target appears in at most one target element, in slot
//!   `rank % slots`; a target element holds at least one operation element
//!   while it is in the table.
//! * A target element's `batch` is a valid BATCH payload (`batch.rs`)
//!   whose entries are exactly its operation elements, in issue order, and
//!   it never exceeds the table's batch limit.
//! * Every element in the table, or taken out of it to be shipped, was
//!   taken from the window's pools and goes back to them exactly once
//!   ([`OpTable::recycle`], or `Drop` for what is left).
//! * [`OpTable::queue`] never blocks and never fails for lack of elements:
//!   when a batch is full or both pools are empty it hands back a target
//!   element to ship (the cleanup); the caller ships it, recycles it, and
//!   asks again. A victim exists whenever the window's own pools are used
//!   up, since their elements can only be in this table (or on their way
//!   back from a ship in progress on another thread).

use std::sync::Arc;

use super::pool::{Home, Local};
use super::wire::{self, Entry};
use super::Shared;

/// One queued operation (its bytes live in the target element's batch).
#[derive(Debug, Clone, Copy)]
pub struct OpElem {
    home: Home,
    /// [`wire::PUT`] or [`wire::ACCUMULATE`].
    pub class: u8,
    /// Bytes of data.
    pub len: usize,
}

/// The queued operations to one target.
#[derive(Debug)]
pub struct TargetElem {
    home: Home,
    /// The target rank.
    pub rank: usize,
    /// Queued operations, in issue order.
    pub ops: Vec<OpElem>,
    /// The encoded BATCH payload.
    pub batch: Vec<u8>,
}

/// What [`OpTable::queue`] did.
#[derive(Debug)]
pub enum Queued {
    /// The operation is in the table.
    Done,
    /// Ship this target element first (its batch is full, or the pools are
    /// empty), recycle it, then queue again.
    Ship(TargetElem),
    /// Nothing in this table can be shipped to free an element (another
    /// thread is shipping them): drive progress and queue again.
    Retry,
}

/// The operation table of one window.
pub struct OpTable {
    window: u64,
    shared: Arc<Shared>,
    slots: Vec<Vec<TargetElem>>,
    targets: Local<TargetElem>,
    ops: Local<OpElem>,
    // Round-robin position for issuing and choosing cleanup victims.
    cursor: usize,
    // Where the last operation was queued (slot, index): a hint, checked
    // before use (a target appears at most once in the table, so an
    // element of the right rank there is the one), so a run of operations
    // to one target skips the slot's division and search.
    last: (usize, usize),
}

impl OpTable {
    /// An empty table for window `id` with the configured sizes.
    pub fn new(window: u64, shared: Arc<Shared>) -> OpTable {
        let c = &shared.config;
        OpTable {
            window,
            slots: (0..c.slots).map(|_| Vec::new()).collect(),
            targets: Local::new(c.win_target_elements),
            ops: Local::new(c.win_op_elements),
            cursor: 0,
            last: (0, 0),
            shared,
        }
    }

    fn slot(&self, rank: usize) -> usize {
        rank % self.slots.len()
    }

    /// `rank`'s slot and its target element's index there, if it has one.
    #[inline]
    fn find(&self, rank: usize) -> (usize, Option<usize>) {
        let (s, i) = self.last;
        if self.slots.get(s).and_then(|l| l.get(i)).is_some_and(|t| t.rank == rank) {
            return (s, Some(i));
        }
        let s = self.slot(rank);
        (s, self.slots[s].iter().position(|t| t.rank == rank))
    }

    /// Takes `rank`'s target element out of the table, if any.
    pub fn take(&mut self, rank: usize) -> Option<TargetElem> {
        let (s, i) = self.find(rank);
        let i = i?;
        Some(self.slots[s].swap_remove(i))
    }

    /// Takes the next target element in round-robin order, if any.
    pub fn next_target(&mut self) -> Option<TargetElem> {
        let n = self.slots.len();
        for k in 0..n {
            let s = (self.cursor + k) % n;
            if let Some(t) = self.slots[s].pop() {
                self.cursor = (s + 1) % n;
                return Some(t);
            }
        }
        None
    }

    /// Queues `e` to `rank` (its encoded size must fit an empty batch).
    pub fn queue(&mut self, rank: usize, e: &Entry<'_>) -> Queued {
        let need = e.encoded_size();
        let limit = self.shared.config.batch_bytes;
        let (s, pos) = self.find(rank);
        if let Some(i) = pos {
            if self.slots[s][i].batch.len() + need > limit {
                return Queued::Ship(self.slots[s].swap_remove(i));
            }
        }
        let global = &self.shared.op_elements;
        let Some(op) = self.ops.take(global, |home| OpElem {
            home,
            class: 0,
            len: 0,
        }) else {
            return self.cleanup(rank);
        };
        let i = match pos {
            Some(i) => i,
            None => {
                let (window, cap) = (self.window, limit);
                let made = self.targets.take(&self.shared.target_elements, |home| {
                    let mut batch = Vec::with_capacity(cap);
                    wire::begin(&mut batch, window);
                    TargetElem {
                        home,
                        rank,
                        ops: Vec::new(),
                        batch,
                    }
                });
                let Some(mut t) = made else {
                    let home = op.home;
                    self.ops.give(global, op, home);
                    return self.cleanup(rank);
                };
                t.rank = rank;
                wire::begin(&mut t.batch, self.window);
                self.slots[s].push(t);
                self.slots[s].len() - 1
            }
        };
        self.last = (s, i);
        let t = &mut self.slots[s][i];
        wire::push(&mut t.batch, e);
        t.ops.push(OpElem {
            class: e.class,
            len: e.data.len(),
            ..op
        });
        Queued::Done
    }

    /// Both pools are empty: ship `rank`'s own batch if it has one, else the
    /// next target's in round-robin order.
    fn cleanup(&mut self, rank: usize) -> Queued {
        self.shared.stats.count_cleanup();
        match self.take(rank).or_else(|| self.next_target()) {
            Some(t) => Queued::Ship(t),
            None => Queued::Retry,
        }
    }

    /// Returns a shipped target element and its operation elements to
    /// their pools.
    pub fn recycle(&mut self, mut t: TargetElem) {
        let global = &self.shared.op_elements;
        self.ops
            .give_all(global, t.ops.drain(..).map(|op| (op, op.home)));
        let home = t.home;
        self.targets.give(&self.shared.target_elements, t, home);
    }
}

impl Drop for OpTable {
    fn drop(&mut self) {
        // Global elements go home; local ones are freed with the table.
        while let Some(t) = self.next_target() {
            self.recycle(t);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Model-based property test of the operation table on top of its
    //! pools: random operations to random targets with random pool sizes,
    //! shipping what `queue` hands back; the model is one FIFO of
    //! operations per target. Every operation must be shipped exactly once,
    //! in issue order per target, in batches within the limit, and every
    //! global element must be home when the table is gone.
    use super::*;
    use crate::config::{AggregateMode, OpConfig};
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn ship(t: TargetElem, limit: usize, got: &mut HashMap<usize, Vec<Vec<u8>>>) -> TargetElem {
        assert!(t.batch.len() <= limit, "batch of {} > {limit}", t.batch.len());
        assert!(!t.ops.is_empty(), "empty target element shipped");
        let (id, entries) = wire::decode(&t.batch).expect("valid batch");
        assert_eq!(id, 9);
        assert_eq!(entries.len(), t.ops.len());
        let out = got.entry(t.rank).or_default();
        for (e, o) in entries.iter().zip(&t.ops) {
            assert_eq!((e.class, e.data.len()), (o.class, o.len));
            out.push(e.data.to_vec());
        }
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn model_op_table_ships_every_op_once_in_order(
            sizes in (1..4usize, 0..4usize, 0..3usize, 0..4usize, 0..3usize),
            extra in 0..200usize,
            ops in proptest::collection::vec((0..5usize, 1..40usize, any::<u8>()), 0..80),
        ) {
            let (slots, gop, wop, gtarget, wtarget) = sizes;
            // At least one element of each kind somewhere.
            let (wop, wtarget) = (wop.max(usize::from(gop == 0)), wtarget.max(usize::from(gtarget == 0)));
            let limit = wire::HEADER_BYTES + wire::entry_size(40) + extra;
            let shared = Arc::new(Shared::new(OpConfig {
                mode: AggregateMode::On,
                max_op: 40,
                batch_bytes: limit,
                slots,
                op_elements: gop,
                win_op_elements: wop,
                target_elements: gtarget,
                win_target_elements: wtarget,
            }));
            let mut want: HashMap<usize, Vec<Vec<u8>>> = HashMap::new();
            let mut got: HashMap<usize, Vec<Vec<u8>>> = HashMap::new();
            let mut table = OpTable::new(9, shared.clone());
            for (i, (rank, len, byte)) in ops.into_iter().enumerate() {
                let data = vec![byte.wrapping_add(i as u8); len];
                let e = Entry {
                    class: wire::PUT,
                    op: None,
                    datatype: None,
                    offset: i as u64,
                    data: &data,
                    strided: None,
                };
                let mut tries = 0;
                loop {
                    tries += 1;
                    prop_assert!(tries < 100, "queue never succeeded");
                    match table.queue(rank, &e) {
                        Queued::Done => break,
                        Queued::Ship(t) => {
                            let t = ship(t, limit, &mut got);
                            table.recycle(t);
                        }
                        // Single thread: nothing is being shipped elsewhere.
                        Queued::Retry => prop_assert!(false, "Retry with no ship in flight"),
                    }
                }
                want.entry(rank).or_default().push(data);
            }
            if extra % 2 == 0 {
                while let Some(t) = table.next_target() {
                    let t = ship(t, limit, &mut got);
                    table.recycle(t);
                }
                prop_assert_eq!(&got, &want);
            } else {
                // Dropped with operations queued: what was shipped is, per
                // target, the oldest operations in order.
                for (r, w) in &want {
                    let g = got.get(r).map_or(&[][..], |g| &g[..]);
                    prop_assert_eq!(g, &w[..g.len()]);
                }
            }
            // Global elements go home with the table (local ones die with it).
            drop(table);
            let st = shared.stats();
            prop_assert_eq!(st.global_op_elements_in_use, 0);
            prop_assert_eq!(st.global_target_elements_in_use, 0);
        }
    }
}
