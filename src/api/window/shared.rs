//! Shared-memory windows: `allocate_shared` and `shared_query`
//! (`MPI_Win_allocate_shared`, `MPI_Win_shared_query`).
//!
//! Every rank's segment is a node-shared memfd (`transport::shm`); a rank
//! maps a peer's segment on its first `shared_query` (cached like any other
//! mapping) and gets a [`SharedSegment`]: a handle that keeps the mapping
//! alive, with bounds-checked copies and the raw pointer for direct loads
//! and stores. Segments are not contiguous across ranks (as with MPI's
//! `alloc_shared_noncontig` info key).
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

use super::{direct, Window};
use crate::api::element::Element;
use crate::api::world::World;
use crate::error::{Error, Result};
use crate::transport::Memory;
use crate::window::mappings::FLAG_SHARED;

enum Segment<'w> {
    Own(&'w Memory<'w>),
    Peer(Arc<Memory<'static>>),
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

    /// Start of the segment in this process (page-aligned), valid for
    /// `len()` elements while the handle lives. Other ranks read and write
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
    /// (collective). Needs every rank of the job on this node. RMA
    /// operations work as on any window (by load/store and CPU atomics
    /// unless `ONESIDED_SHM=0`, which leaves them to the provider).
    pub fn allocate_shared(world: &'a World, len: usize) -> Result<Self> {
        if !world.node.all_local() {
            return Err(Error::Unsupported(format!(
                "allocate_shared: the {} ranks of the job are not all on this node \
                 (a shared-memory window needs every rank node-local)",
                world.size()
            )));
        }
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::InvalidArgument(format!("shared window of {len} {} overflows", T::NAME))
        })?;
        Self::build(
            world,
            direct::window_memory(world, bytes, true)?,
            len,
            0,
            &super::WindowInfo::default(),
        )
    }

    /// The segment of `rank` (this rank or a node-local one) for direct
    /// load/store. Errors for a window that is not node-shared (`create`,
    /// or `allocate` with `ONESIDED_SHM=0`) and for ranks on other nodes.
    /// Not an RMA operation: allowed in any epoch.
    pub fn shared_query(&self, rank: usize) -> Result<SharedSegment<'_, T>> {
        self.alive("shared_query")?;
        self.check_rank(rank)?;
        if self.desc.flags & FLAG_SHARED == 0 {
            return Err(Error::InvalidArgument(format!(
                "window {}: shared_query of rank {rank}: the window's memory is not node-shared \
                 (use allocate_shared; allocate is shared unless ONESIDED_SHM=0)",
                self.id
            )));
        }
        let size = std::mem::size_of::<T>();
        if rank == self.world.rank() {
            return Ok(SharedSegment {
                seg: Segment::Own(&self.mem),
                rank,
                len: self.len,
                _t: PhantomData,
            });
        }
        if !self.world.node.is_local(rank) {
            return Err(Error::InvalidArgument(format!(
                "window {}: shared_query of rank {rank}: not on this node (rank {} is)",
                self.id,
                self.world.rank()
            )));
        }
        let d = self.target(rank)?;
        let m = self.world.mappings.get(rank, &d)?;
        Ok(SharedSegment {
            seg: Segment::Peer(m),
            rank,
            len: d.len as usize / size,
            _t: PhantomData,
        })
    }
}
