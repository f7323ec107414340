//! A window's whole synchronization state: the [`Epoch`] (fence / lock_all)
//! and the per-target [`Locks`], with every rule that involves both.
//!
//! * `lock(r)` only outside `lock_all` and outside a fence epoch with
//!   operations issued (after such a fence it closes the fence epoch, as
//!   `lock_all` does); never twice on `r`.
//! * An RMA operation to `r` needs `lock_all` or a held lock on `r`; while any
//!   lock is held, an operation to an unlocked target is refused.
//! * `flush(r)` needs `lock_all` or a held lock on `r`; `flush_all` needs
//!   `lock_all` or at least one held lock.
//! * `fence`, `lock_all` and `free` are refused while any lock is held (or
//!   being acquired).

use super::locks::{Held, LockType, Locks};
use super::{Assert, Epoch};
use crate::error::{Error, Result};

/// Epoch plus per-target locks, kept behind the window's mutex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncState {
    /// Fence / lock_all state.
    pub mode: Epoch,
    /// Per-target locks.
    pub locks: Locks,
}

impl Default for SyncState {
    fn default() -> Self {
        SyncState {
            mode: Epoch::Idle,
            locks: Locks::default(),
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

    /// Whether an RMA operation `op` to `rank` may be issued (no change).
    pub fn may_issue(&self, window: u64, op: &'static str, rank: usize) -> Result<()> {
        self.clone().issue(window, op, rank)
    }

    /// An RMA operation `op` to `rank` is about to be issued.
    pub fn issue(&mut self, window: u64, op: &'static str, rank: usize) -> Result<()> {
        if self.locks.holds(rank) {
            return Ok(());
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
        self.mode.issue(window, op)
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
            _ => self.mode.flush(window, op),
        }
    }

    /// A fence is about to synchronize; returns the epoch after it.
    pub fn fence(&self, window: u64, assert: Assert) -> Result<Epoch> {
        if !self.locks.is_empty() {
            return Err(refuse(window, "fence", self.holding()));
        }
        self.mode.fence(window, assert)
    }

    /// `lock_all` is requested.
    pub fn lock_all(&mut self, window: u64) -> Result<()> {
        if !self.locks.is_empty() {
            return Err(refuse(window, "lock_all", self.holding()));
        }
        self.mode.lock_all(window)
    }

    /// `unlock_all` is requested (the caller flushes first).
    pub fn unlock_all(&self, window: u64) -> Result<()> {
        self.mode.unlock_all(window)
    }

    /// `free` is requested.
    pub fn free(&self, window: u64) -> Result<()> {
        if !self.locks.is_empty() {
            return Err(refuse(window, "free", self.holding()));
        }
        self.mode.free(window)
    }

    /// `lock(rank)` starts: records the target as being acquired.
    pub fn begin_lock(
        &mut self,
        window: u64,
        rank: usize,
        kind: LockType,
        nocheck: bool,
    ) -> Result<()> {
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
mod tests {
    use super::*;

    #[test]
    fn lock_rules() {
        let mut s = SyncState::default();
        assert!(s.issue(1, "put", 2).is_err(), "no epoch");
        assert!(s.check_unlock(1, 2).is_err(), "unlock without lock");
        s.begin_lock(1, 2, LockType::Exclusive, false).unwrap();
        assert!(s.issue(1, "put", 2).is_err(), "not yet acquired");
        s.lock_acquired(2);
        s.begin_lock(1, 3, LockType::Shared, false).unwrap();
        s.lock_acquired(3);
        assert!(
            s.begin_lock(1, 2, LockType::Shared, false).is_err(),
            "twice"
        );
        s.issue(1, "put", 2).unwrap();
        s.may_issue(1, "get", 3).unwrap();
        assert!(s.issue(1, "put", 0).is_err(), "unlocked target");
        s.flush(1, "flush", Some(2)).unwrap();
        s.flush(1, "flush_all", None).unwrap();
        assert!(s.flush(1, "flush", Some(0)).is_err());
        assert!(s.fence(1, Assert::NONE).is_err());
        assert!(s.lock_all(1).is_err());
        assert!(s.free(1).is_err());
        s.end_unlock(1, 2).unwrap();
        assert!(s.end_unlock(1, 2).is_err(), "unlock twice");
        s.end_unlock(1, 3).unwrap();
        s.free(1).unwrap();
        s.lock_all(1).unwrap();
        let err = s
            .begin_lock(7, 5, LockType::Shared, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("window 7") && err.contains("lock") && err.contains("rank 5"),
            "{err}"
        );
    }

    #[test]
    fn lock_after_fence_without_ops() {
        let mut s = SyncState {
            mode: Epoch::Fence { ops: true },
            locks: Locks::default(),
        };
        assert!(s.begin_lock(1, 0, LockType::Shared, false).is_err());
        s.mode = Epoch::Fence { ops: false };
        s.begin_lock(1, 0, LockType::Shared, false).unwrap();
        assert_eq!(s.mode, Epoch::Idle);
    }
}
