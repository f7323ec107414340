//! The intra-node direct path: put/get to a node-local peer are copies into
//! and out of its mapped segment, and — when every rank of the window is on
//! this node — every accumulate (also to oneself) is a CPU atomic on the
//! target memory (`transport::cpu_atomic`). See `docs/shm.md`.
//!
//! Why accumulates need *all* ranks local: MPI makes concurrent accumulates
//! to one location atomic with respect to each other. A CPU atomic is not
//! atomic with respect to the provider's atomics (on tcp and sockets those
//! are plain read-modify-writes run by the target's progress thread; on a
//! NIC they are the NIC's), so a location must never see both. With a
//! remote rank in the window, its accumulates can only arrive through the
//! provider, so local ones must go there too.
//!
//! Memory barriers: a direct put/get is complete when the call returns
//! (`Memory::write` ends with a release fence, `Memory::read` starts with an
//! acquire fence; a deferred `put_layout`, `deferred.rs`, when the epoch's
//! completing call writes it); every completing call (flush family, unlock, unlock_all,
//! fence, free) issues a sequentially consistent fence before it
//! synchronizes with the target (`complete_local`), so the target sees the
//! stores once it sees the synchronization.

use super::Window;
use crate::api::element::Element;
use crate::api::group::Team;
use crate::api::world::World;
use crate::error::{Error, Result};
use crate::meta::directory::Descriptor;
use crate::meta::mappings::{FLAG_CONTIG, FLAG_CPU_ATOMICS, FLAG_CPU_SYNC, FLAG_SHARED};
use crate::meta::targets::Mapped;
use crate::transport::{cpu_atomic, shm, Atomic, Memory};

/// Window memory for `allocate`: a node-shared segment unless
/// `ONESIDED_SHM=0` (or `shared`, for `allocate_shared`, which always is).
pub(super) fn window_memory(team: Team<'_>, bytes: usize, shared: bool) -> Result<Memory<'static>> {
    let world = team.world;
    let mem = if shared || world.config.shm {
        shm::allocate(
            bytes,
            &shm::segment_name(team.peek_window_id(), world.rank()),
        )?
    } else {
        Memory::allocate_with(bytes, world.config.huge_pages)?
    };
    // On this process's NUMA node: first touch by the creating thread.
    crate::topology::first_touch(&mem);
    Ok(mem)
}

/// The descriptor's `flags` bits and `aux` word of the node path for a
/// window over `mem` (identical flags on every rank: they depend only on
/// the configuration and the job's placement).
pub(super) fn window_flags(world: &World, mem: &Memory<'_>) -> (u64, u64) {
    let sync = if world.sync_words_by_cpu() {
        FLAG_CPU_SYNC
    } else {
        0
    };
    let cpu = if world.config.shm && world.node.all_local() {
        FLAG_CPU_ATOMICS
    } else {
        0
    };
    if let Some((_, off)) = mem.whole() {
        // A part of a contiguous shared window: `aux` is its offset.
        return (sync | FLAG_SHARED | FLAG_CONTIG | cpu, off as u64);
    }
    match shm::locator(mem) {
        None => (sync, 0),
        Some(loc) if world.config.shm && world.node.all_local() => {
            (sync | FLAG_SHARED | FLAG_CPU_ATOMICS, loc)
        }
        Some(loc) => (sync | FLAG_SHARED, loc),
    }
}

/// Whether a window with these flags reaches node-local peers without the
/// provider: memory mapped, accumulates and lock words by CPU atomics.
pub(super) fn all_by_cpu(flags: u64) -> bool {
    let all = FLAG_SHARED | FLAG_CPU_ATOMICS | FLAG_CPU_SYNC;
    flags & all == all
}

impl<T: Element> Window<'_, T> {
    /// The mapped segment of `rank` (not ourselves) if operations to it go
    /// by load/store: the window is node-shared, the direct path is on and
    /// `rank` is on this node. Counts the operation. The window's slot of
    /// `rank` (`meta::targets`, filled on first contact) answers without
    /// a lock: borrowed if the mapping cache pinned the segment for this
    /// window, else while the cache keeps it mapped.
    #[inline(always)]
    pub(super) fn direct(&self, rank: usize, d: &Descriptor) -> Result<Option<Mapped<'_>>> {
        let m = self.mapping(rank, d)?;
        if m.is_some() {
            self.world.mappings.count_direct();
        }
        Ok(m)
    }

    /// [`Window::direct`] without counting (first contact, `target`).
    #[inline]
    pub(super) fn mapping(&self, rank: usize, d: &Descriptor) -> Result<Option<Mapped<'_>>> {
        if d.flags & FLAG_SHARED == 0 || rank == self.me {
            return Ok(None);
        }
        if let Some(t) = self.targets.get(rank) {
            match t.map.as_ref().map(|h| h.get()) {
                // Decided on first contact: not by load/store.
                None => return Ok(None),
                Some(Some(m)) => return Ok(Some(m)),
                // Evicted from the mapping cache: map it again there.
                Some(None) => {}
            }
        }
        self.mapping_uncached(rank, d)
    }

    /// [`Window::mapping`] without the window's slot: through the world's
    /// mapping cache (first contact, or after an eviction).
    #[inline(never)]
    fn mapping_uncached(&self, rank: usize, d: &Descriptor) -> Result<Option<Mapped<'_>>> {
        if !self.world.config.shm || !self.world.node.is_local(rank) {
            return Ok(None);
        }
        Ok(Some(Mapped::Held(self.peer_memory(rank, d)?)))
    }

    /// Whether accumulates to this window are CPU atomics (decided
    /// identically on every rank, see the module doc).
    pub(super) fn cpu_atomics(&self) -> bool {
        self.desc.flags & FLAG_CPU_ATOMICS != 0
    }

    /// Runs `f` on the memory of `rank`'s window: ours, or the mapping.
    #[inline(always)]
    fn on_target<R>(
        &self,
        rank: usize,
        d: &Descriptor,
        f: impl FnOnce(&Memory<'_>) -> Result<R>,
    ) -> Result<R> {
        self.world.mappings.count_atomic();
        // One call site of `f`, so that it is inlined and a typed caller's
        // datatype and count fold away (callgrind: a CPU `fetch_and_op`
        // ~100 instructions fewer than with `f` called from both arms).
        let mapped;
        let mem: &Memory<'_> = if rank == self.me {
            &self.mem
        } else {
            match self.direct(rank, d)? {
                Some(m) => {
                    mapped = m;
                    &mapped
                }
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "window {}: accumulates use CPU atomics but rank {rank} is not mapped",
                        self.id
                    )))
                }
            }
        };
        f(mem)
    }

    /// An accumulate (fetching into `fetched` if given) by CPU atomics.
    #[inline(always)]
    pub(super) fn cpu_accumulate(
        &self,
        (rank, off, d): (usize, usize, &Descriptor),
        what: Atomic,
        src: &[u8],
        fetched: Option<&mut [u8]>,
    ) -> Result<()> {
        self.on_target(
            rank,
            d,
            #[inline(always)]
            |m| cpu_atomic::accumulate(m, off, what, src, fetched),
        )
    }

    /// A compare-and-swap of one element by a CPU atomic.
    #[inline(always)]
    pub(super) fn cpu_compare_swap(
        &self,
        (rank, off, d): (usize, usize, &Descriptor),
        compare: &[u8],
        swap: &[u8],
        old: &mut [u8],
    ) -> Result<()> {
        self.on_target(
            rank,
            d,
            #[inline(always)]
            |m| cpu_atomic::compare_swap(m, off, T::DATATYPE, compare, swap, old),
        )
    }
}
