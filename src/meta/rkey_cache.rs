//! A fixed-capacity LRU of peer window descriptors, keyed by (window, rank).
//!
//! Capacity comes from `ONESIDED_RKEY_CACHE`; memory is bounded by it, not by
//! the number of processes. A miss costs one RMA read of the peer's
//! descriptor (see [`super::directory`]).

use std::num::NonZeroUsize;

use lru::LruCache;

use super::directory::Descriptor;

/// Counters of the cache, for `stats()`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that needed a remote read.
    pub misses: u64,
    /// Entries evicted to make room.
    pub evictions: u64,
    /// Entries held now.
    pub entries: usize,
    /// Capacity.
    pub capacity: usize,
}

/// The cache itself (callers wrap it in a mutex).
pub struct RkeyCache {
    lru: LruCache<(u64, usize), Descriptor>,
    stats: CacheStats,
}

impl RkeyCache {
    /// A cache of `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        let cap = NonZeroUsize::new(capacity.max(1)).unwrap_or(NonZeroUsize::MIN);
        RkeyCache {
            lru: LruCache::new(cap),
            stats: CacheStats {
                capacity: cap.get(),
                ..Default::default()
            },
        }
    }

    /// Looks up window `id` of `rank`, counting a hit or a miss.
    pub fn get(&mut self, id: u64, rank: usize) -> Option<Descriptor> {
        match self.lru.get(&(id, rank)) {
            Some(d) => {
                self.stats.hits += 1;
                Some(*d)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// Inserts a descriptor, evicting the least recently used one if full.
    pub fn insert(&mut self, rank: usize, d: Descriptor) {
        if let Some((old, _)) = self.lru.push((d.id, rank), d) {
            if old != (d.id, rank) {
                self.stats.evictions += 1;
            }
        }
    }

    /// Forgets every entry of window `id` (when it is freed).
    pub fn forget_window(&mut self, id: u64) {
        let stale: Vec<_> = self
            .lru
            .iter()
            .filter(|((w, _), _)| *w == id)
            .map(|(k, _)| *k)
            .collect();
        for k in stale {
            self.lru.pop(&k);
        }
    }

    /// Number of entries for window `id` (per-peer state actually held).
    pub fn entries_for(&self, id: u64) -> usize {
        self.lru.iter().filter(|((w, _), _)| *w == id).count()
    }

    /// Current counters.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            entries: self.lru.len(),
            ..self.stats
        }
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
    fn bounded_and_lru() {
        let mut c = RkeyCache::new(2);
        c.insert(1, d(1));
        c.insert(2, d(1));
        assert!(c.get(1, 1).is_some());
        c.insert(3, d(1)); // evicts rank 2, the least recently used
        assert!(c.get(1, 2).is_none());
        assert!(c.get(1, 1).is_some());
        let s = c.stats();
        assert_eq!((s.entries, s.capacity, s.evictions), (2, 2, 1));
        assert_eq!((s.hits, s.misses), (2, 1));
        c.forget_window(1);
        assert_eq!(c.stats().entries, 0);
    }
}
