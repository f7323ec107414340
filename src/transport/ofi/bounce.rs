//! Library-owned cells for the provider to read and write small transfers.
//!
//! A blocking get of up to [`CELL_BYTES`] (a flush's control word, a
//! user's row of values) and the result of a blocking fetching atomic or
//! compare-and-swap are read by the provider into a *cell* of this pool,
//! then copied to the caller; a blocking put of up to [`CELL_BYTES`] above
//! the provider's inject size is copied into a cell and written from
//! there. The operation's context holds a reference to the cell while the
//! provider may still use it, so a wait that times out (a stopped or
//! unreachable peer) can give the operation up without giving up the
//! provider: a late completion uses the abandoned cell, never memory the
//! caller got back (`waiting::wait`). Without the cell, the provider would
//! use the caller's buffer (often a stack slot) after the call returned,
//! and the only safe answer to a timeout would be to stop using the
//! provider for every peer (as it still is for larger blocking transfers:
//! `docs/transport.md`).
//!
//! Invariant: a cell is in the free list only while no context refers to
//! it (when it is given back, the pool's registry and the giver are its
//! only references); a cell whose operation was abandoned is never reused.
//! Every cell lives until the pool is dropped, which the transport does
//! after closing its endpoint: a provider still holding an abandoned read
//! at shutdown writes memory that is still there. A steady state allocates
//! nothing: cells come back to the list.

use std::cell::UnsafeCell;
use std::sync::{Arc, Mutex};

/// Bytes per cell: the largest blocking read or write (and the largest
/// fetching atomic's operand, compare value and result together) that
/// travels through a cell. A copy of up to this many bytes costs well
/// under a microsecond, a fraction of a transfer on the providers without
/// `FI_MR_LOCAL` that use cells (tcp, sockets, shm); larger transfers use
/// the caller's buffer in place.
pub const CELL_BYTES: usize = 8192;

/// One cell. The provider writes it through a raw pointer between the post
/// and the completion; this process reads or writes it only before the
/// post and after the completion was counted (which the completion's
/// counter orders), so no access overlaps the provider's.
pub struct Cell {
    bytes: UnsafeCell<[u8; CELL_BYTES]>,
}

// SAFETY: the bytes are accessed only as the type's invariant says (before
// the post or after the completion, ordered by the completion counter's
// acquire/release), never by two threads at once; the provider's writes
// happen between those points.
unsafe impl Sync for Cell {}

impl Cell {
    /// The cell's bytes, for the provider.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.bytes.get().cast()
    }

    /// Copies `data` into the cell from byte `at` (before the post).
    ///
    /// # Panics
    /// Never for `at + data.len() ≤ CELL_BYTES` (the callers' check).
    pub fn fill(&self, at: usize, data: &[u8]) {
        // SAFETY: no operation on this cell is posted yet (type invariant):
        // nothing else reads or writes it now.
        let bytes = unsafe { &mut *self.bytes.get() };
        bytes[at..at + data.len()].copy_from_slice(data);
    }

    /// Copies bytes `at..at + out.len()` of the cell to `out` (after the
    /// completion was counted).
    pub fn read(&self, at: usize, out: &mut [u8]) {
        // SAFETY: the operation completed (type invariant): the provider no
        // longer writes the cell.
        let bytes = unsafe { &*self.bytes.get() };
        out.copy_from_slice(&bytes[at..at + out.len()]);
    }
}

/// The pool.
#[derive(Default)]
pub struct Bounce {
    /// Every cell made (see the module's invariant).
    all: Mutex<Vec<Arc<Cell>>>,
    free: Mutex<Vec<Arc<Cell>>>,
}

impl Bounce {
    /// A cell nobody else uses (from the list, else a new one).
    pub fn take(&self) -> Arc<Cell> {
        if let Some(c) = self.free.lock().ok().and_then(|mut f| f.pop()) {
            return c;
        }
        let c = Arc::new(Cell {
            bytes: UnsafeCell::new([0; CELL_BYTES]),
        });
        if let Ok(mut all) = self.all.lock() {
            all.push(c.clone());
        }
        c
    }

    /// Gives `cell` back after its operation ended. A cell that an
    /// abandoned operation's context still refers to is not reused.
    pub fn give(&self, cell: Arc<Cell>) {
        // The registry's reference and ours: no context holds it.
        if Arc::strong_count(&cell) != 2 {
            return;
        }
        if let Ok(mut f) = self.free.lock() {
            f.push(cell);
        }
    }

    /// Cells made so far (for tests).
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
        let a = pool.take();
        a.fill(0, &[1, 2, 3]);
        let held = a.clone(); // an abandoned operation's context
        let pa = Arc::as_ptr(&a);
        pool.give(a);
        let b = pool.take();
        assert_ne!(Arc::as_ptr(&b), pa, "handed out while still referred to");
        let mut out = [0u8; 3];
        held.read(0, &mut out);
        assert_eq!(out, [1, 2, 3]);
        // Given back with no other reference: reused, no allocation.
        let pb = Arc::as_ptr(&b);
        pool.give(b);
        assert_eq!(Arc::as_ptr(&pool.take()), pb);
        assert_eq!(pool.made(), 2);
        // The abandoned cell outlives its context (the pool keeps it).
        drop(held);
        assert_eq!(pool.made(), 2);
    }
}
