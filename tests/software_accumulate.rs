//! Multi-process tests of the software accumulate path (active messages
//! applied by the target's CPU atomics). Every body forces
//! `ONESIDED_ACCUMULATE=software` before `World::init` (the providers here
//! run every pair in hardware, so the path is only taken when forced), and
//! checks through the counters that it was taken. tests/atomics.rs runs its
//! whole suite on this path too (`software_path_runs_the_atomics_suite`).

#[macro_use]
mod common;

use std::sync::{Arc, Mutex};

use onesided::transport::am::kind;
use onesided::{Assert, Error, LockType, NoOp, Op, Window, WindowInfo, World};

type Replies = Arc<Mutex<Vec<(u64, Result<Vec<u8>, String>)>>>;

fn software_world() -> World {
    std::env::set_var("ONESIDED_ACCUMULATE", "software");
    World::init().expect("init")
}

fn requests(world: &World) -> u64 {
    world.stats().active_messages.requests
}

// ---- sizes from 8 B to 8 MiB, accumulate and get_accumulate --------------

/// Each rank adds a pattern to its right neighbour's window with counts
/// from 1 to 1 Mi `i64` (8 B to 8 MiB), flushes, and reads it back with a
/// fetching `NO_OP` of the whole range; then checks its own window.
fn sizes() {
    let world = software_world();
    let (rank, p) = (world.rank(), world.size());
    let right = (rank + 1) % p;
    let left = (rank + p - 1) % p;
    const MAX: usize = 1 << 20;
    let mut win = Window::<i64>::allocate(&world, MAX).expect("allocate");
    let pat = |r: usize, i: usize| (i as i64 * 3 + r as i64 * 1_000_003) ^ 0x5555;
    let counts: Vec<usize> = (0..=20).map(|s| 1usize << s).collect();
    let before = requests(&world);
    win.lock_all().unwrap();
    for &n in &counts {
        // Element i gets one pattern value per count n > i.
        let data: Vec<i64> = (0..n).map(|i| pat(rank, i)).collect();
        win.accumulate(right, 0, &data, Op::Sum).unwrap();
    }
    win.flush(right).unwrap();
    let mut got = vec![0i64; MAX];
    win.get_accumulate(right, 0, &[], &mut got, NoOp).unwrap();
    let times = |i: usize| counts.iter().filter(|&&n| n > i).count() as i64;
    for (i, g) in got.iter().enumerate() {
        assert_eq!(*g, pat(rank, i) * times(i), "rank {right} element {i}");
    }
    // A fetching SUM of 8 MiB returns the same and doubles the pattern.
    let add: Vec<i64> = (0..MAX).map(|i| pat(rank, i) * times(i)).collect();
    let mut old = vec![0i64; MAX];
    win.get_accumulate(right, 0, &add, &mut old, Op::Sum)
        .unwrap();
    assert!(old == got, "fetched previous values differ");
    win.unlock_all().unwrap();
    // Segments of 4040 bytes: at least one request per segment (accumulates
    // of up to 256 bytes may share a batch instead, docs/op-table.md).
    let segs = |n: usize| (n * 8).div_ceil(4040);
    let big = counts.iter().filter(|&&n| n * 8 > 256);
    let want = big.map(|&n| segs(n)).sum::<usize>() + 2 * segs(MAX);
    assert!(
        requests(&world) - before >= want as u64,
        "{:?}",
        world.stats()
    );
    world.barrier().unwrap();
    let local = win.local_to_vec().unwrap();
    for (i, v) in local.iter().enumerate() {
        assert_eq!(*v, 2 * pat(left, i) * times(i), "local element {i}");
    }
    world.barrier().unwrap();
    win.free().unwrap();
    common::assert_transport_clean(&world);
}

// ---- one counter hammered by every rank, f64 in a fixed order -------------

const HITS: usize = 200;

fn counter() {
    let world = software_world();
    let (rank, p) = (world.rank(), world.size());
    let mut win = Window::<u64>::allocate(&world, 2).expect("allocate");
    win.lock_all().unwrap();
    let mut seen = Vec::new();
    for _ in 0..HITS {
        seen.push(win.fetch_and_op(0, 0, 1, Op::Sum).unwrap());
        win.accumulate(0, 1, &[3], Op::Sum).unwrap();
    }
    win.unlock_all().unwrap();
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "fetched values increase"
    );
    world.barrier().unwrap();
    if rank == 0 {
        assert_eq!(
            win.local_to_vec().unwrap(),
            vec![(p * HITS) as u64, (3 * p * HITS) as u64]
        );
    }
    world.barrier().unwrap();
    win.free().unwrap();

    // f64 SUM whose rounding depends on the order: rank k adds its values
    // in round k only, so the order of additions is fixed.
    let mut fw = Window::<f64>::allocate(&world, 1).expect("allocate");
    let vals = |r: usize| [1e16, 1.0 + r as f64 * 0.1, -1e16, 0.3];
    for k in 0..p {
        fw.lock(0, LockType::Exclusive, Assert::NONE).unwrap();
        if k == rank {
            for v in vals(rank) {
                fw.accumulate(0, 0, &[v], Op::Sum).unwrap();
            }
        }
        fw.unlock(0).unwrap();
        world.barrier().unwrap();
    }
    if rank == 0 {
        let mut want = 0.0f64;
        for r in 0..p {
            for v in vals(r) {
                want += v;
            }
        }
        let got = fw.local_to_vec().unwrap()[0];
        assert_eq!(got.to_bits(), want.to_bits(), "got {got}, want {want}");
    }
    world.barrier().unwrap();
    fw.free().unwrap();
}

// ---- flush and unlock make software updates visible ------------------------

/// After `flush` an RMA `get` (which knows nothing of messages) sees every
/// software update: the flush waited for the target's acknowledgements.
fn visibility() {
    let world = software_world();
    let (rank, p) = (world.rank(), world.size());
    let right = (rank + 1) % p;
    let mut win = Window::<i32>::allocate(&world, p * 64).expect("allocate");
    win.lock_all().unwrap();
    let mut v = [0i32; 64];
    for round in 1..=100 {
        let add: Vec<i32> = (0..64).map(|i| i + 1).collect();
        let req = win.raccumulate(right, rank * 64, add, Op::Sum).unwrap();
        req.wait().unwrap();
        win.flush(right).unwrap();
        win.get(right, rank * 64, &mut v).unwrap();
        for (i, x) in v.iter().enumerate() {
            assert_eq!(
                *x,
                round * (i as i32 + 1),
                "round {round} element {i} after flush"
            );
        }
    }
    win.unlock_all().unwrap();
    // unlock completes too: the next holder reads what the last one added.
    for _ in 0..20 {
        win.lock(0, LockType::Exclusive, Assert::NONE).unwrap();
        let mut before = [0i32];
        win.get(0, 0, &mut before).unwrap();
        win.accumulate(0, 0, &[1], Op::Sum).unwrap();
        win.unlock(0).unwrap();
        win.lock(0, LockType::Exclusive, Assert::NONE).unwrap();
        let mut after = [0i32];
        win.get(0, 0, &mut after).unwrap();
        win.unlock(0).unwrap();
        assert!(after[0] > before[0], "{} then {}", before[0], after[0]);
    }
    world.barrier().unwrap();
    if rank == 0 {
        assert_eq!(win.local_to_vec().unwrap()[0], 20 * p as i32);
    }
    world.barrier().unwrap();
    win.free().unwrap();
}

// ---- self-accumulates, hints, request-based, counters ----------------------

fn self_and_hints() {
    let world = software_world();
    let (rank, p) = (world.rank(), world.size());
    let info = WindowInfo::new()
        .accumulate_ordering("none")
        .unwrap()
        .accumulate_ops("same_op")
        .unwrap();
    assert!(WindowInfo::new().accumulate_ordering("rar,bogus").is_err());
    assert!(WindowInfo::new().accumulate_ordering("none,raw").is_err());
    assert!(WindowInfo::new().accumulate_ops("other").is_err());
    let mut win = Window::<u32>::allocate_with(&world, 4096, &info).expect("allocate");
    win.lock_all().unwrap();
    // lock_all's shared locks on ranks up to ours are taken by the first
    // access (messages on the software lock path): before counting.
    win.get(rank, 0, &mut [0u32]).unwrap();
    // Self-accumulates send nothing: the same CPU atomics run here.
    let before = world.stats().active_messages.requests;
    win.accumulate(rank, 0, &vec![2u32; 4096], Op::Sum).unwrap();
    let old = win.fetch_and_op(rank, 5, 7, Op::Replace).unwrap();
    assert_eq!(old, 2);
    assert_eq!(win.compare_and_swap(rank, 5, 7, 9).unwrap(), 7);
    assert_eq!(
        world.stats().active_messages.requests,
        before,
        "self sent messages"
    );
    world.barrier().unwrap();
    // Without ordering many raccumulates are in flight at once.
    let target = (rank + 1) % p;
    let reqs: Vec<_> = (0..50)
        .map(|_| {
            win.raccumulate(target, 100, vec![1u32; 2000], Op::Sum)
                .unwrap()
        })
        .collect();
    for r in reqs {
        r.wait().unwrap();
    }
    let r = win
        .rget_accumulate(target, 100, &[], vec![0u32; 2000], NoOp)
        .unwrap();
    win.flush(target).unwrap();
    let _ = r.wait().unwrap();
    let mut now = vec![0u32; 2000];
    win.get_accumulate(target, 100, &[], &mut now, NoOp)
        .unwrap();
    assert!(now.iter().all(|&x| x == 52), "{:?}", &now[..4]);
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    win.free().unwrap();
}

// ---- refused requests and paths that disagree -----------------------------

/// A software request the target must refuse (window freed / unknown,
/// offset out of range) fails at the origin and leaves memory untouched.
fn refused() {
    let world = software_world();
    let (rank, p) = (world.rank(), world.size());
    let right = (rank + 1) % p;
    let mut win = Window::<i64>::allocate(&world, 8).expect("allocate");
    win.local_write(0, &[7; 8]).unwrap();
    world.barrier().unwrap();
    let am = world.active_messages();
    let t = world.bench_transport();
    let got: Replies = Arc::default();
    let ask = |window: u64, offset: u64| {
        let mut m = Vec::new();
        m.extend_from_slice(&window.to_le_bytes());
        m.extend_from_slice(&offset.to_le_bytes());
        // Wire codes (`transport::vocab`): SUM = 0, i64 = 4.
        m.extend_from_slice(&0u32.to_le_bytes());
        m.extend_from_slice(&4u32.to_le_bytes());
        m.extend_from_slice(&1u32.to_le_bytes());
        m.extend_from_slice(&0u32.to_le_bytes());
        m.extend_from_slice(&5i64.to_le_bytes());
        let g = got.clone();
        am.request(
            t,
            right,
            kind::ACCUMULATE,
            &m,
            Box::new(move |r| {
                // Replies may come back in any order (handlers run on two
                // threads at the target): keep the request's offset.
                g.lock().unwrap().push((
                    window * 1000 + offset,
                    r.map(|b| b.to_vec()).map_err(|e| e.to_string()),
                ));
            }),
        )
        .unwrap();
    };
    ask(win.id(), 64); // just past the end
    ask(win.id(), 4); // misaligned
    ask(win.id() + 1000, 0); // no such window
    ask(win.id(), 0); // fine: +5
    let start = std::time::Instant::now();
    while got.lock().unwrap().len() < 4 {
        t.progress().unwrap();
        assert!(start.elapsed().as_secs() < 60, "no replies");
    }
    let mut g = got.lock().unwrap();
    g.sort_by_key(|(k, _)| *k);
    // Sorted: (id, 0) fine, (id, 4) misaligned, (id, 64) outside, unknown id.
    assert!(g[0].1.as_ref().unwrap().is_empty(), "{:?}", g[0]);
    for (i, why) in [(1, "aligned"), (2, "outside"), (3, "not open")] {
        let e = g[i].1.as_ref().unwrap_err();
        assert!(e.contains(why), "{e}");
    }
    drop(g);
    world.barrier().unwrap();
    assert_eq!(win.local_to_vec().unwrap(), vec![12, 7, 7, 7, 7, 7, 7, 7]);
    assert!(world.stats().active_messages.protocol_errors >= 3);
    world.barrier().unwrap();
    win.free().unwrap();
}

/// Rank 0 decides the software path, the others the provider path: the
/// first access in either direction is an error naming the flags, never a
/// silent mix of NIC and CPU atomics on one location.
fn disagree() {
    let rank0 = ["ONESIDED_RANK", "PMI_RANK"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|r| r == "0"));
    // Rank 0 runs every accumulate in software; the others put SUM on i64
    // on the back-end's atomics: `hardware` on libfabric (whose providers
    // here have every i64 atomic, emulated — `auto` would choose software
    // for them), `auto` with the `same_op` hint on native verbs (which has
    // SUM on i64 but lacks other i64 operations).
    let native = std::env::var("ONESIDED_BACKEND").is_ok_and(|b| b == "verbs");
    let mode = match (rank0, native) {
        (true, _) => "software",
        (false, true) => "auto",
        (false, false) => "hardware",
    };
    std::env::set_var("ONESIDED_ACCUMULATE", mode);
    let world = World::init().expect("init");
    let (rank, p) = (world.rank(), world.size());
    assert_eq!(rank == 0, rank0);
    if !world.transport_caps().atomics.offers(
        onesided::transport::AtomicOp::Sum,
        onesided::transport::Datatype::I64,
        onesided::transport::AtomicKind::Update,
    ) {
        // No provider atomics (libfabric's net): every rank takes the
        // software path, so there is nothing to mix. Same on every rank.
        eprintln!(
            "SKIPPED software_paths_disagree on {}: the provider has no atomics",
            world.provider()
        );
        world.barrier().unwrap();
        return;
    }
    let info = WindowInfo::new().accumulate_ops("same_op").unwrap();
    let mut win = Window::<i64>::allocate_with(&world, 4, &info).expect("allocate");
    win.lock_all().unwrap();
    let target = if rank == 0 { 1 } else { 0 };
    let e = win.accumulate(target, 0, &[1], Op::Sum).unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e}");
    assert!(e.to_string().contains("flags"), "{e}");
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    assert_eq!(
        win.local_to_vec().unwrap(),
        vec![0; 4],
        "rank {rank} of {p} was changed"
    );
    world.barrier().unwrap();
    win.free().unwrap();
}

// The software path only: with the direct path on an all-local job every
// accumulate is a CPU atomic instead (tests/shm.rs, and the direct jobs of
// tests/atomics.rs), so these provider-path counters would not move.
spmd_test!(
    software_sizes_8b_to_8mib,
    jobs = common::matrix_providers(&[2, 4]),
    sizes
);
spmd_test!(
    software_counter_and_ordered_f64,
    jobs = common::matrix_providers(&[2, 4]),
    counter
);
spmd_test!(
    software_flush_and_unlock_visibility,
    jobs = common::matrix_providers(&[2, 4]),
    visibility
);
spmd_test!(
    software_self_and_hints,
    jobs = common::matrix_providers(&[2, 4]),
    self_and_hints
);
spmd_test!(
    software_refused_requests,
    jobs = common::matrix_providers(&[2]),
    refused
);
spmd_test!(
    software_paths_disagree,
    jobs = common::matrix_providers(&[2, 3]),
    disagree
);
