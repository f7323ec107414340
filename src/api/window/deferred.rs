//! Strided puts to node-local peers, deferred to the end of an active-target
//! epoch.
//!
//! A `put_layout` of many small blocks to a peer on the direct path (a
//! column of a row-major array: every block on its own page) is packed
//! when it is called and written into the peer's mapped window when the
//! epoch completes. The copy costs page walks, not bytes: copying block
//! by block from the origin buffer into the peer's window alternates
//! between two sets of pages (origin and target) that together overflow
//! the TLB, so every block misses twice. Packing all the epoch's layouts
//! first and writing them afterwards visits each set in one go; a 2-D
//! halo step (two columns of 1,024 doubles) pays about half the misses
//! (docs/performance.md, "Halo columns written at the epoch's end").
//!
//! Rules (what keeps MPI's semantics and users' habits):
//! * Only in a fence or PSCW access epoch with no per-target lock held:
//!   the target reads its window only after its own fence or `wait`,
//!   which return only after this process's `fence` or `complete`, and
//!   both write every deferred layout first (`complete_local`). Puts in
//!   passive-target epochs stay immediate, so a target polling its memory
//!   under a lock sees them as before.
//! * Every other operation of the window (`Window::access`), every
//!   completion point (`complete_local`: fence, flush family, unlock,
//!   complete, free) and a `put_layout` that is not deferred write the
//!   queue first, so the writes of one origin land in program order.
//! * The origin buffer is packed at the call: it may be reused at once.
//! * The queue is bounded (`MAX_BYTES`); a layout that would overflow it
//!   writes the queue first, and one larger than the bound is written at
//!   once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::transport::Memory;

/// Layouts with fewer target blocks are written at once (few pages).
pub(super) const MIN_BLOCKS: usize = 64;
/// Layouts with larger blocks on average are written at once (whole pages
/// per block: no page walk to save).
pub(super) const MAX_BLOCK_BYTES: usize = 256;
/// Bytes of packed data the queue holds at most.
pub(super) const MAX_BYTES: usize = 1 << 20;

/// Packed elements of any element type, seen as bytes.
pub(super) trait Packed: Send {
    fn bytes(&self) -> &[u8];
}

impl<T: bytemuck::Pod + Send> Packed for Vec<T> {
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self)
    }
}

/// One deferred layout: packed data and where its runs go.
struct Write {
    mem: Arc<Memory<'static>>,
    /// Runs as (first byte, block bytes, stride bytes, blocks).
    runs: Vec<(usize, usize, usize, usize)>,
    data: Box<dyn Packed>,
}

#[derive(Default)]
struct Queue {
    bytes: usize,
    writes: Vec<Write>,
}

/// The window's queue of deferred layouts (see the module doc).
#[derive(Default)]
pub(super) struct Deferred {
    /// Whether `queue` may hold a write (checked without the mutex on
    /// every operation).
    pending: AtomicBool,
    queue: Mutex<Queue>,
}

impl Deferred {
    /// Whether a write may be queued (a cheap check for the hot path).
    #[inline]
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Whether a layout of `blocks` blocks and `bytes` bytes in all is
    /// worth deferring.
    pub fn worth(blocks: usize, bytes: usize) -> bool {
        blocks >= MIN_BLOCKS && bytes <= blocks * MAX_BLOCK_BYTES && bytes <= MAX_BYTES
    }

    fn queue(&self, window: u64) -> Result<std::sync::MutexGuard<'_, Queue>> {
        self.queue.lock().map_err(|_| {
            Error::InvalidArgument(format!("window {window}: deferred-put queue poisoned"))
        })
    }

    /// Queues `data` for `runs` of `mem` (writing the queue first if the
    /// data would overflow it).
    pub fn push(
        &self,
        window: u64,
        mem: Arc<Memory<'static>>,
        runs: Vec<(usize, usize, usize, usize)>,
        data: Box<dyn Packed>,
    ) -> Result<()> {
        let len = data.bytes().len();
        let mut q = self.queue(window)?;
        if q.bytes + len > MAX_BYTES {
            write_all(&mut q)?;
        }
        q.bytes += len;
        q.writes.push(Write { mem, runs, data });
        self.pending.store(true, Ordering::Release);
        Ok(())
    }

    /// Writes every queued layout, in the order they were queued.
    ///
    /// # Errors
    /// A write outside the peer's mapping (not expected: the bounds were
    /// checked when each layout was queued); the rest of the queue is
    /// dropped then.
    pub fn write(&self, window: u64) -> Result<()> {
        if !self.pending() {
            return Ok(());
        }
        let mut q = self.queue(window)?;
        self.pending.store(false, Ordering::Release);
        write_all(&mut q)
    }
}

fn write_all(q: &mut Queue) -> Result<()> {
    let writes = std::mem::take(&mut q.writes);
    q.bytes = 0;
    for w in writes {
        write_runs(&w.mem, &w.runs, w.data.bytes())?;
    }
    Ok(())
}

/// Writes packed `data` into `runs` of `mem` (runs as in [`Write`]).
pub(super) fn write_runs(
    mem: &Memory<'_>,
    runs: &[(usize, usize, usize, usize)],
    data: &[u8],
) -> Result<()> {
    let mut pos = 0;
    for &(at, block, stride, count) in runs {
        let len = block * count;
        let part = data.get(pos..pos + len).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "deferred put: {} packed bytes for runs of {} or more",
                data.len(),
                pos + len
            ))
        })?;
        mem.write_strided(at, (block, stride), part)?;
        pos += len;
    }
    Ok(())
}
