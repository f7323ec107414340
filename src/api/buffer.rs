//! Memory for origin buffers, as `MPI_Alloc_mem` gives it: [`World::alloc_mem`].

use std::fmt;
use std::ops::{Deref, DerefMut};

use crate::api::element::Element;
use crate::api::world::World;
use crate::error::Result;
use crate::transport::memory::Private;

/// An owned, zeroed array of `T` allocated the way the library allocates
/// window memory: page-aligned and, from 4 MiB, on 2-MiB boundaries
/// advised for transparent huge pages (`ONESIDED_HUGEPAGES=0` turns that
/// off). It dereferences to `[T]` and is used wherever a slice is: as the
/// origin of a put or accumulate, the destination of a get.
///
/// The counterpart of `MPI_Alloc_mem`/`MPI_Free_mem` (freed on drop).
/// Worth it for large buffers read or written with a stride: a halo
/// column of a 1024 × 1026 f64 matrix touches one 4-KiB page per element
/// on small pages, five huge pages in all on huge ones (docs/performance.md,
/// "Origin buffers on huge pages").
///
/// ```no_run
/// # fn main() -> onesided::Result<()> {
/// let world = onesided::World::init()?;
/// let mut grid = world.alloc_mem::<f64>(1024 * 1026)?;
/// grid[1] = 1.0;
/// assert_eq!(grid.len(), 1024 * 1026);
/// # Ok(()) }
/// ```
pub struct Buffer<T: Element> {
    mem: Private<T>,
}

impl<T: Element> Buffer<T> {
    /// The elements (also through `Deref`).
    pub fn as_slice(&self) -> &[T] {
        self.mem.as_slice()
    }

    /// The elements, mutably (also through `DerefMut`).
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.mem.as_mut_slice()
    }
}

impl<T: Element> Deref for Buffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Element> DerefMut for Buffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Element> fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("type", &T::NAME)
            .field("len", &self.len())
            .finish()
    }
}

impl World {
    /// `len` zeroed elements of `T` in memory allocated as the library
    /// allocates windows (`MPI_Alloc_mem`): see [`Buffer`]. Local: no
    /// communication, and nothing is exposed to peers.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] if `len` elements overflow the
    /// address space; [`crate::Error::Exhausted`] if the memory cannot be
    /// allocated.
    pub fn alloc_mem<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        Ok(Buffer {
            mem: Private::zeroed(len, self.config.huge_pages)?,
        })
    }
}
