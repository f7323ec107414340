//! The node-shared control region: with the direct path on, each process's
//! control region (barrier flags, window directory, lock words) is a memfd
//! too, published under the bootstrap key `osh-<rank>` (its locator, hex).
//! A node-local peer maps it lazily (cache key: window 0, which no window
//! uses) and then
//! * writes barrier flags with a release store instead of a provider write
//!   (each flag word has exactly one writer, so mixing paths across peers
//!   is harmless);
//! * when *every* rank is on this node, drives the window lock words with
//!   CPU atomics (`transport::cpu_atomic`) — never mixed with provider
//!   atomics on the same word, because then no rank uses the provider for
//!   them. Windows carry `FLAG_CPU_SYNC` so ranks that disagree (a
//!   different `ONESIDED_SHM`) get an error instead of broken locks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::world::World;
use crate::bootstrap::Bootstrap;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::transport::{shm, Memory};

/// Mapping-cache key of control regions (window ids start at 1).
const CTRL_WINDOW: u64 = 0;

/// The mapping cache's key of `rank`'s control region.
pub(crate) fn ctrl_key(rank: usize) -> (u64, usize) {
    (CTRL_WINDOW, rank)
}

fn shm_key(rank: usize) -> String {
    format!("osh-{rank}")
}

fn ctrl_name(rank: usize) -> String {
    format!("onesided-ctrl-r{rank}")
}

/// This process's control region: node-shared unless `ONESIDED_SHM=0`.
pub(crate) fn control_region(config: &Config, rank: usize) -> Result<Memory<'static>> {
    let bytes = config.layout().region_bytes();
    if config.shm {
        shm::allocate(bytes, &ctrl_name(rank))
    } else {
        Memory::allocate(bytes)
    }
}

/// Publishes where node-local peers find our control region.
pub(crate) fn publish(boot: &dyn Bootstrap, ctrl: &Memory<'_>) -> Result<()> {
    match shm::locator(ctrl) {
        Some(loc) => boot.put(&shm_key(boot.rank()), &format!("{loc:x}")),
        None => Ok(()),
    }
}

impl World {
    /// Whether lock words are driven by CPU atomics (identical on every
    /// rank: depends on the configuration and the placement only).
    pub(crate) fn sync_words_by_cpu(&self) -> bool {
        self.config.shm && self.node.all_local()
    }

    /// Runs `f` on `rank`'s control region if it is node-local and shared
    /// (our own for ourselves); `None` when it must be reached through the
    /// provider.
    pub(crate) fn with_local_ctrl<R>(
        &self,
        rank: usize,
        f: impl FnOnce(&Memory<'_>) -> Result<R>,
    ) -> Result<Option<R>> {
        if rank == self.rank() && self.config.shm {
            return f(self.control_memory()).map(Some);
        }
        match self.peer_ctrl(rank)? {
            Some(m) => f(&m).map(Some),
            None => Ok(None),
        }
    }

    /// The mapping of a node-local peer's control region (through the
    /// world's mapping cache); `None` for ourselves and for peers reached
    /// through the provider.
    pub(crate) fn peer_ctrl(&self, rank: usize) -> Result<Option<Arc<Memory<'static>>>> {
        if !self.config.shm || !self.node.is_local(rank) || rank == self.rank() {
            return Ok(None);
        }
        let locate = || {
            let v = self.boot.get(&shm_key(rank))?;
            u64::from_str_radix(&v, 16).map_err(|_| Error::Protocol {
                peer: format!("rank {rank}"),
                message: format!("control region locator {v:?} is not hexadecimal"),
            })
        };
        if let Some(m) = self.ctrl_slots.get(rank) {
            return Ok(Some(m));
        }
        let len = self.config.layout().region_bytes();
        let m = self
            .mappings
            .get_or_map((CTRL_WINDOW, rank), locate, || ctrl_name(rank), len)?;
        self.ctrl_slots.offer(rank, &m);
        Ok(Some(m))
    }

    fn ctrl_word<R>(&self, rank: usize, f: impl FnOnce(&Memory<'_>) -> Result<R>) -> Result<R> {
        self.with_local_ctrl(rank, f)?.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "rank {rank}: sync words use CPU atomics but its control region is not mapped"
            ))
        })
    }

    /// Fetch-and-add on the u64 at byte `off` of `rank`'s control region.
    pub(crate) fn ctrl_fetch_add(&self, rank: usize, off: usize, delta: u64) -> Result<u64> {
        self.ctrl_word(rank, |m| word_fetch_add(m, off, delta))
    }

    /// Compare-and-swap on the u64 at byte `off` of `rank`'s control region.
    pub(crate) fn ctrl_compare_swap(
        &self,
        rank: usize,
        off: usize,
        compare: u64,
        swap: u64,
    ) -> Result<u64> {
        self.ctrl_word(rank, |m| word_compare_swap(m, off, compare, swap))
    }
}

/// Fetch-and-add on the u64 at byte `off` of a control region (one `lock
/// xadd`: sync words are plain u64s, no need for the general accumulate's
/// dispatch); the old value.
#[inline]
pub(crate) fn word_fetch_add(m: &Memory<'_>, off: usize, delta: u64) -> Result<u64> {
    Ok(m.cells::<AtomicU64>(off, 1)?[0].fetch_add(delta, Ordering::AcqRel))
}

/// Compare-and-swap on the u64 at byte `off` of a control region; the old
/// value.
#[inline]
pub(crate) fn word_compare_swap(m: &Memory<'_>, off: usize, compare: u64, swap: u64) -> Result<u64> {
    let word = &m.cells::<AtomicU64>(off, 1)?[0];
    Ok(
        match word.compare_exchange(compare, swap, Ordering::AcqRel, Ordering::Acquire) {
            Ok(old) | Err(old) => old,
        },
    )
}
