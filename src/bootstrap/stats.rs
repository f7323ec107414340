//! What joining the job cost this process: exchanges with the launcher.
//!
//! Every [`Bootstrap`](super::Bootstrap) implementation counts its calls
//! here, so `World::stats().bootstrap` shows that start-up costs each
//! process O(1) exchanges (one card put, one fence at start, one at the
//! end) and that `gets` equals the peers actually contacted, not the job
//! size.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one process's bootstrap traffic (see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BootstrapStats {
    /// Values published (`put`).
    pub puts: u64,
    /// Values of other processes (or our own) looked up (`get` of a
    /// published key, found or not).
    pub gets: u64,
    /// Commits + barriers (`barrier`; PMI-1 `barrier_in`, PMI-2
    /// `kvs-fence`, PMIx `PMIx_Commit` + `PMIx_Fence`).
    pub fences: u64,
    /// Job information asked of the launcher itself, not published by a
    /// process: the node mapping (`PMI_process_mapping`, PMIx local peers),
    /// the job size under PMIx.
    pub queries: u64,
    /// Bytes of keys and values sent by `put`.
    pub put_bytes: u64,
    /// Bytes of values received by `get` and queries.
    pub get_bytes: u64,
}

/// The live counters behind [`BootstrapStats`] (relaxed atomics: they are
/// statistics, read by `stats()` at any time).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    puts: AtomicU64,
    gets: AtomicU64,
    fences: AtomicU64,
    queries: AtomicU64,
    put_bytes: AtomicU64,
    get_bytes: AtomicU64,
}

impl Counters {
    pub(crate) fn put(&self, key: &str, value: &str) {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.put_bytes
            .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
    }

    /// A `get`; `got` is the value's length when one came back.
    pub(crate) fn get(&self, got: Option<usize>) {
        self.gets.fetch_add(1, Ordering::Relaxed);
        if let Some(n) = got {
            self.get_bytes.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    pub(crate) fn query(&self, got: Option<usize>) {
        self.queries.fetch_add(1, Ordering::Relaxed);
        if let Some(n) = got {
            self.get_bytes.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    pub(crate) fn fence(&self) {
        self.fences.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> BootstrapStats {
        BootstrapStats {
            puts: self.puts.load(Ordering::Relaxed),
            gets: self.gets.load(Ordering::Relaxed),
            fences: self.fences.load(Ordering::Relaxed),
            queries: self.queries.load(Ordering::Relaxed),
            put_bytes: self.put_bytes.load(Ordering::Relaxed),
            get_bytes: self.get_bytes.load(Ordering::Relaxed),
        }
    }
}
