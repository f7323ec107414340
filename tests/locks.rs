//! Multi-process tests of per-target passive-target locks (`Window::lock` /
//! `Window::unlock`): real processes and providers, 2 and 4 ranks,
//! tcp/shm/sockets, onesided-run and Hydra (see tests/common). Nothing here
//! synchronizes by sleeping: only locks, barriers and fences.

#[macro_use]
mod common;

use onesided::{Assert, Error, LockType, Window, World};

const ROUNDS: u64 = 50;

/// Read-modify-write of element `disp` of `target` under an exclusive lock.
fn increment(win: &Window<u64>, target: usize, disp: usize) {
    win.lock(target, LockType::Exclusive, Assert::NONE)
        .expect("lock");
    let mut v = [0u64];
    win.get(target, disp, &mut v).expect("get");
    win.put(target, disp, &[v[0] + 1]).expect("put");
    win.unlock(target).expect("unlock");
}

// ---- (a) exclusive-lock contention ------------------------------------

/// Every rank (the target included) increments rank 0's counter `ROUNDS`
/// times with get + put. A get followed by a put is not atomic: without
/// mutual exclusion two ranks read the same value and one increment is
/// lost, so the exact total proves the exclusive lock excludes.
fn contention() {
    let world = World::init().expect("init");
    let p = world.size() as u64;
    let mut win = Window::<u64>::allocate(&world, 1).expect("allocate");
    for _ in 0..ROUNDS {
        increment(&win, 0, 0);
    }
    win.lock(0, LockType::Shared, Assert::NONE).expect("lock");
    let mut v = [0u64];
    win.get(0, 0, &mut v).expect("get");
    win.unlock(0).expect("unlock");
    world.barrier().expect("barrier");
    if world.rank() == 0 {
        assert_eq!(win.local_to_vec().expect("read")[0], p * ROUNDS);
    }
    assert!(v[0] <= p * ROUNDS && v[0] >= ROUNDS, "read {}", v[0]);
    win.free().expect("free");
}

// ---- (b) readers and writers --------------------------------------------

/// Rank 0 writes a pair of words of the last rank's window under an
/// exclusive lock, one word at a time with a flush in between, so a reader
/// without exclusion could see them differ; every other rank reads the pair
/// under shared locks and must always see them equal. Then every rank holds
/// a shared lock on the same target across a barrier: this only finishes if
/// shared locks are held concurrently.
fn readers_writers() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let target = p - 1;
    let mut win = Window::<u64>::allocate(&world, 2).expect("allocate");
    for i in 0..ROUNDS {
        if rank == 0 {
            win.lock(target, LockType::Exclusive, Assert::NONE)
                .expect("lock");
            win.put(target, 0, &[i + 1]).expect("put");
            win.flush(target).expect("flush");
            win.put(target, 1, &[i + 1]).expect("put");
            win.unlock(target).expect("unlock");
        } else {
            win.lock(target, LockType::Shared, Assert::NONE)
                .expect("lock");
            let mut pair = [0u64; 2];
            win.get(target, 0, &mut pair).expect("get");
            win.unlock(target).expect("unlock");
            assert_eq!(pair[0], pair[1], "torn pair seen under a shared lock");
        }
    }
    world.barrier().expect("barrier");
    // All ranks share the lock at once.
    win.lock(target, LockType::Shared, Assert::NONE)
        .expect("lock");
    world.barrier().expect("barrier while sharing");
    let mut pair = [0u64; 2];
    win.get(target, 0, &mut pair).expect("get");
    assert_eq!(pair, [ROUNDS, ROUNDS]);
    win.unlock(target).expect("unlock");
    win.free().expect("free");
}

// ---- (c) oneself and several targets under contention -------------------

/// Every rank increments every rank's counter, itself included, in a
/// rotated order, and also holds two exclusive locks at once (its own and
/// its neighbour's, taken in rank order so there is no cycle).
fn self_and_many() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let mut win = Window::<u64>::allocate(&world, 2).expect("allocate");
    let rounds = ROUNDS / 5;
    for _ in 0..rounds {
        for k in 0..p {
            increment(&win, (rank + k) % p, 0);
        }
        let next = (rank + 1) % p;
        let (a, b) = (rank.min(next), rank.max(next));
        win.lock(a, LockType::Exclusive, Assert::NONE)
            .expect("lock a");
        win.lock(b, LockType::Exclusive, Assert::NONE)
            .expect("lock b");
        for t in [a, b] {
            let mut v = [0u64];
            win.get(t, 1, &mut v).expect("get");
            win.put(t, 1, &[v[0] + 1]).expect("put");
        }
        win.flush_all().expect("flush_all");
        win.unlock(b).expect("unlock b");
        win.unlock(a).expect("unlock a");
    }
    world.barrier().expect("barrier");
    let local = win.local_to_vec().expect("read");
    // Element 1 of rank r: rank r and rank r-1 each add `rounds`.
    assert_eq!(local, vec![p as u64 * rounds, 2 * rounds]);
    win.free().expect("free");
}

// ---- (d) NOCHECK ----------------------------------------------------------

/// Each rank writes its own element of rank 0's window under a NOCHECK
/// lock (no conflicting access exists), and its own window under an
/// exclusive NOCHECK self-lock.
fn nocheck() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let mut win = Window::<u64>::allocate(&world, p).expect("allocate");
    win.lock(0, LockType::Shared, Assert::NOCHECK)
        .expect("lock");
    win.put(0, rank, &[rank as u64 + 1]).expect("put");
    win.unlock(0).expect("unlock");
    world.barrier().expect("barrier");
    if rank == 0 {
        let want: Vec<u64> = (1..=p as u64).collect();
        assert_eq!(win.local_to_vec().expect("read"), want);
    }
    world.barrier().expect("barrier");
    win.lock(rank, LockType::Exclusive, Assert::MODE_NOCHECK)
        .expect("self lock");
    win.put(rank, 0, &[7]).expect("put");
    win.unlock(rank).expect("unlock");
    assert_eq!(win.local_to_vec().expect("read")[0], 7);
    // NOCHECK left no trace in the lock word: a normal exclusive lock works.
    win.lock(rank, LockType::Exclusive, Assert::NONE)
        .expect("lock");
    win.unlock(rank).expect("unlock");
    win.free().expect("free");
}

// ---- (e) misuse -------------------------------------------------------------

fn epoch_err(r: Result<(), Error>, op: &str, rank: Option<usize>) {
    match r {
        Err(e @ Error::Epoch { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("window ") && msg.contains(op), "{msg}");
            if let Some(rank) = rank {
                assert!(msg.contains(&format!("rank {rank}")), "{msg}");
            }
        }
        other => panic!("{op}: expected an epoch error, got {other:?}"),
    }
}

fn misuse() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let peer = (rank + 1) % p;
    let mut win = Window::<u64>::allocate(&world, 4).expect("allocate");
    epoch_err(win.unlock(peer), "unlock", Some(peer));
    assert!(matches!(
        win.lock(p, LockType::Shared, Assert::NONE),
        Err(Error::InvalidRank { .. })
    ));
    win.lock(peer, LockType::Shared, Assert::NONE)
        .expect("lock");
    epoch_err(
        win.lock(peer, LockType::Exclusive, Assert::NONE),
        "lock",
        Some(peer),
    );
    epoch_err(win.fence(Assert::NONE), "fence", None);
    epoch_err(win.lock_all(), "lock_all", None);
    epoch_err(win.free(), "free", None);
    if p > 2 {
        let other = (rank + 2) % p;
        epoch_err(win.put(other, 0, &[1]), "put", Some(other));
        epoch_err(win.flush(other), "flush", Some(other));
    }
    // The window is still usable and the lock still held.
    win.flush(peer).expect("flush");
    win.flush_all().expect("flush_all");
    let mut v = [9u64];
    win.get(peer, 0, &mut v).expect("get");
    assert_eq!(v[0], 0);
    win.unlock(peer).expect("unlock");
    epoch_err(win.unlock(peer), "unlock", Some(peer));
    epoch_err(win.put(peer, 0, &[1]), "put", None);
    win.lock_all().expect("lock_all");
    epoch_err(
        win.lock(peer, LockType::Shared, Assert::NONE),
        "lock",
        Some(peer),
    );
    epoch_err(win.unlock(peer), "unlock", Some(peer));
    win.unlock_all().expect("unlock_all");
    win.free().expect("free");
}

// ---- (f) bounded waiting ---------------------------------------------------

/// With `ONESIDED_TIMEOUT=1` on rank 1 (10 on rank 0): while rank 0
/// holds an exclusive lock on itself, rank 1's shared and exclusive lock
/// attempts fail with `Error::Timeout` and leave no entry; afterwards a
/// shared lock succeeds, so the timed-out writer withdrew its announcement.
fn timeout() {
    // Rank 1 times out twice; rank 0 waits for it in a barrier.
    common::timeout_for(1, 1, 10);
    let world = World::init().expect("init");
    let rank = world.rank();
    let mut win = Window::<u64>::allocate(&world, 1).expect("allocate");
    if rank == 0 {
        win.lock(0, LockType::Exclusive, Assert::NONE)
            .expect("lock");
    }
    world.barrier().expect("barrier");
    if rank == 1 {
        for kind in [LockType::Shared, LockType::Exclusive] {
            let start = std::time::Instant::now();
            // A lazy (software) lock waits at its first operation.
            let mut v = [0u64];
            match win
                .lock(0, kind, Assert::NONE)
                .and_then(|_| win.get(0, 0, &mut v))
            {
                Err(e @ Error::Timeout { .. }) => {
                    assert!(e.to_string().contains("rank 0"), "{e}");
                    // The peer awaited, as a value a caller can match on.
                    assert_eq!(e.rank(), Some(0), "{e}");
                    assert!(start.elapsed().as_secs_f64() >= 1.0);
                }
                other => panic!("{kind:?} lock while held exclusively: {other:?}"),
            }
            epoch_err(win.unlock(0), "unlock", Some(0));
        }
    }
    world.barrier().expect("barrier");
    if rank == 0 {
        win.unlock(0).expect("unlock");
    }
    world.barrier().expect("barrier");
    win.lock(0, LockType::Shared, Assert::NONE)
        .expect("shared lock after a writer timed out");
    win.unlock(0).expect("unlock");
    win.free().expect("free");
}

spmd_test!(lock_wait_is_bounded_by_the_timeout, &[2], timeout);
spmd_test!(exclusive_lock_contention, &[2, 4], contention);
spmd_test!(shared_readers_exclusive_writer, &[2, 4], readers_writers);
spmd_test!(self_lock_and_many_targets, &[2, 4], self_and_many);
spmd_test!(nocheck_lock, &[2, 4], nocheck);
spmd_test!(lock_misuse_is_refused, &[2, 4], misuse);
spmd_test!(
    exclusive_lock_contention_8,
    jobs = common::matrix_one_provider(&[8]),
    contention
);

/// The same tests with every lock on the software path
/// (`ONESIDED_LOCK=software`: the target's lock queue, lazy locks), on
/// each provider.
#[test]
fn software_lock_variants() {
    common::run_variants(
        module_path!(),
        &[
            ("lock_wait_is_bounded_by_the_timeout", 2),
            ("lock_wait_is_bounded_by_the_timeout", 4),
            ("exclusive_lock_contention", 2),
            ("exclusive_lock_contention", 4),
            ("shared_readers_exclusive_writer", 2),
            ("shared_readers_exclusive_writer", 4),
            ("self_lock_and_many_targets", 2),
            ("self_lock_and_many_targets", 4),
            ("nocheck_lock", 2),
            ("nocheck_lock", 4),
            ("lock_misuse_is_refused", 2),
            ("lock_misuse_is_refused", 4),
        ],
        &[("ONESIDED_LOCK", "software")],
    );
}
