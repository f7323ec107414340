//! Window creation is collective and agrees on everything: a rank that
//! cannot create its part makes the creation fail on every rank (with an
//! error, not a hang), and the next creation works again.

#[macro_use]
#[allow(unused_macros)]
mod common;

use onesided::{Window, World};

/// Rank 0 runs with room for one window only (`ONESIDED_MAX_WINDOWS=1`):
/// its second creation fails locally, the others learn it from the
/// creation's allreduce.
fn one_rank_fails() {
    let rank0 = ["ONESIDED_RANK", "PMI_RANK"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|r| r == "0"));
    if rank0 {
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
