//! Node-local peers' window segments this process has mapped, in a bounded
//! LRU keyed by (window, rank) like the rkey cache: a peer costs nothing
//! until first accessed, and at most `ONESIDED_SHM_CACHE` segments are
//! mapped at once. An evicted mapping is unmapped when the last operation
//! using it (an `Arc` holder) is done; freeing a window forgets its entries.
//!
//! Also holds the per-window flag bits of the node path (bits 8–15 of
//! `Descriptor::flags` belong to it) and the counters that show it was used.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use crate::stats::Counter;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use super::directory::Descriptor;
use crate::error::Result;
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

/// The cache and the counters.
pub struct Mappings {
    lru: Mutex<LruCache<(u64, usize), Entry>>,
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
            lru: Mutex::new(LruCache::new(cap)),
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
    }

    /// The mapping cached under `key`, else maps the segment `locate`
    /// returns (expecting memfd `name()` of at least `len` bytes). A hit
    /// allocates nothing (the name is only built on a miss).
    pub fn get_or_map(
        &self,
        key: (u64, usize),
        locate: impl FnOnce() -> Result<u64>,
        name: impl FnOnce() -> String,
        len: usize,
    ) -> Result<Entry> {
        if let Some(m) = self.lru.lock().ok().and_then(|mut c| c.get(&key).cloned()) {
            return Ok(m);
        }
        let m = Arc::new(shm::map_peer(locate()?, &name(), len)?);
        self.maps.fetch_add(1, Ordering::Relaxed);
        let evicted = match self.lru.lock() {
            Ok(mut c) => c.push(key, m.clone()),
            Err(_) => None,
        };
        if matches!(&evicted, Some((k, _)) if *k != key) {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        // `evicted` is unmapped here, outside the lock (or later, by its
        // last user).
        drop(evicted);
        Ok(m)
    }

    /// The region cached under `key`, else the one `make` returns (a view
    /// of memory this process already maps: not counted as a mapping).
    pub fn get_or_insert(
        &self,
        key: (u64, usize),
        make: impl FnOnce() -> Result<Memory<'static>>,
    ) -> Result<Entry> {
        if let Some(m) = self.lru.lock().ok().and_then(|mut c| c.get(&key).cloned()) {
            return Ok(m);
        }
        let m = Arc::new(make()?);
        let evicted = match self.lru.lock() {
            Ok(mut c) => c.push(key, m.clone()),
            Err(_) => None,
        };
        if matches!(&evicted, Some((k, _)) if *k != key) {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        drop(evicted);
        Ok(m)
    }

    /// Forgets (and so unmaps) every mapping of window `id`.
    pub fn forget_window(&self, id: u64) {
        let stale: Vec<Entry> = match self.lru.lock() {
            Ok(mut c) => {
                let keys: Vec<_> = c
                    .iter()
                    .filter(|((w, _), _)| *w == id)
                    .map(|(k, _)| *k)
                    .collect();
                keys.iter().filter_map(|k| c.pop(k)).collect()
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
            mapped: self.lru.lock().map(|c| c.len()).unwrap_or(0),
            capacity: self.capacity,
        }
    }
}
