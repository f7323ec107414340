//! Counts of what the transport posted, for `World::stats()`.
//!
//! One count per libfabric operation accepted by the provider: a transfer
//! larger than the provider's `max_msg_size`, or an atomic with more
//! elements than one call takes, counts once per chunk; a post the provider
//! refused counts nothing. Relaxed atomics: the counts are statistics, not
//! synchronization.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::transport::TransportStats;

/// What [`Counters::posted`] counts.
#[derive(Clone, Copy)]
pub enum Kind {
    /// `fi_write`, `fi_writemsg`, `fi_inject_write`.
    Write,
    /// `fi_read`.
    Read,
    /// `fi_atomic`, `fi_fetch_atomic`, `fi_compare_atomic`.
    Atomic,
}

/// Operations and bytes posted, by kind.
#[derive(Default)]
pub struct Counters {
    writes: AtomicU64,
    reads: AtomicU64,
    atomics: AtomicU64,
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    bytes_atomic: AtomicU64,
}

impl Counters {
    /// Counts one posted operation of `bytes` bytes.
    pub fn posted(&self, kind: Kind, bytes: usize) {
        let (ops, moved) = match kind {
            Kind::Write => (&self.writes, &self.bytes_written),
            Kind::Read => (&self.reads, &self.bytes_read),
            Kind::Atomic => (&self.atomics, &self.bytes_atomic),
        };
        ops.fetch_add(1, Ordering::Relaxed);
        moved.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Writes the counts so far into `stats`.
    pub fn fill(&self, stats: &mut TransportStats) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        stats.writes = get(&self.writes);
        stats.reads = get(&self.reads);
        stats.atomics = get(&self.atomics);
        stats.bytes_written = get(&self.bytes_written);
        stats.bytes_read = get(&self.bytes_read);
        stats.bytes_atomic = get(&self.bytes_atomic);
    }
}
