//! A window's own small cache of its targets, read without a lock on the
//! per-operation path: `SLOTS` write-once slots indexed by `rank % SLOTS`,
//! each holding a peer's window descriptor and, for a node-local peer on
//! the direct path, weak references to its mapping and to its control
//! region (lock words by CPU atomics).
//!
//! Why write-once is enough: a peer's descriptor of a window does not
//! change while the window lives (it is published at creation and retracted
//! at the collective free), so a slot filled once stays right until the
//! window is freed, when the window drops every slot (`clear`, under
//! `&mut`). A rank whose slot belongs to another rank takes the shared
//! path (world rkey cache and mappings, under their mutexes), exactly as
//! before: the slots only skip work, they never decide anything.
//!
//! Bounds: `SLOTS` entries per window, whatever the job size. The mappings
//! are held weakly, so the world's mapping cache (`ONESIDED_SHM_CACHE`) still
//! decides what stays mapped: after an eviction the upgrade fails and the
//! operation maps again through that cache.
//!
//! Concurrency: `OnceLock::get` is one acquire load; concurrent fills of
//! one slot keep the first (both are the same descriptor when the ranks are
//! equal; otherwise the loser uses the shared path).

use std::sync::{Arc, OnceLock, Weak};

use super::directory::Descriptor;
use crate::transport::Memory;

/// Slots per window (a power of two).
pub const SLOTS: usize = 16;

/// One cached target.
pub struct Target {
    /// Its rank.
    pub rank: usize,
    /// Its descriptor of the window (validated when it was read).
    pub desc: Descriptor,
    /// Its mapped segment, if operations to it go by load/store.
    pub map: Option<Weak<Memory<'static>>>,
    /// Its mapped control region, if its sync words (the lock word) are
    /// driven by CPU atomics.
    pub ctrl: Option<Weak<Memory<'static>>>,
}

/// The slots of one window.
pub struct Targets {
    slots: Box<[OnceLock<Target>]>,
}

impl Default for Targets {
    fn default() -> Self {
        Targets {
            slots: (0..SLOTS).map(|_| OnceLock::new()).collect(),
        }
    }
}

impl Targets {
    /// The cached target `rank`, if it owns its slot.
    #[inline]
    pub fn get(&self, rank: usize) -> Option<&Target> {
        self.slots[rank % SLOTS].get().filter(|t| t.rank == rank)
    }

    /// Caches `rank`'s descriptor (and mappings: window memory, control
    /// region) if its slot is still free.
    pub fn offer(
        &self,
        rank: usize,
        desc: Descriptor,
        map: Option<&Arc<Memory<'static>>>,
        ctrl: Option<&Arc<Memory<'static>>>,
    ) {
        let _ = self.slots[rank % SLOTS].set(Target {
            rank,
            desc,
            map: map.map(Arc::downgrade),
            ctrl: ctrl.map(Arc::downgrade),
        });
    }

    /// Number of filled slots.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.get().is_some()).count()
    }

    /// Whether no slot is filled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every slot (the window is freed).
    pub fn clear(&mut self) {
        for s in self.slots.iter_mut() {
            s.take();
        }
    }
}

/// Node-local peers' mapped regions of one kind (the world's control
/// regions), by the same write-once rule as [`Targets`]: `SLOTS` slots
/// indexed by `rank % SLOTS`, each a rank and a weak reference, so a hit is
/// one acquire load and a `Weak::upgrade` instead of the mapping cache's
/// mutex and lookup. The mapping cache still owns the mappings: after an
/// eviction the upgrade fails and the caller maps again there.
pub struct PeerRegions {
    slots: Box<[OnceLock<PeerRegion>]>,
}

/// A rank and its region, held weakly.
type PeerRegion = (usize, Weak<Memory<'static>>);

impl Default for PeerRegions {
    fn default() -> Self {
        PeerRegions {
            slots: (0..SLOTS).map(|_| OnceLock::new()).collect(),
        }
    }
}

impl PeerRegions {
    /// `rank`'s region, if it owns its slot and is still mapped.
    #[inline]
    pub fn get(&self, rank: usize) -> Option<Arc<Memory<'static>>> {
        self.slots[rank % SLOTS]
            .get()
            .filter(|(r, _)| *r == rank)
            .and_then(|(_, m)| m.upgrade())
    }

    /// Remembers `rank`'s region if its slot is still free.
    pub fn offer(&self, rank: usize, m: &Arc<Memory<'static>>) {
        let _ = self.slots[rank % SLOTS].set((rank, Arc::downgrade(m)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(id: u64) -> Descriptor {
        Descriptor {
            id,
            base: 0,
            len: 8,
            disp_unit: 8,
            key: 1,
            tag: 1,
            flags: 0,
            aux: 0,
        }
    }

    #[test]
    fn write_once_per_slot() {
        let mut t = Targets::default();
        t.offer(3, d(1), None, None);
        t.offer(3 + SLOTS, d(2), None, None); // same slot: not cached
        assert_eq!(t.get(3).map(|x| x.desc.id), Some(1));
        assert!(t.get(3 + SLOTS).is_none());
        assert!(t.get(4).is_none());
        let m = Arc::new(Memory::allocate(64).unwrap());
        let c = Arc::new(Memory::allocate(64).unwrap());
        t.offer(5, d(1), Some(&m), Some(&c));
        let w = t.get(5).and_then(|x| x.map.as_ref()).unwrap();
        let wc = t.get(5).and_then(|x| x.ctrl.as_ref()).unwrap();
        assert!(w.upgrade().is_some() && wc.upgrade().is_some());
        drop((m, c));
        assert!(w.upgrade().is_none(), "the slot does not keep it mapped");
        assert!(wc.upgrade().is_none(), "nor the control region");
        assert_eq!(t.len(), 2);
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn peer_regions_are_weak_and_write_once() {
        let p = PeerRegions::default();
        let m = Arc::new(Memory::allocate(64).unwrap());
        let other = Arc::new(Memory::allocate(64).unwrap());
        assert!(p.get(2).is_none());
        p.offer(2, &m);
        p.offer(2 + SLOTS, &other); // same slot: not kept
        assert!(p.get(2).is_some_and(|x| Arc::ptr_eq(&x, &m)));
        assert!(p.get(2 + SLOTS).is_none() && p.get(3).is_none());
        drop(m);
        assert!(p.get(2).is_none(), "evicted: the slot does not keep it");
    }
}
