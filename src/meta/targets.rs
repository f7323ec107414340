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
//! Bounds: `SLOTS` entries per window, whatever the job size. A mapping is
//! either *pinned* — held strongly for the window's life, after the world's
//! mapping cache granted it (`Mappings::pin`: pinned mappings count against
//! the cache's bound `ONESIDED_SHM_CACHE`, at most half of it, and are not
//! evicted until the window is freed) — so an operation borrows it without
//! touching a reference count; or held weakly, so the cache still decides
//! what stays mapped: after an eviction the upgrade fails and the operation
//! maps again through that cache.
//!
//! Concurrency: `OnceLock::get` is one acquire load; concurrent fills of
//! one slot keep the first (both are the same descriptor when the ranks are
//! equal; otherwise the loser uses the shared path).

use std::ops::Deref;
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
    pub map: Option<Hold>,
    /// Its mapped control region, if its sync words (the lock word) are
    /// driven by CPU atomics.
    pub ctrl: Option<Hold>,
}

/// How a slot holds a mapping (see the module doc).
pub enum Hold {
    /// Granted by the mapping cache (`Mappings::pin`), counted against its
    /// bound; given back when the window is freed.
    Pinned(Arc<Memory<'static>>),
    /// Held weakly: the mapping cache may evict it.
    Weak(Weak<Memory<'static>>),
}

impl Hold {
    /// The mapping: borrowed if pinned (no reference count touched), else
    /// upgraded; `None` once evicted.
    #[inline]
    pub fn get(&self) -> Option<Mapped<'_>> {
        match self {
            Hold::Pinned(m) => Some(Mapped::Pinned(m)),
            Hold::Weak(w) => w.upgrade().map(Mapped::Held),
        }
    }

    /// Whether the mapping is pinned.
    pub fn is_pinned(&self) -> bool {
        matches!(self, Hold::Pinned(_))
    }
}

/// A mapping in use: borrowed from a pinned slot, or held for the
/// operation's duration.
pub enum Mapped<'a> {
    /// Borrowed from a pinned slot.
    Pinned(&'a Arc<Memory<'static>>),
    /// A strong reference (from a weak slot or the mapping cache).
    Held(Arc<Memory<'static>>),
}

impl Mapped<'_> {
    /// A strong reference, for what outlives the operation (a deferred
    /// write).
    pub fn to_arc(&self) -> Arc<Memory<'static>> {
        match self {
            Mapped::Pinned(m) => Arc::clone(m),
            Mapped::Held(m) => Arc::clone(m),
        }
    }
}

impl Deref for Mapped<'_> {
    type Target = Memory<'static>;
    #[inline]
    fn deref(&self) -> &Memory<'static> {
        match self {
            Mapped::Pinned(m) => m,
            Mapped::Held(m) => m,
        }
    }
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

    /// Whether `rank`'s slot is still free (so that an offer would be kept,
    /// unless another thread fills it first).
    pub fn vacant(&self, rank: usize) -> bool {
        self.slots[rank % SLOTS].get().is_none()
    }

    /// Caches `rank`'s descriptor (and mappings: window memory, control
    /// region) if its slot is still free; gives the target back if not
    /// (then the caller returns any pin it took).
    pub fn offer(
        &self,
        rank: usize,
        desc: Descriptor,
        map: Option<Hold>,
        ctrl: Option<Hold>,
    ) -> std::result::Result<(), Target> {
        self.slots[rank % SLOTS].set(Target {
            rank,
            desc,
            map,
            ctrl,
        })
    }

    /// The filled slots (the window is being freed: its pins are given
    /// back before [`Targets::clear`]).
    pub fn iter(&self) -> impl Iterator<Item = &Target> {
        self.slots.iter().filter_map(OnceLock::get)
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
        assert!(t.offer(3, d(1), None, None).is_ok());
        assert!(!t.vacant(3 + SLOTS));
        // Same slot: not cached.
        assert!(t.offer(3 + SLOTS, d(2), None, None).is_err());
        assert_eq!(t.get(3).map(|x| x.desc.id), Some(1));
        assert!(t.get(3 + SLOTS).is_none());
        assert!(t.get(4).is_none());
        let m = Arc::new(Memory::allocate(64).unwrap());
        let c = Arc::new(Memory::allocate(64).unwrap());
        let weak = |a: &Arc<Memory<'static>>| Some(Hold::Weak(Arc::downgrade(a)));
        assert!(t.offer(5, d(1), weak(&m), weak(&c)).is_ok());
        let w = t.get(5).and_then(|x| x.map.as_ref()).unwrap();
        let wc = t.get(5).and_then(|x| x.ctrl.as_ref()).unwrap();
        assert!(w.get().is_some() && wc.get().is_some());
        assert!(!w.is_pinned());
        drop((m, c));
        assert!(w.get().is_none(), "the slot does not keep it mapped");
        assert!(wc.get().is_none(), "nor the control region");
        // A pinned mapping is borrowed, and kept until the slot is cleared.
        let p = Arc::new(Memory::allocate(64).unwrap());
        assert!(t.offer(6, d(1), Some(Hold::Pinned(p.clone())), None).is_ok());
        let got = t.get(6).and_then(|x| x.map.as_ref()).and_then(Hold::get);
        assert!(matches!(got, Some(Mapped::Pinned(a)) if Arc::ptr_eq(a, &p)));
        assert_eq!(Arc::strong_count(&p), 2, "borrowed, not counted");
        assert_eq!(t.iter().count(), 3);
        assert_eq!(t.len(), 3);
        t.clear();
        assert!(t.is_empty());
        assert_eq!(Arc::strong_count(&p), 1, "cleared: given back");
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
