//! Window creation is collective and agrees on everything: a rank that
//! cannot create its part makes the creation fail on every rank (with an
//! error, not a hang), and the next creation works again.

#[macro_use]
#[allow(unused_macros)]
mod common;

use std::sync::atomic::Ordering;

use onesided::{
    Assert, ErrorKind, Flavor, LockType, MemoryModel, Op, Window, WindowInfo, World, INFO_KEYS,
};

/// Rank 0 runs with room for one window only (`ONESIDED_MAX_WINDOWS=1`):
/// its second creation fails locally, the others learn it from the
/// creation's allreduce.
fn one_rank_fails() {
    // The launcher's rank variable, before World::init.
    if common::launcher_rank() == Some(0) {
        std::env::set_var("ONESIDED_MAX_WINDOWS", "1");
    }
    let world = World::init().expect("init");
    let rank = world.rank();
    let mut first = Window::<u64>::allocate(&world, 4).expect("first window");
    let e = match Window::<u64>::allocate(&world, 4) {
        Ok(_) => panic!("rank {rank}: the second window was created"),
        Err(e) => e.to_string(),
    };
    if rank == 0 {
        assert!(e.contains("ONESIDED_MAX_WINDOWS"), "{e}");
    } else {
        assert!(e.contains("failed on another rank"), "{e}");
    }
    // Rank 0 asks for a size that overflows: it fails before it has
    // memory, and still tells the others.
    let len = if rank == 0 { usize::MAX / 4 } else { 4 };
    let e = match Window::<u64>::allocate(&world, len) {
        Ok(_) => panic!("rank {rank}: the overflowing window was created"),
        Err(e) => e.to_string(),
    };
    let want = if rank == 0 {
        "overflows"
    } else {
        "failed on another rank"
    };
    assert!(e.contains(want), "rank {rank}: {e}");
    first.free().unwrap();
    // Slots agree again: a window works end to end.
    let mut w = Window::<u64>::allocate(&world, 4).expect("window after the failure");
    let n = world.size();
    w.lock_all().unwrap();
    w.put((rank + 1) % n, 0, &[rank as u64 + 10]).unwrap();
    w.unlock_all().unwrap();
    world.barrier().unwrap();
    assert_eq!(
        w.local_to_vec().unwrap()[0],
        ((rank + n - 1) % n) as u64 + 10
    );
    world.barrier().unwrap();
    w.free().unwrap();
}

// Provider jobs only: with the direct path, peers map rank 0's control
// region at the size their own ONESIDED_MAX_WINDOWS gives.
spmd_test!(
    creation_fails_everywhere_when_one_rank_fails,
    jobs = common::matrix_one_provider(&[2, 4]),
    one_rank_fails
);

/// Hints and attributes: `Window::info` returns the hints in effect
/// (`same_size` as found), `no_locks` refuses lock and lock_all with an
/// epoch error and opens no lock queue while fences still work, the
/// `same_size` hint with unequal lengths is an error on every rank and the
/// next creation works, `len_of` reports each peer's length.
fn hints_and_attributes() {
    let world = World::init().unwrap();
    hints_and_attributes_on(&world);
}

fn hints_and_attributes_on(world: &World) {
    let (me, p) = (world.rank(), world.size());
    let right = (me + 1) % p;

    let info = WindowInfo::new()
        .set("no_locks", "true")
        .unwrap()
        .set("accumulate_ordering", "none")
        .unwrap();
    let mut win = Window::<u32>::allocate_with(world, 16, &info).unwrap();
    let got = win.info();
    assert!(got.locks_disabled() && got.sizes_equal(), "{got:?}");
    assert_eq!(got.get("accumulate_ordering").as_deref(), Some("none"));
    assert_eq!(got.get("same_disp_unit").as_deref(), Some("true"));
    for key in INFO_KEYS {
        assert!(got.get(key).is_some(), "{key}");
    }
    assert_eq!(win.memory_model(), MemoryModel::Unified);
    assert_eq!(win.disp_unit(), 4);
    assert!(!win.stats().lock_queue, "no_locks opened a lock queue");
    let e = win
        .lock(right, LockType::Exclusive, Assert::NONE)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EpochMisuse, "{e}");
    assert!(e.to_string().contains("no_locks"), "{e}");
    let e = win.lock_all().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::EpochMisuse, "{e}");
    // Active target still works, every byte checked.
    win.fence(Assert::NONE).unwrap();
    win.put(right, 3, &[me as u32 + 100, 7]).unwrap();
    win.fence(Assert::NONE).unwrap();
    let left = (me + p - 1) % p;
    let v = win.local_to_vec().unwrap();
    assert_eq!(&v[3..5], &[left as u32 + 100, 7]);
    win.fence(Assert::NOSUCCEED).unwrap();
    win.free().unwrap();

    // Unequal lengths: same_size as found is false; len_of reads them.
    let mut win = Window::<u64>::allocate(world, 10 + me).unwrap();
    assert_eq!(win.info().sizes_equal(), p == 1);
    assert!(!win.info().locks_disabled());
    for r in 0..p {
        assert_eq!(win.len_of(r).unwrap(), 10 + r, "len_of({r})");
    }
    assert_eq!(
        win.len_of(p).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    win.free().unwrap();

    // The same_size hint with unequal lengths fails everywhere.
    let hint = WindowInfo::new().same_size(true);
    let r = Window::<u8>::allocate_with(world, 8 + me, &hint);
    if p > 1 {
        let e = r.expect_err("same_size with unequal lengths must fail");
        assert!(e.to_string().contains("same_size"), "{e}");
    } else {
        r.unwrap().free().unwrap();
    }
    // ... and the next creation works.
    let mut win = Window::<u8>::allocate_with(world, 8, &hint).unwrap();
    assert!(win.info().sizes_equal());
    assert_eq!(win.len_of(right).unwrap(), 8);
    win.free().unwrap();

    // MPI_Win_get_attr: flavor, base and size of every kind of window.
    let mut win = Window::<u64>::allocate(world, 5).unwrap();
    assert_eq!(win.flavor(), Flavor::Allocate);
    assert!(!win.base().is_null() && win.base().is_aligned());
    assert_eq!(win.size_bytes(), 40);
    win.free().unwrap();
    let win = Window::create(world, vec![me as u16; 3]).unwrap();
    assert_eq!(win.flavor(), Flavor::Create);
    assert!(!win.base().is_null());
    assert_eq!(win.size_bytes(), 6);
    assert_eq!(win.into_vec().unwrap(), vec![me as u16; 3]);
    let mut win = Window::<u32>::create_dynamic(world).unwrap();
    assert_eq!(win.flavor(), Flavor::Dynamic);
    assert!(
        win.base().is_null(),
        "a dynamic window's base is MPI_BOTTOM"
    );
    assert_eq!(win.size_bytes(), 0);
    win.free().unwrap();
    let mut win = Window::<u64>::allocate_shared(world, 4).unwrap();
    assert_eq!(win.flavor(), Flavor::Shared);
    assert_eq!(
        win.base(),
        win.shared_query(me).unwrap().as_ptr().cast_const()
    );
    win.free().unwrap();
    world.barrier().unwrap();
}

spmd_test!(
    hints_and_attributes_in_effect,
    &[1, 2, 3],
    hints_and_attributes
);

in_process_test!(
    in_process_hints_and_attributes,
    &[1, 2, 3],
    hints_and_attributes_on
);

/// Atomic views of one's own window (`Window::atomic`, `atomic_slice`):
/// while every peer adds 1 to rank 0's counter 300 times with software-path
/// accumulates (`ONESIDED_ACCUMULATE=software`: the target's CPU applies
/// them; on the direct path the origin's CPU), rank 0 adds 1 300 times
/// through its view; the counter ends at exactly 300 × P (a lost update on
/// either side shows). Views of several elements read what peers put;
/// the errors (out of the window, a dynamic window) leave the window
/// usable.
fn atomic_views() {
    // Before World::init: only this process reads it (each rank is its own
    // test process).
    std::env::set_var("ONESIDED_ACCUMULATE", "software");
    let world = World::init().unwrap();
    atomic_views_on(&world);
}

fn atomic_views_on(world: &World) {
    let (me, p) = (world.rank(), world.size());
    const N: u64 = 300;
    let mut win = Window::<u64>::allocate(world, 8).unwrap();
    win.lock_all().unwrap();
    world.barrier().unwrap();
    if me == 0 {
        let c = win.atomic(0).unwrap();
        for _ in 0..N {
            c.fetch_add(1, Ordering::Relaxed);
        }
    } else {
        for _ in 0..N {
            win.accumulate(0, 0, &[1], Op::Sum).unwrap();
        }
        win.flush(0).unwrap();
        // Every element of rank 0's 2..8 from the last rank, by put.
        if me == p - 1 {
            win.put(0, 2, &[7, 8, 9, 10, 11, 12]).unwrap();
            win.flush(0).unwrap();
        }
    }
    win.unlock_all().unwrap();
    world.barrier().unwrap();
    if me == 0 {
        assert_eq!(win.atomic(0).unwrap().load(Ordering::Relaxed), N * p as u64);
        let cells = win.atomic_slice(2, 6).unwrap();
        let got: Vec<u64> = cells.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let want: Vec<u64> = if p > 1 {
            vec![7, 8, 9, 10, 11, 12]
        } else {
            vec![0; 6]
        };
        assert_eq!(got, want);
    }
    let e = win.atomic_slice(4, 5).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfWindow, "{e}");
    assert_eq!(win.atomic(8).unwrap_err().kind(), ErrorKind::OutOfWindow);
    assert_eq!(win.atomic_slice(8, 0).unwrap().len(), 0);
    // A store through the view is what local_read and peers' gets see.
    win.atomic(1)
        .unwrap()
        .store(40 + me as u64, Ordering::Relaxed);
    win.fence(Assert::NONE).unwrap();
    let mut got = [0u64];
    win.get((me + 1) % p, 1, &mut got).unwrap();
    win.fence(Assert::NONE).unwrap();
    assert_eq!(got[0], 40 + ((me + 1) % p) as u64);
    win.free().unwrap();

    let mut dynamic = Window::<u32>::create_dynamic(world).unwrap();
    let e = dynamic.atomic(0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    dynamic.free().unwrap();
    world.barrier().unwrap();
}

spmd_test!(atomic_views_of_own_window, &[1, 3], atomic_views);

in_process_test!(
    in_process_atomic_views_of_own_window,
    &[1, 3],
    atomic_views_on,
    configure = |c| c.accumulate = onesided::config::AccumulateMode::Software
);
