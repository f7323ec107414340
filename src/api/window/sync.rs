//! Completing operations and the active/passive synchronization calls:
//! flush family, `lock_all`/`unlock_all`, `fence`, `sync`, `free`
//! (post/start/complete/wait are in `pscw.rs`, lock/unlock in `lock.rs`).

use std::sync::atomic::Ordering;

use super::Window;
use crate::api::element::Element;
use crate::epoch::{Assert, LockType};
use crate::error::{Error, Result};
use crate::meta::directory::{self, MAGIC};
use crate::meta::dirty::for_each_rank;

impl<T: Element> Window<'_, T> {
    /// Completes request-based operations to `rank` (to every target if
    /// `None`) locally; queued operations and batches of every target are
    /// sent first. Always inline: with nothing in flight it is a few
    /// loads and the fence, less than a call's register saves.
    #[inline(always)]
    pub(super) fn complete_local(&self, rank: Option<usize>) -> Result<()> {
        self.deferred.write(self.id)?;
        self.complete_batches(rank)?;
        // Direct (load/store) operations to node-local peers are complete
        // when issued; this fence orders them before the synchronization
        // that follows (see `direct.rs`).
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        self.wait_outstanding(rank)
    }

    /// Waits for the window's operations in flight to `rank` (to every
    /// target if `None`) outside the operation table. Trackers with nothing
    /// in flight (blocking operations, the direct path) are skipped: no
    /// need to drive the provider.
    pub(super) fn wait_outstanding(&self, rank: Option<usize>) -> Result<()> {
        let id = self.id;
        self.outstanding.each_busy(rank, |r, c| {
            self.world
                .transport()
                .wait(c, &|| format!("completing operations of window {id} to rank {r}"))
                .map_err(|e| e.awaiting(r))
        })
    }

    /// Targets with writes or atomic updates not yet flushed: ranks below
    /// 64 as bits, the others listed (possibly twice).
    pub(super) fn dirty_targets(&self) -> (u64, Vec<usize>) {
        let (low, mut high) = self.dirty.snapshot();
        let (alow, ahigh) = self.atomic_dirty.snapshot();
        high.extend(ahigh);
        high.sort_unstable();
        high.dedup();
        (low | alow, high)
    }

    /// Makes every write and atomic update to `rank` visible there.
    /// Inline: a target with nothing to flush costs two loads.
    #[inline]
    pub(super) fn complete_remote(&self, rank: usize) -> Result<()> {
        self.complete_atomics(rank)?;
        if !self.dirty.take(rank) {
            return Ok(());
        }
        self.read_control(rank)
    }

    /// [`Window::complete_remote`] of a target with writes (out of line).
    #[inline(never)]
    fn read_control(&self, rank: usize) -> Result<()> {
        // Ordered read-after-write: when this read returns, every earlier
        // write to `rank` has been applied there.
        let ctrl = self.world.control(rank)?;
        let mut word = [0u8; 8];
        self.world.transport().get(rank, &mut word, ctrl)?;
        if u64::from_le_bytes(word) != MAGIC {
            return Err(Error::Protocol {
                peer: format!("rank {rank}"),
                message: format!(
                    "window {}: flush read returned a wrong control word",
                    self.id
                ),
            });
        }
        Ok(())
    }

    pub(super) fn complete_all(&self) -> Result<()> {
        self.complete_local(None)?;
        let mut done = Ok(());
        for_each_rank(self.dirty_targets(), |t| {
            if done.is_ok() {
                done = self.complete_remote(t);
            }
        });
        done
    }

    /// Completes all operations to `rank`, locally and at the target.
    pub fn flush(&self, rank: usize) -> Result<()> {
        self.alive("flush")?;
        let rank = self.check_rank(rank)?;
        if !self.permit().flushes(rank) {
            self.epoch()?.flush(self.id, "flush", Some(rank))?;
        }
        self.flush_pending(Some(rank))?;
        self.complete_local(Some(rank))?;
        self.complete_remote(rank)
    }

    /// Completes all operations to every target.
    pub fn flush_all(&self) -> Result<()> {
        self.alive("flush_all")?;
        self.epoch()?.flush(self.id, "flush_all", None)?;
        self.flush_pending(None)?;
        self.complete_all()
    }

    /// Completes operations to `rank` locally (buffers reusable).
    pub fn flush_local(&self, rank: usize) -> Result<()> {
        self.alive("flush_local")?;
        let rank = self.check_rank(rank)?;
        self.epoch()?.flush(self.id, "flush_local", Some(rank))?;
        self.complete_local(Some(rank))
    }

    /// Completes all operations locally.
    pub fn flush_local_all(&self) -> Result<()> {
        self.alive("flush_local_all")?;
        self.epoch()?.flush(self.id, "flush_local_all", None)?;
        self.complete_local(None)
    }

    /// Opens a passive-target epoch to every rank: `lock_all_with(Assert::NONE)`.
    pub fn lock_all(&self) -> Result<()> {
        self.lock_all_with(Assert::NONE)
    }

    /// Opens a passive-target epoch to every rank (MPI_Win_lock_all): a
    /// shared lock on each target, so it excludes other processes'
    /// exclusive locks. Nothing is sent here: the first operation to rank
    /// `r` takes the shared lock of `r` alone (one fetch-add on its lock
    /// word, or one request to its lock queue), so an epoch contacts only
    /// the ranks it accesses. Deadlock-free: a process that would have to
    /// wait for a lock first completes its operations and gives back the
    /// shared locks it holds (docs/semantics.md, "lock_all locks per
    /// target"). With `Assert::NOCHECK` (no conflicting lock exists) no lock
    /// is touched.
    pub fn lock_all_with(&self, assert: Assert) -> Result<()> {
        self.alive("lock_all")?;
        if assert.0 & !Assert::NOCHECK.0 != 0 {
            return Err(Error::InvalidArgument(format!(
                "window {}: lock_all accepts only Assert::NOCHECK, got {:#x}",
                self.id, assert.0
            )));
        }
        self.check_locks_allowed("lock_all")?;
        let mut state = self.epoch()?;
        state.lock_all(self.id, assert.contains(Assert::NOCHECK))?;
        // Before any permit of the epoch is published (`issuing.rs`).
        self.issuing.set_owner();
        drop(state);
        self.new_access_epoch();
        Ok(())
    }

    /// Completes every operation, releases the shared locks `lock_all` took
    /// and closes the epoch. Every lock is released even if one release
    /// fails; the first error is returned.
    pub fn unlock_all(&self) -> Result<()> {
        self.alive("unlock_all")?;
        self.epoch()?.unlock_all(self.id)?;
        let done = self.complete_all();
        let taken = self.epoch()?.end_unlock_all();
        let mut first = done.err();
        for &t in taken.iter().rev() {
            if let Err(e) = self.release_word(t, LockType::Shared) {
                first.get_or_insert(e);
            }
        }
        if let Ok(mut state) = self.epoch() {
            state.reuse_held(taken);
        }
        first.map_or(Ok(()), Err)
    }

    /// Active-target synchronization (collective): completes every
    /// operation of the closing epoch everywhere and opens the next one
    /// (unless `Assert::NOSUCCEED`). Assertions (MPI's meaning, must be the
    /// same on every process for NOPRECEDE and NOSUCCEED):
    /// `NOPRECEDE` nothing to complete (refused if this process issued
    /// operations since the last fence), so only the barrier is done;
    /// with `NOSUCCEED` too the fence sends nothing at all; `NOSTORE` and
    /// `NOPUT` are accepted (see docs/semantics.md, "Fence").
    pub fn fence(&self, assert: Assert) -> Result<()> {
        self.alive("fence")?;
        let plan = self.epoch()?.fence(self.id, assert)?;
        self.new_access_epoch();
        // Even after NOPRECEDE: a deferred layout never outlives its epoch.
        self.deferred.write(self.id)?;
        if plan.complete {
            self.complete_all()?;
        }
        if plan.barrier {
            self.team().fence_barrier()?;
        }
        // Local loads and stores before the fence stay before it.
        std::sync::atomic::fence(Ordering::SeqCst);
        self.epoch()?.mode = plan.next;
        Ok(())
    }

    /// MPI_Win_sync: makes the updates peers applied to the local window
    /// visible to this process's loads, and this process's stores visible
    /// to later remote reads (a full memory barrier after driving the
    /// provider once, so a provider that applies incoming data in software
    /// does so even with `ONESIDED_PROGRESS=manual`). Allowed in any epoch;
    /// it neither opens nor closes one and completes no operation.
    pub fn sync(&self) -> Result<()> {
        self.alive("sync")?;
        std::sync::atomic::fence(Ordering::SeqCst);
        self.world.transport().progress()?;
        std::sync::atomic::fence(Ordering::SeqCst);
        Ok(())
    }

    /// Frees the window (collective): waits until every process is done with
    /// it, then deregisters and releases the memory. Inside an epoch it
    /// returns an error and the window stays usable; after a successful free
    /// every operation on the window returns an error.
    pub fn free(&mut self) -> Result<()> {
        self.alive("free")?;
        self.epoch()?.free(self.id)?;
        self.complete_all()?;
        self.team().barrier()?;
        self.release();
        Ok(())
    }

    pub(super) fn release(&mut self) {
        if self.freed {
            return;
        }
        self.freed = true;
        // No handler may touch the memory once this returns.
        self.exposure.take();
        if let Some(s) = self.soft_lock.as_mut() {
            s.exposure.take();
        }
        if let Err(e) = directory::retract(self.world.control_memory(), self.slot) {
            tracing::warn!("window {}: retracting descriptor: {e}", self.id);
        }
        if let Ok(mut c) = self.world.rkeys.lock() {
            c.forget_window(self.id);
        }
        self.world.posts.close(self.id);
        // The pins of this window's slots go back to the mapping cache (its
        // own segments are forgotten below, pinned or not).
        for t in self.targets.iter() {
            self.unpin_target(t);
        }
        self.world.mappings.forget_window(self.id);
        self.targets.clear();
        self.reg.take();
    }
}
