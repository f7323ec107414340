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
//! honoured at most once. The table grows to the largest number of
//! operations in flight at once and reuses slots after that.

use std::os::raw::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::cq::OpContext;

struct Slot {
    generation: u32,
    op: Option<OpContext>,
}

#[derive(Default)]
struct Slab {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

/// Operations in flight.
#[derive(Default)]
pub struct OpTable {
    slab: Mutex<Slab>,
    rejected: AtomicU64,
}

fn token(index: u32, generation: u32) -> *mut c_void {
    (((generation as u64) << 32) | (index as u64 + 1)) as usize as *mut c_void
}

impl OpTable {
    /// Stores `op` and returns the token to hand to the provider.
    pub fn insert(&self, op: OpContext) -> *mut c_void {
        let Ok(mut slab) = self.slab.lock() else {
            // A poisoned lock means a panic elsewhere; leak the operation
            // rather than risk handing out a token twice.
            std::mem::forget(op);
            return std::ptr::null_mut();
        };
        match slab.free.pop() {
            Some(i) => {
                let slot = &mut slab.slots[i as usize];
                slot.op = Some(op);
                token(i, slot.generation)
            }
            None => {
                let i = slab.slots.len() as u32;
                slab.slots.push(Slot {
                    generation: 0,
                    op: Some(op),
                });
                token(i, 0)
            }
        }
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
                s.op.take()
            }
            _ => None,
        };
        match op {
            Some(op) => {
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

    /// Completions ignored because their token did not match.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
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
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::transport::Completion;

    fn op(done: &Arc<Completion>) -> OpContext {
        OpContext {
            done: done.clone(),
            group: None,
            _mr: Vec::new(),
            _keep: None,
            what: "test",
            target: 0,
            msg: None,
        }
    }

    #[test]
    fn tokens_are_honoured_once() {
        let t = OpTable::default();
        let done = Arc::new(Completion::new());
        let a = t.insert(op(&done));
        assert!(!a.is_null());
        assert!(t.take(a).is_some());
        assert!(
            t.take(a).is_none(),
            "a duplicated completion must be ignored"
        );
        let b = t.insert(op(&done));
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
}
