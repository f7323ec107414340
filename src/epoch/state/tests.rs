//! Unit tests of the combined synchronization rules.
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
    assert!(s.lock_all(1, false).is_err());
    assert!(s.free(1).is_err());
    s.end_unlock(1, 2).unwrap();
    assert!(s.end_unlock(1, 2).is_err(), "unlock twice");
    s.end_unlock(1, 3).unwrap();
    s.free(1).unwrap();
    s.lock_all(1, false).unwrap();
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
        ..SyncState::default()
    };
    assert!(s.begin_lock(1, 0, LockType::Shared, false).is_err());
    s.mode = Epoch::Fence { ops: false };
    s.begin_lock(1, 0, LockType::Shared, false).unwrap();
    assert_eq!(s.mode, Epoch::Idle);
}

#[test]
fn lock_all_lazy_targets() {
    let mut s = SyncState::default();
    s.lock_all(1, false).unwrap();
    assert_eq!(s.may_issue(1, "put", 2).unwrap(), Prepare::SharedLock);
    assert!(s.issue(1, "put", 2).is_err(), "not locked yet");
    assert!(s.lock_all_acquired(2), "any order: that target alone");
    assert!(!s.lock_all_acquired(2), "second acquisition is extra");
    s.issue(1, "put", 2).unwrap();
    assert_eq!(s.may_issue(1, "put", 0).unwrap(), Prepare::SharedLock, "0 not taken");
    assert!(s.lock_all_acquired(0));
    s.issue(1, "put", 0).unwrap();
    assert_eq!(s.permit(), Permit::one(0, true).guarded(), "the last one taken");
    // A retreat: nothing may go to the held targets until it ends.
    s.all.retreating = true;
    assert_eq!(s.may_issue(1, "put", 2).unwrap(), Prepare::SharedLock);
    assert_eq!(s.permit(), Permit::NONE);
    s.all.retreating = false;
    assert_eq!(s.may_issue(1, "put", 3).unwrap(), Prepare::SharedLock);
    assert_eq!(s.end_unlock_all(), vec![2, 0]);
    assert_eq!(s.mode, Epoch::Idle);
    assert!(!s.lock_all_acquired(0), "epoch over");
    s.lock_all(1, true).unwrap();
    assert_eq!(s.may_issue(1, "get", 5).unwrap(), Prepare::Go, "NOCHECK");
    assert!(s.end_unlock_all().is_empty());
}

#[test]
fn pscw_rules() {
    let mut s = SyncState::default();
    s.begin_pscw(1, "start").unwrap();
    s.pscw.start(1, [1, 2].into_iter().collect(), false).unwrap();
    assert_eq!(s.may_issue(1, "put", 1).unwrap(), Prepare::AwaitPost);
    let e = s.may_issue(1, "put", 0).unwrap_err().to_string();
    assert!(e.contains("rank 0") && e.contains("access group"), "{e}");
    for refused in [
        s.fence(1, Assert::NONE).map(|_| ()),
        s.clone().lock_all(1, false),
        s.free(1),
        s.clone().begin_lock(1, 1, LockType::Shared, false),
        s.flush(1, "flush_all", None),
    ] {
        let e = refused.unwrap_err().to_string();
        assert!(e.contains("start epoch"), "{e}");
    }
    s.pscw.mark_ready(1);
    s.issue(1, "put", 1).unwrap();
    assert_eq!(
        s.mode,
        Epoch::Idle,
        "PSCW operations are not fence operations"
    );
    s.pscw.end_complete();
    s.lock_all(1, false).unwrap();
    assert!(s.begin_pscw(1, "post").is_err(), "post inside lock_all");
    s.end_unlock_all();
    s.mode = Epoch::Fence { ops: true };
    assert!(s.begin_pscw(1, "start").is_err(), "start after fence ops");
    s.mode = Epoch::Fence { ops: false };
    s.begin_pscw(1, "post").unwrap();
    assert_eq!(s.mode, Epoch::Idle);
}

/// The permit's invariant (epoch/permit.rs): whatever it covers, the state
/// allows with `Prepare::Go` and `issue` leaves unchanged; whatever it
/// flushes, `flush` allows. Checked after every step of several histories.
#[test]
fn permit_never_allows_what_the_state_refuses() {
    fn check(s: &SyncState, covered: &mut usize) {
        let p = s.permit();
        for r in 0..6 {
            if p.covers(r) {
                *covered += 1;
                assert_eq!(s.may_issue(1, "put", r).unwrap(), Prepare::Go, "{s:?}");
                let mut after = s.clone();
                after.issue(1, "put", r).unwrap();
                // A marking permit's one change is made by the flag.
                let mut marked = s.clone();
                if p.marks() {
                    marked.fence_ops_issued();
                }
                assert_eq!(after, marked, "issue changed a permitted state");
            }
            if p.flushes(r) {
                s.flush(1, "flush", Some(r)).unwrap();
            }
        }
    }
    let mut covered = 0;
    let mut s = SyncState::default();
    check(&s, &mut covered);
    s.lock_all(1, false).unwrap();
    check(&s, &mut covered);
    assert!(s.lock_all_acquired(0) && s.lock_all_acquired(1));
    check(&s, &mut covered);
    s.unlock_all(1).unwrap();
    s.end_unlock_all();
    check(&s, &mut covered);
    s.lock_all(1, true).unwrap();
    check(&s, &mut covered);
    s.end_unlock_all();
    let plan = s.fence(1, Assert::NONE).unwrap();
    s.mode = plan.next;
    check(&s, &mut covered);
    s.issue(1, "put", 3).unwrap();
    check(&s, &mut covered);
    let plan = s.fence(1, Assert::NOSUCCEED).unwrap();
    s.mode = plan.next;
    check(&s, &mut covered);
    s.begin_lock(1, 2, LockType::Exclusive, false).unwrap();
    check(&s, &mut covered);
    s.lock_acquired(2);
    check(&s, &mut covered);
    s.end_unlock(1, 2).unwrap();
    check(&s, &mut covered);
    // lock_all's last target (1) + nocheck lock_all + fence without ops
    // (marking) and with ops + the one held per-target lock (2).
    assert_eq!(covered, 1 + 6 + 6 + 6 + 1);
}

/// Model-based property test of the whole synchronization state machine:
/// random sequences of fence / lock_all / unlock_all / lock / unlock /
/// start / complete / post / wait / operations / flushes / free, driven the
/// way `api::window` drives [`SyncState`], against a small model of which
/// calls MPI-3 allows (written from the rules, not from the code): every
/// call must be `Ok` exactly when the model says it is legal, and refused
/// with [`Error::Epoch`] otherwise. Failures are persisted by proptest
/// (`proptest-regressions/`) and replay; CI fixes `PROPTEST_RNG_SEED`.
mod model {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    const RANKS: usize = 4;

    #[derive(Debug, Clone)]
    enum Call {
        Fence { noprecede: bool, nosucceed: bool },
        LockAll,
        UnlockAll,
        Lock(usize, bool),
        Unlock(usize),
        Start(Vec<usize>),
        Complete,
        Post(Vec<usize>),
        Wait,
        Op(usize),
        Flush(Option<usize>),
        Free,
    }

    fn call() -> impl Strategy<Value = Call> {
        let rank = 0..RANKS;
        let group = proptest::collection::btree_set(0..RANKS, 0..=RANKS)
            .prop_map(|g| g.into_iter().collect::<Vec<_>>());
        prop_oneof![
            3 => (any::<bool>(), any::<bool>())
                .prop_map(|(noprecede, nosucceed)| Call::Fence { noprecede, nosucceed }),
            2 => Just(Call::LockAll),
            2 => Just(Call::UnlockAll),
            3 => (rank.clone(), any::<bool>()).prop_map(|(r, x)| Call::Lock(r, x)),
            3 => rank.clone().prop_map(Call::Unlock),
            2 => group.clone().prop_map(Call::Start),
            2 => Just(Call::Complete),
            2 => group.prop_map(Call::Post),
            2 => Just(Call::Wait),
            6 => rank.clone().prop_map(Call::Op),
            2 => proptest::option::of(rank).prop_map(Call::Flush),
            1 => Just(Call::Free),
        ]
    }

    /// Where the window is, in the terms of the standard.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Mode {
        Idle,
        /// In a fence epoch; whether operations were issued in it.
        Fence(bool),
        LockAll,
    }

    #[derive(Debug)]
    struct Model {
        mode: Mode,
        locks: BTreeSet<usize>,
        access: Option<Vec<usize>>,
        exposure: bool,
    }

    impl Model {
        fn pscw(&self) -> bool {
            self.access.is_some() || self.exposure
        }

        /// Legal, and the new state if so.
        fn call(&mut self, c: &Call) -> bool {
            let quiet = self.locks.is_empty() && !self.pscw();
            match c {
                Call::Fence { noprecede, nosucceed } => {
                    let ok = quiet
                        && self.mode != Mode::LockAll
                        && !(*noprecede && self.mode == Mode::Fence(true));
                    if ok {
                        self.mode = if *nosucceed { Mode::Idle } else { Mode::Fence(false) };
                    }
                    ok
                }
                Call::LockAll => {
                    let ok = quiet && matches!(self.mode, Mode::Idle | Mode::Fence(false));
                    if ok {
                        self.mode = Mode::LockAll;
                    }
                    ok
                }
                Call::UnlockAll => {
                    let ok = self.mode == Mode::LockAll;
                    if ok {
                        self.mode = Mode::Idle;
                    }
                    ok
                }
                Call::Lock(r, _) => {
                    let ok = !self.pscw()
                        && !matches!(self.mode, Mode::LockAll | Mode::Fence(true))
                        && !self.locks.contains(r);
                    if ok {
                        self.mode = Mode::Idle;
                        self.locks.insert(*r);
                    }
                    ok
                }
                Call::Unlock(r) => self.locks.remove(r),
                Call::Start(_) | Call::Post(_) => {
                    let open = match c {
                        Call::Start(_) => self.access.is_some(),
                        _ => self.exposure,
                    };
                    let ok = self.locks.is_empty()
                        && !matches!(self.mode, Mode::LockAll | Mode::Fence(true))
                        && !open;
                    if ok {
                        self.mode = Mode::Idle;
                        match c {
                            Call::Start(g) => self.access = Some(g.clone()),
                            _ => self.exposure = true,
                        }
                    }
                    ok
                }
                Call::Complete => self.access.take().is_some(),
                Call::Wait => std::mem::replace(&mut self.exposure, false),
                Call::Op(r) => {
                    if self.locks.contains(r) {
                        return true;
                    }
                    if !self.locks.is_empty() {
                        return false;
                    }
                    if let Some(g) = &self.access {
                        return g.contains(r);
                    }
                    match self.mode {
                        Mode::LockAll => true,
                        Mode::Fence(_) => {
                            self.mode = Mode::Fence(true);
                            true
                        }
                        Mode::Idle => false,
                    }
                }
                Call::Flush(r) => {
                    self.mode == Mode::LockAll
                        || match r {
                            Some(r) => self.locks.contains(r),
                            None => !self.locks.is_empty(),
                        }
                }
                Call::Free => quiet && matches!(self.mode, Mode::Idle | Mode::Fence(false)),
            }
        }
    }

    /// Drives `s` as `api::window` does (locks are granted at once, post
    /// notifications arrive when awaited): an operation the permit covers
    /// goes without the state, setting `fence_ops` under a marking permit;
    /// a lock from an idle state goes on the lane (`lane`: the permit
    /// holds it, the state does not), and so does its unlock; every other
    /// call first folds the flag in and settles the lane (`Window::epoch`).
    fn drive(
        s: &mut SyncState,
        (fence_ops, lane): (&mut bool, &mut Option<(usize, LockType)>),
        c: &Call,
    ) -> Result<()> {
        const W: u64 = 7;
        let p = match *lane {
            Some((r, kind)) => Permit::lane(r, kind),
            None => s.permit(),
        };
        match c {
            Call::Op(r) if p.covers(*r) => {
                *fence_ops |= p.marks();
                return Ok(());
            }
            Call::Flush(Some(r)) if p.flushes(*r) => return Ok(()),
            Call::Lock(r, x) if p == Permit::IDLE => {
                assert!(!*fence_ops, "an idle state has no fence epoch to mark");
                let kind = if *x { LockType::Exclusive } else { LockType::Shared };
                *lane = Some((*r, kind));
                return Ok(());
            }
            Call::Unlock(r) if p.lane_lock().is_some_and(|(l, _)| l == *r) => {
                *lane = None;
                return Ok(());
            }
            _ => {}
        }
        if std::mem::take(fence_ops) {
            s.fence_ops_issued();
        }
        if let Some((r, kind)) = lane.take() {
            s.lane_settled(r, kind);
        }
        match c {
            Call::Fence { noprecede, nosucceed } => {
                let mut a = Assert::NONE;
                if *noprecede {
                    a = a | Assert::NOPRECEDE;
                }
                if *nosucceed {
                    a = a | Assert::NOSUCCEED;
                }
                s.mode = s.fence(W, a)?.next;
            }
            Call::LockAll => s.lock_all(W, false)?,
            Call::UnlockAll => {
                s.unlock_all(W)?;
                let n = s.end_unlock_all().len();
                assert!(n <= RANKS, "released {n} shared locks");
            }
            Call::Lock(r, x) => {
                let kind = if *x { LockType::Exclusive } else { LockType::Shared };
                s.begin_lock(W, *r, kind, false)?;
                s.lock_acquired(*r);
            }
            Call::Unlock(r) => {
                s.end_unlock(W, *r)?;
            }
            Call::Start(g) => {
                s.begin_pscw(W, "start")?;
                s.pscw.start(W, g.iter().copied().collect(), false)?;
            }
            Call::Complete => {
                s.pscw.check_complete(W)?;
                s.pscw.end_complete();
            }
            Call::Post(g) => {
                s.begin_pscw(W, "post")?;
                s.pscw.post(W, g.iter().copied().collect())?;
            }
            Call::Wait => {
                s.pscw.check_wait(W, "wait")?;
                s.pscw.end_wait();
            }
            Call::Op(r) => {
                match s.may_issue(W, "put", *r)? {
                    Prepare::Go => {}
                    Prepare::SharedLock => {
                        assert!(s.lock_all_acquired(*r), "lock_all of {r}");
                    }
                    Prepare::AwaitPost => s.pscw.mark_ready(*r),
                }
                s.issue(W, "put", *r)?;
            }
            Call::Flush(r) => s.flush(W, "flush", *r)?,
            Call::Free => s.free(W)?,
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn sync_state_matches_mpi_model(calls in proptest::collection::vec(call(), 0..60)) {
            let mut s = SyncState::default();
            let mut fence_ops = false;
            let mut lane = None;
            let mut m = Model {
                mode: Mode::Idle,
                locks: BTreeSet::new(),
                access: None,
                exposure: false,
            };
            for (i, c) in calls.iter().enumerate() {
                let legal = m.call(c);
                match drive(&mut s, (&mut fence_ops, &mut lane), c) {
                    Ok(()) => prop_assert!(legal, "call {} {:?} accepted; model {:?}", i, c, m),
                    Err(Error::Epoch { .. }) => {
                        prop_assert!(!legal, "call {} {:?} refused; model {:?}", i, c, m)
                    }
                    Err(e) => prop_assert!(false, "call {} {:?}: wrong error kind {}", i, c, e),
                }
                // lock_all holds each target at most once, none past the job.
                prop_assert!(s.all.held.len() <= RANKS && s.all.held.iter().all(|&r| r < RANKS));
                prop_assert_eq!(s.locks.len() + usize::from(lane.is_some()), m.locks.len());
            }
        }
    }
}
