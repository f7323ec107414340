//! Shared-memory windows: `allocate_shared` and `shared_query`
//! (`MPI_Win_allocate_shared`, `MPI_Win_shared_query`).
//!
//! By default the segments are contiguous across ranks, as MPI's default:
//! one node-shared memfd (`transport::shm`) holds every rank's part in rank
//! order, with no padding (every part is whole elements of one type, the
//! segment page-aligned, so every part is aligned for `T`). The sizes are
//! exchanged through a temporary two-word window (each rank reads the sizes
//! of the ranks of its node: O(ranks per node)); the node leader (rank 0 —
//! every rank is node-local) creates the memfd and publishes its locator
//! there; every other rank maps it whole. Each rank's window memory is its
//! part (`Memory::part`, registered with the provider like any window), and
//! its descriptor's `aux` word is the part's offset (`FLAG_CONTIG`), so a
//! peer's part is a view of the process's own mapping of the segment:
//! `shared_query(r + 1).as_ptr()` is `shared_query(r).as_ptr()` plus rank
//! r's length, in every process.
//!
//! With the hint `alloc_shared_noncontig` every rank's segment is its own
//! memfd (as `allocate`'s with the direct path on); a rank maps a peer's on
//! its first `shared_query` (cached like any other mapping).
//!
//! Either way `shared_query` returns a [`SharedSegment`]: a handle that
//! keeps the mapping alive, with bounds-checked copies and the raw pointer
//! for direct loads and stores.
//!
//! Memory-barrier rules (MPI's unified model): a store through one rank's
//! handle is seen by a load through another's after a synchronization
//! between the two — fence, lock/unlock, flush on the writer followed by a
//! synchronization the reader observes, or an application-level flag with
//! release/acquire ordering. [`SharedSegment::write`] ends with a release
//! fence and [`SharedSegment::read`] starts with an acquire fence; the
//! window's completing calls (flush family, unlock, fence) issue a full
//! fence. Raw-pointer users must order their own accesses (e.g.
//! `std::sync::atomic::fence`) and must not form Rust references to memory
//! another process writes concurrently.

use std::marker::PhantomData;
use std::sync::Arc;

use super::{direct, Window, WindowInfo};
use crate::api::element::Element;
use crate::api::group::{Comm, Team};
use crate::error::{Error, Result};
use crate::meta::directory::Descriptor;
use crate::meta::mappings::{FLAG_CONTIG, FLAG_SHARED};
use crate::transport::{shm, Memory};

enum Segment<'w> {
    Own(&'w Memory<'w>),
    Peer(Arc<Memory<'static>>),
}

/// This rank's part of a new contiguous node segment of `bytes` bytes
/// (collective, every rank node-local; elements of `unit` bytes). See the
/// module doc.
fn contiguous_part(team: Team<'_>, bytes: usize, unit: usize) -> Result<Memory<'static>> {
    // Words: [0] this rank's bytes, [1] (leader) the segment's locator.
    let mut tmp = Window::<u64>::allocate(team, 2)?;
    let id = team.peek_window_id(); // the shared window's, built next
    let laid = lay_out(team, &tmp, id, bytes, unit);
    let freed = tmp.free();
    let (whole, off) = laid?;
    freed?;
    Memory::part(&whole, off, bytes)
}

/// The exchange through `tmp`: returns the segment and this rank's offset.
fn lay_out(
    team: Team<'_>,
    tmp: &Window<'_, u64>,
    id: u64,
    bytes: usize,
    unit: usize,
) -> Result<(Arc<Memory<'static>>, usize)> {
    const LEADER: usize = 0;
    let me = team.rank();
    let name = shm::node_segment_name(id);
    tmp.local_write(0, &[bytes as u64])?;
    team.barrier()?;
    // Every rank is node-local: the node's ranks are the team's 0..size. Every rank
    // reads the same parts, so all of them fail here alike or none does;
    // the epoch is closed either way (an early return with lock_all open
    // would leave `tmp` unfreeable while peers still read it).
    tmp.lock_all()?;
    let sums = (|| -> Result<(usize, usize)> {
        let (mut off, mut total) = (0usize, 0usize);
        for r in 0..team.size() {
            let mut v = [0u64];
            tmp.get(r, 0, &mut v)?;
            let part = usize::try_from(v[0])
                .ok()
                .filter(|b| b % unit == 0)
                .ok_or_else(|| Error::Protocol {
                    peer: format!("rank {r}"),
                    message: format!("shared window {id}: part size {} bytes", v[0]),
                })?;
            if r == me {
                // The sum of the parts before ours (checked below as it grew).
                off = total;
            }
            total = total.checked_add(part).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "shared window {id}: the parts overflow ({} bytes on this rank)",
                    bytes
                ))
            })?;
        }
        Ok((off, total))
    })();
    let unlocked = tmp.unlock_all();
    let (off, total) = sums?;
    unlocked?;
    // One spare byte: a zero-length last part still registers a mapped byte.
    let seg_len = total
        .checked_add(1)
        .ok_or_else(|| Error::InvalidArgument(format!("shared window {id}: the parts overflow")))?;
    let mut created = None;
    if me == LEADER {
        // Locator 0 tells the others the segment could not be created.
        let made = shm::allocate(seg_len, &name);
        let loc = made.as_ref().ok().and_then(shm::locator).unwrap_or(0);
        tmp.local_write(1, &[loc])?;
        created = Some(made);
    }
    team.barrier()?;
    let whole = match created {
        Some(made) => made?,
        None => {
            let mut loc = [0u64];
            tmp.lock_all()?;
            let got = tmp.get(LEADER, 1, &mut loc);
            tmp.unlock_all()?;
            got?;
            if loc[0] == 0 {
                return Err(Error::Exhausted(format!(
                    "shared window {id}: rank {LEADER} could not create the node segment of \
                     {seg_len} bytes"
                )));
            }
            shm::map_peer(loc[0], &name, seg_len)?
        }
    };
    Ok((Arc::new(whole), off))
}

/// One node-local rank's segment of a node-shared window, from
/// [`Window::shared_query`]. Valid while the handle lives (it keeps the
/// mapping even if the cache evicts it); the window cannot be freed while a
/// handle borrows it.
pub struct SharedSegment<'w, T: Element> {
    seg: Segment<'w>,
    rank: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Element> SharedSegment<'_, T> {
    fn mem(&self) -> &Memory<'_> {
        match &self.seg {
            Segment::Own(m) => m,
            Segment::Peer(m) => m,
        }
    }

    /// The rank whose segment this is.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of `T` elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty segment.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Start of the segment in this process, valid for `len()` elements
    /// while the handle lives. Contiguous windows (the default): rank
    /// `r + 1`'s segment starts right after rank `r`'s last element, so
    /// rank 0's pointer reaches every rank's segment; the node segment is
    /// page-aligned. With `alloc_shared_noncontig` every segment is
    /// page-aligned and separate. Other ranks read and write
    /// this memory: access it with raw-pointer reads/writes or atomics,
    /// never through `&`/`&mut` references.
    pub fn as_ptr(&self) -> *mut T {
        self.mem().as_ptr().cast()
    }

    /// Copies elements starting at `disp` into `out` (acquire fence first).
    pub fn read(&self, disp: usize, out: &mut [T]) -> Result<()> {
        let off = self.range(disp, out.len())?;
        self.mem().read(off, bytemuck::cast_slice_mut(out))
    }

    /// Copies `data` into the segment at `disp` (release fence after).
    pub fn write(&self, disp: usize, data: &[T]) -> Result<()> {
        let off = self.range(disp, data.len())?;
        self.mem().write(off, bytemuck::cast_slice(data))
    }

    /// A copy of the whole segment.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.len];
        self.read(0, &mut v)?;
        Ok(v)
    }

    fn range(&self, disp: usize, n: usize) -> Result<usize> {
        match disp.checked_add(n) {
            Some(end) if end <= self.len => Ok(disp * std::mem::size_of::<T>()),
            _ => Err(Error::InvalidArgument(format!(
                "shared segment of rank {}: elements {disp}..{disp}+{n} outside its {} elements",
                self.rank, self.len
            ))),
        }
    }
}

impl<'a, T: Element> Window<'a, T> {
    /// Allocates a window of `len` zeroed elements whose segments every rank
    /// can load and store directly through [`Window::shared_query`]
    /// (collective), contiguous across ranks in rank order. Needs every
    /// rank of the job on this node. RMA operations work as on any window
    /// (by load/store and CPU atomics unless `ONESIDED_SHM=0`, which leaves
    /// them to the provider).
    pub fn allocate_shared(comm: impl Comm<'a>, len: usize) -> Result<Self> {
        Self::allocate_shared_with(comm, len, &WindowInfo::default())
    }

    /// [`Window::allocate_shared`] with hints: the accumulate hints and
    /// `alloc_shared_noncontig` (separate segments, see `docs/shm.md`).
    /// Every rank must pass the same hints.
    pub fn allocate_shared_with(comm: impl Comm<'a>, len: usize, info: &WindowInfo) -> Result<Self> {
        let team = comm.team();
        let world = team.world;
        // The same answer on every rank of the team.
        if !(0..team.size()).all(|r| world.node.is_local(team.world_rank(r))) {
            return Err(Error::Unsupported(format!(
                "allocate_shared: the {} ranks of {} are not all on this node \
                 (a shared-memory window needs every rank node-local)",
                team.size(),
                team.describe()
            )));
        }
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::InvalidArgument(format!("shared window of {len} {} overflows", T::NAME))
        })?;
        let mem = if info.shared_noncontig() {
            direct::window_memory(team, bytes, true)?
        } else {
            contiguous_part(team, bytes, std::mem::size_of::<T>())?
        };
        let mut win = Self::build(team, mem, len, 0, info)?;
        win.flavor = super::Flavor::Shared;
        Ok(win)
    }

    /// The memory of `rank`'s window (not ours) in this process, for the
    /// direct path and `shared_query`: a view of our mapping of the node
    /// segment for a contiguous window, else the peer's own segment mapped
    /// through the cache. The offset and length come from the peer's
    /// descriptor and are checked against the segment.
    pub(super) fn peer_memory(&self, rank: usize, d: &Descriptor) -> Result<Arc<Memory<'static>>> {
        if d.flags & FLAG_CONTIG == 0 {
            return self.world.mappings.get(rank, d);
        }
        let bad = |what: String| Error::Protocol {
            peer: format!("rank {rank}"),
            message: format!("window {}: {what}", self.id),
        };
        let Some((whole, _)) = self.mem.whole() else {
            return Err(bad("contiguous shared window, but not here".into()));
        };
        let (off, len) = (d.aux as usize, d.len as usize);
        if d.aux > usize::MAX as u64 || off % std::mem::size_of::<T>() != 0 {
            return Err(bad(format!("part offset {} is not aligned", d.aux)));
        }
        self.world.mappings.get_or_insert((d.id, rank), || {
            Memory::part(whole, off, len).map_err(|_| {
                bad(format!(
                    "part of {len} bytes at byte {off} outside the node segment of {} bytes",
                    whole.len()
                ))
            })
        })
    }

    /// The segment of `rank` (this rank or a node-local one) for direct
    /// load/store. Errors for a window that is not node-shared (`create`,
    /// or `allocate` with `ONESIDED_SHM=0`) and for ranks on other nodes.
    /// Not an RMA operation: allowed in any epoch.
    pub fn shared_query(&self, rank: usize) -> Result<SharedSegment<'_, T>> {
        self.alive("shared_query")?;
        let w = self.check_rank(rank)?;
        if self.desc.flags & FLAG_SHARED == 0 {
            return Err(Error::InvalidArgument(format!(
                "window {}: shared_query of rank {rank}: the window's memory is not node-shared \
                 (use allocate_shared; allocate is shared unless ONESIDED_SHM=0)",
                self.id
            )));
        }
        let size = std::mem::size_of::<T>();
        if w == self.world.rank() {
            return Ok(SharedSegment {
                seg: Segment::Own(&self.mem),
                rank,
                len: self.len,
                _t: PhantomData,
            });
        }
        if !self.world.node.is_local(w) {
            return Err(Error::InvalidArgument(format!(
                "window {}: shared_query of rank {rank}: not on this node (rank {} is)",
                self.id,
                self.world.rank()
            )));
        }
        let d = self.target(w)?;
        let m = self.peer_memory(w, &d)?;
        Ok(SharedSegment {
            seg: Segment::Peer(m),
            rank,
            len: d.len as usize / size,
            _t: PhantomData,
        })
    }
}
