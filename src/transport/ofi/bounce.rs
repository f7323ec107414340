//! Library-owned cells for the provider to read and write blocking
//! transfers.
//!
//! A blocking get of up to [`BOUNCE_MAX`] (8 KiB on shm; a flush's control word, a
//! user's row of values) and the result of a blocking fetching atomic or
//! compare-and-swap are read by the provider into a *cell* of this pool,
//! then copied to the caller; a blocking put above the provider's inject
//! size and up to [`BOUNCE_MAX`] is copied into a cell and written from
//! there; so is a layout transfer of several ranges. The operation's context holds a reference
//! to the cell while the provider may still use it, so a wait that times
//! out (a stopped or unreachable peer) can give the operation up without
//! giving up the provider: a late completion uses the abandoned cell,
//! never memory the caller got back (`waiting::wait`). Without the cell,
//! the provider would use the caller's buffer (often a stack slot) after
//! the call returned, and the only safe answer to a timeout would be to
//! stop using the provider for every peer (as it still is above
//! [`BOUNCE_MAX`] and for the staging slots of `FI_MR_LOCAL` providers:
//! `docs/transport.md`).
//!
//! Small cells ([`CELL_BYTES`]) are many and kept; large ones are sized to
//! their transfer (a power of two) and kept up to [`BIG_CACHE_BYTES`].
//!
//! Invariant: a cell is in a free list only while no context refers to
//! it (when it is given back, the pool's registry and the giver are its
//! only references); a cell whose operation was abandoned is never reused
//! and never freed before the pool. Every such cell lives until the pool
//! is dropped, which the transport does after closing its endpoint: a
//! provider still holding an abandoned read at shutdown writes memory that
//! is still there. A steady state allocates nothing: cells come back to
//! the lists.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// Bytes per small cell: the largest blocking read or write (and the
/// largest fetching atomic's operand, compare value and result together)
/// that travels through one of the pool's many small cells. A copy of up
/// to this many bytes costs well under a microsecond.
pub const CELL_BYTES: usize = 8192;

/// The largest blocking transfer that goes through a cell on a network
/// provider (`Props::bounce_max`; on shm, [`CELL_BYTES`]). Up to here the
/// copy costs nothing measurable over tcp (source and cell fit in a
/// core's L2 beside the transfer); at 1 MiB it adds a fifth, and the
/// caller's buffer is used in place (`docs/transport.md`).
pub const BOUNCE_MAX: usize = 256 << 10;

/// Free large cells kept for reuse, in bytes all together: a steady
/// stream of large blocking transfers allocates nothing; a larger cell is
/// freed when its operation ends (a transfer that size costs far more
/// than the allocation).
pub const BIG_CACHE_BYTES: usize = 4 * BOUNCE_MAX;

/// One cell: `len` bytes the pool allocated. The provider writes it
/// through a raw pointer between the post and the completion; this
/// process reads or writes it only before the post and after the
/// completion was counted (which the completion's counter orders), so no
/// access overlaps the provider's.
pub struct Cell {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the bytes are accessed only as the type's invariant says (before
// the post or after the completion, ordered by the completion counter's
// acquire/release), never by two threads at once; the provider's writes
// happen between those points. The allocation itself is owned by the cell.
unsafe impl Send for Cell {}
// SAFETY: as for Send.
unsafe impl Sync for Cell {}

impl Cell {
    fn new(len: usize) -> Cell {
        let bytes: Box<[u8]> = vec![0u8; len].into_boxed_slice();
        let ptr = NonNull::from(Box::leak(bytes)).cast::<u8>();
        Cell { ptr, len }
    }

    /// The cell's bytes, for the provider.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Copies `data` into the cell from byte `at` (before the post).
    ///
    /// # Safety
    /// No operation on this cell may be in flight: the caller took the
    /// cell from the pool ([`Bounce::take`]) and has not posted it yet, or
    /// its operation's completion was counted. The provider writes the
    /// cell through a raw pointer while an operation is in flight.
    ///
    /// # Panics
    /// If `at + data.len()` exceeds the cell (the callers size cells from
    /// what they copy).
    pub unsafe fn fill(&self, at: usize, data: &[u8]) {
        assert!(at + data.len() <= self.len, "bounce cell overrun");
        // SAFETY: in bounds (checked); no operation on this cell is in
        // flight (the caller's contract): nothing else reads or writes it.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(at), data.len()) }
    }

    /// Copies bytes `at..at + out.len()` of the cell to `out` (after the
    /// completion was counted).
    ///
    /// # Safety
    /// As [`Cell::fill`]: no operation on this cell in flight (its
    /// completion was counted, which orders the provider's writes before
    /// this read).
    ///
    /// # Panics
    /// As [`Cell::fill`].
    pub unsafe fn read(&self, at: usize, out: &mut [u8]) {
        assert!(at + out.len() <= self.len, "bounce cell overrun");
        // SAFETY: in bounds (checked); no operation on this cell is in
        // flight (the caller's contract): the provider no longer writes it.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(at), out.as_mut_ptr(), out.len()) }
    }
}

impl Drop for Cell {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `len` came from the boxed slice leaked in
        // `Cell::new`, freed once, here; the pool drops a cell only when
        // no context refers to it and the endpoint is closed or the cell
        // was never abandoned (module invariant).
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len)) });
    }
}

/// The pool: small cells of [`CELL_BYTES`], and large cells sized to the
/// transfers that need them.
#[derive(Default)]
pub struct Bounce {
    /// Every cell made and not freed (see the module's invariant).
    all: Mutex<Vec<Arc<Cell>>>,
    free: Mutex<Vec<Arc<Cell>>>,
    /// Free large cells, and their bytes all together.
    big: Mutex<(Vec<Arc<Cell>>, usize)>,
}

impl Bounce {
    /// A cell of at least `len` bytes that nobody else uses (from a list,
    /// else a new one).
    pub fn take(&self, len: usize) -> Arc<Cell> {
        let reused = if len <= CELL_BYTES {
            self.free.lock().ok().and_then(|mut f| f.pop())
        } else {
            self.big.lock().ok().and_then(|mut b| {
                // The smallest free cell that fits.
                let (cells, bytes) = &mut *b;
                let i = (0..cells.len())
                    .filter(|&i| cells[i].len >= len)
                    .min_by_key(|&i| cells[i].len)?;
                let c = cells.swap_remove(i);
                *bytes -= c.len;
                Some(c)
            })
        };
        if let Some(c) = reused {
            return c;
        }
        let size = if len <= CELL_BYTES {
            CELL_BYTES
        } else {
            len.next_power_of_two()
        };
        let c = Arc::new(Cell::new(size));
        if let Ok(mut all) = self.all.lock() {
            all.push(c.clone());
        }
        c
    }

    /// Gives `cell` back after its operation ended. A cell that an
    /// abandoned operation's context still refers to is not reused (nor
    /// freed before the pool is dropped).
    pub fn give(&self, cell: Arc<Cell>) {
        // The registry's reference and ours: no context holds it.
        if Arc::strong_count(&cell) != 2 {
            return;
        }
        if cell.len <= CELL_BYTES {
            if let Ok(mut f) = self.free.lock() {
                f.push(cell);
            }
            return;
        }
        if let Ok(mut b) = self.big.lock() {
            let (cells, bytes) = &mut *b;
            if *bytes + cell.len <= BIG_CACHE_BYTES {
                *bytes += cell.len;
                cells.push(cell);
                return;
            }
        }
        // Over the cache's budget: freed (nobody else refers to it).
        if let Ok(mut all) = self.all.lock() {
            all.retain(|c| !Arc::ptr_eq(c, &cell));
        }
    }

    /// Cells made and not freed (for tests).
    #[cfg(test)]
    pub fn made(&self) -> usize {
        self.all.lock().map_or(0, |a| a.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_still_referred_to_is_never_reused() {
        let pool = Bounce::default();
        let a = pool.take(3);
        // SAFETY: no operation is ever posted on cells of this test.
        unsafe { a.fill(0, &[1, 2, 3]) };
        let held = a.clone(); // an abandoned operation's context
        let pa = Arc::as_ptr(&a);
        pool.give(a);
        let b = pool.take(3);
        assert_ne!(Arc::as_ptr(&b), pa, "handed out while still referred to");
        let mut out = [0u8; 3];
        // SAFETY: as above.
        unsafe { held.read(0, &mut out) };
        assert_eq!(out, [1, 2, 3]);
        // Given back with no other reference: reused, no allocation.
        let pb = Arc::as_ptr(&b);
        pool.give(b);
        assert_eq!(Arc::as_ptr(&pool.take(8)), pb);
        assert_eq!(pool.made(), 2);
        // The abandoned cell outlives its context (the pool keeps it).
        drop(held);
        assert_eq!(pool.made(), 2);
    }

    #[test]
    fn large_cells_fit_their_transfer_and_the_cache_is_bounded() {
        let pool = Bounce::default();
        let a = pool.take(CELL_BYTES + 1);
        assert_eq!(a.len, 2 * CELL_BYTES);
        let data: Vec<u8> = (0..CELL_BYTES + 1).map(|i| i as u8).collect();
        let mut out = vec![0u8; data.len()];
        // SAFETY: no operation is ever posted on cells of this test.
        unsafe {
            a.fill(0, &data);
            a.read(0, &mut out);
        }
        assert_eq!(out, data);
        let pa = Arc::as_ptr(&a);
        pool.give(a);
        // Reused for a transfer it fits, not for a larger one.
        let b = pool.take(CELL_BYTES + 100);
        assert_eq!(Arc::as_ptr(&b), pa);
        let c = pool.take(4 * CELL_BYTES);
        assert_eq!(c.len, 4 * CELL_BYTES);
        assert_eq!(pool.made(), 2);
        // Over the cache's budget: freed when given back.
        let huge = pool.take(BIG_CACHE_BYTES);
        assert_eq!(pool.made(), 3);
        pool.give(b);
        pool.give(huge);
        assert_eq!(pool.made(), 2);
        // An abandoned large cell is neither reused nor freed.
        let held = c.clone();
        let pc = Arc::as_ptr(&c);
        pool.give(c);
        assert_ne!(Arc::as_ptr(&pool.take(4 * CELL_BYTES)), pc);
        drop(held);
        assert_eq!(pool.made(), 3);
    }
}
