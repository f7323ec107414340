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
    assert!(!s.lock_all_acquired(2), "out of order");
    for r in 0..=2 {
        assert!(s.lock_all_acquired(r));
    }
    assert!(!s.lock_all_acquired(2), "second acquisition is extra");
    s.issue(1, "put", 2).unwrap();
    s.issue(1, "put", 0).unwrap();
    assert_eq!(s.may_issue(1, "put", 3).unwrap(), Prepare::SharedLock);
    assert_eq!(s.all.next(), 3);
    assert_eq!(s.end_unlock_all(), 3);
    assert_eq!(s.mode, Epoch::Idle);
    assert!(!s.lock_all_acquired(0), "epoch over");
    s.lock_all(1, true).unwrap();
    assert_eq!(s.may_issue(1, "get", 5).unwrap(), Prepare::Go, "NOCHECK");
    assert_eq!(s.end_unlock_all(), 0);
}

#[test]
fn pscw_rules() {
    let mut s = SyncState::default();
    s.begin_pscw(1, "start").unwrap();
    s.pscw.start(1, vec![1, 2], false).unwrap();
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
                assert_eq!(&after, s, "issue changed a permitted state");
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
    // lock_all prefix {0,1} + nocheck lock_all + fence with ops.
    assert_eq!(covered, 2 + 6 + 6);
}
