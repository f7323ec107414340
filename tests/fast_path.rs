//! The lock-free per-operation path (`docs/performance.md`, "Per-operation
//! cost"): once a target is cached and the epoch's permit covers it, put,
//! get and the atomics skip the window's mutexes. These tests run the error
//! paths *after* that point (so the fast path is the one answering), check
//! that closing an epoch revokes it, and drive one window from several
//! threads at once. Real processes and providers, every value checked.

#[macro_use]
mod common;

use onesided::{Assert, Error, LockType, Op, Window, World};

fn expect_err<T: std::fmt::Debug>(r: onesided::Result<T>, words: &[&str]) -> Error {
    let e = r.expect_err("expected an error");
    let msg = e.to_string();
    for w in words {
        assert!(msg.contains(w), "error {msg:?} lacks {w:?}");
    }
    e
}

/// Errors answered on the fast path, and epochs that revoke it.
fn errors_after_first_contact() {
    let world = World::init().expect("init");
    let (rank, n) = (world.rank(), world.size());
    let right = (rank + 1) % n;
    let mut win = Window::<u64>::allocate(&world, 8 + rank).expect("allocate");
    let tlen = 8 + right;

    // lock_all: the first put takes the shared locks and caches the
    // target; from then on the permit covers it.
    win.lock_all().unwrap();
    win.put(right, 0, &[1]).unwrap();
    win.flush(right).unwrap();
    for _ in 0..2 {
        let e = expect_err(win.put(right, tlen, &[1]), &["outside the target window"]);
        assert!(
            matches!(e, Error::OutOfWindow { offset, len: 1, window_len, .. }
                if offset == tlen && window_len == tlen)
        );
        expect_err(win.get(right, tlen - 1, &mut [0, 0]), &["outside"]);
        expect_err(win.get(right, usize::MAX, &mut [0]), &["outside"]);
        expect_err(win.accumulate(right, tlen, &[1], Op::Sum), &["outside"]);
        expect_err(win.fetch_and_op(right, tlen, 1, Op::Sum), &["outside"]);
        expect_err(win.compare_and_swap(right, tlen, 0, 1), &["outside"]);
        expect_err(win.put(n, 0, &[1]), &["not in the job"]);
        expect_err(win.flush(n), &["not in the job"]);
    }
    // Still works, and the value lands.
    win.put(right, tlen - 1, &[7 + rank as u64]).unwrap();
    win.flush(right).unwrap();
    let mut back = [0u64];
    win.get(right, tlen - 1, &mut back).unwrap();
    assert_eq!(back[0], 7 + rank as u64);
    win.unlock_all().unwrap();
    // The permit is gone with the epoch.
    expect_err(win.put(right, 0, &[1]), &["put", "outside an epoch"]);
    expect_err(win.get(right, 0, &mut [0]), &["get", "outside an epoch"]);
    expect_err(
        win.fetch_and_op(right, 0, 1, Op::Sum),
        &["outside an epoch"],
    );
    expect_err(win.flush(right), &["flush"]);

    // lock_all(NOCHECK): every target covered at once.
    win.lock_all_with(Assert::NOCHECK).unwrap();
    win.put(right, 1, &[2]).unwrap();
    expect_err(win.put(right, tlen, &[1]), &["outside"]);
    expect_err(win.put(n + 3, 0, &[1]), &["not in the job"]);
    win.unlock_all().unwrap();
    expect_err(win.put(right, 1, &[2]), &["outside an epoch"]);

    // Fence epoch with operations: operations go, flushes do not.
    win.fence(Assert::NONE).unwrap();
    win.put(right, 2, &[3]).unwrap();
    win.put(right, 3, &[4]).unwrap();
    expect_err(win.flush(right), &["flush"]);
    expect_err(win.put(right, tlen, &[1]), &["outside"]);
    win.fence(Assert::NOSUCCEED).unwrap();
    expect_err(win.put(right, 2, &[3]), &["outside an epoch"]);

    // A per-target lock allows only its target.
    win.lock(right, LockType::Exclusive, Assert::NONE).unwrap();
    win.put(right, 4, &[5]).unwrap();
    if n > 2 {
        let other = (rank + 2) % n;
        expect_err(win.put(other, 0, &[1]), &["not locked"]);
    }
    win.unlock(right).unwrap();
    expect_err(win.put(right, 4, &[5]), &["outside an epoch"]);

    world.barrier().unwrap();
    let left = (rank + n - 1) % n;
    let mine = win.local_to_vec().unwrap();
    assert_eq!(
        &mine[..5],
        &[1, 2, 3, 4, 5],
        "rank {rank}: what rank {left} wrote"
    );
    assert_eq!(mine[7 + rank], 7 + left as u64);
    win.free().unwrap();
    // The error names the operation that was refused.
    let e = expect_err(win.put(right, 0, &[1]), &["freed", "put"]);
    assert!(!e.to_string().contains("synchronization"), "{e}");
    expect_err(win.get(right, 0, &mut [0]), &["freed", "get"]);
    expect_err(win.flush(right), &["freed", "flush"]);
    for e in [
        win.lock(right, LockType::Shared, Assert::NONE),
        win.fence(Assert::NONE),
        win.unlock_all(),
        win.complete(),
    ] {
        let e = expect_err(e, &["freed"]);
        assert!(!e.to_string().contains("synchronization"), "{e}");
    }
}

const THREADS: usize = 4;
const ROUNDS: usize = 50;

/// One window, several threads issuing puts, gets and fetch-and-adds to
/// every rank at once inside one lock_all epoch (the permit, the target
/// slots and the dirty bits are shared by the threads).
fn threads_share_a_window() {
    let world = World::init().expect("init");
    let (rank, n) = (world.rank(), world.size());
    // Per origin and thread one put slot; element 0 is the counter.
    let len = 1 + n * THREADS;
    let mut win = Window::<u64>::allocate(&world, len).expect("allocate");
    win.lock_all().unwrap();
    std::thread::scope(|s| {
        for th in 0..THREADS {
            let win = &win;
            s.spawn(move || {
                for round in 0..ROUNDS {
                    for t in 0..n {
                        let slot = 1 + rank * THREADS + th;
                        let v = ((rank * THREADS + th) * 1000 + round) as u64;
                        win.put(t, slot, &[v]).unwrap();
                        win.fetch_and_op(t, 0, 1u64, Op::Sum).unwrap();
                        win.flush(t).unwrap();
                        let mut back = [0u64];
                        win.get(t, slot, &mut back).unwrap();
                        assert_eq!(back[0], v, "thread {th} round {round} target {t}");
                    }
                }
            });
        }
    });
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    let mine = win.local_to_vec().unwrap();
    assert_eq!(mine[0], (n * THREADS * ROUNDS) as u64, "fetch-and-adds");
    for o in 0..n {
        for th in 0..THREADS {
            let want = ((o * THREADS + th) * 1000 + ROUNDS - 1) as u64;
            assert_eq!(mine[1 + o * THREADS + th], want, "origin {o} thread {th}");
        }
    }
    world.barrier().unwrap();
    win.free().unwrap();
}

spmd_test!(fast_path_errors, &[2, 4], errors_after_first_contact);
spmd_test!(fast_path_threads, &[2, 4], threads_share_a_window);
