//! The lock epoch of the software lock path (`ONESIDED_LOCK`, decided per
//! window): lazy locks, stashes and their order. The requests themselves
//! (acquire, poll, cancel, release: active messages of kind `LOCK` served
//! by the target's lock queue) are `protocols::soft_lock::origin`.
//!
//! * **Lazy locks** (as MPICH): `lock` of a remote target sends nothing
//!   and records the target as *pending*. The first operation acquires —
//!   except a small `put` or non-fetching `accumulate`, which is copied
//!   (*stashed*) instead. `unlock` then sends the lock, the stashed
//!   operation and the unlock as ONE request, applied by the target when it
//!   grants the lock, with ONE reply; the operation is complete at the
//!   target when the reply arrives. A second operation, a fetching one or a
//!   flush sends the stash with the acquire (lock + operation, one reply)
//!   and continues with the lock held. `unlock` of a pending target with
//!   nothing stashed sends nothing: no operation reached the target.
//! * Locks on oneself, and on windows whose memory peers can load/store
//!   directly (node-shared segments, `shared_query`), are taken at `lock`
//!   (eagerly): direct accesses do not pass through here.
//! * A queued request is polled (with the lock word's backoff) until
//!   granted; a full queue answers "busy" and the origin retries.
//! * Release after a granted epoch: `unlock` first completes every
//!   operation at the target (flush), then sends the release and returns
//!   without waiting for its reply — MPI asks `unlock` to return once the
//!   operations are complete at the target, which the flush already
//!   guaranteed; the release only lets the next locker in. Its reply counts
//!   on the window's tracker, so the next completing call (and `free`,
//!   before its barrier) waits for it and reports a refusal.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::ThreadId;

use super::Window;
use crate::api::element::Element;
use crate::api::op::AnyOp;
use crate::epoch::LockType;
use crate::error::{Error, Result};
use crate::protocols::soft_lock::queue::LockEntry;
use crate::protocols::soft_lock::wire::{Carried, MAX_OP_BYTES};
use crate::protocols::soft_lock::Origin;

/// An operation held back until the lock is acquired.
enum Stash<T> {
    Put {
        disp: usize,
        data: Vec<T>,
    },
    Acc {
        disp: usize,
        data: Vec<T>,
        op: AnyOp,
    },
}

impl<T: Element> Stash<T> {
    fn carried(&self) -> Carried<'_> {
        let size = std::mem::size_of::<T>() as u64;
        match self {
            Stash::Put { disp, data } => Carried::Put {
                offset: *disp as u64 * size,
                data: bytemuck::cast_slice(data),
            },
            Stash::Acc { disp, data, op } => Carried::Accumulate {
                offset: *disp as u64 * size,
                op: op.atomic_op(),
                datatype: T::DATATYPE,
                data: bytemuck::cast_slice(data),
            },
        }
    }
}

/// A remote target locked lazily and not acquired yet.
struct Pending<T> {
    rank: usize,
    kind: LockType,
    stash: Option<Stash<T>>,
    /// The thread that called `lock`: the call order that acquisition
    /// keeps is each thread's own (see `settle_upto`).
    owner: ThreadId,
}

/// Per-window state of the software lock path.
pub(super) struct SoftLock<T> {
    /// Open in the lock table (taken out by `release`, before the memory).
    pub(super) exposure: Option<LockEntry>,
    /// Lazy targets not acquired yet (only locked ones: a short list).
    pending: Mutex<Vec<Pending<T>>>,
    /// Entries in `pending` (read without its mutex).
    count: AtomicUsize,
    /// The targets whose acquisition is under way: an entry goes here,
    /// under `pending`'s mutex, as it leaves `pending`, and leaves once its
    /// lock is granted or refused. Lock order: `pending`, then this.
    acquiring: Mutex<Vec<usize>>,
    /// Entries in `acquiring` (read without its mutex): raised before an
    /// entry leaves `pending`, lowered after it leaves `acquiring`.
    inflight: AtomicUsize,
    /// Peers can load/store our memory: lock eagerly.
    eager: bool,
}

impl<T> SoftLock<T> {
    pub(super) fn new(exposure: LockEntry, eager: bool) -> SoftLock<T> {
        SoftLock {
            exposure: Some(exposure),
            pending: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
            acquiring: Mutex::new(Vec::new()),
            inflight: AtomicUsize::new(0),
            eager,
        }
    }
}

impl<T: Element> Window<'_, T> {
    fn soft(&self) -> Option<&SoftLock<T>> {
        self.soft_lock.as_ref()
    }

    fn pending_list(&self) -> Result<std::sync::MutexGuard<'_, Vec<Pending<T>>>> {
        let s = self.soft().ok_or_else(|| {
            Error::InvalidArgument(format!("window {}: not on the software lock path", self.id))
        })?;
        s.pending
            .lock()
            .map_err(|_| Error::InvalidArgument(format!("window {}: lock list poisoned", self.id)))
    }

    /// The lock protocol's view of this window.
    fn lock_origin(&self) -> Origin<'_> {
        Origin {
            transport: self.world.transport(),
            am: &self.world.am,
            queue: &self.world.lock_handler,
            me: self.world.rank(),
            window: self.id,
        }
    }

    /// Takes `kind` on `rank` through its queue (see [`Origin::take`]),
    /// pausing with the window's backoff between retries and polls.
    fn soft_take(
        &self,
        rank: usize,
        kind: LockType,
        op: Carried<'_>,
        release: bool,
    ) -> Result<bool> {
        self.soft_take_waiting(rank, kind, op, release, &mut || Ok(()))
    }

    /// As [`Window::soft_take`], calling `before_wait` once, before the
    /// first pause (the request was queued or the queue was busy: the lock
    /// is not held yet).
    fn soft_take_waiting(
        &self,
        rank: usize,
        kind: LockType,
        op: Carried<'_>,
        release: bool,
        before_wait: &mut dyn FnMut() -> Result<()>,
    ) -> Result<bool> {
        let id = self.id;
        let what = move || format!("waiting for a {kind:?} lock of rank {rank} (window {id})");
        let mut wait = self.backoff(&what);
        let t = self.world.transport();
        let mut first = true;
        let mut pause = || {
            if std::mem::take(&mut first) {
                before_wait()?;
            }
            wait.pause(|| t.progress())
        };
        // As on the hardware path (`Window::acquire_lock`): the requests
        // and polls end with the wait, and the withdrawal after a timeout
        // has an eighth of the timeout, so a target that dies while we wait
        // costs one timeout in all, not one per request.
        let bound = self.world.config.timeout.map(|l| l + l / 8);
        crate::progress::wait::within(bound, || {
            self.lock_origin()
                .take(rank, kind, op, release, &mut pause)
                .map_err(|e| e.awaiting(rank))
        })
    }

    /// Blocking acquire of `kind` on `rank` (lock_all's shared locks,
    /// eager locks), calling `before_wait` once if it is not granted at once.
    pub(super) fn soft_acquire(
        &self,
        rank: usize,
        kind: LockType,
        before_wait: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        self.soft_take_waiting(rank, kind, Carried::None, false, before_wait)
            .map(|_| ())
    }

    /// Gives back `kind` on `rank` without waiting for the reply (counted
    /// on the window's tracker).
    pub(super) fn soft_release(&self, rank: usize, kind: LockType) -> Result<()> {
        self.lock_origin().release(rank, kind, &self.outstanding.to(rank))
    }

    /// `lock` on the software path: eager for ourselves and node-shared
    /// memory, else recorded as pending (nothing sent).
    pub(super) fn soft_lock_begin(&self, rank: usize, kind: LockType) -> Result<()> {
        let eager = self.soft().is_some_and(|s| s.eager);
        if eager || rank == self.world.rank() {
            // Locks called earlier are acquired first (see `settle_upto`).
            self.settle_upto(None)?;
            return self.soft_acquire(rank, kind, &mut || Ok(()));
        }
        self.pending_list()?.push(Pending {
            rank,
            kind,
            stash: None,
            owner: std::thread::current().id(),
        });
        if let Some(s) = self.soft() {
            s.count.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// A lock is pending or being acquired. `count` is read first: an
    /// acquisition raises `inflight` before its entry leaves the list.
    #[inline]
    fn any_pending(&self) -> bool {
        self.soft().is_some_and(|s| {
            s.count.load(Ordering::Acquire) != 0 || s.inflight.load(Ordering::Acquire) != 0
        })
    }

    /// Removes `rank`'s pending entry (keeping the others in lock order).
    fn take_pending(&self, rank: usize) -> Result<Option<Pending<T>>> {
        if !self.any_pending() {
            return Ok(None);
        }
        let mut list = self.pending_list()?;
        let Some(i) = list.iter().position(|p| p.rank == rank) else {
            return Ok(None);
        };
        let p = list.remove(i);
        if let Some(s) = self.soft() {
            s.count.fetch_sub(1, Ordering::AcqRel);
        }
        Ok(Some(p))
    }

    /// Acquires pending locks in the order `lock` was called, up to and
    /// including `rank`'s (every one of the calling thread's for `None`).
    /// Keeping the call order keeps a program that locks several targets
    /// in a fixed order deadlock-free: a lock is never acquired while one
    /// locked later is held. The order is each thread's own: only the
    /// locks that the thread which locked `rank` called before it are
    /// acquired first, and no thread waits for another's acquisitions
    /// except that of `rank` itself — threads that lock different targets
    /// (MPI_THREAD_MULTIPLE) never wait for each other's locks. A lock
    /// that cannot be acquired is dropped from the epoch (its `unlock` is
    /// then refused). `rank` not pending: returns at once, or once another
    /// thread's acquisition of it is over.
    fn settle_upto(&self, rank: Option<usize>) -> Result<()> {
        let Some(s) = self.soft() else {
            return Ok(());
        };
        let me = std::thread::current().id();
        let mut replays = Vec::new();
        let mut first = true;
        let outcome = loop {
            let (p, last) = {
                let mut list = self.pending_list()?;
                let found = match rank {
                    Some(r) => list.iter().position(|p| p.rank == r),
                    None => list.iter().rposition(|p| p.owner == me),
                };
                let Some(upto) = found else {
                    // Not pending: never was, acquired already, or being
                    // acquired by another thread (then wait for that).
                    let busy = match rank {
                        Some(r) => self.is_acquiring(s, r)?,
                        None => false,
                    };
                    drop(list);
                    break match rank {
                        Some(r) if busy => self.await_settled(r),
                        Some(r) if !first => self.check_settled(r),
                        _ => Ok(()),
                    };
                };
                // The first of the owner's entries (at or before `upto`).
                let owner = list[upto].owner;
                let at = list
                    .iter()
                    .position(|p| p.owner == owner)
                    .unwrap_or(upto);
                s.inflight.fetch_add(1, Ordering::AcqRel);
                let p = list.remove(at);
                self.acquiring(s)?.push(p.rank);
                s.count.fetch_sub(1, Ordering::AcqRel);
                (p, at == upto)
            };
            first = false;
            let r = p.rank;
            let op = p.stash.as_ref().map_or(Carried::None, Stash::carried);
            let taken = self.soft_take(r, p.kind, op, false);
            let recorded = match &taken {
                Err(_) => self.epoch().map(|mut state| state.lock_failed(r)),
                Ok(_) => Ok(()),
            };
            let left = self.acquiring(s).map(|mut a| {
                if let Some(i) = a.iter().position(|&x| x == r) {
                    a.swap_remove(i);
                }
            });
            s.inflight.fetch_sub(1, Ordering::AcqRel);
            let taken = match taken {
                Err(e) => break recorded.and(left).and(Err(e)),
                Ok(applied) => applied,
            };
            left?;
            if !taken {
                // Queued, then granted by a poll: the stash goes the long way.
                replays.push((r, p.stash));
            }
            if last {
                break Ok(());
            }
        };
        for (r, stash) in replays {
            self.replay(r, stash)?;
        }
        outcome
    }

    fn acquiring<'s>(&self, s: &'s SoftLock<T>) -> Result<std::sync::MutexGuard<'s, Vec<usize>>> {
        s.acquiring.lock().map_err(|_| self.acquiring_poisoned())
    }

    /// Whether another thread is acquiring `rank`'s lock.
    fn is_acquiring(&self, s: &SoftLock<T>, rank: usize) -> Result<bool> {
        if s.inflight.load(Ordering::Acquire) == 0 {
            return Ok(false);
        }
        Ok(self.acquiring(s)?.contains(&rank))
    }

    /// Waits (driving progress, within the timeout) until no other thread
    /// is acquiring `rank`'s lock, then [`Window::check_settled`].
    fn await_settled(&self, rank: usize) -> Result<()> {
        if let Some(s) = self.soft() {
            let id = self.id;
            let what = move || {
                format!("waiting for another thread's lock acquisition of rank {rank} (window {id})")
            };
            let mut wait = self.backoff(&what);
            let t = self.world.transport();
            while self.is_acquiring(s, rank)? {
                wait.pause(|| t.progress())?;
            }
        }
        self.check_settled(rank)
    }

    /// `rank`'s lock, no longer pending, was acquired (not dropped from the
    /// epoch by a failed acquisition).
    fn check_settled(&self, rank: usize) -> Result<()> {
        if self.epoch()?.locks.holds(rank) {
            return Ok(());
        }
        Err(Error::Epoch {
            window: self.id,
            op: "lock",
            state: format!(
                "of rank {}: acquiring the lock failed in another thread of this process",
                self.window_rank(rank)
            ),
        })
    }

    fn acquiring_poisoned(&self) -> Error {
        Error::InvalidArgument(format!("window {}: lock acquisition poisoned", self.id))
    }

    /// Replays the stash through the public operations (`rank` is a world
    /// rank; they take the window's ranks).
    fn replay(&self, rank: usize, stash: Option<Stash<T>>) -> Result<()> {
        let rank = self.window_rank(rank);
        match stash {
            None => Ok(()),
            Some(Stash::Put { disp, data }) => self.put(rank, disp, &data),
            Some(Stash::Acc { disp, data, op }) => self.accumulate(rank, disp, &data, op),
        }
    }

    /// Before an operation (other than a stashed one) to `rank`: acquires
    /// its pending lock (and those locked before it).
    pub(super) fn acquire_pending(&self, rank: usize) -> Result<()> {
        if !self.any_pending() {
            return Ok(());
        }
        self.settle_upto(Some(rank))
    }

    /// A flush of `rank` (or of every target): pending locks with a stashed
    /// operation acquire (the operation completes with the reply), with
    /// those locked before them; pending locks without one have nothing to
    /// complete.
    #[inline]
    pub(super) fn flush_pending(&self, rank: Option<usize>) -> Result<()> {
        if !self.any_pending() {
            return Ok(());
        }
        self.flush_pending_locks(rank)
    }

    /// [`Window::flush_pending`] with a lock pending (out of line).
    #[cold]
    #[inline(never)]
    fn flush_pending_locks(&self, rank: Option<usize>) -> Result<()> {
        let last = self
            .pending_list()?
            .iter()
            .rev()
            .find(|p| p.stash.is_some() && rank.is_none_or(|r| r == p.rank))
            .map(|p| p.rank);
        match last {
            Some(r) => self.settle_upto(Some(r)),
            None => Ok(()),
        }
    }

    /// A `put` (`acc` = None) or non-fetching accumulate to a pending
    /// target: stashed if it is the first operation and small enough
    /// (returns true: done), else the lock is acquired first (false: go on).
    /// Inline: with no lock pending (every operation inside an acquired
    /// epoch) it is two loads.
    #[inline]
    pub(super) fn defer_op(
        &self,
        rank: usize,
        disp: usize,
        data: &[T],
        acc: Option<AnyOp>,
    ) -> Result<bool> {
        if !self.any_pending() {
            return Ok(false);
        }
        self.defer_pending((rank, disp), data, acc)
    }

    /// [`Window::defer_op`] with a lock pending or being acquired.
    #[inline(never)]
    fn defer_pending(&self, (rank, disp): (usize, usize), data: &[T], acc: Option<AnyOp>) -> Result<bool> {
        let bytes = std::mem::size_of_val(data);
        let cpu_ok = match acc {
            None => true,
            Some(op) => self.cpu_atomics() || self.paths.software(op.atomic_op()),
        };
        let fits = bytes > 0 && bytes <= MAX_OP_BYTES && cpu_ok && !self.is_dynamic();
        {
            let mut list = self.pending_list()?;
            let Some(p) = list.iter_mut().find(|p| p.rank == rank) else {
                // Not pending; perhaps being acquired by another thread.
                drop(list);
                self.settle_upto(Some(rank))?;
                return Ok(false);
            };
            if fits && p.stash.is_none() {
                p.stash = Some(match acc {
                    None => Stash::Put {
                        disp,
                        data: data.to_vec(),
                    },
                    Some(op) => Stash::Acc {
                        disp,
                        data: data.to_vec(),
                        op,
                    },
                });
                return Ok(true);
            }
        }
        self.settle_upto(Some(rank))?;
        Ok(false)
    }

    /// `unlock` on the software path, after the epoch check. A pending
    /// target sends its stash as one lock-op-unlock request (or nothing);
    /// an acquired one completes its operations, then releases.
    pub(super) fn soft_unlock(&self, rank: usize, kind: LockType) -> Result<()> {
        if let Some(p) = self.take_pending(rank)? {
            let Some(stash) = p.stash else {
                return Ok(());
            };
            if self.soft_take(rank, kind, stash.carried(), true)? {
                return Ok(());
            }
            // Queued, then granted by a poll: do it the long way.
            self.replay(rank, Some(stash))?;
        }
        self.complete_local(Some(rank))?;
        self.complete_remote(rank)?;
        self.soft_release(rank, kind)
    }

    /// Forgets `rank`'s pending entry (a failed lock).
    pub(super) fn drop_pending(&self, rank: usize) {
        let _ = self.take_pending(rank);
    }
}
