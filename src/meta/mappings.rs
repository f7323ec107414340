//! Node-local peers' window segments this process has mapped, in a bounded
//! LRU keyed by (window, rank) like the rkey cache: a peer costs nothing
//! until first accessed, and at most `ONESIDED_SHM_CACHE` segments are
//! mapped at once. An evicted mapping is unmapped when the last operation
//! using it (an `Arc` holder) is done; freeing a window forgets its entries.
//!
//! Pins: a window may hold a mapping for its whole life in its target slot
//! (`meta::targets`), so that its operations borrow it without a reference
//! count. The cache grants such a pin only while pinned mappings are at
//! most half its capacity, and counts them against the bound: the LRU
//! holds `capacity − pinned` entries, a pinned entry is never evicted, and
//! the window gives its pins back when it is freed (the entry then returns
//! to the LRU, or is forgotten with its window).
//!
//! Also holds the per-window flag bits of the node path (bits 8–15 of
//! `Descriptor::flags` belong to it) and the counters that show it was used.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use crate::stats::Counter;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::directory::Descriptor;
use crate::error::{Error, Result};
use crate::transport::{shm, Memory};

/// Window memory is a node-shared segment; `aux` is its locator
/// (`transport::shm::locator`).
pub const FLAG_SHARED: u64 = 1 << 8;
/// Every rank of the window is on one node and every accumulate to it
/// (also to oneself) is executed by CPU atomics on the mapped memory.
pub const FLAG_CPU_ATOMICS: u64 = 1 << 9;
/// Every rank is on one node and the lock words (control region) are
/// driven by CPU atomics (`api::node`); set on every window, also `create`.
pub const FLAG_CPU_SYNC: u64 = 1 << 10;

/// A shared-memory window whose ranks' parts are contiguous in one
/// node-shared segment (`allocate_shared`, the default): `aux` is the byte
/// offset of the rank's part in the segment, which every rank maps whole.
pub const FLAG_CONTIG: u64 = 1 << 11;

/// Counters of the node path, for `World::stats()`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShmStats {
    /// Operations to node-local peers done without the provider: put/get/
    /// rput/rget by copy, accumulates by CPU atomics.
    pub direct_ops: u64,
    /// Accumulates (also to oneself) done by CPU atomics.
    pub cpu_atomics: u64,
    /// Peer segments mapped so far.
    pub maps: u64,
    /// Mappings dropped to make room.
    pub evictions: u64,
    /// Mappings held now.
    pub mapped: usize,
    /// Capacity.
    pub capacity: usize,
}

type Entry = Arc<Memory<'static>>;
type Key = (u64, usize);

/// The LRU and the pinned entries (with their pin counts), under one mutex.
struct Cache {
    lru: LruCache<Key, Entry>,
    pinned: HashMap<Key, (Entry, usize)>,
}

impl Cache {
    fn get(&mut self, key: &Key) -> Option<Entry> {
        if let Some((m, _)) = self.pinned.get(key) {
            return Some(m.clone());
        }
        self.lru.get(key).cloned()
    }

    /// Sets the LRU's capacity to `capacity − pinned` (at least one),
    /// returning what no longer fits (to be dropped outside the lock).
    fn fit(&mut self, capacity: usize) -> Vec<Entry> {
        let cap = capacity.saturating_sub(self.pinned.len()).max(1);
        let mut out = Vec::new();
        while self.lru.len() > cap {
            match self.lru.pop_lru() {
                Some((_, m)) => out.push(m),
                None => break,
            }
        }
        self.lru
            .resize(NonZeroUsize::new(cap).unwrap_or(NonZeroUsize::MIN));
        out
    }
}

/// The cache and the counters.
pub struct Mappings {
    lru: Mutex<Cache>,
    capacity: usize,
    direct_ops: Counter,
    cpu_atomics: Counter,
    maps: AtomicU64,
    evictions: AtomicU64,
}

impl Mappings {
    /// A cache of `capacity` mappings (at least one).
    pub fn new(capacity: usize) -> Self {
        let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
        Mappings {
            lru: Mutex::new(Cache {
                lru: LruCache::new(cap),
                pinned: HashMap::new(),
            }),
            capacity: cap.get(),
            direct_ops: Counter::default(),
            cpu_atomics: Counter::default(),
            maps: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The mapping of `rank`'s segment of window `d.id`, mapping it on a miss.
    pub fn get(&self, rank: usize, d: &Descriptor) -> Result<Entry> {
        let name = || shm::segment_name(d.id, rank);
        self.get_or_map((d.id, rank), || Ok(d.aux), name, d.len as usize)
            .map_err(|e| match shm::owner_gone(d.aux) {
                // Its process exited: say so, naming the rank.
                true => Error::peer_unreachable(
                    rank,
                    format!("mapping rank {rank}'s memory of window {}", d.id),
                    format!("its process {} has exited ({e})", d.aux >> 32),
                ),
                false => e,
            })
    }

    /// The mapping cached under `key`, else maps the segment `locate`
    /// returns (expecting memfd `name()` of at least `len` bytes). A hit
    /// allocates nothing (the name is only built on a miss).
    pub fn get_or_map(
        &self,
        key: Key,
        locate: impl FnOnce() -> Result<u64>,
        name: impl FnOnce() -> String,
        len: usize,
    ) -> Result<Entry> {
        if let Some(m) = self.lru.lock().ok().and_then(|mut c| c.get(&key)) {
            return Ok(m);
        }
        let m = Arc::new(shm::map_peer(locate()?, &name(), len)?);
        self.maps.fetch_add(1, Ordering::Relaxed);
        self.insert(key, &m);
        Ok(m)
    }

    /// The region cached under `key`, else the one `make` returns (a view
    /// of memory this process already maps: not counted as a mapping).
    pub fn get_or_insert(
        &self,
        key: Key,
        make: impl FnOnce() -> Result<Memory<'static>>,
    ) -> Result<Entry> {
        if let Some(m) = self.lru.lock().ok().and_then(|mut c| c.get(&key)) {
            return Ok(m);
        }
        let m = Arc::new(make()?);
        self.insert(key, &m);
        Ok(m)
    }

    /// Caches `m` under `key` (a miss just mapped it), counting an eviction.
    fn insert(&self, key: Key, m: &Entry) {
        let evicted = match self.lru.lock() {
            // Pinned meanwhile by another thread: that one stays.
            Ok(c) if c.pinned.contains_key(&key) => None,
            Ok(mut c) => c.lru.push(key, m.clone()),
            Err(_) => None,
        };
        if matches!(&evicted, Some((k, _)) if *k != key) {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        // `evicted` is unmapped here, outside the lock (or later, by its
        // last user).
        drop(evicted);
    }

    /// Pins the mapping `m` cached under `key` for a window's slot (see the
    /// module doc): true if granted (then [`Mappings::unpin`] it when the
    /// window is freed). Refused when pins would exceed half the capacity,
    /// or when `m` is no longer the mapping cached under `key`.
    pub fn pin(&self, key: Key, m: &Entry) -> bool {
        let Ok(mut c) = self.lru.lock() else {
            return false;
        };
        if let Some((p, n)) = c.pinned.get_mut(&key) {
            if !Arc::ptr_eq(p, m) {
                return false;
            }
            *n += 1;
            return true;
        }
        if c.pinned.len() + 1 > self.capacity / 2 {
            return false;
        }
        match c.lru.peek(&key) {
            Some(e) if Arc::ptr_eq(e, m) => {}
            _ => return false,
        }
        c.lru.pop(&key);
        c.pinned.insert(key, (m.clone(), 1));
        let evicted = c.fit(self.capacity);
        drop(c);
        self.evictions
            .fetch_add(evicted.len() as u64, Ordering::Relaxed);
        drop(evicted);
        true
    }

    /// Gives back one pin of `key`: at the last one the entry returns to
    /// the LRU (as its most recently used entry).
    pub fn unpin(&self, key: Key) {
        let Ok(mut c) = self.lru.lock() else {
            return;
        };
        let Some((_, n)) = c.pinned.get_mut(&key) else {
            return;
        };
        *n -= 1;
        if *n > 0 {
            return;
        }
        let Some((m, _)) = c.pinned.remove(&key) else {
            return;
        };
        // Room for it first: the LRU grows by the pin given back.
        let mut evicted = c.fit(self.capacity);
        evicted.extend(c.lru.push(key, m).map(|(_, m)| m));
        drop(c);
        drop(evicted);
    }

    /// Forgets (and so unmaps) every mapping of window `id`, pinned or not.
    pub fn forget_window(&self, id: u64) {
        let stale: Vec<Entry> = match self.lru.lock() {
            Ok(mut c) => {
                let keys: Vec<_> = c
                    .lru
                    .iter()
                    .filter(|((w, _), _)| *w == id)
                    .map(|(k, _)| *k)
                    .collect();
                let mut stale: Vec<Entry> = keys.iter().filter_map(|k| c.lru.pop(k)).collect();
                let pinned: Vec<_> = c.pinned.keys().filter(|(w, _)| *w == id).copied().collect();
                stale.extend(pinned.iter().filter_map(|k| c.pinned.remove(k)).map(|(m, _)| m));
                if !pinned.is_empty() {
                    stale.extend(c.fit(self.capacity));
                }
                stale
            }
            Err(_) => Vec::new(),
        };
        drop(stale);
    }

    #[inline]
    pub(crate) fn count_direct(&self) {
        self.direct_ops.bump();
    }

    #[inline]
    pub(crate) fn count_atomic(&self) {
        self.cpu_atomics.bump();
    }

    /// Current counters.
    pub fn stats(&self) -> ShmStats {
        ShmStats {
            direct_ops: self.direct_ops.get(),
            cpu_atomics: self.cpu_atomics.get(),
            maps: self.maps.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            mapped: self
                .lru
                .lock()
                .map(|c| c.lru.len() + c.pinned.len())
                .unwrap_or(0),
            capacity: self.capacity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Arc::new(Memory::allocate(64).unwrap())
    }

    #[test]
    fn pins_count_against_the_bound() {
        let c = Mappings::new(4);
        let a: Vec<Entry> = (0..4)
            .map(|i| c.get_or_insert((1, i), || Ok(Memory::allocate(64).unwrap())).unwrap())
            .collect();
        assert_eq!(c.stats().mapped, 4);
        // Half the capacity may be pinned; the LRU shrinks to make room.
        assert!(c.pin((1, 0), &a[0]) && c.pin((1, 1), &a[1]));
        assert!(!c.pin((1, 2), &a[2]), "no more than half pinned");
        assert!(c.pin((1, 0), &a[0]), "a pinned key pins again");
        assert!(!c.pin((1, 3), &entry()), "not the cached mapping");
        let s = c.stats();
        assert!(s.mapped <= s.capacity, "{s:?}");
        // Pinned entries are never evicted; the LRU (2 entries) churns.
        for i in 10..20 {
            let m = c.get_or_insert((1, i), || Ok(Memory::allocate(64).unwrap())).unwrap();
            drop(m);
            assert!(c.stats().mapped <= 4);
            let hit = c.get_or_insert((1, 0), || panic!("pinned: a hit"));
            assert!(Arc::ptr_eq(&hit.unwrap(), &a[0]));
        }
        // Given back: (1, 1) at once, (1, 0) after its second pin.
        c.unpin((1, 1));
        c.unpin((1, 0));
        assert!(Arc::ptr_eq(&c.get_or_insert((1, 0), || panic!("still pinned")).unwrap(), &a[0]));
        c.unpin((1, 0));
        let s = c.stats();
        assert!(s.mapped <= s.capacity, "{s:?}");
        assert!(c.pin((1, 0), &a[0]), "back in the LRU: pinned again");
        c.forget_window(1);
        assert_eq!(c.stats().mapped, 0, "forgotten with their window, pinned or not");
    }
}
