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

/// One deferred layout: where its runs go; its runs and packed bytes are
/// the next ones in the queue's buffers.
struct Write {
    mem: Arc<Memory<'static>>,
    runs: usize,
    bytes: usize,
}

/// Queued layouts. The buffers keep their capacity from one epoch to the
/// next (at most [`MAX_BYTES`] of data): a steady halo exchange allocates
/// nothing per call.
#[derive(Default)]
struct Queue {
    /// Runs as (first byte, block bytes, stride bytes, blocks).
    runs: Vec<(usize, usize, usize, usize)>,
    data: Vec<u8>,
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

    /// Queues a layout of `bytes` bytes for `mem`: `runs` (as in
    /// [`Queue::runs`]) and `pack`, which appends exactly `bytes` packed
    /// bytes to the buffer it is given. Writes the queue first if the
    /// data would overflow it.
    ///
    /// # Errors
    /// A write of the queue failing, or `pack`'s error (nothing queued).
    pub fn push(
        &self,
        window: u64,
        mem: Arc<Memory<'static>>,
        runs: impl Iterator<Item = (usize, usize, usize, usize)>,
        bytes: usize,
        pack: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        let mut q = self.queue(window)?;
        if q.data.len() + bytes > MAX_BYTES {
            write_all(&mut q)?;
        }
        let (r0, d0) = (q.runs.len(), q.data.len());
        q.runs.extend(runs);
        let packed = pack(&mut q.data);
        if packed.is_err() || q.data.len() != d0 + bytes {
            q.runs.truncate(r0);
            q.data.truncate(d0);
            packed?;
            return Err(Error::InvalidArgument(format!(
                "window {window}: deferred put packed a wrong number of bytes"
            )));
        }
        let runs = q.runs.len() - r0;
        q.writes.push(Write { mem, runs, bytes });
        self.pending.store(true, Ordering::Release);
        Ok(())
    }

    /// Writes every queued layout, in the order they were queued.
    ///
    /// # Errors
    /// A write outside the peer's mapping (not expected: the bounds were
    /// checked when each layout was queued); the rest of the queue is
    /// dropped then.
    #[inline]
    pub fn write(&self, window: u64) -> Result<()> {
        if !self.pending() {
            return Ok(());
        }
        self.write_queued(window)
    }

    /// [`Deferred::write`] when a write may be queued (out of line).
    #[cold]
    #[inline(never)]
    fn write_queued(&self, window: u64) -> Result<()> {
        let mut q = self.queue(window)?;
        self.pending.store(false, Ordering::Release);
        write_all(&mut q)
    }
}

fn write_all(q: &mut Queue) -> Result<()> {
    let (mut r, mut d) = (0, 0);
    let mut done = Ok(());
    for w in q.writes.drain(..) {
        if done.is_ok() {
            done = write_runs(&w.mem, &q.runs[r..r + w.runs], &q.data[d..d + w.bytes]);
        }
        r += w.runs;
        d += w.bytes;
    }
    q.runs.clear();
    q.data.clear();
    if q.data.capacity() > MAX_BYTES {
        q.data.shrink_to(MAX_BYTES);
    }
    done
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
