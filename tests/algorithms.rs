//! Classic one-sided algorithms MPI test suites run, as multi-process tests
//! (tests/common): a distributed linked list appended by every rank with
//! compare_and_swap under lock_all, and an MCS queue mutex built from
//! fetch_and_op and compare_and_swap protecting a non-atomic counter.
//! Nothing synchronizes by sleeping.

#[macro_use]
mod common;

use onesided::{NoOp, Op, Window, World};

// ---- distributed linked list ------------------------------------------------

/// Elements each rank appends.
const NODES: u64 = 16;

/// A node pointer: 0 is nil, else `(rank + 1) << 32 | slot`.
fn ptr(rank: usize, slot: u64) -> u64 {
    ((rank as u64 + 1) << 32) | slot
}

fn unptr(p: u64) -> (usize, usize) {
    (((p >> 32) - 1) as usize, (p & 0xffff_ffff) as usize)
}

/// Node `slot` of a rank: element 2·slot is its value, 2·slot + 1 its next
/// pointer. Slot 0 of rank 0 is the list head (a sentinel); a rank's own
/// elements are its slots 1..=NODES, valued `rank << 32 | i`. Each rank
/// appends by compare-and-swapping nil → its node into the next pointer of
/// the tail it knows, following the list when the swap fails (MPICH's
/// linked_list_lockall). Afterwards every rank walks the list: each rank's
/// elements appear exactly once each, in order, and nothing else.
fn linked_list() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let slots = NODES as usize + 1;
    let mut win = Window::<u64>::allocate(&world, 2 * slots).expect("allocate");
    win.lock_all().expect("lock_all");
    let mut tail = ptr(0, 0);
    for i in 1..=NODES {
        // A fresh node (next = 0 = nil, as allocated), then publish it.
        win.put(rank, 2 * i as usize, &[((rank as u64) << 32) | i])
            .expect("put own node");
        win.sync().expect("sync");
        let node = ptr(rank, i);
        loop {
            let (tr, ts) = unptr(tail);
            let old = win
                .compare_and_swap(tr, 2 * ts + 1, 0, node)
                .expect("compare_and_swap");
            if old == 0 {
                tail = node;
                break;
            }
            tail = old;
        }
    }
    win.unlock_all().expect("unlock_all");
    world.barrier().expect("barrier");
    win.lock_all().expect("lock_all");
    let mut next_of = vec![1u64; p];
    let (mut cur, mut total) = (ptr(0, 0), 0u64);
    loop {
        let (r, s) = unptr(cur);
        let mut next = [0u64];
        win.get(r, 2 * s + 1, &mut next).expect("get next");
        if next[0] == 0 {
            break;
        }
        cur = next[0];
        let (r, s) = unptr(cur);
        assert!(
            r < p && s >= 1 && s <= NODES as usize,
            "bad pointer {cur:#x}"
        );
        let mut value = [0u64];
        win.get(r, 2 * s, &mut value).expect("get value");
        let want = ((r as u64) << 32) | next_of[r];
        assert_eq!(value[0], want, "element {total}: rank {r} slot {s}");
        next_of[r] += 1;
        total += 1;
        assert!(total <= NODES * p as u64, "the list has a cycle");
    }
    win.unlock_all().expect("unlock_all");
    assert_eq!(total, NODES * p as u64, "elements per rank: {next_of:?}");
    world.barrier().expect("barrier");
    win.free().expect("free");
}

// ---- MCS mutex ---------------------------------------------------------------

/// Window layout (i64): the queue tail (used at rank 0), this rank's next
/// pointer and blocked flag, and the protected counter (rank 0).
const TAIL: usize = 0;
const NEXT: usize = 1;
const BLOCKED: usize = 2;
const COUNTER: usize = 3;
const NIL: i64 = -1;
/// Critical sections per rank: 48 in total, at least 6 each.
fn critical_sections(p: usize) -> i64 {
    (48 / p as i64).max(6)
}

/// MCS lock (Mellor-Crummey & Scott, as in MPICH's test/mpi/rma/mcs-mutex):
/// swap oneself into the tail; if there was a predecessor, link behind it
/// and spin on one's own blocked flag.
fn mcs_acquire(win: &Window<i64>, me: usize) {
    win.fetch_and_op(me, NEXT, NIL, Op::Replace)
        .expect("reset next");
    win.fetch_and_op(me, BLOCKED, 1, Op::Replace)
        .expect("set blocked");
    let prev = win
        .fetch_and_op(0, TAIL, me as i64, Op::Replace)
        .expect("swap tail");
    if prev != NIL {
        win.fetch_and_op(prev as usize, NEXT, me as i64, Op::Replace)
            .expect("link");
        while win
            .fetch_and_op(me, BLOCKED, 0, NoOp)
            .expect("poll blocked")
            != 0
        {}
    }
}

/// MCS unlock: if nobody is queued, swing the tail back to nil; otherwise
/// (or if somebody is just linking in) unblock the successor.
fn mcs_release(win: &Window<i64>, me: usize) {
    let mut next = win.fetch_and_op(me, NEXT, 0, NoOp).expect("next");
    if next == NIL {
        let old = win
            .compare_and_swap(0, TAIL, me as i64, NIL)
            .expect("release tail");
        if old == me as i64 {
            return;
        }
        while next == NIL {
            next = win.fetch_and_op(me, NEXT, 0, NoOp).expect("next");
        }
    }
    win.fetch_and_op(next as usize, BLOCKED, 0, Op::Replace)
        .expect("unblock");
}

/// Every rank enters the critical section `critical_sections(p)` times and
/// increments rank 0's counter with a get, a put and a flush (not atomic: a
/// broken mutex loses increments). The final count is exact.
fn mcs_mutex() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let mut win = Window::<i64>::allocate(&world, 4).expect("allocate");
    win.local_write(0, &[NIL, NIL, 0, 0]).expect("init");
    world.barrier().expect("barrier");
    win.lock_all().expect("lock_all");
    let rounds = critical_sections(p);
    for _ in 0..rounds {
        mcs_acquire(&win, rank);
        let mut v = [0i64];
        win.get(0, COUNTER, &mut v).expect("get");
        win.put(0, COUNTER, &[v[0] + 1]).expect("put");
        win.flush(0).expect("flush");
        mcs_release(&win, rank);
    }
    win.unlock_all().expect("unlock_all");
    world.barrier().expect("barrier");
    if rank == 0 {
        let local = win.local_to_vec().expect("read");
        assert_eq!(local[COUNTER], rounds * p as i64, "counter");
        assert_eq!(local[TAIL], NIL, "queue left non-empty");
    }
    world.barrier().expect("barrier");
    win.free().expect("free");
}

spmd_test!(linked_list_cas_lock_all, &[2, 4], linked_list);
spmd_test!(
    linked_list_cas_lock_all_8,
    jobs = common::matrix_one_provider(&[8]),
    linked_list
);
spmd_test!(mcs_mutex_counter, &[2, 4], mcs_mutex);
spmd_test!(
    mcs_mutex_counter_8,
    jobs = common::matrix_one_provider(&[8]),
    mcs_mutex
);

/// The same tests with every lock on the software path
/// (`ONESIDED_LOCK=software`: the target's lock queue, lazy locks), on
/// each provider.
#[test]
fn software_lock_variants() {
    common::run_variants(
        module_path!(),
        &[
            ("linked_list_cas_lock_all", 2),
            ("linked_list_cas_lock_all", 4),
            ("mcs_mutex_counter", 2),
            ("mcs_mutex_counter", 4),
        ],
        &[("ONESIDED_LOCK", "software")],
    );
}
