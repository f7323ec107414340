use super::*;
use LockType::{Exclusive as X, Shared as S};

#[test]
fn shared_together_exclusive_alone() {
    let mut q = LockQueue::new(4);
    assert_eq!(q.acquire(1, S), Acquire::Granted);
    assert_eq!(q.acquire(2, S), Acquire::Granted);
    let t = match q.acquire(3, X) {
        Acquire::Queued(t) => t,
        a => panic!("{a:?}"),
    };
    assert_eq!(q.poll(3, t), Ok(false));
    q.release(1, S).unwrap();
    assert_eq!(q.poll(3, t), Ok(false));
    q.release(2, S).unwrap();
    assert_eq!(q.holders(), (0, Some(3)));
    assert_eq!(q.poll(3, t), Ok(true));
    assert!(q.poll(3, t).is_err(), "picked up twice");
    q.release(3, X).unwrap();
    assert_eq!(q.holders(), (0, None));
}

#[test]
fn a_waiting_writer_stops_later_readers() {
    let mut q = LockQueue::new(8);
    assert_eq!(q.acquire(0, S), Acquire::Granted);
    let Acquire::Queued(w) = q.acquire(1, X) else {
        panic!()
    };
    // A reader arriving after the writer waits, although only readers hold.
    let Acquire::Queued(r) = q.acquire(2, S) else {
        panic!("reader overtook a waiting writer")
    };
    let Acquire::Queued(r2) = q.acquire(3, S) else {
        panic!()
    };
    q.release(0, S).unwrap();
    assert_eq!(q.poll(2, r), Ok(false));
    assert_eq!(q.poll(1, w), Ok(true));
    q.release(1, X).unwrap();
    // Both readers behind the writer are granted together.
    assert_eq!(q.holders(), (2, None));
    assert_eq!(q.poll(3, r2), Ok(true));
    assert_eq!(q.poll(2, r), Ok(true));
    assert_eq!(q.queued(), 0);
}

#[test]
fn full_ring_is_busy_and_bad_requests_refused() {
    let mut q = LockQueue::new(1);
    assert_eq!(q.acquire(0, X), Acquire::Granted);
    assert!(matches!(q.acquire(1, X), Acquire::Queued(_)));
    assert_eq!(q.acquire(2, S), Acquire::Busy);
    assert!(q.release(5, X).is_err(), "not the holder");
    assert!(q.release(0, S).is_err(), "no shared holder");
    assert!(q.poll(2, 1).is_err(), "ticket of another rank");
    assert!(q.poll(1, 99).is_err(), "unknown ticket");
}

#[test]
fn cancel_of_a_granted_request_releases() {
    let mut q = LockQueue::new(4);
    assert_eq!(q.acquire(0, X), Acquire::Granted);
    let Acquire::Queued(t) = q.acquire(1, X) else {
        panic!()
    };
    let Acquire::Queued(u) = q.acquire(2, X) else {
        panic!()
    };
    q.release(0, X).unwrap();
    assert_eq!(q.holders(), (0, Some(1)));
    q.cancel(1, t).unwrap();
    assert_eq!(q.holders(), (0, Some(2)));
    assert_eq!(q.poll(2, u), Ok(true));
}
