//! Per-target passive-target locks: `lock(rank, kind, assert)` and
//! `unlock(rank)`. Each window takes one of two paths, decided at creation
//! identically on every rank ([`software_locks`], `ONESIDED_LOCK`) and
//! recorded in its descriptor flags ([`FLAG_SOFTWARE_LOCK`]):
//!
//! * the *hardware* path here: 64-bit provider atomics (or CPU atomics when
//!   every rank is node-local) on a lock word in the target's control
//!   region (word 9 of the window's descriptor), so the target's CPU takes
//!   no part;
//! * the *software* path (`soft_lock.rs`): a lock queue at the target
//!   served by active messages, with lazy locks and one message for
//!   lock + small operation + unlock.
//!
//! The algorithms and why they are correct are in `docs/semantics.md`
//! ("Per-target locks").
//!
//! Lock word: bits 0..32 count readers (holders of a shared lock, plus
//! readers briefly probing), bits 32..63 count writers that announced
//! themselves (waiting or holding), bit 63 is set while a writer holds it.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Window;
use crate::api::element::Element;
use crate::api::node::{word_compare_swap, word_fetch_add};
use crate::api::world::World;
use crate::config::LockMode;
use crate::epoch::{Assert, LockType, Permit};
use crate::error::{Error, Result};
use crate::progress::wait;
use crate::meta::directory::{self, Descriptor};
use crate::meta::mappings::{FLAG_CPU_ATOMICS, FLAG_SHARED};
use crate::meta::targets::{Hold, Mapped};
use crate::transport::{Atomic, AtomicOp, Datatype, RemoteAddr};

use super::soft_lock::SoftLock;

/// Descriptor `flags` bit: the window's locks take the software path.
pub(crate) const FLAG_SOFTWARE_LOCK: u64 = 1 << 24;

/// The descriptor flag bits of the lock path.
pub(crate) fn lock_flags(software: bool) -> u64 {
    if software {
        FLAG_SOFTWARE_LOCK
    } else {
        0
    }
}

/// Opens a new window (descriptor `d`) for lock messages (operations they
/// carry land in the window's memory as `transport::exposed` holds it).
/// `software_ops`: the accumulate operations on its software path (those a
/// lock-op-unlock message may carry, with every one when the window runs
/// accumulates by CPU atomics).
pub(super) fn open_soft_lock<T: Element>(
    world: &World,
    d: &Descriptor,
    software_ops: u64,
) -> Result<SoftLock<T>> {
    let cpu_ops = if d.flags & FLAG_CPU_ATOMICS != 0 {
        u64::MAX
    } else {
        software_ops
    };
    let exposure = world
        .lock_table
        .expose(d.id, world.config.lock_queue, T::DATATYPE, cpu_ops)?;
    // Peers may load/store node-shared memory directly: lock eagerly.
    Ok(SoftLock::new(exposure, d.flags & FLAG_SHARED != 0))
}

/// Whether a window's locks take the software path (the same on every
/// rank: configuration, back-end and placement only). `auto`: the lock
/// word when every rank is node-local (CPU atomics) or the back-end's
/// 64-bit atomics are native (`Caps::native_atomics`); the queue where the
/// back-end lacks them or emulates them with the target's CPU anyway, where
/// one message round trip beats a chain of emulated atomics
/// (docs/semantics.md).
///
/// # Errors
/// `ONESIDED_LOCK=hardware` where the lock word would need the back-end's
/// 64-bit atomics and it has none: [`Error::Unsupported`] at window
/// creation, naming the back-end, rather than a failure at the first lock.
pub(crate) fn software_locks(world: &World) -> Result<bool> {
    let caps = world.transport().caps();
    Ok(match world.config.lock {
        LockMode::Software => true,
        LockMode::Hardware if world.sync_words_by_cpu() || caps.atomics.lock_word() => false,
        LockMode::Hardware => {
            return Err(Error::Unsupported(format!(
                "ONESIDED_LOCK=hardware, but {} has no 64-bit fetch-and-add and compare-and-swap \
                 for the lock word (`auto` or `software` takes the target's lock queue)",
                caps.name
            )))
        }
        LockMode::Auto if world.sync_words_by_cpu() => false,
        LockMode::Auto => !caps.atomics.lock_word() || !caps.native_atomics,
    })
}

/// One reader.
pub(crate) const READER: u64 = 1;
/// Mask of the reader count.
pub(crate) const READERS: u64 = (1 << 32) - 1;
/// One announced writer.
pub(crate) const WRITER: u64 = 1 << 32;
/// Set while a writer holds the lock.
pub(crate) const HELD: u64 = 1 << 63;
/// Mask of the announced-writer count.
pub(crate) const WRITERS: u64 = !(READERS | HELD);

/// A reader may hold the lock iff its increment saw no writer.
pub(crate) fn reader_admitted(before: u64) -> bool {
    before & (WRITERS | HELD) == 0
}

/// A writer that announced itself may take the lock from `seen` iff no
/// reader and no writer holds it.
pub(crate) fn writer_may_take(seen: u64) -> bool {
    seen & (READERS | HELD) == 0
}

pub(super) const FIRST_SLEEP: Duration = Duration::from_micros(2);
const MAX_SLEEP: Duration = Duration::from_micros(500);

/// Bounded exponential backoff that drives progress and honours the
/// configured timeout.
pub(super) struct Backoff<'w> {
    /// Taken at the first pause: an acquisition granted at once reads no
    /// clock.
    start: Option<Instant>,
    sleep: Duration,
    limit: Option<Duration>,
    what: &'w dyn Fn() -> String,
}

impl Backoff<'_> {
    pub(super) fn pause(&mut self, progress: impl Fn() -> Result<usize>) -> Result<()> {
        let start = *self.start.get_or_insert_with(Instant::now);
        if let Some(limit) = self.limit {
            if start.elapsed() > limit {
                return Err(Error::timeout((self.what)(), limit.as_secs()));
            }
        }
        progress()?;
        std::thread::sleep(self.sleep);
        self.sleep = (self.sleep * 2).min(MAX_SLEEP);
        Ok(())
    }
}

impl<T: Element> Window<'_, T> {
    /// Address of the lock word of this window at `rank`.
    fn lock_word(&self, rank: usize) -> Result<RemoteAddr> {
        if self.world.sync_words_by_cpu() {
            // Driven by CPU atomics: `addr` is the offset in the node-shared
            // control region (see `api::node`).
            return Ok(RemoteAddr {
                addr: self.lock_word_offset() as u64,
                key: 0,
            });
        }
        let ctrl = self.world.control(rank)?;
        Ok(RemoteAddr {
            addr: ctrl.addr + self.lock_word_offset() as u64,
            key: ctrl.key,
        })
    }

    /// Byte offset of this window's lock word in a control region (the
    /// same at every rank: the window's directory slot).
    #[inline]
    fn lock_word_offset(&self) -> usize {
        directory::entry_offset(self.slot) + directory::LOCK_WORD
    }

    /// `rank`'s control region from the window's slot (no lock): borrowed
    /// if pinned there, else while the world's mapping cache keeps it
    /// mapped; else `None` (the world path).
    #[inline]
    pub(super) fn slot_ctrl(&self, rank: usize) -> Option<Mapped<'_>> {
        self.targets
            .get(rank)
            .and_then(|t| t.ctrl.as_ref())
            .and_then(Hold::get)
    }

    /// Atomically adds `delta` (modulo 2^64) to the word, returns the old value.
    fn word_add(&self, rank: usize, at: RemoteAddr, delta: u64) -> Result<u64> {
        if self.world.sync_words_by_cpu() {
            if let Some(m) = self.slot_ctrl(rank) {
                return word_fetch_add(&m, at.addr as usize, delta);
            }
            return self.world.ctrl_fetch_add(rank, at.addr as usize, delta);
        }
        let what = Atomic {
            op: AtomicOp::Sum,
            datatype: Datatype::U64,
            count: 1,
        };
        let mut old = [0u8; 8];
        self.world
            .transport()
            .fetch_atomic(rank, what, &delta.to_ne_bytes(), &mut old, at)?;
        Ok(u64::from_ne_bytes(old))
    }

    /// Compare-and-swap on the word, returns the old value.
    fn word_cas(&self, rank: usize, at: RemoteAddr, compare: u64, swap: u64) -> Result<u64> {
        if self.world.sync_words_by_cpu() {
            if let Some(m) = self.slot_ctrl(rank) {
                return word_compare_swap(&m, at.addr as usize, compare, swap);
            }
            return self
                .world
                .ctrl_compare_swap(rank, at.addr as usize, compare, swap);
        }
        let mut old = [0u8; 8];
        self.world.transport().compare_atomic(
            rank,
            Datatype::U64,
            &compare.to_ne_bytes(),
            &swap.to_ne_bytes(),
            &mut old,
            at,
        )?;
        Ok(u64::from_ne_bytes(old))
    }

    fn check_lock_atomics(&self, rank: usize) -> Result<()> {
        if self.world.sync_words_by_cpu() {
            return Ok(());
        }
        if !self.world.transport().caps().atomics.lock_word() {
            return Err(Error::Unsupported(format!(
                "window {}: lock of rank {rank}: provider {} offers no 64-bit fetch-add and \
                 compare-and-swap (use Assert::NOCHECK)",
                self.id,
                self.world.provider()
            )));
        }
        Ok(())
    }

    pub(super) fn backoff<'w>(&self, what: &'w dyn Fn() -> String) -> Backoff<'w> {
        Backoff {
            start: None,
            sleep: FIRST_SLEEP,
            limit: self.world.config.timeout,
            what,
        }
    }

    /// After an operation `op` to `rank` passed its epoch checks: a lazy
    /// software lock on `rank` is acquired now, except for `put` and
    /// `accumulate`, which may be stashed instead (they decide themselves).
    #[inline]
    pub(super) fn lazy_lock(&self, op: &'static str, rank: usize) -> Result<()> {
        if self.soft_lock.is_none() || op == "put" || op == "accumulate" {
            return Ok(());
        }
        self.acquire_pending(rank)
    }

    pub(super) fn acquire(&self, rank: usize, kind: LockType) -> Result<()> {
        self.acquire_waiting(rank, kind, &mut || Ok(()))
    }

    /// As [`Window::acquire`], calling `before_wait` once the lock turns out
    /// not to be free at once, before waiting for it (nothing of it is held
    /// then: `lock_all` retreats there).
    fn acquire_waiting(
        &self,
        rank: usize,
        kind: LockType,
        before_wait: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        self.acquire_lock(rank, kind, before_wait)
            .map_err(|e| e.awaiting(rank))
    }

    fn acquire_lock(
        &self,
        rank: usize,
        kind: LockType,
        before_wait: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        if self.soft_lock.is_some() {
            return self.soft_acquire(rank, kind, before_wait);
        }
        self.check_lock_atomics(rank)?;
        let at = self.lock_word(rank)?;
        let id = self.id;
        let what = move || format!("waiting for a {kind:?} lock of rank {rank} (window {id})");
        let mut backoff = self.backoff(&what);
        // The wait for the lock ends at the timeout; each atomic on the
        // word is a wait of its own, ended (with its queue pair or
        // connection) if it is still unanswered an eighth of the timeout
        // later — a target that died while we polled its word — instead of
        // a whole timeout of its own per atomic. The same bound for the
        // writer's withdrawal after a failure: a live target answers it in
        // microseconds, a dead one must not cost another timeout.
        let bound = self.world.config.timeout.map(|l| (l + l / 8, l / 8));
        let mut announced = false;
        let got = wait::within(bound.map(|b| b.0), || {
            self.lock_word_wait(rank, kind, at, (&mut backoff, &mut announced), before_wait)
        });
        if got.is_err() && announced {
            // Withdraw the announcement so readers are not blocked by a
            // writer that gave up (best effort: the word may be
            // unreachable, which is what failed).
            wait::within(bound.map(|b| b.1), || {
                let _ = self.word_add(rank, at, WRITER.wrapping_neg());
            });
        }
        got
    }

    /// The lock-word protocol of [`Window::acquire_lock`] (hardware path).
    /// Sets `announced` once an exclusive locker announced itself: on an
    /// error after that, the caller withdraws the announcement.
    fn lock_word_wait(
        &self,
        rank: usize,
        kind: LockType,
        at: RemoteAddr,
        (wait, announced): (&mut Backoff<'_>, &mut bool),
        before_wait: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let t = self.world.transport();
        match kind {
            LockType::Shared => loop {
                let before = self.word_add(rank, at, READER)?;
                if reader_admitted(before) {
                    return Ok(());
                }
                // A writer announced itself or holds the lock: step back and
                // wait (reading only) until no writer is left.
                let mut seen = self
                    .word_add(rank, at, READER.wrapping_neg())?
                    .wrapping_sub(READER);
                if !reader_admitted(seen) {
                    before_wait()?;
                }
                while !reader_admitted(seen) {
                    wait.pause(|| t.progress())?;
                    seen = self.word_add(rank, at, 0)?;
                }
            },
            LockType::Exclusive => {
                // Uncontended: one compare-and-swap from a free word to the
                // state the announce-then-take path below ends in.
                let free = self.word_cas(rank, at, 0, WRITER | HELD)?;
                if free == 0 {
                    return Ok(());
                }
                // Announce: from now on new readers back off.
                let seen = self.word_add(rank, at, WRITER)?.wrapping_add(WRITER);
                *announced = true;
                self.take_exclusive(rank, at, seen, wait)
            }
        }
    }

    /// An announced writer waits for readers and holders to leave, then
    /// sets `HELD` by compare-and-swap from the last value `seen`.
    fn take_exclusive(
        &self,
        rank: usize,
        at: RemoteAddr,
        mut seen: u64,
        wait: &mut Backoff<'_>,
    ) -> Result<()> {
        let t = self.world.transport();
        loop {
            if writer_may_take(seen) {
                let old = self.word_cas(rank, at, seen, seen | HELD)?;
                if old == seen {
                    return Ok(());
                }
                seen = old;
                continue;
            }
            wait.pause(|| t.progress())?;
            seen = self.word_add(rank, at, 0)?;
        }
    }

    /// Takes a lock on `rank`'s window: [`LockType::Shared`] (with other
    /// shared holders) or [`LockType::Exclusive`] (alone). Returns once the
    /// lock is held; RMA operations to `rank` are then allowed until
    /// [`Window::unlock`]. Waiting writers keep new shared lockers out, so
    /// readers cannot starve a writer. With [`Assert::NOCHECK`] the caller
    /// promises that no conflicting lock exists and nothing is sent. Locks
    /// on several targets may be held at once; locking oneself goes through
    /// the provider like any other target. Fails after `ONESIDED_TIMEOUT`.
    /// On the software lock path a remote lock is lazy: nothing is sent
    /// until the first operation, flush or unlock (see `docs/semantics.md`).
    pub fn lock(&self, rank: usize, kind: LockType, assert: Assert) -> Result<()> {
        self.alive("lock")?;
        // As lock_all_with (and MPI_Win_lock): only NOCHECK is defined.
        if assert.0 & !Assert::NOCHECK.0 != 0 {
            return Err(Error::InvalidArgument(format!(
                "window {}: lock accepts only Assert::NOCHECK, got {:#x}",
                self.id, assert.0
            )));
        }
        let rank = self.check_rank(rank)?;
        self.check_locks_allowed("lock")?;
        self.new_access_epoch();
        let nocheck = assert.contains(Assert::NOCHECK);
        if !nocheck && self.permit() == Permit::IDLE && self.lock_at_once(rank, kind) {
            return self.lock_on_lane(rank, kind);
        }
        let mut state = self.epoch()?;
        state.begin_lock(self.id, rank, kind, nocheck)?;
        if self.lane && !self.lane_open.load(Ordering::Relaxed) {
            // From now on an idle state opens the lane (the guard stores
            // `IDLE` once this epoch is over).
            self.lane_open.store(true, Ordering::Relaxed);
        }
        if !nocheck && self.lock_at_once(rank, kind) {
            // Taken with one atomic under the same hold of the state mutex
            // (the usual uncontended node-local lock).
            state.lock_acquired(rank);
            return Ok(());
        }
        drop(state);
        let got = if nocheck {
            // Still learn the target's descriptor so errors show up here.
            self.target(rank).map(|_| ())
        } else if self.soft_lock.is_some() {
            self.target(rank)
                .and_then(|_| self.soft_lock_begin(rank, kind))
        } else {
            self.target(rank).and_then(|_| self.acquire(rank, kind))
        };
        let mut state = self.epoch()?;
        match got {
            Ok(()) => {
                state.lock_acquired(rank);
                Ok(())
            }
            Err(e) => {
                state.lock_failed(rank);
                drop(state);
                if self.soft_lock.is_some() {
                    self.drop_pending(rank);
                }
                Err(e)
            }
        }
    }

    /// `lock` from an idle state whose word `lock_at_once` took: the lock
    /// goes into the permit (the lane, `epoch::permit`) — no state mutex.
    /// If the state changed since the permit was read, it is recorded
    /// under the mutex instead, or refused there with the word given back.
    fn lock_on_lane(&self, rank: usize, kind: LockType) -> Result<()> {
        let lane = Permit::lane(rank, kind);
        if lane != Permit::NONE
            && self
                .permit
                .compare_exchange(
                    Permit::IDLE.0,
                    lane.0,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            return Ok(());
        }
        let recorded = self.epoch().and_then(|mut state| {
            state.begin_lock(self.id, rank, kind, false)?;
            state.lock_acquired(rank);
            Ok(())
        });
        if let Err(e) = recorded {
            // Not ours to hold (another thread's epoch came first).
            let _ = self.release_word(rank, kind);
            return Err(e);
        }
        Ok(())
    }

    /// A lock of `rank` taken by one atomic on its word, when the word is
    /// a CPU atomic reached through the window's slot (target known,
    /// control region mapped): exclusive by a compare-and-swap from a free
    /// word, shared by an increment that saw no writer (undone at once if
    /// it saw one). False when not granted at once or not that path: then
    /// [`Window::acquire`] decides, errors included. It never waits (it is
    /// called under the state mutex, or before the lane is claimed).
    #[inline]
    fn lock_at_once(&self, rank: usize, kind: LockType) -> bool {
        if self.soft_lock.is_some() || !self.world.sync_words_by_cpu() {
            return false;
        }
        let Some(m) = self.slot_ctrl(rank) else {
            return false;
        };
        match kind {
            LockType::Exclusive => matches!(
                word_compare_swap(&m, self.lock_word_offset(), 0, WRITER | HELD),
                Ok(0)
            ),
            LockType::Shared => match word_fetch_add(&m, self.lock_word_offset(), READER) {
                Ok(before) if reader_admitted(before) => true,
                Ok(_) => {
                    // A writer announced itself or holds it: step back
                    // (as `lock_word_wait` does) and let `acquire` wait.
                    let _ = word_fetch_add(&m, self.lock_word_offset(), READER.wrapping_neg());
                    false
                }
                Err(_) => false,
            },
        }
    }

    /// Completes every operation to `rank` (locally and at the target, as
    /// [`Window::flush`]), then releases the lock taken by [`Window::lock`].
    pub fn unlock(&self, rank: usize) -> Result<()> {
        self.alive("unlock")?;
        let rank = self.check_rank(rank)?;
        let permit = self.permit();
        if let Some((r, kind)) = permit.lane_lock() {
            if r == rank {
                return self.unlock_lane(permit, rank, kind);
            }
        }
        // The permit of exactly one lock, held on `rank` (no other state
        // has it: `epoch::permit`), answers the check below without the
        // mutex; `end_unlock` checks again under it.
        let one = Permit::one(rank, true);
        if self.soft_lock.is_some() || one == Permit::NONE || self.permit() != one {
            let held = self.epoch()?.check_unlock(self.id, rank)?;
            if self.soft_lock.is_some() && !held.nocheck {
                self.soft_unlock(rank, held.kind)?;
                self.epoch()?.end_unlock(self.id, rank)?;
                return Ok(());
            }
        }
        self.complete_local(Some(rank))?;
        self.complete_remote(rank)?;
        let held = self.epoch()?.end_unlock(self.id, rank)?;
        if held.nocheck {
            return Ok(());
        }
        self.release_word(rank, held.kind)
    }

    /// `unlock` of the lock the lane holds (`permit`): completes its
    /// operations, gives the lane back (the permit to `IDLE`), releases the
    /// word. If another thread's mutex settled the lock into the state
    /// meanwhile, it is ended there.
    fn unlock_lane(&self, permit: Permit, rank: usize, kind: LockType) -> Result<()> {
        self.complete_local(Some(rank))?;
        self.complete_remote(rank)?;
        let given_back = self
            .permit
            .compare_exchange(
                permit.0,
                Permit::IDLE.0,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok();
        if !given_back {
            self.epoch()?.end_unlock(self.id, rank)?;
        }
        self.release_word(rank, kind)
    }

    /// Gives back a lock of `kind` held on `rank`'s lock word.
    pub(super) fn release_word(&self, rank: usize, kind: LockType) -> Result<()> {
        if self.soft_lock.is_some() {
            return self.soft_release(rank, kind);
        }
        let delta = match kind {
            LockType::Shared => READER,
            LockType::Exclusive => WRITER | HELD,
        };
        if self.world.sync_words_by_cpu() {
            if let Some(m) = self.slot_ctrl(rank) {
                // The usual node-local case: the word through the slot.
                word_fetch_add(&m, self.lock_word_offset(), delta.wrapping_neg())?;
                return Ok(());
            }
        }
        let at = self.lock_word(rank)?;
        self.word_add(rank, at, delta.wrapping_neg())?;
        Ok(())
    }

    /// `lock_all`'s shared lock on `rank` (a world rank), taken at the
    /// first operation to it: that target's alone. The process never waits
    /// for it while holding others: if it is not free at once, or the
    /// window's target elements are all in use, it first *retreats*
    /// ([`Window::lock_all_retreat`]). Acquisitions and retreats of one
    /// process are serialized by the window's gate, so another thread's
    /// wait holds nothing either. See docs/semantics.md, "lock_all locks per
    /// target".
    pub(super) fn lock_all_target(&self, rank: usize) -> Result<()> {
        let _gate = self.lock_all_gate.lock().map_err(|_| {
            Error::InvalidArgument(format!("window {}: lock_all gate poisoned", self.id))
        })?;
        let full = {
            let state = self.epoch()?;
            if state.mode != crate::epoch::Epoch::LockAll || state.all.holds(rank) {
                // Taken by another thread meanwhile, or the epoch ended (the
                // operation's own check reports that).
                return Ok(());
            }
            state.all.held.len() >= self.lock_all_capacity()
        };
        if full {
            self.lock_all_retreat()?;
        }
        self.acquire_waiting(rank, LockType::Shared, &mut || self.lock_all_retreat())?;
        if !self.epoch()?.lock_all_acquired(rank) {
            // The epoch ended meanwhile: ours is one too many.
            self.release_word(rank, LockType::Shared)?;
        }
        Ok(())
    }

    /// How many targets `lock_all` holds at most (the window's target
    /// elements, `ONESIDED_TARGET_ELEMENTS` + `ONESIDED_WIN_TARGET_ELEMENTS`).
    fn lock_all_capacity(&self) -> usize {
        let ops = &self.world.config.ops;
        (ops.target_elements + ops.win_target_elements).max(1)
    }

    /// Gives back every shared lock `lock_all` holds, after completing
    /// every operation (as `unlock_all` does, the epoch staying open): the
    /// operations issued under them are complete at their targets before
    /// any is released, so no access under a shared lock is ever concurrent
    /// with one under another process's exclusive lock — MPI's guarantee
    /// for lock-protected accesses. Operations of other threads already
    /// allowed to those targets are waited for first (`access.rs`,
    /// `Window::register`); new ones wait for the gate and lock again.
    fn lock_all_retreat(&self) -> Result<()> {
        let held = {
            let mut state = self.epoch()?;
            if state.all.held.is_empty() {
                return Ok(());
            }
            state.all.retreating = true;
            state.all.held.clone()
            // The guard stores the revoked permit (SeqCst) as it drops.
        };
        let id = self.id;
        let what = move || {
            format!("lock_all of window {id}: operations of other threads before a retreat")
        };
        let mut wait = self.backoff(&what);
        let t = self.world.transport();
        let mut done = Ok(());
        let mut fenced = false;
        loop {
            match self.issuing.posting(&mut fenced) {
                Ok(false) => break,
                Ok(true) => {}
                Err(e) => {
                    done = Err(e);
                    break;
                }
            }
            if let Err(e) = wait.pause(|| t.progress()) {
                done = Err(e);
                break;
            }
        }
        let done = done.and_then(|()| self.complete_all());
        if let Err(e) = done {
            // Nothing released: the locks stay held for unlock_all.
            self.epoch()?.all.retreating = false;
            return Err(e);
        }
        let mut first = None;
        for &r in held.iter().rev() {
            if let Err(e) = self.release_word(r, LockType::Shared) {
                first.get_or_insert(e);
            }
        }
        let mut state = self.epoch()?;
        state.all.retreating = false;
        state.all.held.clear();
        drop(state);
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_fields() {
        assert_eq!(READERS & WRITERS, 0);
        assert_eq!(WRITERS & HELD, 0);
        assert_eq!(READERS | WRITERS | HELD, u64::MAX);
        assert!(reader_admitted(0));
        assert!(reader_admitted(5));
        assert!(!reader_admitted(WRITER));
        assert!(!reader_admitted(WRITER | HELD | 3));
        assert!(writer_may_take(WRITER * 3));
        assert!(!writer_may_take(WRITER + 1));
        assert!(!writer_may_take((WRITER * 2) | HELD));
        // Release of an exclusive holder with another writer waiting.
        let w = (2 * WRITER) | HELD;
        let after = w.wrapping_add((WRITER | HELD).wrapping_neg());
        assert_eq!(after, WRITER);
        assert_eq!(7u64.wrapping_add(READER.wrapping_neg()), 6);
    }
}
