//! Validation every operation shares: the epoch (lock-free permit, else
//! the state mutex through [`EpochGuard`]), the target rank and the bounds
//! (`access`), and what an operation needs before it is posted (`prepare`).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::MutexGuard;

pub(super) use super::issuing::Issuing;
use super::Window;
use crate::api::element::Element;
use crate::config::ProgressMode;
use crate::epoch::{Permit, Prepare, SyncState};
use crate::error::{Error, Result};
use crate::meta::directory::Descriptor;
use crate::transport::RemoteAddr;

impl<T: Element> Window<'_, T> {
    pub(super) fn epoch(&self) -> Result<EpochGuard<'_>> {
        self.alive("synchronization")?;
        let mut state = self.epoch.lock().map_err(|_| {
            Error::InvalidArgument(format!("window {}: epoch lock poisoned", self.id))
        })?;
        // Before anything reads the state (the invariants of `epoch::permit`).
        if self.fence_ops.load(Ordering::Relaxed) {
            self.fence_ops.store(false, Ordering::Relaxed);
            state.fence_ops_issued();
        }
        if self.lane_open.load(Ordering::Relaxed) {
            self.settle_lane(&mut state);
        }
        Ok(EpochGuard {
            permit: &self.permit,
            lane_open: &self.lane_open,
            state,
        })
    }

    /// Closes the lane while the state mutex is held (`epoch::permit`,
    /// "the lane"): an `IDLE` permit becomes `NONE`, a lock taken on the
    /// lane enters the state. The guard stores the state's permit again
    /// when it drops (`IDLE` reopens the lane).
    #[inline]
    fn settle_lane(&self, state: &mut SyncState) {
        let mut seen = self.permit.load(Ordering::Acquire);
        loop {
            let p = Permit(seen);
            let (next, lane) = match p.lane_lock() {
                Some(lock) => (p.settled(), Some(lock)),
                None if p == Permit::IDLE => (Permit::NONE, None),
                None => return,
            };
            match self.permit.compare_exchange(
                seen,
                next.0,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if let Some((rank, kind)) = lane {
                        state.lane_settled(rank, kind);
                    }
                    return;
                }
                // The lane was taken or given back meanwhile.
                Err(now) => seen = now,
            }
        }
    }

    /// The epoch's permit for the lock-free path: `Permit::NONE` once the
    /// window is freed (then the mutex path reports the error).
    #[inline]
    pub(super) fn permit(&self) -> Permit {
        if self.freed {
            return Permit::NONE;
        }
        Permit(self.permit.load(Ordering::Acquire))
    }

    /// Validates an access of `n` elements at `disp` on `rank` (a rank of the
    /// window) and returns the target's world rank, the byte offset and the
    /// descriptor (and the operation's registration, held until it is
    /// posted: `issuing.rs`). Sends nothing on error except, on first
    /// contact, the read of the target's descriptor. Inside `lock_all` the
    /// first access to a target takes its shared lock; inside a start epoch
    /// it waits for the target's post. The descriptor is borrowed from the
    /// window's target cache, or kept in `slot` when it is not cached (a
    /// 64-byte copy through the call cost store-forwarding stalls).
    #[inline(always)]
    pub(super) fn access<'s>(
        &'s self,
        op: &'static str,
        rank: usize,
        disp: usize,
        n: usize,
        slot: &'s mut Option<Descriptor>,
    ) -> Result<(usize, usize, &'s Descriptor, Issuing<'s>)> {
        if self.deferred.pending() && op != "put_layout" {
            // Deferred layouts land before anything else of this origin
            // (`deferred.rs`).
            self.deferred.write(self.id)?;
        }
        let (asked, rank) = (rank, self.check_rank(rank)?);
        if rank == self.me && self.world.config.progress == ProgressMode::Manual {
            // An operation on oneself completes without the back-end, so a
            // rank spinning on one (compare_and_swap on a lock word it
            // hosts, a get polling a flag) would never serve its peers
            // without a progress agent: serve them here.
            self.world.transport().progress()?;
        }
        let permit = self.permit();
        if permit.covers(rank) && !self.is_dynamic() {
            if let Some(issuing) = self.register(permit, rank) {
                // The lock-free path: allowed with nothing to prepare, and
                // the descriptor is cached (or ours).
                let d = match self.targets.get(rank) {
                    Some(t) => &t.desc,
                    None if rank == self.me => &self.desc,
                    None => &*slot.insert(self.target(rank)?),
                };
                let off = self.in_bounds(asked, disp, n, d)?;
                self.lazy_lock(op, rank)?;
                if permit.marks() && !self.fence_ops.load(Ordering::Relaxed) {
                    // Where the mutex path would `issue` (module doc of
                    // `epoch::permit`); only the epoch's first operation
                    // writes the flag (its cache line stays shared by the
                    // threads that issue).
                    self.fence_ops.store(true, Ordering::Relaxed);
                }
                return Ok((rank, off, d, issuing));
            }
        }
        let (rank, off, d, issuing) = self.access_slow(op, (asked, rank), disp, n)?;
        Ok((rank, off, &*slot.insert(d), issuing))
    }

    /// [`Window::access`] through the state mutex.
    #[inline(never)]
    fn access_slow(
        &self,
        op: &'static str,
        (asked, rank): (usize, usize),
        disp: usize,
        n: usize,
    ) -> Result<(usize, usize, Descriptor, Issuing<'_>)> {
        // After free, name the operation rather than "synchronization".
        self.alive(op)?;
        let prepare = self.epoch()?.may_issue(self.id, op, rank)?;
        if self.is_dynamic() {
            let at = self.dynamic_remote(rank, disp, n)?;
            let issuing = self.prepare_and_issue(prepare, op, rank)?;
            self.lazy_lock(op, rank)?;
            let off = disp * std::mem::size_of::<T>();
            // A descriptor for this one access, such that `remote(d, off)`
            // is the resolved address (offsets are absolute addresses here).
            let d = Descriptor {
                base: at.addr.wrapping_sub(off as u64),
                key: at.key,
                ..self.desc
            };
            return Ok((rank, off, d, issuing));
        }
        let d = self.target(rank)?;
        self.in_bounds(asked, disp, n, &d)?;
        let issuing = self.prepare_and_issue(prepare, op, rank)?;
        self.lazy_lock(op, rank)?;
        Ok((rank, disp * std::mem::size_of::<T>(), d, issuing))
    }

    /// Registers an operation allowed by `permit` (read from the atomic) as
    /// posting, when the permit is guarded; `None` if a retreat revoked the
    /// permit meanwhile (then take the mutex path). See `issuing.rs`.
    #[inline]
    fn register(&self, permit: Permit, rank: usize) -> Option<Issuing<'_>> {
        if !permit.is_guarded() {
            return Some(Issuing::Free);
        }
        self.issuing
            .register(|| self.permit_seq_cst().covers(rank))
    }

    fn permit_seq_cst(&self) -> Permit {
        if self.freed {
            return Permit::NONE;
        }
        Permit(self.permit.load(Ordering::SeqCst))
    }

    /// The mutex path: does what the operation needs first, then records it
    /// (and registers it inside `lock_all`, under the mutex). Inside
    /// `lock_all` another thread's retreat may release the target between
    /// the two: then it is taken again.
    fn prepare_and_issue(
        &self,
        mut prepare: Prepare,
        op: &'static str,
        rank: usize,
    ) -> Result<Issuing<'_>> {
        loop {
            self.prepare(prepare, op, rank)?;
            // What `prepare` did (a post consumed, `lock_all`'s lock taken)
            // is in the permit now: if it covers the target, `issue` would
            // change nothing, so the mutex is not taken again (a marking
            // permit takes it: the fence flag is set there).
            let permit = self.permit();
            if prepare != Prepare::Go && permit.covers(rank) && !permit.marks() {
                if let Some(issuing) = self.register(permit, rank) {
                    return Ok(issuing);
                }
            }
            let mut state = self.epoch()?;
            if state.may_issue(self.id, op, rank)? == Prepare::SharedLock {
                // Released (again) by another thread's retreat.
                prepare = Prepare::SharedLock;
                continue;
            }
            state.issue(self.id, op, rank)?;
            if state.mode == crate::epoch::Epoch::LockAll && !state.all.nocheck {
                return Ok(self.issuing.register_locked());
            }
            return Ok(Issuing::Free);
        }
    }

    /// `n` elements at `disp` fit in `rank`'s window described by `d`: the
    /// byte offset, else `OutOfWindow`. (`d` by reference: a 64-byte copy
    /// in and out cost store-forwarding stalls on the hot path.)
    #[inline]
    pub(super) fn in_bounds(
        &self,
        rank: usize,
        disp: usize,
        n: usize,
        d: &Descriptor,
    ) -> Result<usize> {
        let size = std::mem::size_of::<T>();
        let fits = if d.disp_unit == size as u64 {
            // The usual case, without a division: `end` elements of `size`
            // bytes fit in `len` bytes exactly when `end ≤ len / size`.
            disp.checked_add(n)
                .and_then(|end| end.checked_mul(size))
                .is_some_and(|bytes| bytes as u64 <= d.len)
        } else {
            disp.checked_add(n)
                .is_some_and(|end| end as u64 <= d.len / d.disp_unit)
        };
        if fits {
            return Ok(disp * size);
        }
        let target_len = (d.len / d.disp_unit) as usize;
        match disp.checked_add(n) {
            Some(end) if end <= target_len => Ok(disp * size),
            _ => Err(Error::OutOfWindow {
                window: self.id,
                rank,
                offset: disp,
                len: n,
                window_len: target_len,
                unattached: None,
            }),
        }
    }

    /// What an operation to `rank` needs first: `lock_all`'s shared locks
    /// or, in a start epoch, the target's post.
    fn prepare(&self, prepare: Prepare, op: &'static str, rank: usize) -> Result<()> {
        match prepare {
            Prepare::Go => Ok(()),
            Prepare::SharedLock => self.lock_all_target(rank),
            Prepare::AwaitPost => self.await_post(op, rank),
        }
    }

    pub(super) fn remote(d: &Descriptor, off: usize) -> RemoteAddr {
        RemoteAddr {
            addr: d.base.wrapping_add(off as u64),
            key: d.key,
        }
    }
}

/// The window's locked synchronization state; stores the state's permit
/// into the window's atomic when dropped, before the mutex is released
/// (the invariant of `epoch::permit`).
pub(super) struct EpochGuard<'w> {
    permit: &'w AtomicU64,
    // The window's lane is open (`Window::lane_open`, written only under
    // the mutex): an idle state's permit is `IDLE`, else `NONE`.
    lane_open: &'w AtomicBool,
    state: MutexGuard<'w, SyncState>,
}

impl Deref for EpochGuard<'_> {
    type Target = SyncState;
    fn deref(&self) -> &SyncState {
        &self.state
    }
}

impl DerefMut for EpochGuard<'_> {
    fn deref_mut(&mut self) -> &mut SyncState {
        &mut self.state
    }
}

impl Drop for EpochGuard<'_> {
    fn drop(&mut self) {
        // `state` (the mutex guard) drops after this body: still locked,
        // so only this thread writes the atomic now.
        let mut new = self.state.permit().0;
        if new == Permit::IDLE.0 && !self.lane_open.load(Ordering::Relaxed) {
            new = Permit::NONE.0;
        }
        let old = self.permit.load(Ordering::Relaxed);
        if new == old {
            return;
        }
        // Revoking a guarded permit (a retreat) pairs with
        // `Window::register` (Dekker): SeqCst. Otherwise Release suffices
        // (a plain store on x86_64, where SeqCst is an `xchg`).
        let order = if Permit(old).is_guarded() {
            Ordering::SeqCst
        } else {
            Ordering::Release
        };
        self.permit.store(new, order);
    }
}
