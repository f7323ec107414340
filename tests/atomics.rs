//! Multi-process tests of the accumulate family over provider atomics:
//! real processes, real providers, every element checked, 2 and 4 ranks,
//! tcp/shm/sockets, onesided-run and Hydra (see tests/common).

#[macro_use]
mod common;

use onesided::{AnyOp, Element, Error, NoOp, Op, Window, World};

/// Test-side conversions for every element type.
trait Num: Element + PartialEq + PartialOrd {
    fn of(v: i64) -> Self;
    fn int(self) -> i64;
}

macro_rules! num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            fn of(v: i64) -> Self { v as $t }
            fn int(self) -> i64 { self as i64 }
        }
    )*};
}
num!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

// ---- (a) a shared counter hammered by fetch_and_op(SUM) -----------------

const HITS: usize = 100;

/// Every rank, the owner included, adds 1 to one element of the last rank
/// `HITS` times; the fetched values are exactly {0, ..., P*HITS - 1} and the
/// final value is P*HITS.
fn hammer<T: Num>(world: &World) {
    let (rank, p) = (world.rank(), world.size());
    let owner = p - 1;
    let total = p * HITS;
    let counter = Window::<T>::allocate(world, 1);
    if common::hardware_only_refused(&counter) {
        return;
    }
    let mut counter = counter.expect("allocate");
    // Rank r's fetched values land at [r*HITS, (r+1)*HITS) on rank 0.
    let mut seen = Window::<T>::allocate(world, total).expect("allocate");
    counter.lock_all().unwrap();
    let mut got = Vec::with_capacity(HITS);
    for _ in 0..HITS {
        got.push(counter.fetch_and_op(owner, 0, T::of(1), Op::Sum).unwrap());
    }
    counter.unlock_all().unwrap();
    seen.lock_all().unwrap();
    seen.put(0, rank * HITS, &got).unwrap();
    seen.unlock_all().unwrap();
    world.barrier().unwrap();
    if rank == owner {
        let v = counter.local_to_vec().unwrap()[0];
        assert!(
            v == T::of(total as i64),
            "{}: counter {v:?}, want {total}",
            T::NAME
        );
    }
    if rank == 0 {
        let mut all: Vec<i64> = seen
            .local_to_vec()
            .unwrap()
            .into_iter()
            .map(Num::int)
            .collect();
        all.sort_unstable();
        let want: Vec<i64> = (0..total as i64).collect();
        assert_eq!(all, want, "{}: fetched values", T::NAME);
    }
    // Everyone reads the final value atomically.
    counter.lock_all().unwrap();
    let fin = counter.fetch_and_op(owner, 0, T::of(0), NoOp).unwrap();
    counter.unlock_all().unwrap();
    assert!(fin == T::of(total as i64), "{}: read back {fin:?}", T::NAME);
    seen.free().unwrap();
    counter.free().unwrap();
}

fn counters() {
    // One World per process: PMI-1 can be initialised only once.
    let world = World::init().expect("init");
    hammer::<i64>(&world);
    hammer::<u32>(&world);
    hammer::<f64>(&world);
}

// ---- (b) every op x every type with accumulate --------------------------

/// (initial target value, origin value of rank r, combine) for `op`; values
/// fit in i8 for P <= 4 and the shared result is independent of order.
fn plan(op: AnyOp, r: i64) -> (i64, i64, fn(i64, i64) -> i64) {
    match op {
        AnyOp::Sum => (3, r + 1, |t, o| t + o),
        AnyOp::Prod => (3, 2, |t, o| t * o),
        AnyOp::Min => (100, 10 + r, |t, o| t.min(o)),
        AnyOp::Max => (1, 10 + r, |t, o| t.max(o)),
        AnyOp::Band => (127, 127 & !(1 << r), |t, o| t & o),
        AnyOp::Bor => (0, 1 << r, |t, o| t | o),
        AnyOp::Bxor => (80, 1 << r, |t, o| t ^ o),
        AnyOp::Land => (1, (r % 2 == 0) as i64, |t, o| (t != 0 && o != 0) as i64),
        AnyOp::Lor => (0, (r == 0) as i64, |t, o| (t != 0 || o != 0) as i64),
        AnyOp::Lxor => (1, 1, |t, o| ((t != 0) != (o != 0)) as i64),
        AnyOp::Replace => (0, r + 1, |_, o| o),
        AnyOp::NoOp => (0, 0, |t, _| t),
    }
}

/// Every op `accumulate` accepts: all but NO_OP (which only fetches).
fn acc_ops() -> Vec<AnyOp> {
    AnyOp::ALL
        .into_iter()
        .filter(|&op| op != AnyOp::NoOp)
        .collect()
}

/// Rank 0's window has one block of P+1 elements per op: element r is
/// rank r's own, element P is shared by all. Each rank accumulates once
/// into each (rank 0 on itself through the provider).
fn every_op<T: Num>(world: &World) {
    let (rank, p) = (world.rank(), world.size());
    let block = p + 1;
    let mut win = Window::<T>::allocate(world, acc_ops().len() * block).expect("allocate");
    if rank == 0 {
        for (k, op) in acc_ops().into_iter().enumerate() {
            let init = vec![T::of(plan(op, 0).0); block];
            win.local_write(k * block, &init).unwrap();
        }
    }
    world.barrier().unwrap();
    win.lock_all().unwrap();
    for (k, op) in acc_ops().into_iter().enumerate() {
        let v = [T::of(plan(op, rank as i64).1)];
        if op.integer_only() && !T::INTEGER {
            let e = win.accumulate(0, k * block + rank, &v, op).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            let msg = e.to_string();
            assert!(msg.contains(op.name()) && msg.contains(T::NAME), "{msg}");
            continue;
        }
        win.accumulate(0, k * block + rank, &v, op)
            .unwrap_or_else(|e| panic!("{op} on {}: {e}", T::NAME));
        win.accumulate(0, k * block + p, &v, op).unwrap();
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    if rank == 0 {
        let got = win.local_to_vec().unwrap();
        for (k, op) in acc_ops().into_iter().enumerate() {
            let (init, _, f) = plan(op, 0);
            let b = &got[k * block..(k + 1) * block];
            if op.integer_only() && !T::INTEGER {
                assert!(b.iter().all(|x| *x == T::of(init)), "{op}: untouched");
                continue;
            }
            let mut shared = init;
            for (r, got) in b[..p].iter().enumerate() {
                let o = plan(op, r as i64).1;
                assert!(
                    *got == T::of(f(init, o)),
                    "{op} on {}: element of rank {r} is {got:?}, want {}",
                    T::NAME,
                    f(init, o)
                );
                shared = f(shared, o);
            }
            if op == AnyOp::Replace {
                let s = b[p].int();
                assert!((1..=p as i64).contains(&s), "REPLACE shared {s}");
            } else {
                assert!(
                    b[p] == T::of(shared),
                    "{op} on {}: shared element {:?}, want {shared}",
                    T::NAME,
                    b[p]
                );
            }
        }
    }
    world.barrier().unwrap();
    win.free().unwrap();
}

fn every_op_every_type() {
    let world = World::init().expect("init");
    every_op::<i8>(&world);
    every_op::<u8>(&world);
    every_op::<i16>(&world);
    every_op::<u16>(&world);
    every_op::<i32>(&world);
    every_op::<u32>(&world);
    every_op::<i64>(&world);
    every_op::<u64>(&world);
    every_op::<f32>(&world);
    every_op::<f64>(&world);
}

// ---- (c) compare_and_swap: election and lock-free counter ---------------

const CAS_ROUNDS: u64 = 50;

fn cas() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let owner = p / 2;
    let mut win = Window::<u64>::allocate(&world, 3).expect("allocate");
    win.lock_all().unwrap();
    let me = rank as u64 + 1;
    let old = win.compare_and_swap(owner, 0, 0, me).unwrap();
    let won = old == 0;
    if won {
        win.accumulate(owner, 1, &[1], Op::Sum).unwrap();
    } else {
        assert!((1..=p as u64).contains(&old) && old != me, "lost to {old}");
    }
    // Lock-free counter: read, CAS +1, retry on interference.
    for _ in 0..CAS_ROUNDS {
        let mut cur = win.fetch_and_op(owner, 2, 0, NoOp).unwrap();
        loop {
            let prev = win.compare_and_swap(owner, 2, cur, cur + 1).unwrap();
            if prev == cur {
                break;
            }
            cur = prev;
        }
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    win.lock_all().unwrap();
    let mut all = [0u64; 3];
    win.get_accumulate(owner, 0, &[], &mut all, NoOp).unwrap();
    win.unlock_all().unwrap();
    assert!((1..=p as u64).contains(&all[0]), "winner {}", all[0]);
    assert_eq!(
        won,
        all[0] == me,
        "rank {rank}: won={won}, winner {}",
        all[0]
    );
    assert_eq!(all[1], 1, "exactly one winner");
    assert_eq!(all[2], p as u64 * CAS_ROUNDS, "CAS counter");
    world.barrier().unwrap();
    win.free().unwrap();
}

// ---- (d) get_accumulate with NO_OP and REPLACE; (e) ordering --------------

fn pattern(rank: usize, k: usize) -> i32 {
    (rank as i32 + 1) * 1000 + k as i32 * 7 - 3
}

fn read_and_swap() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let (right, left) = ((rank + 1) % p, (rank + p - 1) % p);
    const N: usize = 9;
    let mut win = Window::<i32>::allocate(&world, N).expect("allocate");
    let initial: Vec<i32> = (0..N).map(|k| pattern(rank, k)).collect();
    win.local_write(0, &initial).unwrap();
    world.barrier().unwrap();
    let theirs: Vec<i32> = (0..N).map(|k| pattern(right, k)).collect();
    let mine: Vec<i32> = (0..N).map(|k| -pattern(rank, k)).collect();
    win.lock_all().unwrap();
    let mut got = vec![0i32; N];
    win.get_accumulate(right, 0, &[], &mut got, NoOp).unwrap();
    assert_eq!(got, theirs, "atomic read of rank {right}");
    win.get_accumulate(right, 0, &mine, &mut got, Op::Replace)
        .unwrap();
    assert_eq!(got, theirs, "atomic swap returned the old values");
    let back = win
        .rget_accumulate(right, 0, &[], vec![0i32; N], NoOp)
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(back, mine, "atomic read after the swap");
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    let want: Vec<i32> = (0..N).map(|k| -pattern(left, k)).collect();
    assert_eq!(
        win.local_to_vec().unwrap(),
        want,
        "swapped in by rank {left}"
    );
    world.barrier().unwrap();
    win.free().unwrap();
}

/// An accumulate followed by a get_accumulate from the same origin sees the
/// first (MPI's default accumulate ordering), blocking and request-based.
fn ordering() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let right = (rank + 1) % p;
    let mut win = Window::<i64>::allocate(&world, 2 * p).expect("allocate");
    win.lock_all().unwrap();
    let mut sum = 0i64;
    for i in 1..=200i64 {
        win.accumulate(right, rank, &[i], Op::Sum).unwrap();
        sum += i;
        let seen = win.fetch_and_op(right, rank, 0, NoOp).unwrap();
        assert_eq!(seen, sum, "round {i}: read after accumulate");
        // Request-based: replace, then read.
        let r1 = win
            .raccumulate(right, p + rank, vec![i * 3], Op::Replace)
            .unwrap();
        let r2 = win
            .rget_accumulate(right, p + rank, &[], vec![0i64], NoOp)
            .unwrap();
        r1.wait().unwrap();
        assert_eq!(
            r2.wait().unwrap(),
            vec![i * 3],
            "round {i}: rget after raccumulate"
        );
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    let left = (rank + p - 1) % p;
    let local = win.local_to_vec().unwrap();
    assert_eq!(local[left], sum);
    assert_eq!(local[p + left], 600);
    world.barrier().unwrap();
    win.free().unwrap();
}

// ---- (f) large counts are chunked -----------------------------------------

const LARGE: usize = 1 << 20;

fn large() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let right = (rank + 1) % p;
    let left = (rank + p - 1) % p;
    let mut win = Window::<i32>::allocate(&world, LARGE).expect("allocate");
    let init: Vec<i32> = (0..LARGE).map(|i| (i % 977) as i32).collect();
    win.local_write(0, &init).unwrap();
    world.barrier().unwrap();
    let add = |r: usize| -> Vec<i32> { (0..LARGE).map(|i| (i as i32) ^ (r as i32 * 5)).collect() };
    let mine = add(rank);
    let half = LARGE / 2 + 3;
    win.lock_all().unwrap();
    win.accumulate(right, 0, &mine[..half], Op::Sum).unwrap();
    let req = win
        .raccumulate(right, half, mine[half..].to_vec(), Op::Sum)
        .unwrap();
    req.wait().unwrap();
    win.flush(right).unwrap();
    let mut got = vec![0i32; LARGE];
    win.get_accumulate(right, 0, &[], &mut got, NoOp).unwrap();
    win.unlock_all().unwrap();
    let want_right: Vec<i32> = (0..LARGE).map(|i| init[i].wrapping_add(mine[i])).collect();
    if let Some(i) = (0..LARGE).find(|&i| got[i] != want_right[i]) {
        panic!(
            "rank {right} element {i}: got {} want {}",
            got[i], want_right[i]
        );
    }
    world.barrier().unwrap();
    let theirs = add(left);
    let local = win.local_to_vec().unwrap();
    if let Some(i) = (0..LARGE).find(|&i| local[i] != init[i].wrapping_add(theirs[i])) {
        panic!("local element {i}: got {}", local[i]);
    }
    world.barrier().unwrap();
    win.free().unwrap();
    common::assert_transport_clean(&world);
}

// ---- (g) errors -------------------------------------------------------------

fn errors() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let right = (rank + 1) % p;
    let mut win = Window::<f64>::allocate(&world, 4 + rank).expect("allocate");
    let id = win.id().to_string();
    let e = win.accumulate(right, 0, &[1.0], Op::Sum).unwrap_err();
    assert!(e.to_string().contains("outside an epoch"), "{e}");
    win.lock_all().unwrap();
    for op in [
        AnyOp::Band,
        AnyOp::Bor,
        AnyOp::Bxor,
        AnyOp::Land,
        AnyOp::Lor,
        AnyOp::Lxor,
    ] {
        let e = win.accumulate(right, 0, &[1.0], op).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::InvalidArgument(_)), "{msg}");
        for w in [op.name(), "f64", &id] {
            assert!(msg.contains(w), "{msg:?} lacks {w:?}");
        }
        assert!(win.fetch_and_op(right, 0, 1.0, op).is_err());
    }
    let tlen = 4 + right;
    let e = win
        .accumulate(right, tlen - 1, &[1.0, 2.0], Op::Sum)
        .unwrap_err();
    assert!(
        matches!(e, Error::OutOfWindow { offset, len: 2, window_len, .. } if offset == tlen - 1 && window_len == tlen),
        "{e}"
    );
    assert!(matches!(
        win.fetch_and_op(right, tlen, 1.0, Op::Sum),
        Err(Error::OutOfWindow { .. })
    ));
    assert!(matches!(
        win.compare_and_swap(rank, 4 + rank, 0.0, 1.0),
        Err(Error::OutOfWindow { .. })
    ));
    assert!(matches!(
        win.accumulate(p, 0, &[1.0], Op::Sum),
        Err(Error::InvalidRank { .. })
    ));
    let e = win.accumulate(right, 0, &[1.0], AnyOp::NoOp).unwrap_err();
    assert!(e.to_string().contains("NO_OP"), "{e}");
    let e = win
        .get_accumulate(right, 0, &[1.0], &mut [0.0; 2], Op::Sum)
        .unwrap_err();
    assert!(e.to_string().contains("origin elements"), "{e}");
    // Still usable: the window's own element, through the provider.
    win.accumulate(rank, 0, &[0.5], Op::Sum).unwrap();
    win.accumulate(right, 1, &[0.25], Op::Sum).unwrap();
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    let local = win.local_to_vec().unwrap();
    assert_eq!(local[0], 0.5);
    assert_eq!(local[1], 0.25);
    world.barrier().unwrap();
    win.free().unwrap();
}

spmd_test!(fetch_and_op_counter, &[2, 4], counters);
spmd_test!(accumulate_every_op_every_type, &[2, 4], every_op_every_type);
spmd_test!(compare_and_swap_election_and_counter, &[2, 4], cas);
spmd_test!(get_accumulate_read_and_swap, &[2, 4], read_and_swap);
spmd_test!(accumulate_ordering, &[2, 4], ordering);
spmd_test!(accumulate_large_counts, &[2, 4], large);
spmd_test!(accumulate_errors, &[2, 4], errors);
spmd_test!(nic_atomics_are_counted, &[2, 4], nic_atomics);

/// fetch_and_op(SUM) and compare_and_swap on an i64 window with the
/// `accumulate_ops=same_op` hint, then the transport's counters: on the
/// native verbs back-end the NIC carried them (64-bit FETCH_AND_ADD /
/// CMP_AND_SWP work requests, one per call); on libfabric nothing is
/// counted as such. Checks every value too. (Without the hint, a window
/// whose type has operations the NIC lacks runs all of them in software,
/// so that concurrent different operations stay atomic; docs/semantics.md.)
fn nic_atomics() {
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    let native = world.transport_caps().backend == "verbs";
    let same_op = onesided::WindowInfo::new()
        .accumulate_ops("same_op")
        .unwrap();
    let mut win = Window::<i64>::allocate_with(&world, 2, &same_op).expect("allocate");
    let before = world.stats().transport;
    win.lock_all().unwrap();
    const N: usize = 20;
    let owner = (rank + 1) % p;
    for _ in 0..N {
        win.fetch_and_op(owner, 0, 1, Op::Sum).unwrap();
    }
    // Rank r takes element 1 of its right neighbour from 0 to r + 1.
    let old = win.compare_and_swap(owner, 1, 0, rank as i64 + 1).unwrap();
    assert_eq!(old, 0, "rank {rank}: compare_and_swap saw {old}");
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    let left = (rank + p - 1) % p;
    assert_eq!(win.local_to_vec().unwrap(), vec![N as i64, left as i64 + 1]);
    let after = world.stats().transport;
    let (fadd, cswap) = (
        after.nic_fetch_add - before.nic_fetch_add,
        after.nic_compare_swap - before.nic_compare_swap,
    );
    eprintln!("rank {rank}: NIC fetch-add {fadd}, compare-and-swap {cswap} (native: {native})");
    if native {
        // The lock_all/unlock_all epoch needs none; each call is one.
        assert!(
            fadd >= N as u64,
            "rank {rank}: {fadd} NIC fetch-adds for {N} calls"
        );
        assert!(cswap >= 1, "rank {rank}: no NIC compare-and-swap");
    } else {
        assert_eq!((fadd, cswap), (0, 0));
    }
    win.free().unwrap();
}

/// The `FI_MR_LOCAL` paths of atomics (operands staged through registered
/// slots, per-operation registration of large and request buffers), forced on
/// tcp and shm so they run without RDMA hardware.
#[test]
fn mr_local_paths_work() {
    let env = [("ONESIDED_MR_LOCAL", "1")];
    for p in common::providers()
        .iter()
        .filter(|p| *p == "tcp" || *p == "shm")
    {
        for t in [
            "fetch_and_op_counter",
            "accumulate_every_op_every_type",
            "compare_and_swap_election_and_counter",
            "accumulate_large_counts",
        ] {
            common::run_variant(module_path!(), t, 2, p, &env);
        }
    }
}

/// The whole suite again on the software path (active messages applied by
/// the target's CPU atomics; tests/software_accumulate.rs checks that the
/// path is really taken), and once with `ONESIDED_ACCUMULATE=hardware`,
/// which these providers satisfy for every pair.
#[test]
fn software_path_runs_the_atomics_suite() {
    let tests = [
        "fetch_and_op_counter",
        "accumulate_every_op_every_type",
        "compare_and_swap_election_and_counter",
        "get_accumulate_read_and_swap",
        "accumulate_ordering",
        "accumulate_large_counts",
        "accumulate_errors",
    ];
    for p in common::providers() {
        for t in tests {
            common::run_variant(
                module_path!(),
                t,
                2,
                &p,
                &[("ONESIDED_ACCUMULATE", "software")],
            );
        }
        common::run_variant(
            module_path!(),
            "fetch_and_op_counter",
            2,
            &p,
            &[("ONESIDED_ACCUMULATE", "hardware")],
        );
    }
}
