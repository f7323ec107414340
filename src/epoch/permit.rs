//! The lock-free "may this operation go?" answer of a window's
//! [`SyncState`](super::SyncState), for the per-operation fast path.
//!
//! A [`Permit`] is one `u64` summarizing the targets to which an RMA
//! operation is allowed *and needs no state change* (`may_issue` says
//! `Prepare::Go` and `issue` changes nothing), and whether a flush of those
//! targets is allowed. The window keeps it in an `AtomicU64` next to the
//! mutex-protected state.
//!
//! Invariants (relied on by `api::window`):
//! * The atomic is written while the state mutex is held, after every
//!   change of the state, with `permit()` of the new state (the window's
//!   epoch guard does it when it is dropped, before it unlocks; it skips
//!   the store when the value is unchanged). So a value read from it was
//!   the exact summary of the state at some moment — the state plus the
//!   lock the lane holds, if any: the lane's two compare-and-swaps are the
//!   only writes without the mutex (last bullet).
//! * A permit never allows what the state refuses at the moment it was
//!   stored. An operation that reads a permit and then runs races with a
//!   concurrent epoch change exactly as it would with the mutex, which is
//!   also released before the operation is posted: it is ordered before
//!   or after that change, never inside it.
//! * What is covered: the one lock held (its target, flushes too), a
//!   fence epoch (every rank), `lock_all` (the targets already locked, or
//!   every rank under NOCHECK), and a start (PSCW access) epoch's targets
//!   whose post was consumed — one rank, or a set of ranks below 48
//!   (the others, and any rank whose post has not been seen, wait for it on
//!   the mutex path). Before, every operation of a PSCW epoch took the
//!   mutex twice: an epoch of 16 puts to one node-local target cost
//!   16,567 instructions at the origin, now 6,903 (callgrind, 2026-12-05).
//! * Anything the permit does not cover takes the mutex path, which is the
//!   reference: the permit only skips work, it never decides an error.
//! * One state change is made without the mutex: a fence epoch's first
//!   operation marks it as having operations (`Epoch::Fence { ops }`,
//!   which decides whether `fence(NOPRECEDE)`, `lock`, `lock_all`,
//!   `start`, `post` and `free` are refused). Its permit is
//!   [`Permit::marks`]: an operation under it sets the window's
//!   `fence_ops` flag, which every taking of the state mutex folds into
//!   the state before anything reads it (`api::window::access`, `epoch`).
//!   Without it each fence epoch's first operation took the mutex twice
//!   (a put in a fence epoch cost 861 instructions against 266 in a lock
//!   epoch, callgrind 2026-12-05).
//! * The *lane*: the other write without the mutex. While the permit is
//!   [`Permit::IDLE`] (the state has no epoch, lock or PSCW epoch), `lock`
//!   may take a node-local lock word and then compare-and-swap the permit
//!   from `IDLE` to [`Permit::lane`]: the lock is held, in the permit only.
//!   `unlock` of that lock completes its operations, swaps the permit back
//!   to `IDLE` and releases the word. Every taking of the state mutex first
//!   *settles* the permit (`api::window::access`): `IDLE` is swapped to
//!   `NONE` (so no lane lock can appear while the mutex is held), a lane
//!   lock is inserted into the state as a held lock and its permit swapped
//!   to [`Permit::settled`] (then its `unlock` fails to swap and takes the
//!   mutex path). Both swaps are compare-and-swaps, so a lane lock is
//!   either in the permit or in the state, never both or neither; the
//!   state the lane skipped is the one `lock` would have made from an
//!   idle state (`SyncState::lane_settled`). Without it a lock + put +
//!   unlock held the mutex twice (four locked instructions of seven).
//!   The lane is open only on windows whose lock words are node-local CPU
//!   atomics, from their first `lock` on (`Window::lane_open`); elsewhere
//!   an idle state's permit is stored as `NONE`, and taking the mutex has
//!   nothing to settle — so fence and PSCW epochs of a window that never
//!   locks pay no compare-and-swap for the lane.

use super::locks::{LockType, Locks};
use super::pscw::Pscw;
use super::Epoch;

const RANK_BITS: u32 = 48;
const RANK_MASK: u64 = (1 << RANK_BITS) - 1;
const KIND_SHIFT: u32 = RANK_BITS;
const KIND_ALL: u64 = 1;
const KIND_PREFIX: u64 = 2;
const KIND_ONE: u64 = 3;
/// The rank bits are a set: bit `r` allows rank `r` (ranks below 48).
const KIND_SET: u64 = 4;
/// No epoch of any kind: the lane may take a lock (see the module doc).
const KIND_IDLE: u64 = 5;
const KIND_BITS: u64 = 7;
const FLUSH: u64 = 1 << 51;
const GUARD: u64 = 1 << 52;
const MARK: u64 = 1 << 53;
/// A lock taken on the lane, not yet in the state (module doc).
const LANE: u64 = 1 << 54;
/// The lane's lock is shared (else exclusive).
const LANE_SHARED: u64 = 1 << 55;

/// See the module doc. `Permit::NONE` (0) allows nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permit(pub u64);

impl Permit {
    /// Nothing may go without the mutex.
    pub const NONE: Permit = Permit(0);

    /// The state is idle (no epoch, no lock, no PSCW epoch): nothing may
    /// go, and a lock may be taken on the lane (module doc).
    pub const IDLE: Permit = Permit(KIND_IDLE << KIND_SHIFT);

    fn new(kind: u64, rank: usize, flush: bool) -> Permit {
        if rank as u64 > RANK_MASK {
            return Permit::NONE;
        }
        Permit(kind << KIND_SHIFT | rank as u64 | if flush { FLUSH } else { 0 })
    }

    /// Operations to every rank.
    pub fn all(flush: bool) -> Permit {
        Permit::new(KIND_ALL, 0, flush)
    }

    /// Operations to ranks `0..=upto`.
    pub fn prefix(upto: usize, flush: bool) -> Permit {
        Permit::new(KIND_PREFIX, upto, flush)
    }

    /// Operations to `rank` only.
    pub fn one(rank: usize, flush: bool) -> Permit {
        Permit::new(KIND_ONE, rank, flush)
    }

    /// Operations to the ranks in `ranks` below 48 (the others take the
    /// mutex path); no flushes.
    pub fn set(ranks: &[usize]) -> Permit {
        let mask = ranks
            .iter()
            .filter(|&&r| r < RANK_BITS as usize)
            .fold(0u64, |m, &r| m | 1 << r);
        if mask == 0 {
            return Permit::NONE;
        }
        Permit(KIND_SET << KIND_SHIFT | mask)
    }

    /// The same permit, whose operations must register while they are
    /// posted (`lock_all`'s targets may be released by a retreat, which
    /// waits for registered operations: see `api::window::access`).
    pub fn guarded(self) -> Permit {
        if self == Permit::NONE {
            return self;
        }
        Permit(self.0 | GUARD)
    }

    /// The same permit, whose operations mark the fence epoch as having
    /// operations (see the module doc).
    pub fn marking(self) -> Permit {
        if self == Permit::NONE {
            return self;
        }
        Permit(self.0 | MARK)
    }

    /// The permit of one lock of `kind` on `rank` taken on the lane: as
    /// [`Permit::one`] with flushes, marked as not yet in the state.
    /// `NONE` for a rank the encoding cannot hold.
    pub fn lane(rank: usize, kind: LockType) -> Permit {
        let one = Permit::one(rank, true);
        if one == Permit::NONE {
            return one;
        }
        let shared = if kind == LockType::Shared { LANE_SHARED } else { 0 };
        Permit(one.0 | LANE | shared)
    }

    /// The lock this permit says was taken on the lane and is not in the
    /// state yet: its target and kind.
    #[inline]
    pub fn lane_lock(self) -> Option<(usize, LockType)> {
        if self.0 & LANE == 0 {
            return None;
        }
        let kind = if self.0 & LANE_SHARED != 0 {
            LockType::Shared
        } else {
            LockType::Exclusive
        };
        Some(((self.0 & RANK_MASK) as usize, kind))
    }

    /// The same permit once its lane lock is in the state: [`Permit::one`].
    pub fn settled(self) -> Permit {
        Permit(self.0 & !(LANE | LANE_SHARED))
    }

    /// Whether operations under this permit set the window's `fence_ops`.
    #[inline]
    pub fn marks(self) -> bool {
        self.0 & MARK != 0
    }

    /// Whether operations under this permit must register.
    #[inline]
    pub fn is_guarded(self) -> bool {
        self.0 & GUARD != 0
    }

    /// Whether an RMA operation to `rank` may be posted without the mutex.
    #[inline]
    pub fn covers(self, rank: usize) -> bool {
        let r = self.0 & RANK_MASK;
        match (self.0 >> KIND_SHIFT) & KIND_BITS {
            KIND_ALL => true,
            KIND_PREFIX => (rank as u64) <= r,
            KIND_ONE => rank as u64 == r,
            KIND_SET => rank < RANK_BITS as usize && (r >> rank) & 1 == 1,
            _ => false,
        }
    }

    /// Whether a flush of `rank` may proceed without the mutex.
    #[inline]
    pub fn flushes(self, rank: usize) -> bool {
        self.0 & FLUSH != 0 && self.covers(rank)
    }

    /// The permit of a state (see `SyncState::permit`).
    pub(super) fn of(
        mode: Epoch,
        locks: &Locks,
        lock_all_last: Option<usize>,
        nocheck: bool,
        pscw: &Pscw,
    ) -> Permit {
        if pscw.is_open() {
            // `lock`, `lock_all` and fence epochs are refused while a PSCW
            // epoch is open (and the reverse), so only the access epoch
            // decides: operations to its targets whose post was consumed
            // (every target under NOCHECK) change no state (`Pscw::issue`
            // only checks); the others wait for their post on the mutex
            // path. Flushes are refused in PSCW epochs. Without it every
            // operation of a PSCW epoch took the mutex twice.
            return match &pscw.access {
                Some(a) => match a.ready_targets() {
                    [] => Permit::NONE,
                    [r] => Permit::one(*r, false),
                    ranks => Permit::set(ranks),
                },
                None => Permit::NONE,
            };
        }
        if !locks.is_empty() {
            // One per-target lock held (the usual lock/op/unlock epoch):
            // its operations and flushes change no state. Several locks,
            // or one still being acquired, take the mutex path.
            return match locks.only() {
                Some(h) if h.held => Permit::one(h.rank, true),
                _ => Permit::NONE,
            };
        }
        match mode {
            Epoch::LockAll if nocheck => Permit::all(true),
            Epoch::LockAll => {
                lock_all_last.map_or(Permit::NONE, |r| Permit::one(r, true).guarded())
            }
            // `issue` changes nothing once the fence epoch has operations,
            // and before, the one change is made by the flag (module doc);
            // flushes are refused in fence epochs.
            Epoch::Fence { ops: true } => Permit::all(false),
            Epoch::Fence { ops: false } => Permit::all(false).marking(),
            Epoch::Idle => Permit::IDLE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings() {
        assert!(!Permit::NONE.covers(0) && !Permit::NONE.flushes(0));
        assert!(Permit::all(false).covers(12345) && !Permit::all(false).flushes(1));
        let p = Permit::prefix(3, true);
        assert!(p.covers(0) && p.covers(3) && !p.covers(4) && p.flushes(3) && !p.flushes(4));
        let o = Permit::one(7, true);
        assert!(o.covers(7) && !o.covers(6) && !o.covers(8) && o.flushes(7));
        assert_eq!(Permit::one(usize::MAX, true), Permit::NONE);
    }

    #[test]
    fn lane_locks_are_one_lock_permits_marked() {
        for kind in [LockType::Exclusive, LockType::Shared] {
            let l = Permit::lane(9, kind);
            assert!(l.covers(9) && l.flushes(9) && !l.covers(8) && !l.is_guarded());
            assert_eq!(l.lane_lock(), Some((9, kind)));
            assert_eq!(l.settled(), Permit::one(9, true));
            assert_eq!(l.settled().lane_lock(), None);
        }
        assert_eq!(Permit::lane(usize::MAX, LockType::Shared), Permit::NONE);
        assert!(!Permit::IDLE.covers(0) && !Permit::IDLE.flushes(0));
        assert_eq!(Permit::IDLE.lane_lock(), None);
        assert_ne!(Permit::IDLE, Permit::NONE);
    }

    #[test]
    fn sets_cover_their_ranks_below_48() {
        let p = Permit::set(&[0, 3, 47, 48, 1000]);
        assert!(p.covers(0) && p.covers(3) && p.covers(47));
        assert!(!p.covers(1) && !p.covers(48) && !p.covers(1000) && !p.covers(usize::MAX));
        assert!(!p.flushes(3) && !p.is_guarded() && !p.marks());
        assert_eq!(Permit::set(&[48, 99]), Permit::NONE);
        assert_eq!(Permit::set(&[]), Permit::NONE);
    }

    #[test]
    fn pscw_access_epoch_covers_its_ready_targets() {
        let locks = Locks::default();
        let of = |p: &Pscw| Permit::of(Epoch::Idle, &locks, None, false, p);
        let mut p = Pscw::default();
        p.start(7, [1, 2, 60].into_iter().collect(), false).unwrap();
        assert_eq!(of(&p), Permit::NONE, "no post consumed yet");
        p.mark_ready(2);
        assert_eq!(of(&p), Permit::one(2, false));
        p.mark_ready(60);
        p.mark_ready(1);
        let q = of(&p);
        assert!(q.covers(1) && q.covers(2) && !q.covers(60) && !q.covers(0));
        assert!(!q.flushes(1), "flushes are refused in PSCW epochs");
        // An exposure epoch beside it changes nothing for the origin side.
        p.post(7, [0].into_iter().collect()).unwrap();
        assert_eq!(of(&p), q);
        p.end_complete();
        assert_eq!(of(&p), Permit::NONE, "only the exposure epoch is left");
        let mut n = Pscw::default();
        n.start(7, [4, 5].into_iter().collect(), true).unwrap();
        let q = of(&n);
        assert!(q.covers(4) && q.covers(5) && !q.covers(6), "NOCHECK: every target");
    }

    #[test]
    fn one_held_lock_goes_lock_free() {
        use super::super::locks::{Held, LockType};
        let mut locks = Locks::default();
        let pscw = Pscw::default();
        let h = |rank, held| Held {
            rank,
            kind: LockType::Exclusive,
            nocheck: false,
            held,
        };
        locks.insert(h(5, false));
        let of = |l: &Locks| Permit::of(Epoch::Idle, l, None, false, &pscw);
        assert_eq!(of(&locks), Permit::NONE, "still being acquired");
        locks.set_held(5);
        assert_eq!(of(&locks), Permit::one(5, true));
        assert!(!of(&locks).is_guarded());
        locks.insert(h(6, true));
        assert_eq!(of(&locks), Permit::NONE, "two locks: the mutex path");
    }
}
