//! Aggregation of small operations: the per-window *operation table* and
//! the *pools* its elements come from, and the BATCH active message that
//! carries queued operations to their target (see `docs/op-table.md`).
//!
//! On software transports (tcp, sockets) one provider operation per 8-byte
//! put or accumulate costs a round of provider work each; queuing small
//! puts and software-path accumulates per target and shipping them as one
//! message, applied in order by the target's handler, moves the same data
//! with one message and one acknowledgement per ~4 KiB.
//!
//! * `origin.rs`: the origin side — what is queued, when batches ship,
//!   their acknowledgements — over a narrow context, not the window.
//! * `table.rs`: slots → target elements → operation elements; queueing,
//!   round-robin issue, the cleanup when the pools run dry.
//! * `pool.rs`: the two-level pools (per-window local, process global).
//! * `wire.rs`: the BATCH wire format (kind 4) and its decoder.
//! * `target.rs`: the target handler.

mod origin;
mod pool;
mod table;
mod target;
mod wire;

use std::sync::atomic::{AtomicU64, Ordering};

pub use origin::{Aggregation, Origin};
pub use table::{OpTable, Queued, TargetElem};
pub use target::{BatchHandler, GetHandler};
pub use wire::{begin as batch_begin, push as batch_push, Entry, ACCUMULATE, PUT};

use crate::config::{AggregateMode, OpConfig};

/// Bit of an exposed window's policy word: batched puts are accepted (bits
/// 0–12 are the software-path accumulate operations, `am_accumulate::op_bit`).
pub const PUT_POLICY: u64 = 1 << 63;

/// Whether windows aggregate under `mode` on a back-end that says small
/// operations are better batched (`Caps::batch_small`): `auto` follows the
/// back-end (on for the software transports measured to gain from it, tcp
/// and sockets, `docs/op-table.md`; off for shm and NICs). The same on
/// every rank: every rank runs the same back-end and environment.
pub fn enabled(mode: AggregateMode, batch_small: bool) -> bool {
    match mode {
        AggregateMode::On => true,
        AggregateMode::Off => false,
        AggregateMode::Auto => batch_small,
    }
}

/// Counters of aggregation (`World::stats().ops`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpStats {
    /// Operations queued into batches (origin side).
    pub ops_aggregated: u64,
    /// Batches shipped (origin side).
    pub batches_sent: u64,
    /// Cleanups: an operation found a batch it could not grow because both
    /// pools were empty, so a batch was shipped early.
    pub cleanups: u64,
    /// Batches applied here (target side).
    pub batches_applied: u64,
    /// Operations applied here from batches (target side).
    pub ops_applied: u64,
    /// Batches refused here (malformed or not matching the window).
    pub batches_refused: u64,
    /// Global operation elements held by windows right now.
    pub global_op_elements_in_use: usize,
    /// Global target elements held by windows right now.
    pub global_target_elements_in_use: usize,
}

#[derive(Debug, Default)]
struct Counters {
    queued: AtomicU64,
    sent: AtomicU64,
    cleanups: AtomicU64,
    applied: AtomicU64,
    ops_applied: AtomicU64,
    refused: AtomicU64,
}

impl Counters {
    fn count_cleanup(&self) {
        self.cleanups.fetch_add(1, Ordering::Relaxed);
    }
    fn count_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }
    fn count_applied(&self, n: usize) {
        self.applied.fetch_add(1, Ordering::Relaxed);
        self.ops_applied.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// What every window of a process shares: the global pools, the settings
/// and the counters.
pub struct Shared {
    /// Pool sizes, limits and mode.
    pub config: OpConfig,
    op_elements: pool::Global<table::OpElem>,
    target_elements: pool::Global<TargetElem>,
    stats: Counters,
}

impl Shared {
    /// Counts a refused BATCH or strided-get message; returns `why`.
    fn refused(&self, why: String) -> String {
        self.stats.count_refused();
        why
    }

    /// Empty global pools of the configured sizes.
    pub fn new(config: OpConfig) -> Shared {
        Shared {
            op_elements: pool::Global::new(config.op_elements),
            target_elements: pool::Global::new(config.target_elements),
            config,
            stats: Counters::default(),
        }
    }

    /// Counts an operation queued.
    pub fn count_queued(&self) {
        self.stats.queued.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a batch shipped.
    pub fn count_sent(&self) {
        self.stats.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters.
    pub fn stats(&self) -> OpStats {
        let s = &self.stats;
        OpStats {
            ops_aggregated: s.queued.load(Ordering::Relaxed),
            batches_sent: s.sent.load(Ordering::Relaxed),
            cleanups: s.cleanups.load(Ordering::Relaxed),
            batches_applied: s.applied.load(Ordering::Relaxed),
            ops_applied: s.ops_applied.load(Ordering::Relaxed),
            batches_refused: s.refused.load(Ordering::Relaxed),
            global_op_elements_in_use: self.op_elements.in_use(),
            global_target_elements_in_use: self.target_elements.in_use(),
        }
    }
}
