//! Multi-process tests of the synchronization modes beyond per-target locks:
//! fence assertions, lock_all taking shared locks, `sync`, and
//! post/start/complete/wait/test with overlapping groups; plus the epoch
//! misuse cases of each. Real processes and providers (tests/common);
//! nothing synchronizes by sleeping.

#[macro_use]
mod common;

use std::time::{Duration, Instant};

use onesided::{Assert, Error, LockType, Window, World};

fn epoch_err(r: Result<(), Error>, op: &str) {
    match r {
        Err(e @ Error::Epoch { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("window ") && msg.contains(op), "{msg}");
        }
        other => panic!("{op}: expected an epoch error, got {other:?}"),
    }
}

fn arg_err(r: Result<(), Error>, what: &str) {
    assert!(
        matches!(r, Err(Error::InvalidArgument(_))),
        "{what}: expected InvalidArgument, got {r:?}"
    );
}

// ---- fence assertions ------------------------------------------------------

/// NOPRECEDE | NOSUCCEED sends nothing (no barrier, counted by
/// `WorldStats::barriers`); NOPRECEDE alone still barriers; NOPRECEDE after
/// operations is refused; a fence epoch with NOSTORE/NOPUT moves the data.
fn fence_assertions() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let mut win = Window::<u64>::allocate(&world, p).expect("allocate");
    let barriers = || world.stats().barriers;
    let b0 = barriers();
    for _ in 0..100 {
        win.fence(Assert::NOPRECEDE | Assert::NOSUCCEED)
            .expect("empty fence");
    }
    assert_eq!(
        barriers(),
        b0,
        "fence(NOPRECEDE|NOSUCCEED) must not barrier"
    );
    epoch_err(win.put(0, 0, &[1]), "put"); // NOSUCCEED opened no epoch
    win.fence(Assert::NOPRECEDE).expect("opening fence");
    assert_eq!(barriers(), b0 + 1, "a fence opening an epoch barriers");
    for round in 1..=5u64 {
        let to = (rank + round as usize) % p;
        win.put(to, rank, &[round * 100 + rank as u64])
            .expect("put");
        epoch_err(win.fence(Assert::NOPRECEDE), "fence(NOPRECEDE)");
        win.fence(Assert::NOSTORE | Assert::NOPUT)
            .expect("fence NOSTORE|NOPUT");
        let from = (rank + p - round as usize % p) % p;
        let got = win.local_to_vec().expect("read")[from];
        assert_eq!(got, round * 100 + from as u64, "round {round}");
    }
    // An open epoch without operations closed by an empty fence: no barrier.
    let b1 = barriers();
    win.fence(Assert::NOPRECEDE | Assert::NOSUCCEED)
        .expect("closing fence");
    assert_eq!(barriers(), b1);
    arg_err(win.fence(Assert::NOCHECK), "fence(NOCHECK)");
    arg_err(win.lock_all_with(Assert::NOPUT), "lock_all(NOPUT)");
    // lock() refuses undefined assertion bits too (issue 12 item 8), and
    // the refusal leaves no epoch behind.
    arg_err(
        win.lock(rank, LockType::Shared, Assert::NOPUT),
        "lock(NOPUT)",
    );
    arg_err(
        win.lock(rank, LockType::Exclusive, Assert(1 << 30)),
        "lock(unknown bit)",
    );
    win.fence(Assert::NOSUCCEED).expect("fence NOSUCCEED");
    win.free().expect("free");
}

// ---- lock_all takes shared locks -------------------------------------------

/// While rank 1 holds an exclusive lock on rank 0, every other rank's
/// access to rank 0 inside `lock_all` times out (`ONESIDED_TIMEOUT=1` on
/// those ranks; 10 on rank 1, which waits for them in a barrier) and the
/// epoch can still be closed; `lock_all(NOCHECK)` ignores the lock word.
fn lock_all_excludes() {
    common::timeout_for(1, 10, 1);
    let world = World::init().expect("init");
    let rank = world.rank();
    let mut win = Window::<u64>::allocate(&world, 2).expect("allocate");
    let timed_out = |r: Result<(), Error>, what: &str| match r {
        Err(Error::Timeout { .. }) => {}
        other => panic!("{what}: expected a timeout, got {other:?}"),
    };
    // Exclusive lock first, lock_all second.
    if rank == 1 {
        win.lock(0, LockType::Exclusive, Assert::NONE)
            .expect("lock");
        // A lazy (software-path) lock is acquired by the first operation.
        let mut v = [0u64];
        win.get(0, 1, &mut v).expect("get");
    }
    world.barrier().expect("barrier");
    if rank != 1 {
        win.lock_all().expect("lock_all");
        let mut v = [0u64];
        timed_out(win.get(0, 0, &mut v), "get under lock_all");
        win.unlock_all().expect("unlock_all");
        win.lock_all_with(Assert::NOCHECK)
            .expect("lock_all NOCHECK");
        win.get(0, 0, &mut v).expect("get under lock_all(NOCHECK)");
        win.unlock_all().expect("unlock_all");
    }
    world.barrier().expect("barrier");
    if rank == 1 {
        win.unlock(0).expect("unlock");
    }
    win.free().expect("free");
}

/// While rank 0 accesses rank 1 inside `lock_all`, rank 1's exclusive lock
/// of itself times out (`ONESIDED_TIMEOUT=3` on rank 1 — its first barrier
/// waits for rank 0's lock_all and put, which took over a second once on a
/// loaded machine; 10 on the others, which wait for it in a barrier); after
/// `unlock_all` it succeeds.
fn lock_all_excludes_then_lock() {
    common::timeout_for(1, 3, 10);
    let world = World::init().expect("init");
    let rank = world.rank();
    let mut win = Window::<u64>::allocate(&world, 2).expect("allocate");
    let timed_out = |r: Result<(), Error>, what: &str| match r {
        Err(Error::Timeout { .. }) => {}
        other => panic!("{what}: expected a timeout, got {other:?}"),
    };
    if rank == 0 {
        win.lock_all().expect("lock_all");
        win.put(1, 0, &[5]).expect("put");
    }
    world.barrier().expect("barrier");
    if rank == 1 {
        timed_out(
            win.lock(1, LockType::Exclusive, Assert::NONE),
            "exclusive lock while lock_all holds",
        );
    }
    world.barrier().expect("barrier");
    if rank == 0 {
        win.unlock_all().expect("unlock_all");
    }
    world.barrier().expect("barrier");
    if rank == 1 {
        // unlock_all released the shared lock.
        win.lock(1, LockType::Exclusive, Assert::NONE)
            .expect("lock after unlock_all");
        let mut v = [0u64];
        win.get(1, 0, &mut v).expect("get");
        assert_eq!(v[0], 5);
        win.unlock(1).expect("unlock");
    }
    win.free().expect("free");
}

/// The deadlock that lazy per-target locking invites, which `lock_all`
/// must avoid (docs/semantics.md, "lock_all locks per target"): rank 0,
/// inside `lock_all`, holds rank 2's shared lock (a put) and then accesses
/// rank 1, which rank 1 holds exclusively while it asks for rank 2
/// exclusively (two locks in ascending order, a legal program). Rank 0
/// gives back rank 2 before waiting, so both finish; its read of rank 1
/// comes after rank 1's exclusive epoch and sees its write, and its own
/// put to rank 2 was complete before rank 1's epoch read it.
fn lock_all_retreats() {
    let world = World::init().expect("init");
    let rank = world.rank();
    let mut win = Window::<u64>::allocate(&world, 2).expect("allocate");
    if rank == 1 {
        win.lock(1, LockType::Exclusive, Assert::NONE)
            .expect("lock 1");
        // A lazy (software-path) lock is acquired by the first operation.
        win.put(1, 0, &[11]).expect("put to 1");
        win.flush(1).expect("flush 1");
    }
    if rank == 0 {
        win.lock_all().expect("lock_all");
        win.put(2, 0, &[22]).expect("put to 2");
        win.flush(2).expect("flush 2");
    }
    world.barrier().expect("barrier");
    match rank {
        0 => {
            let mut v = [0u64];
            win.get(1, 0, &mut v).expect("get from 1 inside lock_all");
            win.unlock_all().expect("unlock_all");
            assert_eq!(v[0], 11, "the read came after rank 1's exclusive epoch");
        }
        1 => {
            win.lock(2, LockType::Exclusive, Assert::NONE)
                .expect("lock 2");
            let mut v = [0u64];
            win.get(2, 0, &mut v).expect("get from 2");
            assert_eq!(v[0], 22, "rank 0's put was complete before it let go");
            win.put(2, 1, &[33]).expect("put to 2");
            win.unlock(2).expect("unlock 2");
            win.unlock(1).expect("unlock 1");
        }
        _ => {}
    }
    world.barrier().expect("barrier");
    if rank == 2 {
        assert_eq!(win.local_to_vec().expect("read"), vec![22, 33]);
    }
    world.barrier().expect("barrier");
    win.free().expect("free");
}

/// Rank 0 writes a pair of words of the last rank under an exclusive lock,
/// one word at a time with a flush between; the others read the pair inside
/// `lock_all` and must never see it torn.
fn lock_all_readers() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let target = p - 1;
    let mut win = Window::<u64>::allocate(&world, 2).expect("allocate");
    for i in 1..=40u64 {
        if rank == 0 {
            win.lock(target, LockType::Exclusive, Assert::NONE)
                .expect("lock");
            win.put(target, 0, &[i]).expect("put");
            win.flush(target).expect("flush");
            win.put(target, 1, &[i]).expect("put");
            win.unlock(target).expect("unlock");
        } else {
            win.lock_all().expect("lock_all");
            let mut pair = [0u64; 2];
            win.get(target, 0, &mut pair).expect("get");
            win.unlock_all().expect("unlock_all");
            assert_eq!(pair[0], pair[1], "torn pair under lock_all");
        }
    }
    win.free().expect("free");
}

// ---- sync ------------------------------------------------------------------

/// With `ONESIDED_PROGRESS=manual`: rank 1 polls its own window with
/// `sync` + local loads until rank 0's put arrives; only `sync` drives the
/// provider in rank 1 meanwhile, so the data (and rank 0's flush) depend on it.
fn sync_polling() {
    std::env::set_var("ONESIDED_PROGRESS", "manual");
    let world = World::init().expect("init");
    let rank = world.rank();
    let mut win = Window::<u64>::allocate(&world, 1).expect("allocate");
    win.sync().expect("sync outside an epoch");
    if rank == 0 {
        win.lock_all().expect("lock_all");
        win.put(1, 0, &[42]).expect("put");
        win.flush(1).expect("flush");
        win.sync().expect("sync inside lock_all");
        win.unlock_all().expect("unlock_all");
    } else if rank == 1 {
        let start = std::time::Instant::now();
        loop {
            win.sync().expect("sync");
            if win.local_to_vec().expect("read")[0] == 42 {
                break;
            }
            assert!(
                start.elapsed().as_secs() < 30,
                "the put never became visible through sync"
            );
        }
    }
    world.barrier().expect("barrier");
    win.free().expect("free");
}

// ---- post/start/complete/wait/test -----------------------------------------

const PSCW_ROUNDS: u64 = 20;

/// Each rank is the origin of ranks r+1 and r+2 and the target of r−1 and
/// r−2 (overlapping groups; with 2 ranks a rank is its own target). Per
/// round: post to the origins, barrier (so NOCHECK holds), start to the
/// targets, put into its slot and accumulate a count at each target,
/// complete, then wait (even rounds) or test until true (odd rounds), and
/// check every slot and the count.
fn pscw_overlapping() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let mut win = Window::<u64>::allocate(&world, p + 1).expect("allocate");
    let group = |sign: isize| -> Vec<usize> {
        let mut g: Vec<usize> = [1isize, 2]
            .iter()
            .map(|d| (rank as isize + sign * d).rem_euclid(p as isize) as usize)
            .collect();
        g.sort_unstable();
        g.dedup();
        g
    };
    let (targets, origins) = (group(1), group(-1));
    for round in 1..=PSCW_ROUNDS {
        win.post(&origins, Assert::NOCHECK).expect("post");
        world.barrier().expect("barrier");
        win.start(&targets, Assert::NOCHECK).expect("start");
        for &t in &targets {
            win.put(t, rank, &[round * 1000 + rank as u64])
                .expect("put");
            win.accumulate(t, p, &[1], onesided::Op::Sum)
                .expect("accumulate");
        }
        win.complete().expect("complete");
        if round % 2 == 0 {
            win.wait().expect("wait");
        } else {
            while !win.test().expect("test") {}
        }
        let local = win.local_to_vec().expect("read");
        for &o in &origins {
            assert_eq!(local[o], round * 1000 + o as u64, "round {round} from {o}");
        }
        assert_eq!(local[p], round * origins.len() as u64, "round {round}");
    }
    win.free().expect("free");
}

/// Without NOCHECK and without barriers: post notifications travel as
/// active messages. In round k rank r accesses r+1 and r+1+(k mod (p−1))
/// (so groups change every round and overlap), and is exposed to the
/// inverse set. A rank that finished round k posts for round k+1 while its
/// origins may still be in round k toward other targets: such early posts
/// must wait for the epoch they belong to. Each round puts a value into the
/// origin's slot and counts itself at the target; the target checks both
/// after wait (or test), the origin reads its slot back under its epoch
/// (which needs the post: the target's previous round was checked).
fn pscw_notified() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let mut win = Window::<u64>::allocate(&world, p + 1).expect("allocate");
    let others = (p - 1).max(1);
    let group = |r: usize, k: u64, sign: isize| -> Vec<usize> {
        let mut g: Vec<usize> = [1, 1 + (k as usize % others)]
            .iter()
            .map(|&d| (r as isize + sign * d as isize).rem_euclid(p as isize) as usize)
            .collect();
        g.sort_unstable();
        g.dedup();
        g
    };
    let mut counted = 0u64;
    for k in 1..=PSCW_ROUNDS {
        let (targets, origins) = (group(rank, k, 1), group(rank, k, -1));
        win.post(&origins, Assert::NONE).expect("post");
        win.start(&targets, Assert::NONE).expect("start");
        for &t in &targets {
            win.put(t, rank, &[k * 1000 + rank as u64]).expect("put");
            win.accumulate(t, p, &[1], onesided::Op::Sum)
                .expect("accumulate");
        }
        win.complete().expect("complete");
        if k % 2 == 0 {
            win.wait().expect("wait");
        } else {
            while !win.test().expect("test") {}
        }
        counted += origins.len() as u64;
        let local = win.local_to_vec().expect("read");
        for &o in &origins {
            assert_eq!(local[o], k * 1000 + o as u64, "round {k} from {o}");
        }
        assert_eq!(local[p], counted, "round {k}");
    }
    win.free().expect("free");
}

/// Every PSCW misuse returns an error and leaves the window usable.
fn pscw_misuse() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let peer = (rank + 1) % p;
    let mut win = Window::<u64>::allocate(&world, 2).expect("allocate");
    epoch_err(win.complete(), "complete");
    epoch_err(win.wait(), "wait");
    epoch_err(win.test().map(|_| ()), "test");
    assert!(matches!(
        win.start(&[p], Assert::NOCHECK),
        Err(Error::InvalidRank { .. })
    ));
    arg_err(win.start(&[peer, peer], Assert::NOCHECK), "duplicate rank");
    arg_err(win.post(&[peer], Assert::NOPRECEDE), "post(NOPRECEDE)");
    win.post(&[], Assert::NOCHECK).expect("post to nobody");
    assert!(win.test().expect("test"), "nobody to wait for");
    win.post(&[rank], Assert::NOCHECK).expect("post to self");
    epoch_err(win.post(&[], Assert::NOCHECK), "post");
    win.start(&[rank], Assert::NOCHECK).expect("start self");
    epoch_err(win.start(&[rank], Assert::NOCHECK), "start");
    if p > 1 {
        epoch_err(win.put(peer, 0, &[1]), "put"); // outside the access group
    }
    epoch_err(win.fence(Assert::NONE), "fence");
    epoch_err(win.lock_all(), "lock_all");
    epoch_err(win.lock(rank, LockType::Shared, Assert::NONE), "lock");
    epoch_err(win.flush_all(), "flush_all");
    epoch_err(win.free(), "free");
    win.complete().expect("complete");
    epoch_err(win.free(), "free"); // the exposure epoch is still open
    win.wait().expect("wait for oneself");
    // After a fence epoch with operations, PSCW must wait for the next fence.
    win.fence(Assert::NONE).expect("fence");
    win.put(rank, 0, &[1]).expect("put");
    epoch_err(win.start(&[rank], Assert::NOCHECK), "start");
    epoch_err(win.post(&[rank], Assert::NOCHECK), "post");
    win.fence(Assert::NOSUCCEED).expect("fence");
    win.free().expect("free");
}

spmd_test!(fence_assertions_skip_work, &[2, 4], fence_assertions);
spmd_test!(lock_all_excludes_exclusive_lock, &[2, 3], lock_all_excludes);
spmd_test!(lock_all_gives_back_before_waiting, &[3], lock_all_retreats);
spmd_test!(
    lock_all_holds_off_exclusive_lock,
    &[2, 3],
    lock_all_excludes_then_lock
);
spmd_test!(lock_all_readers_see_no_torn_pair, &[4], lock_all_readers);
spmd_test!(
    sync_makes_puts_visible_to_local_loads,
    jobs = common::matrix_one_provider(&[2]),
    sync_polling
);
spmd_test!(pscw_overlapping_groups, &[2, 4], pscw_overlapping);
spmd_test!(
    pscw_overlapping_groups_8,
    jobs = common::matrix_one_provider(&[8]),
    pscw_overlapping
);
spmd_test!(pscw_misuse_is_refused, &[2], pscw_misuse);

/// `complete` of an access epoch whose members never post (a stopped or
/// dead rank): the waits for their posts share one `ONESIDED_TIMEOUT`, so
/// two silent members cost one timeout, not two; the error names the first
/// of them, and the next epoch works. On the in-process back-end, where a
/// member that never posts is the same to the origin as a stopped one.
#[test]
fn in_process_complete_waits_one_timeout_for_the_group() {
    const T: Duration = Duration::from_secs(2);
    // Ranks 1 and 2 stay away from the library while rank 0 completes.
    let gate = std::sync::Barrier::new(3);
    let body = |world: &World| {
        let rank = world.rank();
        let mut win = Window::<u64>::allocate(world, 1).expect("allocate");
        let outcome = (rank == 0).then(|| {
            win.start(&[1, 2], Assert::NONE).expect("start");
            let t0 = Instant::now();
            let done = win.complete();
            (t0.elapsed(), done)
        });
        // Checked after the gate: a failed check must not leave ranks 1
        // and 2 at it.
        gate.wait();
        if let Some((took, done)) = outcome {
            let err = done.expect_err("complete without posts");
            assert!(
                took >= T.mul_f64(0.9) && took < T.mul_f64(1.6),
                "complete took {took:?} with two silent members (timeout {T:?}): {err}"
            );
            assert_eq!(err.rank(), Some(1), "{err}");
        }
        win.fence(Assert::NONE).expect("fence");
        win.put((rank + 1) % 3, 0, &[rank as u64 + 7]).expect("put");
        win.fence(Assert::NONE).expect("fence");
        assert_eq!(
            win.local_to_vec().expect("read")[0],
            (rank + 2) as u64 % 3 + 7
        );
        win.free().expect("free");
    };
    common::in_process(
        "in_process_complete_waits_one_timeout_for_the_group",
        &[3],
        &[false, true],
        |c| c.timeout = Some(T),
        &body,
    );
}
spmd_test!(pscw_post_notifications, &[2, 4], pscw_notified);
spmd_test!(
    pscw_post_notifications_8,
    jobs = common::matrix_one_provider(&[8]),
    pscw_notified
);

/// The lock_all tests with every lock on the software path
/// (`ONESIDED_LOCK=software`: shared locks through the target's queue), on
/// each provider.
#[test]
fn software_lock_variants() {
    common::run_variants(
        module_path!(),
        &[
            ("lock_all_excludes_exclusive_lock", 3),
            ("lock_all_holds_off_exclusive_lock", 3),
            ("lock_all_readers_see_no_torn_pair", 4),
            ("lock_all_gives_back_before_waiting", 3),
        ],
        &[("ONESIDED_LOCK", "software")],
    );
}

/// Remote operations a process posted: messages, RMA writes and reads,
/// atomics (what `lock_all` per target keeps independent of the job size).
fn remote_ops(s: &onesided::WorldStats) -> u64 {
    let t = &s.transport;
    t.sends + t.writes + t.reads + t.atomics
}

/// `lock_all` + one put to the last rank + `unlock_all` at rank 0: the
/// epoch contacts that rank alone (`peers_contacted` + 1: rank 0 had
/// contacted only its barrier partners 1, 2, 4, …) and the put lands. Prints
/// the epoch's remote operations for `lock_all_per_target` to compare
/// across job sizes.
fn lock_all_one_target() {
    let world = World::init().unwrap();
    let (me, p) = (world.rank(), world.size());
    let mut win = Window::<u64>::allocate(&world, 4).unwrap();
    world.barrier().unwrap();
    if me == 0 {
        let last = p - 1;
        let before = world.stats();
        win.lock_all().unwrap();
        win.put(last, 1, &[1000 + p as u64]).unwrap();
        win.unlock_all().unwrap();
        let after = world.stats();
        let new_peers = after.peers_contacted - before.peers_contacted;
        assert_eq!(
            new_peers, 1,
            "lock_all + put to rank {last} + unlock_all contacted {new_peers} new peers \
             ({} -> {})",
            before.peers_contacted, after.peers_contacted
        );
        println!(
            "LOCK-ALL-EPOCH ranks={p} peers={}->{} remote_ops={}",
            before.peers_contacted,
            after.peers_contacted,
            remote_ops(&after) - remote_ops(&before)
        );
    }
    world.barrier().unwrap();
    if me == p - 1 {
        assert_eq!(win.local_to_vec().unwrap()[1], 1000 + p as u64);
    }
    world.barrier().unwrap();
    win.free().unwrap();
}
spmd_test!(
    lock_all_one_target_4,
    jobs = common::matrix_one_provider(&[4]),
    lock_all_one_target
);

/// Issue 13: at 4 and 8 ranks, over tcp with `ONESIDED_SHM=0`, on both
/// lock paths, `lock_all` + one put to rank P−1 + `unlock_all` contacts
/// exactly one new peer and posts the same number of remote operations.
#[test]
fn lock_all_per_target() {
    if common::is_child(&common::test_name(module_path!(), "lock_all_per_target")) {
        return;
    }
    let name = common::test_name(module_path!(), "lock_all_one_target_4");
    for lock in ["software", "hardware"] {
        let mut counts = Vec::new();
        for p in [4usize, 8] {
            let mut cmd = common::onesided_run_command(&name, p, &[]);
            common::select_provider(&mut cmd, "tcp");
            cmd.env("ONESIDED_SHM", "0").env("ONESIDED_LOCK", lock);
            let out = common::run_with_limit(cmd, common::job_timeout());
            let passed = out.stdout.matches("test result: ok. 1 passed").count();
            assert!(
                out.status.is_some_and(|s| s.success()) && passed == p,
                "ONESIDED_LOCK={lock}, {p} ranks: {passed} of {p} passed\n{}",
                out.tail(40)
            );
            let line = out
                .stdout
                .lines()
                .find(|l| l.contains("LOCK-ALL-EPOCH"))
                .unwrap_or_else(|| panic!("no LOCK-ALL-EPOCH line\n{}", out.tail(40)))
                .to_string();
            eprintln!("[lock_all_per_target] ONESIDED_LOCK={lock}: {line}");
            let ops: u64 = line
                .rsplit("remote_ops=")
                .next()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("unparsable: {line}"));
            counts.push(ops);
        }
        assert_eq!(
            counts[0], counts[1],
            "ONESIDED_LOCK={lock}: remote operations at 4 and 8 ranks differ: {counts:?}"
        );
    }
}
