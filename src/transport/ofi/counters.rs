//! Counts of what the transport posted, for `World::stats()`.
//!
//! One count per libfabric operation accepted by the provider: a transfer
//! larger than the provider's `max_msg_size`, or an atomic with more
//! elements than one call takes, counts once per chunk; a post the provider
//! refused counts nothing. [`Counter`]s: statistics, not synchronization,
//! and no locked instruction for the usual single posting thread.

use crate::stats::Counter;
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
    writes: Counter,
    reads: Counter,
    atomics: Counter,
    bytes_written: Counter,
    bytes_read: Counter,
    bytes_atomic: Counter,
}

impl Counters {
    /// Counts one posted operation of `bytes` bytes.
    pub fn posted(&self, kind: Kind, bytes: usize) {
        let (ops, moved) = match kind {
            Kind::Write => (&self.writes, &self.bytes_written),
            Kind::Read => (&self.reads, &self.bytes_read),
            Kind::Atomic => (&self.atomics, &self.bytes_atomic),
        };
        ops.bump();
        moved.add(bytes as u64);
    }

    /// Writes the counts so far into `stats`.
    pub fn fill(&self, stats: &mut TransportStats) {
        let get = Counter::get;
        stats.writes = get(&self.writes);
        stats.reads = get(&self.reads);
        stats.atomics = get(&self.atomics);
        stats.bytes_written = get(&self.bytes_written);
        stats.bytes_read = get(&self.bytes_read);
        stats.bytes_atomic = get(&self.bytes_atomic);
    }
}
