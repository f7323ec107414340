//! The per-window synchronization state machine.
//!
//! ```text
//!            fence (not NOSUCCEED)                 lock_all
//!   ┌──────┐ ───────────────────▶ ┌────────┐    ┌──────────┐
//!   │ Idle │                      │ Fence  │    │ LockAll  │
//!   └──────┘ ◀─────────────────── └────────┘    └──────────┘
//!      ▲  │    fence(NOSUCCEED)       │ lock_all       │
//!      │  │                           │ (no ops since  │ unlock_all
//!      │  └──────── lock_all ─────────┼─ the fence) ──▶│
//!      └──────────────────────────────┴────────────────┘
//! ```
//!
//! * RMA operations are allowed in `Fence` and `LockAll`.
//! * `flush*` only in `LockAll` (passive target).
//! * `fence` is not allowed in `LockAll`; `lock_all` is allowed after a fence
//!   only if no operation was issued since (as MPICH does), which is how a
//!   final `fence` without `NOSUCCEED` is tolerated.
//! * `free` is not allowed in `LockAll` or in a `Fence` epoch with operations
//!   issued since the fence.
//! * Fence assertions ([`Epoch::fence`], [`FencePlan`]): NOPRECEDE skips the
//!   completion work and is refused after operations were issued in the
//!   fence epoch; NOPRECEDE | NOSUCCEED skips the barrier too (nothing
//!   completes, no epoch opens); NOSTORE and NOPUT are accepted and change
//!   nothing (local assertions cannot remove a collective barrier).
//!   Other assertion bits are refused.
//!
//! Per-target locks (`lock`/`unlock`, [`locks`]), the targets `lock_all`
//! locks lazily and the PSCW epochs ([`pscw`]) combine with this diagram in
//! [`state::SyncState`], which the window keeps behind a mutex; every
//! transition is a method so the code follows the rules one to one.

pub mod locks;
pub mod permit;
pub mod pscw;
pub mod state;

pub use locks::LockType;
pub use permit::Permit;
pub use state::{Prepare, SyncState};

use crate::error::{Error, Result};

/// Assertions a program may give to `fence` (bit flags, as in MPI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Assert(pub u32);

impl Assert {
    /// No assertion.
    pub const NONE: Assert = Assert(0);
    /// No RMA operation completes at this fence (nothing issued before it).
    pub const NOPRECEDE: Assert = Assert(1);
    /// No RMA operation will be issued after this fence: closes the epoch.
    pub const NOSUCCEED: Assert = Assert(2);
    /// The local window was not updated by local stores since the last fence.
    pub const NOSTORE: Assert = Assert(4);
    /// The local window will not be updated by puts or accumulates until the next fence.
    pub const NOPUT: Assert = Assert(8);
    /// `lock`: no other process holds or tries to take a conflicting lock
    /// on the target, so the lock word is not touched at all.
    pub const NOCHECK: Assert = Assert(16);
    /// Alias of [`Assert::NOCHECK`] with MPI's name.
    pub const MODE_NOCHECK: Assert = Assert::NOCHECK;

    /// Whether all bits of `other` are set.
    pub fn contains(self, other: Assert) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Assert {
    type Output = Assert;
    fn bitor(self, rhs: Assert) -> Assert {
        Assert(self.0 | rhs.0)
    }
}

/// The assertions `fence` accepts.
pub const FENCE_ASSERTS: Assert =
    Assert(Assert::NOPRECEDE.0 | Assert::NOSUCCEED.0 | Assert::NOSTORE.0 | Assert::NOPUT.0);

/// What one `fence` call does, decided from its assertions only (never from
/// local state that could differ between processes, since the barrier is
/// collective: a barrier entered by some processes only would deadlock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FencePlan {
    /// Complete this process's operations of the closing epoch (not with
    /// NOPRECEDE: there are none).
    pub complete: bool,
    /// Enter the barrier: needed unless NOPRECEDE and NOSUCCEED are both
    /// given (nothing completes, no epoch opens; see docs/semantics.md).
    pub barrier: bool,
    /// The epoch after the fence (`Idle` with NOSUCCEED).
    pub next: Epoch,
}

/// Where a window is in its synchronization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Epoch {
    /// No access epoch open.
    Idle,
    /// Between fences; `ops` tells whether operations were issued since.
    Fence { ops: bool },
    /// Inside `lock_all`/`unlock_all`.
    LockAll,
}

impl Epoch {
    fn describe(self) -> String {
        match self {
            Epoch::Idle => "outside an epoch (call fence, lock, lock_all or start first)".into(),
            Epoch::Fence { .. } => "inside a fence epoch".into(),
            Epoch::LockAll => "inside a lock_all epoch".into(),
        }
    }

    fn refuse(self, window: u64, op: &'static str) -> Error {
        Error::Epoch {
            window,
            op,
            state: self.describe(),
        }
    }

    /// An RMA operation is about to be issued.
    pub fn issue(&mut self, window: u64, op: &'static str) -> Result<()> {
        match self {
            Epoch::Idle => Err(self.refuse(window, op)),
            Epoch::Fence { ops } => {
                *ops = true;
                Ok(())
            }
            Epoch::LockAll => Ok(()),
        }
    }

    /// A flush is requested.
    pub fn flush(&self, window: u64, op: &'static str) -> Result<()> {
        match self {
            Epoch::LockAll => Ok(()),
            _ => Err(self.refuse(window, op)),
        }
    }

    /// A fence is about to synchronize: checks the assertions against the
    /// state and says what the fence must do (see [`FencePlan`]).
    pub fn fence(&self, window: u64, assert: Assert) -> Result<FencePlan> {
        let unknown = assert.0 & !FENCE_ASSERTS.0;
        if unknown != 0 {
            return Err(Error::InvalidArgument(format!(
                "window {window}: fence: assertion bits {unknown:#x} are not fence assertions \
                 (NOPRECEDE, NOSUCCEED, NOSTORE, NOPUT)"
            )));
        }
        let noprecede = assert.contains(Assert::NOPRECEDE);
        match self {
            Epoch::LockAll => return Err(self.refuse(window, "fence")),
            Epoch::Fence { ops: true } if noprecede => {
                return Err(Error::Epoch {
                    window,
                    op: "fence(NOPRECEDE)",
                    state: "after operations were issued in this fence epoch \
                            (NOPRECEDE asserts there is nothing to complete)"
                        .into(),
                })
            }
            _ => {}
        }
        let nosucceed = assert.contains(Assert::NOSUCCEED);
        Ok(FencePlan {
            complete: !noprecede,
            barrier: !(noprecede && nosucceed),
            next: if nosucceed {
                Epoch::Idle
            } else {
                Epoch::Fence { ops: false }
            },
        })
    }

    /// `lock_all` is requested.
    pub fn lock_all(&mut self, window: u64) -> Result<()> {
        match self {
            Epoch::Idle | Epoch::Fence { ops: false } => {
                *self = Epoch::LockAll;
                Ok(())
            }
            _ => Err(self.refuse(window, "lock_all")),
        }
    }

    /// `unlock_all` is requested (the caller flushes first).
    pub fn unlock_all(&self, window: u64) -> Result<()> {
        match self {
            Epoch::LockAll => Ok(()),
            _ => Err(self.refuse(window, "unlock_all")),
        }
    }

    /// `free` is requested.
    pub fn free(&self, window: u64) -> Result<()> {
        match self {
            Epoch::Idle | Epoch::Fence { ops: false } => Ok(()),
            _ => Err(self.refuse(window, "free")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions() {
        let mut e = Epoch::Idle;
        assert!(e.issue(1, "put").is_err());
        assert!(e.flush(1, "flush").is_err());
        assert!(e.unlock_all(1).is_err());
        e = e.fence(1, Assert::NONE).unwrap().next;
        assert_eq!(e, Epoch::Fence { ops: false });
        e.issue(1, "put").unwrap();
        assert!(
            e.lock_all(1).is_err(),
            "lock_all with ops pending from a fence epoch"
        );
        assert!(e.free(1).is_err());
        assert!(
            e.fence(1, Assert::NOPRECEDE).is_err(),
            "NOPRECEDE with operations to complete"
        );
        e = e.fence(1, Assert::NOSUCCEED).unwrap().next;
        assert_eq!(e, Epoch::Idle);
        e.lock_all(1).unwrap();
        assert!(e.lock_all(1).is_err(), "lock_all twice");
        assert!(e.fence(1, Assert::NONE).is_err(), "fence inside lock_all");
        assert!(e.free(1).is_err(), "free inside lock_all");
        e.flush(1, "flush").unwrap();
        e.unlock_all(1).unwrap();
    }

    #[test]
    fn fence_assertions() {
        let idle = Epoch::Idle;
        let both = Assert::NOPRECEDE | Assert::NOSUCCEED;
        let p = idle.fence(1, both).unwrap();
        assert_eq!((p.complete, p.barrier, p.next), (false, false, Epoch::Idle));
        let p = idle.fence(1, Assert::NOPRECEDE).unwrap();
        assert_eq!(
            (p.complete, p.barrier, p.next),
            (false, true, Epoch::Fence { ops: false })
        );
        let p = idle.fence(1, Assert::NOSUCCEED).unwrap();
        assert_eq!((p.complete, p.barrier, p.next), (true, true, Epoch::Idle));
        let p = idle
            .fence(1, Assert::NOSTORE | Assert::NOPUT | Assert::NOPRECEDE)
            .unwrap();
        assert!(!p.complete && p.barrier);
        assert!(
            idle.fence(1, Assert::NOCHECK).is_err(),
            "not a fence assertion"
        );
        let open = Epoch::Fence { ops: false };
        assert!(!open.fence(1, both).unwrap().barrier);
        assert!(Epoch::Fence { ops: true }.fence(1, both).is_err());
    }

    #[test]
    fn error_names_window_and_op() {
        let mut e = Epoch::Idle;
        let msg = e.issue(9, "get").unwrap_err().to_string();
        assert!(
            msg.contains("window 9") && msg.contains("get") && msg.contains("outside an epoch"),
            "{msg}"
        );
    }
}
