//! The table of operations in flight, and the tokens the provider carries.
//!
//! An operation's [`OpContext`] lives in a slot of this table from post to
//! completion. libfabric only ever sees a *token*: slot index + 1 in the low
//! 32 bits and the slot's generation in the high 32 bits, passed as the
//! operation's context pointer but never dereferenced. When a completion
//! comes back, the token is checked against the slot (in range, occupied,
//! same generation) before anything is touched. A token that fails the check
//! (a duplicated completion, a completion for a post the provider rejected,
//! or garbage) is counted and ignored: a provider bug becomes a log line,
//! not a double free.
//!
//! Invariant: a slot is occupied exactly while its operation may still
//! complete; `take` empties it and bumps its generation, so each token is
//! honoured at most once.
//!
//! **Bounded.** The table has a fixed number of slots (`ONESIDED_RMA_SLOTS`),
//! allocated when the transport opens; inserting never allocates. When every
//! slot is taken, [`ContextTable::try_insert`] hands the operation back and the
//! poster reads the CQ until a slot frees (`cq::OpContext::track`), so a full
//! table is never an error for the user. It cannot deadlock: every occupied
//! slot is an operation the provider accepted, which the provider completes
//! (successfully or with an error) while this process reads its CQ — which
//! the waiting poster itself does — and its target progresses (the target's
//! agent or library calls; the same condition as for any wait). The poster
//! holds no lock and no slot while it waits, and completing an operation
//! needs nothing but its slot. The wait is bounded by `ONESIDED_TIMEOUT` like
//! any other wait for the network.
//!
//! **Reserved slots.** The message layer's receive buffers (and the replies
//! sent from them) take [`ContextTable::insert_reserved`] slots, one per buffer
//! (`RECV_BUFFERS` of them, added to the bound): they are re-posted from
//! inside CQ processing, where waiting for a slot is not allowed, and they
//! do not count against `ONESIDED_RMA_SLOTS`.

use std::os::raw::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::cq::OpContext;

struct Slot {
    generation: u32,
    /// Taken by [`ContextTable::insert_reserved`] (not counted against the bound).
    reserved: bool,
    op: Option<OpContext>,
}

struct Slab {
    slots: Vec<Slot>,
    /// Indices of empty slots, used as a stack.
    free: Vec<u32>,
    /// Slots taken by [`ContextTable::try_insert`].
    bounded_in_use: usize,
}

/// Operations in flight.
pub struct ContextTable {
    slab: Mutex<Slab>,
    /// Bound of [`ContextTable::try_insert`] (`ONESIDED_RMA_SLOTS`).
    capacity: usize,
    rejected: AtomicU64,
    exhausted: AtomicU64,
}

/// The targets of the operations [`ContextTable::held`] counts.
enum Targets {
    None,
    One(usize),
    Several,
}

/// What the provider holds of a wait's operations ([`ContextTable::held`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Nothing: the rest is counted in software (replies).
    Nothing,
    /// Operations that touch only memory kept until they complete.
    OwnMemory,
    /// At least one operation that uses memory the caller gets back.
    CallerMemory,
}

/// What [`ContextTable::try_insert`] did.
pub enum Insert {
    /// Stored: post with this token.
    Token(*mut c_void),
    /// Every slot is in use: the operation is handed back.
    Full(OpContext),
    /// The table is unusable (a panic poisoned its lock).
    Broken,
}

fn token(index: u32, generation: u32) -> *mut c_void {
    (((generation as u64) << 32) | (index as u64 + 1)) as usize as *mut c_void
}

impl ContextTable {
    /// A table of `capacity` slots (at least 1) for RMA and sends, plus
    /// `reserved` slots for the message layer's receive buffers (which
    /// must never wait), all allocated now.
    pub fn with_capacity(capacity: usize, reserved: usize) -> ContextTable {
        let capacity = capacity.clamp(1, (u32::MAX / 2) as usize);
        let total = capacity + reserved.min((u32::MAX / 2) as usize);
        let slots = (0..total)
            .map(|_| Slot {
                generation: 0,
                reserved: false,
                op: None,
            })
            .collect();
        // Popped from the end: slot 0 first.
        let free = (0..total as u32).rev().collect();
        ContextTable {
            slab: Mutex::new(Slab {
                slots,
                free,
                bounded_in_use: 0,
            }),
            capacity,
            rejected: AtomicU64::new(0),
            exhausted: AtomicU64::new(0),
        }
    }

    /// Stores `op` if a slot is free.
    pub fn try_insert(&self, op: OpContext) -> Insert {
        let Ok(mut slab) = self.slab.lock() else {
            // A poisoned lock means a panic elsewhere; leak the operation
            // rather than risk handing out a token twice.
            std::mem::forget(op);
            return Insert::Broken;
        };
        if slab.bounded_in_use >= self.capacity {
            return Insert::Full(op);
        }
        let Some(i) = slab.free.pop() else {
            return Insert::Full(op);
        };
        slab.bounded_in_use += 1;
        let slot = &mut slab.slots[i as usize];
        slot.reserved = false;
        slot.op = Some(op);
        Insert::Token(token(i, slot.generation))
    }

    /// Stores `op` in one of the reserved slots (the message layer's
    /// receive buffers and replies: at most one context per buffer, so a
    /// slot is always free). Returns a null token if none is (a bug) or
    /// the table is unusable.
    pub fn insert_reserved(&self, op: OpContext) -> *mut c_void {
        let Ok(mut slab) = self.slab.lock() else {
            std::mem::forget(op);
            return std::ptr::null_mut();
        };
        let reserved_in_use = slab.slots.len() - slab.free.len() - slab.bounded_in_use;
        if reserved_in_use >= slab.slots.len() - self.capacity {
            drop(slab);
            tracing::warn!("no reserved operation slot for {}", op.what);
            return std::ptr::null_mut();
        }
        let Some(i) = slab.free.pop() else {
            return std::ptr::null_mut();
        };
        let slot = &mut slab.slots[i as usize];
        slot.reserved = true;
        slot.op = Some(op);
        token(i, slot.generation)
    }

    /// What the provider still holds of the operations counted on `done`
    /// (as their own tracker or their group's). A scan of the table: called
    /// only when a wait has run out of time. A broken table answers
    /// [`Held::CallerMemory`] (the safe answer: something may still write).
    pub fn held(&self, done: &super::super::Completion) -> (Held, Option<usize>) {
        let Ok(slab) = self.slab.lock() else {
            return (Held::CallerMemory, None);
        };
        let mut held = Held::Nothing;
        // The target the held operations go to, if they all go to one.
        let mut target = Targets::None;
        for op in slab.slots.iter().filter_map(|s| s.op.as_ref()) {
            let counted = std::ptr::eq(Arc::as_ptr(&op.done), done)
                || op.group.as_ref().is_some_and(|g| std::ptr::eq(Arc::as_ptr(g), done));
            if counted {
                target = match target {
                    Targets::None => Targets::One(op.target),
                    Targets::One(t) if t == op.target => Targets::One(t),
                    _ => Targets::Several,
                };
                if op.uses_caller {
                    held = Held::CallerMemory;
                } else if held == Held::Nothing {
                    held = Held::OwnMemory;
                }
            }
        }
        let target = match target {
            Targets::One(t) => Some(t),
            _ => None,
        };
        (held, target)
    }

    /// Takes the operation of `token` back, if the token is valid.
    pub fn take(&self, token: *mut c_void) -> Option<OpContext> {
        let raw = token as usize as u64;
        let generation = (raw >> 32) as u32;
        // Index 0 means no slot (a null or otherwise bogus token).
        let index = (raw & 0xffff_ffff).wrapping_sub(1);
        let mut slab = self.slab.lock().ok()?;
        let slot = slab.slots.get_mut(index as usize);
        let op = match slot {
            Some(s) if s.generation == generation && s.op.is_some() => {
                s.generation = s.generation.wrapping_add(1);
                s.op.take().map(|op| (op, s.reserved))
            }
            _ => None,
        };
        match op {
            Some((op, reserved)) => {
                if !reserved {
                    slab.bounded_in_use -= 1;
                }
                // Cannot grow: at most `capacity` indices exist.
                slab.free.push(index as u32);
                Some(op)
            }
            None => {
                drop(slab);
                self.rejected.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("ignored a completion with unknown or stale context {raw:#x}");
                None
            }
        }
    }

    /// Counts one post that found every slot in use.
    pub fn note_exhausted(&self) {
        self.exhausted.fetch_add(1, Ordering::Relaxed);
    }

    /// Posts that found every slot in use and had to wait.
    pub fn exhausted(&self) -> u64 {
        self.exhausted.load(Ordering::Relaxed)
    }

    /// Completions ignored because their token did not match.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Operations in flight.
    pub fn in_flight(&self) -> usize {
        self.slab
            .lock()
            .map(|s| s.slots.len() - s.free.len())
            .unwrap_or(0)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::transport::Completion;

    /// An operation counted on `done` (never posted).
    pub(in crate::transport::ofi) fn op(done: &Arc<Completion>) -> OpContext {
        OpContext {
            done: done.clone(),
            group: None,
            _mr: Vec::new(),
            _keep: None,
            what: "test",
            target: 0,
            msg: None,
            on_fail: None,
            uses_caller: true,
        }
    }

    fn insert(t: &ContextTable, done: &Arc<Completion>) -> *mut c_void {
        match t.try_insert(op(done)) {
            Insert::Token(k) => k,
            _ => panic!("no slot"),
        }
    }

    #[test]
    fn tokens_are_honoured_once() {
        let t = ContextTable::with_capacity(4, 0);
        let done = Arc::new(Completion::new());
        let a = insert(&t, &done);
        assert!(!a.is_null());
        assert!(t.take(a).is_some());
        assert!(
            t.take(a).is_none(),
            "a duplicated completion must be ignored"
        );
        let b = insert(&t, &done);
        assert_ne!(a, b, "a reused slot gets a new generation");
        assert!(
            t.take(a).is_none(),
            "a stale token must not take the new operation"
        );
        assert!(t.take(b).is_some());
        for garbage in [0usize, 1, 5, 0xdead_beef, usize::MAX] {
            assert!(t.take(garbage as *mut c_void).is_none());
        }
        assert_eq!(t.rejected(), 7);
        assert_eq!(t.in_flight(), 0);
    }

    #[test]
    fn a_slot_is_small() {
        // The default table (1024 + RECV_BUFFERS slots) is allocated in every
        // process: keep it near 128 KiB (docs/transport.md).
        assert!(
            std::mem::size_of::<Slot>() <= 128,
            "{} bytes",
            std::mem::size_of::<Slot>()
        );
    }

    #[test]
    fn a_full_table_hands_the_operation_back() {
        let t = ContextTable::with_capacity(2, 1);
        let done = Arc::new(Completion::new());
        let r = t.insert_reserved(op(&done));
        assert!(!r.is_null());
        let a = insert(&t, &done);
        let b = insert(&t, &done);
        assert!(matches!(t.try_insert(op(&done)), Insert::Full(_)));
        assert!(
            t.insert_reserved(op(&done)).is_null(),
            "one reserved slot only"
        );
        assert!(t.take(r).is_some());
        assert!(
            matches!(t.try_insert(op(&done)), Insert::Full(_)),
            "a freed reserved slot does not raise the bound"
        );
        assert_eq!(t.in_flight(), 2);
        assert!(t.take(a).is_some());
        let c = insert(&t, &done);
        assert_ne!(a, c, "the freed slot comes back with a new generation");
        assert!(t.take(b).is_some() && t.take(c).is_some());
        assert_eq!(t.in_flight(), 0);
        // Many rounds never grow the table beyond its capacity.
        for _ in 0..1000 {
            let k = insert(&t, &done);
            assert!(t.take(k).is_some());
        }
        assert_eq!(t.capacity(), 2);
    }
}
