//! A window's whole synchronization state: the [`Epoch`] (fence / lock_all),
//! the per-target [`Locks`], the targets `lock_all` has locked and the PSCW
//! epochs ([`Pscw`]), with every rule that involves more than one of them.
//!
//! * `lock(r)` only outside `lock_all` and outside a fence epoch with
//!   operations issued (after such a fence it closes the fence epoch, as
//!   `lock_all` does); never twice on `r`.
//! * An RMA operation to `r` needs `lock_all` or a held lock on `r`; while any
//!   lock is held, an operation to an unlocked target is refused.
//! * `flush(r)` needs `lock_all` or a held lock on `r`; `flush_all` needs
//!   `lock_all` or at least one held lock.
//! * `fence`, `lock_all` and `free` are refused while any lock is held (or
//!   being acquired) or a PSCW epoch is open; `lock` is refused while a PSCW
//!   epoch is open.
//! * Inside `lock_all`, the first operation to a target `r` takes the
//!   shared lock of `r` alone ([`Prepare::SharedLock`], not with NOCHECK);
//!   the targets held are [`LockAllTargets::held`] (at most the window's
//!   target elements). A process never *waits* for a lock while holding
//!   others: it first completes and releases them (a *retreat*, while
//!   [`LockAllTargets::retreating`] no operation may be issued to them;
//!   see docs/semantics.md, "lock_all locks per target"). `unlock_all`
//!   releases exactly the targets held.
//! * `start`/`post` are refused inside `lock_all`, with locks held or in a
//!   fence epoch with operations; inside a start epoch an operation needs
//!   its target in the group and that target's post ([`Prepare::AwaitPost`]).
//!   Flushes are refused in PSCW epochs (they belong to passive target).

use super::locks::{Held, LockType, Locks};
use super::permit::Permit;
use super::pscw::Pscw;
use super::{Assert, Epoch, FencePlan};
use crate::error::{Error, Result};

/// What an RMA operation to a rank needs before it is posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prepare {
    /// Nothing: post it.
    Go,
    /// Inside `lock_all`, first access to this target: take its shared lock
    /// (then recorded by [`SyncState::lock_all_acquired`]).
    SharedLock,
    /// Inside a PSCW access epoch: wait for the target's post notification.
    AwaitPost,
}

/// The targets `lock_all` holds a shared lock on: only those accessed
/// (bounded by the caller: at most the window's target elements, then a
/// retreat empties it), nothing for ranks never accessed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockAllTargets {
    /// `lock_all(NOCHECK)`: no lock word is touched.
    pub nocheck: bool,
    /// World ranks whose lock holds our shared lock, in the order taken
    /// (the last one is the lock-free permit's target).
    pub held: Vec<usize>,
    /// The held locks are being completed and released (a retreat): no
    /// operation may be issued to them until it ends.
    pub retreating: bool,
}

impl LockAllTargets {
    /// Whether `rank`'s shared lock is held (and not being released).
    pub fn holds(&self, rank: usize) -> bool {
        !self.retreating && self.held.contains(&rank)
    }

    /// The target the lock-free path covers: the one taken last.
    pub fn last(&self) -> Option<usize> {
        if self.retreating {
            return None;
        }
        self.held.last().copied()
    }
}

/// Epoch plus per-target locks, `lock_all`'s targets and the PSCW epochs,
/// kept behind the window's mutex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncState {
    /// Fence / lock_all state.
    pub mode: Epoch,
    /// Per-target locks.
    pub locks: Locks,
    /// Shared locks taken by the open `lock_all` epoch.
    pub all: LockAllTargets,
    /// Post/start/complete/wait epochs.
    pub pscw: Pscw,
}

impl Default for SyncState {
    fn default() -> Self {
        SyncState {
            mode: Epoch::Idle,
            locks: Locks::default(),
            all: LockAllTargets::default(),
            pscw: Pscw::default(),
        }
    }
}

fn refuse(window: u64, op: &'static str, state: String) -> Error {
    Error::Epoch { window, op, state }
}

impl SyncState {
    fn holding(&self) -> String {
        let n = self.locks.len();
        format!("while this process holds {n} per-target lock(s) (unlock them first)")
    }

    /// Refuses `op` while per-target locks are held or a PSCW epoch is open.
    fn exclusive_mode(&self, window: u64, op: &'static str) -> Result<()> {
        if !self.locks.is_empty() {
            return Err(refuse(window, op, self.holding()));
        }
        if self.pscw.is_open() {
            return Err(refuse(window, op, self.pscw.describe()));
        }
        Ok(())
    }

    /// Whether an RMA operation `op` to `rank` may be issued, and what it
    /// needs first (no change).
    pub fn may_issue(&self, window: u64, op: &'static str, rank: usize) -> Result<Prepare> {
        if self.locks.holds(rank) {
            return Ok(Prepare::Go);
        }
        if !self.locks.is_empty() {
            return Err(refuse(
                window,
                op,
                format!(
                    "to rank {rank}: it is not locked by this process (call lock({rank}) first)"
                ),
            ));
        }
        if self.pscw.access.is_some() {
            return match self.pscw.issue(window, op, rank)? {
                true => Ok(Prepare::Go),
                false => Ok(Prepare::AwaitPost),
            };
        }
        match self.mode {
            Epoch::LockAll if self.all.nocheck || self.all.holds(rank) => Ok(Prepare::Go),
            Epoch::LockAll => Ok(Prepare::SharedLock),
            Epoch::Fence { .. } => Ok(Prepare::Go),
            Epoch::Idle => Err(self.mode.refuse(window, op)),
        }
    }

    /// Whether operations now belong to an active-target access epoch
    /// (fence or PSCW) and no per-target lock is held: the targets read
    /// what they receive only after their own fence or `wait`.
    pub fn active_target(&self) -> bool {
        self.locks.is_empty()
            && (self.pscw.access.is_some() || matches!(self.mode, Epoch::Fence { .. }))
    }

    /// The lock-free summary of this state for the operation fast path
    /// (see [`Permit`]).
    pub fn permit(&self) -> Permit {
        Permit::of(
            self.mode,
            &self.locks,
            self.all.last(),
            self.all.nocheck,
            &self.pscw,
        )
    }

    /// Operations were issued under a marking permit (the window's
    /// `fence_ops` flag, see `Permit::marks`): the fence epoch has
    /// operations. Nothing if the state moved on meanwhile (only an
    /// erroneous program changes the epoch while another thread issues).
    pub fn fence_ops_issued(&mut self) {
        if matches!(self.mode, Epoch::Fence { ops: false })
            && self.locks.is_empty() && !self.pscw.is_open() {
            self.mode = Epoch::Fence { ops: true };
        }
    }

    /// An RMA operation `op` to `rank` is about to be issued (its
    /// preparation is done).
    pub fn issue(&mut self, window: u64, op: &'static str, rank: usize) -> Result<()> {
        match self.may_issue(window, op, rank)? {
            Prepare::Go => {}
            Prepare::SharedLock => {
                return Err(refuse(
                    window,
                    op,
                    format!("to rank {rank}: lock_all has not locked it yet"),
                ))
            }
            Prepare::AwaitPost => {
                return Err(refuse(
                    window,
                    op,
                    format!("to rank {rank}: its post has not arrived yet"),
                ))
            }
        }
        if self.locks.is_empty() && self.pscw.access.is_none() {
            self.mode.issue(window, op)?;
        }
        Ok(())
    }

    /// A flush of `rank` (`Some`) or of every target (`None`) is requested.
    pub fn flush(&self, window: u64, op: &'static str, rank: Option<usize>) -> Result<()> {
        if self.mode == Epoch::LockAll {
            return Ok(());
        }
        match rank {
            Some(r) if self.locks.holds(r) => Ok(()),
            None if self.locks.any_held() => Ok(()),
            Some(r) if !self.locks.is_empty() => Err(refuse(
                window,
                op,
                format!("to rank {r}: it is not locked by this process"),
            )),
            _ if self.pscw.is_open() => Err(refuse(
                window,
                op,
                format!(
                    "{} (flushes belong to passive-target epochs)",
                    self.pscw.describe()
                ),
            )),
            _ => self.mode.flush(window, op),
        }
    }

    /// A fence is about to synchronize: what it must do.
    pub fn fence(&self, window: u64, assert: Assert) -> Result<FencePlan> {
        self.exclusive_mode(window, "fence")?;
        self.mode.fence(window, assert)
    }

    /// `lock_all` is requested.
    pub fn lock_all(&mut self, window: u64, nocheck: bool) -> Result<()> {
        self.exclusive_mode(window, "lock_all")?;
        self.mode.lock_all(window)?;
        // The list keeps its allocation from one epoch to the next.
        self.all.nocheck = nocheck;
        self.all.held.clear();
        self.all.retreating = false;
        Ok(())
    }

    /// `lock_all` took its shared lock on `rank`; false if the epoch ended
    /// or `rank` is already held (the caller releases its extra one).
    pub fn lock_all_acquired(&mut self, rank: usize) -> bool {
        if self.mode != Epoch::LockAll || self.all.held.contains(&rank) {
            return false;
        }
        self.all.held.push(rank);
        true
    }

    /// `unlock_all` is requested (the caller flushes first).
    pub fn unlock_all(&self, window: u64) -> Result<()> {
        self.mode.unlock_all(window)
    }

    /// `unlock_all` completed the operations: leaves the epoch and returns
    /// the targets whose shared lock must be released (give the list back
    /// with [`SyncState::reuse_held`] to keep its allocation).
    pub fn end_unlock_all(&mut self) -> Vec<usize> {
        self.mode = Epoch::Idle;
        self.all.retreating = false;
        std::mem::take(&mut self.all.held)
    }

    /// Gives back a list taken by [`SyncState::end_unlock_all`] (emptied).
    pub fn reuse_held(&mut self, mut list: Vec<usize>) {
        if self.all.held.is_empty() && self.all.held.capacity() < list.capacity() {
            list.clear();
            self.all.held = list;
        }
    }

    /// `free` is requested.
    pub fn free(&self, window: u64) -> Result<()> {
        self.exclusive_mode(window, "free")?;
        self.mode.free(window)
    }

    /// `start` or `post` is requested: refused inside `lock_all`, with locks
    /// held or in a fence epoch with operations; closes a fence epoch
    /// without operations.
    pub fn begin_pscw(&mut self, window: u64, op: &'static str) -> Result<()> {
        if !self.locks.is_empty() {
            return Err(refuse(window, op, self.holding()));
        }
        match self.mode {
            Epoch::LockAll | Epoch::Fence { ops: true } => Err(self.mode.refuse(window, op)),
            _ => {
                self.mode = Epoch::Idle;
                Ok(())
            }
        }
    }

    /// `lock(rank)` starts: records the target as being acquired.
    pub fn begin_lock(
        &mut self,
        window: u64,
        rank: usize,
        kind: LockType,
        nocheck: bool,
    ) -> Result<()> {
        if self.pscw.is_open() {
            return Err(refuse(window, "lock", self.pscw.describe()));
        }
        match self.mode {
            Epoch::LockAll => {
                return Err(refuse(
                    window,
                    "lock",
                    format!("of rank {rank} inside a lock_all epoch"),
                ))
            }
            Epoch::Fence { ops: true } => {
                return Err(refuse(
                    window,
                    "lock",
                    format!("of rank {rank} inside a fence epoch with operations issued"),
                ))
            }
            _ => {}
        }
        if self.locks.get(rank).is_some() {
            return Err(refuse(
                window,
                "lock",
                format!("of rank {rank}: this process already locks it"),
            ));
        }
        self.mode = Epoch::Idle;
        self.locks.insert(Held {
            rank,
            kind,
            nocheck,
            held: false,
        });
        Ok(())
    }

    /// A lock of `kind` on `rank` taken on the permit's lane (see
    /// `epoch::permit`) enters the state: what `begin_lock` and
    /// `lock_acquired` make of the idle state the lane was taken from.
    pub fn lane_settled(&mut self, rank: usize, kind: LockType) {
        debug_assert!(self.permit() == Permit::IDLE, "the lane is taken from idle");
        self.mode = Epoch::Idle;
        self.locks.insert(Held {
            rank,
            kind,
            nocheck: false,
            held: true,
        });
    }

    /// The lock word of `rank` was acquired.
    pub fn lock_acquired(&mut self, rank: usize) {
        self.locks.set_held(rank);
    }

    /// Acquiring `rank` failed: forget the entry.
    pub fn lock_failed(&mut self, rank: usize) {
        self.locks.remove(rank);
    }

    /// Whether `unlock(rank)` may proceed (the lock is held).
    pub fn check_unlock(&self, window: u64, rank: usize) -> Result<Held> {
        match self.locks.get(rank) {
            Some(h) if h.held => Ok(*h),
            _ => Err(refuse(
                window,
                "unlock",
                format!("of rank {rank}: this process does not hold a lock on it"),
            )),
        }
    }

    /// `unlock(rank)` has completed the operations: drop the entry (the
    /// caller then releases the lock word).
    pub fn end_unlock(&mut self, window: u64, rank: usize) -> Result<Held> {
        let h = self.check_unlock(window, rank)?;
        self.locks.remove(rank);
        Ok(h)
    }
}

#[cfg(test)]
mod tests;
